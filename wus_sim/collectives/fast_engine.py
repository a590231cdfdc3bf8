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
brief's timing model, message for message, so the result equals the SimPy engine's
(:mod:`wus_sim.collectives.simpy_engine`) up to rounding, at a few hundred million
messages per second.

Why this is exact. Within one phase every directed link carries the messages of
exactly one ring edge (:func:`supports` checks it), so a link's FIFO queue only
ever holds one sender's messages. Those become ready in (step, piece) order: a
member handles its steps in order, and its step-*k* piece *c* is ready when piece
*c* of step *k-1* has arrived from member *i-1* (and been summed in) and the member
is past step *k-1*; arrivals over one edge keep their sending order (every link on
the edge is FIFO and private to it). Equal ready times go by (sender, sequence),
the sequence following the sender's schedule, i.e. (phase, step, piece) order too.
So a link serves in (step, piece) order and ``start = max(ready, link_free)`` over
that order *is* the FIFO queue. Across phases, a link's later messages are ready
after its earlier ones for the same reason (a member starts a phase only after it
finished the previous one), so the per-link free times simply carry over.

Chunks: the *K* pieces of a step queue back to back on each hop, so with one
occupancy ``o`` per piece, ``s_c = max(t_c, s_{c-1} + o)`` unrolls into a running
maximum, ``s_c = c*o + max(free, max_{j<=c}(t_j - j*o))``: one
``np.maximum.accumulate`` per hop and step instead of a Python loop over pieces.

Schedule (documented once here, shared with the SimPy engine):

