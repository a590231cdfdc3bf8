"""One training step, replicated, sharded or fully-sharded weight update: build it, simulate it, report it.

:func:`simulate_step` turns a workload, a topology and an optimizer into a
:class:`~wus_sim.training.timeline.timeline.StepProgram` whose every duration is derived:

* forward/backward per layer from the layers' FLOPs and the replica's matrix
  unit (:mod:`wus_sim.model.compute`);
* gradient collectives per fused bucket, their sizes from the plan
  (:mod:`wus_sim.training.update.planner`, :mod:`wus_sim.training.update.strategies`) and their times from the
  collective engine over every replica and link of the slice
  (:func:`wus_sim.collectives.collective_time`);
* the update from the optimizer analysis (bytes and flops per element) on the
  HBM-bound vector unit, over all weights (replicated) or the 1/N shard (sharded);
* the optimizer's small cross-replica all-reduces and the weight all-gathers
  (sharded: after the update; fully-sharded: before each bucket's forward and backward);

then runs it for a few consecutive steps on the SimPy timeline
(:mod:`wus_sim.training.timeline.timeline`) and reports the steady-state step time, its
breakdown and the per-replica memory. :func:`simulate_point` is the same for
one point of an experiment sweep, as flat records.
"""

from dataclasses import dataclass, field, fields
import math

from ..model.calibration import load_calibration
from ..model.compute import ComputeParams, memory_bound_time_s
from ..inputs.errors import ConfigError, InfeasibleError, UnknownNameError, did_you_mean
from ..inputs.memo import IdentityMemo
from ..model.layer_stack import check_remat_policy, host_offload_parts, layer_times_under, moe_device_view
from ..model.memory import memory_breakdown, resolve_gather_prefetch
from ..hardware.mesh import CUSTOM_MESHES
from ..hardware.multislice import hierarchical_time, load_multislice, planning_topology
from ..hardware.network import check_routing
from .parameters.params import POINT_KEYS, STRATEGY_CHOICES, STRATEGY_SETS, check_point_value, default_of
from .update.planner import DEFAULT_BUCKET_BYTES, plan as make_plan
from .small_allreduce import batch_norm_allreduce_s, small_allreduce_s  # noqa: F401 (cli step's)
from .step_prefetch import bidirectional_for, bucket_gathers as _bucket_gathers, prefetch_collectives
from .speedups import fully_sharded_over_sharded, speedup, speedups, speedups_if_replicated_fit  # noqa: F401 (API)
from .update.strategies import BOTH, STRATEGIES, step_work, strategy_names  # noqa: F401 (mesh_step's)
from .timeline.timeline import BREAKDOWN_PARTS, TimelineBucket, StepProgram, run_timeline
from ..inputs.units import MiB, format_bytes, format_time, grad_dtype_bytes
from .step_run import StepRun
from ..model.workload import resolve_batch, resolve_replicas
from ..model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too

__all__ = ["StepOptions", "StepResult", "StepRun", "simulate_step", "simulate_strategies", "speedup", "step_layer_times",
           "speedups", "strategies_named", "speedups_if_replicated_fit", "fully_sharded_over_sharded",
           "op_counts"]


