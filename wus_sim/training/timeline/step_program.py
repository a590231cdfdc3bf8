"""What one replica does in a training step, as plain data, and what running it gives.

A :class:`StepProgram` lists every duration of a step (per-layer compute, gradient buckets
with their collectives, the update, the weight all-gathers); a timeline engine runs it
(:func:`wus_sim.training.timeline.timeline.run_timeline`: SimPy processes, the reference, or the
direct evaluation of :mod:`wus_sim.training.timeline.timeline_direct`) and returns a
:class:`TimelineResult`. Both engines check a program and split a step into its parts with
the functions here, so they agree by construction on everything but the times themselves.
"""

from dataclasses import dataclass, field
from functools import cached_property

from ...inputs.memo import IdentityMemo
from ..parameters.params import POINT_KEYS

__all__ = ["BREAKDOWN_PARTS", "TimelineBucket", "StepProgram", "Interval", "TimelineResult", "ProgramShape",
           "GatherOrder", "check_program", "step_breakdown"]


BREAKDOWN_PARTS = ("overhead_s", "host_loop_s", "op_launch_s", "fwd_s", "bwd_s", "batch_norm_s", "update_s",
                   "exposed_comm_s", "extra_reduction_s", "idle_s", "host_offload_s")
"""Parts of a step time; they add up to ``step_time_s``.

``overhead_s`` is the step's unexplained fixed cost (the software stack's, fitted),
``host_loop_s`` the step's share of the host's round trip per device loop, ``op_launch_s``
the fixed cost of every op the step runs (forward layers, backward ops, update kernels; the
timeline runs it inside each layer's time, the breakdown counts it apart from ``fwd_s``,
``bwd_s`` and ``update_s``),
``batch_norm_s`` the core's cross-replica batch-norm all-reduces (distributed
batch norm: the statistics of each layer in forward, their gradients in backward;
latency-bound and on the critical path, so they count apart from the layers' compute),
``exposed_comm_s`` is time the core waits on gradient or weight collectives,
``extra_reduction_s`` time it waits on the optimizer's small cross-replica
all-reduces (LAMB/LARS norms, global-norm clipping), ``idle_s`` time it waits
on nothing the model knows (zero in a well-formed program), ``host_offload_s`` time the layers wait
on activations moving to or from host memory (an offloading ``remat_policy``; the timeline runs it
inside the layers' times, the step counts it apart from ``fwd_s`` and ``bwd_s``; 0 otherwise)."""


@dataclass(frozen=True)
class TimelineBucket:
    """One fused bucket as the timeline sees it: the layers whose backward completes its
    gradients and the durations of its collectives (the bucket's tensors and bytes are the
    planner's :class:`~wus_sim.training.update.planner.Bucket`)."""

    name: str
    first_layer: int
    """Smallest layer index among its tensors: backward produces it last, so the
    bucket's gradient is complete when backward has finished this layer."""
    layers: tuple
    """Layer indices of its tensors (forward of those layers needs its all-gather)."""
    grad_op: str
    """``'all-reduce'`` (replicated) or ``'reduce-scatter'`` (sharded)."""
    grad_nbytes: float
    grad_time_s: float
    gather_nbytes: float = 0.0
    """Bytes of the weight all-gather after the update (sharded only; 0 = none)."""
    gather_time_s: float = 0.0
    fwd_gather_nbytes: float = 0.0
    """Bytes of the all-gather before the bucket's forward (fully-sharded only; 0 = none)."""
    fwd_gather_time_s: float = 0.0
    bwd_gather_nbytes: float = 0.0
    """Bytes of the all-gather before the bucket's backward (fully-sharded, weights not kept; 0 = none)."""
    bwd_gather_time_s: float = 0.0


