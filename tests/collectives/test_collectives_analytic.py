"""Closed forms against the SimPy engine: equal on uncontended schedules (property tests over
shapes, sizes, chunks, reduction, per-axis bandwidths), textbook forms where they apply, and
halving-doubling on a torus slower than its closed form because its messages contend."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from wus_sim.collectives import REDUCE_OPS, simulate_collective
from wus_sim.collectives.analytic import _max_window, is_exact, plan_time, ring_time
from wus_sim.collectives.schedules.loads import shared_link_streams
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.inputs.units import GiB, KiB, MiB

from make_topology import make

REL = 1e-9  # the issue asks for 1e-6; the engines agree to rounding


def messages(plan, chunks):
    """Messages the SimPy engine would simulate (to keep examples small)."""
    return sum(p.steps * chunks * len(p.rings) * p.rings[0].num_rings * p.size for p in plan.passes)


def simpy_time(topo, op, alg, S, **kw):
    return simulate_collective(topo, op, alg, S, engine="simpy", **kw).time_s


@st.composite
def slices(draw, wrap=st.just(True), max_chips=256):
    ndim = draw(st.integers(1, 3))
    dims = draw(st.lists(st.integers(2, 64), min_size=ndim, max_size=ndim))
    assume(math.prod(dims) <= max_chips)
    wraps = [draw(wrap) for _ in dims]
    bws = draw(st.lists(st.sampled_from([25.0, 45.0, 50.0, 62.5, 100.0]), min_size=ndim, max_size=ndim))
    lat = draw(st.sampled_from([0.0, 0.5, 1.0, 5.0]))
    cores = draw(st.sampled_from([1, 1, 2]))
    return make(dims, wraps, link_GBps=bws, hop_latency_us=lat, cores=cores)


sizes = st.integers(KiB, 4 * GiB)
reductions = st.sampled_from([None, None, 900e9, 450e9, 20e9])  # HBM-like, and slower than a link


# ============================================================ property tests
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=slices(), S=sizes, op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(["ring", "bidir-ring", "2d"]),
       bidir=st.booleans(), chunks=st.sampled_from([1, 1, 2, 3, 8]), red=reductions)
def test_simulation_equals_closed_form_on_tori(topo, S, op, alg, bidir, chunks, red):
    plan = plan_collective(topo, op, alg, bidirectional=bidir)
    assume(messages(plan, chunks) <= 40_000)
    exact = is_exact(plan, chunks=chunks, reduce_Bps=red)
    # on a torus every ring schedule is uncontended; only the all-reduce turn with a
    # reduction slower than a link, on rings of unlike edges, falls outside the closed form
    slow_reduce = red is not None and chunks > 1 and red < max(topo.axis_link_Bps)
    assert exact or slow_reduce
    got = simpy_time(topo, op, alg, S, bidirectional=bidir, chunks=chunks, reduce_Bps=red)
    want = plan_time(plan, S, chunks=chunks, reduce_Bps=red)
    if exact:
        assert got == pytest.approx(want, rel=REL)
    else:
        assert got >= want * (1 - REL)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=slices(wrap=st.booleans(), max_chips=128), S=sizes, op=st.sampled_from(REDUCE_OPS),
       alg=st.sampled_from(["ring", "2d", "2d-split"]), chunks=st.sampled_from([1, 2, 5]), red=reductions)
def test_meshes_and_partial_tori(topo, S, op, alg, chunks, red):
    """Folded mesh rings (1- and 2-hop edges), whole-slice snakes, members that finish a phase
    at different times: exact wherever no link carries two streams."""
    plan = plan_collective(topo, op, alg)
    assume(messages(plan, chunks) <= 30_000)
    got = simpy_time(topo, op, alg, S, chunks=chunks, reduce_Bps=red)
    want = plan_time(plan, S, chunks=chunks, reduce_Bps=red)
    if is_exact(plan, chunks=chunks, reduce_Bps=red):
        assert got == pytest.approx(want, rel=REL)
    else:
        assert got >= want * (1 - REL)


@pytest.mark.parametrize("dims,alg,chunks,red", [
    ((64, 4), "2d", 4, 900e9), ((8, 8, 4), "2d", 2, None), ((16, 16), "2d-split", 1, 450e9),
    ((32, 32), "2d", 1, None), ((256,), "ring", 1, None),
])
def test_larger_slices(dims, alg, chunks, red):
    topo = make(dims, True, link_GBps=[100.0, 50.0, 25.0][: len(dims)] if alg != "2d-split" else 100.0)
    plan = plan_collective(topo, "all-reduce", alg)
    assert is_exact(plan, chunks=chunks, reduce_Bps=red)
    got = simpy_time(topo, "all-reduce", alg, 64 * MiB, chunks=chunks, reduce_Bps=red)
    assert got == pytest.approx(plan_time(plan, 64 * MiB, chunks=chunks, reduce_Bps=red), rel=REL)


# ============================================================ textbook forms
@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 64), S=sizes, lat=st.sampled_from([0.0, 1.0, 3.0]), op=st.sampled_from(REDUCE_OPS))
def test_ring_textbook_form(d, S, lat, op):
    """Thakur et al. 2005: ring RS/AG = (n-1)(alpha + S/(n beta)); AR twice that."""
    topo = make((d,), True, hop_latency_us=lat)
    steps = 2 * (d - 1) if op == "all-reduce" else d - 1
    expect = steps * (topo.hop_latency_s + S / d / topo.axis_link_Bps[0])
    assert plan_time(plan_collective(topo, op, "ring"), S) == pytest.approx(expect, rel=REL)


@settings(max_examples=40, deadline=None)
@given(dx=st.integers(2, 64), dy=st.integers(2, 64), S=sizes, bx=st.sampled_from([50.0, 100.0]),
       by=st.sampled_from([25.0, 100.0]), cores=st.sampled_from([1, 2]))
def test_2d_torus_allreduce_form(dx, dy, S, bx, by, cores):
    """Phases add: sum over axes of 2(d-1)(alpha + S_axis/(d bw_axis)); the faster axis goes
    first on the whole buffer (x on ties), the other on S / d_first; plus the on-chip
    reduce-scatter and all-gather, (c-1) S/(c onchip_bw) each."""
    topo = make((dx, dy), True, link_GBps=[bx, by], cores=cores)
    a = topo.hop_latency_s
    (d1, b1), (d2, b2) = ((dx, bx), (dy, by)) if bx >= by else ((dy, by), (dx, bx))
    expect = 2 * (d1 - 1) * (a + S / d1 / (b1 * 1e9)) + 2 * (d2 - 1) * (a + S / d1 / d2 / (b2 * 1e9))
    expect += 2 * (cores - 1) * S / cores / topo.onchip_Bps
    assert plan_time(plan_collective(topo, "all-reduce", "2d"), S) == pytest.approx(expect, rel=REL)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 64), S=sizes, K=st.integers(1, 16), lat=st.sampled_from([0.0, 1.0, 20.0]),
       red=st.sampled_from([None, 900e9, 30e9]))
def test_chunked_ring_reduce_scatter_form(n, S, K, lat, red):
    """Uniform ring, K pieces of s seconds per link, rho per piece summed, alpha per hop:
    T = (n-2) max(K s, s + alpha + rho) + K s + alpha + rho (the link is busy every step when
    K s covers one piece's round, else every step takes one piece's round)."""
    topo = make((n,), True, hop_latency_us=lat)
    s = S / n / K / topo.axis_link_Bps[0]
    rho = 0.0 if red is None else S / n / K / red
    a = topo.hop_latency_s
    expect = (n - 2) * max(K * s, s + a + rho) + K * s + a + rho
    got = plan_time(plan_collective(topo, "reduce-scatter", "ring"), S, chunks=K, reduce_Bps=red)
    assert got == pytest.approx(expect, rel=REL)


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 64), S=sizes, op=st.sampled_from(REDUCE_OPS), lat=st.sampled_from([0.0, 1.0, 7.0]))
def test_folded_mesh_line_form(d, S, op, lat):
    """K = 1: no link queues, so the time is the slowest window of N consecutive edges
    (N = steps), each edge hops*(alpha + b/bw)."""
    topo = make((d,), False, hop_latency_us=lat)
    plan = plan_collective(topo, op, "ring")
    e = plan.halves[0][0].rings[0]
    hops = list(e.hops[0])
    N = 2 * (d - 1) if op == "all-reduce" else d - 1
    window = max(sum(hops[(i - j) % d] for j in range(1, N + 1)) for i in range(d))
    expect = window * (topo.hop_latency_s + S / d / topo.axis_link_Bps[0])
    assert plan_time(plan, S) == pytest.approx(expect, rel=REL)
    if d <= 40:
        assert simpy_time(topo, op, "ring", S) == pytest.approx(expect, rel=REL)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("n", [3, 8, 17])
def test_one_slow_link_skews_a_ring_exactly(op, n):
    """A ring whose edges differ (one link at 1/10 of the bandwidth): the closed form follows
    the slow link's queue and stays exact."""
    topo = make((n,), True)
    slow = topo.with_link_bandwidth([int(topo.link_id(0, 0, +1))], 10e9)
    S = 64 * MiB
    for chunks, red in ((1, None), (4, 900e9)):
        plan = plan_collective(slow, op, "ring")
        assert is_exact(plan, chunks=chunks, reduce_Bps=red)
        want = plan_time(plan, S, chunks=chunks, reduce_Bps=red)
        assert want > plan_time(plan_collective(topo, op, "ring"), S, chunks=chunks, reduce_Bps=red)
        assert simpy_time(slow, op, "ring", S, chunks=chunks, reduce_Bps=red) == pytest.approx(want, rel=REL)