@dataclass(frozen=True)
class StepOptions:
    """How the step runs: collective algorithm, overlap and fusion options."""

    algorithm: str = default_of("algorithm")
    """Collective algorithm of gradient reductions and weight all-gathers."""
    bidirectional: bool = default_of("bidirectional")
    """Run each ring phase in both directions at once, half the data each way. ``None``
    (the default) = yes for ring algorithms: TPU all-reduces use both directions of
    every ICI link (Ying et al. 2018, "Image Classification at Supercomputer Scale",
    arXiv 1811.06992). A mesh axis keeps its one folded ring either way (it already runs
    over both directions of each link; see :mod:`wus_sim.collectives.schedules.plan`), so on a
    partial torus only the wrapped axes gain a second ring."""
    routing: str = default_of("routing")
    """Network routing, ``"store-and-forward"`` or ``"cut-through"`` (see :mod:`wus_sim.hardware.network`)."""
    overlap_grad_reduce: bool = default_of("overlap_grad_reduce")
    """Start a bucket's gradient collective as soon as backward has produced it."""
    overlap_all_gather: bool = default_of("overlap_all_gather")
    """Sharded: overlap the weight all-gather with the next step's forward."""
    grad_dtype: str = default_of("grad_dtype")
    """``'fp32'`` or ``'bf16'`` gradients on the wire; ``None`` = the workload's."""
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    """Gradient fusion threshold, bytes."""
    steps: int = default_of("steps")
    """Consecutive steps simulated (the step time is the steady-state period)."""
    steps_per_loop: int = default_of("steps_per_loop")
    """Training steps per device loop: each pays ``host_loop_s / steps_per_loop`` of the host's
    round trip (:class:`~wus_sim.model.compute.ComputeParams`)."""
    software_stack: str = default_of("software_stack")
    """The software stack whose fitted fixed cost per step the calibration applies; ``None`` =
    the calibration's default stack (ignored when :attr:`compute` is given)."""
    gather_prefetch: int = default_of("gather_prefetch")
    """Fully-sharded: buckets whose weight all-gather may run ahead of the compute (0 = each
    gather is issued when its bucket is needed); each step of depth holds one more bucket of full
    weights (:mod:`wus_sim.model.memory`). ``None`` (the default) = a layer ahead, as PyTorch FSDP
    prefetches the next module (:func:`~wus_sim.model.memory.layer_ahead_prefetch`)."""
    keep_gathered_weights: bool = default_of("keep_gathered_weights")
    """Fully-sharded: keep each bucket's gathered weights from its forward to its backward (one
    all-gather per bucket instead of two; every bucket's full weights live at the end of forward)."""
    bn_group_replicas: int = default_of("bn_group_replicas")
    """Cross-replica batch norm: replicas whose batch statistics are all-reduced together
    in every batch-norm layer, forward and backward (1 = local batch norm). MLPerf v0.6
    ResNet-50 on v3-2048 used groups of 8 cores (its ``model_bn_span`` / per-core batch)."""
    small_allreduce_algorithm: str = default_of("small_allreduce_algorithm")
    """Algorithm of the latency-bound all-reduces: batch-norm statistics and the LARS/LAMB
    norms of sharded weights (see :func:`small_allreduce`). ``'auto'`` (the default) takes
    the fastest candidate as simulated; an algorithm name takes that one always."""
    remat: str = default_of("remat")
    """Rematerialisation policy (:data:`wus_sim.model.workload.REMAT_MODES`): what activations backward
    keeps, and whether it recomputes forward first."""
    remat_policy: str = default_of("remat_policy")
    """MaxText's remat policy by name (:data:`wus_sim.model.layer_stack.REMAT_POLICIES`), or ``None``:
    :attr:`remat` decides. Not with a :attr:`remat` other than ``'none'``."""
    collective_matmul: bool = default_of("collective_matmul")
    """Mesh step: tensor-parallel collectives overlap the matmuls they feed or follow, decomposed
    (:mod:`wus_sim.training.parallelism.mesh_step`); False: each on the critical path, whole."""
    capacity_factor: float = default_of("capacity_factor")
    """Mixture of experts: MaxText's ``capacity_factor`` (<= 0 dropless, the default; > 0 each expert's
    buffer is its even share x it: :mod:`wus_sim.model.ops.experts`)."""
    expert_load_imbalance: float = default_of("expert_load_imbalance")
    """Mixture of experts with an expert axis, dropless: the busiest expert's tokens over its even
    share (1 = even routing; :func:`wus_sim.model.ops.experts.busiest_device_share`)."""
    pipeline_microbatches: int = default_of("pipeline_microbatches")
    """Device mesh with a pipeline axis: MaxText's ``num_pipeline_microbatches`` (``None``: the stages)."""
    pipeline_layers_per_stage: int = default_of("pipeline_layers_per_stage")
    """Circular pipeline: MaxText's ``num_layers_per_pipeline_stage`` (the repeats follow from it)."""
    pipeline_schedule: str = default_of("pipeline_schedule")
    """The pipeline schedule (:data:`wus_sim.training.parallelism.pipeline_parallel.SCHEDULES`)."""
    quantization: str = default_of("quantization")
    """Matmul precision (:data:`wus_sim.model.ops.precision.QUANTIZATIONS`): ``int8`` runs the weight
    matmuls at the chip's int8 peak."""
    activation_model: str = default_of("activation_model")
    """How activation memory is counted (:data:`wus_sim.model.activations.ACTIVATION_MODELS`)."""
    shard_across_slices: bool = default_of("shard_across_slices")
    """Multislice, sharded update: shard over every replica of every slice (the DCN carries a
    reduce-scatter and an all-gather), or, False, within each slice only (the DCN carries an
    all-reduce; every slice updates its copy). See :mod:`wus_sim.hardware.multislice`."""
    custom_mesh: str = None
    """Mesh step: MaxText's ``custom_mesh`` ring layout of the mesh in each slice (a name of
    :data:`wus_sim.hardware.mesh.CUSTOM_MESHES`, set by a MaxText run's key); ``None``: JAX's."""
    calibration: object = None
    """Calibration name, path or :class:`~wus_sim.model.calibration.Calibration`
    (:mod:`wus_sim.model.calibration`); ``None`` = the shipped one, ``'none'`` = the
    uncalibrated physics."""
    compute: ComputeParams = None
    """Compute parameters; ``None`` = the calibration's fitted values over the
    :class:`ComputeParams` defaults. Given, they are used as they are."""
    calibration_id: str = field(init=False, default="")
    """What produced :attr:`compute`: the calibration's id, or ``'explicit'``."""

    def __post_init__(self):
        # each field that is a point parameter obeys its rule in the point table, names too (a routing by
        # the network's own check, whose message the command line prints); one at its default holds as it is
        for name in OPTION_POINT_KEYS:
            value = getattr(self, name)
            if value is not self.__dataclass_fields__[name].default:
                if name == "routing" and isinstance(value, str):
                    check_routing(value)
                object.__setattr__(self, name, check_point_value(name, value))
        check_remat_policy(self.remat, self.remat_policy)
        if self.custom_mesh is not None and self.custom_mesh not in CUSTOM_MESHES:
            raise ConfigError(f"must be None (JAX's layout) or one of {', '.join(CUSTOM_MESHES)}",
                              key_path="custom_mesh", value=self.custom_mesh)
        b = self.bucket_bytes  # bytes here, bucket_MiB in a point: the same bound, in bytes
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= POINT_KEYS["bucket_MiB"].maximum * MiB:
            raise ConfigError(f"must be a whole number of bytes from 1 to {int(POINT_KEYS['bucket_MiB'].maximum)} MiB",
                              key_path="bucket_bytes", value=b)
        if self.compute is not None and not isinstance(self.compute, ComputeParams):
            raise ConfigError("must be a ComputeParams (or None: the calibration's)", key_path="compute",
                              value=self.compute)
        if self.compute is None:
            cal = load_calibration(self.calibration)
            if not cal.has_stack(self.software_stack):
                # the options take the stack's fitted costs from the calibration, so an unknown stack is a
                # typo here; one nobody measured comes with its compute (as a point's and --software-stack's
                # do: their band then says it is extrapolated)
                raise ConfigError(f"is not a software stack calibration {cal.id} has fitted costs for"
                                  f"{did_you_mean(self.software_stack, cal.stacks)}; known: "
                                  f"{', '.join(sorted(cal.stacks)) or 'none'} (an unmeasured stack needs compute= "
                                  "given)", key_path="software_stack", value=self.software_stack)
            object.__setattr__(self, "compute", cal.compute_params(stack=self.software_stack))
            object.__setattr__(self, "calibration_id", cal.id)
        else:
            label = "explicit" if self.calibration is None else load_calibration(self.calibration).id
            object.__setattr__(self, "calibration_id", label)


