"""Exact event times of any compiled schedule, contended or not: the SimPy engine's timing
model, run many events at a time in time windows over numpy arrays.

The fast engine (:mod:`.fast_engine`) needs every link to serve one sender's messages in an
order known beforehand. Where messages contend (detours around failed links, halving- and
recursive-doubling partners, both directions of a mesh line, 2d-split halves), the order a
link serves in depends on the times, and the SimPy engine (:mod:`.simpy_engine`) finds it
one event at a time. This engine finds the same order a window of events at a time, by the
conservative rule of parallel discrete-event simulation (the *lookahead* of Chandy and
Misra, 1979; the *bounded lag* of Lubachevsky, 1989):

A hop requested at time ``r`` on a link that it occupies for ``o`` seconds, with latency
``lat``, starts no earlier than ``max(r, link_free)`` (the link's free time now, which only
grows) and so reaches the next chip (store-and-forward) no earlier than ``max(r, link_free) +
o + lat``, and everything that arrival causes (the next hop, a delivery, the messages a
delivery makes ready, a reduction) happens no earlier. So with ``E`` the least such bound over
every pending request, no request that is not yet known can be ready before ``E``, and every
pending request with ``tie_key(r) < tie_key(E)`` can be served now. A window serves them
on each link in the network's order ``(tie_key(r), rank, seq)`` (see
:mod:`wus_sim.hardware.network`) with the network's float operations::

    start = max(r, link_free);  end = start + nbytes / bw;  link_free = end
    arrival = end + lat                    # the next hop's request, or the delivery

so times agree with the SimPy engine's to the last bits. Deliveries then resolve the
schedule's dependencies (:class:`.messages.Schedule`: a node is ready at the latest of its
parents' times plus its reduction time; a barrier is delivered when ready), counted off per
node as its events happen, and the new messages join the pending requests. (The one place the floats can differ: two parents whose
times share a tie key but not their last bits; this engine takes the later, SimPy the one it
handled last.) A window holds about one algorithm step of every ring at once, so a
2048-chip all-reduce takes a few hundred windows of array operations instead of a quarter
of a million SimPy events; its speed is in ``wus-sim bench``.

Rings that no contention reaches (every link of theirs carries one stream, and none of a
contended ring's) do not go event by event: :mod:`.clean_rings` runs each whole once its
members have started, with the same float operations, and hands back the events others wait
for (``run_schedule(..., clean_rings=False)`` runs everything event by event, for checking).

A window costs a few dozen numpy calls whatever it holds, so :func:`run_schedules` runs the
sizes of one plan (a step's buckets) together, each in its own window, as copies that share
no node and no link: the calls are paid once per window for all of them.

Cut-through routing (``routing="cut-through"``, the network's rule): a hop also carries the
time the message's tail reaches it, ``end = max(start + nbytes / bw, tail)``, and the head
requests the next hop at ``start + lat`` (the tail following at ``end + lat``); a last hop
delivers at ``end + lat``. So the lookahead of a request that is not a last hop is
``max(r, link_free) + lat`` (its head can reach the next link no earlier), of a last hop still
``max(r, link_free) + o + lat``: windows are shorter, the rule the same.

Limit: a window must hold something, which fails only when a hop plus its latency is
shorter than the tie quantum (store-and-forward), or a multi-hop message crosses a link of
no latency (cut-through: on-chip links, or a slice declared with zero hop latency)
(:class:`WindowTooSmall`). The api runs SimPy then.
"""

from dataclasses import dataclass, field
from functools import cached_property
import time

import numpy as np

from ...hardware.network import check_routing, link_key_Bps, link_key_latency_s, tie_key
from .clean_rings import earliest_outputs, hop_floors, run_units
from .malloc_tuning import keep_freed_memory
from .window_copies import Copies, SizedNodes, sparse_tile
from .window_steps import serve, settle
from .window_tables import clean_units_of, graph_of, link_counters

__all__ = ["WindowOutcome", "WindowTooSmall", "run_schedule", "run_schedules"]


class WindowTooSmall(Exception):
    """No pending request fits in the next window (a hop and its latency shorter than the
    tie quantum): the lookahead gives nothing, so the schedule needs the event-by-event engine."""


