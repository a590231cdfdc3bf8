"""Closed-form (alpha-beta) times of the all-to-all plans (:mod:`.schedules.alltoall`).

Textbook forms (``n`` members, ``S`` each member's whole buffer, ``B`` link bandwidth, ``a``
the per-hop latency, every message one store-and-forward hop unless said; Thakur,
Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 19(1), 2005, section 3.3; Bruck et al., IEEE TPDS 8(11), 1997):

* ``pairwise`` on a fully connected network: ``(n-1)(a + S/(n B))``. Here round ``k`` goes
  ``d_k`` hops along the shortest route (on a ring ``d_k = min(k, n-k)``): uncontended,
  ``sum_k d_k (a + S/(n B))`` store-and-forward, ``sum_k (d_k a + S/(n B))`` cut-through.
* ``bruck``: ``ceil(log2 n) a + ceil(log2 n) (S/2)/B`` for ``n`` a power of two (step ``k``
  sends the ``c_k`` blocks whose offset has bit ``k`` set, ``c_k = n/2``), ``d_k = min(2^k,
  n - 2^k)`` hops on a ring.
* ``ring`` (bidirectional, each block the shorter way, hop by hop): ``floor(n/2)`` steps, step
  ``k`` carrying ``h - k`` blocks (``n`` odd, ``h = (n-1)/2``) or ``h - k - 1/2`` (``n`` even,
  ``h = n/2``) of ``S/n``: ``T = floor(n/2) a + (n^2 - 1) S / (8 n B)`` (odd) or ``floor(n/2) a
  + n S / (8 B)`` (even): the busiest link's bytes over ``B`` plus one latency a step.
* ``2d`` on an ``X x Y`` torus: the ring form on ``X`` then on ``Y``, each on the whole ``S``;
  ``2d-split``: the same with ``S/2`` per half, the halves at once (taking turns on each axis of
  a square torus).

This module computes them per member, for any link figures: each pass is the chain
``ready_j(k+1) = max(ready_j(k), ready_i(k) + tau_ik)`` over the step-``k`` message from ``i``
to ``j`` (``tau``: its route's transit, store-and-forward ``sum (b/bw + latency)``, cut-through
``sum latency + b / min bw``), with the per-member barrier between passes. It ignores link
queues, so it is exact (:func:`is_exact_a2a`) when no link carries two streams and every edge
of a ring pass is alike (a ring's forwarded blocks then shrink as fast as they arrive, so no
message waits for its link); otherwise it is the uncontended time, a lower bound: pairwise and
Bruck rounds on a torus share links (round ``k`` of pairwise on a ring sends all ``n`` blocks
the same way over ``d_k`` hops, so every link carries ``d_k`` blocks in that round).
"""

from functools import lru_cache

import numpy as np

from ..hardware.network import link_key_Bps, link_key_latency_s
from .schedules.loads import shared_link_streams
from .schedules.messages import hd_routes

__all__ = ["a2a_plan_time", "is_exact_a2a"]


def _route_figures(topo, keys, idx, count):
    """``(inv_sum, inv_max, lat_sum)`` of *count* routes given as link *keys* and the route
    index of each."""
    inv = 1.0 / link_key_Bps(topo)[keys]
    inv_sum = np.bincount(idx, weights=inv, minlength=count)
    lat_sum = np.bincount(idx, weights=link_key_latency_s(topo)[keys], minlength=count)
    inv_max = np.zeros(count)
    np.maximum.at(inv_max, idx, inv)
    return inv_sum, inv_max, lat_sum


@lru_cache(maxsize=1024)
def _ring_edges(topo, e):
    """``(inv_sum, inv_max, lat_sum)`` per edge ``(R, n)`` of ring embedding *e*."""
    ok = e.links >= 0
    idx = np.broadcast_to(np.arange(e.hops.size).reshape(e.hops.shape)[..., None], e.links.shape)[ok]
    return tuple(a.reshape(e.hops.shape) for a in _route_figures(topo, e.links[ok], idx, e.hops.size))


@lru_cache(maxsize=1024)
def _step_routes(topo, p, k):
    """``(inv_sum, inv_max, lat_sum)`` per member ``(R, n)`` of the route of its step-*k* message."""
    flat = [route for row in hd_routes(topo, p)[k] for route in row]
    lengths = np.fromiter(map(len, flat), np.int64, count=len(flat))
    keys = np.fromiter((key for route in flat for key in route), np.int64, count=int(lengths.sum()))
    idx = np.repeat(np.arange(len(flat)), lengths)
    shape = p.rings[0].members.shape
    return tuple(a.reshape(shape) for a in _route_figures(topo, keys, idx, len(flat)))


def _pass_chain(topo, p, ready, S, routing):
    """Per member id, the time it finishes pass *p* from its start times *ready*."""
    out = ready.copy()
    cut = routing == "cut-through"
    for e in p.rings:
        members = e.members
        t = ready[members]  # (R, n)
        for k in range(p.steps):
            b = p.step_fraction(k) * S
            inv_sum, inv_max, lat_sum = _ring_edges(topo, e) if p.pattern == "ring" else _step_routes(topo, p, k)
            tau = (inv_max if cut else inv_sum) * b + lat_sum
            dst = p.step_dst(k)
            nxt = t.copy()
            nxt[:, dst] = np.maximum(t[:, dst], t + tau)
            t = nxt
        out[members] = np.maximum(out[members], t)
    return out


def a2a_plan_time(plan, S, routing="store-and-forward"):
    """Closed-form time of an all-to-all plan for ``S`` bytes per member (see the module docstring)."""
    topo = plan.topology
    space = topo.num_replicas if any(p.level == "flat" for p in plan.passes) else topo.num_chips
    done = 0.0
    for half in plan.halves:
        ready = np.zeros(space)
        for p in half:
            ready = _pass_chain(topo, p, ready, float(S), routing)
        done = max(done, float(ready.max(initial=0.0)))
    return done


@lru_cache(maxsize=256)
def is_exact_a2a(plan):
    """True when :func:`a2a_plan_time` equals the simulated time (to rounding): no link carries
    two streams, and the edges of every ring pass are alike (bandwidths, latencies, hops)."""
    if shared_link_streams(plan):
        return False
    for p in plan.passes:
        if p.pattern != "ring":
            continue
        for e in p.rings:
            for a in _ring_edges(plan.topology, e):
                if not np.all(a == a.flat[0]):
                    return False
            if not np.all(e.hops == e.hops.flat[0]):
                return False
    return True
