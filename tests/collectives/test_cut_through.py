"""Cut-through routing (``routing="cut-through"``): the SimPy link model against an independent
reference under contention, both routings equal on single-hop schedules, a mesh's folded
rings against their closed form, and the fast engine and the closed form against SimPy."""

import heapq
import itertools
import subprocess
import sys
import json

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings, strategies as st

from wus_sim.collectives import REDUCE_OPS, analytic_time, collective_time, simulate_collective
from wus_sim.collectives.engines import fast_engine
from wus_sim.collectives.analytic import is_exact, plan_time
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.inputs.errors import UnknownNameError
from wus_sim.hardware.network import ROUTINGS, Network, link_key_Bps, link_key_latency_s, tie_key
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.units import KiB, MiB

from make_topology import folded_ring_time, make

REL = 1e-9
CT, SF = "cut-through", "store-and-forward"
sizes = st.sampled_from([1 * KiB, 4 * KiB, 100 * KiB, 1 * MiB, 64 * MiB, 1 << 30, 3 * (1 << 30)])


def rel_err(a, b):
    return abs(a - b) / abs(b)


# ===================================================== the link model itself
def simulate(topo, messages, routing):
    env = simpy.Environment()
    net = Network(env, topo, routing=routing)
    out = {}
    for i, (ready, path, nbytes, rank, seq) in enumerate(messages):
        net.send(path, nbytes, rank=rank, seq=seq, callback=lambda tag, t: out.__setitem__(tag, t), tag=i,
                 delay=ready)
    env.run()
    return [out[i] for i in range(len(messages))], net


def reference(topo, messages):
    """Independent cut-through reference: one heap of (tie key, kind, rank, seq) events (the
    engines' ordering rule, ``wus_sim.hardware.network.tie_key``); a hop starts at max(head arrival,
    link free), ends at max(start + b/bw, tail arrival); the head reaches the next chip
    ``lat`` after the start, the tail ``lat`` after the end."""
    bw, lat = link_key_Bps(topo), link_key_latency_s(topo)
    heap, counter = [], itertools.count()
    busy, free, waiting, out = {}, {}, {}, {}

    def push(t, kind, rank, seq, ev):
        heapq.heappush(heap, (tie_key(t), kind, rank, seq, next(counter), t, ev))

    def start(t, link, i, h, tail):
        ready, path, nbytes, rank, seq = messages[i]
        busy[link] = True
        t = max(t, free.get(link, 0.0))
        end = free[link] = max(t + nbytes / bw[link], tail)
        push(end, 0, 0, 0, ("rel", link))
        if h + 1 == len(path):
            out[i] = end + lat[link]
        else:
            push(t + lat[link], 1, rank, seq, ("req", i, h + 1, end + lat[link]))

    for i, (ready, path, nbytes, rank, seq) in enumerate(messages):
        push(ready, 1, rank, seq, ("req", i, 0, -np.inf))
    while heap:
        k, _, _, _, _, t, ev = heapq.heappop(heap)
        if ev[0] == "rel":
            busy[ev[1]] = False
            if waiting.get(ev[1]):
                _, _, _, _, i, h, tail, ready = heapq.heappop(waiting[ev[1]])
                start(ready, ev[1], i, h, tail)
            continue
        _, i, h, tail = ev
        ready, path, nbytes, rank, seq = messages[i]
        link = path[h]
        if busy.get(link) or waiting.get(link):
            heapq.heappush(waiting.setdefault(link, []), (k, rank, seq, next(counter), i, h, tail, t))
        else:
            start(t, link, i, h, tail)
    return [out[i] for i in range(len(messages))]


