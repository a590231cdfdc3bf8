"""The fast engine against closed forms, an independent per-message simulation, and the SimPy engine.

Three independent references:

* textbook alpha-beta forms derived here for uniform tori (ring, bidirectional, 2-D,
  hierarchical, with chunks and reduction) and for the folded ring of a mesh line;
* ``_des``: a small discrete-event simulation written for this test (heap of events,
  an explicit FIFO queue per link keyed by (ready time, sender, sequence), times compared
  by the shared ``wus_sim.hardware.network.tie_key``), which does not rely on the engine's argument
  that FIFO order equals step order;
* the SimPy engine of :mod:`wus_sim.collectives.engines.simpy_engine`.
"""

from dataclasses import replace
import heapq
import itertools
import math
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from wus_sim.collectives import REDUCE_OPS, analytic, analytic_time, simulate_collective
from wus_sim.collectives.schedules import embedding
from wus_sim.collectives.engines import fast_engine as fe
from wus_sim.hardware.network import link_key_Bps, link_key_latency_s, tie_key
from wus_sim.inputs.errors import ConfigError
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.units import GiB, KiB, MiB

from make_topology import folded_ring_time, make

REL = 1e-9
KIND = {"reduce-scatter": "rs", "all-gather": "ag", "all-reduce": "ar"}


def rel_err(a, b):
    return abs(a - b) / abs(b)


# ======================================================= textbook closed forms
def ring_time(n, buf, bw, lat, kind, chunks=1, reduce_Bps=None):
    """A uniform ring of n members (every member alike), buffer *buf* per member.

    K = 1: ``N (lat + buf/(n bw)) + reductions``, N = n-1 (RS, AG) or 2(n-1) (AR): the
    classic forms (Thakur, Rabenseifner and Gropp 2005). With K pieces of ``o`` seconds,
    piece (k, c) starts at the longest path through the (step, piece) lattice: every
    step boundary crossed "vertically" (waiting for the same piece of the previous step)
    costs ``lat + red - (K-1) o`` more than crossing it along the link's back-to-back
    queue, so it is taken exactly when positive.
    """
    if n <= 1:
        return 0.0
    nsteps = 2 * (n - 1) if kind == "ar" else n - 1
    o = buf / n / chunks / bw
    red = 0.0 if reduce_Bps is None else buf / n / chunks / reduce_Bps
    reds = [red if (kind != "ag" and k < n - 1) else 0.0 for k in range(nsteps)]
    longest = (nsteps * chunks - 1) * o + sum(max(0.0, lat + reds[k - 1] - (chunks - 1) * o)
                                               for k in range(1, nsteps))
    return longest + o + lat + reds[-1]


def torus_time(topo, op, algorithm, S, *, bidirectional=False, chunks=1, reduce_Bps=None, group=None):
    """Closed form on a uniform torus: phases add, each a uniform ring."""
    dirs = 2 if (bidirectional or algorithm == "bidir-ring") else 1
    kind = KIND[op]
    lat = topo.hop_latency_s
    c = topo.cores_per_chip
    total = 0.0
    if c > 1:
        if kind != "ag":
            total += ring_time(c, S, topo.onchip_Bps, 0.0, "rs", chunks, reduce_Bps)
        if kind != "rs":
            total += ring_time(c, S, topo.onchip_Bps, 0.0, "ag", chunks, reduce_Bps)
    axes = [{"x": 0, "y": 1, "z": 2}[group]] if group is not None else list(range(topo.ndim))
    axes = [a for a in axes if topo.dims[a] > 1]
    # the fastest line takes the whole buffer (every axis wraps here, so: by link bandwidth,
    # axis order on ties): reduce-scatter cost sum (1 - 1/d) B_i / bw_i is least that way
    axes.sort(key=lambda a: -topo.axis_link_Bps[a])
    buf = S / dirs
    for i, a in enumerate(axes):
        d, bw = topo.dims[a], topo.axis_link_Bps[a]
        last = i == len(axes) - 1
        if kind == "ar":
            total += ring_time(d, buf, bw, lat, "ar" if last else "rs", chunks, reduce_Bps)
            if not last:
                total += ring_time(d, buf, bw, lat, "ag", chunks, reduce_Bps)
        else:
            total += ring_time(d, buf, bw, lat, kind, chunks, reduce_Bps)
        buf /= d
    return total


