"""Collective algorithms as static schedules: passes of rings, then messages.

A collective is planned (:func:`plan_collective`) as a list of *passes*; a
pass is one ring operation (or one halving-doubling exchange) run by every
ring of a level at once. The plan does not depend on the size, so it is
cached and shared by the SimPy engine, the closed form and the static link
loads. :func:`compile_messages` turns a plan and a size into the flat message
table the SimPy engine runs.

Size convention: ``nbytes = S`` is the full, unsharded buffer per replica for
all three operations (reduce-scatter: ``S`` in, ``S/N`` out; all-gather:
``S/N`` in, ``S`` out; all-reduce: ``S`` in and out). Messages carry exact
float byte counts: ``S/n`` and ``S/(n K)`` need not be whole numbers (a real
implementation pads; padding is below the model's resolution).

Schedule (shared with the fast engine):

* Levels: with ``c > 1`` cores per chip, an on-chip ring reduce-scatter of
  ``S`` among the cores first (``core`` level), then the chip-level collective
  on ``S`` per chip (``chip`` level; the cores' portions share the chip's
  links), then an on-chip all-gather. An explicit replica list is one ``flat``
  level over replicas (no hierarchy: ring in the given order, routed edges).
* A ring pass over ``n`` members and a buffer ``B`` per member sends ``n-1``
  steps of ``B/n`` (reduce-scatter, all-gather) or ``2(n-1)`` (all-reduce: the
  all-gather steps continue the ring piece by piece right after the
  reduce-scatter steps). Member ``i`` sends to ``i+1``; at reduce-scatter step
  ``k`` it sends chunk ``(i-k-1) mod n`` and ends owning chunk ``i``; at
  all-gather step ``k`` it sends chunk ``(i-k) mod n``.
* Timing inside a pass (member ``i``, step ``k``, piece ``c``):
  ``ready(i,0,c) = start(i)``; ``ready(i,k+1,c) = max(arrival(i,k,c),
  ready(i,k,c)) + reduce_k`` where ``reduce_k = piece / reduce_Bps`` on
  reduce-scatter steps (0 otherwise). A member finishes a pass at
  ``max_c ready(i,N,c)``; it starts the next pass when it has finished the
  previous one in every direction (per-member barrier, no global barrier).
* ``bidirectional``: each pass runs two rings, ``+`` and reverse, each on half
  of the pass's buffer, so both directions of every link carry data. A line
  ring on a mesh (unwrapped) axis is the exception: its folded ring already
  uses both directions of every link of the line and its reverse would use the
  same links, so that pass keeps one ring with the whole buffer.
* ``2d``: one pass per active axis for reduce-scatter, fastest line first (most
  bytes per second per member, see :func:`_line_Bps`; ties, e.g. every axis of
  a uniform torus or mesh, in axis order), reverse order for all-gather;
  all-reduce = reduce-scatter passes, the last axis's ring all-reduce,
  all-gather passes. ``2d-split``: two halves of the buffer, independent until
  the end, one in that order, the other in that order rotated by one (``Y, X``;
  3-D ``Y, Z, X``); with fewer than two active axes it is ``2d``.
* ``halving-doubling`` (Rabenseifner): ``log2 P`` steps; reduce-scatter step
  ``j`` exchanges ``B/2^(j+1)`` with partner ``i XOR P/2^(j+1)`` (recursive
  halving), all-gather step ``j`` exchanges ``B 2^j / P`` with ``i XOR 2^j``
  (recursive doubling), all-reduce = both, piece by piece. Messages are
  routed dimension-order. Pieces are interleaved slices of every chunk, so
  piece ``c`` of a step only needs piece ``c`` of the previous one.
* Tie-break rank of a message: its sender replica (a chip's first core for
  chip-level messages); sequence: its index in the table, which is ordered by
  (half, pass, step, piece) for every sender.
"""

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..errors import ConfigError, UnknownNameError
from ..network import num_link_keys, replica_route
from .embedding import (RingEmbedding, active_axes, axis_rings, onchip_rings, routes, sequence_ring,
                        slice_ring)

__all__ = [
    "OPS", "ALGORITHMS", "Group", "resolve_group", "Pass", "Plan", "plan_collective", "cached_plan",
    "clear_plan_cache", "group_key", "topology_key",
    "Schedule", "compile_messages", "passes_by_tag", "link_loads", "shared_link_streams", "replay_data",
    "hd_routes",
]

OPS = ("reduce-scatter", "all-gather", "all-reduce")
"""Collective operations."""
ALGORITHMS = ("ring", "bidir-ring", "2d", "2d-split", "halving-doubling")
"""Collective algorithms."""

_KIND = {"reduce-scatter": "rs", "all-gather": "ag", "all-reduce": "ar"}
_AXIS_NAMES = {"x": 0, "y": 1, "z": 2}


# ===================================================================== groups
@dataclass(frozen=True)
class Group:
    """Which replicas take part: all of them, the lines along one axis, or an explicit list."""

    kind: str
    """``"all"``, ``"axis"`` or ``"list"``."""
    axis: int = None
    """The axis for ``kind == "axis"``."""
    replicas: tuple = None
    """Replica ids in ring order for ``kind == "list"``."""
    size: int = 1
    """Replicas in one group (for ``"axis"``: in one line)."""


