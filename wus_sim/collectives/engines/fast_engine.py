"""Exact event times of static collective schedules, as a max-plus recurrence over numpy arrays.

Ring, bidirectional-ring and 2-D (one ring phase per axis) collectives send the
same messages in the same order whatever the timing, so their event times need
no event queue. For every ring member the engine keeps the time its next message
is ready, for every link the time it is next free, and it advances *all* rings of
a phase by one algorithm step with a few vector operations per hop::

    start     = max(ready, link_free)      # FIFO per link direction: wait for the link
    end       = start + piece_bytes / bw   # occupy it (per-link bandwidth: a slow link skews)
    link_free = end
    ready     = end + hop_latency_s        # store and forward to the next chip

then shifts the arrivals one place along each ring (member i's message reaches
member i+1) and adds the reduction time on reduce-scatter steps. That is the
timing model of :mod:`wus_sim.hardware.network`, message for message, so the result equals the SimPy engine's
(:mod:`wus_sim.collectives.engines.simpy_engine`) up to rounding, at a few hundred million
messages per second.

Why this is exact. Within one phase every directed link carries the messages of
exactly one ring edge (:func:`supports` checks it), so a link's FIFO queue only
ever holds one sender's messages. Those become ready in (step, piece) order (one
exception, below): a
member handles its steps in order, and its step-*k* piece *c* is ready when piece
*c* of step *k-1* has arrived from member *i-1* (and been summed in) and the member
is past step *k-1*; arrivals over one edge keep their sending order (every link on
the edge is FIFO and private to it). Equal ready times go by (sender, sequence),
the sequence following the sender's schedule, i.e. (phase, step, piece) order too.
So a link serves in (step, piece) order and ``start = max(ready, link_free)`` over
that order *is* the FIFO queue. Across phases, a link's later messages are ready
after its earlier ones for the same reason (a member starts a phase only after it
finished the previous one), so the per-link free times simply carry over. The two
halves of 2d-split share every axis; it runs here only where they take turns (a
square torus with uniform links, where both halves finish each pass together), and
their passes are interleaved in time order.

Chunks: the *K* pieces of a step queue back to back on each hop, so with one
occupancy ``o`` per piece, ``s_c = max(t_c, s_{c-1} + o)`` unrolls into a running
maximum, ``s_c = c*o + max(free, max_{j<=c}(t_j - j*o))``: one
``np.maximum.accumulate`` per hop and step instead of a Python loop over pieces.

Cut-through routing (``routing="cut-through"``, see :mod:`wus_sim.hardware.network`): each
hop also carries the time the tail arrives, ``start = max(head, link_free)``, ``end =
max(start + occ, tail)``, ``link_free = end``, the head moves on at ``start + lat`` and
the tail at ``end + lat`` (:func:`_hops_cut_through`). A link still sees its edge's
pieces in (step, piece) order (each head leaves a private FIFO hop strictly after the
previous one), so everything above holds and both routings are supported alike; on
single-hop edges the two are the same recurrence.

One case breaks (step, piece) order: an all-reduce ring pass with chunks and a
reduction cost, where a member can have piece 0 of its first all-gather step ready
before its last reduce-scatter piece is summed. The engine checks the order as it
goes in that case and, if a link would serve out of order, re-runs that pass one
message at a time in global time order (:func:`_ring_pass_events`), still exact.

The schedule (passes, ring embeddings, groups, 2d-split halves, on-chip levels,
per-member barriers between passes) is the shared plan of
:mod:`wus_sim.collectives.schedules.plan`, so both engines run the same messages; link
bandwidth and latency per link key come from :mod:`wus_sim.hardware.network`'s pure
helpers. No SimPy is imported, so that ``wus-sim collective`` stays quick.

One concept in ~470 lines: the max-plus engine. Its phases (ring steps, the 2-D phase
order, per-link bandwidth, cut-through) share one state of arrays and one hop rule, so they
are not split.
"""

from dataclasses import dataclass
from functools import lru_cache
import heapq

import numpy as np

from ...inputs.errors import ConfigError, WusError
from ...hardware.network import check_routing, link_key_Bps, link_key_latency_s, num_link_keys, tie_key
from ...hardware.topology import Topology
from ..schedules.loads import contention
from ..schedules.plan_cache import cached_plan
from .fast_alltoall import run_halves

__all__ = ["FastOutcome", "supports", "run", "run_plan", "why_unsupported"]


