"""The training-step timeline evaluated in program order, without an event queue.

:mod:`.timeline` runs a :class:`~.timeline.StepProgram` as SimPy processes; that engine is
the reference. This module computes the same timeline with a few floats, because its
structure needs no event queue:

* the core is one sequential process: each activity starts when the previous one ends,
  or later, when it waits for a collective, at ``max(now, that collective's end)``;
* every collective is issued by that one process (gradient buckets as backward produces
  them, the optimizer's small all-reduces, the weight all-gathers, the fully-sharded
  passes' gathers), at the simulated time it is issued, in the order the program issues
  them; and the network is one FIFO server. So collectives are served in issue order and
  each starts at ``max(issued at, the previous one's end)``: the FIFO queue's recurrence.

SimPy computes every time as ``now + duration`` and resumes a waiting process at the time
of the event it waits for, so with the same float operations in the same order the times
here are the SimPy engine's to the last bit (tests/training/timeline/test_timeline_direct.py checks
step times, step starts, breakdowns and every activity against SimPy on random programs).
It runs several times faster, which is what a sweep of many points spends its time on; the
activities' names are written only if someone asks for them (a trace does, a sweep does not).
"""

from ...inputs.memo import IdentityMemo
from .step_program import GatherOrder, TimelineResult, check_program, step_breakdown

__all__ = ["run_timeline_direct"]


def run_timeline_direct(program, steps=3):
    """Evaluate *steps* consecutive steps of *program*; the same :class:`~.timeline.TimelineResult`
    as :func:`~.timeline.run_timeline` (its ``events`` counts activities, not SimPy events)."""
    shape, starts, core, net, first_kept = _evaluate(program, steps, record_all=False)
    t0, t1 = starts[-2], starts[-1]
    # only the last step's core activities and the collectives still running in it can fall in
    # [t0, t1]; the others would add nothing (the same float operations on the ones that do)
    in_step = [n for n in net if n[3] > t0]
    names = _Names(program, shape.layer_names)

    def activities():  # evaluated again, every step's activities kept: the same floats
        _, _, every, net_again, _ = _evaluate(program, steps, record_all=True)
        return names.activities(every, net_again)

    # every step runs the same core activities (the program's), so the last one's count them all
    return TimelineResult(step_time_s=t1 - t0, breakdown=step_breakdown(core[first_kept:], in_step, t0, t1),
                          step_starts_s=tuple(starts), events=(len(core) - first_kept) * steps + len(net),
                          _activities=activities)