_OPTION_FIELDS = tuple(f.name for f in fields(StepOptions) if f.name != "calibration")

OPTION_POINT_KEYS = tuple(f.name for f in fields(StepOptions) if f.name in POINT_KEYS and f.name != "calibration")
"""StepOptions fields that are point parameters, defaults and rules from wus_sim.training.parameters.params
(``calibration`` too is a point key, but a StepOptions holds the loaded calibration)."""


@dataclass(frozen=True)
class StepResult:
    """One strategy's simulated step."""

    strategy: str
    status: str
    """``'ok'`` or ``'infeasible'`` (does not fit in HBM; times are NaN)."""
    step_time_s: float
    breakdown: dict
    """Seconds per part (:data:`wus_sim.training.timeline.timeline.BREAKDOWN_PARTS`), adding up to the step time."""
    memory: object
    """:class:`wus_sim.model.memory.MemoryBreakdown` per replica."""
    work: object
    """:class:`wus_sim.training.update.strategies.StepWork`: the collectives and update of the step."""
    timeline: object = None
    """:class:`wus_sim.training.timeline.timeline.TimelineResult` (None when infeasible)."""
    error: str = ""
    step_time_if_fit_s: float = math.nan
    """An infeasible replicated update beside other strategies: its step time with HBM capacity
    ignored, marked as such wherever it is shown (NaN otherwise)."""

    def to_record(self):
        """Flat dict of results, in the documented result columns."""
        m = self.memory
        rec = {"strategy": self.strategy, "status": self.status, "error": self.error,
               "step_time_s": self.step_time_s}
        rec.update({part: self.breakdown.get(part, math.nan) for part in BREAKDOWN_PARTS})
        for part in ("weights", "gradients", "slots", "padding", "activations", "collective_buffers", "peak"):
            rec[f"mem_{part}_bytes"] = float(getattr(m, part))
        rec["grad_comm_bytes"] = float(self.work.grad_nbytes)
        rec["gather_comm_bytes"] = float(self.work.gather_nbytes)
        rec["update_bytes"] = float(self.work.update.bytes_moved)
        return rec

    def __repr__(self):
        m = self.memory
        time = f"step {format_time(self.step_time_s).strip()}" if self.status == "ok" else self.status
        return (f"<StepResult {self.strategy}: {time}, peak memory {format_bytes(m.peak)} of "
                f"{format_bytes(m.capacity)} per replica>")


