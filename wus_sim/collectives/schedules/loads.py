"""Static link loads of a plan: bytes per link, whether any link serves two streams, and so
whether its messages can contend (which decides the exact engine and the closed form)."""

from functools import lru_cache

import numpy as np

from ...hardware.network import num_link_keys
from .messages import hd_routes

__all__ = ["link_loads", "shared_link_streams", "contention", "distinct", "first_of_distinct_rows"]

_EXCHANGE_NAMES = {"hd": "halving-doubling", "rd": "recursive-doubling"}
_A2A_NAMES = {"pw": "pairwise", "bruck": "Bruck"}


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
    one sender's messages in order, and the closed form is exact. A pairwise
    exchange (halving-, recursive-doubling) is counted as contended when a step's
    messages share a link; an all-to-all's pairwise or Bruck pass when two of its
    messages (of any steps) do.
    """
    topo = plan.topology
    pairs = []
    streams = {}  # (stream, direction) -> small id
    for p in plan.passes:
        if p.steps == 0:
            continue
        if p.pattern != "ring" and p.kind == "a2a":
            # all-to-all rounds: a link is one stream only if one message of the whole pass crosses it
            keys = np.fromiter((key for table in hd_routes(topo, p) for row in table for route in row
                                for key in route), np.int64)
            if len(keys) and np.bincount(keys).max() > 1:
                return int((np.bincount(keys) > 1).sum())
            continue
        if p.pattern != "ring":
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
    pairs = np.concatenate(pairs)
    counts = np.bincount(pairs[first_of_distinct_rows(pairs), 0])
    return int((counts > 1).sum())


@lru_cache(maxsize=256)
def contention(plan):
    """Why the fast engine cannot run *plan* exactly: its messages may contend on a link
    (``None`` if they never do). Cached per plan object."""
    for p in plan.passes:
        if p.pattern in _A2A_NAMES:
            if shared_link_streams(plan):
                return f"the routes of {_A2A_NAMES[p.pattern]}'s all-to-all rounds share links"
        elif p.pattern != "ring":
            return f"{_EXCHANGE_NAMES[p.pattern]} partners are several hops away and their messages contend on links"
    if len(plan.halves) > 1 and not plan.split_time_separated:
        return ("the two halves of 2d-split may want one axis at the same time (only on a square "
                "torus with uniform links do they take turns)")
    # two streams (ring edges) on one link would contend: the closed form's exactness test
    if shared_link_streams(plan):
        if any(p.level == "flat" for p in plan.passes):
            return "the routed edges of this explicit replica ring share links"
        return "ring edges of this schedule share links (e.g. both directions of a mesh line)"
    return None


# np.unique is avoided on the paths of short commands: numpy (2.x) imports numpy.ma the first
# time it runs, about a fifth of numpy's own start-up, for a check of masked arrays.
def distinct(a):
    """The sorted distinct values of *a* (no NaN), as ``np.unique(a)`` gives them."""
    a = np.sort(np.ravel(a))
    keep = np.ones(len(a), bool)
    keep[1:] = a[1:] != a[:-1]
    return a[keep]


def first_of_distinct_rows(rows):
    """Index of the first of each distinct row of the 2-D array *rows* (no NaN), in the rows'
    lexicographic order, as ``np.unique(rows, axis=0, return_index=True)[1]`` gives them."""
    order = np.lexsort(rows.T[::-1])  # stable: equal rows keep their order, the first leads
    ranked = rows[order]
    keep = np.ones(len(rows), bool)
    keep[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    return order[keep]