# ==================================================== an independent simulator
def _des(topo, op, algorithm, S, *, group=None, bidirectional=False, chunks=1, reduce_Bps=None):
    """Per-message discrete-event simulation of the same schedule (uses the engine's
    ring embeddings and stage list, not its recurrence). Returns (time_s, events)."""
    c = topo.cores_per_chip
    plan, why = fe._plan(topo, op, algorithm, group, bidirectional)
    assert why is None, why
    # the shared plan's passes as (ring embeddings, kind, fraction of S): nothing of the engine's arrays
    halves = [[(tuple(p.rings), p.kind, p.fraction) for p in passes] for passes in plan.halves]
    flat = any(p.level == "flat" for p in plan.passes)
    onchip = embedding.onchip_rings(topo)
    key_bw, key_lat = link_key_Bps(topo), link_key_latency_s(topo)
    heap, counter = [], itertools.count()
    link_busy, link_queue = {}, {}
    hop_count = [0]

    def at(t, fn, prio=1, key=(-1, ())):
        heapq.heappush(heap, (tie_key(t), prio, key, next(counter), fn))

    def send(t, sender, seq, path, on_arrival):
        # ties on a link go by (ready time, sender, position in the sender's schedule)
        key = (sender, seq)

        def request(h, t_ready):
            link, occ, lat = path[h]
            hop_count[0] += 1

            def start(t0):
                link_busy[link] = True

                def release():
                    link_busy[link] = False
                    if link_queue.get(link):
                        _, _, _, nxt = heapq.heappop(link_queue[link])
                        nxt(t0 + occ)
                at(t0 + occ, release, prio=0)
                t_arr = t0 + occ + lat
                if h + 1 < len(path):
                    at(t_arr, lambda: request(h + 1, t_arr), key=key)
                else:
                    at(t_arr, lambda: on_arrival(t_arr), key=key)

            if link_busy.get(link):
                heapq.heappush(link_queue.setdefault(link, []), (tie_key(t_ready), key[0], key[1], start))
            else:
                start(t_ready)

        at(t, lambda: request(0, t), key=key)

    class StageRun:
        def __init__(self, stage, on_done, S_stage, order):
            self.rings, self.kind, self.fraction = stage
            self.on_done, self.order = on_done, order
            self.started, self.left, self.done_t = {}, {}, {}
            self.ready, self.arr = {}, {}
            self.where = []
            for d, rings in enumerate(self.rings):
                pos = {int(node): (r, i) for (r, i), node in np.ndenumerate(rings.members)}
                self.where.append(pos)
            self.S = S_stage

        def piece(self, rings):
            return self.fraction * self.S / rings.size / chunks

        def nsteps(self, rings):
            n = rings.size
            return 2 * (n - 1) if self.kind == "ar" else n - 1

        def start(self, node, t):
            self.started[node] = t
            self.left[node] = len(self.rings) * chunks
            self.done_t[node] = t
            for d, rings in enumerate(self.rings):
                r, i = self.where[d][node]
                for p in range(chunks):
                    self.ready[(d, r, i, p, 0)] = t
                    self.emit(d, r, i, p, 0, t)
                    self.advance(d, r, i, p)

        def emit(self, d, r, i, p, k, t):
            rings = self.rings[d]
            if k >= self.nsteps(rings):
                return
            path = [(key, self.piece(rings) / key_bw[key], key_lat[key]) for key in rings.edge_path(r, i)]
            j = (i + 1) % rings.size
            sender = int(rings.members[r, i])
            seq = (self.order, k, p)
            at(t, lambda: send(t, sender, seq, path, lambda ta: self.arrive(d, r, j, p, k, ta)))

        def arrive(self, d, r, j, p, k, t):
            self.arr[(d, r, j, p, k)] = t
            self.advance(d, r, j, p)

        def advance(self, d, r, i, p):
            rings = self.rings[d]
            node = int(rings.members[r, i])
            if node not in self.started:
                return
            n = rings.size
            N = self.nsteps(rings)
            k = 0
            while (d, r, i, p, k + 1) in self.ready:
                k += 1
            # ready(k) known; step k's arrival known?
            while (d, r, i, p, k) in self.arr and (d, r, i, p, k + 1) not in self.ready:
                red = 0.0
                if reduce_Bps is not None and self.kind != "ag" and k < n - 1:
                    red = self.piece(rings) / reduce_Bps
                t = max(self.arr[(d, r, i, p, k)], self.ready[(d, r, i, p, k)]) + red
                self.ready[(d, r, i, p, k + 1)] = t
                if k + 1 < N:
                    self.emit(d, r, i, p, k + 1, t)
                else:
                    self.done_t[node] = max(self.done_t[node], t)
                    self.left[node] -= 1
                    if self.left[node] == 0:
                        at(self.done_t[node], lambda nd=node, tt=self.done_t[node]: self.on_done(nd, tt))
                k += 1

    final = {}
    chip_done = {}
    ncores = topo.num_chips * c

    def core_ag_done(core, t):
        final[core] = t

    core_ag = StageRun(((onchip,), "ag", 1.0), core_ag_done, S, 99) if plan.post else None

    def chips_finished(chip, t):
        if core_ag is None:
            final[chip] = t
        else:
            for j in range(c):
                core_ag.start(chip * c + j, t)

    track_left = {}

    def track_done(chip, t):
        chip_done[chip] = max(chip_done.get(chip, 0.0), t)
        track_left[chip] -= 1
        if track_left[chip] == 0:
            chips_finished(chip, chip_done[chip])

    def make_track(stages):
        runs = [None] * len(stages)
        for i in range(len(stages) - 1, -1, -1):
            nxt = runs[i + 1] if i + 1 < len(stages) else None
            cb = (lambda nd, t, nxt=nxt: nxt.start(nd, t)) if nxt else track_done
            runs[i] = StageRun(stages[i], cb, S, 1 + i)
        return runs

    tracks = [make_track(stages) for stages in halves]

    def chip_start(chip, t):
        track_left[chip] = len(tracks)
        for runs in tracks:
            if runs:
                runs[0].start(chip, t)
            else:
                track_done(chip, t)

    core_rs_left = {}

    def core_rs_done(core, t):
        chip = core // c
        core_rs_left.setdefault(chip, [c, 0.0])
        core_rs_left[chip][0] -= 1
        core_rs_left[chip][1] = max(core_rs_left[chip][1], t)
        if core_rs_left[chip][0] == 0:
            chip_start(chip, core_rs_left[chip][1])

    if plan.pre:
        rs = StageRun(((onchip,), "rs", 1.0), core_rs_done, S, 0)
        for core in range(ncores):
            rs.start(core, 0.0)
    elif flat:  # an explicit replica ring: its members start at once
        for node in plan.halves[0][0].rings[0].members.ravel():
            chip_start(int(node), 0.0)
    else:
        for chip in range(topo.num_chips):
            chip_start(chip, 0.0)
    while heap:
        t, _, _, _, fn = heapq.heappop(heap)
        fn()
    return max(final.values()), hop_count[0]