@dataclass(frozen=True)
class FastOutcome:
    """What :func:`run` returns."""

    time_s: float
    """Completion time of the collective: the last member's last arrival (plus its reduction)."""
    events: int
    """Messages sent, counted per hop and per piece (comparable with the SimPy engine's events)."""
    link_bytes: np.ndarray = None
    """Bytes carried by every ICI link slot (``topology.num_link_slots`` long)."""
    link_busy_s: np.ndarray = None
    """Seconds every ICI link slot was occupied (``link_bytes / link_Bps``)."""


# ============================================================== ring embeddings
@dataclass(frozen=True, eq=False)
class _Rings:
    """A :class:`~wus_sim.collectives.schedules.embedding.RingEmbedding` as arrays for the recurrence.

    Every edge has a first hop (arrays over all ``(L, n)`` edges); the few edges with
    more hops (a mesh's folded-ring edges, a routed closing edge) have their further
    hops as index lists, so a 60-hop closing edge costs no padding on the others.
    """

    emb: object
    """The shared embedding (``members``, ``links``, ``hops``)."""
    links0: np.ndarray
    """``(L, n)`` link key of every edge's first hop."""
    s_per_byte0: np.ndarray
    """``(L, n)`` seconds per byte of the first hop (``1/bw``)."""
    lat0: np.ndarray
    """``(L, n)`` latency after the first hop."""
    more: tuple
    """For hops ``h = 1, 2, ...``: ``(edges, links, s_per_byte, lat)``, edges as flat indices into ``(L, n)``."""

    @property
    def nodes(self):
        return self.emb.members

    @property
    def num_hops(self):
        """Link hops of one traversal of every edge of every ring."""
        return int(self.emb.hops.sum())

    @property
    def used_links(self):
        return self.emb.links[self.emb.links >= 0]


def _prepare(topo, emb):
    """Arrays of the recurrence for *emb*, with bandwidth and latency per link key."""
    bw = link_key_Bps(topo)
    lat = link_key_latency_s(topo)
    L, n, H = emb.links.shape
    assert n == 1 or (emb.hops >= 1).all(), "every ring edge of a ring of n > 1 members has a link"
    links0 = emb.links[:, :, 0]
    more = []
    flat_links = emb.links.reshape(L * n, H)
    flat_hops = emb.hops.reshape(-1)
    for h in range(1, H):
        edges = np.flatnonzero(flat_hops > h)
        keys = flat_links[edges, h]
        more.append((edges, keys, 1.0 / bw[keys], lat[keys]))
    return _Rings(emb=emb, links0=links0, s_per_byte0=1.0 / bw[links0], lat0=lat[links0], more=tuple(more))


# ================================================================= schedules
@lru_cache(maxsize=32)
def _prepared(topo, emb):
    """:func:`_prepare`, cached per (topology, embedding) object: ``collective_time``
    asks for the same slice thousands of times."""
    return _prepare(topo, emb)


def _plan(topo, op, algorithm, group, bidirectional):
    """The shared :class:`~wus_sim.collectives.schedules.plan.CollectivePlan` and why this engine cannot
    run it (``None`` if it can). Raises on bad input, as ``plan_collective`` does."""
    plan = cached_plan(topo, op, algorithm, group=group, bidirectional=bidirectional)
    return plan, contention(plan)


# ================================================================== the engine
class _OutOfOrder(Exception):
    """A link would serve a later (step, piece) before an earlier one (see :func:`_ring_pass`)."""


def _check_order(u, last):
    """Raise :class:`_OutOfOrder` unless the ready times *u* (pieces on the last axis) keep
    (step, piece) order on their link, after the previous step's last piece (tie key *last*,
    updated). Equal :func:`~wus_sim.hardware.network.tie_key` s count as in order: the network serves
    simultaneous messages of one sender by sequence, i.e. in (step, piece) order."""
    k = tie_key(u)
    if (k[..., 0] < last).any() or (k[..., 1:] < k[..., :-1]).any():
        raise _OutOfOrder
    last[...] = k[..., -1]


