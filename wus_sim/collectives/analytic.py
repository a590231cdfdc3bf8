"""Closed-form (alpha-beta) times of the collective schedules.

The classic forms (Thakur, Rabenseifner and Gropp, "Optimization of collective
communication operations in MPICH", IJHPCA 2005): a ring of ``n`` members on a
buffer ``B`` takes ``(n-1)(alpha + B/(n beta))`` for reduce-scatter or
all-gather and twice that for all-reduce; recursive halving/doubling takes
``log2(n) alpha + (n-1)/n B/beta`` per half. Here they are extended to what
the plans of :mod:`wus_sim.collectives.schedules.plan` do, and stay *exact* (equal
to the simulation, to rounding) whenever no link carries two streams:

* Store-and-forward multi-hop edges (mesh folded rings, routed closing edges)
  and per-edge bandwidths (per-axis bandwidth, slow links).
* Chunks: the ``K`` pieces of a step queue back to back on each link.
* Reduction: ``rho = piece / reduce_Bps`` after each reduce-scatter arrival.
* Levels: on-chip ring, chip-level phases (per axis, per direction), 2d-split
  halves, with the per-member barriers between passes.

A ring pass is a max-plus linear system; its completion time is the longest
path through the (edge station, piece) lattice. For an edge ``e`` with
per-piece transit ``tau_e`` (store-and-forward: sum over its hops of
``piece/bw + latency``; cut-through: sum of the latencies plus the slowest
hop's ``piece/bw``) and slowest hop ``sigma_e = piece/min bw``, a path crosses a window ``w`` of
consecutive edges backwards and spends all of its piece-to-piece steps on the
slowest hop it meets, so (``a = |w|``)::

    reduce-scatter:  T = max_w  sum_w (tau_e + rho) + ((n - a) K - 1) sigma(w),  1 <= a <= n-1
    all-gather:      the same with rho = 0
    all-reduce:      T = max_w  sum_w tau_e + rho min(a-1, n-1) + ((2n-1-a) K - 1) sigma(w),
                     1 <= a <= 2n-2 (the all-gather steps continue the ring; a path can
                     queue down to the reduce-scatter steps before changing edge)

Why the same formulas serve both routings: over one edge (its links private to
it), the ``m``-th piece leaves no earlier than the ``j``-th piece's ready time
plus ``tau_e + (m - j) sigma_e``, for every ``j <= m``, and that bound is
reached; under store-and-forward because each extra piece waits once, at some
hop, for that hop's time; under cut-through because the longest path through
the (hop, piece) lattice sums every latency once and picks ``m - j + 1`` hop
times at non-decreasing hops, at best the slowest each time. The edge is
therefore the same max-plus system with a different ``tau_e``, and the window
maxima below hold unchanged (property tests against the SimPy engine:
``tests/collectives/test_cut_through.py``). On one-hop edges the two ``tau`` agree.

With every edge alike this reduces to the textbook forms, e.g. reduce-scatter
``T = (n-2) max(K s, tau + rho) + K s + alpha_h + rho`` with ``s = B/(n K bw)``
(with ``K = 1``: ``(n-1)(alpha + B/(n bw) + rho)``). A pass over rings of an
outer level wrapping an inner collective of duration ``c`` (2-D all-reduce:
reduce-scatter X, all-reduce Y, all-gather X) takes ``max(A, c + B)`` where
``B`` sums a reduce-scatter window and an all-gather window and ``A`` is a path
that never leaves the outer links (formulas in :func:`_outer_times`). Phases of
reduce-scatter and all-gather add. Maxima over windows are computed for every
window at once with prefix sums and a sparse table (``O(n log n)`` numpy).

Halving-doubling and recursive-doubling: the uncontended chain (each member's step
``k`` waits for its partner's step ``k-1``), i.e. ``sum_k (tau_k + rho_k) + (K-1) max_k s_k`` along
every member's chain, ``tau_k`` the routing's transit of a step-``k`` piece
(store-and-forward: ``hops_k (alpha + b_k/bw)``). Its messages share links on a
torus, so the simulation is slower: this is a lower bound, not the time. (Recursive-
doubling sends ``b_k = B`` at every step and sums every arrival: ``log2(n)`` latency terms.)

Exactness conditions (:func:`is_exact`): every link carries one stream (see
:func:`~wus_sim.collectives.schedules.loads.shared_link_streams`), no halving- or
recursive-doubling with more than two members, the rings of each pass are alike (no
per-link bandwidth override on a pass of several rings), and no reordering
of pieces at the all-reduce turn (see :func:`is_exact`); failed links, whose
detours make the rings of a pass differ, count like overrides. Otherwise the value
is the uncontended time in (step, piece) order: a lower bound of the
simulated time under contention; with per-link overrides on multi-ring passes
it takes the slowest ring of each pass and can be off either way (seen up to
13 % above the simulated time, when one slow link sits on one ring of a pass of
many rings). :func:`~wus_sim.collectives.api.collective_time` therefore uses
the closed form only where it is exact and simulates everything else.
"""