# ============================================================== embeddings
@pytest.mark.parametrize("spec,alg,bidir", [("torus:6x4", "2d", True), ("mesh:5x4", "2d", False),
                                            ("torus:4x4", "ring", True), ("mesh:3x3", "ring", False)])
def test_engine_uses_every_link_of_the_shared_embedding(spec, alg, bidir):
    """Events and link bytes follow the shared embeddings' hops exactly (RS: n-1 messages per edge)."""
    topo = load_topology(spec)
    plan, _ = fe._plan(topo, "reduce-scatter", alg, None, bidir)
    out = fe.run(topo, "reduce-scatter", alg, MiB, bidirectional=bidir)
    expect_bytes = np.zeros(topo.num_link_slots)
    events = 0
    for stage in plan.halves[0]:
        for emb in stage.rings:
            n = emb.size
            events += (n - 1) * int(emb.hops.sum())
            np.add.at(expect_bytes, emb.links[emb.links >= 0], (n - 1) * stage.fraction * MiB / n)
    assert out.events == events
    assert np.allclose(out.link_bytes, expect_bytes, rtol=1e-12)


# ============================================================= closed forms
sizes = st.integers(KiB, 4 * GiB)


@st.composite
def tori(draw, max_chips=1 << 14):
    ndim = draw(st.integers(1, 3))
    dims = draw(st.lists(st.integers(2, 64), min_size=ndim, max_size=ndim))
    assume(math.prod(dims) <= max_chips)
    bws = draw(st.lists(st.sampled_from([25.0, 50.0, 100.0, 62.5]), min_size=ndim, max_size=ndim))
    lat = draw(st.sampled_from([0.0, 0.5, 1.0, 5.0]))
    return make(dims, True, link_GBps=bws, hop_latency_us=lat)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=tori(), S=sizes, op=st.sampled_from(REDUCE_OPS), bidir=st.booleans())