def _evaluate(program, steps, record_all):
    """``(shape, step starts, core activities, network activities, where the last step's core
    activities begin)``; the core's activities of the steps before the last only with
    *record_all* (a sweep needs the last step's alone: its breakdown)."""
    shape = check_program(program, steps)
    buckets = program.buckets
    nlayers = len(program.fwd_layer_s)
    # plain floats: the same IEEE doubles as numpy's scalars, without their per-operation cost
    fwd_s, bwd_s = list(map(float, program.fwd_layer_s)), list(map(float, program.bwd_layer_s))
    fwd_bn, bwd_bn = list(map(float, shape.fwd_bn)), list(map(float, shape.bwd_bn))
    grad_s = [float(bk.grad_time_s) for bk in buckets]
    first_layer = [bk.first_layer for bk in buckets]
    layer_buckets = shape.layer_buckets
    gathers = [(b, float(buckets[b].gather_time_s)) for b in shape.gather_order if buckets[b].gather_nbytes > 0]
    extra_s = list(map(float, program.extra_reduction_s))
    overhead_s, host_s, update_s = (float(program.step_overhead_s), float(program.host_loop_s),
                                    float(program.update_s))
    fully_sharded = bool(shape.fwd_seq or shape.bwd_seq)
    # a layer's forward waits for its buckets only when their gathers can still be running: the
    # fully-sharded passes, or the sharded update's all-gathers overlapped with the next forward
    # (otherwise the core waited for them at the end of the step, and they ended before now)
    waits_in_forward = fully_sharded or program.overlap_all_gather
    # records: core (kind, index, start_s, end_s, step) in program order; net (kind, index,
    # start_s, end_s, step, pass) in issue order, which is the FIFO's service order
    core = []
    net = []
    starts = []
    now = net_free = 0  # SimPy's clock starts at the integer 0

    if fully_sharded:
        fwd, bwd = _PASS_PLANS.get((shape,), program.gather_prefetch, lambda: (
            _PassPlan(shape.fwd_seq, shape.fwd_last, layer_buckets, program.gather_prefetch),
            _PassPlan(shape.bwd_seq, shape.bwd_last, layer_buckets, program.gather_prefetch)))
        fwd_times = [float(b.fwd_gather_time_s) for b in buckets]
        bwd_times = [float(b.bwd_gather_time_s) for b in buckets]
        end = [0.0] * len(buckets)  # when each bucket's gather of the current pass ends
        fwd_waits = fwd.waits
    else:  # the sharded update's gathers overlapped with forward: no pass gathers a layer's buckets
        fwd_waits = [[(b, -1) for b in bs] for bs in layer_buckets] if waits_in_forward else None
    append = net.append
    gathered = [0.0] * len(buckets)  # before the first step every replica holds full weights
    for step in range(steps):
        starts.append(now)
        last_step_core = len(core)
        record = record_all or step == steps - 1
        if fully_sharded:
            seq, times, issued = fwd.seq, fwd_times, 0
            if fwd.first >= 0:
                issued, net_free = _issue(seq, 0, fwd.first, now, net_free, times, end, append, step, "forward")
        if overhead_s > 0:
            t0, now = now, now + overhead_s
            if record:
                core.append(("overhead", 0, t0, now, step))
        if host_s > 0:
            t0, now = now, now + host_s
            if record:
                core.append(("host", 0, t0, now, step))
        for layer in range(nlayers):
            if waits_in_forward:
                for b, i in fwd_waits[layer]:
                    if gathered[b] > now:
                        now = gathered[b]
                    if i >= 0:  # the pass gathers b: issued now if not yet; the layer waits for it
                        if issued <= i:
                            issued, net_free = _issue(seq, issued, i, now, net_free, times, end, append, step,
                                                      "forward")
                        if end[b] > now:
                            now = end[b]
            t0, now = now, now + fwd_s[layer]
            if record:
                core.append(("fwd", layer, t0, now, step))
            if fwd_bn[layer] > 0:
                t0, now = now, now + fwd_bn[layer]
                if record:
                    core.append(("bn", layer, t0, now, step))
            if fully_sharded and issued <= fwd.done[layer]:  # done with its buckets: the next gathers start
                issued, net_free = _issue(seq, issued, fwd.done[layer], now, net_free, times, end, append, step,
                                          "forward")
        if fully_sharded:
            seq, times, issued = bwd.seq, bwd_times, 0
            if bwd.first >= 0:
                issued, net_free = _issue(seq, 0, bwd.first, now, net_free, times, end, append, step, "backward")
        pending = shape.grad_order
        nxt, npending = 0, len(pending)
        grads_end = now  # FIFO: the last gradient collective issued ends last
        for layer in reversed(range(nlayers)):
            if fully_sharded:
                for b, i in bwd.waits[layer]:
                    if i >= 0:
                        if issued <= i:
                            issued, net_free = _issue(seq, issued, i, now, net_free, times, end, append, step,
                                                      "backward")
                        if end[b] > now:
                            now = end[b]
            if bwd_bn[layer] > 0:
                t0, now = now, now + bwd_bn[layer]
                if record:
                    core.append(("bn", layer, t0, now, step))
            t0, now = now, now + bwd_s[layer]
            if record:
                core.append(("bwd", layer, t0, now, step))
            if fully_sharded and issued <= bwd.done[layer]:  # before the reduce-scatter below
                issued, net_free = _issue(seq, issued, bwd.done[layer], now, net_free, times, end, append, step,
                                          "backward")
            if program.overlap_grad_reduce:
                # the buckets backward has completed, issued now, served after what is queued
                while nxt < npending and first_layer[pending[nxt]] >= layer:
                    b = pending[nxt]
                    nxt += 1
                    t0 = now if now >= net_free else net_free
                    grads_end = net_free = t0 + grad_s[b]
                    net.append(("grad", b, t0, net_free, step, None))
        while nxt < npending:
            b = pending[nxt]
            nxt += 1
            t0 = now if now >= net_free else net_free
            grads_end = net_free = t0 + grad_s[b]
            net.append(("grad", b, t0, net_free, step, None))
        if grads_end > now:  # the core waits for every gradient collective
            now = grads_end
        for i, t_s in enumerate(extra_s):
            t0 = now if now >= net_free else net_free
            net_free = t0 + t_s
            net.append(("extra", i, t0, net_free, step, None))
            now = net_free
        t0, now = now, now + update_s
        if record:
            core.append(("update", 0, t0, now, step))
        gathered = [0.0] * len(buckets)
        for b, t_s in gathers:
            t0 = now if now >= net_free else net_free
            net_free = t0 + t_s
            net.append(("gather", b, t0, net_free, step, None))
            gathered[b] = net_free
        if not program.overlap_all_gather and gathers and net_free > now:
            now = net_free
    starts.append(now)  # where step `steps` would begin: closes the last measured step
    return shape, starts, core, net, last_step_core


