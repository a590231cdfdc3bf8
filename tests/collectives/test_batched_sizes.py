"""Several sizes of one plan in one window-engine run (:func:`window_engine.run_schedules`),
and the batch entry of the api and the step simulator built on it.

Checked here: every size's outcome is the same as its run alone, to the last bit (random
faulty slices, chunks, reduction costs, repeated and tiny sizes), and agrees with the SimPy
reference; a contended case derived by hand; ``collective_times`` fills the memo with exactly
the per-size times; a step point's times do not move with the prefetch.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from wus_sim.collectives import ALGORITHMS, REDUCE_OPS, api
from wus_sim.collectives.engines import window_engine
from wus_sim.collectives.schedules.messages import compile_messages
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.collectives.engines.simpy_engine import run_schedule as simpy_run
from wus_sim.hardware.topology_files import load_topology
from wus_sim.hardware.link_faults import with_link_faults
from wus_sim.hardware.network import ROUTINGS

from test_window_engine import drawn_plan, faulty_slices

US = 1e-6


def _alone_and_batched(plan, sizes, chunks, red, routing="store-and-forward"):
    """``(alone, batched)`` outcomes of *sizes* of *plan*: one run each, and one run for all."""
    scheds = [compile_messages(plan, S, chunks=chunks, reduce_Bps=red) for S in sizes]
    alone = [window_engine.run_schedule(s, routing=routing) for s in scheds]
    return alone, window_engine.run_schedules(scheds, routing=routing)


def _assert_same(a, b):
    assert b.time_s == a.time_s  # bit for bit
    assert b.events == a.events
    assert b.windows == a.windows
    assert np.array_equal(b.event_s, a.event_s)
    assert np.array_equal(b.link_messages, a.link_messages)
    assert np.allclose(b.link_bytes, a.link_bytes, rtol=1e-12, atol=0)
    assert np.allclose(b.link_busy_s, a.link_busy_s, rtol=1e-12, atol=0)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(ALGORITHMS), bidir=st.booleans(),
       chunks=st.integers(1, 2), red=st.sampled_from([None, 30e9]),
       sizes=st.lists(st.sampled_from([64.0, 1e5, 3 * 2**20 + 7, 5e7, 1.3e8]), min_size=1, max_size=3),
       order=st.randoms(use_true_random=False), routing=st.sampled_from(ROUTINGS))
def test_every_size_of_a_batch_is_its_run_alone(topo, op, alg, bidir, chunks, red, sizes, order, routing):
    """2-4 sizes, one of them repeated, one tiny (64 B: hops of picoseconds, the latency alone)."""
    plan = drawn_plan(topo, op, alg, bidir)
    sizes = sizes + [sizes[0], 64.0]
    order.shuffle(sizes)
    try:
        alone, batched = _alone_and_batched(plan, sizes, chunks, red, routing)
    except window_engine.WindowTooSmall:
        assume(False)
    assert len(batched) == len(sizes)
    for a, b in zip(alone, batched):
        _assert_same(a, b)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), op=st.sampled_from(REDUCE_OPS), bidir=st.booleans(), red=st.sampled_from([None, 30e9]),
       routing=st.sampled_from(ROUTINGS))
def test_a_batch_agrees_with_simpy(topo, op, bidir, red, routing):
    """Against the reference that shares no code with the window engine (to the last bits but
    for ties between equal keys, as tests/collectives/engines/test_window_engine.py explains)."""
    plan = plan_collective(topo, op, "ring", bidirectional=bidir)
    scheds = [compile_messages(plan, S, reduce_Bps=red) for S in (2e6, 64.0, 7e7)]
    try:
        batched = window_engine.run_schedules(scheds, routing=routing)
    except window_engine.WindowTooSmall:
        assume(False)
    for s, b in zip(scheds, batched):
        ref = simpy_run(s, routing=routing)
        assert b.time_s == pytest.approx(ref.time_s, rel=1e-12, abs=0)
        assert np.array_equal(b.link_messages, ref.link_messages)
        assert np.allclose(b.link_bytes, ref.link_bytes, rtol=1e-12, atol=0)


def test_contended_detours_by_hand_in_one_batch():
    """torus:4 with cable 0-1 down, bidirectional reduce-scatter (derived message by message in
    tests/collectives/test_failed_links.py): 4 MB takes 35 us, whichever copy of a batch it is; the 8 MB
    copy between them agrees with SimPy; each copy counts its own 36 hops (per ring 3 steps x
    (3 one-hop edges + a 3-hop detour)) and the 8 MB copy carries twice the bytes."""
    topo = load_topology("torus:4", failed_links="0+x")
    plan = plan_collective(topo, "reduce-scatter", "ring", bidirectional=True)
    scheds = [compile_messages(plan, S) for S in (4e6, 8e6, 4e6)]
    out = window_engine.run_schedules(scheds)
    assert out[0].time_s == pytest.approx(35 * US, rel=1e-12)
    assert out[2].time_s == out[0].time_s
    assert out[1].time_s == pytest.approx(simpy_run(scheds[1]).time_s, rel=1e-12)
    assert out[0].events == out[1].events == 36  # per ring 3 steps x (3 one-hop edges + a 3-hop detour)
    assert out[1].link_bytes.sum() == pytest.approx(2 * out[0].link_bytes.sum(), rel=1e-12)


def test_schedules_of_different_structures_are_refused():
    topo = load_topology("torus:4", failed_links="0+x")
    a = compile_messages(plan_collective(topo, "reduce-scatter", "ring", bidirectional=True), 4e6)
    b = compile_messages(plan_collective(topo, "all-gather", "ring", bidirectional=True), 4e6)
    with pytest.raises(ValueError):
        window_engine.run_schedules([a, b])


def test_collective_times_fills_the_memo_with_the_per_size_times():
    """The batch entry, then the memoized one, give the times each size gets alone (memo
    cleared between), bit for bit; sizes repeated, in any order, exact and contended plans."""
    topo = with_link_faults(load_topology("tpu-v3-32"), failed_links=1, seed=0)
    sizes = [3e7, 311296.0, 3e7, 1.4e8, 4194304.0]
    for op, alg, bidir in (("all-reduce", "ring", True), ("reduce-scatter", "ring", True),
                           ("all-gather", "ring", False), ("all-reduce", "2d", True), ("all-reduce", "2d-split", False)):
        alone = []
        for S in sizes:
            api.clear_caches()
            alone.append(api.collective_time(topo, op, alg, S, bidirectional=bidir))
        api.clear_caches()
        batch = api.collective_times(topo, op, alg, sizes, bidirectional=bidir)
        assert batch == alone
        assert [api.collective_time(topo, op, alg, S, bidirectional=bidir) for S in sizes] == alone
    api.clear_caches()


def test_more_sizes_than_a_batch_run_in_several_batches(monkeypatch):
    """Past MAX_BATCH sizes the batch entry runs them in groups (memory), each size still
    getting its time alone."""
    runs = []
    real = window_engine.run_schedules

    def spy(scheds, **kw):
        runs.append(len(scheds))
        return real(scheds, **kw)

    monkeypatch.setattr(api, "MAX_BATCH", 3)
    monkeypatch.setattr(window_engine, "run_schedules", spy)
    topo = with_link_faults(load_topology("tpu-v3-32"), failed_links=1, seed=0)
    sizes = [1e6 * (i + 1) for i in range(7)]
    api.clear_caches()
    batch = api.collective_times(topo, "all-reduce", "2d", sizes, bidirectional=True)
    assert runs[:3] == [3, 3, 1]
    monkeypatch.setattr(window_engine, "run_schedules", real)
    alone = []
    for S in sizes:
        api.clear_caches()
        alone.append(api.collective_time(topo, "all-reduce", "2d", S, bidirectional=True))
    assert batch == alone
    api.clear_caches()


def test_a_step_point_does_not_move_with_the_prefetch(monkeypatch):
    """transformer-big on tpu-v3-32 with a failed cable, both strategies: every time of the
    programs is the same with the sizes prefetched in batches and with each asked alone."""
    import wus_sim.collectives as collectives
    from wus_sim.training import step

    topo = with_link_faults(load_topology("tpu-v3-32"), failed_links=1, seed=0)

    def run():
        api.clear_caches()
        results = step.simulate_strategies("transformer-big", topo, "adam", ("replicated", "sharded")).results
        return {s: (r.step_time_s, repr(r.breakdown), repr(r.timeline)) for s, r in results.items()}

    calls = []
    batch_entry = api.collective_times
    monkeypatch.setattr(collectives, "collective_times", lambda *a, **k: calls.append(a) or batch_entry(*a, **k))
    batched = run()
    assert len(calls) == 3  # all-reduce for replicated; reduce-scatter and all-gather for sharded
    monkeypatch.setattr(collectives, "collective_times", lambda *a, **k: None)
    alone = run()
    api.clear_caches()
    assert batched == alone


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(ALGORITHMS), bidir=st.booleans(),
       red=st.sampled_from([None, 30e9]), big_first=st.booleans())
def test_each_copy_bounds_its_clean_rings_by_its_own_size(topo, op, alg, bidir, red, big_first):
    """The bound that lets a copy's clean ring wait (tests/collectives/engines/test_clean_rings.py) holds for every
    copy of a batch: the nodes waiting on a clean ring's last step are ready no earlier than
    the bound the run computed for it, from that copy's own start times and piece size."""
    plan = drawn_plan(topo, op, alg, bidir)
    sizes = [5e7, 1e5] if big_first else [1e5, 5e7]
    scheds = [compile_messages(plan, S, reduce_Bps=red) for S in sizes]
    bounds = []  # (global units, their bounds), as the run computed them
    real = window_engine.earliest_outputs

    def spy(units, which, start_t, hop_floor):
        out = real(units, which, start_t, hop_floor)
        bounds.append((which.copy(), out.copy()))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(window_engine, "earliest_outputs", spy)
        try:
            outs = window_engine.run_schedules(scheds)
        except window_engine.WindowTooSmall:
            outs = None
    assume(outs is not None)
    assume(bounds)
    sched = scheds[0]
    units = window_engine.clean_units_of(sched, window_engine.graph_of(sched))
    U = len(units.size)
    _, rptr, rch, dptr, dch = sched.dependency_arrays()
    for which, bound in bounds:
        for g, b in zip(which.tolist(), bound.tolist()):
            c, u = divmod(g, U)
            L = sched.structure.layouts[units.layout[u]]
            last = L.ids[-1, 0, units.direction[u], units.ring[u], :]
            waiting = np.concatenate([np.concatenate([rch[rptr[m]:rptr[m + 1]], dch[dptr[m]:dptr[m + 1]]])
                                      for m in last])
            assert outs[c].event_s[waiting].min() >= b


def test_a_window_too_small_for_one_size_falls_back_for_the_batch():
    """0.1 B on links without latency: a hop is shorter than the tie quantum, so that size's
    window holds nothing alone, and in a batch; the batch raises, and ``collective_times``
    gives every size the time it gets alone (SimPy for that one)."""
    from make_topology import make

    topo = with_link_faults(make((4, 4), True, hop_latency_us=0.0), failed_links="0+x")
    plan = plan_collective(topo, "all-reduce", "2d", bidirectional=True)
    with pytest.raises(window_engine.WindowTooSmall):
        window_engine.run_schedule(compile_messages(plan, 0.1))
    with pytest.raises(window_engine.WindowTooSmall):
        window_engine.run_schedules([compile_messages(plan, S) for S in (1e6, 0.1)])
    sizes = [1e6, 0.1, 3e6]
    alone = []
    for S in sizes:
        api.clear_caches()
        alone.append(api.collective_time(topo, "all-reduce", "2d", S, bidirectional=True))
    api.clear_caches()
    assert api.collective_times(topo, "all-reduce", "2d", sizes, bidirectional=True) == alone
    api.clear_caches()