def test_2d_equals_closed_form_on_tori(topo, S, op, bidir):
    got = fe.run(topo, op, "2d", S, bidirectional=bidir)
    assert rel_err(got.time_s, torus_time(topo, op, "2d", S, bidirectional=bidir)) < REL


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 64), S=sizes, op=st.sampled_from(REDUCE_OPS), alg=st.sampled_from(["ring", "bidir-ring"]),
       lat=st.sampled_from([0.0, 1.0, 3.0]))
def test_ring_equals_textbook_form(d, S, op, alg, lat):
    """Ring AR = 2(n-1)(alpha + S/(n beta)); bidirectional: the same on S/2."""
    topo = make((d,), True, hop_latency_us=lat)
    got = fe.run(topo, op, alg, S).time_s
    dirs = 2 if alg == "bidir-ring" else 1
    steps = {"all-reduce": 2 * (d - 1)}.get(op, d - 1)
    expect = steps * (topo.hop_latency_s + S / dirs / d / topo.axis_link_Bps[0])
    assert rel_err(got, expect) < REL


@settings(max_examples=40, deadline=None)
@given(dx=st.integers(2, 64), dy=st.integers(2, 64), S=sizes)
def test_2d_allreduce_textbook_form(dx, dy, S):
    """2-D AR = sum over axes of 2(d_i - 1)(alpha + S_i/(d_i beta)), S_i = that phase's input."""
    topo = make((dx, dy))
    a, b = topo.hop_latency_s, topo.axis_link_Bps[0]
    expect = 2 * (dx - 1) * (a + S / dx / b) + 2 * (dy - 1) * (a + S / dx / dy / b)
    assert rel_err(fe.run(topo, "all-reduce", "2d", S).time_s, expect) < REL


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=tori(max_chips=4096), S=sizes, op=st.sampled_from(REDUCE_OPS), bidir=st.booleans(),
       chunks=st.integers(1, 8), reduce_GBps=st.sampled_from([None, 50.0, 900.0]),
       cores=st.sampled_from([1, 2, 4]))
def test_chunks_reduction_and_cores_closed_form(topo, S, op, bidir, chunks, reduce_GBps, cores):
    topo = replace(topo, cores_per_chip=cores)
    red = None if reduce_GBps is None else reduce_GBps * 1e9
    got = fe.run(topo, op, "2d", S, bidirectional=bidir, chunks=chunks, reduce_Bps=red)
    expect = torus_time(topo, op, "2d", S, bidirectional=bidir, chunks=chunks, reduce_Bps=red)
    assert rel_err(got.time_s, expect) < REL


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 64), S=sizes, op=st.sampled_from(REDUCE_OPS), lat=st.sampled_from([0.0, 1.0, 7.0]))
def test_mesh_line_folded_ring_closed_form(d, S, op, lat):
    topo = make((d,), False, hop_latency_us=lat)
    got = fe.run(topo, op, "ring", S).time_s
    expect = folded_ring_time(d, S, topo.axis_link_Bps[0], topo.hop_latency_s, KIND[op])
    assert rel_err(got, expect) < REL


def test_analytic_time_agrees():
    cases = [("torus:8x8", "2d"), ("torus:16", "ring"), ("torus:4x4x4", "2d"), ("tpu-v3-32", "2d"),
             ("torus:8x8", "bidir-ring"), ("torus:8x8", "2d-split")]
    for spec, alg in cases:
        topo = load_topology(spec)
        for op in REDUCE_OPS:
            if fe.supports(topo, op, alg):
                a = analytic_time(topo, op, alg, 64 * MiB)
                assert rel_err(fe.run(topo, op, alg, 64 * MiB).time_s, a) < REL, (spec, alg, op)