def resolve_group(topology, group):
    """A :class:`Group` from ``None``/``"all"``, ``"x"``/``"y"``/``"z"``/0/1/2, or a list of replica ids."""
    c = topology.cores_per_chip
    if group is None or (isinstance(group, str) and group.lower() == "all"):
        return Group("all", size=topology.num_replicas)
    if isinstance(group, str) or (isinstance(group, (int, np.integer)) and not isinstance(group, bool)):
        axis = _AXIS_NAMES.get(group.lower()) if isinstance(group, str) else int(group)
        if axis is None or not 0 <= axis < topology.ndim:
            names = ", ".join(["all"] + list("xyz"[: topology.ndim]))
            raise ConfigError(f"must be one of {names}, an axis number < {topology.ndim}, "
                              "or a list of replica ids", key_path="group", value=group)
        return Group("axis", axis=axis, size=topology.dims[axis] * c)
    try:
        replicas = [int(r) for r in group]
        bad = any(isinstance(r, bool) or int(r) != r for r in group)
    except (TypeError, ValueError):
        raise ConfigError("must be all, x, y, z or a list of replica ids", key_path="group",
                          value=group) from None
    if bad or not replicas:
        raise ConfigError("must be a non-empty list of whole replica ids", key_path="group", value=group)
    if len(set(replicas)) != len(replicas):
        raise ConfigError("lists a replica twice", key_path="group", value=replicas)
    if min(replicas) < 0 or max(replicas) >= topology.num_replicas:
        raise ConfigError(f"must hold replica ids 0..{topology.num_replicas - 1}", key_path="group",
                          value=replicas)
    return Group("list", replicas=tuple(replicas), size=len(replicas))


# ====================================================================== plans
@dataclass(frozen=True, eq=False)
class Pass:
    """One ring operation (or halving-doubling exchange) run by every ring of a level at once."""

    level: str
    """``"core"`` (on-chip rings, replica members), ``"chip"`` (chip members) or ``"flat"`` (replicas)."""
    kind: str
    """``"rs"``, ``"ag"`` or ``"ar"``."""
    pattern: str
    """``"ring"`` or ``"hd"`` (halving-doubling)."""
    rings: tuple
    """One :class:`RingEmbedding` per direction (``hd``: one, its members are the groups in rank order)."""
    fraction: float
    """Buffer per member of one direction's ring, as a fraction of ``S``."""
    half: int = 0
    """Index of the buffer half this pass belongs to (2d-split), 0 otherwise."""
    data_level: int = 0
    """Which split of the half's buffer this pass performs (its axis position in RS order)."""
    stream: object = None
    """Passes with equal ``stream`` reuse the same ring edges one after the other (RS, then AG)."""
    axis: int = None
    """Topology axis of a line-ring pass (``None`` otherwise)."""

    @property
    def size(self):
        """Members per ring (``n``)."""
        return self.rings[0].size

    @property
    def steps(self):
        """Algorithm steps ``N`` of this pass."""
        n = self.size
        if n <= 1:
            return 0
        per = int(np.log2(n)) if self.pattern == "hd" else n - 1
        return 2 * per if self.kind == "ar" else per

    @property
    def rs_steps(self):
        """Steps at whose arrival the receiver sums (reduce-scatter steps)."""
        if self.kind == "ag":
            return 0
        return self.steps // 2 if self.kind == "ar" else self.steps

    def step_fraction(self, k):
        """Bytes of one step-*k* message as a fraction of ``S`` (before splitting into pieces)."""
        n = self.size
        if self.pattern == "ring":
            return self.fraction / n
        half = self.steps // 2 if self.kind == "ar" else self.steps
        if self.kind == "rs" or (self.kind == "ar" and k < half):
            return self.fraction / 2 ** (k + 1)
        j = k - half if self.kind == "ar" else k
        return self.fraction * 2 ** j / n

    def step_partner_distance(self, k):
        """Halving-doubling: XOR distance of the step-*k* partner."""
        n = self.size
        half = self.steps // 2 if self.kind == "ar" else self.steps
        if self.kind == "rs" or (self.kind == "ar" and k < half):
            return n >> (k + 1)
        return 1 << (k - half if self.kind == "ar" else k)


@dataclass(frozen=True, eq=False)
class Plan:
    """The passes of one collective, independent of its size."""

    topology: object
    op: str
    algorithm: str
    group: Group
    bidirectional: bool
    pre: tuple = ()
    """On-chip passes before the chip level (on-chip reduce-scatter)."""
    halves: tuple = ()
    """Per buffer half (two for 2d-split, else one), the chip- or flat-level passes in order."""
    post: tuple = ()
    """On-chip passes after the chip level (on-chip all-gather)."""
    level_sizes: tuple = ()
    """Per half, per data level: ``(directions, ring size)`` (the leaf layout of the data model)."""
    split_time_separated: bool = False
    """2d-split on a square uniform torus: the halves use each axis one after the other."""

    @property
    def passes(self):
        """Every pass, in (pre, half 0, half 1, post) order."""
        return list(self.pre) + [p for half in self.halves for p in half] + list(self.post)

    @property
    def group_size(self):
        return self.group.size


def _validate(topology, op, algorithm, bidirectional):
    if op not in OPS:
        raise UnknownNameError("collective op", op, OPS)
    if algorithm not in ALGORITHMS:
        raise UnknownNameError("algorithm", algorithm, ALGORITHMS)
    if algorithm == "halving-doubling" and bidirectional:
        raise ConfigError("applies to ring algorithms, not halving-doubling", key_path="bidirectional",
                          value=True)