def test_one_message_closed_form_and_unknown_routing():
    topo = make((8,), False, link_GBps=[50.0], hop_latency_us=2.0)
    b = 3e6
    for h in range(1, 8):
        path = topo.route(0, h)
        (t_ct,), _ = simulate(topo, [(0.0, path, b, 0, 0)], CT)
        (t_sf,), _ = simulate(topo, [(0.0, path, b, 0, 0)], SF)
        assert t_ct == pytest.approx(h * 2e-6 + b / 50e9, rel=REL)
        assert t_sf == pytest.approx(h * (2e-6 + b / 50e9), rel=REL)
    # a slower later hop holds the faster one behind it, and vice versa: the slowest hop counts
    slow = topo.with_link_bandwidth(topo.link_id(3, 0, +1), 10e9)
    (t,), net = simulate(slow, [(0.0, slow.route(0, 6), b, 0, 0)], CT)
    assert t == pytest.approx(6 * 2e-6 + b / 10e9, rel=REL)
    with pytest.raises(UnknownNameError, match="cut-through"):
        Network(simpy.Environment(), topo, routing="wormhole")
    assert Network(simpy.Environment(), topo).routing == SF == ROUTINGS[0]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 14))
def test_contention_fifo_matches_reference(seed, n):
    """Random multi-hop messages on a small mesh with one slow link: FIFO per link by
    (head arrival, rank, seq), equal to the independent reference."""
    rng = np.random.default_rng(seed)
    topo = make((4, 3), False, link_GBps=[100.0, 40.0], hop_latency_us=1.0)
    topo = topo.with_link_bandwidth(topo.link_id(1, 0, +1), 25e9)
    messages = []
    for i in range(n):
        a, z = rng.choice(topo.num_chips, 2, replace=False)
        ready = float(rng.choice([0.0, 1e-6, 3e-6, rng.uniform(0, 2e-5)]))
        nbytes = float(rng.choice([1e5, 1e6, rng.uniform(1e3, 2e6)]))
        messages.append((ready, topo.route(int(a), int(z)), nbytes, int(rng.integers(0, 4)), i))
    got, net = simulate(topo, messages, CT)
    want = reference(topo, messages)
    assert np.allclose(got, want, rtol=REL, atol=0)
    # (no per-message "never slower than store-and-forward": under contention an earlier head
    # can take a link first and delay another message; the reference agrees on that)


def test_fifo_order_under_contention():
    """Two messages want the same second hop at the same time: (rank, seq) decides, and the
    loser starts when the winner's tail has left the link."""
    topo = make((3, 3), False)
    b = 1e6
    o, a = b / topo.axis_link_Bps[0], topo.hop_latency_s
    # (0,1) -> (1,1) -> (2,1) and (1,2) -> (1,1) -> (2,1): the second hop is the same link
    shared = topo.route(topo.chip_id((1, 1)), topo.chip_id((2, 1)))[0]
    m0 = (0.0, [topo.route(topo.chip_id((0, 1)), topo.chip_id((1, 1)))[0], shared], b, 1, 0)
    m1 = (0.0, [topo.route(topo.chip_id((1, 2)), topo.chip_id((1, 1)))[0], shared], b, 0, 0)
    (t0, t1), _ = simulate(topo, [m0, m1], CT)
    # both heads reach the shared link after one latency a; rank 0 (m1) wins and holds it until a + o
    assert t1 == pytest.approx(2 * a + o, rel=REL)
    assert t0 == pytest.approx(a + 2 * o + a, rel=REL)
    assert reference(topo, [m0, m1]) == pytest.approx([t0, t1], rel=REL)


# ============================================== collectives: where both routings agree
TORUS_CASES = [("torus:4x4", ("ring", "bidir-ring", "2d", "2d-split")),
               ("torus:2x4x3", ("ring", "bidir-ring", "2d")),
               ("tpu-v3-8", ("ring", "bidir-ring", "2d", "2d-split"))]


