"""Rings that need no event queue inside a contended schedule: which they are, and their times.

A failed cable makes a few rings detour over their neighbours' links, and the window engine
(:mod:`.window_engine`) must then order every link's messages by time. But most rings of
such a schedule touch none of those links: each of their links carries one stream only, the
messages of one sender along one path, in step order (and, across passes, in pass order: a
member starts a pass only after its previous one). On such a link the service order is
known beforehand, so once a ring knows when each member starts it, the times of all its
steps follow from the recurrence of :mod:`.fast_engine` with no event order to find::

    start = max(ready, link_free);  end = start + nbytes / bw;  link_free = end
    arrival = end + lat;            ready' = max(ready, arrival from the previous member) + rho

with the window engine's own float operations, so the times are the same to the last bit.

A *unit* is one ring of one pass (one direction of a ring pass, one piece per step). It is
*clean* when every link it uses is *private* (every message crossing it has the same sender
and the same path) and no contended unit uses any of its links; the second rule is closed
over (a clean unit and a contended one never share a link), so the window engine's links
and this module's links are disjoint and one ``link_free`` array serves both.

The window engine runs only the contended units' messages. A clean unit waits until its
members' step-0 messages are ready (each is counted as the window engine finds it), then
runs whole, and hands back the events its last step causes outside it (the readiness and
deliveries the members' end-of-pass barriers wait for). That keeps the lookahead rule
sound: an event a clean unit has not produced yet waits for a member start not yet known,
which is no earlier than the window engine's next window. A unit whose members have all
started may also wait, to run with others in one call, as long as :func:`earliest_outputs`
(a bound on when anything waiting on it can be ready) is past the next window.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["CleanUnits", "clean_units", "earliest_outputs", "hop_floors", "run_units"]


@dataclass(frozen=True, eq=False)
class CleanUnits:
    """The clean units of a schedule structure (see the module docstring)."""

    start_unit: np.ndarray
    """Per node: the clean unit whose step-0 message this node is, else -1."""
    layout: np.ndarray
    """Per clean unit: index of its pass in ``structure.layouts``."""
    direction: np.ndarray
    """Per clean unit: its direction ``d`` in the pass."""
    ring: np.ndarray
    """Per clean unit: its ring ``r`` in the pass."""
    size: np.ndarray
    """Per clean unit: members (step-0 messages it waits for)."""
    steps: np.ndarray
    """Per clean unit: steps of its pass."""
    floor_s_per_byte: np.ndarray
    """Per clean unit: the least ``frac / bw`` over its messages' first hops (``frac``: the
    message's fraction of the buffer ``S``), so ``S * floor_s_per_byte + floor_lat_s`` is no
    more than any of its hops takes."""
    floor_lat_s: np.ndarray
    """Per clean unit: the least latency of its first hops."""
    first_nodes: np.ndarray
    """``(units, most members)``: each unit's step-0 messages, padded with its first one
    again (so a minimum or maximum over a row needs no mask)."""
    held_nodes: np.ndarray
    """The clean units' nodes: the window engine's event table before a run is ``inf`` (not
    yet), but ``-inf`` for these nodes' events (those the window engine settles are overwritten)."""
    initial_remaining: np.ndarray
    """Events each node waits for before a run, ``0`` for the clean units' later steps (the
    window engine counts them down only from step 0, to ``-1``: never ready for it)."""
    num_nodes: int
    """Nodes the clean units hold (the window engine's events saved)."""


