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

One concept in ~560 lines: the slice's static structure. Loading (chips.yaml and slice
files, with their citations), numbering, links, rings and routes are the four views
of one grid that every other module reads; none of them runs anything.
"""

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
import math
import os
import re

import numpy as np

from .config import Section, is_file, load_yaml
from .errors import ConfigError, UnknownNameError
from .keys import Key, KeyTable
from .limits import MAX_CHIPS, MAX_REPLICAS, check_limit
from .shipped import env_dirs, note_override, shipped_dir
from .units import GB, GiB, US

__all__ = [
    "Chip", "Topology", "load_topology", "known_topologies", "topology_dirs",
    "load_chips", "parse_inline", "CHIP_KEYS", "CHIPS_FILE", "TOPOLOGY_KEYS",
    "parse_cables", "split_cables", "split_slow_links", "cable_names", "with_link_faults",
]

TOPOLOGY_PATH_ENV = "WUS_SIM_TOPOLOGY_PATH"
"""Extra directories (``os.pathsep``-separated) of topology YAML and ``chips.yaml`` files; they add
to the shipped ones, and a file or chip of a shipped name overrides it (with a note on stderr)."""


@dataclass(frozen=True)
class Chip:
    """One accelerator chip's datasheet figures, in SI units."""

    name: str
    cores_per_chip: int
    peak_flops: float
    """Matrix-unit peak (bf16) of the whole chip, FLOP/s."""
    hbm_bytes: float
    """HBM capacity of the whole chip, bytes (shared evenly by its cores)."""
    hbm_Bps: float
    """HBM bandwidth of the whole chip, bytes/s (its cores share it)."""
    link_Bps: float
    """Default ICI bandwidth of one link, one direction, bytes/s."""
    hop_latency_s: float
    """Default per-hop ICI latency, seconds."""
    onchip_Bps: float
    """Core-to-core bandwidth inside the chip, one direction, bytes/s."""
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    """Where each figure came from (key -> citation), for reports."""


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
        return int(np.prod(self.dims))

    @property
    def num_cores(self):
        return self.num_chips * self.cores_per_chip

    @property
    def num_replicas(self):
        """Replicas of data parallelism: one per core."""
        return self.num_cores

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
        return {
            "name": self.name, "description": self.description, "kind": self.kind,
            "shape": list(self.dims), "dims": self.shape_str, "wraparound": list(self.wrap),
            "chips": self.num_chips, "cores_per_chip": self.cores_per_chip, "cores": self.num_cores,
            "replicas": self.num_replicas, "directed_links": self.num_links,
            "chip": {"name": chip.name, "peak_bf16_TFLOPs": chip.peak_flops / 1e12, "hbm_GiB": chip.hbm_bytes / GiB,
                     "hbm_GBps": chip.hbm_Bps / GB},
            "link_GBps": link_GBps, "hop_latency_us": self.hop_latency_s / US,
            "onchip_GBps": self.onchip_Bps / GB,
            "sources": sources,
        }

    def __repr__(self):
        return f"<Topology {self.name}: {self.shape_str} {self.kind}, {self.cores_per_chip} cores/chip>"


# ====================================================================== file formats
_SOURCES_SCHEMA = {"type": "object", "additionalProperties": {"type": "string"}}

CHIP_KEYS = KeyTable("chip", [
    Key("description", "string", "One line on the chip.", default=""),
    Key("cores_per_chip", "integer", "TensorCores per chip; one replica runs on each unless a topology or "
        "run says otherwise.", required=True, minimum=1),
    Key("peak_bf16_TFLOPs", "number", "Matrix-unit peak of the chip in bf16 (10^12 FLOP/s).", unit="TFLOP/s",
        required=True, positive=True),
    Key("hbm_GiB", "number", "HBM capacity of the chip (2^30 B), split evenly over its cores.", unit="GiB",
        required=True, positive=True),
    Key("hbm_GBps", "number", "HBM bandwidth of the chip (10^9 B/s), split evenly over its cores.", unit="GB/s",
        required=True, positive=True),
    Key("link_GBps", "number", "ICI bandwidth per link and direction (10^9 B/s).", unit="GB/s", required=True,
        positive=True),
    Key("hop_latency_us", "number", "Latency of one ICI hop.", unit="us", required=True, minimum=0),
    Key("onchip_GBps", "number", "Core-to-core bandwidth inside a chip (10^9 B/s).", unit="GB/s",
        required=True, positive=True),
    Key("sources", "mapping", "Citation per figure: figure key -> where the value comes from.",
        schema=_SOURCES_SCHEMA),
], meaning="One chip model's datasheet figures; a topology file names it with `chip`.")
"""Keys of one chip of ``chips.yaml`` (read by :func:`load_chips`)."""