_COMM_PARTS = IdentityMemo(maxsize=512)
"""A strategy's collective parts per slice and options (the points of a sweep that differ in
batch share them: the collectives do not depend on it)."""

_PREFETCHED = IdentityMemo(maxsize=512)


def _comm_parts(work, topology, options, multislice):
    """``(buckets, extra)``: the :class:`TimelineBucket` of each gradient collective, with its
    all-gathers, and the extra reductions' seconds, of *work* on *topology* (with a *multislice*,
    every collective is hierarchical: :mod:`wus_sim.hardware.multislice`)."""
    return _COMM_PARTS.get((work, topology, multislice), _options_key(options),
                           lambda: _build_comm_parts(work, topology, options, multislice))


def _options_key(options):
    """*options* by value, hashable: every field but the calibration as given (a loaded
    calibration holds mappings; what it sets is in ``compute`` and ``calibration_id``)."""
    return tuple(getattr(options, name) for name in _OPTION_FIELDS)


def _build_comm_parts(work, topology, options, multislice):
    from ..collectives import collective_time

    def ici_s(op, nbytes):
        if nbytes <= 0:
            return 0.0
        return collective_time(topology, op, options.algorithm, nbytes,
                               bidirectional=bidirectional_for(options),
                               routing=options.routing)

    def coll_s(op, nbytes):
        if multislice is None:
            return ici_s(op, nbytes)
        return hierarchical_time(multislice, op, nbytes, ici_s, shard_across_slices=options.shard_across_slices)

    def gather(g):
        """``(nbytes, seconds)`` of all-gather *g*, or zeros for none."""
        return (g.nbytes, coll_s("all-gather", g.nbytes)) if g else (0.0, 0.0)

    buckets = []
    for c in work.grad_collectives:
        after, fwd, bwd = (gather(g) for g in _bucket_gathers(work, c.bucket))
        buckets.append(TimelineBucket(
            name=f"bucket {c.bucket}", first_layer=c.first_layer, layers=tuple(c.layers),
            grad_op=c.op, grad_nbytes=c.nbytes, grad_time_s=coll_s(c.op, c.nbytes),
            gather_nbytes=after[0], gather_time_s=after[1], fwd_gather_nbytes=fwd[0], fwd_gather_time_s=fwd[1],
            bwd_gather_nbytes=bwd[0], bwd_gather_time_s=bwd[1]))

    def small_s(nbytes):
        return small_allreduce_s(topology, nbytes, options, multislice, ici_s=ici_s)

    extra = tuple(small_s(c.nbytes) if c.op == "all-reduce" else coll_s(c.op, c.nbytes)
                  for c in work.extra_allreduces)
    return tuple(buckets), extra


