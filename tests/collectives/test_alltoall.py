"""All-to-all: closed forms derived by hand (numbers written here from the textbook formulas,
not from :mod:`wus_sim.collectives.analytic_a2a`), on rings and tori, in every engine; the
contended cases and why they are slower; the default algorithm per topology.

Notation: ``n`` members, ``S`` each member's whole send buffer, block ``b = S/n``, ``B`` link
bandwidth, ``a`` per-hop latency. Textbook forms: Thakur, Rabenseifner and Gropp,
"Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1) 2005, sec. 3.3
(pairwise exchange ``(n-1)(a + b/B)``; Bruck ``ceil(log2 n) a + ceil(log2 n) (S/2)/B``); Bruck et
al., IEEE TPDS 8(11) 1997. On a torus each message crosses ``d`` hops of the shortest route.
"""

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from wus_sim.collectives import (ALLTOALL_ALGORITHMS, analytic_time, default_alltoall_algorithm,
                                 simulate_collective)
from wus_sim.collectives.schedules.messages import compile_messages
from wus_sim.collectives.schedules.passes import bruck_blocks
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.collectives.engines.simpy_engine import run_schedule
from wus_sim.hardware.network import ROUTINGS
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError, UnknownNameError

from a2a_replay import replay_a2a
from make_topology import make
from test_window_engine import faulty_slices

REL = 1e-9
A = 1e-6     # per-hop latency, s (make's default 1 us)
B = 100e9    # link bandwidth, B/s (make's default 100 GB/s)


def every_engine(topo, alg, S, routing="store-and-forward", group=None):
    """Times of the fast (where it runs), window and SimPy engines."""
    out = {}
    for engine in ("fast", "window", "simpy"):
        try:
            out[engine] = simulate_collective(topo, "all-to-all", alg, S, engine=engine, routing=routing,
                                              group=group).time_s
        except ConfigError:
            assert engine == "fast"  # only the fast engine refuses contended schedules
    return out


# ------------------------------------------------------------------ uncontended: exact
CASES = [
    # ring of 8 (even): floor(8/2) = 4 steps carrying 3.5, 2.5, 1.5, 0.5 blocks (the block 4 hops
    # away goes half each way): 4 a + 8 b/B = 4 a + n S/(8B); S = 8 MB, b/B = 10 us -> 84 us
    ("ring8", (8,), "ring", 8e6, 4 * A + 8 * 1e6 / B),
    # ring of 7 (odd): 3 steps of 3, 2, 1 blocks: 3 a + (n^2 - 1) S/(8 n B) = 3 a + 6 b/B = 63 us
    ("ring7", (7,), "ring", 7e6, 3 * A + 6 * 1e6 / B),
    # 8 x 4 torus, 2d: X ring (n = 8, S) then Y ring (n = 4, S): (4 a + 8 S/(8B)) + (2 a + 4 S/(8B))
    ("torus8x4-2d", (8, 4), "2d", 8e6, (4 * A + 8e6 / B) + (2 * A + 0.5 * 8e6 / B)),
    # 8 x 8 torus, 2d: twice the ring of 8 on S: 2 (4 a + S/B) = 168 us
    ("torus8x8-2d", (8, 8), "2d", 8e6, 2 * (4 * A + 8e6 / B)),
    # 8 x 8 torus, 2d-split: two halves of S/2 at once, X then Y and Y then X, taking turns on
    # each axis: 2 (4 a + 8 (S/2)/(8B)) = 88 us (the busiest link carries X S/8 in all, as 2d's
    # carries per axis, but both axes work at once)
    ("torus8x8-2d-split", (8, 8), "2d-split", 8e6, 2 * (4 * A + 4e6 / B)),
    # the whole 4 x 4 torus as one (snake) ring of 16: 8 a + 16 S/(8B) = 8 us + 2 S/B
    ("torus4x4-ring", (4, 4), "ring", 1.6e6, 8 * A + 2 * 1.6e6 / B),
    # ring of 3: pairwise rounds to i+1 and i+2 = i-1, one hop each, other links: 2 (a + b/B)
    ("ring3-pairwise", (3,), "pairwise", 3e6, 2 * (A + 1e6 / B)),
    # ring of 3, Bruck: step 0 the offset-1 block to i+1, step 1 the offset-2 block to i+2 = i-1
    ("ring3-bruck", (3,), "bruck", 3e6, 2 * (A + 1e6 / B)),
]


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("name,dims,alg,S,expected", CASES, ids=[c[0] for c in CASES])
def test_uncontended_closed_forms_by_hand(name, dims, alg, S, expected, routing):
    # every hop here is one link: cut-through and store-and-forward coincide
    topo = make(dims, True)
    times = every_engine(topo, alg, S, routing)
    assert set(times) == {"fast", "window", "simpy"}  # uncontended: the fast engine runs it
    for engine, t in times.items():
        assert t == pytest.approx(expected, rel=REL), engine
    r = simulate_collective(topo, "all-to-all", alg, S, routing=routing)
    assert r.exact and r.engine == "fast"
    assert analytic_time(topo, "all-to-all", alg, S, routing=routing) == pytest.approx(expected, rel=REL)