@dataclass
class WindowOutcome:
    """What :func:`run_schedule` returns (the fields of the SimPy engine's outcome); one per
    schedule from :func:`run_schedules`."""

    time_s: float
    """Completion time: the last node ready or delivered."""
    events: int
    """Message hops sent (one per message per link)."""
    windows: int
    """Time windows the run took (in a batch: those that served this schedule, which are the
    windows it takes alone)."""
    wall_s: float
    """Wall-clock seconds of the run (not the schedule build; in a batch, the whole batch's)."""
    _counted: tuple = field(default=None, repr=False, compare=False)
    """What the link counters are read from: the schedule, its engine tables and the
    bandwidth per link key (they need no timing, and most callers want the time only)."""
    _event_log: tuple = field(default=None, repr=False, compare=False)
    """What :attr:`event_s` is read from: the clean rings' nodes (their events ``-inf``, the
    others ``inf`` before the run; ``None``: no clean rings), the run's event log (``(events,
    times)`` arrays, events numbered globally), this copy's first event, and its number of nodes."""

    @cached_property
    def _link_counters(self):
        return link_counters(*self._counted)

    @property
    def link_bytes(self):
        """Bytes sent per link key (ICI slots, then on-chip links)."""
        return self._link_counters[0]

    @property
    def link_busy_s(self):
        """Seconds each link key was busy."""
        return self._link_counters[1]

    @property
    def link_messages(self):
        """Messages sent per link key."""
        return self._link_counters[2]

    @cached_property
    def event_s(self):
        """When each event happened: node ``m`` ready at ``m``, delivered at ``num_nodes + m``
        (``-inf`` inside clean rings, where only the events others wait for are kept)."""
        held, event_log, first, n = self._event_log
        logged_e, logged_t = _logged(event_log)
        out = np.full(2 * n, np.inf)
        if held is not None:
            out[held] = out[n + held] = -np.inf
        mine = (logged_e >= first) & (logged_e < first + 2 * n)
        out[logged_e[mine] - first] = logged_t[mine]
        return out


def run_schedule(sched, *, clean_rings=True, routing="store-and-forward"):
    """Simulate *sched* (a :class:`~wus_sim.collectives.schedules.messages.Schedule`) with *routing*
    (``"store-and-forward"`` or ``"cut-through"``); the same times as
    :func:`wus_sim.collectives.engines.simpy_engine.run_schedule` (to the last bits).
    *clean_rings*: run the rings no contention reaches as whole units (:mod:`.clean_rings`)
    instead of event by event; the times are the same."""
    return run_schedules([sched], clean_rings=clean_rings, routing=routing)[0]


