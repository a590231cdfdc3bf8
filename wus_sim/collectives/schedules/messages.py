"""A plan and a size compiled into the message table the SimPy engine runs.

See :mod:`.plan` for the schedule's rules (timing inside a pass, tie-break rank and
sequence); this module only lays them out as nodes, paths and dependencies.
"""

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
import weakref

import numpy as np

from ...inputs.memo import IdentityMemo
from ...hardware.network import replica_route
from .embedding import routes
from .plan import CollectivePlan

__all__ = [
    "Schedule", "PassLayout", "compile_messages", "clear_structure_cache", "passes_by_tag",
    "hd_routes",
]


def hd_routes(topology, p):
    """Pairwise-exchange pass *p* (halving-doubling, recursive-doubling, all-to-all's pairwise and
    Bruck): per step, the
    ``(R, n)`` nested list of link-key tuples from member ``i`` to its partner (read only;
    cached by what routes depend on: the slice's :attr:`~wus_sim.hardware.topology.Topology.routing_key`,
    the members and the partner distances, so slices that differ in link figures share it)."""
    e = p.rings[0]
    partners = (p.pattern, p.steps) if p.kind == "a2a" else tuple(p.step_partner_distance(k) for k in range(p.steps))
    key = (topology.routing_key, p.level, e.members.shape, e.members.tobytes(), partners)
    return _HD_ROUTES.get((), key, lambda: _hd_routes(topology, p))


_HD_ROUTES = IdentityMemo(maxsize=256)


def _hd_routes(topology, p):
    e = p.rings[0]
    R, n = e.members.shape
    by_distance = {}
    out = []
    for k in range(p.steps):
        # (an all-to-all's partners differ every step: keyed by step)
        dist = ("step", k) if p.kind == "a2a" else p.step_partner_distance(k)
        if dist not in by_distance:
            partner = e.members[:, p.step_dst(k)]
            if p.level == "flat":
                flat = [tuple(replica_route(topology, a, z)) for a, z in zip(e.members.ravel(), partner.ravel())]
            else:
                flat = routes(topology, e.members.ravel(), partner.ravel())
            by_distance[dist] = [flat[r * n:(r + 1) * n] for r in range(R)]
        out.append(by_distance[dist])
    return out


@dataclass(eq=False)
class Schedule:
    """A plan and a size turned into nodes: messages (with a path) and barriers (without).

    Node ``m`` is ready at ``max(deliveries of its deliver-deps, readiness of its
    ready-deps) + rho[m]``; a message is then sent over ``paths[path_id[m]]``; a
    barrier node is "delivered" as soon as it is ready. Node ids are in
    (half, pass, step, piece) order for every sender, so they serve as sequence numbers.
    """

    plan: CollectivePlan
    nbytes: float
    chunks: int
    num_nodes: int
    path_id: np.ndarray
    """Per node: index into :attr:`paths`, or -1 for a barrier node."""
    paths: list
    """Tuples of link keys."""
    frac: np.ndarray
    """Per node: the fraction of ``S / K`` its message carries (0 for barriers)."""
    rank: np.ndarray
    """Per node: sender replica (tie-break)."""
    rho_frac: np.ndarray
    """Per node: the fraction of ``S / K`` whose reduction is added to its ready time."""
    reduce_Bps: float = None
    """Reduction speed, bytes/s (``None``: reductions take no time)."""
    deps: list = field(default_factory=list)
    """``(child, parent, kind)`` int arrays; kind 0: parent delivered, 1: parent ready."""
    meta: dict = field(default_factory=dict)
    """Per-message data-model fields (pass index, direction, ring, position, step, piece, dst position)."""
    structure: object = None
    """The size-free :class:`_Structure` this schedule was sized from (shared, read-only), or
    ``None`` for a schedule built with ``track=True``; engines cache their own tables per structure."""

    # Why computed on first use: an engine that runs several sizes of one structure at once
    # (the window engine) reads a few nodes' bytes, and a 2048-chip all-reduce has 267k nodes:
    # a dozen sizes' full arrays were tens of MiB written for a few thousand reads.
    @cached_property
    def msg_bytes(self):
        """Per node: bytes of the message (0 for barriers): ``frac * S / K``."""
        return self.frac * self.nbytes / self.chunks

    @cached_property
    def rho(self):
        """Per node: reduction time added to its ready time, s: ``(rho_frac * S / K) / reduce_Bps``."""
        if self.reduce_Bps is None:
            return np.zeros(self.num_nodes)
        return self.rho_frac * self.nbytes / self.chunks / self.reduce_Bps

    @property
    def num_hops(self):
        """Message hops (the ``events`` both engines count)."""
        lengths = np.array([len(p) for p in self.paths] + [0])
        return int(lengths[self.path_id].sum())

    def dependency_arrays(self):
        """``(ndeps, ready_ptr, ready_children, deliver_ptr, deliver_children)`` as numpy arrays
        (computed once per shared structure; treat them as read-only)."""
        if self.structure is not None:
            if self.structure.dep_arrays is None:
                self.structure.dep_arrays = _dependency_arrays(self.deps, self.num_nodes)
            return self.structure.dep_arrays
        return _dependency_arrays(self.deps, self.num_nodes)


