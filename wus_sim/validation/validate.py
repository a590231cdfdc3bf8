"""Measured vs simulated step time, for every row of the measured table.

:func:`validate` simulates each run of :func:`~wus_sim.validation.measured.load_measured`
with the shipped defaults (or the calibration given) and returns one
:class:`ValidationRow` per run: the error, whether the row was used to fit the
calibration (``role``), and for ``bound`` rows (eval inside the measured
interval) whether the simulation stays within the bound. :func:`summary` gives
the figures docs/validation.md states: held-out median and worst |error| over the
training-only rows, and every bound checked.
"""

from dataclasses import asdict, dataclass
import math

from ..model.calibration import load_calibration
from ..training.timeline.timeline import BREAKDOWN_PARTS
from .measured import load_measured, run_key, same_table, software_stack, table_identity
from .simulate import NOT_EXPRESSIBLE, run_topology, simulate_run, strategy_of

__all__ = ["ValidationRow", "validate", "summary", "row_key", "COLUMNS"]


def row_key(run):
    """How calibration files name the rows they were fitted to (:func:`~wus_sim.validation.measured.run_key`)."""
    return run_key(run)


@dataclass(frozen=True)
class ValidationRow:
    """One measured run and its simulation (the ``--json`` row of ``wus-sim validate``)."""

    benchmark: str
    workload: str
    topology: str
    cores: int
    chips: int
    replicas: int
    spatial_ways: int
    per_replica_batch: int
    global_batch: int
    optimizer: str
    strategy: str
    """Update the simulation ran: the one the run used (sharded where the logs do not say)."""
    kind: str
    """``exact`` (training-only measured time) or ``bound`` (an upper bound: eval inside)."""
    role: str
    """``calibration`` (fitted to) or ``held-out`` (never seen by the fit)."""
    measured_step_s: float
    simulated_step_s: float
    error: float
    """(simulated - measured) / measured."""
    within_bound: object
    """``bound`` rows: simulated <= measured; ``None`` for exact rows."""
    measured_examples_per_s_per_chip: float
    simulated_examples_per_s_per_chip: float
    simulated_overhead_s: float
    """Where the simulated step goes, seconds: this and the nine fields after it are the parts
    of :data:`wus_sim.training.timeline.timeline.BREAKDOWN_PARTS`, adding up to ``simulated_step_s``.
    ``simulated_overhead_s`` is the fixed cost per step no part of the model explains (the
    software stack's, fitted); the explained fixed costs are the two that follow."""
    simulated_host_loop_s: float
    """The step's share of the host round trip per device loop (``host_loop_s / steps_per_loop``)."""
    simulated_op_launch_s: float
    """The fixed cost of every op the step runs (``op_overhead_s`` x forward, backward and update ops)."""
    simulated_fwd_s: float
    simulated_bwd_s: float
    simulated_batch_norm_s: float
    simulated_update_s: float
    simulated_exposed_comm_s: float
    simulated_extra_reduction_s: float
    simulated_idle_s: float
    calibration: str
    """Id of the calibration the simulation used."""
    round: str = ""
    """MLPerf round of the measured run (``v0.6``, ``v0.7``; empty in a table that does not say)."""
    framework: str = ""
    """Framework of the run where the table says (``tf1``, ``tf2``, ``jax``)."""
    software_stack: str = ""
    """Software stack the run ran on, whose fitted fixed cost per step the simulation applied."""
    error_leave_one_benchmark_out: object = None
    """The error of this row's simulation by a fit that never saw its benchmark (every row of the
    same workload left out), from the calibration's ``provenance.leave_one_benchmark_out``;
    ``None`` for bound rows and where the calibration records none."""
    not_expressible: str = ""
    """Why the simulator cannot express this run's program (:data:`~wus_sim.validation.simulate.NOT_EXPRESSIBLE`);
    such a row is shown but counts in no summary and is never fitted. Empty for every other row."""
    method: str = ""
    """How the measured time was derived from the logs (from the table)."""


COLUMNS = tuple(ValidationRow.__dataclass_fields__)
"""Columns of validation.csv, in order (the fields of :class:`ValidationRow`)."""


