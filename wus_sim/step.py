"""One training step, replicated or sharded weight update: build it, simulate it, report it.

:func:`simulate_step` turns a workload, a topology and an optimizer into a
:class:`~wus_sim.timeline.StepProgram` whose every duration is derived:

* forward/backward per layer from the layers' FLOPs and the replica's matrix
  unit (:mod:`wus_sim.compute`);
* gradient collectives per fused bucket, their sizes from the plan
  (:mod:`wus_sim.planner`, :mod:`wus_sim.strategies`) and their times from the
  collective engine over every replica and link of the slice
  (:func:`wus_sim.collectives.collective_time`);
* the update from the optimizer analysis (bytes and flops per element) on the
  HBM-bound vector unit, over all weights (replicated) or the 1/N shard (sharded);
* the optimizer's small cross-replica all-reduces and the weight all-gathers
  (sharded only);

then runs it for a few consecutive steps on the SimPy timeline
(:mod:`wus_sim.timeline`) and reports the steady-state step time, its
breakdown and the per-replica memory. :func:`simulate_point` is the same for
one point of an experiment sweep, as flat records.
"""

from dataclasses import dataclass, field
import math

from .calibration import load_calibration
from .compute import ComputeParams, layer_times, memory_bound_time_s
from .errors import ConfigError, InfeasibleError, UnknownNameError
from .memory import memory_breakdown
from .planner import DEFAULT_BUCKET_BYTES, plan as make_plan
from .strategies import STRATEGIES, step_work
from .timeline import BREAKDOWN_PARTS, Bucket, StepProgram, run_timeline
from .topology import load_topology
from .units import MiB
from .workloads import load_workload

__all__ = ["StepOptions", "StepResult", "simulate_step", "simulate_strategies", "simulate_point", "speedup",
           "resolve_batch"]

GRAD_DTYPE_BYTES = {"fp32": 4, "bf16": 2}


@dataclass(frozen=True)
class StepOptions:
    """How the step runs: collective algorithm, overlap and fusion options."""

    algorithm: str = "2d"
    """Collective algorithm of gradient reductions and weight all-gathers."""
    bidirectional: bool = None
    """Run each ring phase in both directions at once, half the data each way. ``None``
    (the default) = yes for ring algorithms: TPU all-reduces use both directions of
    every ICI link (Ying et al. 2018, "Image Classification at Supercomputer Scale",
    arXiv 1811.06992). A mesh axis keeps its one folded ring either way (it already runs
    over both directions of each link; see :mod:`wus_sim.collectives.plan`), so on a
    partial torus only the wrapped axes gain a second ring."""
    routing: str = "store-and-forward"
    """Network routing, ``"store-and-forward"`` or ``"cut-through"`` (see :mod:`wus_sim.network`)."""
    overlap_grad_reduce: bool = True
    """Start a bucket's gradient collective as soon as backward has produced it."""
    overlap_all_gather: bool = True
    """Sharded: overlap the weight all-gather with the next step's forward."""
    grad_dtype: str = None
    """``'fp32'`` or ``'bf16'`` gradients on the wire; ``None`` = the workload's."""
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    """Gradient fusion threshold, bytes."""
    steps: int = 3
    """Consecutive steps simulated (the step time is the steady-state period)."""
    bn_group_replicas: int = 1
    """Cross-replica batch norm: replicas whose batch statistics are all-reduced together
    in every batch-norm layer, forward and backward (1 = local batch norm). MLPerf v0.6
    ResNet-50 on v3-2048 used groups of 8 cores (its ``model_bn_span`` / per-core batch)."""
    calibration: object = None
    """Calibration name, path or :class:`~wus_sim.calibration.Calibration`
    (:mod:`wus_sim.calibration`); ``None`` = the shipped one, ``'none'`` = the
    uncalibrated physics."""
    compute: ComputeParams = None
    """Compute parameters; ``None`` = the calibration's fitted values over the
    :class:`ComputeParams` defaults. Given, they are used as they are."""
    calibration_id: str = field(init=False, default="")
    """What produced :attr:`compute`: the calibration's id, or ``'explicit'``."""

    def __post_init__(self):
        if isinstance(self.bn_group_replicas, bool) or not (isinstance(self.bn_group_replicas, int)
                                                            and self.bn_group_replicas >= 1):
            raise ConfigError("must be an integer >= 1", key_path="bn_group_replicas", value=self.bn_group_replicas)
        if self.compute is None:
            cal = load_calibration(self.calibration)
            object.__setattr__(self, "compute", cal.compute_params())
            object.__setattr__(self, "calibration_id", cal.id)
        else:
            label = "explicit" if self.calibration is None else load_calibration(self.calibration).id
            object.__setattr__(self, "calibration_id", label)


