"""Clean rings inside contended schedules (:mod:`wus_sim.collectives.engines.clean_rings`).

The window engine runs the rings no contention reaches as whole units. Checked here: the
times do not move by a single bit (against the same engine without them, on random faulty
slices, and a case Hypothesis found); which rings are clean on a torus with one failed cable,
derived from the detour's geometry; no link carries both a clean ring and anything else; and
the bound that lets a clean ring wait (and run with others) never passes a time that a node
waiting on it is ready at. The window engine against SimPy is tests/collectives/engines/test_window_engine.py.
"""

import numpy as np
from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

from wus_sim.collectives import ALGORITHMS, ALLTOALL_ALGORITHMS, REDUCE_OPS
from wus_sim.collectives.engines import window_engine, window_tables
from wus_sim.collectives.engines.clean_rings import earliest_outputs, hop_floors
from wus_sim.collectives.schedules.messages import compile_messages
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.hardware.link_faults import with_link_faults
from wus_sim.hardware.network import ROUTINGS

from make_topology import make
from test_window_engine import drawn_plan, faulty_slices


def _schedule(topo, op, alg, bidir, red, S):
    plan = drawn_plan(topo, op, alg, bidir)
    return compile_messages(plan, S, chunks=1, reduce_Bps=red)


def _units(sched):
    return window_tables.clean_units_of(sched, window_tables.graph_of(sched))


# Hypothesis found this one: a bound three hops too late let a clean ring run after the
# window engine had served a window its outputs fall in (8.67 us instead of 9 us).
_FOUND = make((2, 2, 3), False, link_GBps=25.0, hop_latency_us=0.0).with_failed_links([34, 48, 55, 59])
# a mesh with a failed cable: clean rings whose folded edges span two hops (where cut-through and
# store-and-forward differ) beside the detour's contended ones
_MESH_DETOUR = with_link_faults(make((6, 6), False), failed_links=1, seed=2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(ALGORITHMS), bidir=st.booleans(),
       red=st.sampled_from([None, 30e9]), S=st.sampled_from([1e5, 3 * 2**20 + 7]), routing=st.sampled_from(ROUTINGS))
@example(topo=_FOUND, op="reduce-scatter", alg="2d", bidir=False, red=None, S=1e5, routing="store-and-forward")
@example(topo=_MESH_DETOUR, op="all-reduce", alg="2d", bidir=False, red=None, S=1e5, routing="cut-through")
def test_clean_rings_move_no_time(topo, op, alg, bidir, red, S, routing):
    sched = _schedule(topo, op, alg, bidir, red, S)
    try:
        plain = window_engine.run_schedule(sched, clean_rings=False, routing=routing)
    except window_engine.WindowTooSmall:  # cut-through over a link of no latency (test_window_engine.py)
        assume(False)
    fast = window_engine.run_schedule(sched, routing=routing)
    assert fast.time_s == plain.time_s  # the same float operations: not a bit apart
    assert fast.events == plain.events
    assert np.array_equal(fast.link_messages, plain.link_messages)
    assert np.allclose(fast.link_bytes, plain.link_bytes, rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), alg=st.sampled_from(ALLTOALL_ALGORITHMS), S=st.sampled_from([1e5, 3 * 2**20 + 7]),
       routing=st.sampled_from(ROUTINGS))
def test_clean_rings_move_no_time_in_alltoalls(topo, alg, S, routing):
    sched = _schedule(topo, "all-to-all", alg, False, None, S)
    try:
        plain = window_engine.run_schedule(sched, clean_rings=False, routing=routing)
    except window_engine.WindowTooSmall:
        assume(False)
    fast = window_engine.run_schedule(sched, routing=routing)
    assert fast.time_s == plain.time_s and fast.events == plain.events