from functools import lru_cache
import math

import numpy as np

from ..inputs.memo import IdentityMemo
from ..hardware.network import check_routing, link_key_Bps, link_key_latency_s
from .schedules.loads import distinct, first_of_distinct_rows, shared_link_streams
from .schedules.messages import hd_routes
from .schedules.plan_cache import cached_plan

__all__ = ["plan_time", "is_exact", "ring_time", "outer_ring_times", "phase_times"]


# ================================================================ window maxima
def _sparse_min(values):
    """Sparse table of range minima: ``table[k][i] = min(values[i : i + 2**k])``."""
    table = [np.asarray(values, float)]
    k = 1
    while (1 << k) <= len(values):
        prev = table[-1]
        half = 1 << (k - 1)
        table.append(np.minimum(prev[:-half], prev[half:]))
        k += 1
    return table


def _range_min(table, a, b):
    """``min(values[a..b])`` (inclusive) for arrays of bounds with ``a <= b``."""
    length = b - a + 1
    k = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(a))
    for level in distinct(k).tolist():
        sel = k == level
        t = table[level]
        out[sel] = np.minimum(t[a[sel]], t[b[sel] - (1 << level) + 1])
    return out


def _max_window(u, heavy, lo, hi):
    """Max over circular windows of ``lo..hi`` consecutive elements (``hi <= n-1``) of their sum,
    among windows holding at least one ``heavy`` element (any window if ``heavy`` is None)."""
    n = len(u)
    lo, hi = max(lo, 1), min(hi, n - 1)
    if lo > hi:
        return -math.inf
    if heavy is None or heavy.all():
        if np.all(u == u[0]):
            return max(lo * u[0], hi * u[0])  # all windows of a length are equal
        heavy = None
    prefix = np.concatenate([[0.0], np.cumsum(np.concatenate([u, u]))])
    end = np.arange(1, 2 * n + 1)
    a = np.maximum(end - hi, 0)
    b = np.minimum(end - lo, n - 1)
    if heavy is not None:
        h = np.concatenate([heavy, heavy])
        last_heavy = np.maximum.accumulate(np.where(h, np.arange(2 * n), -1))
        b = np.minimum(b, last_heavy[end - 1])
    ok = a <= b
    if not ok.any():
        return -math.inf
    table = _sparse_min(prefix[:n])
    return float(np.max(prefix[end[ok]] - _range_min(table, a[ok], b[ok])))


def _best(tau, sigma, K, rho, coef, window_term, lo, hi):
    """``max over theta in sigma, windows w (lo..hi, with an edge of sigma >= theta) of
    coef*theta + sum_w(tau + window_term - K theta)``."""
    best = -math.inf
    for theta in distinct(sigma):
        heavy = sigma >= theta
        w = _max_window(tau + window_term - K * theta, heavy, lo, hi)
        if w > -math.inf:
            best = max(best, coef * theta + w)
    return best


def ring_time(tau, sigma, kind, K=1, rho=0.0):
    """Completion time of one ring pass started by every member at once.

    *tau*, *sigma*: per edge (member ``i`` -> ``i+1``), transit of one piece and
    time of its slowest hop; *kind* ``"rs"``, ``"ag"`` or ``"ar"``; *K* pieces;
    *rho* reduction time per reduce-scatter arrival.
    """
    tau = np.asarray(tau, float)
    sigma = np.asarray(sigma, float)
    n = len(tau)
    if n <= 1:
        return 0.0
    if kind == "ag":
        rho = 0.0
    if kind in ("rs", "ag"):
        return _best(tau, sigma, K, rho, n * K - 1, rho, 1, n - 1)
    # all-reduce: the first edge crossed (the last step) is an all-gather step; the a-1
    # other crossings can all land on reduce-scatter steps (the path descends through the
    # steps by queueing behind earlier pieces), so a window of a edges earns min(a-1, n-1) rho
    part1 = _best(tau, sigma, K, rho, (2 * n - 1) * K - 1, rho, 1, n - 1) - rho
    # windows of n..2n-2 edges cover the whole ring once plus a window w' of 0..n-2 edges
    s_all = sigma.max()
    extra = max(0.0, _max_window(tau - K * s_all, None, 1, n - 2))
    part2 = tau.sum() + rho * (n - 1) + ((n - 1) * K - 1) * s_all + extra
    return max(part1, part2)