def _program(plan, work, topology, per_replica_batch, options, multislice=None):
    """The :class:`StepProgram` of one strategy, every duration derived. With a
    *multislice*, every collective is hierarchical (:mod:`wus_sim.hardware.multislice`): ICI phases
    on *topology* (one slice), the cross-slice phase over the DCN."""
    layers = step_layer_times(plan.workload, topology, per_replica_batch, options, spatial_ways=plan.spatial_ways)
    fwd_s, bwd_s = layers.forward_s, layers.backward_s
    bn = ()
    if options.bn_group_replicas > 1:
        bn = tuple(float(t) for t in batch_norm_allreduce_s(plan.workload, topology, options, plan.spatial_ways))
    buckets, extra = _comm_parts(work, topology, options, multislice)
    update_s = (memory_bound_time_s(work.update.bytes_moved, work.update.flops, topology, options.compute)
                + work.update.kernels * options.compute.op_overhead_s)
    return StepProgram(
        strategy=work.strategy,
        fwd_layer_s=tuple(fwd_s.tolist()),  # Python floats, the same doubles
        bwd_layer_s=tuple(bwd_s.tolist()),
        buckets=buckets, update_s=update_s, extra_reduction_s=extra,
        overlap_grad_reduce=options.overlap_grad_reduce,
        overlap_all_gather=options.overlap_all_gather and work.strategy == "sharded",
        step_overhead_s=options.compute.step_overhead_s,
        host_loop_s=options.compute.host_loop_s / options.steps_per_loop, layer_names=tuple(plan.workload.layer_names),
        gather_prefetch=resolve_gather_prefetch(plan, options.gather_prefetch), fwd_batch_norm_s=bn,
        bwd_batch_norm_s=bn,
    )


def step_layer_times(workload, topology, per_replica_batch, options, *, spatial_ways=1, expert_ways=1):
    """The layer times the step runs under ``options.remat`` / ``options.remat_policy``
    (:func:`~wus_sim.model.layer_stack.layer_times_under`), of what one device of an *expert_ways*-way
    expert group runs with ``options.capacity_factor`` (:func:`~wus_sim.model.layer_stack.moe_device_view`:
    *workload* itself without an expert axis or a capacity factor)."""
    workload = moe_device_view(workload, expert_ways, options.capacity_factor, options.expert_load_imbalance)
    return layer_times_under(workload, topology, per_replica_batch, options.compute, spatial_ways=spatial_ways,
                             remat=options.remat, remat_policy=options.remat_policy, quantization=options.quantization)


