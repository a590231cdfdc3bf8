"""Static structure of a TPU slice: chips on a torus or mesh, links, rings, routes.

A :class:`Topology` is a pure object (no SimPy): chips on an ``X x Y`` (or
``X x Y x Z``) grid, wraparound chosen per axis, full-duplex ICI links between
grid neighbours, and the chip's figures (cores, HBM, peak FLOP/s).

Numbering, used by every other module:

* chip id: row-major with axis 0 fastest, ``chip = x + X*(y + Y*z)``.
* replica id: one replica per core by default, ``replica = chip*cores_per_chip + core``.
* directed link id: ``link = chip*2*ndim + 2*axis + d``, the link leaving
  ``chip`` along ``axis`` in direction ``+1`` (``d=0``) or ``-1`` (``d=1``).
  Ids are dense; :attr:`Topology.link_exists` masks the ones a mesh edge lacks.
  On a wrapped axis of length 2 the ``+`` and ``-`` links of a chip reach the
  same neighbour over two distinct cables, as on a real 2-chip torus axis.

Routing of non-neighbour messages is dimension-order (axis 0, then 1, then 2),
the shortest way round on a wrapped axis, ties going the ``+`` way.

Failed and slow links (what-ifs): a *cable* is the pair of directed links between two
neighbours, named by its ``+`` direction (``12+x``: the link leaving chip 12 along ``+x``;
``13-x`` names the same cable). A failed cable takes both directions down (a broken cable
or a dead port cuts both ways, and keeping the working links bidirectional keeps every
detour reversible); a slow cable runs both directions at its bandwidth / FACTOR. A route
that would cross a failed link takes a *detour* for that hop instead, as a router with a
table around a dead port would: the shortest path over working links from the hop's chip
to the chip past it, the first such path in link-id order at each hop (``+x, -x, +y, -y,
+z, -z``). On a 2-D or 3-D torus that is "step to the next line along ``+y``, go along,
step back" (3 hops); on a 1-D ring, the other way round. A failure set that disconnects
the slice is an error.

One concept in ~480 lines: the slice's static structure. Numbering, links, rings, routes and
detours around failed links are views of one grid that every other module reads; none of them
runs anything. Chips are :mod:`wus_sim.hardware.chips`, reading slices from files is
:mod:`wus_sim.hardware.topology_files`, parsing fault lists is :mod:`wus_sim.hardware.link_faults`.
"""

from dataclasses import dataclass, field, replace
from functools import cached_property
import math

import numpy as np

from ..inputs import door
from ..inputs.errors import ConfigError
from ..inputs.limits import MAX_CHIPS, MAX_REPLICAS, check_limit
from ..inputs.units import GB, GiB, US
from .chips import Chip
from .link_faults import cable_names

__all__ = ["Topology"]


@door.checked(
    name=door.name("a topology name"), chip=door.instance("wus_sim.hardware.chips:Chip", "a Chip"),
    dims=door.items(door.whole(1), "chips per axis"), wrap=door.items(door.flag(), "wraparounds"),
    axis_link_Bps=door.either("a bandwidth in bytes/s > 0, one per axis, or None (the chip's)",
                              door.items(door.number(positive=True), "bandwidths", nullable=True),
                              door.number(positive=True)),
    hop_latency_s=door.number(0, nullable=True), onchip_Bps=door.number(positive=True, nullable=True),
    cores_per_chip=door.whole(1, 64, nullable=True), description=door.name("a description", empty=True),
    sources=door.mapping(), failed_links=door.items(door.whole(0), "link ids", empty=True),
    link_Bps_override=door.items(door.pair(door.whole(0), door.number(positive=True), "(link id, bytes/s)"),
                                 "(link id, bytes/s) pairs", empty=True))
