"""The window engine against the SimPy reference: the same completion time (to the last bits:
a node resolved by two events of one tie key takes the later float, SimPy the one it handled
last) and the same link counters, on contended schedules drawn at random (failed and slow cables, halving-doubling,
meshes in both directions, explicit replica lists, chunks, reduction costs); a hand-derived
contended case; why its windows are safe; and the api's choice of engine.

The contract suite (tests/collectives/test_collectives_contract.py) also runs it on every algorithm x op x
slice case, with the data replay.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from wus_sim.collectives import ALGORITHMS, ALLTOALL_ALGORITHMS, REDUCE_OPS, simulate_collective
from wus_sim.collectives.engines import window_engine
from wus_sim.collectives.schedules.loads import contention
from wus_sim.collectives.schedules.messages import compile_messages
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.collectives.engines.simpy_engine import run_schedule
from wus_sim.inputs.errors import ConfigError, WusError
from wus_sim.hardware.network import ROUTINGS, TIE_QUANTUM_S, link_key_latency_s
from wus_sim.hardware.link_faults import with_link_faults

from make_topology import make

US = 1e-6


def _zero_latency_multi_hop(sched):
    """Whether a message of *sched* crosses a link of zero latency that is not its last hop:
    under cut-through its head then moves on at once, and no window can hold it."""
    lat = link_key_latency_s(sched.plan.topology)
    return any(len(p) > 1 and (lat[list(p[:-1])] == 0).any() for p in sched.paths)


def _same(sched, routing="store-and-forward"):
    """Run both engines on *sched* with *routing*; assert they agree; return the window outcome
    (``None`` where the window engine rightly refuses: a cut-through head over a link of
    zero latency)."""
    try:
        w = window_engine.run_schedule(sched, routing=routing)
    except window_engine.WindowTooSmall:
        assert routing == "cut-through" and _zero_latency_multi_hop(sched)
        return None
    s = run_schedule(sched, routing=routing)
    assert w.time_s == pytest.approx(s.time_s, rel=1e-12, abs=0)
    assert w.events == s.events
    assert np.array_equal(w.link_messages, s.link_messages)
    assert np.allclose(w.link_bytes, s.link_bytes, rtol=1e-12, atol=0)
    assert np.allclose(w.link_busy_s, s.link_busy_s, rtol=1e-12, atol=0)
    return w


@st.composite
def faulty_slices(draw):
    ndim = draw(st.integers(1, 3))
    dims = tuple(draw(st.sampled_from([2, 3, 4, 5, 6, 8])) for _ in range(ndim))
    assume(np.prod(dims) <= 64)
    wrap = tuple(draw(st.booleans()) for _ in range(ndim))
    bw = [draw(st.sampled_from([25.0, 50.0, 100.0])) for _ in range(ndim)]
    topo = make(dims, wrap, link_GBps=bw, hop_latency_us=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])),
                cores=draw(st.sampled_from([1, 1, 2])))
    failed = draw(st.integers(0, 3))
    slow = draw(st.one_of(st.none(), st.sampled_from(["1:2", "2:4", "1:1.5"])))
    try:
        topo = with_link_faults(topo, failed_links=failed, slow_links=slow, seed=draw(st.integers(0, 5)))
    except WusError:  # the draw disconnects the slice, or has too few cables
        assume(False)
    return topo


def drawn_plan(topo, op, alg, bidir):
    """The plan of a drawn case, or the draw is skipped (e.g. halving-doubling on a
    non-power-of-two slice, recursive-doubling with another op than all-reduce);
    halving- and recursive-doubling have no ring direction."""
    if alg in ("halving-doubling", "recursive-doubling"):
        bidir = False
    try:
        return plan_collective(topo, op, alg, bidirectional=bidir)
    except ConfigError:
        assume(False)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(ALGORITHMS),
       bidir=st.booleans(), chunks=st.integers(1, 3), red=st.sampled_from([None, 30e9, 400e9]),
       S=st.sampled_from([1e5, 3 * 2**20 + 7, 5e7]), routing=st.sampled_from(ROUTINGS))
def test_window_engine_equals_simpy_on_random_contended_schedules(topo, op, alg, bidir, chunks, red, S, routing):
    plan = drawn_plan(topo, op, alg, bidir)
    _same(compile_messages(plan, S, chunks=chunks, reduce_Bps=red), routing)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), alg=st.sampled_from(ALLTOALL_ALGORITHMS), S=st.sampled_from([1e5, 3 * 2**20 + 7]),
       routing=st.sampled_from(ROUTINGS))
def test_window_engine_equals_simpy_on_random_alltoalls(topo, alg, S, routing):
    """All-to-all on faulty slices (detours, slow links): its rings' blocks shrink step by step
    and pairwise and Bruck partners move, which the window engine's clean rings must leave alone."""
    plan = drawn_plan(topo, "all-to-all", alg, False)
    _same(compile_messages(plan, S), routing)


@settings(max_examples=30, deadline=None)
@given(order=st.permutations(list(range(8))), chunks=st.integers(1, 3), S=st.sampled_from([1e5, 3e6]),
       routing=st.sampled_from(ROUTINGS))
def test_window_engine_equals_simpy_on_routed_replica_lists(order, chunks, S, routing):
    """An explicit replica order: the ring's edges are routed over shared links."""
    topo = make((4, 2), True, cores=2)
    for alg in ("ring", "bidir-ring"):
        plan = plan_collective(topo, "all-reduce", alg, group=[2 * x + (x % 2) for x in order])
        assert _same(compile_messages(plan, S, chunks=chunks, reduce_Bps=80e9), routing) is not None