CHIPS_FILE = KeyTable("chips file", [], extra=CHIP_KEYS.json_schema(),
                      meaning="chips.yaml: chip name -> the chip's figures (every key a chip name). User "
                              "chips.yaml files on WUS_SIM_TOPOLOGY_PATH add chips; a chip of the same name "
                              "replaces the shipped one (and a note says so).")
"""The chips file: a mapping of chip names to :data:`CHIP_KEYS` mappings."""

_PER_AXIS = "one per axis, listed in chips_per_axis order"

TOPOLOGY_KEYS = KeyTable("topology file", [
    Key("name", "string", "Name of the slice (results' `topology` column).", default_text="the file's stem"),
    Key("description", "string", "One line on the slice.", default=""),
    Key("chip", "string", "Chip model: a chip name of chips.yaml (shipped: tpu-v2, tpu-v3, tpu-v4, tpu-v5e, "
        "generic; user chips.yaml files add more).", required=True),
    Key("chips_per_axis", "list", "Chips along each torus axis, e.g. [32, 32] or [8, 8, 8].", required=True,
        rule="a list of 1 to 3 whole numbers >= 1",
        schema={"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": 3}),
    Key("wraparound", "boolean or list", "Wraparound links per axis: true = a torus ring, false = a mesh line.",
        required=True, rule=f"true/false (every axis) or a list of them, {_PER_AXIS}",
        schema={"oneOf": [{"type": "boolean"},
                          {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}]}),
    Key("cores_per_chip", "integer", "Replicas per chip on this slice (e.g. 1 for TPU v4 megacore).",
        minimum=1, default_text="the chip's"),
    Key("link_GBps", "number or list", "ICI bandwidth per link and direction (10^9 B/s).", unit="GB/s",
        default_text="the chip's", rule=f"a number > 0, or a list of them, {_PER_AXIS}",
        schema={"oneOf": [{"type": "number", "exclusiveMinimum": 0},
                          {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0},
                           "minItems": 1, "maxItems": 3}]}),
    Key("hop_latency_us", "number", "Latency of one ICI hop.", unit="us", minimum=0, default_text="the chip's"),
    Key("onchip_GBps", "number", "Core-to-core bandwidth inside a chip (10^9 B/s).", unit="GB/s", positive=True,
        default_text="the chip's"),
    Key("sources", "mapping", "Citation per figure or fact (shape, wraparound, link_GBps, ...).",
        schema=_SOURCES_SCHEMA),
    Key("multislice", "mapping", "Several copies of this slice joined by the data-center network "
        "(read by wus_sim.multislice; `--slices`, `--dcn-GBps`, `--dcn-latency-us` override it).",
        table=KeyTable("multislice section", [
            Key("slices", "integer", "Number of identical slices.", required=True, minimum=1),
            Key("dcn_GBps", "number", "Data-center network bandwidth per chip (10^9 B/s).", unit="GB/s",
                positive=True, default_text="the chip's DCN figure"),
            Key("dcn_latency_us", "number", "Latency of one data-center network exchange.", unit="us",
                minimum=0, default_text="the chip's DCN figure"),
        ])),
], meaning="One TPU slice: its chip, shape and wraparound, and any figure that differs from the chip's.")
"""Keys of a topology file (read by :func:`load_topology`)."""


# ====================================================================== loading
def topology_dirs():
    """Directories searched for ``NAME.yaml``, first match wins: ``WUS_SIM_TOPOLOGY_PATH``'s, then the shipped one."""
    return env_dirs(TOPOLOGY_PATH_ENV) + [shipped_dir("topologies")]


def known_topologies():
    """Names of the topology files found (file stems), sorted."""
    names = set()
    for d in topology_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.yaml") if p.stem != "chips")
    return sorted(names)