def _hops(t, hops, chunks, check):
    """Send the ready pieces *t* over every hop of every edge, in place; return *t*,
    now the arrival times at the far end of each edge.

    *hops* lists ``(edges, free, occ, lat, jo, last)`` per hop: ``edges`` ``None`` for the
    first hop (all edges) or the flat indices of the edges that have this hop, ``free``
    the free times of those links (updated in place), ``occ`` the seconds a piece
    occupies them, ``jo`` = ``occ * [0..K-1]`` for chunked runs, ``last`` the tie key
    of the ready time of the link's previous piece (kept only when *check*).
    """
    for edges, free, occ, lat, jo, last in hops:
        if edges is None:
            u = t
        else:
            flat = t.reshape((-1,) + t.shape[2:])
            u = flat[edges]
        if chunks == 1:
            np.maximum(u, free, out=u)
            u += occ
            free[...] = u
            u += lat
        else:
            if check:
                _check_order(u, last)
            # pieces queue back to back: s_c = c*o + max(free, max_{j<=c}(t_j - j*o))
            u -= jo
            np.maximum(u[..., 0], free, out=u[..., 0])
            np.maximum.accumulate(u, axis=-1, out=u)
            u += jo
            u += occ[..., None]
            free[...] = u[..., -1]
            u += lat[..., None]
        if edges is not None:
            flat[edges] = u
    return t


def _hops_cut_through(t, hops, chunks, check):
    """:func:`_hops` under cut-through routing; returns the arrival times of the tails.

    *t* (the ready times) becomes the head's times. Per hop, with ``head`` the time the
    head reaches it and ``tail`` the time the tail does (``-inf`` on the first hop)::

        start = max(head, link_free)           # the link serves in head order (FIFO)
        end   = max(start + occ, tail)         # the tail cannot leave before it arrives
        link_free = end;  head = start + lat;  tail = end + lat

    With chunks, ``end_c = max(x_c, end_{c-1} + occ)``, ``x_c = max(head_c + occ, tail_c)``
    and ``end_{-1} = free``, unrolled into a running maximum as in :func:`_hops`.
    """
    tail = np.full_like(t, -np.inf)
    for edges, free, occ, lat, jo, last in hops:
        if edges is None:
            u, v = t, tail
        else:
            flat = t.reshape((-1,) + t.shape[2:])
            flat_tail = tail.reshape((-1,) + tail.shape[2:])
            u, v = flat[edges], flat_tail[edges]
        if chunks == 1:
            start = np.maximum(u, free)
            end = np.maximum(start + occ, v)
            free[...] = end
            u[...] = start + lat
            v[...] = end + lat
        else:
            if check:
                _check_order(u, last)
            y = np.maximum(u + occ[..., None], v) - jo
            np.maximum(y[..., 0], free + occ, out=y[..., 0])
            np.maximum.accumulate(y, axis=-1, out=y)
            end = y + jo
            before = np.concatenate([free[..., None], end[..., :-1]], axis=-1)  # previous piece's end
            start = np.maximum(u, before)
            free[...] = end[..., -1]
            u[...] = start + lat[..., None]
            v[...] = end + lat[..., None]
        if edges is not None:
            flat[edges] = u
            flat_tail[edges] = v
    return tail


def _ring_pass(free, ready0, rings, kind, piece_bytes, chunks, reduce_s, routing="store-and-forward"):
    """Advance one ring operation over every ring of *rings*; return each member's
    completion time ``(L, n)`` and the number of steps. *free* (link free times, by
    link key) is updated in place.

    Each link serves its pieces in (step, piece) order, which is FIFO order whenever
    ready times along a link never decrease. One case breaks that: an all-reduce pass
    with chunks and a reduction cost, where a member may have piece 0 of an all-gather
    step (no reduction) ready before the last piece of the previous reduce-scatter step
    (still being summed). There the order is checked as the pass runs and, if a link
    would serve out of ready order, the pass is re-run by :func:`_ring_pass_events`.
    """
    L, n = rings.nodes.shape
    if n == 1:
        return np.array(ready0, dtype=float), 0
    nsteps = 2 * (n - 1) if kind == "ar" else n - 1
    reducing = 0 if kind == "ag" else n - 1  # steps whose arrival is summed in
    check = kind == "ar" and chunks > 1 and reduce_s > 0
    # within a phase no two edges share a link, so each hop's free times are private
    j = np.arange(chunks, dtype=float)
    hops = []
    for edges, keys, spb, lat in [(None, rings.links0, rings.s_per_byte0, rings.lat0)] + list(rings.more):
        occ = spb * piece_bytes
        hops.append((edges, free[keys], occ, lat, occ[..., None] * j if chunks > 1 else None,
                     np.full(np.shape(keys), -np.inf) if check else None))
    # A member handles its steps in order: step k+1 is ready when step k's message
    # has arrived *and* the member is past step k (it may have started the phase late).
    # When every member of a ring starts together, arrivals already come in order and
    # the extra maximum is a no-op, so it is skipped.
    skewed = not np.all(ready0 == ready0[:, :1])
    t = np.array(ready0, dtype=float)
    if chunks > 1:
        t = np.repeat(t[..., None], chunks, axis=-1)
    # on one-hop edges cut-through is store-and-forward, bit for bit: keep the cheaper recurrence
    send = _hops_cut_through if routing == "cut-through" and rings.more else _hops
    try:
        for k in range(nsteps):
            prev = t.copy() if skewed else None
            t = _shift(send(t, hops, chunks, check))
            if skewed:
                np.maximum(t, prev, out=t)
            if k < reducing and reduce_s:
                t += reduce_s
    except _OutOfOrder:
        return _ring_pass_events(free, ready0, rings, nsteps, reducing, piece_bytes, chunks, reduce_s,
                                 routing), nsteps
    free[rings.links0] = hops[0][1]
    for (_, keys, _, _), hop in zip(rings.more, hops[1:]):
        free[keys] = hop[1]
    done = t if chunks == 1 else t.max(axis=-1)
    return done, nsteps