@dataclass(frozen=True)
class StepResult:
    """One strategy's simulated step."""

    strategy: str
    status: str
    """``'ok'`` or ``'infeasible'`` (does not fit in HBM; times are NaN)."""
    step_time_s: float
    breakdown: dict
    """Seconds per part (:data:`wus_sim.timeline.BREAKDOWN_PARTS`), adding up to the step time."""
    memory: object
    """:class:`wus_sim.memory.MemoryBreakdown` per replica."""
    work: object
    """:class:`wus_sim.strategies.StepWork`: the collectives and update of the step."""
    timeline: object = None
    """:class:`wus_sim.timeline.TimelineResult` (None when infeasible)."""
    error: str = ""

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


def resolve_batch(workload, topology, replicas, *, per_replica_batch=None, global_batch=None):
    """Per-replica batch: given, or global / replicas, or the MLPerf run's on this slice,
    or the workload's default."""
    if per_replica_batch is not None and global_batch is not None:
        raise ConfigError("give per_replica_batch or global_batch, not both", key_path="global_batch",
                          value=global_batch)
    if per_replica_batch is not None:
        if isinstance(per_replica_batch, bool) or not per_replica_batch > 0:
            raise ConfigError("must be > 0", key_path="per_replica_batch", value=per_replica_batch)
        return per_replica_batch
    if global_batch is not None:
        if global_batch % replicas:
            raise ConfigError(f"must be a multiple of the {replicas} replicas", key_path="global_batch",
                              value=global_batch)
        return global_batch // replicas
    return workload.per_replica_batch_for(topology.name)


def _replicas(workload, topology, replicas=None):
    """*replicas* if given, else those of the MLPerf run on this slice (spatial
    partitioning), else one per core."""
    if replicas is not None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1 \
                or topology.num_replicas % replicas:
            raise ConfigError(f"must divide the slice's {topology.num_replicas} cores", key_path="replicas",
                              value=replicas)
        return replicas
    config = workload.config_for(topology.name)
    if config is not None and topology.num_replicas % config.replicas == 0:
        return config.replicas
    return topology.num_replicas


def _program(plan, work, topology, per_replica_batch, options):
    """The :class:`StepProgram` of one strategy, every duration derived."""
    from .collectives import collective_time

    def coll_s(op, nbytes):
        if nbytes <= 0:
            return 0.0
        return collective_time(topology, op, options.algorithm, nbytes,
                               bidirectional=bidirectional_for(options),
                               routing=options.routing)

    layers = layer_times(plan.workload, topology, per_replica_batch, options.compute,
                         spatial_ways=plan.spatial_ways)
    fwd_s, bwd_s = layers.forward_s, layers.backward_s
    if options.bn_group_replicas > 1:
        bn = _batch_norm_allreduce_s(plan.workload, topology, options, plan.spatial_ways)
        fwd_s, bwd_s = fwd_s + bn, bwd_s + bn
    gathers = {c.bucket: c for c in work.weight_allgathers}
    buckets = []
    for c in work.grad_collectives:
        g = gathers.get(c.bucket)
        buckets.append(Bucket(
            name=f"bucket {c.bucket}", first_layer=c.first_layer, layers=tuple(c.layers),
            grad_op=c.op, grad_nbytes=c.nbytes, grad_time_s=coll_s(c.op, c.nbytes),
            gather_nbytes=g.nbytes if g else 0.0, gather_time_s=coll_s("all-gather", g.nbytes) if g else 0.0))
    update_s = (memory_bound_time_s(work.update.bytes_moved, work.update.flops, topology, options.compute)
                + work.update.kernels * options.compute.op_overhead_s)
    extra = tuple(coll_s(c.op, c.nbytes) for c in work.extra_allreduces)
    return StepProgram(
        strategy=work.strategy,
        fwd_layer_s=tuple(float(t) for t in fwd_s),
        bwd_layer_s=tuple(float(t) for t in bwd_s),
        buckets=tuple(buckets), update_s=update_s, extra_reduction_s=extra,
        overlap_grad_reduce=options.overlap_grad_reduce,
        overlap_all_gather=options.overlap_all_gather and work.strategy == "sharded",
        step_overhead_s=options.compute.step_overhead_s, layer_names=tuple(plan.workload.layer_names),
    )


def bidirectional_for(options):
    """Whether ring phases run both directions: the option, or (``None``) yes unless the
    algorithm is halving-doubling (pairwise exchanges, no ring direction)."""
    if options.bidirectional is None:
        return options.algorithm != "halving-doubling"
    return bool(options.bidirectional)