@dataclass(frozen=True)
class StepProgram:
    """What one replica does in a training step, with every duration known."""

    strategy: str
    fwd_layer_s: tuple
    """Forward time of each layer, in forward order."""
    bwd_layer_s: tuple
    """Backward time of each layer, indexed like ``fwd_layer_s`` (run in reverse)."""
    buckets: tuple
    update_s: float
    """Weight-update compute on this replica (all weights, or the 1/N shard)."""
    extra_reduction_s: tuple = ()
    """Durations of the optimizer's small all-reduces, run after the gradient
    collectives and before the update can finish (sharded update only)."""
    overlap_grad_reduce: bool = True
    """Start a bucket's gradient collective as soon as backward has produced it."""
    overlap_all_gather: bool = False
    """Sharded: let the next step's forward start before all weights are gathered;
    each layer waits only for the buckets holding its weights."""
    step_overhead_s: float = 0.0
    """Unexplained fixed cost at the start of every step, on the core (the software stack's)."""
    host_loop_s: float = 0.0
    """The step's share of the host round trip per device loop, on the core at its start."""
    layer_names: tuple = ()
    """Name of each layer, indexed like ``fwd_layer_s``, for the intervals (and traces);
    empty: ``L0``, ``L1``, ..."""
    gather_prefetch: int = 1
    """Fully-sharded: buckets whose weight all-gather may run ahead of the bucket the compute
    is on (0 = each gather waits until the compute needs it)."""
    fwd_batch_norm_s: tuple = ()
    """Per layer (indexed like ``fwd_layer_s``): its batch-norm statistics all-reduce in
    forward, after the layer's compute (empty or 0: none)."""
    bwd_batch_norm_s: tuple = ()
    """Per layer: the all-reduce of its batch-norm gradient statistics in backward, before the
    layer's backward compute (the batch-norm backward comes first in reverse order)."""

    def __post_init__(self):
        # A negative duration is a bug upstream (a split or a subtraction gone wrong): a crash
        # here, never a number in a result.
        buckets = [t for b in self.buckets for t in (b.grad_time_s, b.gather_time_s, b.fwd_gather_time_s,
                                                      b.bwd_gather_time_s)]
        times = {"fwd_layer_s": self.fwd_layer_s, "bwd_layer_s": self.bwd_layer_s, "buckets": buckets,
                 "update_s": (self.update_s,), "extra_reduction_s": self.extra_reduction_s,
                 "step_overhead_s": (self.step_overhead_s,), "host_loop_s": (self.host_loop_s,),
                 "fwd_batch_norm_s": self.fwd_batch_norm_s, "bwd_batch_norm_s": self.bwd_batch_norm_s}
        for name, values in times.items():  # (a list, not any() over a generator: a search builds thousands)
            assert not [t for t in values if t < 0], f"StepProgram.{name} has a negative duration: {min(values)}"


@dataclass(frozen=True)
class Interval:
    """One activity on a track, for breakdowns and traces."""

    track: str
    """``'core'`` or ``'net'``."""
    kind: str
    """``overhead``, ``host`` (host loop share), ``fwd``, ``bwd``, ``bn`` (batch-norm all-reduce), ``update``, ``grad``,
    ``extra``, ``gather``."""
    name: str
    start_s: float
    end_s: float
    step: int
    args: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class TimelineResult:
    step_time_s: float
    """Steady-state period between the starts of consecutive steps."""
    breakdown: dict
    """Seconds per part of the measured step (keys: :data:`BREAKDOWN_PARTS`)."""
    step_starts_s: tuple
    """Simulated time at which each step's forward began."""
    events: int
    """SimPy events processed (:func:`run_timeline`), or activities evaluated
    (:func:`~.timeline_direct.run_timeline_direct`)."""
    _activities: object = field(default=(), repr=False)
    """:attr:`activities`, or a function that builds them when first asked for."""

    @cached_property
    def activities(self):
        """Every activity of every simulated step in the order it ended (activities that end
        at the same time in either order), as plain tuples ``(track, kind, name, start_s,
        end_s, step, args)``."""
        a = self._activities
        return tuple(a()) if callable(a) else a

    @cached_property
    def intervals(self):
        """Every activity of every simulated step, as :class:`Interval` objects (built when
        first asked for: a sweep never asks)."""
        return tuple(Interval(*a) for a in self.activities)

    def __repr__(self):
        return (f"<TimelineResult step {self.step_time_s:.6g} s over {len(self.step_starts_s)} step(s), "
                f"{self.events} events>")