@st.composite
def slices(draw):
    ndim = draw(st.integers(1, 3))
    dims = draw(st.lists(st.integers(2, 64), min_size=ndim, max_size=ndim))
    assume(math.prod(dims) <= 1024)
    wrap = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
    bws = draw(st.lists(st.sampled_from([25.0, 50.0, 100.0]), min_size=ndim, max_size=ndim))
    return make(dims, wrap, link_GBps=bws, hop_latency_us=draw(st.sampled_from([0.0, 1.0, 4.0])),
                cores=draw(st.sampled_from([1, 2])))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(topo=slices(), S=sizes, op=st.sampled_from(REDUCE_OPS),
       alg=st.sampled_from(["ring", "bidir-ring", "2d", "2d-split"]), bidir=st.booleans(),
       chunks=st.integers(1, 4), reduce_GBps=st.sampled_from([None, 30.0, 900.0]))
def test_equals_shared_closed_form_on_meshes_and_tori(topo, S, op, alg, bidir, chunks, reduce_GBps):
    """Against :func:`wus_sim.collectives.analytic_time` wherever it says it is exact
    (folded mesh rings, mixed wraparound, per-axis bandwidths, chunks, reduction, 2 cores)."""
    if alg != "2d":
        bidir = False
    assume(fe.supports(topo, op, alg, bidirectional=bidir, chunks=chunks))
    plan, _ = fe._plan(topo, op, alg, None, bidir)
    red = None if reduce_GBps is None else reduce_GBps * 1e9
    assume(analytic.is_exact(plan, chunks=chunks, reduce_Bps=red))
    expect = analytic_time(topo, op, alg, S, bidirectional=bidir, chunks=chunks, reduce_Bps=red)
    got = fe.run(topo, op, alg, S, bidirectional=bidir, chunks=chunks, reduce_Bps=red).time_s
    assert rel_err(got, expect) < REL


# ================================================ against a per-message simulation
DES_CASES = [
    ((6,), True, "ring", {}), ((5,), False, "ring", {}), ((2,), False, "ring", {}),
    ((2,), True, "bidir-ring", {}), ((4, 3), True, "2d", {"bidirectional": True}),
    ((4, 5), False, "2d", {}), ((3, 4, 2), (True, False, True), "2d", {}),
    ((4, 4), True, "2d-split", {}), ((4, 3), True, "ring", {}), ((3, 3, 2), True, "bidir-ring", {}),
    ((5, 4), False, "2d", {"group": "y"}), ((6, 4), True, "2d", {"group": "x", "bidirectional": True}),
    ((4, 4), False, "bidir-ring", {}), ((3, 5), False, "ring", {}), ((3, 3, 3), True, "ring", {}),
    ((4, 4), True, "bidir-ring", {"group": [12, 13, 14, 15]}), ((6, 2), True, "ring", {"group": [0, 6, 7, 1]}),
]


@pytest.mark.parametrize("dims,wrap,alg,kw", DES_CASES)
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_equals_per_message_simulation_with_a_slow_link(dims, wrap, alg, kw, op):
    rng = np.random.default_rng(zlib.crc32(repr((dims, alg, op)).encode()))
    if alg == "2d-split":  # supported on square uniform tori only
        topo = make(dims, wrap, hop_latency_us=2.0)
    else:
        topo = make(dims, wrap, link_GBps=rng.choice([50.0, 100.0], size=len(dims)), hop_latency_us=2.0)
        links = np.flatnonzero(topo.link_exists)
        topo = topo.with_link_bandwidth(rng.choice(links, size=2, replace=False), 10e9)
    for chunks, red, cores in [(1, None, 1), (3, 20e9, 1), (1, 40e9, 2), (2, None, 2)]:
        t = replace(topo, cores_per_chip=cores)
        if not fe.supports(t, op, alg, chunks=chunks, **kw):
            # an explicit list names replicas: with 2 cores per chip, [12..15] is two chips and
            # its reverse ring needs the chip link its forward ring uses
            assert cores == 2 and "group" in kw
            continue
        fast = fe.run(t, op, alg, 3 * MiB, chunks=chunks, reduce_Bps=red, **kw)
        ref_t, ref_events = _des(t, op, alg, 3 * MiB, chunks=chunks, reduce_Bps=red, **kw)
        assert rel_err(fast.time_s, ref_t) < REL, (chunks, red, cores)
        assert fast.events == ref_events