def clean_units(sched, g, bw, lat):
    """The :class:`CleanUnits` of *sched* (``None`` if there are none); *g*: the window
    engine's tables of its structure (hops: ``path_links``, ``hop_node``, ``hop_link``);
    *bw*, *lat*: bandwidth and latency per link key."""
    layouts = sched.structure.layouts if sched.structure is not None else ()
    if sched.chunks != 1 or not layouts:
        return None
    unit, chain, lay, dirs, rings, sizes = _units(sched, layouts)
    if not len(lay):
        return None
    clean = np.flatnonzero(~_contended(sched, g, unit, chain, len(lay)))
    if not len(clean):
        return None
    new_id = np.full(len(lay) + 1, -1, np.int64)  # unit -> clean unit; the last slot: unit -1
    new_id[clean] = np.arange(len(clean))
    n, H, frac = sched.num_nodes, g.hops, sched.structure.frac
    lay, dirs, rings, sizes = lay[clean], dirs[clean], rings[clean], sizes[clean]
    start_unit = np.full(n, -1, np.int64)
    steps = np.zeros(len(clean), np.int64)
    floor_spb, floor_lat = np.zeros(len(clean)), np.zeros(len(clean))
    first_nodes = np.empty((len(clean), int(sizes.max())), np.int64)
    held_nodes = []
    initial_remaining = g.num_parents.copy()
    held = 0
    for L in layouts:
        ids = L.ids[:, 0]  # (N, D, R, m)
        u = new_id[unit[ids[0]]]  # (D, R, m), -1 outside clean units
        mine = u[:, :, 0] >= 0  # (D, R): the clean rings of this pass
        if not mine.any():
            continue
        start_unit[ids[0]] = u
        cu = u[:, :, 0][mine]
        steps[cu] = len(ids)
        # A ring pass sends every step over the same edges and each step's messages carry one
        # fraction (_sizes_per_step), so step 0's first hops and one member's fraction per step
        # give every message's frac / bw (the same divisions, hence the same minimum).
        first = g.path_links[ids[0] * H]  # (D, R, m) first-hop links
        floor_spb[cu] = (frac[ids[..., :1]] / bw[first][None]).min(axis=(0, 3))[mine]
        floor_lat[cu] = lat[first].min(axis=2)[mine]
        first_nodes[cu, : ids.shape[-1]] = ids[0][mine]
        first_nodes[cu, ids.shape[-1]:] = ids[0][mine][:, :1]  # padding: the first member again
        held_ids = ids[:, mine]  # (N, rings, m)
        held += held_ids.size
        held_nodes.append(held_ids.ravel())
        initial_remaining[held_ids[1:]] = 0
    return CleanUnits(start_unit=start_unit, layout=lay, direction=dirs, ring=rings, size=sizes, steps=steps,
                      floor_s_per_byte=floor_spb, floor_lat_s=floor_lat, first_nodes=first_nodes,
                      held_nodes=np.concatenate(held_nodes) if held_nodes else np.zeros(0, np.int64),
                      initial_remaining=initial_remaining, num_nodes=held)


def _units(sched, layouts):
    """Per node: its unit (``-1``: not a ring pass, always contended) and its chain of passes
    and line (2d-split runs two halves of passes at once; the directions of a line run at
    once too); and per unit: its pass, direction, ring and members."""
    n = sched.num_nodes
    unit = np.full(n, -1, np.int64)
    chain = np.zeros(n, np.int64)
    lines = max(max(L.ids.shape[2:4]) for L in layouts)  # more than any direction or ring index
    lay, dirs, rings, sizes = [], [], [], []
    for li, L in enumerate(layouts):
        N, K, D, R, m = L.ids.shape
        d, r = np.arange(D)[:, None, None], np.arange(R)[None, :, None]
        chain[L.ids] = (L.half * lines + d) * lines + r
        if L.pass_.pattern != "ring" or not _sizes_per_step(sched.structure, L):
            continue
        unit[L.ids] = len(lay) + d * R + r
        lay += [li] * (D * R)
        dirs += list(np.repeat(np.arange(D), R))
        rings += list(np.tile(np.arange(R), D))
        sizes += [m] * (D * R)
    return (unit, chain) + tuple(np.asarray(a, np.int64) for a in (lay, dirs, rings, sizes))


def _contended(sched, g, unit, chain, U):
    """Per unit: whether a link of it carries two streams, or a link of a contended unit.

    A stream (one number per hop) is one chain of passes and line, one sender, one path: its
    messages are ready in sequence order (one sender, one path, one line, and passes one
    after another, as a member starts a pass when it finished the previous one)."""
    hop_node, hop_link = g.hop_node, g.hop_link
    canon = {}
    path_canon = np.array([canon.setdefault(p, len(canon)) for p in sched.paths] + [-1], np.int64)
    senders = int(sched.rank.max()) + 1
    stream = ((path_canon[sched.path_id[hop_node]] * senders + sched.rank[hop_node]) * (int(chain.max()) + 1)
              + chain[hop_node])
    num_links = int(hop_link.max()) + 1 if len(hop_link) else 0
    kept = np.full(num_links, -1, np.int64)
    kept[hop_link] = stream  # one of each link's streams (whichever write numpy keeps)
    shared_link = np.bincount(hop_link, weights=stream != kept[hop_link], minlength=num_links) > 0
    hop_unit = unit[hop_node]
    hop_u = np.where(hop_unit >= 0, hop_unit, U)  # last slot: "not a unit", always contended

    def of_units(link_flags):
        flags = np.bincount(hop_u, weights=link_flags[hop_link], minlength=U + 1) > 0
        flags[U] = True
        return flags

    contended = of_units(shared_link)
    while True:  # closed over: a unit that shares a link with a contended unit is contended too
        grown = of_units(np.bincount(hop_link, weights=contended[hop_u], minlength=num_links) > 0)
        if (grown == contended).all():
            return contended[:U]
        contended = grown