def plan_collective(topology, op, algorithm, *, group=None, bidirectional=False):
    """The :class:`Plan` of a collective (raises ConfigError/UnknownNameError on bad input)."""
    _validate(topology, op, algorithm, bidirectional)
    g = resolve_group(topology, group)
    kind = _KIND[op]
    bidir = bool(bidirectional) or algorithm == "bidir-ring"
    directions = (False, True) if bidir else (False,)
    c = topology.cores_per_chip

    if g.kind == "list":
        if algorithm in ("2d", "2d-split"):
            raise ConfigError(f"{algorithm} needs group all or an axis (x, y, z); an explicit replica list "
                              "has no axes", key_path="group", value=list(g.replicas))
        if algorithm == "halving-doubling":
            _check_power_of_two(g.size, "replicas")
            members = np.array([g.replicas], dtype=np.int64)
            hd = RingEmbedding(members, np.full((1, g.size, 1), -1, dtype=np.int64),
                               np.zeros((1, g.size), dtype=np.int64))
            passes = [Pass("flat", kind, "hd", (hd,), 1.0, stream=("flat", "hd"))]
            sizes = ((1, g.size),)
        else:
            rings = tuple(sequence_ring(topology, g.replicas, reverse=rev) for rev in directions)
            passes = [Pass("flat", kind, "ring", rings, 1.0 / len(directions), stream=("flat", "ring"))]
            sizes = ((len(directions), g.size),)
        passes = [p for p in passes if p.size > 1]
        return Plan(topology, op, algorithm, g, bidir, halves=(tuple(passes),), level_sizes=(sizes,))

    axes = [g.axis] if g.kind == "axis" else active_axes(topology)
    axes = [a for a in axes if topology.dims[a] > 1]
    pre = post = ()
    if c > 1:
        ring = onchip_rings(topology)  # every chip is on one of an axis group's lines too
        if kind != "ag":
            pre = (Pass("core", "rs", "ring", (ring,), 1.0, stream=("core",)),)
        if kind != "rs":
            post = (Pass("core", "ag", "ring", (ring,), 1.0, stream=("core",)),)

    if algorithm == "halving-doubling":
        if g.kind == "axis":
            members = topology.axis_rings(g.axis) if axes else np.zeros((topology.num_chips, 1), np.int64)
        else:
            members = np.arange(topology.num_chips)[None, :]
        _check_power_of_two(members.shape[1], "chips", c)
        hd = RingEmbedding(members, np.full(members.shape + (1,), -1, dtype=np.int64),
                           np.zeros(members.shape, dtype=np.int64))
        chip = [Pass("chip", kind, "hd", (hd,), 1.0, stream=("chip", "hd"))] if members.shape[1] > 1 else []
        return Plan(topology, op, algorithm, g, False, pre=pre, halves=(tuple(chip),), post=post,
                    level_sizes=(((1, members.shape[1]),) if chip else (),))

    if algorithm in ("ring", "bidir-ring") and g.kind == "all" and len(axes) >= 2:
        rings = tuple(slice_ring(topology, reverse=rev) for rev in directions)
        n = rings[0].size
        chip = (Pass("chip", kind, "ring", rings, 1.0 / len(directions), stream=("chip", "slice")),)
        return Plan(topology, op, algorithm, g, bidir, pre=pre, halves=(chip,), post=post,
                    level_sizes=(((len(directions), n),),))

    # line rings: ring/bidir-ring on one axis, 2d, 2d-split
    axes = sorted(axes, key=lambda a: -_line_Bps(topology, a, directions, algorithm))
    orders = [axes]
    split_separated = False
    if algorithm == "2d-split" and len(axes) >= 2:
        orders = [axes, axes[1:] + axes[:1]]
        split_separated = (all(topology.wrap[a] for a in axes)
                           and len({topology.dims[a] for a in axes}) == 1
                           and len({topology.axis_link_Bps[a] for a in axes}) == 1
                           and not topology.link_Bps_override)
    halves, level_sizes = [], []
    for h, order in enumerate(orders):
        frac = 1.0 / len(orders)
        levels = []
        for a in order:
            dirs = _line_directions(topology, a, directions, algorithm)
            rings = tuple(axis_rings(topology, a, reverse=rev) for rev in dirs)
            # on the square uniform torus the halves use an axis one after the other: one stream
            stream = ("chip", a) if split_separated else ("chip", h, a)
            levels.append((a, rings, frac / len(dirs), stream))
            frac /= topology.dims[a]
        passes = []
        last = len(levels) - 1
        if kind == "rs":
            passes = [Pass("chip", "rs", "ring", r, f, h, i, s, a) for i, (a, r, f, s) in enumerate(levels)]
        elif kind == "ag":
            passes = [Pass("chip", "ag", "ring", r, f, h, i, s, a) for i, (a, r, f, s) in enumerate(levels)][::-1]
        else:
            passes = [Pass("chip", "rs", "ring", r, f, h, i, s, a) for i, (a, r, f, s) in enumerate(levels[:-1])]
            if levels:
                a, r, f, s = levels[-1]
                passes.append(Pass("chip", "ar", "ring", r, f, h, last, s, a))
            passes += [Pass("chip", "ag", "ring", r, f, h, i, s, a)
                       for i, (a, r, f, s) in enumerate(levels[:-1])][::-1]
        halves.append(tuple(passes))
        level_sizes.append(tuple((len(_line_directions(topology, a, directions, algorithm)), topology.dims[a]) for a in order))
    return Plan(topology, op, algorithm, g, bidir, pre=pre, halves=tuple(halves), post=post,
                level_sizes=tuple(level_sizes), split_time_separated=split_separated)