# ===================================================================== slow link
@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("n", [3, 8, 17])
def test_one_slow_link_in_a_ring(op, n):
    """Every step of a ring sends one message over each edge, so one link at 1/10 of the
    bandwidth carries n-1 (RS, AG) or 2(n-1) (AR) messages back to back: it never idles
    (the ring feeds it faster than it drains, since 9 b/bw >> latency), and the last
    message arrives one latency after it leaves: T = messages * b / bw_slow + latency."""
    S = 64 * MiB
    topo = make((n,), True)
    slow = topo.with_link_bandwidth([int(topo.link_id(0, 0, +1))], topo.axis_link_Bps[0] / 10)
    b = S / n
    msgs = 2 * (n - 1) if op == "all-reduce" else n - 1
    fast = fe.run(topo, op, "ring", S).time_s
    got = fe.run(slow, op, "ring", S).time_s
    expect = msgs * b / (topo.axis_link_Bps[0] / 10) + topo.hop_latency_s
    assert rel_err(got, expect) < REL
    assert got - fast == pytest.approx(msgs * 9 * b / topo.axis_link_Bps[0] - (msgs - 1) * topo.hop_latency_s,
                                       rel=1e-9)


def test_slow_link_skews_only_its_own_line():
    topo = make((8, 8))
    slow = topo.with_link_bandwidth([int(topo.link_id(3, 0, +1))], 10e9)
    a = fe.run(topo, "reduce-scatter", "2d", 64 * MiB)
    b = fe.run(slow, "reduce-scatter", "2d", 64 * MiB)
    assert b.time_s > a.time_s
    assert b.events == a.events
    assert np.allclose(a.link_bytes, b.link_bytes)
    assert b.link_busy_s[int(topo.link_id(3, 0, +1))] == pytest.approx(10 * a.link_busy_s[int(topo.link_id(3, 0, +1))])


# ================================================================ SimPy engine
def _simpy(topo, op, alg, S, *, group=None, bidirectional=False, chunks=1, reduce_Bps=None):
    """(time_s, events) from the SimPy engine, through the api."""
    out = simulate_collective(topo, op, alg, S, engine="simpy", group=group, bidirectional=bidirectional,
                              chunks=chunks, reduce_Bps=reduce_Bps)
    return out.time_s, out.events


SIMPY_TOPOS = [((4,), True), ((5,), False), ((4, 4), True), ((3, 4), False), ((2, 3), True),
               ((2, 2, 2), True), ((3, 3, 3), True)]


@pytest.mark.parametrize("dims,wrap", SIMPY_TOPOS)
@pytest.mark.parametrize("alg", ["ring", "bidir-ring", "2d", "2d-split"])
def test_equals_simpy_engine(dims, wrap, alg):
    topo = make(dims, wrap, link_GBps=[100.0, 50.0, 25.0][: len(dims)], hop_latency_us=1.5)
    if alg == "2d-split":
        topo = make(dims, wrap, hop_latency_us=1.5)
    ran = 0
    for op in REDUCE_OPS:
        for chunks, red, cores in [(1, None, 1), (2, 30e9, 1), (1, None, 2), (3, 80e9, 2)]:
            t = replace(topo, cores_per_chip=cores)
            if not fe.supports(t, op, alg, chunks=chunks):
                continue
            fast = fe.run(t, op, alg, 2 * MiB, chunks=chunks, reduce_Bps=red)
            ref_t, ref_events = _simpy(t, op, alg, 2 * MiB, chunks=chunks, reduce_Bps=red)
            assert rel_err(fast.time_s, ref_t) < REL, (op, chunks, red, cores)
            assert fast.events == ref_events
            ran += 1
    if alg in ("2d", "ring"):
        assert ran > 0  # these are static and uncontended on every shape here


@pytest.mark.parametrize("dims,wrap,alg,kw", DES_CASES)
def test_equals_simpy_engine_with_slow_links(dims, wrap, alg, kw):
    rng = np.random.default_rng(zlib.crc32(repr((dims, alg)).encode()))
    topo = make(dims, wrap, hop_latency_us=2.0)
    if alg != "2d-split":
        links = np.flatnonzero(topo.link_exists)
        topo = topo.with_link_bandwidth(rng.choice(links, size=2, replace=False), 10e9)
    for op in REDUCE_OPS:
        for chunks, red in [(1, None), (3, 20e9)]:
            fast = fe.run(topo, op, alg, 4 * MiB, chunks=chunks, reduce_Bps=red, **kw)
            ref_t, ref_events = _simpy(topo, op, alg, 4 * MiB, chunks=chunks, reduce_Bps=red, **kw)
            assert rel_err(fast.time_s, ref_t) < REL, (op, chunks, red)
            assert fast.events == ref_events