@dataclass(frozen=True)
class ProgramShape:
    """What both timeline engines derive from a :class:`StepProgram` before they run it."""

    layer_buckets: list
    """Per layer: the buckets whose weights it needs before its forward."""
    grad_order: list
    """Buckets in the order backward completes them (decreasing ``first_layer``)."""
    gather_order: list
    """Buckets in the order forward needs their weights."""
    fwd_seq: list
    """Fully-sharded: buckets the forward pass gathers, in its order."""
    bwd_seq: list
    """Fully-sharded: buckets the backward pass gathers, in its order."""
    fwd_last: list
    """Per layer: buckets the forward pass has finished with after it."""
    bwd_last: list
    """Per layer: buckets the backward pass has finished with after it."""
    layer_names: tuple
    fwd_bn: tuple
    """Per layer: its forward batch-norm all-reduce time (0: none)."""
    bwd_bn: tuple
    """Per layer: its backward batch-norm all-reduce time (0: none)."""


def check_program(program, steps):
    """Check *program* and *steps* (``ValueError`` naming the rule) and return its
    :class:`ProgramShape`."""
    low = POINT_KEYS["steps"].minimum  # the table's rule (one period needs two step starts)
    if steps < low:
        raise ValueError(f'"steps" must be >= {low:g}')
    key = (len(program.fwd_layer_s), program.layer_names, program.fwd_batch_norm_s, program.bwd_batch_norm_s,
           program.gather_prefetch)
    # the points of a sweep that differ in batch share their buckets (and so their shape)
    return _SHAPES.get((program.buckets,), key, lambda: _shape(program))


_SHAPES = IdentityMemo(maxsize=256)


def _shape(program):
    nlayers = len(program.fwd_layer_s)
    buckets = program.buckets
    # layer -> buckets whose weights that layer needs before its forward
    layer_buckets = [[] for _ in range(nlayers)]
    for b, bucket in enumerate(buckets):
        for layer in bucket.layers:
            layer_buckets[layer].append(b)
    # buckets complete in backward in decreasing first_layer; issue in that order
    grad_order = sorted(range(len(buckets)), key=lambda b: (-buckets[b].first_layer, b))
    # weights are needed in forward order
    gather_order = sorted(range(len(buckets)), key=lambda b: (min(buckets[b].layers), b))
    layer_names = program.layer_names or tuple(f"L{i}" for i in range(nlayers))
    if len(layer_names) != nlayers:
        raise ValueError(f'"layer_names" has {len(layer_names)} names for {nlayers} layers')
    fwd_bn, bwd_bn = (tuple(times) or (0.0,) * nlayers
                      for times in (program.fwd_batch_norm_s, program.bwd_batch_norm_s))
    if len(fwd_bn) != nlayers or len(bwd_bn) != nlayers:
        raise ValueError(f'"fwd_batch_norm_s" and "bwd_batch_norm_s" need one time per layer ({nlayers})')
    if isinstance(program.gather_prefetch, bool) or not isinstance(program.gather_prefetch, int) \
            or program.gather_prefetch < 0:
        raise ValueError('"gather_prefetch" must be an integer >= 0')
    # fully-sharded passes: forward gathers in forward order, backward gathers in reverse
    fwd_seq = [b for b in gather_order if buckets[b].fwd_gather_nbytes > 0]
    bwd_seq = sorted((b for b in range(len(buckets)) if buckets[b].bwd_gather_nbytes > 0),
                     key=lambda b: (-max(buckets[b].layers), b))
    # layer -> buckets the pass has finished with after that layer
    fwd_last = [[] for _ in range(nlayers)]
    for b in fwd_seq:
        fwd_last[max(buckets[b].layers)].append(b)
    bwd_last = [[] for _ in range(nlayers)]
    for b in bwd_seq:
        bwd_last[buckets[b].first_layer].append(b)
    return ProgramShape(layer_buckets, grad_order, gather_order, fwd_seq, bwd_seq, fwd_last, bwd_last,
                        layer_names, fwd_bn, bwd_bn)


