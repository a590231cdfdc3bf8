"""Simulate a measured run as it ran: its slice, batch, replicas, optimizer, flags.

The one place that turns a :class:`~wus_sim.validation.measured.MeasuredRun` into
step options, so that ``wus-sim validate`` and ``wus-sim calibrate`` simulate the
rows identically.
"""

from ..model.calibration import load_calibration
from ..inputs.errors import ConfigError, UnknownNameError, WusError
from ..training.parameters.params import default_of
from ..training.step import StepOptions, simulate_strategies
from ..hardware.topology_files import load_topology
from .measured import COLUMNS, run_key, software_stack

__all__ = ["NOT_EXPRESSIBLE", "TENSOR_PARALLEL", "NOT_FITTED", "NETWORK_DEFAULTS", "run_options", "simulate_run",
           "run_topology", "strategy_of"]

NETWORK_DEFAULTS = {"algorithm": default_of("algorithm"), "bidirectional": default_of("bidirectional"),
                    "small_allreduce_algorithm": default_of("small_allreduce_algorithm"),
                    "routing": default_of("routing")}
"""Collective algorithms the validation runs: the shipped step defaults (``2d``, both
ring directions on slices whose every axis wraps; the fastest algorithm for each
latency-bound all-reduce; store-and-forward routing; see docs/validation.md, "Defaults from evidence")."""


NOT_EXPRESSIBLE = {}
"""Rows whose program the simulator cannot express, and why: shown by ``validate``, never fitted
(none left: the v0.7 Transformer's model parallelism runs as a mesh, :data:`TENSOR_PARALLEL`)."""

TENSOR_PARALLEL = {
    "v0.7:transformer/tpu-v3-8192/tf1": 4,
}
"""Rows that split each layer over a replica's cores, and how many ways: they run on the mesh
``data = replicas, tensor = ways`` (:func:`wus_sim.training.parallelism.mesh_step.simulate_mesh`). Lingvo's
v0.7 Transformer run sets ``XLA_NUM_PARTITIONS=4`` (its run_and_time.sh in
github.com/mlcommons/training_results_v0.7, Google/benchmarks/transformer): XLA's SPMD
partitioner splits each layer's weights over the 4 cores of a replica (Xu et al. 2021, GSPMD,
arXiv 2105.04663), which the mesh's tensor axis models Megatron-LM's way."""

NOT_FITTED = frozenset(NOT_EXPRESSIBLE) | frozenset(TENSOR_PARALLEL)
"""Rows no calibration is fitted to: those the simulator cannot express, and the tensor-parallel
ones, which the shipped calibration was fitted without (it predates their mesh; fitting them is a
new calibration's decision, not a side effect of expressing them). They are still checked."""


def strategy_of(run):
    """The update strategy a run used: the table's, and sharded where the logs do not say
    (Xu et al. 2020 and Kumar et al. 2019 state that Google's MLPerf v0.6 submission
    sharded the weight update)."""
    return "replicated" if run.update == "replicated" else "sharded"


def run_options(run, calibration=None, *, compute=None, network=None):
    """:class:`StepOptions` of *run*: its gradient dtype and batch-norm groups, the network
    defaults (or *network*), *calibration*'s parameters (or *compute* as given)."""
    cal = load_calibration(calibration)
    net = {**NETWORK_DEFAULTS, **(network or {})}
    bn_cores = run.bn_group_cores or 1
    stack = software_stack(run)
    if compute is None:
        compute = cal.compute_params(stack=stack if stack in cal.stacks else None)
    return StepOptions(
        steps_per_loop=max(1, run.steps_per_loop),
        algorithm=net["algorithm"], bidirectional=net["bidirectional"],
        small_allreduce_algorithm=net["small_allreduce_algorithm"], routing=net["routing"],
        grad_dtype=run.grad_allreduce_dtype or None,
        bn_group_replicas=max(1, int(bn_cores) // run.spatial_ways),
        calibration=cal, compute=compute,
    )


def simulate_run(run, calibration=None, *, compute=None, network=None, topology=None):
    """The simulated :class:`~wus_sim.training.step.StepResult` of *run* (the strategy it used).

    A row the simulator cannot take (an unknown workload, topology or optimizer name in a
    table of your own, replicas that do not fit the slice) is a
    :class:`~wus_sim.inputs.errors.ConfigError` that names the row."""
    try:
        options = run_options(run, calibration, compute=compute, network=network)
        strategy = strategy_of(run)
        ways = TENSOR_PARALLEL.get(run_key(run))
        if ways:
            from ..training.parallelism.mesh_step import simulate_mesh

            return simulate_mesh(run.workload, topology or run.topology, run.optimizer, (strategy,),
                                 mesh={"data": run.replicas, "tensor": ways}, per_replica_batch=run.per_replica_batch,
                                 options=options).results[strategy]
        return simulate_strategies(run.workload, topology or run.topology, run.optimizer, (strategy,),
                                   per_replica_batch=run.per_replica_batch, replicas=run.replicas,
                                   options=options).results[strategy]
    except WusError as exc:
        if isinstance(exc, ConfigError) and exc.key_path and exc.key_path.startswith("calibration"):
            raise  # the calibration's own error, not the row's
        raise row_error(run, exc) from None


def run_topology(run, overrides=None):
    """The slice *run* ran on, with *overrides* (validation's network choices); a name the
    simulator does not know is the row's error (:func:`row_error`)."""
    try:
        return load_topology(run.topology, **(overrides or {}))
    except WusError as exc:
        raise row_error(run, exc) from None


def row_error(run, exc):
    """A one-line :class:`ConfigError` for a row the simulator cannot take: the file, line and
    column it was read from (a table of your own may hold hundreds of rows), the row's
    ``benchmark/topology``, and the simulator's reason."""
    column = None
    if isinstance(exc, UnknownNameError) and exc.kind in COLUMNS:
        column = exc.kind                       # unknown workload, topology or optimizer name
    elif isinstance(exc, ConfigError) and exc.key_path in COLUMNS:
        column = exc.key_path                   # e.g. replicas that do not fit the slice
    row = f"measured row {run.benchmark}/{run.topology}"
    if run.origin is None:                      # built in code, not read from a table
        return ConfigError(f"cannot be simulated: {exc}", key_path=row, show_value=False)
    file, line = run.origin
    return ConfigError(f"{row} cannot be simulated: {exc}", file=file,
                       key_path=f"line {line}" + (f".{column}" if column else ""), show_value=False)