# ================================================================== supports()
def test_supports_rejects_what_is_dynamic_or_contended():
    torus, mesh = make((4, 4)), make((4, 4), False)
    assert fe.supports(torus, "all-reduce", "2d")
    assert not fe.supports(torus, "all-reduce", "halving-doubling")
    # explicit replica lists: a ring in the given order, edges routed; fine while no link is shared
    assert not fe.supports(torus, "all-reduce", "2d", group=[0, 1, 2, 3])  # no axes in a list
    assert fe.supports(torus, "all-reduce", "ring", group=[0, 1, 2, 3])
    assert fe.supports(torus, "all-reduce", "bidir-ring", group=[4, 5, 6, 7])
    assert not fe.supports(make((8,)), "all-reduce", "ring", group=[0, 2, 1, 3])  # 0->2 and 2->1 share a link
    # the whole-slice snake over a mesh with an even side has a link-disjoint reverse ring...
    assert fe.supports(mesh, "all-reduce", "bidir-ring")
    # ...but not on an odd x odd mesh (its closing edge is routed over links the reverse ring needs),
    # nor on a mesh line (the folded ring uses both directions of every link)
    assert not fe.supports(make((3, 3), False), "all-reduce", "bidir-ring")
    assert fe.supports(make((3, 3), False), "all-reduce", "ring")
    assert not fe.supports(make((6,), False), "all-reduce", "bidir-ring")
    # bidirectional 2d on a mesh: each line keeps its one folded ring (it already uses both
    # directions of every link; a reverse ring would only share them), so nothing contends
    assert fe.supports(mesh, "all-reduce", "2d", bidirectional=True)
    assert fe.supports(mesh, "all-reduce", "2d")
    assert fe.supports(torus, "all-reduce", "2d-split")
    assert not fe.supports(make((4, 8)), "all-reduce", "2d-split")
    assert not fe.supports(torus.with_link_bandwidth([0], 1e9), "all-reduce", "2d-split")
    assert fe.why_unsupported(torus, "all-reduce", "halving-doubling")
    with pytest.raises(ConfigError, match="engine"):
        fe.run(make((4, 8)), "all-reduce", "2d-split", MiB)


def test_events_count_messages_per_hop():
    # 2-D AR on an X x Y torus: every chip sends 2(X-1) messages in X phases, 2(Y-1) in Y
    topo = make((4, 6))
    assert fe.run(topo, "all-reduce", "2d", MiB).events == 24 * (2 * 3 + 2 * 5)
    assert fe.run(topo, "all-reduce", "2d", MiB, chunks=4).events == 4 * 24 * (2 * 3 + 2 * 5)
    # folded mesh ring: all 2(d-1) directed links carry each step's hops
    mesh = make((5,), False)
    assert fe.run(mesh, "reduce-scatter", "ring", MiB).events == 4 * 2 * 4


@given(S=st.integers(KiB, GiB))
@settings(max_examples=20, deadline=None)
def test_link_bytes_are_conserved(S):
    topo = make((4, 6))
    out = fe.run(topo, "all-reduce", "2d", S)
    # each phase moves steps * S_phase/d per link of its axis
    x = 2 * 3 * S / 4
    y = 2 * 5 * S / 4 / 6
    expect = np.where(topo.link_axis == 0, x, y) * (topo.link_direction == 1)
    assert np.allclose(out.link_bytes, expect, rtol=1e-12)