def test_ring_link_bytes_by_hand():
    """Ring of 8, S = 8 MB: each directed link carries sum over distances of the blocks crossing
    it: 1 + 2 + 3 + 4/2 = 8 blocks of 1 MB (n S / 8); all links together S n x mean distance
    (1+2+3+4+3+2+1)/8 = 2, so 8 MB x 8 x 2."""
    r = simulate_collective(make((8,), True), "all-to-all", "ring", 8e6)
    used = r.link_bytes[r.link_bytes > 0]
    assert len(used) == 16 and np.allclose(used, 8e6, rtol=1e-12)
    assert r.link_bytes.sum() == pytest.approx(8e6 * 8 * 2, rel=1e-12)
    assert r.busbw_GBps == pytest.approx(r.algbw_GBps * 7 / 8)  # NCCL's all-to-all bus bandwidth


def test_bruck_blocks_by_hand():
    # n = 5: offsets 1..4 with bit 0 set {1, 3}, bit 1 {2, 3}, bit 2 {4}; n = 8: always n/2
    assert [bruck_blocks(5, k) for k in range(3)] == [2, 2, 1]
    assert [bruck_blocks(8, k) for k in range(3)] == [4, 4, 4]
    assert plan_collective(make((5,), True), "all-to-all", "bruck").passes[0].steps == 3  # ceil(log2 5)


# ------------------------------------------------------------------ contended: explained
def test_pairwise_on_a_ring_contends_under_cut_through():
    """Ring of 8, S = 8 MB (b = 1 MB, b/B = 10 us >= a). Round k sends every block k places on,
    the shorter way: d_k = min(k, 8-k) = 1, 2, 3, 4, 3, 2, 1 hops (ties go +), all 8 messages
    the same way. So every link of that direction carries d_k blocks in round k: the busiest
    (+) links carry 1 + 2 + 3 + 4 = 10 blocks, the - links 3 + 2 + 1 = 6.

    Uncontended (the naive sum of Thakur's rounds over d_k hops), cut-through would take
    sum_k (d_k a + b/B) = 16 a + 7 b/B = 86 us. But a message finds each next link busy with the
    message of the chip ahead for b/B, so round k takes a + d_k b/B (its d_k blocks through one
    link, then one latency): sum_k (a + d_k b/B) = 7 a + 16 b/B = 167 us.
    Store-and-forward pays d_k (a + b/B) per round either way (the messages move in lock step,
    each link freed just as the next message arrives): 16 (a + b/B) = 176 us, the closed form."""
    topo = make((8,), True)
    S, b = 8e6, 1e6
    naive = 16 * A + 7 * b / B
    ct = every_engine(topo, "pairwise", S, "cut-through")
    assert set(ct) == {"window", "simpy"}  # contended: the fast engine refuses it
    for t in ct.values():
        assert t == pytest.approx(7 * A + 16 * b / B, rel=REL)
    assert analytic_time(topo, "all-to-all", "pairwise", S, routing="cut-through") == pytest.approx(naive, rel=REL)
    r = simulate_collective(topo, "all-to-all", "pairwise", S, routing="cut-through")
    assert not r.exact and r.time_s > r.analytic_time_s
    assert r.link_bytes.max() == pytest.approx(10 * b) and sorted(set(np.round(r.link_bytes / b, 9))) == [6, 10]
    for t in every_engine(topo, "pairwise", S).values():
        assert t == pytest.approx(16 * (A + b / B), rel=REL)
    # the direct ring algorithm: 84 us, each link 8 blocks
    assert simulate_collective(topo, "all-to-all", "ring", S).time_s < ct["simpy"]