def outer_ring_times(tau, sigma, K=1, rho=0.0):
    """``(A, B)`` of a reduce-scatter pass and an all-gather pass over the same rings
    around an inner collective of duration ``c``: the pair takes ``max(A, c + B)``."""
    tau = np.asarray(tau, float)
    sigma = np.asarray(sigma, float)
    n = len(tau)
    if n <= 1:
        return 0.0, 0.0
    # A: a path that stays on this ring's links (all-gather window, then queued behind
    # the reduce-scatter pieces on the same edge)
    A = _best(tau, sigma, K, 0.0, (2 * n - 1) * K - 1, 0.0, 1, n - 1)
    # B: reduce-scatter window of a1 edges then all-gather window of a2 edges, L = a1 + a2
    B1 = _best(tau, sigma, K, rho, 2 * n * K - 2, rho, 2, n - 1) - rho
    s_all = sigma.max()
    extra = max(0.0, _max_window(tau - K * s_all, None, 1, n - 2))
    B2 = tau.sum() + rho * (n - 1) + (n * K - 2) * s_all + extra
    return A, max(B1, B2)


# ============================================================== plan times
@lru_cache(maxsize=4096)
def _edges(topology, embedding):
    """Per-edge figures of an embedding, cached (topologies and embeddings hash by identity)."""
    return _Edges(topology, embedding)


class _Edges:
    """Per-edge ``tau`` and ``sigma`` of a ring embedding for a given piece size."""

    def __init__(self, topology, embedding):
        bw = link_key_Bps(topology)
        lat = link_key_latency_s(topology)
        links = embedding.links
        real = links >= 0
        safe = np.where(real, links, 0)
        inv = np.where(real, 1.0 / bw[safe], 0.0)
        self.inv_sum = inv.sum(axis=-1)  # (R, n) seconds per byte over the edge's hops
        self.inv_max = inv.max(axis=-1)
        self.lat_sum = np.where(real, lat[safe], 0.0).sum(axis=-1)
        # rings that are alike are computed once
        key = np.concatenate([self.inv_sum, self.inv_max, self.lat_sum], axis=1)
        self.rep = first_of_distinct_rows(key)

    def rings(self, piece, routing="store-and-forward"):
        """``(tau, sigma)`` per distinct ring: store-and-forward pays every hop's time in
        ``tau``, cut-through only the slowest (the others overlap with it)."""
        inv = self.inv_max if routing == "cut-through" else self.inv_sum
        for r in self.rep:
            yield inv[r] * piece + self.lat_sum[r], self.inv_max[r] * piece


def _pass_args(p, S, K, reduce_Bps):
    piece = p.fraction * S / p.size / K
    rho = 0.0 if reduce_Bps is None else piece / reduce_Bps
    return piece, rho


def _ring_pass_time(topo, p, S, K, reduce_Bps, kind=None, routing="store-and-forward"):
    piece, rho = _pass_args(p, S, K, reduce_Bps)
    best = 0.0
    for e in p.rings:
        for tau, sigma in _edges(topo, e).rings(piece, routing):
            best = max(best, ring_time(tau, sigma, kind or p.kind, K, rho))
    return best


def _outer(topo, p, S, K, reduce_Bps, routing="store-and-forward"):
    piece, rho = _pass_args(p, S, K, reduce_Bps)
    A = B = 0.0
    for e in p.rings:
        for tau, sigma in _edges(topo, e).rings(piece, routing):
            a, b = outer_ring_times(tau, sigma, K, rho)
            A, B = max(A, a), max(B, b)
    return A, B


@lru_cache(maxsize=1024)
def _hd_step(topo, p, k):
    """Per (ring, member) of pairwise-exchange step *k*: sum of 1/bw, sum of latencies and
    max of 1/bw over the route to the partner."""
    e = p.rings[0]
    R, n = e.members.shape
    keys, idx, count = _hd_step_links(hd_routes(topo, p), k)
    inv = 1.0 / link_key_Bps(topo)[keys]
    inv_sum = np.bincount(idx, weights=inv, minlength=count)
    lat_sum = np.bincount(idx, weights=link_key_latency_s(topo)[keys], minlength=count)
    inv_max = np.zeros(count)
    np.maximum.at(inv_max, idx, inv)
    return inv_sum.reshape(R, n), lat_sum.reshape(R, n), inv_max.reshape(R, n)