def with_host_offload(breakdown, layers):
    """*breakdown* with the exposed host transfers of an offloading remat policy counted apart
    (``host_offload_s``, out of ``fwd_s`` and ``bwd_s``, where the timeline ran them)."""
    fwd, bwd = host_offload_parts(layers)
    breakdown["fwd_s"] -= fwd
    breakdown["bwd_s"] -= bwd
    breakdown["host_offload_s"] = fwd + bwd
    return breakdown


def op_counts(workload, work, compute):
    """Ops one step runs on a replica, by pass: ``(forward, backward, update)``. A forward layer is
    one op, its backward ``backward_flops_ratio`` ops (the activation and the weight gradient), and
    the update one kernel per pass over each tensor or shard (:attr:`UpdateWork.kernels`)."""
    layers = workload.num_layers
    return layers, compute.backward_flops_ratio * layers, work.update.kernels


def _with_op_launch(breakdown, workload, work, compute):
    """*breakdown* with the ops' fixed costs counted apart (``op_launch_s``): the timeline runs
    them inside each layer's and the update's time, so they come out of ``fwd_s``, ``bwd_s`` and
    ``update_s``. Every op of a step runs inside its period, so the parts still add up."""
    c = compute.op_overhead_s
    fwd, bwd, upd = (n * c for n in op_counts(workload, work, compute))
    breakdown["fwd_s"] -= fwd
    breakdown["bwd_s"] -= bwd
    breakdown["update_s"] -= upd
    breakdown["op_launch_s"] = fwd + bwd + upd
    return breakdown


