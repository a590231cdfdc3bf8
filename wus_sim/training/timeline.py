"""The training-step timeline: SimPy processes over one replica's compute and network.

Synchronous data parallelism runs the same program on every replica at the
same time, so the timeline follows one representative replica; what the other
replicas do shows up in the collective durations, which the collective engine
computes over every replica and link of the group (see
:mod:`wus_sim.collectives`).

Two streams:

* ``core``: the replica's compute (forward, backward, update run one at a time).
  One process, the training loop itself, runs it, so it needs no resource:
  compute is a timeout in that process;
* ``net``: the replica group's ICI links, a FIFO SimPy resource (SimPy serves
  simultaneous requests in the order they were made, and this module makes
  them in a fixed order, so runs are deterministic). Every collective of a step uses all
  links of the group, so two collectives that are ready at once queue: the
  second waits for the first (they contend). A collective and compute overlap.

A :class:`StepProgram` is plain data: per-layer compute, gradient buckets with
the collective each needs and when it may start, the update, and (sharded
update) the weight all-gathers.

Fully-sharded weights (``fully-sharded``): a bucket's forward cannot start before
its weight all-gather has finished. The gathers of a pass (forward, then backward
in reverse order) are issued on the network in bucket order, ``gather_prefetch``
buckets ahead of the compute: the first ``gather_prefetch + 1`` when the pass
begins (the forward's at the step's start, the backward's when the forward ends),
then the next one each time the compute finishes a bucket, or at once when the
compute needs a bucket not yet issued (a layer whose tensors straddle buckets). So
at most ``gather_prefetch + 1`` buckets are gathered at a time, which is what
:mod:`wus_sim.model.memory` charges. In backward, a bucket's next gather is issued before
the reduce-scatter of the bucket just finished (PyTorch FSDP's default
``BACKWARD_PRE``), so the compute is not left waiting behind a reduce-scatter. :func:`run_timeline` simulates ``steps``
consecutive steps and reports the steady-state period, because an all-gather
that overlaps the next step's forward makes one step in isolation misleading.
"""

from dataclasses import dataclass, field

from .params import POINT_KEYS

__all__ = [
    "TimelineBucket", "StepProgram", "Interval", "TimelineResult", "run_timeline",
    "BREAKDOWN_PARTS",
]

