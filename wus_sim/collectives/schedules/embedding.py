"""Ring embeddings: which chips form each ring, and which directed links each ring edge uses.

A :class:`RingEmbedding` is a pure array structure (no SimPy) shared by both
collective engines and the closed-form model. ``members[r, i]`` is the i-th
member of ring ``r`` in ring order; edge ``i`` goes from ``members[r, i]`` to
``members[r, (i+1) % n]`` over the link keys ``links[r, i, :hops[r, i]]``
(store-and-forward, in that order). Link keys are the topology's dense ICI link
ids, extended by on-chip core links (:func:`wus_sim.hardware.network.onchip_link_key`).

Embeddings used (both engines rely on them):

* One axis line of ``d`` chips (:func:`axis_rings`): wrapped axis: ring order
  ``0..d-1``, edge ``i -> i+1`` on the ``+`` link of chip ``i`` (the reverse
  ring, order reversed, uses ``-`` links). Unwrapped (mesh) axis, ``d >= 3``:
  folded ring ``0, 2, 4, ... (evens up), ..., 5, 3, 1 (odds down)``; edges
  between evens take two ``+`` hops, between odds two ``-`` hops, the two turn
  edges one hop, so every directed link of the line is used exactly once. Mesh
  ``d == 2``: ``0 -> 1`` on the ``+`` link, ``1 -> 0`` on the ``-`` link (the
  reverse ring uses the same two links). ``d == 1``: a ring of one member.
* The whole slice (:func:`slice_ring`), axes of length 1 ignored: one active
  axis is the line ring above. With two or three active axes and one of even
  length, a Hamiltonian cycle of one-hop edges: a snake over positions
  ``1..a-1`` of a "line" axis ``L`` along a boustrophedon path of the other
  axes, returning along position 0 of ``L`` (2-D with ``Y`` even: snake over
  columns ``1..X-1`` and return along column 0; 3-D: the same over the plane
  path times the remaining line). It uses no wraparound link and each directed
  link at most once, and so does its reverse (disjoint from it). With every
  active axis odd and one of them wrapped (any odd torus: 3x5, 3x3x3), the
  same snake over the first wrapped axis as ``L``: it ends at position ``a-1``
  instead of 1, and the wraparound link ``a-1 -> 0`` is the one-hop turn edge,
  so the cycle is still all one-hop edges (products of cycles are Hamiltonian)
  and uses that wraparound link once. With every active axis odd and none
  wrapped (a mesh) no such cycle exists (the grid is bipartite with an odd
  number of chips); we use the boustrophedon path and route its closing edge
  dimension-order, over links the path leaves free.
* An explicit chip or replica sequence (:func:`sequence_ring`): ring in the
  given order, every edge routed dimension-order (shortest way round); edges
  may share links, i.e. contend.
* The cores of each chip (:func:`onchip_rings`): core ``q -> q+1 (mod c)`` on
  the on-chip link of core ``q``.

Failed links (``topology.failed_links``): every embedding above is built as if
all links worked, then each hop over a failed link is replaced by its detour
(:meth:`~wus_sim.hardware.topology.Topology.detour`), so the edge becomes multi-hop
(store-and-forward, like a mesh's folded edges). Detours usually run over links
other ring edges use: the plan then has shared links, and the SimPy engine runs
it (:func:`~wus_sim.collectives.schedules.loads.contention`).
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...hardware.network import onchip_link_key, replica_route
from .snake import slice_ring_coords

__all__ = [
    "RingEmbedding", "line_ring_pattern", "axis_rings", "slice_ring", "slice_ring_order",
    "sequence_ring", "onchip_rings", "active_axes", "routes", "around_failures", "part_rings", "clear_ring_cache",
]


@dataclass(frozen=True, eq=False)
class RingEmbedding:
    """Rings of equal size ``n`` and the link keys of each ring edge."""

    members: np.ndarray
    """``(num_rings, n)`` chip ids (or replica ids for replica rings) in ring order."""
    links: np.ndarray
    """``(num_rings, n, max_hops)`` link keys of edge ``i`` (member ``i`` -> ``i+1``), padded with -1."""
    hops: np.ndarray
    """``(num_rings, n)`` number of links on each edge."""

    @property
    def num_rings(self):
        return int(self.members.shape[0])

    @property
    def size(self):
        """Members per ring (``n``)."""
        return int(self.members.shape[1])

    def edge_path(self, ring, i):
        """Link keys of edge *i* of ring *ring*, as a list."""
        return [int(k) for k in self.links[ring, i, : self.hops[ring, i]]]

    def link_use(self, num_keys):
        """How many ring edges use each link key (length *num_keys*)."""
        used = self.links[self.links >= 0]
        return np.bincount(used, minlength=num_keys)


def around_failures(topology, emb):
    """*emb* with every hop over a failed link replaced by its detour (itself if none fails)."""
    if not topology.failed_links:
        return emb
    hit = np.isin(emb.links, topology.failed_links).any(axis=2)  # (rings, n): edges over a failed link
    if not hit.any():
        return emb
    # only those edges change (a detour is never shorter than the link it replaces, so the
    # padded width only grows): reroute them alone, the other edges keep their keys
    where = np.argwhere(hit).tolist()
    paths = [topology.reroute(emb.edge_path(r, i)) for r, i in where]
    hops = emb.hops.astype(np.int64, copy=True)
    for (r, i), path in zip(where, paths):
        hops[r, i] = len(path)
    width = max(int(hops.max()), 1)  # as wide as the longest edge, as _from_lists builds it
    links = np.full(emb.links.shape[:2] + (width,), -1, dtype=np.int64)
    kept = min(width, emb.links.shape[2])  # the other edges' keys fit: none is longer than width
    links[:, :, :kept] = emb.links[:, :, :kept]
    for (r, i), path in zip(where, paths):
        links[r, i, :] = -1
        links[r, i, :len(path)] = path
    return RingEmbedding(np.asarray(emb.members, dtype=np.int64), links, hops)


def _from_lists(members, paths):
    """Build a RingEmbedding from per-ring member lists and per-edge key lists."""
    members = np.asarray(members, dtype=np.int64).reshape(len(members), -1)
    num_rings, n = members.shape
    max_hops = max([len(p) for ring in paths for p in ring] + [1])
    links = np.full((num_rings, n, max_hops), -1, dtype=np.int64)
    hops = np.zeros((num_rings, n), dtype=np.int64)
    for r, ring in enumerate(paths):
        for i, path in enumerate(ring):
            links[r, i, : len(path)] = path
            hops[r, i] = len(path)
    return RingEmbedding(members, links, hops)


def active_axes(topology):
    """Axes with more than one chip, in axis order."""
    return [a for a, d in enumerate(topology.dims) if d > 1]


# ------------------------------------------------------------------ one axis
def line_ring_pattern(d, wrap, reverse=False):
    """Ring over the positions ``0..d-1`` of one axis line.

    Returns ``(order, edges)``: ``order`` lists positions in ring order and
    ``edges[i]`` is the list of ``(position, direction)`` hops of the edge from
    ``order[i]`` to ``order[(i+1) % d]`` (the link leaving *position* in
    *direction* +1/-1).
    """
    if d == 1:
        return [0], [[]]
    if wrap:
        order = list(range(d))
        if not reverse:
            return order, [[(x, +1)] for x in order]
        order = order[::-1]
        return order, [[(x, -1)] for x in order]
    if d == 2:
        order = [0, 1] if not reverse else [1, 0]
    else:
        order = list(range(0, d, 2)) + list(range(d - 1 if d % 2 == 0 else d - 2, 0, -2))
        if reverse:
            order = order[::-1]
    edges = []
    for i, a in enumerate(order):
        b = order[(i + 1) % d]
        step = 1 if b > a else -1
        edges.append([(a + j * step, step) for j in range(abs(b - a))])
    return order, edges


def axis_rings(topology, axis, reverse=False):
    """One ring per line along *axis* (all lines at once), chips as members (memoized: the
    plans of a slice's ops share them; treat them as read-only)."""
    return _axis_rings(topology, int(axis), bool(reverse))


@lru_cache(maxsize=256)
def _axis_rings(topology, axis, reverse):
    # a step plans all-reduce, reduce-scatter and all-gather on one slice, each over the same
    # line rings, and rerouting them around failed links is the costly part
    lines = topology.axis_rings(axis)  # (num_lines, d) in coordinate order
    d = topology.dims[axis]
    order, edges = line_ring_pattern(d, topology.wrap[axis], reverse)
    members = lines[:, order]
    max_hops = max([len(e) for e in edges] + [1])
    links = np.full((lines.shape[0], d, max_hops), -1, dtype=np.int64)
    hops = np.zeros((lines.shape[0], d), dtype=np.int64)
    for i, edge in enumerate(edges):
        for j, (pos, direction) in enumerate(edge):
            links[:, i, j] = topology.link_id(lines[:, pos], axis, direction)
        hops[:, i] = len(edge)
    return around_failures(topology, RingEmbedding(np.ascontiguousarray(members), links, hops))


def clear_ring_cache():
    """Forget the memoized :func:`axis_rings` (with the plan cache)."""
    _axis_rings.cache_clear()


def part_rings(topology, axis, stride, length, reverse=False, alternate=False):
    """One ring per group of a mesh-axis part (all groups at once), chips as members: along
    *axis*, position ``inner + stride * (k + length * outer)`` for ``k = 0..length-1``.

    The ring over ``k`` is :func:`line_ring_pattern`'s, wrapped only when the part is the
    whole wrapped axis read at its stride (``stride * length`` = the axis), folded otherwise
    (a contiguous part of a torus axis has no wraparound link of its own); each of its hops
    is ``stride`` links along the axis. With ``stride == 1`` and the whole axis this is
    :func:`axis_rings`. *alternate*: groups of odd ``inner`` run the other way round, so
    that at stride 2 the two interleaved groups of a line use opposite link directions and
    share no link (at stride > 2 each direction still carries ``stride / 2`` groups' edges:
    the plan's contention says so and the engines run it)."""
    d = topology.dims[axis]
    if stride == 1 and length == d:
        return axis_rings(topology, axis, reverse)
    lines = topology.axis_rings(axis)  # (num_lines, d), coordinate order
    wrapped = topology.wrap[axis] and stride * length == d
    groups = [(inner, outer) for outer in range(d // (stride * length)) for inner in range(stride)]
    patterns = {rev: line_ring_pattern(length, wrapped, rev) for rev in (False, True)}
    num = lines.shape[0] * len(groups)
    members = np.empty((num, length), dtype=np.int64)
    max_hops = max([len(e) for _, edges in patterns.values() for e in edges] + [1]) * stride
    links = np.full((num, length, max_hops), -1, dtype=np.int64)
    hops = np.zeros((num, length), dtype=np.int64)
    for g, (inner, outer) in enumerate(groups):
        order, edges = patterns[bool(reverse) != (alternate and inner % 2 == 1)]
        rows = slice(g * lines.shape[0], (g + 1) * lines.shape[0])
        base = inner + stride * length * outer
        members[rows] = lines[:, [base + stride * k for k in order]]
        for i, edge in enumerate(edges):
            j = 0
            for k, direction in edge:
                pos = base + stride * k
                for _ in range(stride):
                    links[rows, i, j] = topology.link_id(lines[:, pos % d], axis, direction)
                    pos += direction
                    j += 1
            hops[rows, i] = j
    return around_failures(topology, RingEmbedding(members, links, hops))


# ---------------------------------------------------------------- whole slice
def slice_ring_order(topology):
    """Chip ids of the whole-slice ring in ring order.

    See the module docstring for the construction (:func:`.snake.slice_ring_coords`).
    """
    coords = slice_ring_coords(topology.dims, topology.wrap)
    return topology.chip_id(np.array(coords, dtype=np.int64).reshape(len(coords), topology.ndim))


def _grid_edge(topology, a, b):
    """Link keys from chip *a* to chip *b*: one hop if they are grid neighbours without
    wraparound, else the dimension-order route."""
    ca, cb = topology.coords[a], topology.coords[b]
    diff = np.flatnonzero(ca != cb)
    if len(diff) == 1 and abs(int(cb[diff[0]] - ca[diff[0]])) == 1:
        axis = int(diff[0])
        return topology.reroute([int(topology.link_id(a, axis, int(cb[axis] - ca[axis])))])
    return topology.route(a, b)


def slice_ring(topology, reverse=False):
    """One ring over every chip of the slice (see the module docstring)."""
    active = active_axes(topology)
    if not active:
        return _from_lists([[0]], [[[]]])
    if len(active) == 1:
        return axis_rings(topology, active[0], reverse)
    order = slice_ring_order(topology)
    order = [int(c) for c in order]
    if reverse:
        order = order[::-1]
    n = len(order)
    paths = [_grid_edge(topology, order[i], order[(i + 1) % n]) for i in range(n)]
    return _from_lists([order], [paths])


# ------------------------------------------------------------------ routing
def routes(topology, src, dst):
    """Dimension-order routes of many chip pairs at once, exactly :meth:`Topology.route`
    (axis 0 first, the shortest way round on a wrapped axis, ties going ``+``).

    Returns a list of tuples of link ids, one per pair (failed links detoured, as there).
    """
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    cur = src.copy()
    cs, cd = topology.coords[src], topology.coords[dst]
    rows = []
    for axis, d in enumerate(topology.dims):
        delta = cd[:, axis] - cs[:, axis]
        if topology.wrap[axis]:
            fwd = delta % d
            back = (d - fwd) % d
            plus = fwd <= back
            direction = np.where(plus, 1, -1)
            count = np.where(plus, fwd, back)
        else:
            direction = np.where(delta >= 0, 1, -1)
            count = np.abs(delta)
        for j in range(int(count.max(initial=0))):
            active = count > j
            rows.append(np.where(active, topology.link_id(cur, axis, direction), -1))
            cur = np.where(active, topology.neighbor(cur, axis, direction), cur)
    if not rows:
        return [()] * len(src)
    table = np.array(rows).T.tolist()
    out = [tuple(k for k in row if k >= 0) for row in table]
    if topology.failed_links:
        failed = set(topology.failed_links)
        out = [tuple(topology.reroute(r)) if failed.intersection(r) else r for r in out]
    return out


# ------------------------------------------------------------ explicit groups
def sequence_ring(topology, replicas, reverse=False):
    """A ring over an explicit replica sequence, in the given order (reversed if *reverse*).

    Every edge is routed: over the on-chip links between cores of one chip,
    else dimension-order between chips (see :func:`wus_sim.hardware.network.replica_route`).
    """
    order = [int(r) for r in replicas]
    if reverse:
        order = order[::-1]
    n = len(order)
    paths = [replica_route(topology, order[i], order[(i + 1) % n]) if n > 1 else [] for i in range(n)]
    return _from_lists([order], [paths])


def onchip_rings(topology):
    """One ring per chip over its cores (replica ids as members), on the on-chip links."""
    c = topology.cores_per_chip
    chips = np.arange(topology.num_chips)
    members = chips[:, None] * c + np.arange(c)[None, :]
    if c == 1:
        return RingEmbedding(members, np.full((topology.num_chips, 1, 1), -1, dtype=np.int64),
                             np.zeros((topology.num_chips, 1), dtype=np.int64))
    links = onchip_link_key(topology, chips[:, None], np.arange(c)[None, :])[:, :, None]
    return RingEmbedding(members, links.astype(np.int64), np.ones((topology.num_chips, c), dtype=np.int64))
