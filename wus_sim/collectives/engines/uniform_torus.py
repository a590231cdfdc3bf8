"""Collectives on a uniform torus, in plain Python: what ``wus-sim collective`` runs before
numpy is imported.

A short command spends most of its time importing numpy (see docs/speed.md, "Start-up"); its
simulation needs a few milliseconds. On a *uniform* torus (every axis wrapped, one chip = one
replica, every link the same bandwidth and latency, no failed or slow link) the ring
schedules are symmetric enough to need no arrays at all:

* every pass of ``2d``, and of ``ring`` / ``bidir-ring`` over one axis, runs the rings of all
  lines of one axis at once; these rings are translates of each other over disjoint links,
  and each ring's edges are one-hop edges over identical links. ``ring`` / ``bidir-ring`` over a
  2-D or 3-D slice run one ring through every chip (the snake of :mod:`.snake`); on a torus its
  edges are one hop each, over links no other edge uses (:func:`_snake_slots` checks both, edge
  by edge). Either way every member of every ring starts a pass at the same time and sees the
  same link free times, so the fast engine's exact max-plus recurrence
  (:mod:`wus_sim.collectives.engines.fast_engine`) gives every member the same times: running it for
  **one member** gives them all, with the same floating-point operations in the same order,
  hence the same bits. The free time of every link of one (axis, direction), or of the snake,
  is one number carried from pass to pass, as the engine carries its array.
* the closed form (:mod:`wus_sim.collectives.analytic`) on such rings takes its "every edge
  alike" branch; it is evaluated here with the same operations (numpy's pairwise summation
  included, :func:`pairwise_sum`).
* the event count and the per-link bytes follow from the structure: every link of an (axis,
  direction), or of the snake, carries the same bytes, and the record's total is numpy's sum
  over the link slots in their order (chip, axis, direction), reproduced by :func:`pairwise_sum`.

Anything else (meshes, several cores a chip, explicit groups, 2d-split, pairwise exchanges, a
reduction cost, link faults) is not handled here: :func:`run` returns ``None`` and the caller takes the general path.
``tests/collectives/engines/test_uniform_torus.py`` checks the result against the fast engine, the SimPy
engine and the closed form, bit for bit.

No numpy, no YAML: this module imports only the standard library, :mod:`wus_sim.inputs` and the
plain-Python :mod:`.pass_order` and :mod:`.snake`.
"""

import math
from functools import lru_cache

from ...inputs.units import GB
from ..schedules.pass_order import KINDS, pass_order
from ..schedules.snake import slice_ring_coords

__all__ = ["ALGORITHMS", "run", "bandwidths", "pairwise_sum"]

ALGORITHMS = ("ring", "bidir-ring", "2d")
"""Algorithms run here: ``2d``'s line rings, and ``ring`` / ``bidir-ring`` over one axis (line
rings) or over the whole slice (the snake ring of :mod:`wus_sim.collectives.schedules.snake`)."""


def bandwidths(op, nbytes, time_s, group_size):
    """NCCL's bus and algorithm bandwidths, GB/s: ``algbw = S / time``; ``busbw = algbw *
    2(N-1)/N`` (all-reduce) or ``(N-1)/N`` (reduce-scatter, all-gather)."""
    algbw = nbytes / time_s / GB if time_s > 0 else math.inf
    n = group_size
    factor = (2 * (n - 1) / n) if op == "all-reduce" else ((n - 1) / n)
    busbw = algbw * factor if math.isfinite(algbw) else (0.0 if n == 1 else math.inf)
    return algbw, busbw


# ===================================================================== the plan
def _passes(dims, kind, algorithm, axis, directions):
    """The chip-level passes of :func:`wus_sim.collectives.schedules.plan.plan_collective` for a uniform
    torus (one half, no on-chip level): ``[(kind, ring size, fraction, links), ...]`` with
    *links* the axis of a line-ring pass or ``"slice"`` for the whole-slice ring.

    Equal axis bandwidths keep axis order (the plan sorts axes by line bandwidth, stably)."""
    axes = [a for a, d in enumerate(dims) if d > 1] if axis is None else [axis]
    if not axes:
        return []
    if algorithm != "2d" and len(axes) > 1:  # ring, bidir-ring over the whole slice: the snake
        return [(kind, math.prod(dims), 1.0 / directions, "slice")]
    levels = []
    frac = 1.0
    for a in axes:
        levels.append((dims[a], frac / directions, a))
        frac /= dims[a]
    return [(k, levels[i][0], levels[i][1], levels[i][2]) for k, i in pass_order(kind, len(levels))]