def _batch_norm_allreduce_s(workload, topology, options, spatial_ways):
    """Per-layer time of cross-replica batch norm, seconds.

    One all-reduce of the layer's batch statistics (mean and variance, fp32, per
    channel) in forward and one (the two gradient sums) in backward, over the cores
    of ``bn_group_replicas`` neighbouring replicas (every core of a spatially
    partitioned replica holds part of the batch); the core waits for it. The
    messages are a few KiB, so latency decides: recursive halving and doubling
    (2 log2(n) steps) where the group is a power of two, as MPICH does for short
    messages (Thakur, Rabenseifner and Gropp 2005), else a ring.
    """
    import numpy as np

    from .collectives import collective_time

    cores = options.bn_group_replicas * spatial_ways
    if topology.num_replicas % cores:
        raise ConfigError(f"spans {cores} cores, which must divide the slice's {topology.num_replicas}",
                          key_path="bn_group_replicas", value=options.bn_group_replicas)
    algorithm = "halving-doubling" if cores & (cores - 1) == 0 else "ring"
    group = _compact_group(topology, cores)
    channels = workload.layer_batch_norm_channels
    out = np.zeros(workload.num_layers)
    for layer in np.flatnonzero(channels):
        out[layer] = collective_time(topology, "all-reduce", algorithm, 2 * 4 * channels[layer],
                                     group=group, routing=options.routing)
    return out


def _compact_group(topology, cores):
    """Replicas of a group of *cores* neighbouring cores: all cores of a near-square block
    of chips at the origin (a batch-norm group is neighbours, not a row of the pod)."""
    cpc = topology.cores_per_chip
    if cores <= cpc:
        return list(range(cores))
    chips = cores // cpc
    a = 1
    while a * 2 <= topology.dims[0] and chips % (a * 2) == 0 and (a * 2) ** 2 <= chips:
        a *= 2
    b = chips // a
    if len(topology.dims) < 2 or b > topology.dims[1]:  # no room for a block: a line of chips
        return list(range(cores))
    block = [x + topology.dims[0] * y for y in range(b) for x in range(a)]
    return [c * cpc + k for c in block for k in range(cpc)]


def simulate_strategies(workload, topology, optimizer=None, strategies=STRATEGIES, *, per_replica_batch=None,
                        global_batch=None, replicas=None, options=None):
    """Simulate each of *strategies*; returns ``{strategy: StepResult}``.

    *workload*, *topology* and *optimizer* are names/paths or loaded objects;
    *optimizer* ``None`` means the workload's default; *replicas* ``None`` those of
    the workload's MLPerf run on this slice, else one per core.
    """
    options = options or StepOptions()
    for s in strategies:
        if s not in STRATEGIES:
            raise UnknownNameError("strategy", s, STRATEGIES + ("both",))
    if isinstance(workload, str):
        workload = load_workload(workload)
    topology = load_topology(topology)
    optimizer = workload.default_optimizer if optimizer is None else optimizer
    grad_bytes = None
    if options.grad_dtype is not None:
        if options.grad_dtype not in GRAD_DTYPE_BYTES:
            raise ConfigError("must be fp32 or bf16", key_path="grad_dtype", value=options.grad_dtype)
        grad_bytes = GRAD_DTYPE_BYTES[options.grad_dtype]
    replicas = _replicas(workload, topology, replicas)
    batch = resolve_batch(workload, topology, replicas, per_replica_batch=per_replica_batch,
                          global_batch=global_batch)
    if grad_bytes is not None:  # one gradient width for backward, memory, collectives and the record
        workload = workload.with_grad_bytes(grad_bytes)
    plan = make_plan(workload, topology, optimizer, replicas=replicas, bucket_bytes=options.bucket_bytes,
                     grad_bytes=grad_bytes)
    results = {}
    for strategy in strategies:
        work = step_work(plan, strategy)
        try:
            memory = memory_breakdown(plan, strategy, batch, check=True)
        except InfeasibleError as exc:
            memory = memory_breakdown(plan, strategy, batch)  # the breakdown the error describes
            nan = dict.fromkeys(BREAKDOWN_PARTS, math.nan)
            results[strategy] = StepResult(strategy, "infeasible", math.nan, nan, memory, work, error=str(exc))
            continue
        program = _program(plan, work, topology, batch, options)
        tl = run_timeline(program, steps=options.steps)
        results[strategy] = StepResult(strategy, "ok", tl.step_time_s, dict(tl.breakdown), memory, work, tl)
    meta = {"replicas": plan.replicas, "spatial_ways": plan.spatial_ways, "per_replica_batch": batch,
                    "global_batch": batch * plan.replicas, "params": plan.params,
                    "optimizer": plan.analysis.name, "plan": plan}
    return results, meta


def simulate_step(workload, topology, optimizer=None, strategy="sharded", **kw):
    """Simulate one strategy (``'replicated'`` or ``'sharded'``); returns its :class:`StepResult`."""
    results, _ = simulate_strategies(workload, topology, optimizer, (strategy,), **kw)
    return results[strategy]