def load_chips(path=None):
    """Chip specs keyed by name: the shipped ``chips.yaml`` with every ``chips.yaml`` on
    ``WUS_SIM_TOPOLOGY_PATH`` laid over it (an earlier directory wins), or only the file *path*."""
    if path:
        return _chips_from_file(Path(path))
    dirs = topology_dirs()
    chips = {}
    for d in reversed(dirs):  # lowest priority first, so later (higher) entries replace
        p = d / "chips.yaml"
        if is_file(p):
            for name, chip in _chips_from_file(p).items():
                if name in chips and d != dirs[-1]:
                    note_override("chip", name, p)
                chips[name] = chip
    return chips


def _chips_from_file(path):
    doc = Section(load_yaml(path), file=path)
    chips = {}
    for name in doc.keys():
        sec = doc.section(name)
        CHIP_KEYS.check(sec)
        read = lambda key: CHIP_KEYS.read(sec, key)
        chips[name] = Chip(
            name=name,
            cores_per_chip=read("cores_per_chip"),
            peak_flops=read("peak_bf16_TFLOPs") * 1e12,
            hbm_bytes=read("hbm_GiB") * GiB,
            hbm_Bps=read("hbm_GBps") * GB,
            link_Bps=read("link_GBps") * GB,
            hop_latency_s=read("hop_latency_us") * US,
            onchip_Bps=read("onchip_GBps") * GB,
            sources=_sources(sec),
        )
    return chips


def _find_file(stem):
    if stem == "chips":  # the chip file shares the folder but is not a topology
        raise UnknownNameError("topology", stem, known_topologies())
    dirs = topology_dirs()
    for d in dirs:
        p = d / f"{stem}.yaml"
        if is_file(p):
            if d != dirs[-1] and is_file(dirs[-1] / p.name):
                note_override("topology", stem, p)
            return p
    raise UnknownNameError("topology", stem, known_topologies())


_INLINE_RE = re.compile(r"^(torus|mesh):([0-9]{1,30}(?:x[0-9]{1,30}){0,2})$")


def parse_inline(spec, *, link_GBps=None, hop_latency_us=None):
    """``torus:32x32``, ``mesh:8x8``, ``torus:4x4x4``: 1 core per chip, the ``generic`` chip's
    figures unless *link_GBps* / *hop_latency_us* are given (defaults 100 GB/s, 1 us)."""
    m = _INLINE_RE.match(spec)
    if not m:
        return None
    dims = tuple(int(d) for d in m.group(2).split("x"))
    chip = load_chips()["generic"]
    return Topology(
        name=spec, chip=chip, dims=dims, wrap=(m.group(1) == "torus",) * len(dims),
        axis_link_Bps=(link_GBps if link_GBps is not None else chip.link_Bps / GB) * GB,
        hop_latency_s=(hop_latency_us if hop_latency_us is not None else chip.hop_latency_s / US) * US,
        cores_per_chip=1, description=f"inline {spec}",
    )


# ============================================================ failed and slow links
_CABLE_RE = re.compile(r"^([0-9]{1,12})([+-])([xyz])$")

MAX_RANDOM_CABLES = 1_000_000
"""Largest K of ``failed_links: K`` / ``slow_links: K:FACTOR`` (a slice has fewer cables anyway)."""


def cable_names(topology, link_ids):
    """Names (``12+x``) of the cables of *link_ids*, one per cable, by ``+`` link id."""
    plus = sorted({int(l) if topology.link_direction[l] > 0 else topology.reverse_link(l) for l in link_ids})
    return [f"{int(topology.link_src[l])}+{'xyz'[int(topology.link_axis[l])]}" for l in plus]


def split_cables(text, *, key_path="failed_links"):
    """``[(chip, direction, axis), ...]`` of a cable list (comma-separated ``CHIP+AXIS`` or
    ``CHIP-AXIS``), the spelling only (no slice needed). ConfigError naming *key_path*."""
    out = []
    for item in str(text).split(","):
        m = _CABLE_RE.match(item.strip())
        if not m:
            raise ConfigError("must be comma-separated cables CHIP+AXIS or CHIP-AXIS (e.g. 12+x,40-y; "
                              "chip ids row-major, axis 0 fastest), or a count K", key_path=key_path,
                              value=item.strip())
        out.append((int(m.group(1)), 1 if m.group(2) == "+" else -1, "xyz".index(m.group(3))))
    return out