def _ring_pass_events(free, ready0, rings, nsteps, reducing, piece_bytes, chunks, reduce_s,
                      routing="store-and-forward"):
    """The same pass, one message at a time in global (tie key of the ready time, step, piece)
    order (:func:`~wus_sim.hardware.network.tie_key`, the network's rule).

    Exact whatever order a link serves in (each link still carries one edge only),
    at event-simulation speed; used only when :func:`_ring_pass` finds a link whose
    pieces become ready out of (step, piece) order.
    """
    L, n = rings.nodes.shape
    E = L * n
    paths = [[(int(k), float(s) * piece_bytes, float(a))] for k, s, a in
             zip(rings.links0.ravel(), rings.s_per_byte0.ravel(), rings.lat0.ravel())]
    for edges, keys, spb, lat in rings.more:
        for e, k, s, a in zip(edges.tolist(), keys.tolist(), spb.tolist(), lat.tolist()):
            paths[e].append((k, s * piece_bytes, a))
    link_free = {k: float(free[k]) for path in paths for k, _, _ in path}
    start = np.asarray(ready0, dtype=float).ravel().tolist()
    ready = [start[e] for e in range(E) for _ in range(chunks)]
    done = list(start)
    cut_through = routing == "cut-through"
    heap = [(tie_key(start[e]), 0, c, 0, e, start[e], -np.inf) for e in range(E) for c in range(chunks)]
    heapq.heapify(heap)
    while heap:
        _, k, c, h, e, t, tail = heapq.heappop(heap)  # t: when the (head of the) piece reaches hop h
        path = paths[e]
        key, occ, lat = path[h]
        begin = max(t, link_free[key])
        end = max(begin + occ, tail)
        link_free[key] = end
        arrival = end + lat
        if h + 1 < len(path):
            t_next = begin + lat if cut_through else arrival
            heapq.heappush(heap, (tie_key(t_next), k, c, h + 1, e, t_next, arrival))
            continue
        m = e - e % n + (e % n + 1) % n  # next member of the same ring
        r = max(arrival, ready[m * chunks + c]) + (reduce_s if k < reducing else 0.0)
        ready[m * chunks + c] = r
        if k + 1 < nsteps:
            heapq.heappush(heap, (tie_key(r), k + 1, c, 0, m, r, -np.inf))
        elif r > done[m]:
            done[m] = r
    for key, t in link_free.items():
        free[key] = t
    return np.array(done).reshape(L, n)


def _shift(t):
    """Arrivals at the next member: element ``i`` moves to ``i+1`` along each ring."""
    out = np.empty_like(t)
    out[:, 1:] = t[:, :-1]
    out[:, 0] = t[:, -1]
    return out


def _check(topo, chunks):
    if not isinstance(topo, Topology):
        raise TypeError("topology must be a wus_sim.hardware.topology.Topology")
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ConfigError("must be a whole number >= 1", key_path="chunks", value=chunks)


