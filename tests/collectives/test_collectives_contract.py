"""One contract suite for every collective algorithm x op (scikit-learn style).

For each case the schedule is simulated on the SimPy engine with every message's
ready and delivery time recorded, and the data every message carries is replayed
(:func:`wus_sim.collectives.engines.replay.replay_data`): after reduce-scatter each replica
must hold its own shard, summed exactly once over its group; after all-gather and
all-reduce every replica must hold the whole buffer. Then: shards partition the
buffer into equal parts, each member sends what it receives, the links carry exactly
the schedule's bytes, the time is at least the closed form (and equal where that is
exact), the fast engine agrees wherever it runs, and the window engine agrees with SimPy
on every case (the same float operations in the same order, so to the last bits); all of it
under both routings (store-and-forward and cut-through).
"""

from dataclasses import replace

import numpy as np
import pytest

from wus_sim.collectives import (ALGORITHMS, ALLTOALL_ALGORITHMS, REDUCE_OPS, analytic_time, api, collective_time,
                                 simulate_collective)
from wus_sim.collectives.engines import fast_engine, window_engine
from wus_sim.collectives.analytic import is_exact, plan_time
from wus_sim.collectives.schedules.loads import link_loads
from wus_sim.collectives.schedules.messages import compile_messages, passes_by_tag
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.collectives.engines.replay import replay_data
from wus_sim.collectives.engines.simpy_engine import run_schedule
from wus_sim.inputs.errors import ConfigError, UnknownNameError
from wus_sim.hardware.network import ROUTINGS, num_link_keys
from wus_sim.inputs.units import MiB

from a2a_replay import replay_a2a
from make_topology import make

REL = 1e-9


# power-of-two slices (every algorithm runs on them), small enough to replay the data
TOPOLOGIES = {
    "torus4x4": make((4, 4), True, link_GBps=[100.0, 50.0]),
    "mesh4x2c2": make((4, 2), False, cores=2, hop_latency_us=2.0),
    "torus2x2x2": make((2, 2, 2), True, link_GBps=[100.0, 50.0, 25.0]),
    "mixed8x2c2": make((8, 2), (False, True), cores=2),
    "line8": make((8,), False, hop_latency_us=0.5),
}
VARIANTS = [  # (chunks, reduce_Bps, group, bidirectional)
    (1, None, None, False), (3, 40e9, None, False), (2, 900e9, "x", False), (1, None, None, True),
    (2, None, "y", True),
]


def run_case(topo, op, alg, S, chunks, red, group, bidir, routing="store-and-forward"):
    plan = plan_collective(topo, op, alg, group=group, bidirectional=bidir)
    sched = compile_messages(plan, S, chunks=chunks, reduce_Bps=red, track=True)
    out = run_schedule(sched, record=True, routing=routing)
    return plan, sched, out