def _sizes_per_step(structure, L):
    """Whether every message of a step of pass *L* has one size and one reduction time (as
    the schedule builds ring passes), so :func:`_one_hop` may take them per step."""
    N = L.ids.shape[0]
    per_step = L.ids.reshape(N, -1)
    return all((np.ptp(a[per_step], axis=1) == 0).all() for a in (structure.frac, structure.rho_frac))


def hop_floors(units, piece_bytes):
    """Per unit, a time no hop of it is quicker than, for pieces of ``S / K = piece_bytes``
    (a billionth below the quickest, so that float rounding cannot cross it)."""
    return (piece_bytes * units.floor_s_per_byte + units.floor_lat_s) * (1 - 1e-9)


def earliest_outputs(units, which, start_t, hop_floor):
    """Per unit of *which*, a time no later than any node outside it can become ready
    through it (*start_t*: step-0 ready times; *hop_floor*: per
    unit, no hop is quicker). Those nodes are the members' end-of-pass barriers, so:

    Member ``x``'s step ``k`` is ready no earlier than member ``x - j``'s start plus ``j``
    hops, for every ``j <= k``; member ``i``'s barrier waits for its own last step
    (``k = N - 1``) and for the delivery of the previous member's, so it is no earlier
    than member ``i - j``'s start plus ``j`` hops for every ``j <= N``. Hence no earlier
    than the first start plus ``N`` hops, and, as a ring pass has ``N >= m - 1`` steps
    for ``m`` members, no earlier than the last start.

    Units of several copies of one structure (see :func:`run_units`): unit ``c * U + u`` is
    copy ``c``'s unit ``u``, its nodes ``c * n + m``, *start_t* at least ``C * n`` long,
    *hop_floor* ``C * U``."""
    U, n = len(units.size), len(units.start_unit)
    u = which % U
    first = units.first_nodes.take(u, axis=0)
    starts = start_t[first + (which // U * n)[:, None]]  # each unit's copy's nodes
    earliest = starts.min(axis=1)
    size, steps = units.size[u], units.steps[u]
    paced = earliest + steps * hop_floor[which]
    last = np.where(steps >= size - 1, starts.max(axis=1), -np.inf)  # (padding repeats a member)
    return np.maximum(paced, last)


def run_units(units, which, layouts, start_t, *, nbytes, rho, bw, lat, path_links, path_len, H, link_free,
              copies=1, routing="store-and-forward"):
    """Run the clean units *which* (ids into *units*) whose members all started: *start_t*
    holds each step-0 message's ready time. Advances *link_free* and returns ``(events,
    times)``: the last step's events, which the nodes outside the units wait for (less the
    step-0 readiness the window engine has passed on itself).

    *copies* ``C``: the window engine runs ``C`` sizes of one structure at once, copy ``c``'s
    node ``m`` as ``c * n + m``, its link key ``k`` as ``c * NL + k`` and its unit ``u`` as
    ``c * U + u``: *nbytes*, *rho*, *start_t* are then per global node, *bw*, *lat*,
    *link_free* per global link key, *path_links* and *path_len* the structure's own (local).
    Events are numbered copy by copy: copy ``c``'s node ``m`` ready at ``2 * n * c + m``,
    delivered at ``2 * n * c + n + m``. *routing*: as the network's; it matters only on
    multi-hop edges (:func:`_any_hops`)."""
    U, n = len(units.size), len(path_len)
    num_links = len(bw) // copies
    out_e, out_t = [], []
    u_all, c_all = which % U, which // U
    # one call per pass: its directions share the step pattern (src_pos), so they run together
    key = units.layout[u_all]
    for k in np.flatnonzero(np.bincount(key)):  # (the passes present: a few, so no sort)
        sel = key == k
        u, c = u_all[sel], c_all[sel]
        L = layouts[int(k)]
        d, r = units.direction[u], units.ring[u]
        first = L.ids[0, 0][d, r]  # (U, m): step 0's nodes
        link_off = (c * num_links)[:, None] if copies > 1 else 0  # (U, 1): each row's copy's first link
        node_off = (c * n)[:, None] if copies > 1 else 0  # (U, 1): each row's copy's first node
        if (path_len[first] == 1).all():  # a ring pass sends over the same edges every step
            # (one hop: the recurrence reads step 0's nodes and one member's per step, not all)
            step_ids = L.ids[:, 0, :, :, 0][:, d, r]  # (N, U): member 0's node of each step
            ready, arrival = _one_hop(first, step_ids + c * n if copies > 1 else step_ids, link_off, L.src_pos,
                                      start_t[first + node_off], nbytes=nbytes, rho=rho, bw=bw, lat=lat,
                                      path_links=path_links, H=H, link_free=link_free)
        else:
            local = L.ids[:, 0][:, d, r]  # (N, U, m)
            ids = local + node_off[None] if copies > 1 else local
            ready, arrival = _any_hops(ids, local, link_off, L.src_pos, start_t[ids[0]], nbytes=nbytes, rho=rho,
                                       bw=bw, lat=lat, path_links=path_links, path_len=path_len, H=H,
                                       link_free=link_free, cut_through=routing == "cut-through")
        last = L.ids[-1, 0][d, r]
        last = (last + 2 * node_off if copies > 1 else last).ravel()  # the last step's ready events
        if len(L.ids) > 1:  # a step-0 message's readiness came from the window engine, which passed it on
            out_e.append(last)
            out_t.append(ready.ravel())
        out_e.append(n + last)
        out_t.append(arrival.ravel())
    return np.concatenate(out_e), np.concatenate(out_t)


def _one_hop(first, step_ids, link_off, src_pos, t, *, nbytes, rho, bw, lat, path_links, H, link_free):
    """Ready and arrival times ``(U, m)`` of the last step of units whose edges are single links
    (*first*: step 0's nodes, the structure's; *step_ids*: ``(N, U)`` one global node per step
    and unit; *link_off*: per row, its copy's link offset). On one hop both routings are the
    same recurrence."""
    links = path_links[first * H] + link_off
    free = link_free[links]
    link_bw = bw[links]
    hop_lat = lat[links]
    step_bytes = nbytes[step_ids]  # (N, U): one size per step and unit (see _sizes_per_step)
    step_rho = rho[step_ids]
    new_size = [True] + (step_bytes[1:] != step_bytes[:-1]).any(axis=1).tolist()
    reduces = step_rho.any(axis=1).tolist()
    for k in range(len(step_ids)):
        if new_size[k]:
            occ = step_bytes[k][:, None] / link_bw  # the network's own division
        np.maximum(t, free, out=free)  # each link carries this edge only: free when its last piece left
        free += occ
        a = free + hop_lat
        if k + 1 < len(step_ids):
            t = np.maximum(t, a.take(src_pos[k], axis=1))  # take: quicker than fancy indexing
            if reduces[k + 1]:
                t += step_rho[k + 1][:, None]  # adding 0 to the rows without one changes no bit
    link_free[links] = free
    return t, a


def _any_hops(ids, local, link_off, src_pos, t, *, nbytes, rho, bw, lat, path_links, path_len, H, link_free,
              cut_through=False):
    """:func:`_one_hop` for units with multi-hop edges (a mesh's folded ring, routed edges).

    Cut-through (the network's rule): per hop ``start = max(head, link_free)``, ``end =
    max(start + occ, tail)``; the head moves on at ``start + lat``, the tail at ``end + lat``,
    which is the arrival after the last hop (*a* holds heads, *v* tails)."""
    for k in range(len(ids)):
        nodes = ids[k]
        a = t.copy()
        v = np.full_like(a, -np.inf) if cut_through else a
        lengths = path_len[local[k]]
        for h in range(int(lengths.max())):
            on = lengths > h
            at = nodes[on]
            li = path_links[local[k][on] * H + h]
            if ids is not local:  # several copies: each row's link offset
                li = li + np.broadcast_to(link_off, on.shape)[on]
            if cut_through:
                start = np.maximum(a[on], link_free[li])
                end = np.maximum(start + nbytes[at] / bw[li], v[on])
                a[on] = start + lat[li]
                v[on] = end + lat[li]
            else:
                end = np.maximum(a[on], link_free[li]) + nbytes[at] / bw[li]
                a[on] = end + lat[li]
            link_free[li] = end
        a = v  # the tails' arrivals (store-and-forward: v is a)
        if k + 1 < len(ids):
            t = np.maximum(t, a.take(src_pos[k], axis=1)) + rho[ids[k + 1]]
    return t, a