def _snake_slots(dims, directions):
    """The link slots (``chip * 2 ndim + 2 axis + (direction < 0)``, the topology's ids) of the
    whole-slice ring's edges, per direction: ``None`` unless every edge is one hop (as
    ``embedding._grid_edge`` routes it: a grid neighbour, else the shortest way round, ties
    ``+``) and no slot is used twice, i.e. unless the ring is uncontended and all alike."""
    ndim = len(dims)
    strides = [math.prod(dims[:i]) for i in range(ndim)]
    # a one-hop move (axis x, coordinate change) -> (x, link direction): a grid neighbour, or
    # round the wrap (0 -> d-1 is one hop back, d-1 -> 0 one forward); any other is not one hop
    step = {}
    for x, d in enumerate(dims):
        if d >= 3:
            step[(x, d - 1)], step[(x, 1 - d)] = (x, -1), (x, 1)
        step[(x, 1)], step[(x, -1)] = (x, 1), (x, -1)
    order = slice_ring_coords(dims, (True,) * ndim)
    forward, backward = [], []
    for a, b in zip(order, order[1:] + order[:1]):
        moved = [(x, q - p) for x, (p, q) in enumerate(zip(a, b)) if p != q]
        if len(moved) != 1 or moved[0] not in step:
            return None
        x, direction = step[moved[0]]
        base = 2 * x + (direction < 0)
        forward.append(sum(c * s for c, s in zip(a, strides)) * 2 * ndim + base)
        backward.append(sum(c * s for c, s in zip(b, strides)) * 2 * ndim + (base ^ 1))  # the reverse ring: b -> a
    slots = [forward, backward][:directions]
    used = [k for ring in slots for k in ring]
    return slots if len(set(used)) == len(used) else None


# =============================================================== the recurrence
def _member_pass(ready, free, occ, lat, nsteps, chunks):
    """One member's ring pass (every member alike): the fast engine's hop rule (``_hops`` of
    :mod:`wus_sim.collectives.engines.fast_engine`, one-hop edges, no reduction cost) on scalars.
    Returns ``(done, link free time)``."""
    if chunks == 1:
        t = ready
        for _ in range(nsteps):
            t = max(t, free)   # start = max(ready, link_free)
            t += occ           # end
            free = t
            t += lat           # ready at the next member (the shift: every member alike)
        return t, free
    # pieces queue back to back: s_c = c*o + max(free, max_{j<=c}(t_j - j*o)), as the engine
    jo = [occ * float(j) for j in range(chunks)]
    t = [ready] * chunks
    for _ in range(nsteps):
        u = [x - j for x, j in zip(t, jo)]
        u[0] = max(u[0], free)
        for c in range(1, chunks):
            if u[c - 1] > u[c]:
                u[c] = u[c - 1]
        u = [x + j for x, j in zip(u, jo)]
        u = [x + occ for x in u]
        free = u[-1]
        t = [x + lat for x in u]
    return max(t), free


# ============================================================= the closed form
def _best(tau, sigma, K, coef, window_term, lo, hi, n):
    """``analytic._best`` on edges all alike (its ``_max_window`` shortcut)."""
    lo, hi = max(lo, 1), min(hi, n - 1)
    if lo > hi:
        return -math.inf
    u = tau + window_term - K * sigma
    return coef * sigma + max(lo * u, hi * u)


def _extra(tau, sigma, K, n):
    """``max(0, _max_window(tau - K * s_all, None, 1, n - 2))`` on edges all alike."""
    u = tau - K * sigma
    return max(0.0, max(u, (n - 2) * u) if n - 2 >= 1 else -math.inf)


def _ring_time(tau, sigma, n, kind, K):
    """``analytic.ring_time`` on a ring of *n* alike edges, no reduction cost."""
    if kind in ("rs", "ag"):
        return _best(tau, sigma, K, n * K - 1, 0.0, 1, n - 1, n)
    part1 = _best(tau, sigma, K, (2 * n - 1) * K - 1, 0.0, 1, n - 1, n) - 0.0
    part2 = _constant_sum(tau, n) + 0.0 * (n - 1) + ((n - 1) * K - 1) * sigma + _extra(tau, sigma, K, n)
    return max(part1, part2)


def _outer_times(tau, sigma, n, K):
    """``analytic.outer_ring_times`` on a ring of *n* alike edges, no reduction cost."""
    A = _best(tau, sigma, K, (2 * n - 1) * K - 1, 0.0, 1, n - 1, n)
    B1 = _best(tau, sigma, K, 2 * n * K - 2, 0.0, 2, n - 1, n) - 0.0
    B2 = _constant_sum(tau, n) + 0.0 * (n - 1) + (n * K - 2) * sigma + _extra(tau, sigma, K, n)
    return A, max(B1, B2)


def _closed_form(passes, S, K, inv_bw, lat):
    """``analytic.plan_time`` of the passes (one half: ``_half_time``), edges all alike."""
    def figures(n, f):
        piece = f * S / n / K
        return inv_bw * piece + lat, inv_bw * piece

    kinds = [p[0] for p in passes]
    if "ar" not in kinds:
        total = 0
        for k, n, f, _ in passes:
            total = total + max(0.0, _ring_time(*figures(n, f), n, k, K))
        return max(total, 0.0)
    m = kinds.index("ar")
    _, n, f, _ = passes[m]
    inner = max(0.0, _ring_time(*figures(n, f), n, "ar", K))
    for _, n, f, _ in passes[:m][::-1]:
        A, B = _outer_times(*figures(n, f), n, K)
        A, B = max(0.0, A), max(0.0, B)
        inner = max(A, inner + B)
    return max(inner, 0.0)


