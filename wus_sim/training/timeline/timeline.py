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

from .step_program import (BREAKDOWN_PARTS, GatherOrder, Interval, ProgramShape, StepProgram, TimelineBucket,
                           TimelineResult, check_program, step_breakdown)

__all__ = [
    "TimelineBucket", "StepProgram", "Interval", "TimelineResult", "run_timeline",
    "BREAKDOWN_PARTS", "ProgramShape", "check_program", "step_breakdown",
]

def run_timeline(program, steps=3, *, engine="direct"):
    """Simulate *steps* consecutive training steps of *program*.

    The step time is the period between the last two step starts (with
    ``steps >= 3`` the first, which lacks a previous all-gather to overlap,
    is excluded from the measurement). *engine*: ``"direct"`` evaluates it in program order
    (:mod:`.timeline_direct`, the same times to the last bit, several times faster);
    ``"simpy"`` runs it as SimPy processes, the reference the direct one is tested against.
    """
    if engine == "direct":
        from .timeline_direct import run_timeline_direct

        return run_timeline_direct(program, steps)
    if engine != "simpy":
        raise ValueError(f'timeline engine must be "direct" or "simpy", not {engine!r}')
    import simpy

    shape = check_program(program, steps)
    env = simpy.Environment()
    net = simpy.Resource(env, capacity=1)
    core_log, net_log = [], []  # (kind, name, start_s, end_s, step[, args]) as each activity ends
    activities = []
    starts = []
    nlayers = len(program.fwd_layer_s)
    buckets = program.buckets
    layer_buckets, grad_order, gather_order = shape.layer_buckets, shape.grad_order, shape.gather_order
    layer_names, fwd_bn, bwd_bn = shape.layer_names, shape.fwd_bn, shape.bwd_bn
    fwd_seq, bwd_seq, fwd_last, bwd_last = shape.fwd_seq, shape.bwd_seq, shape.fwd_last, shape.bwd_last

    def compute(kind, name, t_s, step):
        """Run on the core (only the training loop does) and record the interval."""
        t0 = env.now
        yield env.timeout(t_s)
        core_log.append((kind, name, t0, env.now, step))
        activities.append(("core", kind, name, t0, env.now, step, {}))

    def on_net(kind, name, t_s, step, args=None):
        """Hold the group's links for *t_s* (after the collectives queued before) and record it."""
        with net.request() as req:
            yield req
            t0 = env.now
            yield env.timeout(t_s)
            net_log.append((kind, name, t0, env.now, step, args or {}))
            activities.append(("net", kind, name, t0, env.now, step, args or {}))

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
    return TimelineResult(step_time_s=t1 - t0, breakdown=step_breakdown(core_log, net_log, t0, t1),
                          step_starts_s=tuple(starts), events=events, _activities=tuple(activities))


class _GatherPass:
    """The weight all-gathers of one pass as SimPy processes, issued by :class:`GatherOrder`."""

    def __init__(self, env, seq, prefetch, start):
        self.env = env
        self.order = GatherOrder(seq, prefetch)
        self.start = start
        """``(bucket, ready event) -> generator``: the gather process."""
        self.ready = {b: env.event() for b in seq}
        """Succeeds when the bucket's weights are gathered."""
        self._issue(self.order.first())

    def _issue(self, buckets):
        for b in buckets:
            self.env.process(self.start(b, self.ready[b]))

    def wait(self, b):
        """The event the compute waits for before using bucket *b* (issued now if not yet),
        or ``None`` if the pass does not gather *b*."""
        now = self.order.before_use(b)
        if now is None:
            return None
        self._issue(now)
        return self.ready[b]

    def finished(self, b):
        """The compute is done with bucket *b*."""
        self._issue(self.order.after_use(b))