def _hd_step_links(table, k):
    """``(link keys, route index of each, routes)`` of step *k* of a pairwise-exchange route
    *table* (:func:`.messages.hd_routes`): the same for every slice that shares the table."""
    return _HD_STEP_LINKS.get((table,), k, lambda: _step_links(table[k]))


def _step_links(step):
    flat = [route for row in step for route in row]
    lengths = np.fromiter(map(len, flat), np.int64, count=len(flat))
    keys = np.fromiter((key for route in flat for key in route), np.int64, count=int(lengths.sum()))
    idx = np.repeat(np.arange(len(flat)), lengths)
    keys.flags.writeable = idx.flags.writeable = False
    return keys, idx, len(flat)


_HD_STEP_LINKS = IdentityMemo(maxsize=1024)


def _hd_time(topo, p, S, K, reduce_Bps, routing="store-and-forward"):
    """Uncontended chain of a halving- or recursive-doubling pass (a lower bound under
    contention; exact for a 2-member recursive-doubling: one exchange, its pieces queued)."""
    R, n = p.rings[0].members.shape
    total = np.zeros((R, n))
    smax = np.zeros((R, n))
    for k in range(p.steps):
        dist = p.step_partner_distance(k)
        piece = p.step_fraction(k) * S / K
        rho = piece / reduce_Bps if (reduce_Bps is not None and k < p.rs_steps) else 0.0
        inv_sum, lat_sum, inv_max = _hd_step(topo, p, k)
        tau = piece * (inv_max if routing == "cut-through" else inv_sum) + lat_sum
        sig = piece * inv_max
        src = np.arange(n) ^ dist  # position i receives from i ^ dist
        total = total[:, src] + tau[:, src] + rho
        smax = np.maximum(smax[:, src], sig[:, src])
    return float(np.max(total + (K - 1) * smax))


def _pair_time(topo, p, S, K, reduce_Bps, routing="store-and-forward"):
    """Halving-doubling between two members is the two-member ring (exact)."""
    piece, rho = _pass_args(p, S, K, reduce_Bps)
    inv_sum, lat_sum, inv_max = _hd_step(topo, p, 0)  # every step goes to the other member
    tau = piece * (inv_max if routing == "cut-through" else inv_sum) + lat_sum
    return max(ring_time(t, s, p.kind, K, rho) for t, s in zip(tau, piece * inv_max))


def _half_time(topo, passes, S, K, reduce_Bps, routing="store-and-forward"):
    """Time of one half's chip-level (or flat) passes, started by every member at once."""
    if not passes:
        return 0.0
    if passes[0].pattern != "ring":  # pairwise exchanges (a 2-member rd is one exchange: _hd_time)
        return sum(_pair_time(topo, p, S, K, reduce_Bps, routing) if p.pattern == "hd" and p.size == 2
                   else _hd_time(topo, p, S, K, reduce_Bps, routing) for p in passes)
    kinds = [p.kind for p in passes]
    if "ar" not in kinds:
        return sum(_ring_pass_time(topo, p, S, K, reduce_Bps, routing=routing) for p in passes)
    # all-reduce: rs_1 .. rs_{m-1}, ar_m, ag_{m-1} .. ag_1, nested from the inside out
    m = kinds.index("ar")
    inner = _ring_pass_time(topo, passes[m], S, K, reduce_Bps, routing=routing)
    for p in passes[:m][::-1]:
        A, B = _outer(topo, p, S, K, reduce_Bps, routing)
        inner = max(A, inner + B)
    return inner


def plan_time(plan, nbytes, *, chunks=1, reduce_Bps=None, routing="store-and-forward"):
    """Closed-form time of a planned collective (see the module docstring)."""
    check_routing(routing)
    if plan.op == "all-to-all":
        from .analytic_a2a import a2a_plan_time

        return a2a_plan_time(plan, nbytes, routing)
    topo = plan.topology
    S = float(nbytes)
    K = int(chunks)
    chip = max([_half_time(topo, half, S, K, reduce_Bps, routing) for half in plan.halves] + [0.0])
    if plan.pre and plan.post:
        A, B = _outer(topo, plan.pre[0], S, K, reduce_Bps, routing)
        return max(A, chip + B)
    total = chip
    if plan.pre:
        total += _ring_pass_time(topo, plan.pre[0], S, K, reduce_Bps, routing=routing)
    if plan.post:
        total += _ring_pass_time(topo, plan.post[0], S, K, reduce_Bps, routing=routing)
    return total