class _Names:
    """Writes the activities' names and arguments as the SimPy engine does."""

    def __init__(self, program, layer_names):
        self.buckets = program.buckets
        self.layer_names = layer_names

    def core(self, kind, i):
        if kind in ("fwd", "bwd"):
            return f"{kind} {self.layer_names[i]}"
        if kind == "bn":
            return f"batch-norm all-reduce {self.layer_names[i]}"
        return {"overhead": "step overhead", "host": "host loop share", "update": "update"}[kind]

    def net(self, kind, i, label):
        if kind == "extra":
            return f"extra all-reduce {i}", {}
        bk = self.buckets[i]
        if kind == "grad":
            return f"{bk.grad_op} {bk.name}", {"op": bk.grad_op, "nbytes": bk.grad_nbytes}
        if label is None:
            return f"all-gather {bk.name}", {"op": "all-gather", "nbytes": bk.gather_nbytes}
        nbytes = bk.fwd_gather_nbytes if label == "forward" else bk.bwd_gather_nbytes
        return f"all-gather {bk.name} for {label}", {"op": "all-gather", "nbytes": nbytes, "for": label}

    def activities(self, core, net):
        """Every activity as ``(track, kind, name, start_s, end_s, step, args)``, in the order
        they end."""
        rows = [(c[3], c[2], 0, i) for i, c in enumerate(core)] + [(n[3], n[2], 1, i) for i, n in enumerate(net)]
        rows.sort()
        out = []
        for _, _, track, i in rows:
            if track == 0:
                kind, j, s, e, step = core[i]
                out.append(("core", kind, self.core(kind, j), s, e, step, {}))
            else:
                kind, j, s, e, step, label = net[i]
                name, args = self.net(kind, j, label)
                out.append(("net", kind, name, s, e, step, args))
        return out


class _PassPlan:
    """A fully-sharded pass's gathers as :class:`GatherOrder` issues them, indexed once per
    program: its buckets in order (*seq*) and, by position in it, where the pass begins
    (:attr:`first`), which position each layer's buckets wait for (:attr:`waits`, -1: not
    gathered by the pass) and up to which position the gathers may run once a layer is done with
    its buckets (:attr:`done`). Several of GatherOrder's calls at one simulated time issue what
    one call up to the furthest of them issues, in the same order at the same times."""

    def __init__(self, seq, last, layer_buckets, prefetch):
        order = GatherOrder(seq, prefetch)
        pos, end = order.pos, len(seq) - 1
        self.seq = seq
        self.first = min(prefetch, end)
        self.waits = [[(b, pos.get(b, -1)) for b in bs] for bs in layer_buckets]
        self.done = [min(max((pos[b] + prefetch + 1 for b in bs), default=-1), end) for bs in last]


_PASS_PLANS = IdentityMemo(maxsize=256)
"""A program's shape (:func:`check_program`'s, memoized) and prefetch -> its two passes' plans."""


def _issue(seq, issued, last, now, net_free, times, end, append, step, label):
    """Issue the pass's gathers from position *issued* through *last* at time *now* on the FIFO
    network (each at ``max(now, the previous one's end)``), recording each; returns the next
    position to issue and the network's free time."""
    while issued <= last:
        b = seq[issued]
        issued += 1
        t0 = now if now >= net_free else net_free
        net_free = t0 + times[b]
        append(("gather", b, t0, net_free, step, label))
        end[b] = net_free
    return issued, net_free