def test_bruck_on_a_ring_contends():
    """Ring of 8, S = 8 MB: Bruck's 3 steps each send n/2 = 4 blocks (S/2, 40 us on a link) to
    i + 1, i + 2, i + 4: d = 1, 2, 4 hops, all the same way, so each link carries d messages of
    S/2 per step. Fully connected (Thakur): 3 a + 3 (S/2)/B = 123 us. Here, cut-through:
    uncontended sum_k (d_k a + (S/2)/B) = 7 a + 120 us = 127 us, simulated sum_k (a + d_k
    (S/2)/B) = 3 a + 280 us = 283 us; store-and-forward sum_k d_k (a + (S/2)/B) = 287 us."""
    topo = make((8,), True)
    S = 8e6
    for t in every_engine(topo, "bruck", S, "cut-through").values():
        assert t == pytest.approx(3 * A + 7 * 4e6 / B, rel=REL)
    assert analytic_time(topo, "all-to-all", "bruck", S, routing="cut-through") == pytest.approx(
        7 * A + 3 * 4e6 / B, rel=REL)
    for t in every_engine(topo, "bruck", S).values():
        assert t == pytest.approx(7 * (A + 4e6 / B), rel=REL)


def test_split_halves_contend_off_the_square():
    """2d-split on 8 x 4: the X phase (n = 8) outlasts the Y phase (n = 4), so the halves meet on
    an axis; the closed form is then the uncontended chain, a lower bound: one half alone is
    (4 a + 8 (S/2)/(8B)) + (2 a + 4 (S/2)/(8B)) = 66 us."""
    topo = make((8, 4), True)
    times = every_engine(topo, "2d-split", 8e6)
    assert set(times) == {"window", "simpy"}
    assert times["window"] == pytest.approx(times["simpy"], rel=1e-12)
    lower = (4 * A + 4e6 / B) + (2 * A + 0.5 * 4e6 / B)
    assert analytic_time(topo, "all-to-all", "2d-split", 8e6) == pytest.approx(lower, rel=REL)
    assert times["simpy"] > lower
    assert times["simpy"] < simulate_collective(topo, "all-to-all", "2d", 8e6).time_s  # still beats 2d


# ------------------------------------------------------------------ defaults, limits, errors
@pytest.mark.parametrize("dims,wrap,expected", [
    ((8,), True, "ring"), ((16,), True, "ring"), ((8,), False, "ring"), ((8, 8), True, "2d-split"),
    ((8, 4), True, "2d-split"), ((4, 4, 4), True, "2d-split"), ((4, 4), False, "2d-split"),
    ((4, 4), (True, False), "2d-split")])
def test_default_is_the_fastest(dims, wrap, expected):
    topo = make(dims, wrap)
    assert default_alltoall_algorithm(topo) == expected
    for S in (4e3, 8e6):  # latency- and bandwidth-bound
        times = {}
        for alg in ALLTOALL_ALGORITHMS:
            try:
                times[alg] = simulate_collective(topo, "all-to-all", alg, S, routing="cut-through").time_s
            except ConfigError:
                continue
        assert times[expected] <= min(times.values()) * (1 + REL), (S, times)


def test_default_elsewhere():
    assert default_alltoall_algorithm(make((4, 4), True, cores=2)) == "pairwise"
    assert default_alltoall_algorithm(make((8, 8), True), group="x") == "ring"
    assert default_alltoall_algorithm(make((8, 8), True), group=[0, 5, 9]) == "pairwise"


def test_fast_on_a_1024_chip_pod():
    """32 x 32 torus, 64 MiB: 2d-split = 2 (16 a + 32 (S/2)/(8B)) by hand, well under a second."""
    topo = load_topology("torus:32x32")
    S = 64 * 2**20
    t0 = time.perf_counter()
    r = simulate_collective(topo, "all-to-all", "2d-split", S)
    assert time.perf_counter() - t0 < 1.0
    a, bw = topo.hop_latency_s, float(topo.link_Bps.max())
    assert r.engine == "fast" and r.exact
    assert r.time_s == pytest.approx(2 * (16 * a + 2 * S / bw), rel=REL)


def test_bad_input():
    topo = make((4, 4), True)
    with pytest.raises(ConfigError, match="chunks"):
        simulate_collective(topo, "all-to-all", "ring", 1e6, chunks=2)
    with pytest.raises(ConfigError, match="both directions"):
        simulate_collective(topo, "all-to-all", "ring", 1e6, bidirectional=True)
    with pytest.raises(UnknownNameError, match="all-to-all algorithm"):
        simulate_collective(topo, "all-to-all", "halving-doubling", 1e6)
    with pytest.raises(ConfigError, match="explicit replica list"):
        simulate_collective(topo, "all-to-all", "2d", 1e6, group=[0, 1, 2])
    with pytest.raises(ConfigError, match="cores per chip"):
        simulate_collective(make((4, 4), True, cores=2), "all-to-all", "2d", 1e6)
    with pytest.raises(UnknownNameError):
        simulate_collective(topo, "all-reduce", "pairwise", 1e6)