def sent_equals_received(sched):
    """Per (level, member): bytes sent == bytes received, from the message table."""
    meta = sched.meta
    nodes = meta["node"]
    plan = sched.plan
    tags = passes_by_tag(plan)
    sent, got = {}, {}
    for j, m in enumerate(nodes):
        p = tags[int(meta["pass"][j])]
        e = p.rings[int(meta["dir"][j])]
        r = int(meta["ring"][j])
        a = (p.level, int(e.members[r, int(meta["pos"][j])]))
        z = (p.level, int(e.members[r, int(meta["dst"][j])]))
        sent[a] = sent.get(a, 0.0) + sched.msg_bytes[m]
        got[z] = got.get(z, 0.0) + sched.msg_bytes[m]
    return sent.keys() == got.keys() and all(np.isclose(sent[k], got[k], rtol=1e-12) for k in sent)


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("topo_name", list(TOPOLOGIES))
@pytest.mark.parametrize("alg", ALGORITHMS)
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_contract(op, alg, topo_name, routing):
    base = TOPOLOGIES[topo_name]
    if alg == "recursive-doubling" and op != "all-reduce":
        with pytest.raises(ConfigError, match="all-reduce algorithm.*halving-doubling"):
            plan_collective(base, op, alg)
        return
    checked = 0
    for chunks, red, group, bidir in VARIANTS:
        if group == "y" and base.ndim < 2:
            group = "x"
        if alg in ("halving-doubling", "recursive-doubling") and bidir:
            with pytest.raises(ConfigError):
                plan_collective(base, op, alg, bidirectional=True)
            continue
        S = 3 * MiB + 7  # not divisible by the group size nor by the chunks: bytes are exact floats
        plan, sched, out = run_case(base, op, alg, S, chunks, red, group, bidir, routing)
        checked += 1
        # the data: every replica ends with the right chunk set
        rep = replay_data(sched, out.ready_t, out.deliver_t)
        assert rep["ok"], rep["problems"][:3]
        # shards partition each group's buffer into equal parts of S/N
        N = plan.group_size
        for g in _groups(plan):
            leaves = np.concatenate([rep["shards"][r] for r in g])
            assert len(np.unique(leaves)) == len(leaves) == rep["leaves"]
            assert {len(rep["shards"][r]) for r in g} == {rep["leaves"] // N}
        # each member sends what it receives; links carry exactly the schedule's bytes
        assert sent_equals_received(sched)
        assert np.allclose(out.link_bytes, link_loads(plan, S), rtol=1e-12, atol=1e-6)
        assert len(out.link_bytes) == num_link_keys(base)
        assert out.events == sched.num_hops
        # time vs closed form: never below it, equal where it is exact
        a = plan_time(plan, S, chunks=chunks, reduce_Bps=red, routing=routing)
        assert out.time_s >= a * (1 - REL)
        if is_exact(plan, chunks=chunks, reduce_Bps=red, routing=routing):
            assert out.time_s == pytest.approx(a, rel=REL)
        # the window engine runs every case (these slices' hops all have latency): the same
        # times and counters as SimPy
        w = window_engine.run_schedule(sched, routing=routing)
        assert w.time_s == pytest.approx(out.time_s, rel=1e-12, abs=0) and w.events == out.events
        assert np.array_equal(w.link_messages, out.link_messages)
        assert np.allclose(w.link_bytes, out.link_bytes, rtol=1e-12, atol=0)
        assert np.allclose(w.link_busy_s, out.link_busy_s, rtol=1e-12, atol=0)
        # engines agree where both run
        if fast_engine.supports(base, op, alg, group=group, bidirectional=bidir, chunks=chunks):
            f = fast_engine.run(base, op, alg, S, group=group, bidirectional=bidir, chunks=chunks, reduce_Bps=red,
                                routing=routing)
            assert f.time_s == pytest.approx(out.time_s, rel=REL)
            assert f.events == out.events
    assert checked


A2A_VARIANTS = [(None, None), ("x", None), ("y", 40e9), ([1, 6, 3, 12, 5], None)]  # (group, reduce_Bps)


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("topo_name", list(TOPOLOGIES))
@pytest.mark.parametrize("alg", ALLTOALL_ALGORITHMS)
def test_contract_alltoall(alg, topo_name, routing):
    """The all-to-all in the same contract: its data replayed (:mod:`a2a_replay`), bytes sent ==
    received, links carry the schedule's bytes, time >= the closed form (== where exact), the
    window engine equal to SimPy to the last bits, the fast engine equal where it runs; a
    reduction speed changes nothing (an all-to-all sums nothing)."""
    base = TOPOLOGIES[topo_name]
    checked = 0
    for group, red in A2A_VARIANTS:
        if group == "y" and base.ndim < 2:
            group = "x"
        if isinstance(group, list) and max(group) >= base.num_replicas:
            continue
        S = 3 * MiB + 7
        listed = isinstance(group, list)  # a replica ring: ring only, over replicas
        chips_only = base.cores_per_chip > 1 and not listed
        if alg in ("ring", "2d", "2d-split") and (chips_only or (listed and alg != "ring")):
            with pytest.raises(ConfigError):
                plan_collective(base, "all-to-all", alg, group=group)
            continue
        plan, sched, out = run_case(base, "all-to-all", alg, S, 1, red, group, False, routing)
        checked += 1
        problems = replay_a2a(sched, out.ready_t, out.deliver_t)
        assert not problems, problems[:3]
        assert sent_equals_received(sched)
        assert np.allclose(out.link_bytes, link_loads(plan, S), rtol=1e-12, atol=1e-6)
        assert out.events == sched.num_hops
        a = plan_time(plan, S, routing=routing)
        assert out.time_s >= a * (1 - REL)
        if is_exact(plan, routing=routing):
            assert out.time_s == pytest.approx(a, rel=REL)
        w = window_engine.run_schedule(sched, routing=routing)
        assert w.time_s == pytest.approx(out.time_s, rel=1e-12, abs=0) and w.events == out.events
        assert np.allclose(w.link_bytes, out.link_bytes, rtol=1e-12, atol=0)
        r = simulate_collective(base, "all-to-all", alg, S, group=group, reduce_Bps=red, routing=routing)
        assert r.time_s == pytest.approx(out.time_s, rel=REL) and r.events == out.events
        if r.engine == "fast":
            assert np.allclose(r.link_bytes, out.link_bytes[: base.num_link_slots], rtol=1e-12, atol=1e-6)
    if alg in ("pairwise", "bruck") or base.cores_per_chip == 1:
        assert checked


def _groups(plan):
    topo = plan.topology
    c = topo.cores_per_chip
    g = plan.group
    if g.kind == "list":
        return [list(g.replicas)]
    if g.kind == "all":
        return [list(range(topo.num_replicas))]
    return [[int(x) * c + q for x in line for q in range(c)] for line in topo.axis_rings(g.axis)]


@pytest.mark.parametrize("alg", ["ring", "bidir-ring", "halving-doubling", "recursive-doubling"])
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_explicit_replica_lists(op, alg):
    topo = make((4, 4), True, cores=2)
    group = [0, 11, 21, 30] if alg != "ring" else [0, 11, 21, 30, 5, 17]
    if alg == "recursive-doubling" and op != "all-reduce":
        with pytest.raises(ConfigError, match="all-reduce algorithm"):
            plan_collective(topo, op, alg, group=group)
        return
    plan, sched, out = run_case(topo, op, alg, 2 * MiB, 2, 60e9, group, False)
    assert replay_data(sched, out.ready_t, out.deliver_t)["ok"]
    assert out.time_s >= plan_time(plan, 2 * MiB, chunks=2, reduce_Bps=60e9) * (1 - REL)
    if alg == "ring":
        # the ring runs in the given order: step 0 goes 0->11->21->30->5->17->0, routed
        e = plan.halves[0][0].rings[0]
        assert list(e.members[0]) == group
        for i in range(len(group)):
            path = e.edge_path(0, i)
            a, z = group[i] // 2, group[(i + 1) % len(group)] // 2
            assert path == topo.route(a, z)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("alg", ALGORITHMS)
def test_one_member_groups_take_no_time(op, alg):
    topo = make((1, 4), True)  # axis x has one chip
    if alg == "recursive-doubling" and op != "all-reduce":
        with pytest.raises(ConfigError, match="all-reduce algorithm"):
            simulate_collective(topo, op, alg, MiB, group="x")
        return
    r = simulate_collective(topo, op, alg, MiB, group="x")
    assert r.time_s == 0.0 and r.events == 0 and r.group_size == 1
    assert analytic_time(topo, op, alg, MiB, group="x") == 0.0
    if alg in ("ring", "bidir-ring", "halving-doubling", "recursive-doubling"):
        assert simulate_collective(topo, op, alg, MiB, group=[2]).time_s == 0.0


def test_result_fields_and_bandwidth_conventions():
    topo = make((4, 4), True)
    S = 64 * MiB
    for op, factor in (("all-reduce", 2 * 15 / 16), ("reduce-scatter", 15 / 16), ("all-gather", 15 / 16)):
        r = simulate_collective(topo, op, "2d", S, engine="simpy")
        assert r.engine == "simpy" and r.group_size == 16 and r.nbytes == S
        assert r.algbw_GBps == pytest.approx(S / r.time_s / 1e9)
        assert r.busbw_GBps == pytest.approx(r.algbw_GBps * factor)
        assert r.link_bytes.shape == r.link_busy_s.shape == (topo.num_link_slots,)
        assert np.allclose(r.link_busy_s, r.link_bytes / np.where(topo.link_exists, topo.link_Bps, np.inf))
        d = r.to_dict()
        for key in ("time_s", "analytic_time_s", "algbw_GBps", "busbw_GBps", "events", "engine", "wall_s",
                    "nbytes", "group_size", "topology", "op", "algorithm"):
            assert key in d


def test_engine_dispatch():
    topo = make((4, 4), True)
    # contended: the window engine under both routings
    assert simulate_collective(topo, "all-reduce", "halving-doubling", MiB).engine == "window"
    assert simulate_collective(topo, "all-reduce", "halving-doubling", MiB, routing="cut-through").engine == "window"
    hd = [simulate_collective(topo, "all-reduce", "halving-doubling", MiB, engine=e) for e in ("window", "simpy")]
    assert [r.engine for r in hd] == ["window", "simpy"] and hd[0].time_s == pytest.approx(hd[1].time_s, rel=1e-12)
    assert simulate_collective(topo, "all-reduce", "2d", MiB, engine="window").engine == "window"
    assert simulate_collective(topo, "all-reduce", "2d", MiB, engine="simpy").engine == "simpy"
    with pytest.raises(UnknownNameError, match="engine"):
        simulate_collective(topo, "all-reduce", "2d", MiB, engine="warp")
    assert simulate_collective(topo, "all-reduce", "2d", MiB).engine == "fast"
    with pytest.raises(ConfigError, match="engine"):
        simulate_collective(topo, "all-reduce", "halving-doubling", MiB, engine="fast")


def test_bad_input_is_a_user_error():
    topo = make((3, 3), True)
    with pytest.raises(ConfigError, match="power-of-two"):
        simulate_collective(topo, "all-reduce", "halving-doubling", MiB)
    with pytest.raises(ConfigError, match="power-of-two"):
        simulate_collective(make((4, 4)), "all-reduce", "halving-doubling", MiB, group=[0, 1, 2])
    with pytest.raises(UnknownNameError, match="algorithm"):
        simulate_collective(topo, "all-reduce", "tree", MiB)
    with pytest.raises(UnknownNameError, match="op"):
        analytic_time(topo, "broadcast", "ring", MiB)
    for kw in ({"chunks": 0}, {"chunks": 1.5}, {"reduce_Bps": 0.0}, {"group": "w"}, {"group": [0, 0]},
               {"group": [99]}, {"group": []}, {"group": 3}):
        with pytest.raises(ConfigError):
            simulate_collective(topo, "all-reduce", "ring", MiB, **kw)
    for size in (0, -5, float("nan"), "lots"):
        with pytest.raises(ConfigError):
            simulate_collective(topo, "all-reduce", "ring", size)
    with pytest.raises(ConfigError, match="explicit replica list"):
        simulate_collective(topo, "all-reduce", "2d", MiB, group=[0, 1])


def test_collective_time_matches_simulation_and_is_cached():
    topo = make((4, 4), True, cores=2)
    for alg in ("2d", "halving-doubling", "ring"):
        t = collective_time(topo, "all-reduce", alg, 3 * MiB, chunks=2)
        assert t == pytest.approx(simulate_collective(topo, "all-reduce", alg, 3 * MiB, chunks=2,
                                                      engine="simpy").time_s, rel=REL)
    # an equal topology object (a fresh load) hits the same cache entry
    again = replace(topo)
    hits = api._cached_time.cache_info().hits
    assert collective_time(again, "all-reduce", "2d", 3 * MiB, chunks=2) == \
        collective_time(topo, "all-reduce", "2d", 3 * MiB, chunks=2)
    assert api._cached_time.cache_info().hits == hits + 2  # the value alone would not show caching


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_replay_catches_a_broken_schedule(op):
    """The data replay is not vacuous: sending without waiting for the data, or sending
    the wrong chunk, is caught."""
    topo = make((4,), True)
    plan = plan_collective(topo, op, "ring")
    # 1) drop the "arrival of the previous step" dependencies: messages leave too early
    sched = compile_messages(plan, MiB, track=True)
    sched.deps = [d for d in sched.deps if not np.all(d[2] == 0)]
    out = run_schedule(sched, record=True)
    assert not replay_data(sched, out.ready_t, out.deliver_t)["ok"]
    # 2) a message that claims another step (so another chunk)
    sched = compile_messages(plan, MiB, track=True)
    out = run_schedule(sched, record=True)
    sched.meta["step"][3] = (sched.meta["step"][3] + 1) % plan.halves[0][0].steps
    assert not replay_data(sched, out.ready_t, out.deliver_t)["ok"]


# ============================================================ embeddings
from wus_sim.collectives.schedules.embedding import (axis_rings, line_ring_pattern, onchip_rings, routes,  # noqa: E402
                                           sequence_ring, slice_ring)


def _walk(topo, emb):
    """Every edge's links start at its member and end at the next member."""
    for r in range(emb.num_rings):
        for i in range(emb.size):
            cur = int(emb.members[r, i])
            for k in emb.edge_path(r, i):
                assert topo.link_exists[k] and topo.link_src[k] == cur
                cur = int(topo.link_dst[k])
            assert cur == emb.members[r, (i + 1) % emb.size]


@pytest.mark.parametrize("d", range(1, 10))
@pytest.mark.parametrize("wrap", [True, False])
def test_line_rings_follow_the_documented_embedding(d, wrap):
    topo = make((d, 3), (wrap, True))
    used = []
    for reverse in (False, True):
        emb = axis_rings(topo, 0, reverse)
        _walk(topo, emb)
        assert emb.members.shape == (3, d)
        used.append(emb.link_use(topo.num_link_slots))
    axis0 = (topo.link_axis == 0) & topo.link_exists
    if d == 1:
        return
    if wrap:  # + ring on + links, reverse ring on - links: every link of the axis once overall
        assert np.array_equal(used[0] + used[1], axis0.astype(int))
    else:  # the folded ring (and its reverse) use every directed link of the line exactly once
        assert np.array_equal(used[0], axis0.astype(int)) and np.array_equal(used[1], axis0.astype(int))
        order, _ = line_ring_pattern(d, False)
        evens = [p for p in order if p % 2 == 0]
        assert evens == sorted(evens) and order[len(evens):] == sorted(order[len(evens):])[::-1]


@pytest.mark.parametrize("dims,wrap", [((4, 4), True), ((3, 4), False), ((4, 3), True), ((3, 3), True),
                                       ((3, 3), False), ((4, 4, 4), True), ((3, 3, 3), False),
                                       ((2, 3, 5), False), ((1, 6, 1), True), ((5, 1), False)])
def test_slice_ring_is_hamiltonian_and_uncontended(dims, wrap):
    topo = make(dims, wrap)
    fwd, rev = slice_ring(topo), slice_ring(topo, reverse=True)
    for emb in (fwd, rev):
        _walk(topo, emb)
        assert sorted(emb.members[0].tolist()) == list(range(topo.num_chips))
        assert emb.link_use(topo.num_link_slots).max() <= 1  # no link serves two edges
    active = [d for d in dims if d > 1]
    if len(active) >= 2 and (any(d % 2 == 0 for d in active) or wrap):
        # a Hamiltonian cycle of one-hop edges (on a torus also with every side odd),
        # and its reverse uses the opposite links
        assert fwd.hops.max() == 1
        assert not np.any((fwd.link_use(topo.num_link_slots) > 0) & (rev.link_use(topo.num_link_slots) > 0))


def test_sequence_and_onchip_rings_and_vectorized_routes():
    topo = make((4, 3), (True, False), cores=2)
    emb = sequence_ring(topo, [0, 7, 13, 22, 6])
    assert list(emb.members[0]) == [0, 7, 13, 22, 6] and emb.edge_path(0, 4) == topo.route(3, 0)
    oc = onchip_rings(topo)
    assert oc.members.shape == (12, 2) and np.all(oc.hops == 1)
    rng = np.random.default_rng(0)
    for dims, wrap in [((5, 4, 3), (True, False, True)), ((2, 6), (True, True)), ((7,), (False,))]:
        t = make(dims, wrap)
        src, dst = rng.integers(0, t.num_chips, 300), rng.integers(0, t.num_chips, 300)
        assert routes(t, src, dst) == [tuple(t.route(a, b)) for a, b in zip(src, dst)]
