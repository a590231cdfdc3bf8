"""The direct timeline (program order, no event queue) against the SimPy reference.

Both engines must give the same step time, step starts and breakdown to the last bit, and
the same activities, on any program: random ones here (every strategy's shape, ties and
zero durations included, fully-sharded passes with any prefetch) and the shipped workloads'.
"""

import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.training.timeline.timeline import StepProgram, TimelineBucket, run_timeline

# durations with many ties and zeros (ties are where event order could differ), and arbitrary ones
durations = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]), st.floats(1e-6, 5.0))


@st.composite
def programs(draw):
    nlayers = draw(st.integers(1, 7))
    layer_times = st.lists(durations, min_size=nlayers, max_size=nlayers)
    strategy = draw(st.sampled_from(["replicated", "sharded", "fully-sharded"]))
    cuts = sorted(set(draw(st.lists(st.integers(1, nlayers), max_size=3)) + [nlayers]))
    buckets, lo = [], 0
    keep = draw(st.booleans())  # fully-sharded: weights kept after forward (no backward gathers)
    for hi in cuts:
        layers = tuple(range(lo, hi))
        if not layers:
            continue
        if draw(st.booleans()) and nlayers > 1:  # a bucket whose tensors straddle layers out of order
            layers = tuple(sorted({*layers, draw(st.integers(0, nlayers - 1))}))
        full = strategy == "fully-sharded"
        buckets.append(TimelineBucket(
            name=f"b{lo}", first_layer=min(layers), layers=layers,
            grad_op="all-reduce" if strategy == "replicated" else "reduce-scatter",
            grad_nbytes=1.0, grad_time_s=draw(durations),
            gather_nbytes=1.0 if strategy == "sharded" else 0.0,
            gather_time_s=draw(durations) if strategy == "sharded" else 0.0,
            fwd_gather_nbytes=1.0 if full else 0.0, fwd_gather_time_s=draw(durations) if full else 0.0,
            bwd_gather_nbytes=1.0 if full and not keep else 0.0,
            bwd_gather_time_s=draw(durations) if full and not keep else 0.0))
        lo = hi
    bn = draw(st.booleans())
    return StepProgram(
        strategy=strategy, fwd_layer_s=tuple(draw(layer_times)), bwd_layer_s=tuple(draw(layer_times)),
        buckets=tuple(buckets), update_s=draw(durations),
        extra_reduction_s=tuple(draw(st.lists(durations, max_size=2))) if strategy == "sharded" else (),
        overlap_grad_reduce=draw(st.booleans()), overlap_all_gather=draw(st.booleans()),
        step_overhead_s=draw(durations), host_loop_s=draw(durations),
        gather_prefetch=draw(st.integers(0, 3)),
        fwd_batch_norm_s=tuple(draw(layer_times)) if bn else (),
        bwd_batch_norm_s=tuple(draw(layer_times)) if bn else ())


def _same(program, steps):
    ref = run_timeline(program, steps, engine="simpy")
    out = run_timeline(program, steps, engine="direct")
    assert out.step_time_s == ref.step_time_s
    assert out.step_starts_s == ref.step_starts_s
    assert out.breakdown == ref.breakdown
    assert out.events == len(out.activities)  # counted from the last step's: every activity of every step
    # the same activities; those ending at the same time may be listed in either order
    key = lambda a: (a[4], a[3], a[0], a[1], a[2], a[5])  # noqa: E731
    assert sorted(out.activities, key=key) == sorted(ref.activities, key=key)
    assert [(i.track, i.name, i.start_s, i.end_s) for i in sorted(out.intervals, key=lambda i: (i.end_s, i.name))] \
        == [(i.track, i.name, i.start_s, i.end_s) for i in sorted(ref.intervals, key=lambda i: (i.end_s, i.name))]
    return ref, out


@settings(max_examples=400, deadline=None)
@given(programs(), st.integers(2, 4))
def test_direct_timeline_is_the_simpy_timeline(program, steps):
    _same(program, steps)