def test_replay_catches_a_broken_schedule():
    """Dropping the wait for the previous step's arrival lets the ring forward blocks it does not
    hold yet: the replay says so."""
    plan = plan_collective(make((6,), True), "all-to-all", "ring")
    sched = compile_messages(plan, 6e6, track=True)
    out = run_schedule(sched, record=True)
    assert replay_a2a(sched, out.ready_t, out.deliver_t) == []
    sched = compile_messages(plan, 6e6, track=True)
    sched.deps = [d for d in sched.deps if not np.all(d[2] == 0)]
    out = run_schedule(sched, record=True)
    assert any("before holding" in p for p in replay_a2a(sched, out.ready_t, out.deliver_t))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=faulty_slices(), alg=st.sampled_from(ALLTOALL_ALGORITHMS), S=st.sampled_from([1e5, 3 * 2**20 + 7]),
       routing=st.sampled_from(ROUTINGS))
def test_auto_engine_equals_simpy_on_faulty_slices(topo, alg, S, routing):
    """The engine ``auto`` picks (the fast one wherever no link carries two streams, even with
    slow links, where the closed form stops being exact) against SimPy; never below the closed form."""
    try:
        r = simulate_collective(topo, "all-to-all", alg, S, routing=routing)
    except ConfigError:
        assume(False)
    s = simulate_collective(topo, "all-to-all", alg, S, routing=routing, engine="simpy")
    assert r.time_s == pytest.approx(s.time_s, rel=REL) and r.events == s.events
    assert s.time_s >= r.analytic_time_s * (1 - REL)
    if r.exact:
        assert s.time_s == pytest.approx(r.analytic_time_s, rel=REL)


@pytest.mark.parametrize("alg", ALLTOALL_ALGORITHMS)
def test_one_member_groups_take_no_time(alg):
    topo = make((1, 4), True)  # axis x has one chip
    r = simulate_collective(topo, "all-to-all", alg, 1e6, group="x")
    assert r.time_s == 0.0 and r.events == 0 and r.group_size == 1
    assert analytic_time(topo, "all-to-all", alg, 1e6, group="x") == 0.0


def test_collective_time_memo_agrees():
    """The memoized time the step asks for: the closed form where exact, else the engine's."""
    from wus_sim.collectives import collective_time, collective_times

    topo = make((8, 8), True)
    for alg in ("2d-split", "pairwise"):
        t = collective_time(topo, "all-to-all", alg, 8e6, routing="cut-through")
        assert t == pytest.approx(simulate_collective(topo, "all-to-all", alg, 8e6, routing="cut-through",
                                                      engine="simpy").time_s, rel=REL)
    sizes = [1e5, 2e6, 8e6]
    assert collective_times(topo, "all-to-all", "bruck", sizes) == [
        collective_time(topo, "all-to-all", "bruck", S) for S in sizes]


def test_pairwise_on_a_torus_by_its_busiest_links():
    """4 x 4 torus, S = 16 MB (b = 1 MB, 10 us on a link), ranks row-major. Every shortest-path
    all-to-all moves S x (sum of distances to the 15 others) = S x 32 over the links (per axis
    the distances 1, 2, 1 to the others of a line, 4 lines). 2d-split spreads it evenly: every
    one of the 64 directed links carries S/2, in 2 (2 a + 4 (S/2)/(8B)) = 84 us. Pairwise's
    dimension-order routes send distance-2 blocks the + way: + links carry (1 + 2) x 4 = 12
    blocks, - links 4. Its rounds also wait for each other: round k's busiest link carries m_k
    blocks, m = 1, 2, 1, 1, 2, 2, 2, 2, 2, 2, 2, 1, 1, 2, 1 (counted over the slice's routes
    here), 24 in all, so cut-through takes at least 24 b/B + 15 a = 255 us, above the
    uncontended closed form."""
    topo = make((4, 4), True)
    S, b = 16e6, 1e6
    m = []
    for k in range(1, 16):
        load = {}
        for i in range(16):
            for link in topo.route(i, (i + k) % 16):
                load[link] = load.get(link, 0) + 1
        m.append(max(load.values()))
    assert m == [1, 2, 1, 1, 2, 2, 2, 2, 2, 2, 2, 1, 1, 2, 1]
    split = simulate_collective(topo, "all-to-all", "2d-split", S)
    assert split.time_s == pytest.approx(2 * (2 * A + 4 * (S / 2) / (8 * B)), rel=REL)
    used = split.link_bytes[split.link_bytes > 0]
    assert len(used) == 64 and np.allclose(used, S / 2) and used.sum() == pytest.approx(32 * S)
    pw = simulate_collective(topo, "all-to-all", "pairwise", S, routing="cut-through")
    used = pw.link_bytes[pw.link_bytes > 0]
    assert sorted(set(np.round(used / b, 9))) == [4, 12] and used.sum() == pytest.approx(32 * S)
    assert pw.time_s >= (24 * b / B + 15 * A) * (1 - REL)
    assert pw.analytic_time_s < 24 * b / B + 15 * A and not pw.exact