def validate(calibration=None, *, runs=None, measured=None, network=None, topology_overrides=None):
    """One :class:`ValidationRow` per measured run: of the table at *measured* (the shipped
    one by default), or the runs *runs* of it.

    A row is a ``calibration`` row when the calibration was fitted to it: its key is in the
    calibration's ``provenance.rows`` and the calibration was fitted to this table (the same
    file, by SHA-256, or the shipped one); every other row is ``held-out``.

    *network* overrides the collective algorithm and direction
    (:data:`~wus_sim.validation.simulate.NETWORK_DEFAULTS`); *topology_overrides*
    (``link_GBps``, ``hop_latency_us``, ``wraparound``) every slice's figures, to
    compare the fit under disputed choices.
    """
    from ..inputs.errors import ConfigError
    from .measured import MeasuredRun

    if runs is not None and (isinstance(runs, (str, bytes)) or not isinstance(runs, (list, tuple))
                             or not all(isinstance(r, MeasuredRun) for r in runs)):
        raise ConfigError("must be a list of measured runs (wus_sim.validation.measured.load_measured() gives them) "
                          "or None", key_path="runs", value=runs)
    cal = load_calibration(calibration)
    same = same_table(cal.provenance.get("data"), table_identity(measured))
    fitted = set(cal.provenance.get("rows", []) or []) if same else set()
    lobo = (cal.provenance.get("leave_one_benchmark_out") or {}).get("per_row", {}) if same else {}
    rows = []
    for run in (load_measured(measured) if runs is None else runs):
        topology = run_topology(run, topology_overrides)
        result = simulate_run(run, cal, network=network, topology=topology)
        sim = result.step_time_s
        chips = topology.num_chips
        bound = run.kind == "bound"
        rows.append(ValidationRow(
            benchmark=run.benchmark, workload=run.workload, topology=run.topology, cores=run.cores, chips=chips,
            replicas=run.replicas, spatial_ways=run.spatial_ways, per_replica_batch=run.per_replica_batch,
            global_batch=run.global_batch, optimizer=run.optimizer, strategy=strategy_of(run), kind=run.kind,
            role="calibration" if row_key(run) in fitted else "held-out",
            measured_step_s=run.measured_step_s, simulated_step_s=sim,
            error=(sim - run.measured_step_s) / run.measured_step_s,
            within_bound=(sim <= run.measured_step_s) if bound else None,
            measured_examples_per_s_per_chip=run.global_batch / run.measured_step_s / chips,
            simulated_examples_per_s_per_chip=run.global_batch / sim / chips if sim > 0 else math.nan,
            **_parts(result.breakdown),
            calibration=cal.id, method=run.method, round=run.round, framework=run.framework,
            software_stack=software_stack(run),
            error_leave_one_benchmark_out=None if bound else lobo.get(row_key(run)),
            not_expressible=NOT_EXPRESSIBLE.get(row_key(run), ""),
        ))
    return rows


def _parts(breakdown):
    """The ``simulated_*`` columns of a row: the step's parts, a tensor-parallel row's wait on its
    layers' collectives (``tensor_comm_s``, ``expert_comm_s``, ``context_comm_s``, :data:`~wus_sim.training.parallelism.mesh_step.MESH_PARTS`) counted
    in ``exposed_comm_s``: time the core waits on collectives, so the columns still add up."""
    parts = {f"simulated_{part}": float(breakdown.get(part, math.nan)) for part in BREAKDOWN_PARTS
             if part != "host_offload_s"}
    # a wait on host transfers (an offloading remat_policy; 0 in every measured run) is a transfer too
    parts["simulated_exposed_comm_s"] += float(breakdown.get("tensor_comm_s", 0.0)) + float(
        breakdown.get("expert_comm_s", 0.0)) + float(breakdown.get("context_comm_s", 0.0)) + float(
        breakdown.get("host_offload_s", 0.0)) + float(breakdown.get("pipeline_comm_s", 0.0))
    parts["simulated_idle_s"] += float(breakdown.get("pipeline_bubble_s", 0.0))  # a stage waiting in the bubble
    return parts


def summary(rows):
    """Headline figures: |error| of held-out exact rows (median, worst), of calibration
    rows, and the bound rows' verdicts."""
    def stats(errors):
        errors = sorted(abs(e) for e in errors)
        if not errors:
            return {"rows": 0, "median_abs_error": math.nan, "worst_abs_error": math.nan}
        n = len(errors)
        median = errors[n // 2] if n % 2 else (errors[n // 2 - 1] + errors[n // 2]) / 2
        return {"rows": n, "median_abs_error": median, "worst_abs_error": errors[-1]}

    rows = [r for r in rows if not r.not_expressible]
    exact = [r for r in rows if r.kind == "exact"]
    bounds = [r for r in rows if r.kind == "bound"]
    return {
        "held_out": stats(r.error for r in exact if r.role == "held-out"),
        "calibration": stats(r.error for r in exact if r.role == "calibration"),
        "rms_log": math.sqrt(sum(math.log1p(r.error) ** 2 for r in exact) / len(exact)) if exact else math.nan,
        "leave_one_benchmark_out": stats(r.error_leave_one_benchmark_out for r in exact
                                         if r.error_leave_one_benchmark_out is not None),
        "bounds": {"rows": len(bounds), "within": sum(bool(r.within_bound) for r in bounds),
                   "violations": [row_key(r) for r in bounds if not r.within_bound]},
        "calibration_id": rows[0].calibration if rows else None,
    }


def as_dicts(rows):
    return [asdict(r) for r in rows]