def _line_Bps(topology, axis, directions, algorithm):
    """Bytes per second one member's line ring moves through on *axis*, for ordering the
    2-D phases: link bandwidth times ring directions, halved on a folded mesh ring (its
    edges between evens or odds take two store-and-forward hops).

    Why fastest first: a reduce-scatter phase over ``d`` members costs ``(1 - 1/d) B / bw``
    on the buffer ``B`` it receives, and each phase shrinks the buffer by its ``d``. Swapping
    two adjacent phases ``a, b`` changes the cost by ``(1 - 1/d_a)(1 - 1/d_b)(1/bw_a -
    1/bw_b)`` (times the buffer), so the order is optimal exactly when ``bw`` falls along it
    (latency terms do not depend on the order). Equal bandwidths keep axis order, so a
    uniform torus or mesh keeps the textbook x, y, z."""
    d = topology.dims[axis]
    Bps = topology.axis_link_Bps[axis] * len(_line_directions(topology, axis, directions, algorithm))
    return Bps / 2 if (not topology.wrap[axis] and d >= 3) else Bps


def _line_directions(topology, axis, directions, algorithm):
    """The ring directions of a line-ring pass on *axis*: a mesh line's ring is folded
    (see :mod:`.embedding`) and already uses every directed link of the line once, and its
    reverse uses the same links, so a second direction there adds only contention; the
    line runs one direction whatever ``bidirectional`` says. ``bidir-ring`` names the two
    counter-rotating rings themselves, so it keeps both."""
    return directions if topology.wrap[axis] or algorithm == "bidir-ring" else directions[:1]


# ================================================================ plan cache
def group_key(group):
    """Hashable, normalized group (``None`` for the whole slice)."""
    if group is None or (isinstance(group, str) and group.lower() == "all"):
        return None
    if isinstance(group, str):
        return group.lower()
    if isinstance(group, (int, np.integer)) and not isinstance(group, bool):
        return int(group)
    try:
        return tuple(group)
    except TypeError:
        return group


def topology_key(t):
    """Hashable value of a topology: equal slices built separately share cache entries."""
    return (t.name, t.dims, t.wrap, t.axis_link_Bps, t.hop_latency_s, t.onchip_Bps, t.cores_per_chip,
            t.link_Bps_override, t.chip.hbm_Bps)


_TOPOLOGIES = {}


@lru_cache(maxsize=1024)
def _plan_by_key(tkey, op, algorithm, group, bidirectional):
    group = list(group) if isinstance(group, tuple) else group
    return plan_collective(_TOPOLOGIES[tkey], op, algorithm, group=group, bidirectional=bidirectional)


def cached_plan(topology, op, algorithm, *, group=None, bidirectional=False):
    """:func:`plan_collective`, memoized by the topology's value and the normalized group.

    The one plan cache of the package: the api, the fast engine and :func:`phase_times
    <wus_sim.collectives.analytic.phase_times>` share its plans, and with them the caches
    keyed by plan or embedding objects.
    """
    # names are checked before the cache, so that an unhashable one is still a user error
    _validate(topology, op, algorithm, False)
    key = topology_key(topology)
    _TOPOLOGIES.setdefault(key, topology)
    return _plan_by_key(key, op, algorithm, group_key(group), bool(bidirectional))


def clear_plan_cache():
    """Forget the memoized plans."""
    _plan_by_key.cache_clear()
    _TOPOLOGIES.clear()


def _check_power_of_two(n, what, cores=1):
    if n & (n - 1):
        extra = f" x {cores} cores" if cores > 1 else ""
        raise ConfigError(f"halving-doubling needs a power-of-two group; this one has {n} {what}{extra}",
                          key_path="algorithm", value="halving-doubling", show_value=False)


@lru_cache(maxsize=256)
def hd_routes(topology, p):
    """Halving-doubling pass *p*: per step, the ``(R, n)`` nested list of link-key tuples
    from member ``i`` to its partner (cached; routes depend only on the partner distance)."""
    e = p.rings[0]
    R, n = e.members.shape
    by_distance = {}
    out = []
    for k in range(p.steps):
        dist = p.step_partner_distance(k)
        if dist not in by_distance:
            partner = e.members[:, np.arange(n) ^ dist]
            if p.level == "flat":
                flat = [tuple(replica_route(topology, a, z)) for a, z in zip(e.members.ravel(), partner.ravel())]
            else:
                flat = routes(topology, e.members.ravel(), partner.ravel())
            by_distance[dist] = [flat[r * n:(r + 1) * n] for r in range(R)]
        out.append(by_distance[dist])
    return out