def _dependency_arrays(deps, num_nodes):
    if deps:
        child = np.concatenate([d[0] for d in deps])
        parent = np.concatenate([d[1] for d in deps])
        kind = np.concatenate([d[2] for d in deps])
    else:
        child = parent = kind = np.zeros(0, dtype=np.int64)
    ndeps = np.bincount(child, minlength=num_nodes)
    out = [ndeps]
    for k in (1, 0):
        sel = kind == k
        p, ch = parent[sel], child[sel]
        order = np.argsort(p, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(p, minlength=num_nodes))])
        out += [ptr, ch[order]]
    return tuple(out)


class _Builder:
    """Collects nodes in their size-free form: a message's bytes are ``frac * S / K`` and its
    reduction time ``(rho_frac * S / K) / reduce_Bps`` (the fraction of ``S`` one step
    carries, and that of the step whose arrival is summed before this node is ready)."""

    def __init__(self, plan, chunks):
        self.plan, self.K = plan, int(chunks)
        self.n = 0
        self.path_id, self.frac, self.rank, self.rho_frac = [], [], [], []
        self.paths = []
        self.deps = []
        self.meta = {k: [] for k in ("pass", "dir", "ring", "pos", "step", "piece", "dst")}
        self.layouts = []

    def nodes(self, count, *, path_id=None, frac=0.0, rank=None, rho_frac=0.0):
        start = self.n
        self.n += count
        self.path_id.append(np.full(count, -1, np.int64) if path_id is None else path_id)
        self.frac.append(np.broadcast_to(np.asarray(frac, float), (count,)))
        self.rank.append(np.zeros(count, np.int64) if rank is None else rank)
        self.rho_frac.append(np.broadcast_to(np.asarray(rho_frac, float), (count,)))
        return np.arange(start, start + count)

    def dep(self, child, parent, kind):
        child, parent = np.broadcast_arrays(np.asarray(child, np.int64), np.asarray(parent, np.int64))
        ok = parent >= 0
        if ok.all():  # (the usual case: a copy of each, without a mask's gathers)
            child, parent = child.ravel(), parent.ravel()
        else:
            child, parent = child[ok].ravel(), parent[ok].ravel()
        self.deps.append((child, parent, np.full(len(child), kind, np.int64)))

    def path(self, keys):
        """Index of a new path entry (tuples of link keys; -1 padding dropped)."""
        self.paths.append(tuple(int(k) for k in keys if k >= 0) if not isinstance(keys, tuple) else keys)
        return len(self.paths) - 1

    def edge_paths(self, emb):
        """Indices of new path entries, one per edge of ring embedding *emb*: ``links[..., :hops]``
        of each (the tuples are built once per embedding: a slice's ops share its rings)."""
        start = len(self.paths)
        self.paths += _edge_tuples(emb)
        return np.arange(start, len(self.paths)).reshape(emb.hops.shape)