def test_which_rings_are_clean_on_a_torus_with_one_failed_cable():
    """torus:8x8, cable 27+x down: chip 27 = (3, 3) reaches (4, 3) by the detour 27 -> 35 ->
    36 -> 28 (up a row, across, back), and 28 reaches 27 the reverse way. So in the passes
    along x the rows y = 3 (its ring has the detour) and y = 4 (the detour's middle link is
    one of its ring's) are contended, in the pass along y the columns x = 3 and x = 4 (the
    detour's first and last links are theirs), in both directions; every other ring is clean."""
    topo = with_link_faults(make((8, 8), True), failed_links="27+x")
    sched = compile_messages(plan_collective(topo, "all-reduce", "2d", bidirectional=True), 1e6)
    units = _units(sched)
    layouts = sched.structure.layouts
    assert [L.pass_.kind for L in layouts] == ["rs", "ar", "ag"]  # x, then y, then x
    for li, L in enumerate(layouts):
        along_x = L.pass_.kind != "ar"
        clean = set(zip(units.direction[units.layout == li].tolist(), units.ring[units.layout == li].tolist()))
        for d, emb in enumerate(L.pass_.rings):
            for r, members in enumerate(emb.members):
                x, y = members % 8, members // 8
                line = y[0] if along_x else x[0]
                assert len(set(y if along_x else x)) == 1  # one row or one column
                assert ((d, r) in clean) == (line not in (3, 4)), (li, d, r)
    # 16 rings per pass, 4 contended: 3/4 of the messages are held by clean rings
    messages = int((sched.path_id >= 0).sum())
    assert units.num_nodes == messages * 12 // 16


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(ALGORITHMS), bidir=st.booleans())
def test_no_link_carries_a_clean_ring_and_anything_else(topo, op, alg, bidir):
    sched = _schedule(topo, op, alg, bidir, None, 1e6)
    units = _units(sched)
    assume(units is not None)
    n = sched.num_nodes
    in_clean = np.zeros(n, bool)
    for li, L in enumerate(sched.structure.layouts):
        for d, r in zip(units.direction[units.layout == li], units.ring[units.layout == li]):
            in_clean[L.ids[:, :, d, r, :].ravel()] = True
    clean_links, other_links = set(), set()
    for m in np.flatnonzero(sched.path_id >= 0):
        (clean_links if in_clean[m] else other_links).update(sched.paths[sched.path_id[m]])
    assert not clean_links & other_links


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(ALGORITHMS), bidir=st.booleans(),
       red=st.sampled_from([None, 30e9]), S=st.sampled_from([1e5, 3 * 2**20 + 7]))
@example(topo=_FOUND, op="reduce-scatter", alg="2d", bidir=False, red=None, S=1e5)
def test_a_clean_ring_hands_nothing_on_before_its_bound(topo, op, alg, bidir, red, S):
    """The nodes that wait for a clean ring's last step (its members' end-of-pass barriers)
    are ready no earlier than :func:`earliest_outputs` says, from its members' start times."""
    sched = _schedule(topo, op, alg, bidir, red, S)
    units = _units(sched)
    assume(units is not None)
    n = sched.num_nodes
    out = window_engine.run_schedule(sched)
    start_t = np.append(out.event_s[:n], -np.inf)
    floor = hop_floors(units, sched.nbytes / sched.chunks)
    _, rptr, rch, dptr, dch = sched.dependency_arrays()
    for u in range(len(units.layout)):
        L = sched.structure.layouts[units.layout[u]]
        last = L.ids[-1, 0, units.direction[u], units.ring[u], :]
        waiting = np.concatenate([np.concatenate([rch[rptr[m]:rptr[m + 1]], dch[dptr[m]:dptr[m + 1]]])
                                  for m in last])
        assert len(waiting)
        bound = earliest_outputs(units, np.array([u]), start_t, floor)[0]
        assert out.event_s[waiting].min() >= bound
        assert bound >= start_t[L.ids[0, 0, units.direction[u], units.ring[u], :]].max()


def test_a_pass_left_out_of_the_clean_rings_runs_event_by_event(monkeypatch):
    """A ring pass whose messages of one step differ in size is left to the window engine
    (no schedule builds one today, so the check is forced here for the pass along y): its
    rings are no clean units, the others still are, and the time does not move."""
    from wus_sim.collectives.engines import clean_rings

    topo = with_link_faults(make((8, 8), True), failed_links="27+x")
    sched = compile_messages(plan_collective(topo, "all-reduce", "2d", bidirectional=True), 1e6)
    along_y = sched.structure.layouts[1]
    monkeypatch.setattr(clean_rings, "_sizes_per_step", lambda structure, L: L is not along_y)
    units = _units(sched)
    assert set(units.layout.tolist()) == {0, 2}
    assert (units.start_unit[along_y.ids.ravel()] == -1).all()
    fast = window_engine.run_schedule(sched)
    assert fast.time_s == window_engine.run_schedule(sched, clean_rings=False).time_s