# =================================================================== messages
@dataclass(eq=False)
class Schedule:
    """A plan and a size turned into nodes: messages (with a path) and barriers (without).

    Node ``m`` is ready at ``max(deliveries of its deliver-deps, readiness of its
    ready-deps) + rho[m]``; a message is then sent over ``paths[path_id[m]]``; a
    barrier node is "delivered" as soon as it is ready. Node ids are in
    (half, pass, step, piece) order for every sender, so they serve as sequence numbers.
    """

    plan: Plan
    nbytes: float
    chunks: int
    num_nodes: int
    path_id: np.ndarray
    """Per node: index into :attr:`paths`, or -1 for a barrier node."""
    paths: list
    """Tuples of link keys."""
    msg_bytes: np.ndarray
    """Per node: bytes of the message (0 for barriers)."""
    rank: np.ndarray
    """Per node: sender replica (tie-break)."""
    rho: np.ndarray
    """Per node: reduction time added to its ready time, s."""
    deps: list = field(default_factory=list)
    """``(child, parent, kind)`` int arrays; kind 0: parent delivered, 1: parent ready."""
    meta: dict = field(default_factory=dict)
    """Per-message data-model fields (pass index, direction, ring, position, step, piece, dst position)."""

    @property
    def num_hops(self):
        """Message hops (the ``events`` both engines count)."""
        lengths = np.array([len(p) for p in self.paths] + [0])
        return int(lengths[self.path_id].sum())

    def dependency_arrays(self):
        """``(ndeps, ready_ptr, ready_children, deliver_ptr, deliver_children)`` as numpy arrays."""
        if self.deps:
            child = np.concatenate([d[0] for d in self.deps])
            parent = np.concatenate([d[1] for d in self.deps])
            kind = np.concatenate([d[2] for d in self.deps])
        else:
            child = parent = kind = np.zeros(0, dtype=np.int64)
        ndeps = np.bincount(child, minlength=self.num_nodes)
        out = [ndeps]
        for k in (1, 0):
            sel = kind == k
            p, ch = parent[sel], child[sel]
            order = np.argsort(p, kind="stable")
            ptr = np.concatenate([[0], np.cumsum(np.bincount(p, minlength=self.num_nodes))])
            out += [ptr, ch[order]]
        return tuple(out)


class _Builder:
    def __init__(self, plan, S, chunks, reduce_Bps):
        self.plan, self.S, self.K, self.reduce_Bps = plan, float(S), int(chunks), reduce_Bps
        self.n = 0
        self.path_id, self.msg_bytes, self.rank, self.rho = [], [], [], []
        self.paths = []
        self.deps = []
        self.meta = {k: [] for k in ("pass", "dir", "ring", "pos", "step", "piece", "dst")}

    def nodes(self, count, *, path_id=None, msg_bytes=0.0, rank=None, rho=0.0):
        start = self.n
        self.n += count
        self.path_id.append(np.full(count, -1, np.int64) if path_id is None else path_id)
        self.msg_bytes.append(np.broadcast_to(np.asarray(msg_bytes, float), (count,)))
        self.rank.append(np.zeros(count, np.int64) if rank is None else rank)
        self.rho.append(np.broadcast_to(np.asarray(rho, float), (count,)))
        return np.arange(start, start + count)

    def dep(self, child, parent, kind):
        child, parent = np.broadcast_arrays(np.asarray(child, np.int64), np.asarray(parent, np.int64))
        ok = parent >= 0
        self.deps.append((child[ok].ravel(), parent[ok].ravel(), np.full(int(ok.sum()), kind, np.int64)))

    def path(self, keys):
        """Index of a new path entry (tuples of link keys; -1 padding dropped)."""
        self.paths.append(tuple(int(k) for k in keys if k >= 0) if not isinstance(keys, tuple) else keys)
        return len(self.paths) - 1


# Pass tags: ``Schedule.meta["pass"]`` names the pass of the plan each message belongs to.
# ``plan.pre`` and ``plan.post`` hold at most one pass each (plan_collective builds them as
# 0- or 1-tuples: the on-chip reduce-scatter and all-gather), so one tag each is enough.
_PRE_TAG = 0
_POST_TAG = 999_999
_HALF_TAG_STRIDE = 1000  # a half has at most 2 * 3 - 1 = 5 passes (3-D all-reduce)


def _half_tag(h, i):
    """Tag of pass *i* of buffer half *h*."""
    return 1 + _HALF_TAG_STRIDE * h + i


def passes_by_tag(plan):
    """``{tag: Pass}``: the pass of *plan* each ``Schedule.meta["pass"]`` tag stands for."""
    assert len(plan.pre) <= 1 and len(plan.post) <= 1, "one tag each for the on-chip passes"
    tags = {_PRE_TAG: p for p in plan.pre}
    for h, half in enumerate(plan.halves):
        for i, p in enumerate(half):
            tags[_half_tag(h, i)] = p
    tags.update({_POST_TAG: p for p in plan.post})
    return tags


def compile_messages(plan, nbytes, *, chunks=1, reduce_Bps=None, track=False):
    """The :class:`Schedule` of *plan* for ``S = nbytes``; ``track`` keeps the data-model fields."""
    topo = plan.topology
    b = _Builder(plan, nbytes, chunks, reduce_Bps)
    c = topo.cores_per_chip
    gate_core = None  # per replica: node whose readiness starts the next core pass
    if plan.pre:
        done = _compile_pass(b, plan.pre[0], None, track, _PRE_TAG)
        gate_core = done
    # chip-level gates: every chip waits for all its cores
    chip_gate = None
    if gate_core is not None:
        chip_gate = np.full(topo.num_chips, -1, np.int64)
        ids = b.nodes(topo.num_chips)
        chip_gate[:] = ids
        b.dep(np.repeat(ids, c), gate_core[: topo.num_chips * c], 1)
    finals = []
    for h, passes in enumerate(plan.halves):
        gate = chip_gate
        for i, p in enumerate(passes):
            gate = _compile_pass(b, p, gate, track, _half_tag(h, i))
        finals.append(gate)
    if plan.post:
        # a core starts the on-chip all-gather when its chip finished every half
        ids = b.nodes(topo.num_chips)
        for f in finals:
            if f is not None:
                b.dep(ids, f, 1)
        core_gate = np.repeat(ids, c)
        _compile_pass(b, plan.post[0], core_gate, track, _POST_TAG)
    sched = Schedule(plan, float(nbytes), int(chunks), b.n,
                     np.concatenate(b.path_id) if b.path_id else np.zeros(0, np.int64), b.paths,
                     np.concatenate(b.msg_bytes) if b.msg_bytes else np.zeros(0),
                     np.concatenate(b.rank) if b.rank else np.zeros(0, np.int64),
                     np.concatenate(b.rho) if b.rho else np.zeros(0), b.deps)
    if track:
        sched.meta = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in b.meta.items()}
        sched.meta["node"] = np.flatnonzero(sched.path_id >= 0)
    return sched