_EDGE_TUPLES = weakref.WeakKeyDictionary()


def _edge_tuples(emb):
    """Each edge of *emb* as a tuple of link keys, in ``(ring, position)`` order (memoized per
    embedding object; the tuples are immutable, so schedules may share them)."""
    out = _EDGE_TUPLES.get(emb)
    if out is None:
        links, hops = emb.links, emb.hops
        H = links.shape[-1]
        out = _EDGE_TUPLES[emb] = [tuple(row[:h]) for row, h in zip(links.reshape(-1, H).tolist(),
                                                                    hops.ravel().tolist())]
    return out


@dataclass(frozen=True, eq=False)
class PassLayout:
    """Where one pass's messages sit among a schedule's nodes (for engines that run a ring
    as a unit, e.g. :mod:`.clean_rings`)."""

    pass_: object
    """The plan's :class:`~.plan.Pass`."""
    ids: np.ndarray
    """``(N, K, D, R, n)`` node id of step ``k``, piece, direction, ring, position."""
    src_pos: np.ndarray
    """``(N, n)``: the position whose step-``k`` message reaches position ``i``."""
    gates: np.ndarray
    """``(D, R, n)`` node whose readiness starts each position (``-1``: none, it starts at 0)."""
    half: int
    """The buffer half whose chain of passes this one is in (2d-split runs two at once; the
    on-chip passes, before and after both, count as half 0)."""


@dataclass(eq=False)
class _Structure:
    """A plan's schedule before a size is chosen (see :class:`_Builder`); shared by every
    :class:`Schedule` sized from it, so engines can cache tables per structure."""

    plan: CollectivePlan
    chunks: int
    num_nodes: int
    path_id: np.ndarray
    paths: list
    frac: np.ndarray
    rank: np.ndarray
    rho_frac: np.ndarray
    deps: list
    meta: dict
    layouts: tuple = ()
    """A :class:`PassLayout` per pass with messages, in schedule order."""
    dep_arrays: tuple = None
    """:meth:`Schedule.dependency_arrays`, once computed."""
    engine_tables: dict = field(default_factory=dict)
    """Tables an engine derives from this structure, by engine (e.g. the window engine's graph)."""

    @classmethod
    def of(cls, b):
        cat = (lambda xs, dtype: np.concatenate(xs) if xs else np.zeros(0, dtype))
        return cls(b.plan, b.K, b.n, cat(b.path_id, np.int64), b.paths, cat(b.frac, float),
                   cat(b.rank, np.int64), cat(b.rho_frac, float), b.deps, {}, tuple(b.layouts))

    def sized(self, nbytes, reduce_Bps):
        """The :class:`Schedule` for ``S = nbytes``: bytes and reduction times from the fractions
        (computed when first read), in the order of operations the per-step formulas use."""
        return Schedule(self.plan, float(nbytes), self.chunks, self.num_nodes, self.path_id, self.paths, self.frac,
                        self.rank, self.rho_frac, reduce_Bps, self.deps, self.meta, structure=self)


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
    """The :class:`Schedule` of *plan* for ``S = nbytes``; ``track`` keeps the data-model fields.

    The size-free structure (nodes, paths, dependencies) is built once per ``(plan, chunks)``
    and shared (read-only) by the schedules of every size; ``track=True`` builds a private one.
    """
    if track:
        structure = _build(plan, int(chunks), True)
        sched = structure.sized(nbytes, reduce_Bps)
        sched.structure = None
        return sched
    return _structure(plan, int(chunks)).sized(nbytes, reduce_Bps)


@lru_cache(maxsize=64)
def _structure(plan, chunks):
    return _build(plan, chunks, False)