@pytest.mark.parametrize("alg", ALLTOALL_ALGORITHMS)
@pytest.mark.parametrize("dims,cores,parts", [
    ((4, 4), 1, ((0, 1, 4),)),              # the whole x axis: the same as group x
    ((8, 4), 1, ((0, 2, 4), (1, 1, 4))),    # every other chip along x, with y: 16 members
    ((4, 2), 2, ((-1, 1, 2), (0, 1, 4))),   # a chip's cores with x
    ((4, 4), 2, ((1, 1, 4),)),              # y without the cores: two groups per chip
])
def test_mesh_axis_groups(alg, dims, cores, parts):
    """A mesh axis's groups (what the expert axis will ask for): every block delivered (the
    replay), the engines agree, time >= the closed form (equal where exact)."""
    from wus_sim.collectives.analytic import is_exact, plan_time
    from wus_sim.collectives.engines import window_engine
    from wus_sim.collectives.schedules.alltoall import mesh_members
    from wus_sim.collectives.schedules.groups import Group

    topo = make(dims, True, cores=cores)
    size = int(np.prod([p[2] for p in parts]))
    g = Group("mesh", parts=parts, size=size)
    members = mesh_members(topo, parts)
    assert members.shape == (topo.num_replicas // size, size)
    assert sorted(members.ravel().tolist()) == list(range(topo.num_replicas))
    if alg in ("ring", "2d", "2d-split") and cores > 1:
        with pytest.raises(ConfigError, match="cores per chip"):
            plan_collective(topo, "all-to-all", alg, group=g)
        return
    plan = plan_collective(topo, "all-to-all", alg, group=g)
    assert plan.group_size == size
    sched = compile_messages(plan, 3e6, track=True)
    out = run_schedule(sched, record=True)
    assert replay_a2a(sched, out.ready_t, out.deliver_t) == []
    assert window_engine.run_schedule(sched).time_s == pytest.approx(out.time_s, rel=1e-12)
    r = simulate_collective(topo, "all-to-all", alg, 3e6, group=g)
    assert r.time_s == pytest.approx(out.time_s, rel=REL)
    assert out.time_s >= plan_time(plan, 3e6) * (1 - REL)
    if is_exact(plan):
        assert out.time_s == pytest.approx(plan_time(plan, 3e6), rel=REL)
    if parts == ((0, 1, 4),):
        assert r.time_s == pytest.approx(simulate_collective(topo, "all-to-all", alg, 3e6, group="x").time_s,
                                         rel=REL)


@pytest.mark.parametrize("dims,parts,expected", [
    ((8, 4), ((0, 2, 4), (1, 1, 4)), "2d-split"), ((8, 8), ((0, 1, 4), (1, 1, 4)), "2d-split"),
    ((8, 8), ((0, 1, 8),), "ring"), ((8, 8), ((0, 1, 4),), "ring"), ((8, 8), ((0, 2, 4),), "ring")])
def test_mesh_group_default_is_the_fastest(dims, parts, expected):
    from wus_sim.collectives.schedules.groups import Group

    topo = make(dims, True)
    g = Group("mesh", parts=parts, size=int(np.prod([p[2] for p in parts])))
    assert default_alltoall_algorithm(topo, g) == expected
    for S in (4e3, 8e6):
        times = {alg: simulate_collective(topo, "all-to-all", alg, S, group=g, routing="cut-through").time_s
                 for alg in ALLTOALL_ALGORITHMS}
        assert times[expected] <= min(times.values()) * (1 + REL), (S, times)