def why_unsupported(topology, op, algorithm, *, group=None, bidirectional=False, chunks=1,
                    routing="store-and-forward"):
    """Why :func:`supports` says no (``None`` if it says yes); bad input says what is wrong."""
    try:
        _check(topology, chunks)
        check_routing(routing)
        return _plan(topology, op, algorithm, group, bidirectional)[1]
    except WusError as exc:
        return str(exc)


def supports(topology, op, algorithm, *, group=None, bidirectional=False, chunks=1,
             routing="store-and-forward"):
    """True if the schedule is static and uncontended, so :func:`run` is exact.

    False for halving- and recursive-doubling (partners several hops away contend), bidirectional
    rings on mesh axes (both directions would share the folded ring's links), rings
    whose routed edges share links (an explicit replica list, the closing edge of a
    whole-slice ring on an odd x odd mesh with its reverse), 2d-split unless the
    slice is a square torus with uniform links (otherwise its halves can want an
    axis at the same time), and invalid input. The api falls back to the SimPy
    engine then. Both routings are supported alike (see the module docstring).
    """
    return why_unsupported(topology, op, algorithm, group=group, bidirectional=bidirectional,
                           chunks=chunks, routing=routing) is None


def run(topology, op, algorithm, nbytes, *, group=None, bidirectional=False, chunks=1,
        reduce_Bps=None, routing="store-and-forward"):
    """Simulate the collective exactly; *nbytes* = ``S``, the full buffer per replica.

    Raises :class:`ConfigError` (key ``engine``) if :func:`supports` says no.
    """
    topo = topology
    _check(topo, chunks)
    check_routing(routing)
    if not nbytes > 0:
        raise ConfigError("must be > 0 bytes", key_path="size", value=nbytes)
    if reduce_Bps is not None and not reduce_Bps > 0:
        raise ConfigError("must be > 0", key_path="reduce_Bps", value=reduce_Bps)
    plan, why = _plan(topo, op, algorithm, group, bidirectional)
    if why is not None:
        raise ConfigError(f"the fast engine cannot run this collective: {why}; use the simpy engine",
                          key_path="engine", value="fast")
    return run_plan(plan, nbytes, chunks=chunks, reduce_Bps=reduce_Bps, routing=routing)


def run_plan(plan, nbytes, *, chunks=1, reduce_Bps=None, routing="store-and-forward"):
    """:func:`run` on an already built plan (the api's cached one), arguments already checked
    and ``contention(plan)`` ``None``. An all-to-all runs in :mod:`.fast_alltoall`."""
    if plan.op == "all-to-all":
        from .fast_alltoall import run_plan as run_alltoall

        return run_alltoall(plan, nbytes, chunks=chunks, routing=routing)
    topo = plan.topology
    c = topo.cores_per_chip
    S = float(nbytes)
    free = np.zeros(num_link_keys(topo))
    link_bytes = np.zeros(len(free))
    events = 0

    def run_pass(ready, p):
        """One pass from per-member ready times (indexed by member id); returns completions."""
        nonlocal events
        out = ready.copy()  # members outside the group (explicit lists) keep their time
        for d, emb in enumerate(p.rings):
            rings = _prepared(topo, emb)
            n = emb.size
            piece = p.fraction * S / n / chunks
            red = 0.0 if reduce_Bps is None else piece / reduce_Bps
            done, nsteps = _ring_pass(free, ready[emb.members], rings, p.kind, piece, chunks, red, routing)
            out[emb.members] = done if d == 0 else np.maximum(out[emb.members], done)
            events += nsteps * chunks * rings.num_hops
            link_bytes[rings.used_links] += nsteps * piece * chunks
        return out

    replicas = np.zeros(topo.num_replicas)
    for p in plan.pre:  # on-chip reduce-scatter
        replicas = run_pass(replicas, p)
    flat = any(p.level == "flat" for half in plan.halves for p in half)
    # a chip starts its chip-level passes when all its cores are done
    start = replicas if flat else replicas.reshape(topo.num_chips, c).max(axis=1)
    # the halves of 2d-split share links: their passes run interleaved (run_halves)
    done = run_halves(plan.halves, start, run_pass)
    if not flat:
        done = np.repeat(done, c)
    for p in plan.post:  # on-chip all-gather
        done = run_pass(done, p)
    ici = link_bytes[: topo.num_link_slots]
    busy = ici / np.where(topo.link_up, topo.link_Bps, np.inf)
    return FastOutcome(time_s=float(done.max()), events=int(events), link_bytes=ici, link_busy_s=busy)