@pytest.mark.parametrize("spec,algorithms", TORUS_CASES)
def test_single_hop_schedules_equal_store_and_forward(spec, algorithms):
    """Every edge of a torus ring is one link (and on-chip rings one on-chip link): both
    routings give the same time, on the SimPy engine, the fast engine and in closed form."""
    topo = load_topology(spec)
    for op in REDUCE_OPS:
        for alg in algorithms:
            for kw in ({}, {"chunks": 3}, {"bidirectional": True}):
                plan = plan_collective(topo, op, alg, bidirectional=kw.get("bidirectional", False))
                assert all((e.hops <= 1).all() for p in plan.passes for e in p.rings)
                sf = simulate_collective(topo, op, alg, 3 * MiB, engine="simpy", **kw)
                ct = simulate_collective(topo, op, alg, 3 * MiB, engine="simpy", routing=CT, **kw)
                assert ct.time_s == pytest.approx(sf.time_s, rel=REL), (op, alg, kw)
                assert ct.analytic_time_s == pytest.approx(sf.analytic_time_s, rel=REL)
                assert np.array_equal(ct.link_bytes, sf.link_bytes)
                if fast_engine.supports(topo, op, alg, routing=CT, **kw):
                    fast = simulate_collective(topo, op, alg, 3 * MiB, engine="fast", routing=CT, **kw)
                    assert fast.time_s == pytest.approx(sf.time_s, rel=REL)


def test_single_hop_halving_doubling_pairs_equal():
    """Halving-doubling on a 2-member line is one hop each way: the routings agree."""
    topo = make((2,), False)
    for op in REDUCE_OPS:
        sf = simulate_collective(topo, op, "halving-doubling", MiB, engine="simpy")
        ct = simulate_collective(topo, op, "halving-doubling", MiB, engine="simpy", routing=CT)
        assert ct.time_s == pytest.approx(sf.time_s, rel=REL)


# ============================================ mesh folded rings: the closed form
KIND = {"reduce-scatter": "rs", "all-gather": "ag", "all-reduce": "ar"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=st.integers(2, 24), S=sizes, op=st.sampled_from(REDUCE_OPS), lat=st.sampled_from([0.5, 1.0, 7.0]))
def test_mesh_folded_ring_closed_form(d, S, op, lat):
    topo = make((d,), False, hop_latency_us=lat)
    ct = simulate_collective(topo, op, "ring", S, engine="simpy", routing=CT)
    expect = folded_ring_time(d, S, topo.axis_link_Bps[0], topo.hop_latency_s, KIND[op], routing="cut-through")
    assert rel_err(ct.time_s, expect) < REL
    assert ct.exact and rel_err(ct.analytic_time_s, expect) < REL
    assert rel_err(fast_engine.run(topo, op, "ring", S, routing=CT).time_s, expect) < REL
    sf = simulate_collective(topo, op, "ring", S, engine="simpy")
    if d >= 3:  # two-hop edges: cut-through pays the message time once per edge
        assert ct.time_s < sf.time_s
    else:
        assert ct.time_s == pytest.approx(sf.time_s, rel=REL)


def test_2d_mesh_costs_about_one_hop_not_two():
    """The what-if this option exists for: a 2-D all-reduce on a mesh is ~2x slower than on the
    torus store-and-forward (two-hop folded-ring edges), within 2% of the torus cut-through."""
    S = 64 * MiB
    torus = simulate_collective("torus:8x8", "all-reduce", "2d", S)
    mesh_sf = simulate_collective("mesh:8x8", "all-reduce", "2d", S)
    mesh_ct = simulate_collective("mesh:8x8", "all-reduce", "2d", S, routing=CT)
    assert mesh_sf.time_s > 1.7 * torus.time_s
    assert torus.time_s < mesh_ct.time_s < 1.02 * torus.time_s
    # the latency term is what remains: one extra hop per two-hop edge
    assert mesh_ct.exact and mesh_ct.time_s == pytest.approx(mesh_ct.analytic_time_s, rel=REL)