def _compile_pass(b, p, gate, track, pass_tag):
    """Add the nodes of pass *p*; *gate* maps member id -> node whose readiness starts it.

    Returns the per-member "done" node ids (array indexed by member id, -1 if absent)."""
    topo = b.plan.topology
    c = topo.cores_per_chip
    K = b.K
    n = p.size
    N = p.steps
    D = len(p.rings)
    R = p.rings[0].num_rings
    member_space = topo.num_replicas if p.level in ("core", "flat") else topo.num_chips
    done = np.full(member_space, -1, np.int64)
    if N == 0:
        if gate is not None:
            done[:] = gate
        return done
    # message ids: base + ((((k*K + piece)*D + d)*R + r)*n + i)
    count = N * K * D * R * n
    members = np.stack([e.members for e in p.rings])  # (D, R, n)
    pos = np.arange(n)
    # destinations and paths per (d, r, i, k)
    if p.pattern == "ring":
        dst_pos = np.broadcast_to((pos + 1) % n, (N, n))
        pid = np.empty((D, R, n), np.int64)
        for d, e in enumerate(p.rings):
            for r in range(R):
                for i in range(n):
                    pid[d, r, i] = b.path(e.links[r, i, : e.hops[r, i]])
        pid_k = np.broadcast_to(pid[None], (N, D, R, n))
    else:
        dst_pos = np.stack([pos ^ p.step_partner_distance(k) for k in range(N)])
        pid_k = np.empty((N, D, R, n), np.int64)
        table = hd_routes(topo, p)
        for k in range(N):
            for r in range(R):
                row = table[k][r]
                for i in range(n):
                    pid_k[k, 0, r, i] = b.path(row[i])
    src_pos = np.empty_like(dst_pos)  # who sends to position i at step k
    for k in range(N):
        src_pos[k, dst_pos[k]] = pos
    step_bytes = np.array([p.step_fraction(k) * b.S / K for k in range(N)])
    red = np.zeros(N) if b.reduce_Bps is None else step_bytes / b.reduce_Bps
    reducing = np.arange(N) < p.rs_steps
    rho_step = np.where(reducing, red, 0.0)  # reduction after arrival of step k
    # rank: sender replica
    if p.level == "chip":
        sender_rank = members * c
    else:
        sender_rank = members
    shape = (N, K, D, R, n)
    k_idx, c_idx, d_idx, r_idx, i_idx = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    rho_msg = np.where(k_idx > 0, rho_step[np.maximum(k_idx - 1, 0)], 0.0)
    ids = b.nodes(count, path_id=pid_k[k_idx, d_idx, r_idx, i_idx].ravel(),
                  msg_bytes=step_bytes[k_idx].ravel(), rank=sender_rank[d_idx, r_idx, i_idx].ravel(),
                  rho=rho_msg.ravel())
    ids = ids.reshape(shape)
    # step 0 waits for the member's gate; step k waits for its own step k-1 and the arrival of step k-1
    if gate is not None:
        b.dep(ids[0], gate[members][None, :, :, :], 1)
    if N > 1:
        b.dep(ids[1:], ids[:-1], 1)
        src = src_pos[:-1][:, None, None, None, :]  # (N-1, 1, 1, 1, n)
        prev = np.take_along_axis(ids[:-1], np.broadcast_to(src, ids[:-1].shape), axis=-1)
        b.dep(ids[1:], prev, 0)
    # done node per member: after the last step's arrival (and own last send), + reduction
    uniq = np.unique(members[0])
    done_ids = b.nodes(len(uniq), rho=rho_step[-1])
    done[uniq] = done_ids
    last = ids[-1]  # (K, D, R, n)
    member_done = done[members]  # (D, R, n)
    b.dep(np.broadcast_to(member_done, last.shape), last, 1)
    src_last = np.broadcast_to(src_pos[-1][None, None, None, :], last.shape)
    b.dep(np.broadcast_to(member_done, last.shape), np.take_along_axis(last, src_last, axis=-1), 0)
    if track:
        m = b.meta
        m["pass"].append(np.full(count, pass_tag, np.int64))
        m["dir"].append(d_idx.ravel())
        m["ring"].append(r_idx.ravel())
        m["pos"].append(i_idx.ravel())
        m["step"].append(k_idx.ravel())
        m["piece"].append(c_idx.ravel())
        m["dst"].append(dst_pos[k_idx, i_idx].ravel())
    return done