BREAKDOWN_PARTS = ("overhead_s", "host_loop_s", "op_launch_s", "fwd_s", "bwd_s", "batch_norm_s", "update_s",
                   "exposed_comm_s", "extra_reduction_s", "idle_s")
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
on nothing the model knows (zero in a well-formed program)."""


@dataclass(frozen=True)
class TimelineBucket:
    """One fused bucket as the timeline sees it: the layers whose backward completes its
    gradients and the durations of its collectives (the bucket's tensors and bytes are the
    planner's :class:`~wus_sim.training.planner.Bucket`)."""

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


@dataclass(frozen=True)
class TimelineResult:
    step_time_s: float
    """Steady-state period between the starts of consecutive steps."""
    breakdown: dict
    """Seconds per part of the measured step (keys: :data:`BREAKDOWN_PARTS`)."""
    intervals: tuple
    """Every activity of every simulated step."""
    step_starts_s: tuple
    """Simulated time at which each step's forward began."""
    events: int

    def __repr__(self):
        return (f"<TimelineResult step {self.step_time_s:.6g} s over {len(self.step_starts_s)} step(s), "
                f"{len(self.intervals)} intervals, {self.events} events>")
    """SimPy events processed."""


def run_timeline(program, steps=3):
    """Simulate *steps* consecutive training steps of *program*.

    The step time is the period between the last two step starts (with
    ``steps >= 3`` the first, which lacks a previous all-gather to overlap,
    is excluded from the measurement).
    """
    import simpy

    low = POINT_KEYS["steps"].minimum  # the table's rule (one period needs two step starts)
    if steps < low:
        raise ValueError(f'"steps" must be >= {low:g}')
    env = simpy.Environment()
    net = simpy.Resource(env, capacity=1)
    intervals = []
    starts = []
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

    def compute(kind, name, t_s, step):
        """Run on the core (only the training loop does) and record the interval."""
        t0 = env.now
        yield env.timeout(t_s)
        intervals.append(Interval("core", kind, name, t0, env.now, step, {}))

    def on_net(kind, name, t_s, step, args=None):
        """Hold the group's links for *t_s* (after the collectives queued before) and record it."""
        with net.request() as req:
            yield req
            t0 = env.now
            yield env.timeout(t_s)
            intervals.append(Interval("net", kind, name, t0, env.now, step, args or {}))

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

    def gather(b, label, step, ready):
        """All-gather bucket *b*'s weights for the *label* pass, then mark it ready."""
        bk = buckets[b]
        nbytes, t_s = ((bk.fwd_gather_nbytes, bk.fwd_gather_time_s) if label == "forward"
                       else (bk.bwd_gather_nbytes, bk.bwd_gather_time_s))
        yield from on_net("gather", f"all-gather {bk.name} for {label}", t_s, step,
                          {"op": "all-gather", "nbytes": nbytes, "for": label})
        ready.succeed()

    def train(env):
        # Before the first step every replica holds full weights.
        gathered = [env.event().succeed() for _ in buckets]
        for step in range(steps):
            starts.append(env.now)
            fwd_pass = _GatherPass(env, fwd_seq, program.gather_prefetch,
                                   lambda b, ready, step=step: gather(b, "forward", step, ready))
            if program.step_overhead_s > 0:
                yield from compute("overhead", "step overhead", program.step_overhead_s, step)
            if program.host_loop_s > 0:
                yield from compute("host", "host loop share", program.host_loop_s, step)
            for layer in range(nlayers):
                for b in layer_buckets[layer]:
                    yield gathered[b]
                    ev = fwd_pass.wait(b)
                    if ev is not None:
                        yield ev
                yield from compute("fwd", f"fwd {layer_names[layer]}", program.fwd_layer_s[layer], step)
                if fwd_bn[layer] > 0:
                    yield from compute("bn", f"batch-norm all-reduce {layer_names[layer]}", fwd_bn[layer], step)
                for b in fwd_last[layer]:
                    fwd_pass.finished(b)
            bwd_pass = _GatherPass(env, bwd_seq, program.gather_prefetch,
                                   lambda b, ready, step=step: gather(b, "backward", step, ready))
            grad_done = [None] * len(buckets)
            pending = list(grad_order)

            def launch_ready(upto_layer):
                while pending and buckets[pending[0]].first_layer >= upto_layer:
                    b = pending.pop(0)
                    bk = buckets[b]
                    grad_done[b] = env.process(on_net(
                        "grad", f"{bk.grad_op} {bk.name}", bk.grad_time_s, step,
                        {"op": bk.grad_op, "nbytes": bk.grad_nbytes}))

            for layer in reversed(range(nlayers)):
                for b in layer_buckets[layer]:
                    ev = bwd_pass.wait(b)
                    if ev is not None:
                        yield ev
                if bwd_bn[layer] > 0:
                    yield from compute("bn", f"batch-norm all-reduce {layer_names[layer]}", bwd_bn[layer], step)
                yield from compute("bwd", f"bwd {layer_names[layer]}", program.bwd_layer_s[layer], step)
                for b in bwd_last[layer]:
                    bwd_pass.finished(b)  # before the reduce-scatter below: it queues first
                if program.overlap_grad_reduce:
                    launch_ready(layer)
            launch_ready(-1)
            for ev in grad_done:
                yield ev
            for i, t_s in enumerate(program.extra_reduction_s):
                yield env.process(on_net("extra", f"extra all-reduce {i}", t_s, step))
            yield from compute("update", "update", program.update_s, step)
            gathered = [env.event().succeed() for _ in buckets]
            for b in gather_order:
                bk = buckets[b]
                if bk.gather_nbytes > 0:
                    gathered[b] = env.process(on_net(
                        "gather", f"all-gather {bk.name}", bk.gather_time_s, step,
                        {"op": "all-gather", "nbytes": bk.gather_nbytes}))
            if not program.overlap_all_gather:
                for ev in gathered:
                    yield ev
        # Where step `steps` would begin: closes the last measured step.
        starts.append(env.now)
        for ev in gathered:
            yield ev

    env.process(train(env))
    events = 0
    try:
        while True:
            env.step()
            events += 1
    except simpy.core.EmptySchedule:
        pass
    # The period is measured between the last two step starts: starts[-1] is
    # where step `steps` would begin, so the last simulated step is measured.
    t0, t1 = starts[-2], starts[-1]
    breakdown = _breakdown(intervals, t0, t1)
    return TimelineResult(
        step_time_s=t1 - t0,
        breakdown=breakdown,
        intervals=tuple(intervals),
        step_starts_s=tuple(starts),
        events=events,
    )


class _GatherPass:
    """The weight all-gathers of one pass over the buckets, issued in order and at most
    *prefetch* buckets ahead of the one the compute is on (see the module doc)."""

    def __init__(self, env, seq, prefetch, start):
        self.env = env
        self.seq = seq
        """Buckets in the order the pass uses them."""
        self.prefetch = prefetch
        self.start = start
        """``(bucket, ready event) -> generator``: the gather process."""
        self.pos = {b: i for i, b in enumerate(seq)}
        self.ready = {b: env.event() for b in seq}
        """Succeeds when the bucket's weights are gathered."""
        self.issued = 0
        self._issue_upto(prefetch)

    def _issue_upto(self, i):
        while self.issued <= min(i, len(self.seq) - 1):
            b = self.seq[self.issued]
            self.issued += 1
            self.env.process(self.start(b, self.ready[b]))

    def wait(self, b):
        """The event the compute waits for before using bucket *b* (issued now if not yet),
        or ``None`` if the pass does not gather *b*."""
        if b not in self.pos:
            return None
        self._issue_upto(self.pos[b])
        return self.ready[b]

    def finished(self, b):
        """The compute is done with bucket *b*: the gather *prefetch* + 1 places on may start."""
        self._issue_upto(self.pos[b] + self.prefetch + 1)


def _clip(intervals, t0, t1):
    for iv in intervals:
        s, e = max(iv.start_s, t0), min(iv.end_s, t1)
        if e > s:
            yield iv, s, e


def _breakdown(intervals, t0, t1):
    """Split ``[t0, t1]`` by what the core does, and while it idles, by what the network does."""
    out = dict.fromkeys(BREAKDOWN_PARTS, 0.0)
    core_kinds = {"overhead": "overhead_s", "host": "host_loop_s", "fwd": "fwd_s", "bwd": "bwd_s", "bn": "batch_norm_s",
                  "update": "update_s"}
    busy = []
    for iv, s, e in _clip([i for i in intervals if i.track == "core"], t0, t1):
        out[core_kinds[iv.kind]] += e - s
        busy.append((s, e))
    busy.sort()
    gaps, cur = [], t0
    for s, e in busy:
        if s > cur:
            gaps.append((cur, s))
        cur = max(cur, e)
    if cur < t1:
        gaps.append((cur, t1))
    net = sorted(((s, e, iv.kind) for iv, s, e in _clip([i for i in intervals if i.track == "net"], t0, t1)))
    for gs, ge in gaps:
        covered = 0.0
        for s, e, kind in net:
            a, b = max(s, gs), min(e, ge)
            if b > a:
                part = "extra_reduction_s" if kind == "extra" else "exposed_comm_s"
                out[part] += b - a
                covered += b - a  # net intervals never overlap each other (one FIFO resource)
        out["idle_s"] += (ge - gs) - covered
    return out