class GatherOrder:
    """When each weight all-gather of one fully-sharded pass is issued: in the pass's bucket order,
    at most *prefetch* buckets ahead of the one the compute is on (the rule of
    :mod:`wus_sim.training.timeline.timeline`'s module doc). Each method returns the buckets whose gathers
    start now, in order; both timeline engines issue them."""

    def __init__(self, seq, prefetch):
        self.seq = seq
        """Buckets in the order the pass uses them."""
        self.prefetch = prefetch
        self.pos = {b: i for i, b in enumerate(seq)}
        self.issued = 0

    def first(self):
        """When the pass begins: the first *prefetch* + 1."""
        return self._upto(self.prefetch)

    def before_use(self, b):
        """The compute needs bucket *b*: it, if not issued yet (``None``: the pass does not gather *b*)."""
        return self._upto(self.pos[b]) if b in self.pos else None

    def after_use(self, b):
        """The compute is done with bucket *b*: the gather *prefetch* + 1 places on may start."""
        return self._upto(self.pos[b] + self.prefetch + 1)

    def _upto(self, i):
        out = []
        while self.issued <= min(i, len(self.seq) - 1):
            out.append(self.seq[self.issued])
            self.issued += 1
        return out


_CORE_PARTS = {"overhead": "overhead_s", "host": "host_loop_s", "fwd": "fwd_s", "bwd": "bwd_s", "bn": "batch_norm_s",
               "update": "update_s"}


def step_breakdown(core, net, t0, t1):
    """Split ``[t0, t1]`` by what the core does, and while it idles, by what the network does.

    *core*: the core's activities ``(kind, name, start_s, end_s, step)`` in the order they ran;
    *net*: the network's ``(kind, name, start_s, end_s, step, ...)``, in any order (they never
    overlap: one FIFO resource). Clipping compares as ``max`` and ``min`` do (the first of two
    equal values), inline: a sweep runs this for every point."""
    out = dict.fromkeys(BREAKDOWN_PARTS, 0.0)
    busy = []
    parts = _CORE_PARTS
    for kind, _, s, e, _ in core:  # clipped as _clipped does, in one pass (a sweep's hot loop)
        if s < t0:
            s = t0
        if e > t1:
            e = t1
        if e > s:
            out[parts[kind]] += e - s
            busy.append((s, e))
    busy.sort()
    gaps, cur = [], t0
    for s, e in busy:
        if s > cur:
            gaps.append((cur, s))
        if e > cur:
            cur = e
    if cur < t1:
        gaps.append((cur, t1))
    clipped = _clipped(net, t0, t1)
    clipped.sort()
    # both sorted, the network's intervals disjoint (so their ends sorted too): each gap looks only
    # at the intervals that reach into it, in the same order as a scan of them all would
    first = 0
    for gs, ge in gaps:
        covered = 0.0
        while first < len(clipped) and clipped[first][1] <= gs:
            first += 1
        for i in range(first, len(clipped)):
            s, e, kind = clipped[i]
            if s >= ge:
                break
            a = s if s > gs else gs
            b = e if e < ge else ge
            if b > a:
                part = "extra_reduction_s" if kind == "extra" else "exposed_comm_s"
                out[part] += b - a
                covered += b - a
        out["idle_s"] += (ge - gs) - covered
    return out


def _clipped(activities, t0, t1):
    """``(start_s, end_s, kind)`` of each of *activities* cut to ``[t0, t1]``, in their order,
    those left with no length dropped."""
    out = []
    for kind, _, s, e, *_ in activities:
        if s < t0:
            s = t0
        if e > t1:
            e = t1
        if e > s:
            out.append((s, e, kind))
    return out