@lru_cache(maxsize=1024)
def _structurally_exact(plan):
    topo = plan.topology
    for p in plan.passes:
        if p.pattern != "ring" and p.size > 2:
            return False
        if p.rings[0].num_rings > 1 and (topo.link_Bps_override or topo.failed_links):
            return False
    return shared_link_streams(plan) == 0


def is_exact(plan, *, chunks=1, reduce_Bps=None, routing="store-and-forward"):
    """True when :func:`plan_time` equals the simulated time (to rounding).

    Needs: no link carrying two streams, no halving- or recursive-doubling over
    more than two members, alike rings in passes of several rings (no per-link
    override there), and one more condition on ring all-reduce passes with
    ``chunks > 1`` and a reduction slower than a link (``reduce_Bps`` below
    a link's bandwidth, so ``rho`` exceeds a piece's link time): there a
    member can have an all-gather piece ready before its last reduce-scatter
    piece is summed, the link serves them out of (step, piece) order, and the
    window formula assumes that order. On rings whose edges are all alike
    this does not change the time (checked by the tests); on other rings the
    closed form is then a lower bound (off by at most ~1% in the tests).
    Under cut-through routing that case is exact only on single-hop rings
    (where the two routings coincide); with multi-hop edges it is reported as
    not exact (untested territory, so the value is only claimed as a bound).
    """
    check_routing(routing)
    if plan.op == "all-to-all":
        from .analytic_a2a import is_exact_a2a

        return is_exact_a2a(plan)
    if not _structurally_exact(plan):
        return False
    if chunks > 1 and reduce_Bps is not None:
        topo = plan.topology
        for p in plan.passes:
            if p.kind != "ar" or p.pattern != "ring":
                continue
            for e in p.rings:
                ed = _edges(topo, e)
                fastest = 1.0 / ed.inv_max.min() if ed.inv_max.min() > 0 else math.inf
                alike = all(np.all(a == a[:, :1]) for a in (ed.inv_sum, ed.inv_max, ed.lat_sum))
                if reduce_Bps < fastest and not alike:
                    return False
                if reduce_Bps < fastest and routing == "cut-through" and (e.hops > 1).any():
                    return False
    return True


_KIND_NAMES = {"rs": "reduce-scatter", "ag": "all-gather"}


def _phase_label(p, kind):
    where = ("on-chip" if p.level == "core" else f"axis {'XYZ'[p.axis]}" if p.axis is not None
             else "ring")
    return f"{where} {_KIND_NAMES[kind]}"


def phase_times(topology, op, algorithm, nbytes, *, group=None, bidirectional=False, chunks=1,
                reduce_Bps=None, routing="store-and-forward"):
    """The collective's phases one after the other, ``[(label, seconds), ...]``, or ``None``.

    A phase is one ring pass of one level (``'on-chip reduce-scatter'``, ``'axis X
    all-gather'``; an all-reduce ring pass counts as its reduce-scatter and
    all-gather halves). Returned only where the phases really run back to back
    and their sum equals the exact closed form (to 1e-9): uncontended, single
    buffer half (not ``2d-split``), ring passes only. Traces draw them.
    """
    plan = cached_plan(topology, op, algorithm, group=group, bidirectional=bidirectional)
    if plan.op == "all-to-all" or len(plan.halves) > 1 \
            or not is_exact(plan, chunks=chunks, reduce_Bps=reduce_Bps, routing=routing):
        return None
    passes = plan.passes
    if any(p.pattern != "ring" for p in passes):
        return None
    topo, S, K = plan.topology, float(nbytes), int(chunks)
    out = []
    for p in passes:
        if p.size <= 1:
            continue
        kinds = ("rs", "ag") if p.kind == "ar" else (p.kind,)
        for kind in kinds:
            out.append((_phase_label(p, kind),
                        float(_ring_pass_time(topo, p, S, K, reduce_Bps, kind=kind, routing=routing))))
    total = plan_time(plan, S, chunks=K, reduce_Bps=reduce_Bps, routing=routing)
    if not math.isclose(sum(t for _, t in out), total, rel_tol=1e-9, abs_tol=1e-15):
        return None
    return out