def clear_structure_cache():
    """Forget the cached schedule structures (with the tables engines keep on them) and the
    pairwise exchanges' route tables."""
    _structure.cache_clear()
    _HD_ROUTES.clear()


def _build(plan, chunks, track):
    topo = plan.topology
    b = _Builder(plan, chunks)
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
    structure = _Structure.of(b)
    if track:
        structure.meta = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in b.meta.items()}
        structure.meta["node"] = np.flatnonzero(structure.path_id >= 0)
    return structure


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
        pid = np.stack([b.edge_paths(e) for e in p.rings])  # (D, R, n)
        pid_k = np.broadcast_to(pid[None], (N, D, R, n))
    else:
        dst_pos = np.stack([p.step_dst(k) for k in range(N)])
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
    step_frac = np.array([p.step_fraction(k) for k in range(N)])
    reducing = np.arange(N) < p.rs_steps
    rho_step = np.where(reducing, step_frac, 0.0)  # reduction after arrival of step k (as a fraction)
    # rank: sender replica
    if p.level == "chip":
        sender_rank = members * c
    else:
        sender_rank = members
    shape = (N, K, D, R, n)
    # per message (step, piece, direction, ring, position), each field broadcast from the axes
    # it depends on: its path (k, d, r, i), fraction (k), sender (d, r, i), reduction (k)
    steps = np.arange(N)
    rho_k = np.where(steps > 0, rho_step[np.maximum(steps - 1, 0)], 0.0)  # the reduction of step k - 1
    ids = b.nodes(count, path_id=np.broadcast_to(pid_k[:, None], shape).ravel(),
                  frac=np.broadcast_to(step_frac[:, None, None, None, None], shape).ravel(),
                  rank=np.broadcast_to(sender_rank, shape).ravel(),
                  rho_frac=np.broadcast_to(rho_k[:, None, None, None, None], shape).ravel())
    ids = ids.reshape(shape)
    half = 0 if pass_tag in (_PRE_TAG, _POST_TAG) else (pass_tag - 1) // _HALF_TAG_STRIDE
    b.layouts.append(PassLayout(p, ids, src_pos, np.full(members.shape, -1, np.int64) if gate is None
                                else gate[members], half))
    # step 0 waits for the member's gate; step k waits for its own step k-1 and the arrival of step k-1
    if gate is not None:
        b.dep(ids[0], gate[members][None, :, :, :], 1)
    if N > 1:
        b.dep(ids[1:], ids[:-1], 1)
        src = src_pos[:-1][:, None, None, None, :]  # (N-1, 1, 1, 1, n)
        prev = np.take_along_axis(ids[:-1], np.broadcast_to(src, ids[:-1].shape), axis=-1)
        b.dep(ids[1:], prev, 0)
    # done node per member: after the last step's arrival (and own last send), + reduction
    uniq = np.sort(members[0], axis=None)  # np.unique's result, without its hashing (slower here)
    uniq = uniq[np.r_[True, uniq[1:] != uniq[:-1]]]
    done_ids = b.nodes(len(uniq), rho_frac=rho_step[-1])
    done[uniq] = done_ids
    last = ids[-1]  # (K, D, R, n)
    member_done = done[members]  # (D, R, n)
    b.dep(np.broadcast_to(member_done, last.shape), last, 1)
    src_last = np.broadcast_to(src_pos[-1][None, None, None, :], last.shape)
    b.dep(np.broadcast_to(member_done, last.shape), np.take_along_axis(last, src_last, axis=-1), 0)
    if track:
        k_idx, c_idx, d_idx, r_idx, i_idx = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
        m = b.meta
        m["pass"].append(np.full(count, pass_tag, np.int64))
        m["dir"].append(d_idx.ravel())
        m["ring"].append(r_idx.ravel())
        m["pos"].append(i_idx.ravel())
        m["step"].append(k_idx.ravel())
        m["piece"].append(c_idx.ravel())
        m["dst"].append(dst_pos[k_idx, i_idx].ravel())
    return done