# ======================================== fast engine and closed form against SimPy
shapes = st.sampled_from([(5,), (7,), (4, 3), (3, 5), (6, 4), (2, 3, 4), (16,)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dims=shapes, wrap=st.sampled_from([False, True, (False, True), (True, False)]),
       op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(["ring", "bidir-ring", "2d", "2d-split"]),
       S=sizes, chunks=st.sampled_from([1, 2, 5]), reduce_GBps=st.sampled_from([None, 50.0, 400.0]),
       cores=st.sampled_from([1, 2]), bw=st.sampled_from([(100.0, 100.0, 100.0), (100.0, 37.0, 64.0)]),
       slow=st.booleans(), bidir=st.booleans())
def test_engines_and_closed_form_agree(dims, wrap, op, alg, S, chunks, reduce_GBps, cores, bw, slow, bidir):
    wrap = wrap if isinstance(wrap, bool) else (wrap + (False,))[: len(dims)]
    topo = make(dims, wrap, link_GBps=list(bw[: len(dims)]), cores=cores)
    if slow:  # one slow link inside a line: a two-hop edge with unequal hops
        topo = topo.with_link_bandwidth(topo.link_id(1 % topo.num_chips, 0, +1), 13e9) \
            if topo.link_exists[topo.link_id(1 % topo.num_chips, 0, +1)] else topo
    red = None if reduce_GBps is None else reduce_GBps * 1e9
    kw = dict(chunks=chunks, reduce_Bps=red, bidirectional=bidir, routing=CT)
    ref = simulate_collective(topo, op, alg, S, engine="simpy", **kw)
    if fast_engine.supports(topo, op, alg, chunks=chunks, bidirectional=bidir, routing=CT):
        fast = simulate_collective(topo, op, alg, S, engine="fast", **kw)
        assert rel_err(fast.time_s, ref.time_s) < REL
        assert np.allclose(fast.link_bytes, ref.link_bytes, rtol=1e-12)
    plan = plan_collective(topo, op, alg, bidirectional=bidir)
    a = plan_time(plan, S, chunks=chunks, reduce_Bps=red, routing=CT)
    assert a == pytest.approx(ref.analytic_time_s, rel=1e-12)
    if is_exact(plan, chunks=chunks, reduce_Bps=red, routing=CT):
        assert rel_err(ref.time_s, a) < REL
    else:
        assert ref.time_s >= a * (1 - REL) or (slow and plan.passes[0].rings[0].num_rings > 1)
    sf = simulate_collective(topo, op, alg, S, engine="simpy", chunks=chunks, reduce_Bps=red,
                             bidirectional=bidir)
    if is_exact(plan, chunks=chunks, reduce_Bps=red):  # uncontended: never slower than store-and-forward
        assert ref.time_s <= sf.time_s * (1 + REL)


def test_halving_doubling_closed_form_is_a_bound():
    for spec in ("torus:4x4", "mesh:4x4", "mesh:8"):
        for op in REDUCE_OPS:
            r = simulate_collective(spec, op, "halving-doubling", 8 * MiB, routing=CT)
            assert not r.exact and r.engine == "window"
            assert r.time_s >= r.analytic_time_s * (1 - REL)
            ref = simulate_collective(spec, op, "halving-doubling", 8 * MiB, routing=CT, engine="simpy")
            assert r.time_s == pytest.approx(ref.time_s, rel=1e-12)


# ============================================================ api and CLI
def test_api_threads_routing():
    topo = load_topology("mesh:4x4")
    ct = analytic_time(topo, "all-reduce", "2d", 8 * MiB, routing=CT)
    sf = analytic_time(topo, "all-reduce", "2d", 8 * MiB)
    assert ct < sf
    assert collective_time(topo, "all-reduce", "2d", 8 * MiB, routing=CT) == ct
    assert collective_time(topo, "all-reduce", "2d", 8 * MiB) == sf
    r = simulate_collective(topo, "all-reduce", "2d", 8 * MiB, routing=CT)
    assert r.routing == CT and r.to_dict()["routing"] == CT
    for fn in (analytic_time, collective_time, simulate_collective):
        with pytest.raises(UnknownNameError):
            fn(topo, "all-reduce", "2d", MiB, routing="wormhole")
    assert not fast_engine.supports(topo, "all-reduce", "2d", routing="wormhole")


def test_cli_routing():
    def run(*extra):
        return subprocess.run([sys.executable, "-m", "wus_sim", "collective", "mesh:4x4", "--op", "all-reduce",
                               "--algorithm", "2d", "--size", "8MiB", "--json", *extra],
                              capture_output=True, text=True)

    ct, sf = run(), run("--routing", "store-and-forward")   # cut-through is the default
    assert sf.returncode == ct.returncode == 0, sf.stderr + ct.stderr
    a, b = json.loads(sf.stdout), json.loads(ct.stdout)
    assert a["routing"] == SF and b["routing"] == CT and b["time_s"] < a["time_s"]
    bad = run("--routing", "wormhole")
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
    assert "cut-through" in bad.stderr and "Traceback" not in bad.stderr


# ============================================================ the step simulator
def test_step_serial_comm_follows_the_routing():
    """A serial replicated step on a mesh slice: its exposed communication is the sum of the
    gradient collectives' closed forms under the routing asked for; cut-through is cheaper."""
    from wus_sim.training.step import StepOptions, simulate_step

    topo = load_topology("tpu-v3-32")  # 4x4 mesh (sub-pod slice), 2 cores per chip
    comm = {}
    for routing in ROUTINGS:
        opts = StepOptions(overlap_grad_reduce=False, overlap_all_gather=False, routing=routing, bidirectional=False)
        res = simulate_step("resnet50", topo, "momentum", "replicated", options=opts)
        want = sum(analytic_time(topo, c.op, "2d", c.nbytes, routing=routing) for c in res.work.grad_collectives)
        assert res.breakdown["exposed_comm_s"] == pytest.approx(want, rel=1e-9)
        comm[routing] = want
    assert comm[CT] < comm[SF]


def test_point_key_and_cli_step(capsys):
    from wus_sim.cli import main
    from wus_sim.inputs.errors import ConfigError
    from wus_sim.experiments.spec import check_point_value, complete_point
    from wus_sim.experiments.records import simulate_point

    assert complete_point({"workload": "resnet50", "topology": "tpu-v3-32"})["routing"] == CT
    assert check_point_value("routing", CT) == CT
    with pytest.raises(ConfigError, match="cut-through"):
        check_point_value("routing", "wormhole")
    base = {"workload": "resnet50", "topology": "torus:4x4", "strategy": "replicated"}
    torus = [simulate_point({**base, "routing": r})[0]["step_time_s"] for r in ROUTINGS]
    assert torus[0] == pytest.approx(torus[1], rel=1e-12)  # one-hop rings: nothing changes
    assert main(["step", "resnet50", "-t", "mesh:4x4", "--strategy", "replicated", "--json",
                 "--no-overlap-grad-reduce", "--no-bidirectional", "--routing", "cut-through"]) == 0
    ct = json.loads(capsys.readouterr().out)
    assert main(["step", "resnet50", "-t", "mesh:4x4", "--strategy", "replicated", "--json",
                 "--no-overlap-grad-reduce", "--no-bidirectional", "--routing", "store-and-forward"]) == 0
    sf = json.loads(capsys.readouterr().out)
    assert ct["routing"] == CT and sf["routing"] == SF
    assert ct["breakdown"]["exposed_comm_s"] < sf["breakdown"]["exposed_comm_s"]
    assert main(["step", "resnet50", "-t", "mesh:4x4", "--routing", "wormhole"]) == 2
    err = capsys.readouterr().err
    assert "unknown routing" in err and "Traceback" not in err