def run_schedules(scheds, *, clean_rings=True, routing="store-and-forward"):
    """:func:`run_schedule` of every schedule in *scheds*, in one run: a :class:`WindowOutcome`
    per schedule, each the same as that schedule's run alone (times to the last bit, events,
    link counters, windows). The schedules must share one structure (one plan and chunks,
    sized for different ``S`` or reduction costs; ``messages.compile_messages`` shares it).

    Why: a window costs a few dozen numpy calls whatever it holds, and a 2048-chip all-reduce
    takes about two hundred windows; the sizes of one plan take about as many, so running
    them together pays those calls once. The ``C`` copies are one graph of ``C * n`` nodes
    that never meet: copy ``c``'s node ``m`` is ``c * n + m``, its link key ``k`` is
    ``c * NL + k``, its clean unit ``u`` is ``c * U + u``; the size-free tables stay the
    structure's own, indexed through these offsets. Each copy keeps its own window (the
    least ``r + o + lat`` over its own pending requests), so it serves exactly what it
    would alone; a clean unit may run earlier than alone (when another copy needs its
    clean units run), which moves no time (its links are private, and what it hands back
    is no earlier than its copy's next window). :class:`WindowTooSmall` if any copy's window
    holds nothing (that schedule would raise alone). ``wall_s`` is the whole run's."""
    t0 = time.perf_counter()
    if not len(scheds):
        return []
    keep_freed_memory()  # a run's arrays are freed and asked for again by the next: see malloc_tuning
    cut = check_routing(routing) == "cut-through"
    sched = scheds[0]
    C = len(scheds)
    if C > 1 and any(s.structure is None or s.structure is not sched.structure for s in scheds):
        raise ValueError("run_schedules runs schedules of one shared structure (compile_messages of one plan)")
    g = graph_of(sched)
    units = clean_units_of(sched, g) if clean_rings else None
    topo = sched.plan.topology
    n, H = g.num_nodes, g.hops
    N = C * n  # nodes of all copies (events: see window_copies.Copies)
    bw1 = link_key_Bps(topo)
    NL = len(bw1)
    bw = bw1 if C == 1 else np.tile(bw1, C)
    lat = link_key_latency_s(topo)
    lat = lat if C == 1 else np.tile(lat, C)
    rank = sched.rank  # per local node (the same in every copy)
    if C == 1:
        nbytes, rho = sched.msg_bytes, sched.rho
    else:
        nbytes = SizedNodes(sched.frac, [s.nbytes for s in scheds], sched.chunks)
        if all(s.reduce_Bps is None for s in scheds):  # no reductions timed: one zero seen N times
            rho = np.broadcast_to(0.0, N)  # (read only: nothing writes rho)
        elif all(s.reduce_Bps is not None for s in scheds):
            rho = SizedNodes(sched.rho_frac, [s.nbytes for s in scheds], sched.chunks, [s.reduce_Bps for s in scheds])
        else:
            rho = np.concatenate([s.rho for s in scheds])
    rho_settle = None if all(s.reduce_Bps is None for s in scheds) else rho
    path_links, path_len, is_message = g.path_links, g.path_len, g.is_message
    copies = Copies(C, n, NL)
    # When each event happened: (events, times) arrays in the order they were settled; the
    # outcomes read them into each copy's table only if asked (most runs want the last time).
    event_log = []
    if units is None:
        remaining = np.tile(g.num_parents, C)  # events each node still waits for
    else:  # a clean ring's later steps wait for nothing the engine counts (see CleanUnits)
        remaining = sparse_tile(units.initial_remaining, C, sched.structure.engine_tables)
    # The latest time among a node's events so far. Every time is >= 0 (they start at 0 and only
    # add and take maxima), so a start at 0 instead of -inf changes no maximum, and zeros come
    # from pages the system maps only once they are written: the nodes inside clean rings,
    # which the engine never touches, cost nothing.
    latest = np.zeros(N)
    link_free = np.zeros(len(bw))
    owner = np.zeros(max(len(bw), N), np.int64)  # scratch: which element wrote an index last
    on_busy_link = np.zeros(len(bw), bool)

    first = []  # first hops requested since the last window: (node, ready time) arrays
    new = []  # later hops: (node, hop, ready time, tail) arrays
    if units is not None:
        U = len(units.size)
        # step-0 ready times of the clean units' members; only those of units whose members
        # all started are read, so the rest need no value (and no page)
        start_t = np.empty(N)
        waiting_for = np.tile(units.size, C)  # members each clean unit still waits for
        # no hop of a unit is quicker than this; 1e-9 below it, so float rounding cannot cross it
        hop_floor = np.concatenate([hop_floors(units, s.nbytes / s.chunks) for s in scheds])
        startable = []  # clean units whose members have all started, not run yet
        earliest = np.full(C, np.inf)  # per copy: no event a startable unit hands back is earlier
        starts_unit = units.start_unit >= 0  # (a byte a node: the lookup a ready message makes stays in cache)

    def request(nodes, t, local=None):
        """Messages *nodes* (*local*: their structure's nodes, if known) are ready at *t*: a
        clean unit's member counts off its unit, the others request their first hop."""
        if units is not None:
            local = copies.local(nodes) if local is None else local
            mine = starts_unit[local]
            if np.count_nonzero(mine):  # (quicker than .any(): see window_steps)
                mn = nodes[mine]
                start_t[mn] = t[mine]
                u = units.start_unit[local[mine]]
                if C > 1:
                    u += copies.of(mn) * U
                np.subtract.at(waiting_for, u, 1)
                full = u[waiting_for[u] == 0]
                if len(full):
                    if len(full) > 1:  # a unit two of whose members started now is listed twice: keep one
                        pos = np.arange(len(full))
                        owner[full] = pos
                        full = full[owner[full] == pos]
                    startable.append(full)
                    bound = earliest_outputs(units, full, start_t, hop_floor)
                    if C == 1:
                        earliest[0] = min(earliest[0], bound.min())
                    else:
                        np.minimum.at(earliest, full // U, bound)
                nodes, t = nodes[~mine], t[~mine]
        if len(nodes):
            first.append((nodes, t))

    def settle_events(events, t):
        settle(events, t, g, copies, event_log, remaining, latest, owner, rho_settle, request)

    def run_startable():
        """Run the startable clean units and pass their outputs on."""
        which = np.concatenate(startable)
        startable.clear()
        earliest[:] = np.inf
        settle_events(*run_units(units, which, sched.structure.layouts, start_t, nbytes=nbytes, rho=rho, bw=bw, lat=lat,
                          path_links=path_links, path_len=path_len, H=H, link_free=link_free, copies=C,
                          routing=routing))

    roots = g.roots if C == 1 else (g.roots[None, :] + n * np.arange(C)[:, None]).ravel()
    t_roots = 0.0 + rho[roots]
    msg = is_message[copies.local(roots)]
    request(roots[msg], t_roots[msg])
    settle_events(np.concatenate([copies.ready(roots), copies.delivered(roots[~msg])]),
           np.concatenate([t_roots, t_roots[~msg]]))

    # The pending requests, one column each, in two stacked tables (a window's selection is then
    # a few takes, not a boolean mask per field). Integer rows: node, hop, link. Float rows: ready
    # time, occupancy, tie key, when the tail reaches the hop (cut-through; -inf on hop 0), then
    # what the hop adds to its start before anything it causes can happen: its occupancy (or 0
    # for a cut-through head that moves on), then the latency.
    pend_i, pend_f = np.zeros((3, 0), np.int64), np.zeros((6, 0))
    windows = 0 if C == 1 else np.zeros(C, np.int64)  # per copy: the windows that served something of it
    no_window = np.full(C, np.inf)
    while True:
        if first:  # hop 0 of each, with no tail to wait for under cut-through
            fn = np.concatenate([a for a, _ in first]) if len(first) > 1 else first[0][0]
            ft = np.concatenate([b for _, b in first]) if len(first) > 1 else first[0][1]
            tail = None
            if cut:
                tail = np.empty(len(fn))
                tail.fill(-np.inf)  # (np.full does this in Python, slower)
            new.append((fn, np.zeros(len(fn), np.int64), ft, tail))
            first.clear()
        if new:
            fresh = np.concatenate([a for a, _, _, _ in new]) if len(new) > 1 else new[0][0]
            hop = np.concatenate([b for _, b, _, _ in new]) if len(new) > 1 else new[0][1]
            t = np.concatenate([c for _, _, c, _ in new]) if len(new) > 1 else new[0][2]
            local = copies.local(fresh)
            links = path_links[local * H + hop]
            if C > 1:
                links = links + copies.of(fresh) * NL
            occ = nbytes[fresh] / bw[links]  # the network's own division
            if cut:  # a head moves on a latency after its hop starts; only a last hop waits for its tail
                tail = np.concatenate([v for _, _, _, v in new]) if len(new) > 1 else new[0][3]
                wait = np.where(hop + 1 == path_len[local], occ, 0.0)
            else:
                tail, wait = t, occ  # (no tail under store-and-forward: the row is not read)
            # (np.array of equal rows: a stack without np.stack's Python-level checks)
            add_i, add_f = np.array([fresh, hop, links]), np.array([t, occ, tie_key(t), tail, wait, lat[links]])
            if pend_i.shape[1]:
                pend_i, pend_f = np.concatenate([pend_i, add_i], axis=1), np.concatenate([pend_f, add_f], axis=1)
            else:
                pend_i, pend_f = add_i, add_f
            new.clear()
        pn, pt, pl = pend_i[0], pend_f[0], pend_i[2]
        # The lookahead: a pending hop starts no earlier than its ready time and its link's free
        # time now (which only grows), so nothing it causes comes before (that + wait) + latency,
        # with the network's float operations in their order (monotone, so no rounding crosses
        # the bound).
        pe = (np.maximum(pt, link_free[pl]) + pend_f[4]) + pend_f[5]
        if C == 1:
            E = pe.min() if len(pn) else np.inf
            run_units_now = units is not None and startable and earliest[0] <= E
        else:  # each copy's own window: the least r + o + lat over its own pending requests
            pc = copies.of(pn)
            E = no_window.copy()  # (a copy: np.full costs more, in Python)
            np.minimum.at(E, pc, pe)
            run_units_now = units is not None and startable and bool(((earliest < np.inf) & (earliest <= E)).any())
        if run_units_now:
            # a clean unit's outputs may fall in the next window: run the startable ones first.
            # Otherwise they wait and gather, so that a few calls run many units at once.
            run_startable()
            continue
        if not len(pn):
            break
        if C == 1:
            windows += 1
            sel = pend_f[2] < tie_key(E)
        else:
            windows += E < np.inf
            sel = pend_f[2] < tie_key(E)[pc]
        selected = np.count_nonzero(sel)
        if selected == len(sel):
            si, sf = pend_i, pend_f
            pend_i, pend_f = pend_i[:, :0], pend_f[:, :0]
        else:
            if not selected or (C > 1 and (np.bincount(pc[sel], minlength=C)[E < np.inf] == 0).any()):
                raise WindowTooSmall("a hop and its latency are shorter than the tie quantum")
            # take along the columns: far quicker than a boolean mask over a 2-D table
            on, off = sel.nonzero()[0], (~sel).nonzero()[0]
            si, sf = pend_i.take(on, axis=1), pend_f.take(on, axis=1)
            pend_i, pend_f = pend_i.take(off, axis=1), pend_f.take(off, axis=1)
        sn, sh, sl = si
        st, so, sk, sv = sf[0], sf[1], sf[2], sf[3]
        start, end = serve(sn, st, sl, so, sk, sv if cut else None, rank, copies, link_free, owner,
                            on_busy_link)
        arrival = end + lat[sl]  # the tail's (store-and-forward: the whole message's) arrival
        nh = sh + 1
        more = nh < path_len[copies.local(sn)]
        if np.count_nonzero(more):
            # cut-through: the head moves on a latency after the hop starts, the tail follows
            new.append((sn[more], nh[more], (start[more] + lat[sl[more]]) if cut else arrival[more],
                        arrival[more] if cut else None))
            done = ~more
            settle_events(copies.delivered(sn[done]), arrival[done])
        else:
            settle_events(copies.delivered(sn), arrival)
    if (remaining > 0).any():
        raise AssertionError(f"{int((remaining > 0).sum())} schedule nodes never became ready (a dependency cycle)")
    wall = time.perf_counter() - t0
    if g.last_barriers is not None:  # each copy's last event: its last barriers' readiness
        last = g.last_barriers[None, :] + n * np.arange(C)[:, None]
        last_s = (latest[last] + rho[last]).max(axis=1)
    else:  # ... or the latest event it logged (the engine logs no event inside a clean ring)
        logged_e, logged_t = _logged(event_log)
        last_s = np.full(C, -np.inf)
        np.maximum.at(last_s, logged_e // (2 * n), logged_t)
    held = units.held_nodes if units is not None else None
    out = []
    for c, s in enumerate(scheds):
        out.append(WindowOutcome(
            time_s=float(last_s[c]) if n else 0.0, events=int(path_len.sum()),
            windows=int(windows if C == 1 else windows[c]), wall_s=wall, _counted=(s, g, bw1),
            _event_log=(held, event_log, 2 * n * c, n)))
    return out


def _logged(event_log):
    """The events and times of *event_log*, each as one array."""
    if not event_log:
        return np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate([e for e, _ in event_log]), np.concatenate([t for _, t in event_log])