def speedup(results):
    """Replicated step time / sharded step time (NaN unless both ran)."""
    r, s = results.get("replicated"), results.get("sharded")
    if r is None or s is None or r.status != "ok" or s.status != "ok":
        return math.nan
    return r.step_time_s / s.step_time_s


def simulate_point(point):
    """Simulate one experiment point; returns one flat record per strategy.

    *point* has the keys of ``wus_sim.experiments.spec.POINT_KEYS`` (missing ones
    take their defaults). A point that does not fit in HBM gives rows with
    ``status='infeasible'``; bad parameters raise (the runner records them as
    ``status='error'``).
    """
    p = dict(point)
    topology = load_topology(p["topology"], link_GBps=p.get("link_GBps"), hop_latency_us=p.get("hop_latency_us"),
                             wraparound=p.get("wraparound"), cores_per_chip=p.get("cores_per_chip"),
                             failed_links=p.get("failed_links"), slow_links=p.get("slow_links"), seed=p.get("seed"))
    calibration = load_calibration(p.get("calibration"))
    bucket_MiB = p.get("bucket_MiB")
    options = StepOptions(
        algorithm=p.get("algorithm") or "2d",
        bidirectional=p.get("bidirectional"),
        routing=p.get("routing") or "store-and-forward",
        overlap_grad_reduce=p.get("overlap_grad_reduce", True) is not False,
        overlap_all_gather=p.get("overlap_all_gather", True) is not False,
        grad_dtype=p.get("grad_dtype"),
        bucket_bytes=DEFAULT_BUCKET_BYTES if bucket_MiB is None else int(bucket_MiB * MiB),
        steps=int(p.get("steps") or 3),
        bn_group_replicas=int(p.get("bn_group_replicas") or 1),
        calibration=calibration,
        compute=calibration.compute_params(mxu_efficiency=p.get("mxu_efficiency")),
    )
    strategy = p.get("strategy") or "both"
    strategies = STRATEGIES if strategy == "both" else (strategy,)
    results, meta = simulate_strategies(p["workload"], topology, p.get("optimizer"), strategies,
                                        per_replica_batch=p.get("per_replica_batch"),
                                        global_batch=p.get("global_batch"), options=options)
    up = speedup(results)
    records = []
    for s, res in results.items():
        rec = dict(p)
        rec.update(res.to_record())
        rec.update(topology.slice_columns())
        rec.update({
            "per_replica_batch": meta["per_replica_batch"], "global_batch": meta["global_batch"],
            # data-parallel replicas: fewer than the cores when the MLPerf run partitions spatially
            "optimizer": meta["optimizer"], "replicas": meta["replicas"], "spatial_ways": meta["spatial_ways"],
            "params": meta["params"],
            "hbm_bytes": float(topology.hbm_bytes_per_replica),
            "speedup": up if s == "sharded" else math.nan,
        })
        rec.update(used_values(topology, options, meta["plan"]))
        records.append(rec)
    return records


def used_values(topology, options, plan):
    """Every parameter value the point actually ran with: point keys left null get the
    value the model chose, plus the calibrated and datasheet figures behind the times."""
    from .units import GB

    links = sorted(set(topology.axis_link_Bps))
    c = options.compute
    return {
        "link_GBps": links[0] / GB if len(links) == 1 else min(links) / GB,
        "hop_latency_us": topology.hop_latency_s * 1e6,
        "wraparound": all(topology.wrap) if len(set(topology.wrap)) == 1 else ",".join(
            "true" if w else "false" for w in topology.wrap),  # per axis also in the `wrap` column
        "cores_per_chip": topology.cores_per_chip,
        "algorithm": options.algorithm, "bidirectional": bidirectional_for(options),
        "routing": options.routing,
        "grad_dtype": {2: "bf16", 4: "fp32"}.get(plan.workload.grad_bytes, str(plan.workload.grad_bytes)),
        "bucket_MiB": options.bucket_bytes / MiB,
        "mxu_efficiency": c.mxu_efficiency,
        "bn_group_replicas": options.bn_group_replicas,
        "calibration": options.calibration_id,
        "op_overhead_s": c.op_overhead_s, "step_overhead_s": c.step_overhead_s,
        "elementwise_fwd_bytes": c.elementwise_fwd_bytes, "elementwise_bwd_bytes": c.elementwise_bwd_bytes,
        "activation_hbm_efficiency": c.activation_hbm_efficiency, "update_hbm_efficiency": c.update_hbm_efficiency,
        "spatial_efficiency": c.spatial_efficiency, "backward_flops_ratio": c.backward_flops_ratio,
        "peak_TFLOPs": topology.chip.peak_flops / 1e12, "hbm_GBps": topology.chip.hbm_Bps / GB,
        "onchip_GBps": topology.onchip_Bps / GB,
    }