def parse_cables(topology, text, *, key_path="failed_links"):
    """Link ids (``+`` direction) of the cables *text* names: comma-separated ``CHIP+AXIS`` or
    ``CHIP-AXIS`` (``12+x``: the cable from chip 12 to its ``+x`` neighbour; ``13-x`` the one
    to its ``-x`` neighbour). ConfigError naming *key_path* on anything else."""
    out = []
    for chip, direction, axis in split_cables(text, key_path=key_path):
        item = f"{chip}{'+' if direction > 0 else '-'}{'xyz'[axis]}"
        if chip >= topology.num_chips or axis >= topology.ndim:
            raise ConfigError(f"names no chip and axis of this {topology.shape_str} slice (chips 0.."
                              f"{topology.num_chips - 1}, axes {'xyz'[:topology.ndim]})", key_path=key_path,
                              value=item)
        link = int(topology.link_id(chip, axis, direction))
        if not topology.link_exists[link]:
            raise ConfigError("names no cable: a mesh edge has no link that way", key_path=key_path, value=item)
        out.append(link if direction > 0 else topology.reverse_link(link))
    return out


def _cable_spec(topology, spec, rng, exclude, key_path):
    """Cables of a spec: an int K (K distinct cables drawn by *rng* among those not in
    *exclude*) or a LIST string."""
    if isinstance(spec, str) and spec.strip().isdigit():
        spec = int(spec.strip())
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        pool = np.setdiff1d(topology.cables, np.asarray(sorted(exclude), dtype=np.int64))
        if not 0 <= spec <= len(pool):
            raise ConfigError(f"must be a count from 0 to {len(pool)} (the cables of this {topology.shape_str} "
                              "slice that are left to choose from)", key_path=key_path, value=spec)
        return [int(l) for l in np.sort(rng.choice(pool, size=int(spec), replace=False))]
    if not isinstance(spec, str):
        raise ConfigError("must be a count K or comma-separated cables such as 12+x,40-y", key_path=key_path,
                          value=spec)
    return parse_cables(topology, spec, key_path=key_path)


def split_slow_links(text):
    """``(cables, factor)`` of a ``LIST:FACTOR`` or ``K:FACTOR`` string (ConfigError otherwise)."""
    head, sep, tail = str(text).rpartition(":")
    try:
        factor = float(tail)
    except ValueError:
        factor = math.nan
    if not sep or not head.strip() or not 1 <= factor < math.inf:
        raise ConfigError("must be LIST:FACTOR or K:FACTOR (e.g. 12+x,40-y:4 or 3:2), FACTOR >= 1 "
                          "dividing the cables' bandwidth", key_path="slow_links", value=text)
    return head.strip(), factor


def with_link_faults(topology, failed_links=None, slow_links=None, seed=None):
    """*topology* with failed and slowed cables (``None``: none).

    *failed_links*: a count K (K distinct cables chosen at random) or a LIST string
    (``"12+x,40-y"``, see :func:`parse_cables`). *slow_links*: ``"LIST:FACTOR"`` or
    ``"K:FACTOR"``: both directions of those cables run at their bandwidth / FACTOR
    (FACTOR >= 1). Random cables come from ``numpy.random.default_rng(seed)`` (*seed*
    ``None`` = 0): the failed ones first, then the slow ones among the cables left.
    """
    if failed_links is None and slow_links is None:
        return topology
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ConfigError("must be a whole number >= 0", key_path="seed", value=seed)
    rng = np.random.default_rng(0 if seed is None else int(seed))
    failed = []
    if failed_links is not None:
        failed = _cable_spec(topology, failed_links, rng, (), "failed_links")
        if failed:
            topology = topology.with_failed_links(failed)
    if slow_links is not None:
        head, factor = split_slow_links(slow_links)
        slow = _cable_spec(topology, head, rng, failed, "slow_links")
        both = [l for c in slow for l in (c, topology.reverse_link(c)) if l not in topology.failed_links]
        bw = topology.link_Bps
        for link in both:  # each at its own bandwidth / factor (axes may differ)
            topology = topology.with_link_bandwidth(link, float(bw[link]) / factor)
    return topology