def test_fast_engine_imports_only_numpy_and_the_topology():
    """Keeps ``wus-sim collective`` quick: no SimPy, pandas or matplotlib on the fast path."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(fe.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(("." * node.level) + (node.module or ""))
    assert imported <= {"dataclasses", "functools", "heapq", "numpy", "...inputs.errors", "...hardware.network",
                        "...hardware.topology", "..schedules.loads", "..schedules.plan_cache",
                        ".fast_alltoall"}, imported  # (the all-to-all's passes, loaded when one runs)
    # and the whole import path (package __init__, network, embedding) stays light
    import subprocess
    import sys

    code = ("import sys; import wus_sim.collectives.engines.fast_engine, wus_sim.collectives.engines.fast_alltoall; "
            "print(sorted(m for m in ('simpy', 'pandas', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("engine", ["fast", "simpy"])
@pytest.mark.parametrize("dims,wrap", [((2, 6), (False, True)), ((6, 2), (True, False))])
def test_bidirectional_2d_on_a_partial_torus(engine, dims, wrap):
    """A partial torus (one mesh axis, one wrapped): bidirectional 2d runs two half-buffer
    rings on the wrapped axis and the one folded ring, on the whole buffer, on the mesh axis.

    All-reduce (hand form): RS on the wrapped axis (it moves twice the bytes per second of
    the mesh one, so it takes the whole buffer), AR on the mesh axis on S/d_wrapped, AG back. A mesh side of 2 keeps every
    member alike (its folded ring is 0 -> 1 on the + link, 1 -> 0 on the - link), so the
    phases add."""
    topo = make(dims, wrap, hop_latency_us=1.0)
    S, bw, lat = 48 * MiB, topo.axis_link_Bps[0], topo.hop_latency_s

    def line(a, buf, kind):
        d = topo.dims[a]
        if topo.wrap[a]:
            return ring_time(d, buf / 2, bw, lat, kind)   # two directions, half each
        return ring_time(d, buf, bw, lat, kind)           # one 2-member ring, whole buffer

    # the wrapped axis (2 directions: 2 bw per member) goes before the mesh one (1 bw)
    first, second = (0, 1) if topo.wrap[0] else (1, 0)
    d1 = topo.dims[first]
    expect = line(first, S, "rs") + line(second, S / d1, "ar") + line(first, S, "ag")
    got = simulate_collective(topo, "all-reduce", "2d", S, engine=engine, bidirectional=True).time_s
    assert rel_err(got, expect) < REL
    # the second direction on the wrapped axis is a real gain over one direction
    assert got < simulate_collective(topo, "all-reduce", "2d", S, engine=engine).time_s


@pytest.mark.parametrize("dims,wrap", [((4, 6), (False, True)), ((3, 5), (True, False)), ((4, 4, 3), (True, False, True))])
def test_bidirectional_2d_partial_torus_engines_agree(dims, wrap):
    """Wider mesh sides (members no longer alike): both engines and the closed form agree, and
    the mesh axes' passes are the one-direction ones (same link loads as without the flag)."""
    topo = make(dims, wrap, hop_latency_us=1.0)
    for op in REDUCE_OPS:
        f = simulate_collective(topo, op, "2d", 8 * MiB, engine="fast", bidirectional=True).time_s
        s = simulate_collective(topo, op, "2d", 8 * MiB, engine="simpy", bidirectional=True).time_s
        assert rel_err(f, s) < REL and rel_err(f, analytic_time(topo, op, "2d", 8 * MiB, bidirectional=True)) < REL


def test_order_check_counts_float_ties_as_in_order():
    """The fast engine serves a link's pieces in (step, piece) order unless a later piece is
    ready strictly earlier; "strictly" by the network's tie key, so a piece that is later
    only in its last bit (2.9999999999999997e-06 vs 3e-06, equal in exact arithmetic) keeps
    the order, as the SimPy network's (tie key, rank, seq) rule does, and the check does not
    fall back to the event pass on float noise."""
    hop_by_hop, cost_first = (1.5e-6 + 1e-6) + 5e-7, 1.5e-6 + (1e-6 + 5e-7)
    assert hop_by_hop < cost_first
    last = np.full(1, -np.inf)
    fe._check_order(np.array([[cost_first, hop_by_hop]]), last)  # same key: in order
    assert last[0] == tie_key(3e-6)
    fe._check_order(np.array([[hop_by_hop, 4e-6]]), last)  # after the previous step's last piece
    with pytest.raises(fe._OutOfOrder):
        fe._check_order(np.array([[3e-6, 3e-6 - 1e-9]]), np.full(1, -np.inf))  # 1 ns earlier: real
    with pytest.raises(fe._OutOfOrder):
        fe._check_order(np.array([[3e-6, 3e-6]]), np.full(1, tie_key(5e-6)))