@pytest.mark.parametrize("workload, topology, optimizer, options", [
    ("resnet50", "tpu-v3-32", "lars", {}),
    ("resnet50", "tpu-v3-128", "lars", {"bn_group_replicas": 8}),
    ("transformer-big", "tpu-v3-128", "adam", {"overlap_all_gather": False}),
    ("bert-large", "tpu-v3-128", "lamb", {"gather_prefetch": 0}),
])
def test_direct_timeline_on_shipped_workloads(workload, topology, optimizer, options, monkeypatch):
    import wus_sim.training.step as step

    programs_seen = []
    real = step.run_timeline

    def record(program, steps=3, **kw):
        programs_seen.append((program, steps))
        return real(program, steps, **kw)

    monkeypatch.setattr(step, "run_timeline", record)
    step.simulate_strategies(workload, topology, optimizer, ("replicated", "sharded", "fully-sharded"),
                             options=step.StepOptions(**options))
    assert len(programs_seen) == 3
    for program, steps in programs_seen:
        _same(program, steps)


def test_a_waiting_core_and_a_busy_network_by_hand():
    """Two layers of 1 s, one bucket each, gradient all-reduces of 3 s, overlapped: backward
    of layer 1 ends at 3, its all-reduce runs 3-6; layer 0's ends at 4, queues, runs 6-9; the
    update (1 s) waits for it: 9-10. A step is 10 s; the core waits 5 s of it on the network."""
    program = StepProgram(
        strategy="replicated", fwd_layer_s=(1.0, 1.0), bwd_layer_s=(1.0, 1.0), update_s=1.0,
        buckets=(TimelineBucket("a", 0, (0,), "all-reduce", 1.0, 3.0),
                 TimelineBucket("b", 1, (1,), "all-reduce", 1.0, 3.0)))
    for engine in ("direct", "simpy"):
        out = run_timeline(program, 3, engine=engine)
        assert out.step_time_s == 10.0
        assert out.breakdown["exposed_comm_s"] == 5.0
        assert out.breakdown["fwd_s"] == out.breakdown["bwd_s"] == 2.0


def test_unknown_engine_is_an_error():
    program = StepProgram(strategy="replicated", fwd_layer_s=(1.0,), bwd_layer_s=(1.0,), update_s=1.0, buckets=())
    with pytest.raises(ValueError, match="timeline engine"):
        run_timeline(program, 3, engine="fast")


def _breakdown_by_measure(activities, t0, t1):
    """The breakdown computed another way: the core's time by kind; each network interval's
    time while the core is busy taken off it (the core's intervals are disjoint), the rest
    exposed (or optimizer reductions); idle what is left of the period."""
    parts = {"overhead": "overhead_s", "host": "host_loop_s", "fwd": "fwd_s", "bwd": "bwd_s", "bn": "batch_norm_s",
             "update": "update_s"}
    clip = [(track, kind, max(s, t0), min(e, t1)) for track, kind, _, s, e, *_ in activities]
    clip = [c for c in clip if c[3] > c[2]]
    out = {}
    for track, kind, s, e in clip:
        if track == "core":
            out[parts[kind]] = out.get(parts[kind], 0.0) + (e - s)
    busy = [(s, e) for track, _, s, e in clip if track == "core"]
    for track, kind, s, e in clip:
        if track == "net":
            hidden = sum(max(0.0, min(e, be) - max(s, bs)) for bs, be in busy)
            part = "extra_reduction_s" if kind == "extra" else "exposed_comm_s"
            out[part] = out.get(part, 0.0) + (e - s - hidden)
    out["idle_s"] = (t1 - t0) - sum(out.values())
    return out


@settings(max_examples=300, deadline=None)
@given(programs(), st.integers(2, 4))
def test_breakdown_is_its_definition(program, steps):
    """The breakdown both engines share, against the same quantities measured another way."""
    out = run_timeline(program, steps, engine="simpy")
    t0, t1 = out.step_starts_s[-2], out.step_starts_s[-1]
    want = _breakdown_by_measure(out.activities, t0, t1)
    for part, value in out.breakdown.items():
        assert value == pytest.approx(want.get(part, 0.0), rel=1e-9, abs=1e-12 * max(1.0, t1)), part