def load_topology(spec, *, link_GBps=None, hop_latency_us=None, wraparound=None,
                  cores_per_chip=None, failed_links=None, slow_links=None, seed=None):
    """A :class:`Topology` from a name (file stem), a path to YAML, or an inline spec.

    The keyword overrides replace the file's values (what-if sweeps use them):
    *link_GBps* (scalar or per axis), *hop_latency_us*, *wraparound* (bool or per
    axis), *cores_per_chip*; then *failed_links*, *slow_links* and *seed* as in
    :func:`with_link_faults`.
    """
    if isinstance(spec, Topology):
        topo = spec
    else:
        spec = str(spec)
        topo = parse_inline(spec, link_GBps=link_GBps, hop_latency_us=hop_latency_us)
        if topo is None:
            if spec.startswith(("torus:", "mesh:")):
                raise ConfigError("must look like torus:32x32, mesh:8x8 or torus:4x4x4 (1 to 3 axes)",
                                  key_path="topology", value=spec)
            path = Path(spec)
            if spec.endswith((".yaml", ".yml")) or os.sep in spec:
                if not is_file(path):
                    raise ConfigError("file not found", file=path)
            else:
                path = _find_file(spec)
            topo = _topology_from_file(path)
    changes = {}
    if link_GBps is not None:
        changes["axis_link_Bps"] = tuple(float(v) * GB for v in _per_axis(link_GBps, topo, "link_GBps"))
    if hop_latency_us is not None:
        changes["hop_latency_s"] = float(hop_latency_us) * US
    if wraparound is not None:
        changes["wrap"] = tuple(bool(v) for v in _per_axis(wraparound, topo, "wraparound"))
    if cores_per_chip is not None:
        changes["cores_per_chip"] = int(cores_per_chip)
    topo = replace(topo, **changes) if changes else topo
    return with_link_faults(topo, failed_links, slow_links, seed)


def _per_axis(value, topo, key):
    """An override given for every axis at once (a scalar) or one per axis: a list of exactly
    ``topo.ndim`` values (a shorter list is not spread over the axes; that hides a typo)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) != topo.ndim:
            raise ConfigError(f"must be one value for every axis or a list of {topo.ndim} (one per axis of "
                              f"{topo.name}, {'x'.join(map(str, topo.dims))})", key_path=key, value=list(value))
        return list(value)
    return [value] * topo.ndim


def _topology_from_file(path):
    doc = Section(load_yaml(path), file=path)
    TOPOLOGY_KEYS.check(doc)
    read = lambda key: TOPOLOGY_KEYS.read(doc, key) if key in doc else None
    chips = load_chips()
    chip_name = doc.string("chip", choices=sorted(chips))  # TOPOLOGY_KEYS["chip"]: the known chips
    chip = chips[chip_name]
    dims = doc.list("chips_per_axis")
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise doc.error("chips_per_axis", "must be a list of 1 to 3 whole numbers >= 1", dims)
    wrap = doc.get("wraparound")
    if isinstance(wrap, bool):
        wrap = [wrap] * len(dims)
    if not isinstance(wrap, list) or len(wrap) != len(dims) or any(not isinstance(w, bool) for w in wrap):
        raise doc.error("wraparound", f"must be true/false or a list of {len(dims)} of them", wrap)
    written = doc.get("link_GBps")
    if written is not None:
        # the message quotes the value as written: a scalar, not the per-axis list made of it
        link = written if isinstance(written, list) else [written] * len(dims)
        if len(link) != len(dims) or any(isinstance(b, bool) or not isinstance(b, (int, float))
                                         or not 0 < b < math.inf for b in link):
            raise doc.error("link_GBps", f"must be a finite number > 0 or a list of {len(dims)} of them", written)
        link = tuple(b * GB for b in link)
    else:
        link = None
    try:
        return Topology(
            name=doc.string("name", Path(path).stem),
            chip=chip,
            dims=tuple(dims),
            wrap=tuple(wrap),
            axis_link_Bps=link,
            hop_latency_s=read("hop_latency_us") * US if "hop_latency_us" in doc else None,
            onchip_Bps=read("onchip_GBps") * GB if "onchip_GBps" in doc else None,
            cores_per_chip=read("cores_per_chip"),
            description=TOPOLOGY_KEYS.read(doc, "description"),
            sources=_sources(doc),
        )
    except ConfigError as exc:
        if exc.file:
            raise
        # The slice's own checks (size limits) speak of the slice: say which file and key.
        key = {"topology": "chips_per_axis", "dims": "chips_per_axis"}.get(exc.key_path, exc.key_path)
        raise doc.error(key, exc.rule, exc.value) from None


def _sources(sec):
    """The ``sources`` mapping (topic -> citation) of a spec; any other shape is an error."""
    value = sec.get("sources", {}) or {}
    if not isinstance(value, dict):
        raise sec.error("sources", "must be a mapping of topic to citation", value)
    return dict(value)