@dataclass(frozen=True, eq=False)
class Topology:
    """Chips on a torus/mesh grid with their ICI links.

    Build one with :func:`load_topology`, or directly::

        Topology("t", chip, dims=(4, 4), wrap=(True, True))
    """

    name: str
    chip: Chip
    dims: tuple
    """Chips per axis, e.g. ``(32, 32)`` or ``(4, 4, 4)``."""
    wrap: tuple
    """Wraparound per axis (``True`` = torus ring, ``False`` = mesh line)."""
    axis_link_Bps: tuple = None
    """Per-direction link bandwidth per axis, bytes/s (default: the chip's)."""
    hop_latency_s: float = None
    """Per-hop latency, seconds (default: the chip's)."""
    onchip_Bps: float = None
    """Core-to-core bandwidth inside a chip (default: the chip's)."""
    cores_per_chip: int = None
    """Cores per chip (default: the chip's); each core is one replica."""
    description: str = ""
    sources: dict = field(default_factory=dict)
    """Citations for this slice's shape and wraparound."""
    link_Bps_override: tuple = ()
    """``((link_id, bytes_per_s), ...)`` for slow/fast individual links (what-ifs)."""
    failed_links: tuple = ()
    """Directed link ids that are down, sorted; both directions of each failed cable (the
    reverse direction of every id given is added). Routes detour around them."""

    def __post_init__(self):
        dims = tuple(int(d) for d in self.dims)
        wrap = tuple(bool(w) for w in self.wrap)
        if not 1 <= len(dims) <= 3:
            raise ConfigError("must have 1 to 3 axes", key_path="dims", value=list(dims))
        if any(d < 1 for d in dims):
            raise ConfigError("every axis must have >= 1 chip", key_path="dims", value=list(dims))
        # Before any array is sized by the chip count (Python ints: no overflow, however long).
        check_limit(f"chips in the {'x'.join(map(str, dims)) if max(dims) < 10**9 else 'given'} slice",
                    math.prod(dims), MAX_CHIPS, key_path="topology", hint="use a smaller slice")
        if len(wrap) != len(dims):
            raise ConfigError(f"needs one entry per axis ({len(dims)})", key_path="wraparound", value=list(wrap))
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "wrap", wrap)
        if self.axis_link_Bps is None:
            object.__setattr__(self, "axis_link_Bps", (self.chip.link_Bps,) * len(dims))
        elif np.isscalar(self.axis_link_Bps):
            object.__setattr__(self, "axis_link_Bps", (float(self.axis_link_Bps),) * len(dims))
        else:
            object.__setattr__(self, "axis_link_Bps", tuple(float(b) for b in self.axis_link_Bps))
        if len(self.axis_link_Bps) != len(dims) or any(not 0 < b < math.inf for b in self.axis_link_Bps):
            raise ConfigError("needs one positive, finite bandwidth per axis", key_path="link_GBps",
                              value=[b / GB for b in self.axis_link_Bps])
        for attr, default in (("hop_latency_s", self.chip.hop_latency_s),
                              ("onchip_Bps", self.chip.onchip_Bps),
                              ("cores_per_chip", self.chip.cores_per_chip)):
            if getattr(self, attr) is None:
                object.__setattr__(self, attr, default)
        if not 0 <= self.hop_latency_s < math.inf:
            raise ConfigError("must be >= 0 and finite", key_path="hop_latency_us", value=self.hop_latency_s / US)
        if not 0 < self.onchip_Bps < math.inf:
            raise ConfigError("must be > 0 and finite", key_path="onchip_GBps", value=self.onchip_Bps / GB)
        if int(self.cores_per_chip) < 1:
            raise ConfigError("must be >= 1", key_path="cores_per_chip", value=self.cores_per_chip)
        check_limit("replicas (chips x cores per chip)", math.prod(dims) * int(self.cores_per_chip),
                    MAX_REPLICAS, key_path="cores_per_chip")
        object.__setattr__(self, "cores_per_chip", int(self.cores_per_chip))
        object.__setattr__(self, "link_Bps_override", tuple(self.link_Bps_override))
        object.__setattr__(self, "failed_links", self._cable_set(self.failed_links))
        if self.failed_links:
            self._check_connected()
        # Equal by value, so that slices built separately share every cache keyed by
        # topology (plans, closed forms, prepared link arrays); the description and
        # sources are words about the slice, not the slice. Hashed once: the caches ask often.
        object.__setattr__(self, "_value", (self.name, self.chip, self.dims, self.wrap, self.axis_link_Bps,
                                            self.hop_latency_s, self.onchip_Bps, self.cores_per_chip,
                                            self.link_Bps_override, self.failed_links))
        object.__setattr__(self, "_hash", hash(self._value))

    def __eq__(self, other):
        if self is other:
            return True
        return isinstance(other, Topology) and self._hash == other._hash and self._value == other._value

    def __hash__(self):
        return self._hash

    # ------------------------------------------------------------------ sizes
    @property
    def ndim(self):
        return len(self.dims)

    @property
    def num_chips(self):
        return math.prod(self.dims)  # Python ints (checked in __post_init__): no numpy call, asked often

    @property
    def num_cores(self):
        return self.num_chips * self.cores_per_chip

    @property
    def num_replicas(self):
        """Replicas of data parallelism: one per core."""
        return self.num_cores

    @property
    def routing_key(self):
        """What every route of this slice depends on: its shape, wraparound, cores per chip and
        failed links (not its bandwidths or latencies). Slices equal in it have the same routes
        and link keys, so route tables are shared between them (a sweep over link bandwidths)."""
        return self.dims, self.wrap, self.cores_per_chip, self.failed_links

    @property
    def num_link_slots(self):
        """Length of dense link-id arrays (``num_chips * 2 * ndim``)."""
        return self.num_chips * 2 * self.ndim

    @property
    def num_links(self):
        """Directed links that exist."""
        return int(self.link_exists.sum())

    @property
    def shape_str(self):
        return "x".join(map(str, self.dims))

    # ------------------------------------------------------------ coordinates
    @cached_property
    def coords(self):
        """``(num_chips, ndim)`` int array of chip coordinates."""
        idx = np.arange(self.num_chips)
        out = np.empty((self.num_chips, self.ndim), dtype=np.int64)
        for axis, d in enumerate(self.dims):
            out[:, axis] = idx % d
            idx = idx // d
        return out

    def chip_id(self, coord):
        """Chip id of a coordinate tuple (or of an ``(n, ndim)`` array of them)."""
        c = np.asarray(coord, dtype=np.int64)
        strides = np.cumprod((1,) + self.dims[:-1])
        return (c * strides).sum(axis=-1)

    @property
    def hbm_bytes_per_replica(self):
        """HBM capacity one replica (core) may use: the chip's, split evenly by its cores."""
        return self.chip.hbm_bytes / self.cores_per_chip

    @property
    def hbm_Bps_per_replica(self):
        """HBM bandwidth of one replica: the cores of a chip share the chip's bandwidth."""
        return self.chip.hbm_Bps / self.cores_per_chip

    @property
    def peak_flops_per_replica(self):
        """Matrix-unit peak of one replica, FLOP/s."""
        return self.chip.peak_flops / self.cores_per_chip

    # ------------------------------------------------------------------ links
    def link_id(self, chip, axis, direction):
        """Dense id of the link leaving *chip* along *axis*, ``direction`` = +1 or -1."""
        return np.asarray(chip) * (2 * self.ndim) + 2 * axis + (np.asarray(direction) < 0)

    def neighbor(self, chip, axis, direction):
        """Chip one hop away along *axis* in *direction* (+1/-1), or -1 where a mesh edge has none.

        Works elementwise on arrays of chips.
        """
        chip = np.asarray(chip, dtype=np.int64)
        d = self.dims[axis]
        stride = int(np.prod(self.dims[:axis], dtype=np.int64))
        x = (chip // stride) % d
        nx = x + direction
        if self.wrap[axis]:
            nx = nx % d
            valid = np.full(chip.shape, d > 1)
        else:
            valid = (nx >= 0) & (nx < d)
            nx = np.clip(nx, 0, d - 1)
        out = chip + (nx - x) * stride
        return np.where(valid, out, -1)

    @cached_property
    def link_src(self):
        """Source chip of every link slot."""
        return np.repeat(np.arange(self.num_chips), 2 * self.ndim)

    @cached_property
    def link_axis(self):
        return np.tile(np.repeat(np.arange(self.ndim), 2), self.num_chips)

    @cached_property
    def link_direction(self):
        """+1 or -1 for every link slot."""
        return np.tile(np.array([1, -1] * self.ndim), self.num_chips)

    @cached_property
    def link_dst(self):
        """Destination chip of every link slot (-1 where the link does not exist)."""
        dst = np.full(self.num_link_slots, -1, dtype=np.int64)
        for axis in range(self.ndim):
            for k, direction in enumerate((1, -1)):
                ids = np.arange(self.num_chips) * 2 * self.ndim + 2 * axis + k
                dst[ids] = self.neighbor(np.arange(self.num_chips), axis, direction)
        return dst

    @cached_property
    def link_exists(self):
        return self.link_dst >= 0

    @cached_property
    def link_up(self):
        """Links that exist and have not failed (a bool per link slot)."""
        up = self.link_exists.copy()
        up[list(self.failed_links)] = False
        return up

    @cached_property
    def link_Bps(self):
        """Per-direction bandwidth of every link slot, bytes/s (``nan`` where none exists or
        the link has failed: nothing may be sent over it)."""
        bw = np.asarray(self.axis_link_Bps, dtype=float)[self.link_axis]
        for link, value in self.link_Bps_override:
            bw[int(link)] = float(value)
        return np.where(self.link_up, bw, np.nan)

    def bisection_Bps(self, axis=None):
        """Bandwidth, one direction, across the cut that halves the slice along *axis*
        (default: the largest axis), bytes/s. Datasheets quote this figure (Cloud TPU v3:
        6.4 TB/s for a v3 pod), so it checks the link figures against the published ones."""
        axis = int(np.argmax(self.dims)) if axis is None else axis
        d = self.dims[axis]
        if d < 2:
            return 0.0
        # links from the lower half (coordinate < d/2) to the upper half, + and - ways
        x = self.coords[self.link_src, axis]
        dst = np.where(self.link_exists, self.link_dst, 0)
        y = self.coords[dst, axis]
        crossing = self.link_exists & (self.link_axis == axis) & (x < d // 2) & (y >= d // 2)
        return float(np.nansum(self.link_Bps[crossing]))

    def links(self):
        """List of working directed links (existing, not failed) as ``(link_id, src_chip, dst_chip,
        axis, direction)``."""
        ids = np.flatnonzero(self.link_up)
        return [(int(i), int(self.link_src[i]), int(self.link_dst[i]), int(self.link_axis[i]),
                 int(self.link_direction[i])) for i in ids]

    def with_link_bandwidth(self, link_ids, bw_Bps):
        """A copy in which the given links run at *bw_Bps* (a slow-link what-if)."""
        extra = tuple((int(l), float(bw_Bps)) for l in np.atleast_1d(link_ids))
        return replace(self, link_Bps_override=self.link_Bps_override + extra)

    # ------------------------------------------------------- cables, failures
    def reverse_link(self, link):
        """The other direction of *link*'s cable: the link back from its destination."""
        link = int(link)
        return int(self.link_id(self.link_dst[link], int(self.link_axis[link]), -int(self.link_direction[link])))

    @property
    def cables(self):
        """Link id of every cable's ``+`` direction, ascending (one per cable)."""
        return np.flatnonzero(self.link_exists & (self.link_direction > 0))

    def with_failed_links(self, link_ids):
        """A copy in which the cables of *link_ids* (and so both their directions) are down."""
        return replace(self, failed_links=tuple(self.failed_links) + tuple(int(l) for l in np.atleast_1d(link_ids)))

    def _cable_set(self, link_ids):
        """*link_ids* with the reverse of each added, sorted and unique; ConfigError on an id
        that is not a link of this slice."""
        out = set()
        for link in link_ids:
            if isinstance(link, (bool, np.bool_)) or not isinstance(link, (int, np.integer)) \
                    or not 0 <= link < self.num_link_slots or not self.link_exists[link]:
                raise ConfigError(f"must be ids of links of this {self.shape_str} slice "
                                  f"(0..{self.num_link_slots - 1}, where a link exists)",
                                  key_path="failed_links", value=link)
            out.update((int(link), self.reverse_link(link)))
        return tuple(sorted(out))

    def _check_connected(self):
        """ConfigError unless every chip reaches chip 0 over working links (a breadth-first
        flood, one numpy pass per hop of distance)."""
        up = np.flatnonzero(self.link_up)
        src, dst = self.link_src[up], self.link_dst[up]
        reached = np.zeros(self.num_chips, bool)
        reached[0] = True
        while True:
            new = dst[reached[src] & ~reached[dst]]
            if not len(new):
                break
            reached[new] = True
        if not reached.all():
            lost = np.flatnonzero(~reached)
            raise ConfigError(f"disconnect the slice: {len(lost)} chip(s) (first: chip {int(lost[0])}) "
                              "cannot reach chip 0 over the working links",
                              key_path="failed_links", value=cable_names(self, self.failed_links))

    @cached_property
    def _detours(self):
        return {}

    def detour(self, link):
        """Link ids from *link*'s source to its destination over working links: the shortest
        path, the first in link-id order at each hop (see the module docstring)."""
        link = int(link)
        path = self._detours.get(link)
        if path is None:
            a, b = int(self.link_src[link]), int(self.link_dst[link])
            per = 2 * self.ndim
            parent = {a: None}
            frontier = [a]
            while b not in parent:  # breadth-first, FIFO, neighbours in link-id order
                nxt = []
                for u in frontier:
                    for k in range(u * per, u * per + per):
                        v = int(self.link_dst[k])
                        if self.link_up[k] and v not in parent:
                            parent[v] = k
                            nxt.append(v)
                assert nxt, "a connected slice always has a detour"
                frontier = nxt
            path = []
            v = b
            while parent[v] is not None:
                k = parent[v]
                path.append(k)
                v = int(self.link_src[k])
            path = self._detours[link] = tuple(path[::-1])
        return list(path)

    def reroute(self, path):
        """*path* (link keys) with every failed ICI link replaced by its :meth:`detour`;
        other keys (on-chip links) pass through."""
        if not self.failed_links:
            return list(path)
        failed = set(self.failed_links)
        out = []
        for k in path:
            k = int(k)
            if k in failed:
                out.extend(self.detour(k))
            else:
                out.append(k)
        return out

    # ------------------------------------------------------------------ rings
    def axis_rings(self, axis):
        """``(num_rings, dims[axis])`` array: each row is the chips of one line along *axis*,
        in coordinate order. It closes into a ring iff ``wrap[axis]``."""
        d = self.dims[axis]
        order = [axis] + [a for a in range(self.ndim) if a != axis]
        # chips laid out with `axis` varying fastest within each row
        grid = np.arange(self.num_chips).reshape(self.dims[::-1])  # grid[z, y, x]
        grid = np.moveaxis(grid, [self.ndim - 1 - a for a in order], list(range(self.ndim - 1, -1, -1)))
        return np.ascontiguousarray(grid.reshape(-1, d))

    # ---------------------------------------------------------------- routing
    def route(self, src, dst):
        """Link ids on the dimension-order path from chip *src* to chip *dst* (with a detour
        around each failed link on it, see :meth:`reroute`)."""
        links = []
        cur = int(src)
        cs, cd = self.coords[int(src)], self.coords[int(dst)]
        for axis in range(self.ndim):
            d = self.dims[axis]
            delta = int(cd[axis] - cs[axis])
            if delta == 0:
                continue
            if self.wrap[axis]:
                fwd = delta % d
                back = d - fwd
                direction, hops = (1, fwd) if fwd <= back else (-1, back)
            else:
                direction, hops = (1, delta) if delta > 0 else (-1, -delta)
            for _ in range(hops):
                links.append(int(self.link_id(cur, axis, direction)))
                cur = int(self.neighbor(cur, axis, direction))
        return self.reroute(links) if self.failed_links else links

    # ----------------------------------------------------------------- export
    def to_networkx(self):
        """A ``networkx.MultiDiGraph``: nodes are chip ids with ``coord``; edges carry
        ``link``, ``axis``, ``direction`` and ``bw_Bps``. (networkx is a test extra.)"""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name, dims=self.dims, wrap=self.wrap)
        for chip in range(self.num_chips):
            g.add_node(chip, coord=tuple(int(c) for c in self.coords[chip]))
        for link, src, dst, axis, direction in self.links():
            g.add_edge(src, dst, key=link, link=link, axis=axis, direction=direction,
                       bw_Bps=float(self.link_Bps[link]))
        return g

    @property
    def kind(self):
        """``'torus'`` (every axis wraps), ``'mesh'`` (none does) or ``'partial-torus'``."""
        return "torus" if all(self.wrap) else ("mesh" if not any(self.wrap) else "partial-torus")

    def to_dict(self):
        """What the slice is (``wus-sim describe topology --json``): shape, wraparound per axis,
        counts, the chip's figures and the link figures, units in the keys, and a source for
        every figure. A figure the slice sets itself is cited from the topology file; one it
        takes from the chip, from ``chips.yaml``."""
        chip = self.chip
        link_GBps = [b / GB for b in self.axis_link_Bps]
        own = {"link_GBps": any(b != chip.link_Bps for b in self.axis_link_Bps),
               "hop_latency_us": self.hop_latency_s != chip.hop_latency_s,
               "onchip_GBps": self.onchip_Bps != chip.onchip_Bps,
               "cores_per_chip": self.cores_per_chip != chip.cores_per_chip}

        def source(key, from_slice=False):
            if key in self.sources:
                return str(self.sources[key])
            if from_slice:
                return "set for this slice; no source given"
            return str(chip.sources.get(key, f"chip {chip.name} in chips.yaml; no source given"))

        sources = {k: str(v) for k, v in self.sources.items()}
        for key in ("cores_per_chip", "link_GBps", "hop_latency_us", "onchip_GBps"):
            sources[key] = source(key, own[key])
        for key in ("peak_bf16_TFLOPs", "hbm_GiB", "hbm_GBps"):
            sources[key] = source(key)
        if chip.peak_int8_ops is not None:
            sources["peak_int8_TOPs"] = source("peak_int8_TOPs")
        return {
            "name": self.name, "description": self.description, "kind": self.kind,
            "shape": list(self.dims), "dims": self.shape_str, "wraparound": list(self.wrap),
            "chips": self.num_chips, "cores_per_chip": self.cores_per_chip, "cores": self.num_cores,
            "replicas": self.num_replicas, "directed_links": self.num_links,
            "chip": {"name": chip.name, "peak_bf16_TFLOPs": chip.peak_flops / 1e12,
                     "peak_int8_TOPs": None if chip.peak_int8_ops is None else chip.peak_int8_ops / 1e12,
                     "hbm_GiB": chip.hbm_bytes / GiB, "hbm_GBps": chip.hbm_Bps / GB},
            "link_GBps": link_GBps, "hop_latency_us": self.hop_latency_s / US,
            "onchip_GBps": self.onchip_Bps / GB,
            "sources": sources,
        }

    def __repr__(self):
        return f"<Topology {self.name}: {self.shape_str} {self.kind}, {self.cores_per_chip} cores/chip>"
