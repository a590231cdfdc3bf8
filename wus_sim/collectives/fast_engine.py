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
ever holds one sender's messages. Those become ready in (step, piece) order:
member *i*'s step-*k* piece is ready when piece *c* of step *k-1* arrived from
member *i-1*, and arrivals over one edge keep their sending order (every link on
the edge is FIFO and private to it). So a link serves in (step, piece) order and
``start = max(ready, link_free)`` over that order *is* the FIFO queue. Across
phases, a link's later messages are ready after its earlier ones for the same
reason (a member only starts a phase after it finished the previous one), so the
per-link free times simply carry over.

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
  the chip-level collective runs on ``S`` per chip, then an on-chip all-gather.

Imports only numpy and the topology (no SimPy), so that ``wus-sim collective``
stays quick.
"""

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..topology import Topology

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
@dataclass(frozen=True)
class _Rings:
    """Equal-length rings that run at the same time; member ``i`` sends to member ``i+1``.

    Hop arrays are ``(H, L, n)``: hop ``h`` of the edge leaving member ``i`` of ring
    ``r``; edges with fewer than ``H`` hops are padded with a dummy link that costs
    nothing (no occupancy, no latency).
    """

    nodes: np.ndarray
    """``(L, n)`` members in ring order: chip ids, or replica (core) ids for on-chip rings."""
    links: np.ndarray
    """``(H, L, n)`` link slot of every hop (the engine's dummy slot on padding)."""
    s_per_byte: np.ndarray
    """``(H, L, n)`` seconds per byte of every hop (``1/bw``; 0 on padding)."""
    lat_s: np.ndarray
    """``(H, L, n)`` latency after every hop (0 on padding and on-chip)."""
    real: np.ndarray
    """``(H, L, n)`` bool: the hop exists."""

    @property
    def num_hops(self):
        """Real hops over all edges of all rings (one ring traversal)."""
        return int(self.real.sum())


def _line_ring_order(d, wrapped):
    """Ring order of the positions of one axis line (brief: folded ring on a mesh)."""
    if wrapped or d <= 2:
        return np.arange(d)
    return np.concatenate([np.arange(0, d, 2), np.arange(d - 1 - (d % 2 == 1), 0, -2)])


def _line_rings(topo, axis, direction, dummy):
    """All lines along *axis* as rings (the brief's embedding).

    Wrapped axis: ring 0..d-1 over the ``+`` links, or the reverse ring over the
    ``-`` links (``direction=-1``). Mesh axis: the folded ring 0,2,4,..,5,3,1, whose
    edges between evens take two ``+`` hops and between odds two ``-`` hops, so
    every directed link of the line is used exactly once; no reverse ring (it would
    share those links). ``d == 2`` mesh: 0->1 on ``+``, 1->0 on ``-``.
    """
    d = topo.dims[axis]
    wrapped = topo.wrap[axis]
    lines = topo.axis_rings(axis)  # (L, d), coordinate order
    order = _line_ring_order(d, wrapped)
    if direction < 0:
        assert wrapped, "reverse ring on a mesh axis shares the folded ring's links"
        order = order[::-1]
    nxt = np.roll(order, -1)
    if wrapped:
        # one hop per edge, on the link of the ring's direction (distinct cables even for d == 2)
        hops = [[(order, direction)]]
    else:
        # edge a -> b: |b - a| hops (1 or 2) towards b
        step = np.sign(nxt - order)
        hops = [[(order, step)], [(order + step, np.where(np.abs(nxt - order) == 2, step, 0))]]
    H = len(hops)
    L = lines.shape[0]
    links = np.full((H, L, d), dummy, dtype=np.int64)
    real = np.zeros((H, L, d), dtype=bool)
    for h, [(pos, dirs)] in enumerate(hops):
        pos = np.broadcast_to(pos, (d,))
        dirs = np.broadcast_to(dirs, (d,))
        ok = dirs != 0
        chips = lines[:, np.clip(pos, 0, d - 1)]
        ids = topo.link_id(chips, axis, np.where(ok, dirs, 1)[None, :])
        links[h] = np.where(ok[None, :], ids, dummy)
        real[h] = ok[None, :]
    return _with_link_figures(topo, lines[:, order], links, real)


def _route_many(topo, src, dst):
    """``(H, E)`` link ids of the dimension-order routes of ``src[e] -> dst[e]``
    (exactly :meth:`Topology.route`, vectorized), ``-1`` padded at the end."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    cur = src.copy()
    rows = []
    cs, cd = topo.coords[src], topo.coords[dst]
    for axis, d in enumerate(topo.dims):
        delta = cd[:, axis] - cs[:, axis]
        if topo.wrap[axis]:
            fwd = delta % d
            back = (d - fwd) % d
            plus = fwd <= back  # ties go the + way, as Topology.route
            direction = np.where(plus, 1, -1)
            count = np.where(plus, fwd, back)
        else:
            direction = np.where(delta >= 0, 1, -1)
            count = np.abs(delta)
        for j in range(int(count.max(initial=0))):
            active = count > j
            rows.append(np.where(active, topo.link_id(cur, axis, direction), -1))
            cur = np.where(active, topo.neighbor(cur, axis, direction), cur)
    if not rows:
        return np.full((1, len(src)), -1, dtype=np.int64)
    out = np.array(rows)
    # move each route's real hops to the front, keeping their order
    keyed = np.argsort(out < 0, axis=0, kind="stable")
    return np.take_along_axis(out, keyed, axis=0)


def _slice_ring(topo, direction, dummy):
    """One ring through every chip of the slice, or ``None`` if this engine has none.

    A single non-trivial axis: its line ring. A torus: chips in id order (axis 0
    fastest), each edge routed dimension-order; the row-closing edges take the
    wraparound links, so every directed link is used at most once. The reverse
    ring runs the ids backwards.
    """
    big = [a for a, d in enumerate(topo.dims) if d > 1]
    if len(big) == 1 and (topo.wrap[big[0]] or direction > 0):
        return _line_rings(topo, big[0], direction, dummy)
    if not all(w for a, w in enumerate(topo.wrap) if topo.dims[a] > 1):
        return None
    nodes = np.arange(topo.num_chips)[::direction][None, :]
    routes = _route_many(topo, nodes[0], np.roll(nodes[0], -1))
    real = routes >= 0
    links = np.where(real, routes, dummy)[:, None, :]
    return _with_link_figures(topo, nodes, links, real[:, None, :])


def _with_link_figures(topo, nodes, links, real):
    keep = real.reshape(real.shape[0], -1).any(axis=1)  # drop hop layers that are all padding
    links, real = links[keep], real[keep]
    bw = np.ones(links.shape)
    bw[real] = topo.link_Bps[links[real]]
    return _Rings(nodes=np.ascontiguousarray(nodes), links=links,
                  s_per_byte=np.where(real, 1.0 / bw, 0.0),
                  lat_s=np.where(real, topo.hop_latency_s, 0.0), real=real)


def _onchip_rings(topo, first_slot):
    """The ``c`` cores of every chip as one ring each, core ``j`` -> ``j+1`` on its own
    on-chip link (slot ``first_slot + replica``), ``onchip_Bps``, no latency."""
    c = topo.cores_per_chip
    nodes = np.arange(topo.num_chips * c).reshape(topo.num_chips, c)
    links = (first_slot + nodes)[None]
    real = np.ones(links.shape, dtype=bool)
    return _Rings(nodes=nodes, links=links, s_per_byte=np.full(links.shape, 1.0 / topo.onchip_Bps),
                  lat_s=np.zeros(links.shape), real=real)


def _uncontended(rings_list):
    """True if no link carries hops of two different edges among these concurrent rings."""
    ids = np.concatenate([r.links[r.real] for r in rings_list])
    return len(np.unique(ids)) == len(ids)


# ================================================================= schedules
@dataclass(frozen=True)
class _Stage:
    """One phase: concurrent rings (one per direction) running one ring operation."""

    level: str
    """``"chip"`` (ICI) or ``"core"`` (on-chip)."""
    rings: tuple
    kind: str
    """``"rs"``, ``"ag"`` or ``"ar"``."""
    fraction: float
    """Buffer of every direction ring per member, as a fraction of ``S``."""


def _axis_of(group, topo):
    if isinstance(group, str) and group.lower() in _AXIS_NAMES:
        axis = _AXIS_NAMES[group.lower()]
    elif isinstance(group, (int, np.integer)) and not isinstance(group, bool):
        axis = int(group)
    else:
        return None
    return axis if axis < topo.ndim else None


def _plan(topo, op, algorithm, group, bidirectional, dummy):
    """The stages of a collective, as a list of halves (two for 2d-split), or a reason string."""
    if op not in _OPS:
        return f"unknown op {op!r}"
    if algorithm not in _STATIC_ALGORITHMS:
        return f"{algorithm!r} has a dynamic, contended schedule (partners several hops away)"
    if group is not None and _axis_of(group, topo) is None:
        if isinstance(group, (str, int, np.integer)):
            return f"unknown group {group!r}"
        return "explicit replica groups are routed multi-hop and may contend"
    bidir = bidirectional or algorithm == "bidir-ring"
    directions = (1, -1) if bidir else (1,)
    axis = None if group is None else _axis_of(group, topo)

    def axis_stage_rings(a):
        if topo.dims[a] == 1:
            return None
        if bidir and not topo.wrap[a]:
            return f"bidirectional rings on mesh axis {a} share the folded ring's links"
        return tuple(_line_rings(topo, a, s, dummy) for s in directions)

    if algorithm in ("ring", "bidir-ring"):
        if axis is not None:
            r = axis_stage_rings(axis)
            sequences = [[] if r is None else [r]]
        elif topo.num_chips == 1:
            sequences = [[]]
        else:
            rings = tuple(_slice_ring(topo, s, dummy) for s in directions)
            if any(r is None for r in rings):
                return "no uncontended single ring through this mesh slice"
            # routed edges: check that no link serves two of them (line rings are disjoint by construction)
            if not _uncontended(rings):
                return "the routed edges of the slice ring share links"
            sequences = [[rings]]
    else:
        axes = [axis] if axis is not None else list(range(topo.ndim))
        if algorithm == "2d-split":
            live = [a for a in axes if topo.dims[a] > 1]
            if len(live) != 2:
                return "2d-split needs exactly two axes longer than 1"
            a, b = live
            if not (topo.wrap[a] and topo.wrap[b] and topo.dims[a] == topo.dims[b]
                    and topo.axis_link_Bps[a] == topo.axis_link_Bps[b] and not topo.link_Bps_override):
                return ("2d-split halves use an axis at the same time unless the slice is a "
                        "square torus with uniform links")
            orders = [[a, b], [b, a]]
        else:
            orders = [axes]
        sequences = []
        for order in orders:
            seq = []
            for a in order:
                r = axis_stage_rings(a)
                if isinstance(r, str):
                    return r
                if r is not None:
                    seq.append((a, r))
            sequences.append(seq)
        sequences = [[r for _, r in seq] for seq in sequences]

    for seq in sequences:
        for rings in seq:
            if isinstance(rings, str):
                return rings

    halves = []
    share = 1.0 / len(sequences)
    for seq in sequences:
        stages = []
        frac = share / len(directions)
        fracs = []
        for rings in seq:
            fracs.append(frac)
            frac /= rings[0].nodes.shape[1]
        if op == "reduce-scatter":
            stages = [_Stage("chip", r, "rs", f) for r, f in zip(seq, fracs)]
        elif op == "all-gather":
            stages = [_Stage("chip", r, "ag", f) for r, f in zip(seq[::-1], fracs[::-1])]
        else:
            stages = [_Stage("chip", r, "rs", f) for r, f in zip(seq[:-1], fracs[:-1])]
            if seq:
                stages.append(_Stage("chip", seq[-1], "ar", fracs[-1]))
            stages += [_Stage("chip", r, "ag", f) for r, f in zip(seq[-2::-1], fracs[-2::-1])]
        halves.append(stages)
    return halves


# ================================================================== the engine
def _ring_pass(free, ready0, rings, kind, piece_bytes, chunks, reduce_s):
    """Advance one ring operation over every ring of *rings*; return each member's
    completion time ``(L, n)``. *free* (link free times) is updated in place."""
    H, L, n = rings.links.shape
    nsteps = 2 * (n - 1) if kind == "ar" else n - 1
    reducing = 0 if kind == "ag" else n - 1  # steps whose arrival is summed in
    f = free[rings.links]  # (H, L, n), private copy: within a phase no two edges share a link
    occ = rings.s_per_byte * piece_bytes
    lat = rings.lat_s
    # A member handles its steps in order: step k+1 is ready when step k's message
    # has arrived *and* the member is past step k (it may have started the phase late).
    # When every member of a ring starts together, arrivals already come in order and
    # the extra maximum is a no-op, so it is skipped.
    skewed = not np.all(ready0 == ready0[:, :1])
    if chunks == 1:
        t = np.array(ready0, dtype=float)
        for k in range(nsteps):
            prev = t.copy() if skewed else None
            for h in range(H):
                np.maximum(t, f[h], out=t)
                t += occ[h]
                f[h] = t
                t += lat[h]
            t = _shift(t)
            if skewed:
                np.maximum(t, prev, out=t)
            if k < reducing and reduce_s:
                t += reduce_s
        done = t
    else:
        j = np.arange(chunks, dtype=float)
        jo = [occ[h][..., None] * j for h in range(H)]
        t = np.repeat(np.asarray(ready0, dtype=float)[..., None], chunks, axis=-1)
        for k in range(nsteps):
            prev = t.copy() if skewed else None
            for h in range(H):
                # pieces queue back to back: s_c = c*o + max(free, max_{j<=c}(t_j - j*o))
                t -= jo[h]
                np.maximum(t[..., 0], f[h], out=t[..., 0])
                np.maximum.accumulate(t, axis=-1, out=t)
                t += jo[h]
                t += occ[h][..., None]
                f[h] = t[..., -1]
                t += lat[h][..., None]
            t = _shift(t)
            if skewed:
                np.maximum(t, prev, out=t)
            if k < reducing and reduce_s:
                t += reduce_s
        done = t.max(axis=-1)
    free[rings.links[rings.real]] = f[rings.real]
    return done, nsteps


def _shift(t):
    """Arrivals at the next member: element ``i`` moves to ``i+1`` along each ring."""
    out = np.empty_like(t)
    out[:, 1:] = t[:, :-1]
    out[:, 0] = t[:, -1]
    return out


def _check(topo, op, algorithm, group, bidirectional, chunks):
    if not isinstance(topo, Topology):
        raise TypeError("topology must be a wus_sim.topology.Topology")
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ConfigError("must be a whole number >= 1", key_path="chunks", value=chunks)


def why_unsupported(topology, op, algorithm, *, group=None, bidirectional=False, chunks=1):
    """Why :func:`supports` says no (``None`` if it says yes)."""
    _check(topology, op, algorithm, group, bidirectional, chunks)
    plan = _plan(topology, op, algorithm, group, bidirectional, dummy=-1)
    return plan if isinstance(plan, str) else None


def supports(topology, op, algorithm, *, group=None, bidirectional=False, chunks=1):
    """True if the schedule is static and uncontended, so :func:`run` is exact.

    False for halving-doubling (partners several hops away contend), explicit replica
    lists, bidirectional rings on mesh axes (both directions would share the folded
    ring's links), a whole-slice ring on a multi-axis mesh, and 2d-split unless the
    slice is a square torus with uniform links (otherwise its halves can want an
    axis at the same time). The api falls back to the SimPy engine then.
    """
    return why_unsupported(topology, op, algorithm, group=group, bidirectional=bidirectional,
                           chunks=chunks) is None


def run(topology, op, algorithm, nbytes, *, group=None, bidirectional=False, chunks=1,
        reduce_Bps=None):
    """Simulate the collective exactly; *nbytes* = ``S``, the full buffer per replica.

    Raises :class:`ConfigError` (key ``engine``) if :func:`supports` says no.
    """
    topo = topology
    _check(topo, op, algorithm, group, bidirectional, chunks)
    if not nbytes > 0:
        raise ConfigError("must be > 0 bytes", key_path="size", value=nbytes)
    if reduce_Bps is not None and not reduce_Bps > 0:
        raise ConfigError("must be > 0", key_path="reduce_Bps", value=reduce_Bps)
    c = topo.cores_per_chip
    onchip_first = topo.num_link_slots
    dummy = onchip_first + topo.num_chips * c
    halves = _plan(topo, op, algorithm, group, bidirectional, dummy)
    if isinstance(halves, str):
        raise ConfigError(f"the fast engine cannot run this collective: {halves}; use the simpy engine",
                          key_path="engine", value="fast")
    S = float(nbytes)
    free = np.zeros(dummy + 1)
    link_bytes = np.zeros(topo.num_link_slots)
    events = 0
    onchip = _onchip_rings(topo, onchip_first) if c > 1 else None

    def stage_pass(ready, stage):
        """Run one stage from per-node ready times; return per-node completion times."""
        nonlocal events
        out = np.empty_like(ready)
        buf = stage.fraction * S
        for rings in stage.rings:
            n = rings.nodes.shape[1]
            piece = buf / n / chunks
            red = 0.0 if reduce_Bps is None else piece / reduce_Bps
            done, nsteps = _ring_pass(free, ready[rings.nodes], rings, stage.kind, piece, chunks, red)
            if rings is stage.rings[0]:
                out[rings.nodes] = done
            else:
                out[rings.nodes] = np.maximum(out[rings.nodes], done)
            events += nsteps * chunks * rings.num_hops
            if stage.level == "chip":
                link_bytes[rings.links[rings.real]] += nsteps * piece * chunks
        return out

    core_ready = np.zeros(topo.num_chips * c)
    if onchip is not None and op != "all-gather":
        core_ready = stage_pass(core_ready, _Stage("core", (onchip,), "rs", 1.0))
    chip_start = core_ready.reshape(topo.num_chips, c).max(axis=1)
    chip_done = chip_start.copy()
    # the halves of 2d-split share links; on the square uniform torus they use an axis
    # one after the other, so running their stages interleaved (A1, B1, A2, B2, ...)
    # meets every link's messages in time order
    readies = [chip_start.copy() for _ in halves]
    for i in range(max(len(h) for h in halves)):
        for half, stages in enumerate(halves):
            if i < len(stages):
                readies[half] = stage_pass(readies[half], stages[i])
    chip_done = np.max(readies, axis=0)
    core_ready = np.repeat(chip_done, c)
    if onchip is not None and op != "reduce-scatter":
        core_ready = stage_pass(core_ready, _Stage("core", (onchip,), "ag", 1.0))
    time_s = float(core_ready.max())
    busy = link_bytes / np.where(topo.link_exists, topo.link_Bps, np.inf)
    return FastOutcome(time_s=time_s, events=int(events), link_bytes=link_bytes, link_busy_s=busy)