# ============================================================= static loads
def link_loads(plan, nbytes):
    """Bytes every link key carries during the collective (no simulation needed)."""
    topo = plan.topology
    out = np.zeros(num_link_keys(topo))
    S = float(nbytes)
    for p in plan.passes:
        if p.steps == 0:
            continue
        if p.pattern == "ring":
            per_edge = sum(p.step_fraction(k) for k in range(p.steps)) * S
            for e in p.rings:
                keys = e.links[e.links >= 0]
                np.add.at(out, keys, per_edge)
        else:
            for k, table in enumerate(hd_routes(topo, p)):
                keys = np.fromiter((key for row in table for route in row for key in route), np.int64)
                np.add.at(out, keys, p.step_fraction(k) * S)
    return out


def shared_link_streams(plan):
    """Number of links that carry more than one *stream* of messages.

    A stream is one ring edge of one level (a reduce-scatter pass and the
    all-gather pass over the same rings are one stream: they follow each other
    at every member). 0 means the schedule is uncontended: every link serves
    one sender's messages in order, and the closed form is exact. Halving-
    doubling is counted as contended when a step's messages share a link.
    """
    topo = plan.topology
    pairs = []
    streams = {}  # (stream, direction) -> small id
    for p in plan.passes:
        if p.steps == 0:
            continue
        if p.pattern == "hd":
            for table in hd_routes(topo, p):
                keys = np.fromiter((key for row in table for route in row for key in route), np.int64)
                if len(keys) and np.bincount(keys).max() > 1:
                    return int((np.bincount(keys) > 1).sum())
            continue
        for d, e in enumerate(p.rings):
            edge = np.broadcast_to(np.arange(e.num_rings)[:, None, None] * e.size
                                   + np.arange(e.size)[None, :, None], e.links.shape)
            ok = e.links >= 0
            sid = streams.setdefault((p.stream, d), len(streams))
            pairs.append(np.stack([e.links[ok], sid * 1_000_000_007 + edge[ok]], axis=1))
    if not pairs:
        return 0
    pairs = np.unique(np.concatenate(pairs), axis=0)
    counts = np.bincount(pairs[:, 0])
    return int((counts > 1).sum())


# ============================================================== data replay
def _leaf_layout(plan):
    """Per half: leaf shape ``(D1, n1, D2, n2, ..., cores, K-slot)`` without the piece axis."""
    c = plan.topology.cores_per_chip if plan.group.kind != "list" else 1
    return [tuple(x for d, n in sizes for x in (d, n)) + (c,) for sizes in plan.level_sizes] or [(c,)]


def replay_data(sched, ready_t, deliver_t):
    """Replay what every message carries, in time order, and check the result.

    Each replica holds, per leaf of the buffer, a count per contributing
    replica. Reduce-scatter steps add the sender's counts into the receiver's,
    all-gather steps overwrite them; a message's payload is the sender's state
    at its ready time. Returns a dict with ``shards`` (replica -> leaf ids),
    ``ok`` and ``problems`` (list of strings): after reduce-scatter every
    replica holds its shard summed exactly once over its group, after
    all-gather and all-reduce every replica holds every leaf complete, and no
    all-gather message ever carries an incomplete leaf.
    """
    plan = sched.plan
    topo = plan.topology
    K = sched.chunks
    c = topo.cores_per_chip
    flat = plan.group.kind == "list"
    layouts = _leaf_layout(plan)
    per_half = int(np.prod(layouts[0])) * K
    H = max(1, len(plan.halves))
    L = per_half * H
    R = topo.num_replicas
    groups = _replica_groups(plan)
    group_of = np.full(R, -1, np.int64)
    for gi, g in enumerate(groups):
        group_of[g] = gi
    member_mask = np.zeros((len(groups), R), bool)
    for gi, g in enumerate(groups):
        member_mask[gi, g] = True
    shards = _shards(plan, K, layouts, per_half)
    state = np.zeros((R, L, R), np.int16)
    op = plan.op
    for r in range(R):
        if group_of[r] < 0:
            continue
        if op == "all-gather":
            state[r][np.ix_(shards[r], member_mask[group_of[r]].nonzero()[0])] = 1
        else:
            state[r, :, r] = 1
    meta = sched.meta
    nodes = meta["node"]
    passes = passes_by_tag(plan)
    problems = []
    # events: deliveries (0) before sends (1) at equal times
    events = [(ready_t[m], 1, j) for j, m in enumerate(nodes)] + [(deliver_t[m], 0, j) for j, m in enumerate(nodes)]
    events.sort()
    payload = {}
    for t, what, j in events:
        p = passes[int(meta["pass"][j])]
        d, r, i, k, piece = (int(meta[x][j]) for x in ("dir", "ring", "pos", "step", "piece"))
        leaves = _message_leaves(plan, p, layouts, per_half, d, r, i, k, piece, K)
        e = p.rings[d]
        src_member = int(e.members[r, i])
        dst_member = int(e.members[r, int(meta["dst"][j])])
        src_rep, dst_rep = _holders(p, src_member, leaves, layouts, per_half, c, flat), \
            _holders(p, dst_member, leaves, layouts, per_half, c, flat)
        reduce = k < p.rs_steps
        if what == 1:
            data = state[src_rep, leaves].copy()
            if not reduce:
                g = member_mask[group_of[src_rep]]
                if not np.array_equal(data, g.astype(np.int16)):
                    problems.append(f"all-gather message {nodes[j]} carries incomplete data")
            payload[j] = data
        else:
            data = payload.pop(j)
            if reduce:
                state[dst_rep, leaves] += data
            else:
                state[dst_rep, leaves] = data
    for r in range(R):
        if group_of[r] < 0:
            continue
        want = member_mask[group_of[r]].astype(np.int16)
        held = state[r, shards[r]] if op == "reduce-scatter" else state[r]
        if not np.array_equal(held, np.broadcast_to(want, held.shape)):
            problems.append(f"replica {r} does not end with its {'shard' if op == 'reduce-scatter' else 'buffer'} "
                            "complete and summed once")
    return {"ok": not problems, "problems": problems, "shards": shards, "leaves": L}