# ======================================================== numpy's summation
def pairwise_sum(value_at, n, period):
    """``float(numpy.sum(x))`` of the ``n`` floats ``x[i] = value_at(i % period)``, bit for bit:
    numpy's pairwise summation (blocks of at most 128 summed in eight interleaved partial sums,
    split in halves above that), memoized by (offset mod period, length) so that a periodic
    array of any length costs a few dozen additions."""
    @lru_cache(maxsize=None)
    def block(offset, m):
        if m < 8:
            res = 0.0
            for i in range(m):
                res += value_at((offset + i) % period)
            return res
        if m <= 128:
            r = [value_at((offset + j) % period) for j in range(8)]
            i = 8
            while i < m - m % 8:
                for j in range(8):
                    r[j] += value_at((offset + i + j) % period)
                i += 8
            res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
            while i < m:
                res += value_at((offset + i) % period)
                i += 1
            return res
        m2 = m // 2
        m2 -= m2 % 8
        return block(offset, m2) + block((offset + m2) % period, m - m2)

    return block(0, n)


def _constant_sum(x, n):
    """``numpy.sum`` of *n* copies of *x*."""
    return pairwise_sum(lambda i: x, n, 1)


# ==================================================================== the run
def run(dims, link_Bps, hop_latency_s, op, algorithm, nbytes, *, axis=None, bidirectional=False, chunks=1):
    """The collective on the uniform torus *dims* (every axis wrapped, one replica a chip, every
    link *link_Bps* and *hop_latency_s*), or ``None`` where this module does not apply.

    *axis*: ``None`` for the whole slice, else the axis group. Returns a dict of ``group_size``,
    ``time_s`` (the fast engine's), ``analytic_time_s``, ``exact``, ``events``,
    ``max_link_bytes`` and ``total_link_bytes`` (over the ICI link slots), each equal to the
    general path's to the last bit. Either routing: every edge here is one hop, where
    cut-through and store-and-forward are the same recurrence."""
    kind = KINDS.get(op)
    if kind is None or algorithm not in ALGORITHMS or isinstance(chunks, bool) or chunks < 1:
        return None
    if axis is not None and not (0 <= axis < len(dims) and dims[axis] > 1):
        return None
    directions = 2 if (bidirectional or algorithm == "bidir-ring") else 1
    passes = _passes(dims, kind, algorithm, axis, directions)
    if not passes:
        return None
    # the whole-slice ring's edges are walked one by one here (the fast engine runs the ring's
    # every member: on 256x256, 0.4 s here against 19 s there)
    whole = passes[0][3] == "slice"
    snake = _snake_slots(dims, directions) if whole else None
    if whole and snake is None:
        return None
    S = float(nbytes)
    K = int(chunks)
    inv_bw = 1.0 / link_Bps  # the engines' seconds per byte of a link
    chips = math.prod(dims)
    ready = 0.0
    free = {}     # (links, direction) -> free time of every such link
    carried = {}  # (links, direction) -> bytes every such link carried
    events = 0
    for k, n, f, links in passes:
        piece = f * S / n / K
        nsteps = 2 * (n - 1) if k == "ar" else n - 1
        done = None
        for d in range(directions):
            t, free[links, d] = _member_pass(ready, free.get((links, d), 0.0), inv_bw * piece, hop_latency_s,
                                             nsteps, K)
            done = t if done is None else max(done, t)
            events += nsteps * K * chips  # every chip sends on one edge of one ring per direction
            carried[links, d] = carried.get((links, d), 0.0) + nsteps * piece * K
        ready = done
    ndim = len(dims)
    num_slots = chips * 2 * ndim
    if snake is None:  # line rings: a chip's links (axis, +/-) carry the same as every chip's
        slot = [carried.get((i // 2, i % 2), 0.0) for i in range(2 * ndim)]
        total = pairwise_sum(slot.__getitem__, num_slots, 2 * ndim)
    else:
        slot = [0.0] * num_slots
        for d, ring in enumerate(snake):
            for key in ring:
                slot[key] = carried["slice", d]
        total = pairwise_sum(slot.__getitem__, num_slots, num_slots)
    return {
        "group_size": chips if axis is None else dims[axis],
        "time_s": ready,
        "analytic_time_s": _closed_form(passes, S, K, inv_bw, hop_latency_s),
        "exact": True,  # one stream per link, rings alike: analytic.is_exact's conditions
        "events": events,
        "max_link_bytes": max(slot),
        "total_link_bytes": total,
    }
