"""Exact event times of uncontended all-to-all schedules, step by step over numpy arrays.

The all-to-all's passes (:mod:`wus_sim.collectives.schedules.alltoall`) send a different number
of blocks at each step (the ring's forwarded blocks shrink by one per step), and pairwise and
Bruck partners change every step, so :mod:`.fast_engine`'s ring recurrence (one piece size per
pass, a fixed successor) does not fit; this module runs them instead, with the same timing
model (:mod:`wus_sim.hardware.network`) message for message: for every message of a step at
once, hop by hop ::

    start = max(ready, link_free);  end = start + bytes / bw;  link_free = end
    store-and-forward: the next hop's ready = end + latency
    cut-through: head = start + latency, end = max(start + bytes/bw, tail), tail = end + latency

then a member's next step is ready at ``max(its own ready, the arrival it receives)``.

Why exact: :func:`~wus_sim.collectives.schedules.loads.contention` lets only schedules through
where no two messages of a step share a link and each link serves one stream (one ring edge;
for pairwise and Bruck one message in the whole pass), so a link's queue never holds two
messages at once except in their schedule order, which is what ``max(ready, link_free)`` over
the steps in order computes. As a guard the engine checks, per link, that each message asks
for it no earlier than the one before (by :func:`~wus_sim.hardware.network.tie_key`), and
raises :class:`OutOfOrder` otherwise (the api then runs the window engine).
"""

from dataclasses import dataclass

import numpy as np

from ...inputs.errors import ConfigError
from ...hardware.network import link_key_Bps, link_key_latency_s, num_link_keys, tie_key
from ..schedules.messages import hd_routes

__all__ = ["OutOfOrder", "run_plan", "run_halves"]


def run_halves(halves, start, run_pass):
    """Per member, when the passes of a plan's *halves* are done, from the times *start*: the
    halves' passes run interleaved (A1, B1, A2, B2, ...), which on a square uniform torus, where
    the two halves use an axis one after the other, meets every link's messages in time order."""
    readies = [start] * len(halves)
    for i in range(max([len(h) for h in halves] + [0])):
        for h, passes in enumerate(halves):
            if i < len(passes):
                readies[h] = run_pass(readies[h], passes[i])
    return np.max(readies, axis=0) if readies else start


class OutOfOrder(Exception):
    """A link would serve messages out of their schedule order: not exact here."""


@dataclass(frozen=True)
class _Outcome:
    time_s: float
    events: int
    link_bytes: np.ndarray
    link_busy_s: np.ndarray


def _padded(routes):
    """``(M, H)`` link keys of *routes* (tuples), padded with -1, and their lengths."""
    lengths = np.fromiter(map(len, routes), np.int64, count=len(routes))
    H = max(int(lengths.max(initial=0)), 1)
    keys = np.full((len(routes), H), -1, np.int64)
    for m, r in enumerate(routes):
        keys[m, :len(r)] = r
    return keys


def _step_paths(topo, p):
    """Per direction, per step: ``(senders (M,), receivers (M,), keys (M, H))`` as member ids."""
    out = []
    for d, e in enumerate(p.rings):
        members = e.members  # (R, n)
        steps = []
        if p.pattern == "ring":
            keys = e.links.reshape(-1, e.links.shape[-1])
            dst = members[:, (np.arange(p.size) + 1) % p.size].ravel()
            steps = [(members.ravel(), dst, keys)] * p.steps
        else:
            table = hd_routes(topo, p)
            for k in range(p.steps):
                routes = [r for row in table[k] for r in row]
                steps.append((members.ravel(), members[:, p.step_dst(k)].ravel(), _padded(routes)))
        out.append(steps)
    return out


def run_plan(plan, nbytes, *, chunks=1, routing="store-and-forward"):
    """Run an all-to-all *plan* (``contention(plan)`` ``None``) for ``S = nbytes``; raises
    :class:`OutOfOrder` where a link would serve out of schedule order."""
    if chunks != 1:
        raise ConfigError("must be 1 for all-to-all", key_path="chunks", value=chunks)
    topo = plan.topology
    S = float(nbytes)
    bw = link_key_Bps(topo)
    inv = np.where(np.isfinite(bw) & (bw > 0), 1.0 / np.where(bw > 0, bw, 1.0), 0.0)
    lat = link_key_latency_s(topo)
    free = np.zeros(num_link_keys(topo))
    last_ask = np.full(len(free), -1, np.int64)  # tie key of the latest request per link
    link_bytes = np.zeros(len(free))
    cut = routing == "cut-through"
    events = 0
    space = topo.num_replicas if any(p.level == "flat" for p in plan.passes) else topo.num_chips

    def run_pass(ready, p):
        nonlocal events
        out = ready.copy()
        for steps in _step_paths(topo, p):
            t = ready.copy()
            for k, (src, dst, keys) in enumerate(steps):
                b = p.step_fraction(k) * S
                head = t[src]
                tail = np.full(len(src), -np.inf)
                arrival = head.copy()
                for h in range(keys.shape[1]):
                    key = keys[:, h]
                    on = key >= 0
                    if not on.any():
                        break
                    kk = key[on]
                    ask = tie_key(head[on])
                    if np.any(ask < last_ask[kk]):
                        raise OutOfOrder(f"link {int(kk[np.argmax(ask < last_ask[kk])])}")
                    last_ask[kk] = ask
                    start = np.maximum(head[on], free[kk])
                    end = np.maximum(start + b * inv[kk], tail[on])
                    free[kk] = end
                    link_bytes[kk] += b
                    events += int(on.sum())
                    arrival[on] = end + lat[kk]
                    tail[on] = arrival[on]
                    head[on] = start + lat[kk] if cut else arrival[on]
                nxt = t.copy()
                np.maximum.at(nxt, dst, arrival)
                t = nxt
            members = p.rings[0].members.ravel()
            out[members] = np.maximum(out[members], t[members])
        return out

    start = np.zeros(space)
    done = run_halves(plan.halves, start, run_pass)
    ici = link_bytes[: topo.num_link_slots]
    busy = ici / np.where(topo.link_up, topo.link_Bps, np.inf)
    return _Outcome(float(done.max(initial=0.0)), int(events), ici, busy)
