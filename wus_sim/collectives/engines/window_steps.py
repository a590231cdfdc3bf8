"""What one window of the window engine (:mod:`.window_engine`) does with its requests and
events: serve each link's requests in the network's order (:func:`serve`) and count
deliveries and readiness off the nodes waiting for them (:func:`settle`). Both work on the
engine's global nodes (copies of one structure, see :class:`.window_copies.Copies`)."""

import numpy as np

__all__ = ["serve", "settle"]


# Bool tests on the hot paths use np.count_nonzero and ndarray.nonzero: a few times quicker
# than .any(), .all() and np.flatnonzero on the small arrays of a window (their cost is the call).

_SMALL = 24
"""Below this many events, :func:`settle` resolves them one at a time in Python: a cascade of
readiness along one member's steps (a member that starts late finds its pieces there already)
is a chain of tiny batches, where array calls cost more than the work."""


def settle(events, t, g, copies, event_log, remaining, latest, owner, rho, request):
    """Events *events* happened at times *t*: log them (``(events, times)`` arrays appended to
    *event_log*), count them off the nodes waiting for them
    (*remaining*, *latest* = the latest time among their events so far), and *request* the
    first hop of every message whose last event this was. Nodes and events are global
    (*copies*: see :func:`.window_engine.run_schedules`); *g*'s tables are the structure's own.
    *rho*: per node, its reduction time, or ``None`` when none takes time (adding 0 to a time
    changes no bit, so it is skipped)."""
    children, first_child, more_children, is_message = g.children, g.first_child, g.more_children, g.is_message
    n, C = copies.nodes, copies.count
    W = children.shape[1]
    while len(events):
        if len(events) < _SMALL:
            return _settle_one_by_one(events.tolist(), t.tolist(), g, copies, event_log, remaining, latest, rho,
                                      request)
        event_log.append((events, t))
        # each event's first child, moved to the event's copy (padding stays < 0); then the
        # others of the few events that have more
        if C == 1:
            local = events
            ch = first_child.take(events)
        else:
            c, local = np.divmod(events, 2 * n)
            ch = first_child.take(local)
            ch += c * n
        has = ch >= 0
        waiting, tw = ch[has], t[has]
        multi = more_children.take(local).nonzero()[0] if more_children is not None else ()
        if len(multi):
            # (take along an axis: far quicker than fancy indexing for rows of a 2-D table)
            rest = children.take(local[multi], axis=0)[:, 1:]
            if C > 1:
                rest = rest + (c[multi] * n)[:, None]
            rest = rest.ravel()
            has = rest >= 0
            waiting = np.concatenate([waiting, rest[has]])
            tw = np.concatenate([tw, np.repeat(t[multi], W - 1)[has]])
        if not len(waiting):
            return
        np.maximum.at(latest, waiting, tw)
        np.subtract.at(remaining, waiting, 1)
        ready = waiting[remaining[waiting] == 0]
        if not len(ready):
            return
        if len(ready) > 1:  # a node listed twice is ready twice: keep one listing (the one owner keeps)
            pos = np.arange(len(ready))
            owner[ready] = pos
            once = owner[ready] == pos
            if np.count_nonzero(once) < len(once):
                ready = ready[once]
        tr = latest[ready] if rho is None else latest[ready] + rho[ready]
        local = copies.local(ready)
        msg = is_message[local]
        # every new node's readiness is an event; a barrier is delivered at once
        events = ready if C == 1 else 2 * ready - local  # copies.ready: ready + (its copy) * n
        messages = np.count_nonzero(msg)
        if messages == len(msg):
            request(ready, tr, local)
            t = tr
        else:
            if messages:
                request(ready[msg], tr[msg], local[msg])
            barrier = ~msg
            events = np.concatenate([events, events[barrier] + n])  # (delivered: n after ready)
            t = np.concatenate([tr, tr[barrier]])


def _settle_one_by_one(events, times, g, copies, event_log, remaining, latest, rho, request):
    """:func:`settle` for a few events, in Python (the same rule: a node is ready at the
    latest of its events' times plus its reduction time; a barrier is delivered then)."""
    children, is_message = g.children, g.is_message
    n = copies.nodes
    stack = list(zip(events, times))
    new_nodes, new_times = [], []
    log_e, log_t = [], []
    while stack:
        e, t = stack.pop()
        log_e.append(e)
        log_t.append(t)
        base = e // (2 * n) * n  # the event's copy's first node (its first event is 2 * base)
        for c in children[e - 2 * base].tolist():
            if c < 0:
                continue
            c += base
            if t > latest[c]:
                latest[c] = t
            k = remaining[c] - 1
            remaining[c] = k
            if k:
                continue
            tr = latest.item(c) if rho is None else latest.item(c) + rho.item(c)
            stack.append((c + base, tr))  # its ready event
            if is_message[c - base]:
                new_nodes.append(c)
                new_times.append(tr)
            else:
                stack.append((c + base + n, tr))
    event_log.append((np.array(log_e, np.int64), np.array(log_t)))
    if new_nodes:
        request(np.array(new_nodes, np.int64), np.array(new_times))


def _hop(ready, free, occ, tail):
    """Start and end of hops the network's way: ``start = max(ready, free)``, ``end = start + occ``
    (cut-through, *tail* not ``None``: no earlier than the tail's arrival, ``max(start + occ, tail)``)."""
    start = np.maximum(ready, free)
    end = start + occ
    return start, (end if tail is None else np.maximum(end, tail))


def serve(nodes, ready, links, occ, keys, tail, rank, copies, link_free, owner, on_busy_link):
    """Start and end times of one window's requests, each link serving in ``(tie key, rank,
    seq)`` order; *link_free* updated in place (*tail*: per request, when its tail reaches
    the hop under cut-through, else ``None``; *rank*: per node of the structure; *nodes*
    global, see :class:`.window_copies.Copies`: a link never carries two copies' requests, so the global
    node orders like the local). *owner* and *on_busy_link* are scratch arrays."""
    m = len(nodes)
    pos = np.arange(m)
    owner[links] = pos
    shared = owner[links] != pos  # not the last request on its link: the link has several
    if not np.count_nonzero(shared):
        start, end = _hop(ready, link_free[links], occ, tail)
        link_free[links] = end
        return start, end
    on_busy_link[links[shared]] = True
    many = on_busy_link[links]
    on_busy_link[links] = False
    start, end = np.empty(m), np.empty(m)
    one = ~many
    if np.count_nonzero(one):
        li = links[one]
        s, e = _hop(ready[one], link_free[li], occ[one], None if tail is None else tail[one])
        link_free[li] = e
        start[one], end[one] = s, e
    # the links with several requests: serve the i-th of every such link together, i = 0, 1, ...
    idx = many.nonzero()[0]
    idx = idx[np.lexsort((nodes[idx], rank[copies.local(nodes[idx])], keys[idx], links[idx]))]
    li = links[idx]
    first = np.empty(len(idx), bool)  # (np.ones: slower, in Python)
    first[0] = True
    first[1:] = li[1:] != li[:-1]
    rank_in_link = np.arange(len(idx)) - np.maximum.accumulate(np.where(first, np.arange(len(idx)), 0))
    for i in range(int(rank_in_link.max()) + 1):
        at = idx[rank_in_link == i]
        la = links[at]
        s, e = _hop(ready[at], link_free[la], occ[at], None if tail is None else tail[at])
        link_free[la] = e
        start[at], end[at] = s, e
    return start, end