def _replica_groups(plan):
    topo = plan.topology
    c = topo.cores_per_chip
    g = plan.group
    if g.kind == "list":
        return [np.array(g.replicas)]
    if g.kind == "all":
        return [np.arange(topo.num_replicas)]
    lines = topo.axis_rings(g.axis)
    return [(line[:, None] * c + np.arange(c)[None, :]).ravel() for line in lines]


def _positions(p, member):
    """Position of *member* in each direction's ring of pass *p*: list of (d, pos)."""
    out = []
    for d, e in enumerate(p.rings):
        r, i = np.argwhere(e.members == member)[0]
        out.append((d, int(i)))
    return out


def _level_passes(plan, h):
    """Per data level of half *h*: one pass at that level (for member positions)."""
    out = {}
    for p in plan.halves[h]:
        out.setdefault(p.data_level, p)
    return out


def _shards(plan, K, layouts, per_half):
    topo = plan.topology
    c = topo.cores_per_chip
    flat = plan.group.kind == "list"
    shards = {}
    for r in range(topo.num_replicas):
        member = r if flat else r // c
        core = 0 if flat else r % c
        leaves = []
        for h, layout in enumerate(layouts):
            if h >= max(1, len(plan.halves)):
                break
            levels = _level_passes(plan, h) if plan.halves else {}
            sel = []
            for lvl in range(len(layout) // 2):
                p = levels[lvl]
                if p.pattern == "hd":
                    mask_d = np.ones(layout[2 * lvl], bool)
                    mask_n = np.zeros(layout[2 * lvl + 1], bool)
                    where = np.argwhere(p.rings[0].members == member)
                    if len(where) == 0:
                        sel = None
                        break
                    mask_n[where[0][1]] = True
                    sel.append(np.outer(mask_d, mask_n))
                    continue
                m = np.zeros((layout[2 * lvl], layout[2 * lvl + 1]), bool)
                try:
                    for d, i in _positions(p, member):
                        m[d, i] = True
                except IndexError:
                    sel = None
                    break
                sel.append(m)
            if sel is None:
                continue
            core_mask = np.zeros(layout[-1], bool)
            core_mask[core] = True
            leaves.append(h * per_half + _leaf_ids(layout, sel, core_mask, None, K))
        shards[r] = np.concatenate(leaves) if leaves else np.zeros(0, np.int64)
    return shards


def _leaf_ids(layout, level_masks, core_mask, piece, K):
    """Leaf ids (within a half) selected by per-level (D, n) masks, a core mask and a piece."""
    full = np.ones(layout + (K,), bool)
    for lvl, m in enumerate(level_masks):
        shape = [1] * (len(layout) + 1)
        shape[2 * lvl], shape[2 * lvl + 1] = m.shape
        full &= m.reshape(shape)
    shape = [1] * (len(layout) + 1)
    shape[-2] = len(core_mask)
    full &= core_mask.reshape(shape)
    if piece is not None:
        pm = np.zeros(K, bool)
        pm[piece] = True
        full &= pm
    return np.flatnonzero(full.ravel())


def _message_leaves(plan, p, layouts, per_half, d, r, i, k, piece, K):
    e = p.rings[d]
    member = int(e.members[r, i])
    n = p.size
    if p.level == "core":
        q = (i - k - 1) % n if k < p.rs_steps else (i - (k - p.rs_steps)) % n
        out = []
        for h, layout in enumerate(layouts[: max(1, len(plan.halves))]):
            core_mask = np.zeros(layout[-1], bool)
            core_mask[q] = True
            out.append(h * per_half + _leaf_ids(layout, [], core_mask, piece, K))
        return np.concatenate(out)
    h = p.half
    layout = layouts[h]
    levels = _level_passes(plan, h)
    masks = []
    for lvl in range(p.data_level):
        lp = levels[lvl]
        m = np.zeros((layout[2 * lvl], layout[2 * lvl + 1]), bool)
        for dd, ii in _positions(lp, member):
            m[dd, ii] = True
        masks.append(m)
    m = np.zeros((layout[2 * p.data_level], layout[2 * p.data_level + 1]), bool)
    if p.pattern == "ring":
        x = (i - k - 1) % n if k < p.rs_steps else (i - (k - p.rs_steps)) % n
        m[d, x] = True
    else:
        dist = p.step_partner_distance(k)
        if k < p.rs_steps:
            lo = (i ^ dist) & ~(dist - 1)
        else:
            lo = i & ~(dist - 1)
        m[0, lo:lo + dist] = True
    masks.append(m)
    core_mask = np.ones(layout[-1], bool)
    return h * per_half + _leaf_ids(layout, masks, core_mask, piece, K)


def _holders(p, member, leaves, layouts, per_half, c, flat):
    """Replica holding each leaf of a message at *member* of pass *p*."""
    if p.level in ("core", "flat"):
        return np.full(len(leaves), member)
    # the core index is the second-to-last axis of the leaf layout (pieces last)
    K = per_half // int(np.prod(layouts[0]))
    core = ((leaves % per_half) // K) % layouts[0][-1]
    return member * c + core