def simulate_strategies(workload, topology, optimizer=None, strategies=BOTH, *, per_replica_batch=None,
                        global_batch=None, replicas=None, options=None, spatial_ways=None):
    """Simulate each of *strategies*; returns a :class:`StepRun` (``.results``:
    ``{strategy: StepResult}``; it still unpacks as ``results, meta`` for one release).

    *workload*, *topology* and *optimizer* are names/paths or loaded objects (*topology*
    may be a :class:`~wus_sim.hardware.multislice.Multislice` or name one);
    *optimizer* ``None`` means the workload's default; *replicas* (per slice) ``None`` those of
    the workload's MLPerf run on this slice, else one per core; *spatial_ways* (cores per
    replica) sets them instead: the slice's cores / *spatial_ways*.
    """
    options, strategies = options or StepOptions(), strategy_names(strategies)
    # the API takes the point rules too (a batch of 1.5 or 2^40 examples is the point table's error)
    for key, value in (("per_replica_batch", per_replica_batch), ("global_batch", global_batch)):
        if value is not None:
            check_point_value(key, value)
    if isinstance(workload, str):
        workload = load_workload(workload)
    elif not hasattr(workload, "tensors"):
        raise ConfigError("must be a workload name, a path to a workload YAML, or a loaded Workload",
                          key_path="workload", value=workload)
    topology, multislice = load_multislice(topology)
    slices = 1 if multislice is None else multislice.slices
    optimizer = workload.default_optimizer if optimizer is None else optimizer
    grad_bytes = None
    if options.grad_dtype is not None:
        grad_bytes = grad_dtype_bytes(options.grad_dtype)
    if spatial_ways is not None:
        if replicas is not None:
            raise ConfigError("give replicas or spatial_ways, not both", key_path="spatial_ways", value=spatial_ways)
        if isinstance(spatial_ways, bool) or not isinstance(spatial_ways, int) or spatial_ways < 1 \
                or topology.num_replicas % spatial_ways:
            raise ConfigError(f"must divide the {topology.num_replicas} cores of {topology.name}",
                              key_path="spatial_ways", value=spatial_ways)
        replicas = topology.num_replicas // spatial_ways
    per_slice = resolve_replicas(workload, topology, replicas)
    replicas = slices * per_slice  # data parallelism runs over every slice
    batch = resolve_batch(workload, topology, replicas, per_replica_batch=per_replica_batch,
                          global_batch=global_batch)
    if grad_bytes is not None:  # one gradient width for backward, memory, collectives and the record
        workload = workload.with_grad_bytes(grad_bytes)
    if multislice is not None and options.shard_across_slices:  # shards of 1/(slices x N)
        plan = make_plan(workload, planning_topology(multislice), optimizer, replicas=replicas,
                         bucket_bytes=options.bucket_bytes, grad_bytes=grad_bytes)
    else:  # one slice, or shards of 1/N, the same in every slice
        plan = make_plan(workload, topology, optimizer, replicas=per_slice, bucket_bytes=options.bucket_bytes,
                         grad_bytes=grad_bytes)
    results = {}
    gather = dict(gather_prefetch=options.gather_prefetch, keep_gathered_weights=options.keep_gathered_weights,
                  remat=options.remat, overlap_grad_reduce=options.overlap_grad_reduce,
                  activation_model=options.activation_model, remat_policy=options.remat_policy)
    checked = []  # (strategy, work, memory, why infeasible or None)
    for strategy in strategies:
        work = step_work(plan, strategy, keep_gathered_weights=options.keep_gathered_weights)
        try:
            checked.append((strategy, work, memory_breakdown(plan, strategy, batch, check=True, **gather), None))
        except InfeasibleError as exc:  # with the breakdown the error describes
            checked.append((strategy, work, memory_breakdown(plan, strategy, batch, **gather), exc))
    reference = "replicated" if len(strategies) > 1 else None  # timed even if infeasible (below)
    if multislice is None:
        timed = [w for s, w, _, exc in checked if exc is None or s == reference]
        # once per slice, strategies and options: later points (other batches) find every time memoized
        _PREFETCHED.get([topology, *timed], _options_key(options), lambda: prefetch_collectives(timed, topology, options))
    for strategy, work, memory, exc in checked:
        if exc is not None:
            nan = dict.fromkeys(BREAKDOWN_PARTS, math.nan)
            if_fit = math.nan
            if strategy == reference:  # the reference the others are measured by
                unchecked = run_timeline(_program(plan, work, topology, batch, options, multislice), steps=options.steps)
                if_fit = unchecked.step_time_s
            results[strategy] = StepResult(strategy, "infeasible", math.nan, nan, memory, work, error=str(exc),
                                           step_time_if_fit_s=if_fit)
            continue
        program = _program(plan, work, topology, batch, options, multislice)
        tl = run_timeline(program, steps=options.steps)
        breakdown = _with_op_launch(dict(tl.breakdown), plan.workload, work, options.compute)
        if options.remat_policy is not None:
            with_host_offload(breakdown, step_layer_times(plan.workload, topology, batch, options,
                                                          spatial_ways=plan.spatial_ways))
        results[strategy] = StepResult(strategy, "ok", tl.step_time_s, breakdown, memory, work, tl)
    return StepRun(results=results, plan=plan, replicas=replicas, spatial_ways=plan.spatial_ways,
                   per_replica_batch=batch, global_batch=batch * replicas, params=plan.params,
                   optimizer=plan.analysis.name, slices=slices, replicas_per_slice=per_slice,
                   multislice=multislice)


def simulate_step(workload, topology, optimizer=None, strategy="sharded", **kw):
    """Simulate one strategy (one of :data:`~wus_sim.training.update.strategies.STRATEGIES`); returns its :class:`StepResult`."""
    return simulate_strategies(workload, topology, optimizer, (strategy,), **kw).results[strategy]


def strategies_named(choice):
    """The strategies a ``--strategy`` / point ``strategy`` value names: one, ``both``
    (replicated and sharded, the paper's pair) or ``all``."""
    if choice not in STRATEGY_CHOICES:
        raise UnknownNameError("strategy", choice, STRATEGY_CHOICES)
    return STRATEGY_SETS.get(choice, (choice,))