def test_contended_detours_by_hand():
    """torus:4 with cable 0-1 down, bidirectional reduce-scatter of 4 MB (as in
    tests/collectives/test_failed_links.py): both rings detour over each other's links and the last
    arrival is at 35 us, against 30 us uncontended. The window engine runs it and counts
    every hop: per ring, 3 steps x (3 one-hop edges + one 3-hop detour) = 18 hops, 36 in all."""
    from wus_sim.hardware.topology_files import load_topology

    topo = load_topology("torus:4", failed_links="0+x")
    plan = plan_collective(topo, "reduce-scatter", "ring", bidirectional=True)
    assert contention(plan) is not None
    w = _same(compile_messages(plan, 4e6))
    assert w.time_s == pytest.approx(35 * US, rel=1e-12)
    assert w.events == 36


def test_contended_detours_by_hand_under_cut_through():
    """The same reduce-scatter under cut-through (s = 5 us a message, 1 us a hop's latency;
    a head moves on 1 us after its hop starts, a hop ends no earlier than its tail arrives,
    a head that finds its next link busy waits whole). Followed message by message with the
    network's FIFO and (sender, sequence) ties, each ring's three steps end at: '+' ring
    12, 6, 6, 6 / 22, 21, 17, 18 / 28, 31, 32, 28 us; '-' ring 13, 6, 6, 11 / 23, 17, 22,
    21 / 33, 33, 32, 31 us (members 0..3). E.g. the '-' ring's step 2 from chip 1 to 0 is
    ready at 17, waits for link 1->2 until 20, reaches chip 2 at 21, takes link 2->3 at 21
    (before the '+' ring's message from chip 2, sender 1 < 2), and at chip 3 waits for link
    3->0 until 27 (the '+' ring's step 2 holds it 22-27): 27 + 5 + 1 = 33 us, the last
    arrival, against 35 us store-and-forward. The same 36 hops."""
    from wus_sim.hardware.topology_files import load_topology

    topo = load_topology("torus:4", failed_links="0+x")
    plan = plan_collective(topo, "reduce-scatter", "ring", bidirectional=True)
    w = _same(compile_messages(plan, 4e6), "cut-through")
    assert w.time_s == pytest.approx(33 * US, rel=1e-12)
    assert w.events == 36


def test_each_window_serves_only_what_cannot_be_overtaken():
    """The rule that makes a window safe: nothing served in it could have waited for a request
    made later. Replayed here on a contended schedule: for every hop served, every later
    window's requests are ready no earlier than the least ``ready + occupancy + latency``
    that bounded its own window (so a link never sees an earlier request after a later one)."""
    topo = with_link_faults(make((6, 6), True), failed_links=2, seed=1)
    plan = plan_collective(topo, "all-reduce", "2d", bidirectional=True)
    sched = compile_messages(plan, 2e6, chunks=2)
    seen = []
    real = window_engine.serve

    def spy(nodes, ready, links, occ, keys, *rest):
        seen.append(ready.copy())
        return real(nodes, ready, links, occ, keys, *rest)

    window_engine.serve = spy
    try:
        w = _same(sched)
    finally:
        window_engine.serve = real
    assert len(seen) == w.windows > 1
    # windows serve ready times in nondecreasing blocks: each window's earliest request is no
    # earlier than the previous window's latest (up to the tie quantum)
    for a, b in zip(seen, seen[1:]):
        assert b.min() >= a.max() - TIE_QUANTUM_S


@pytest.mark.parametrize("routing", ROUTINGS)
def test_api_picks_the_window_engine_for_contended_schedules(routing):
    topo = with_link_faults(make((4, 4), True), failed_links="0+x")
    auto = simulate_collective(topo, "all-reduce", "2d", 2e6, bidirectional=True, routing=routing)
    ref = simulate_collective(topo, "all-reduce", "2d", 2e6, bidirectional=True, engine="simpy", routing=routing)
    assert (auto.engine, ref.engine) == ("window", "simpy")
    assert auto.time_s == pytest.approx(ref.time_s, rel=1e-12) and auto.events == ref.events
    assert np.allclose(auto.link_bytes, ref.link_bytes) and np.allclose(auto.link_busy_s, ref.link_busy_s)
    # uncontended: still the fast engine; an explicit window run agrees with it
    clean = make((4, 4), True)
    fast = simulate_collective(clean, "all-reduce", "2d", 2e6, routing=routing)
    win = simulate_collective(clean, "all-reduce", "2d", 2e6, engine="window", routing=routing)
    assert fast.engine == "fast" and win.engine == "window"
    assert win.time_s == pytest.approx(fast.time_s, rel=1e-12)


def test_a_cut_through_head_over_a_link_of_no_latency_falls_back_to_simpy():
    """Under cut-through a head crosses a zero-latency link at once, so the lookahead is nil and
    no window can hold it: engine auto runs SimPy, engine window says so (exit 2 text)."""
    topo = make((8,), False, hop_latency_us=0.0)  # a mesh line: the folded ring's edges are 2 hops
    kw = dict(routing="cut-through")
    assert simulate_collective(topo, "all-reduce", "ring", 1e6, **kw).engine in ("fast", "simpy")
    plan = plan_collective(topo, "all-reduce", "halving-doubling")
    with pytest.raises(window_engine.WindowTooSmall):
        window_engine.run_schedule(compile_messages(plan, 1e6), **kw)
    assert simulate_collective(topo, "all-reduce", "halving-doubling", 1e6, **kw).engine == "simpy"
    with pytest.raises(ConfigError, match="zero latency"):
        simulate_collective(topo, "all-reduce", "halving-doubling", 1e6, engine="window", **kw)