* A ring phase over a buffer of ``B`` bytes per member and ``n`` members sends
  ``n-1`` steps of ``B/n`` (reduce-scatter, all-gather) or ``2(n-1)`` (all-reduce:
  the all-gather steps continue the same ring, piece by piece, right after the
  member's own reduce-scatter steps; no barrier).
* Bidirectional: each direction ring carries half of the phase's buffer.
* 2d: reduce-scatter phases axis 0, 1, 2 on ``S``, ``S/d0``, ``S/(d0 d1)``;
  all-gather phases in reverse; all-reduce = reduce-scatter phases, the last axis's
  ring all-reduce, then all-gather phases. A member starts a phase when it has
  finished the previous one: all pieces of both directions.
* 2d-split: two halves of the buffer, one axis 0 then 1, the other 1 then 0.
* ``cores_per_chip = c > 1``: an on-chip ring (core *j* -> *j+1* over its own
  on-chip link, ``onchip_Bps``, no latency) reduce-scatters ``S`` among the cores,
  the chip-level collective runs on ``S`` per chip (starting when all its cores
  are done), then an on-chip all-gather.

Rings are the shared embeddings of :mod:`wus_sim.collectives.embedding` (axis
lines, folded mesh rings, the whole-slice Hamiltonian ring, on-chip rings), with
bandwidth and latency per link key from :mod:`wus_sim.network`'s pure helpers. No
SimPy is imported, so that ``wus-sim collective`` stays quick.
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import ConfigError
from ..network import link_key_Bps, link_key_latency_s, num_link_keys
from ..topology import Topology
from . import embedding

__all__ = ["FastOutcome", "supports", "run", "why_unsupported"]

_OPS = ("reduce-scatter", "all-gather", "all-reduce")
_STATIC_ALGORITHMS = ("ring", "bidir-ring", "2d", "2d-split")
_AXIS_NAMES = {"x": 0, "y": 1, "z": 2}


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
    """A :class:`~wus_sim.collectives.embedding.RingEmbedding` as arrays for the recurrence.

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
@dataclass(frozen=True)
class _Stage:
    """One phase: concurrent rings (one per direction) running one ring operation."""

    rings: tuple
    """:class:`RingEmbedding` per direction."""
    kind: str
    """``"rs"``, ``"ag"`` or ``"ar"``."""
    fraction: float
    """Buffer of every direction ring per member, as a fraction of ``S``."""
    level: str = "chip"
    """``"chip"`` (ICI) or ``"core"`` (on-chip)."""


@lru_cache(maxsize=16)
def _embedding(topo, what, axis=None, reverse=False):
    """Shared ring embeddings, prepared for the recurrence; cached per topology object
    (``collective_time`` asks for the same slice thousands of times)."""
    if what == "axis":
        emb = embedding.axis_rings(topo, axis, reverse)
    elif what == "slice":
        emb = embedding.slice_ring(topo, reverse)
    else:
        emb = embedding.onchip_rings(topo)
    return _prepare(topo, emb)


def _axis_of(group, topo):
    if isinstance(group, str) and group.lower() in _AXIS_NAMES:
        axis = _AXIS_NAMES[group.lower()]
    elif isinstance(group, (int, np.integer)) and not isinstance(group, bool):
        axis = int(group)
    else:
        return None
    return axis if 0 <= axis < topo.ndim else None


def _plan(topo, op, algorithm, group, bidirectional):
    """The chip-level stages of a collective, as a list of halves (two for 2d-split),
    or a string saying why this engine cannot run it."""
    if op not in _OPS:
        return f"unknown op {op!r}"
    if algorithm not in _STATIC_ALGORITHMS:
        return f"{algorithm!r} has a dynamic, contended schedule (partners several hops away)"
    axis = None
    if group is not None:
        axis = _axis_of(group, topo)
        if axis is None:
            if isinstance(group, (str, int, np.integer)):
                return f"unknown group {group!r}"
            return "explicit replica groups are routed multi-hop and may contend"
    bidir = bidirectional or algorithm == "bidir-ring"
    reverses = (False, True) if bidir else (False,)

    def axis_stage(a):
        if topo.dims[a] == 1:
            return None
        if bidir and not topo.wrap[a]:
            return f"bidirectional rings on mesh axis {a} share the folded ring's links"
        # wrapped axes: forward ring on + links, reverse on - links; disjoint by construction
        return tuple(_embedding(topo, "axis", a, r) for r in reverses)

    if algorithm in ("ring", "bidir-ring") and axis is None and len(embedding.active_axes(topo)) > 1:
        rings = tuple(_embedding(topo, "slice", None, r) for r in reverses)
        used = np.concatenate([r.used_links for r in rings])
        if len(np.unique(used)) != len(used):
            return "the whole-slice ring's routed edges share links"
        orders = [[rings]]
    else:
        if algorithm in ("ring", "bidir-ring"):
            axes = [axis] if axis is not None else embedding.active_axes(topo)
        else:
            axes = [axis] if axis is not None else list(range(topo.ndim))
        orders = [axes]
        if algorithm == "2d-split":
            live = [a for a in axes if topo.dims[a] > 1]
            if len(live) != 2:
                return "2d-split needs exactly two axes longer than 1"
            a, b = live
            if not (topo.wrap[a] and topo.wrap[b] and topo.dims[a] == topo.dims[b]
                    and topo.axis_link_Bps[a] == topo.axis_link_Bps[b] and not topo.link_Bps_override):
                return ("2d-split halves may want one axis at the same time unless the slice is a "
                        "square torus with uniform links")
            orders = [[a, b], [b, a]]
        staged = []
        for order in orders:
            seq = []
            for a in order:
                r = axis_stage(a)
                if isinstance(r, str):
                    return r
                if r is not None:
                    seq.append(r)
            staged.append(seq)
        orders = staged

    halves = []
    for seq in orders:
        fracs, frac = [], 1.0 / len(orders) / len(reverses)
        for rings in seq:
            fracs.append(frac)
            frac /= rings[0].nodes.shape[1]
        if op == "reduce-scatter":
            stages = [_Stage(r, "rs", f) for r, f in zip(seq, fracs)]
        elif op == "all-gather":
            stages = [_Stage(r, "ag", f) for r, f in zip(seq[::-1], fracs[::-1])]
        else:
            stages = [_Stage(r, "rs", f) for r, f in zip(seq[:-1], fracs[:-1])]
            if seq:
                stages.append(_Stage(seq[-1], "ar", fracs[-1]))
            stages += [_Stage(r, "ag", f) for r, f in zip(seq[-2::-1], fracs[-2::-1])]
        halves.append(stages)
    return halves


# ================================================================== the engine
def _hops(t, hops, chunks):
    """Send the ready pieces *t* over every hop of every edge, in place; return *t*,
    now the arrival times at the far end of each edge.

    *hops* lists ``(edges, free, occ, lat, jo)`` per hop: ``edges`` ``None`` for the first
    hop (all edges) or the flat indices of the edges that have this hop, ``free`` the
    free times of those links (updated in place), ``occ`` the seconds a piece occupies
    them, ``jo`` = ``occ * [0..K-1]`` for chunked runs.
    """
    for edges, free, occ, lat, jo in hops:
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


def _ring_pass(free, ready0, rings, kind, piece_bytes, chunks, reduce_s):
    """Advance one ring operation over every ring of *rings*; return each member's
    completion time ``(L, n)`` and the number of steps. *free* (link free times, by
    link key) is updated in place."""
    L, n = rings.nodes.shape
    if n == 1:
        return np.array(ready0, dtype=float), 0
    nsteps = 2 * (n - 1) if kind == "ar" else n - 1
    reducing = 0 if kind == "ag" else n - 1  # steps whose arrival is summed in
    # within a phase no two edges share a link, so each hop's free times are private
    j = np.arange(chunks, dtype=float)
    hops = []
    for edges, keys, spb, lat in [(None, rings.links0, rings.s_per_byte0, rings.lat0)] + list(rings.more):
        occ = spb * piece_bytes
        hops.append((edges, free[keys], occ, lat, occ[..., None] * j if chunks > 1 else None))
    # A member handles its steps in order: step k+1 is ready when step k's message
    # has arrived *and* the member is past step k (it may have started the phase late).
    # When every member of a ring starts together, arrivals already come in order and
    # the extra maximum is a no-op, so it is skipped.
    skewed = not np.all(ready0 == ready0[:, :1])
    t = np.array(ready0, dtype=float)
    if chunks > 1:
        t = np.repeat(t[..., None], chunks, axis=-1)
    for k in range(nsteps):
        prev = t.copy() if skewed else None
        t = _shift(_hops(t, hops, chunks))
        if skewed:
            np.maximum(t, prev, out=t)
        if k < reducing and reduce_s:
            t += reduce_s
    free[rings.links0] = hops[0][1]
    for (_, keys, _, _), hop in zip(rings.more, hops[1:]):
        free[keys] = hop[1]
    done = t if chunks == 1 else t.max(axis=-1)
    return done, nsteps


def _shift(t):
    """Arrivals at the next member: element ``i`` moves to ``i+1`` along each ring."""
    out = np.empty_like(t)
    out[:, 1:] = t[:, :-1]
    out[:, 0] = t[:, -1]
    return out


def _check(topo, chunks):
    if not isinstance(topo, Topology):
        raise TypeError("topology must be a wus_sim.topology.Topology")
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ConfigError("must be a whole number >= 1", key_path="chunks", value=chunks)


def why_unsupported(topology, op, algorithm, *, group=None, bidirectional=False, chunks=1):
    """Why :func:`supports` says no (``None`` if it says yes)."""
    _check(topology, chunks)
    plan = _plan(topology, op, algorithm, group, bidirectional)
    return plan if isinstance(plan, str) else None


def supports(topology, op, algorithm, *, group=None, bidirectional=False, chunks=1):
    """True if the schedule is static and uncontended, so :func:`run` is exact.

    False for halving-doubling (partners several hops away contend), explicit replica
    lists, bidirectional rings on mesh axes (both directions would share the folded
    ring's links), a whole-slice ring whose routed edges share links, and 2d-split
    unless the slice is a square torus with uniform links (otherwise its halves can
    want an axis at the same time). The api falls back to the SimPy engine then.
    """
    return why_unsupported(topology, op, algorithm, group=group, bidirectional=bidirectional,
                           chunks=chunks) is None


def run(topology, op, algorithm, nbytes, *, group=None, bidirectional=False, chunks=1,
        reduce_Bps=None):
    """Simulate the collective exactly; *nbytes* = ``S``, the full buffer per replica.

    Raises :class:`ConfigError` (key ``engine``) if :func:`supports` says no.
    """
    topo = topology
    _check(topo, chunks)
    if not nbytes > 0:
        raise ConfigError("must be > 0 bytes", key_path="size", value=nbytes)
    if reduce_Bps is not None and not reduce_Bps > 0:
        raise ConfigError("must be > 0", key_path="reduce_Bps", value=reduce_Bps)
    halves = _plan(topo, op, algorithm, group, bidirectional)
    if isinstance(halves, str):
        raise ConfigError(f"the fast engine cannot run this collective: {halves}; use the simpy engine",
                          key_path="engine", value="fast")
    c = topo.cores_per_chip
    S = float(nbytes)
    free = np.zeros(num_link_keys(topo))
    link_bytes = np.zeros(topo.num_link_slots)
    events = 0

    def stage_pass(ready, stage):
        """Run one stage from per-node ready times; return per-node completion times."""
        nonlocal events
        out = None
        buf = stage.fraction * S
        for rings in stage.rings:
            n = rings.nodes.shape[1]
            piece = buf / n / chunks
            red = 0.0 if reduce_Bps is None else piece / reduce_Bps
            done, nsteps = _ring_pass(free, ready[rings.nodes], rings, stage.kind, piece, chunks, red)
            if out is None:
                out = np.empty_like(ready)
                out[rings.nodes] = done
            else:
                out[rings.nodes] = np.maximum(out[rings.nodes], done)
            events += nsteps * chunks * rings.num_hops
            if stage.level == "chip":
                link_bytes[rings.used_links] += nsteps * piece * chunks
        return out

    onchip = _embedding(topo, "onchip") if c > 1 else None
    core_ready = np.zeros(topo.num_chips * c)
    if onchip is not None and op != "all-gather":
        core_ready = stage_pass(core_ready, _Stage((onchip,), "rs", 1.0, "core"))
    chip_start = core_ready.reshape(topo.num_chips, c).max(axis=1)
    # The halves of 2d-split share links; on the square uniform torus they use an axis
    # one after the other, so running their stages interleaved (A1, B1, A2, B2, ...)
    # meets every link's messages in time order.
    readies = [chip_start] * len(halves)
    for i in range(max(len(h) for h in halves)):
        for half, stages in enumerate(halves):
            if i < len(stages):
                readies[half] = stage_pass(readies[half], stages[i])
    chip_done = np.max(readies, axis=0)
    core_ready = np.repeat(chip_done, c)
    if onchip is not None and op != "reduce-scatter":
        core_ready = stage_pass(core_ready, _Stage((onchip,), "ag", 1.0, "core"))
    busy = link_bytes / np.where(topo.link_exists, topo.link_Bps, np.inf)
    return FastOutcome(time_s=float(core_ready.max()), events=int(events), link_bytes=link_bytes,
                       link_busy_s=busy)