# ============================================================ halving-doubling
@pytest.mark.parametrize("dims", [(8, 8), (4, 4, 4), (16,)])
def test_halving_doubling_on_a_torus_is_slower_than_its_closed_form_because_links_contend(dims):
    """The closed form is each member's chain of log2 P exchanges over its dimension-order
    route, pieces pipelined, as if it had those links to itself. On a torus, partners P/2^k
    apart share links: with pipelined pieces (chunks=4) the shared links queue and the
    simulation is far slower. Why, from the per-link counters: the busiest link is busy
    longer than the whole closed-form time, and it carries more bytes than one message per
    step could put on it."""
    topo = make(dims, True)
    S = 64 * MiB
    P = topo.num_chips
    r = simulate_collective(topo, "all-reduce", "halving-doubling", S, chunks=4)
    assert r.engine == "window" and not r.exact  # contended: an event engine runs it
    assert r.time_s > 1.4 * r.analytic_time_s
    assert r.link_busy_s.max() > r.analytic_time_s
    one_message_per_step = 2 * S * (1 - 1 / P)  # sum of the message sizes of all 2 log2 P steps
    assert r.link_bytes.max() > 1.2 * one_message_per_step
    plan = plan_collective(topo, "all-reduce", "halving-doubling")
    assert shared_link_streams(plan) > 0
    e = plan.halves[0][0].rings[0]
    first = [k for i in range(P) for k in topo.route(int(e.members[0, i]), int(e.members[0, i ^ (P // 2)]))]
    assert np.bincount(first).max() > 1  # step 0 alone puts several messages on one link


def test_halving_doubling_one_piece_shares_links_without_waiting():
    """With one piece per message, every member's step-k message takes the same number of hops
    and leaves at the same time, so store-and-forward staggers them: a shared link serves one
    message per hop-time and none waits. The chain closed form is then the time, although
    links carry several messages per step; the textbook fully connected form (Thakur et al.:
    log2 P alpha + (P-1)/P S beta per half) is far below, because every exchange is routed
    over P/2^k hops and store-and-forward pays each hop in full."""
    topo = make((8, 8), True)
    S = 64 * MiB
    P = topo.num_chips
    r = simulate_collective(topo, "all-reduce", "halving-doubling", S)
    assert r.time_s == pytest.approx(r.analytic_time_s, rel=REL)
    assert r.link_bytes.max() > 2 * S * (1 - 1 / P)
    textbook = 2 * (math.log2(P) * topo.hop_latency_s + (P - 1) / P * S / topo.axis_link_Bps[0])
    assert r.time_s > 2 * textbook


def test_halving_doubling_without_contention_is_exact():
    """Two members exchange over two distinct directed links: nothing contends."""
    topo = make((2, 4), True)
    for op in REDUCE_OPS:
        r = simulate_collective(topo, op, "halving-doubling", 64 * MiB, group="x", chunks=3, reduce_Bps=900e9)
        assert r.exact and r.time_s == pytest.approx(r.analytic_time_s, rel=REL)


# ============================================================ building blocks
@settings(max_examples=200, deadline=None)
@given(u=st.lists(st.integers(-5, 5), min_size=2, max_size=12), data=st.data())
def test_window_maximum_equals_brute_force(u, data):
    n = len(u)
    heavy = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    lo = data.draw(st.integers(1, n - 1))
    hi = data.draw(st.integers(lo, n - 1))
    use_heavy = data.draw(st.booleans())
    best = -math.inf
    for start, length in itertools.product(range(n), range(lo, hi + 1)):
        idx = [(start + j) % n for j in range(length)]
        if use_heavy and not heavy[idx].any():
            continue
        best = max(best, float(sum(u[i] for i in idx)))
    got = _max_window(np.array(u, float), heavy if use_heavy else None, lo, hi)
    assert got == best


def test_ring_time_of_one_member_is_zero_and_uniform_edges_reduce_to_textbook():
    assert ring_time([1.0], [1.0], "ar") == 0.0
    tau, s = 3.0, 1.0
    for n in (2, 5):
        assert ring_time([tau] * n, [s] * n, "rs") == pytest.approx((n - 1) * tau)
        assert ring_time([tau] * n, [s] * n, "ar") == pytest.approx(2 * (n - 1) * tau)
