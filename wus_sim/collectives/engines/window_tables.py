"""The size-free tables the window engine (:mod:`.window_engine`) runs a schedule on, built
once per schedule structure and kept on it: its dependency graph and hop table
(:class:`WindowGraph`), its clean rings (:mod:`.clean_rings`), and the link counters, which
need no timing (which links a message crosses is fixed).
"""

from dataclasses import dataclass
import itertools

import numpy as np

from ...hardware.network import link_key_Bps, link_key_latency_s
from .clean_rings import clean_units

__all__ = ["NO_CHILD", "WindowGraph", "clean_units_of", "graph_of", "link_counters"]

NO_CHILD = -(1 << 62)
"""Padding of :attr:`WindowGraph.children`: negative, and still negative when the window
engine adds a copy's node offset to it (:func:`.window_engine.run_schedules`)."""


@dataclass(frozen=True, eq=False)
class WindowGraph:
    """The size-free tables of a schedule's structure (built once per structure)."""

    num_nodes: int
    num_parents: np.ndarray
    """Per node: the events it waits for (``m`` = node m ready, ``n + m`` = node m delivered)."""
    children: np.ndarray
    """``(2n, W)`` nodes that wait for each event (:data:`NO_CHILD` pads)."""
    first_child: np.ndarray
    """``children[:, 0]``, contiguous: nearly every event has one child (a step's message
    waits for its own previous step and its neighbour's delivery), so the window engine
    reads this column and the rest only for the events in :attr:`more_children`."""
    more_children: np.ndarray
    """Per event: whether it has a second child (``None`` when none has)."""
    path_links: np.ndarray
    """``(n * H,)`` link key of hop ``h`` of node ``m`` at ``m * H + h`` (``-1`` past its path)."""
    hops: int
    """``H``: the longest path."""
    path_len: np.ndarray
    """Per node: hops of its path (0 for a barrier)."""
    is_message: np.ndarray
    roots: np.ndarray
    """Nodes that wait for nothing."""
    hop_node: np.ndarray
    """Every message hop (in node order): its node."""
    hop_link: np.ndarray
    """Every message hop: its link key."""
    last_barriers: np.ndarray = None
    """The barrier nodes whose events no node waits for, when every such event is a barrier's
    (else ``None``). Every other event has a node waiting for it, ready no earlier, so the
    schedule's last event is one of these nodes' readiness: ``latest + rho``."""


def _children(deps, n):
    """``(2n, W)``: the nodes waiting for each event (``m`` = node m ready, ``n + m`` = node m
    delivered), :data:`NO_CHILD` padded; its first column, contiguous; per event, whether it
    has more than one child; the number of events each node waits for; and the events no
    node waits for.

    An event's children may sit in any order (the engine counts them off as a set), so no
    sort: one dep of each event takes column 0, and only the few left over (events with
    several children) are sorted into the other columns."""
    if deps:
        child = np.concatenate([d[0] for d in deps])
        event = np.concatenate([d[1] + n * (d[2] == 0) for d in deps])
    else:
        child = event = np.zeros(0, np.int64)
    counts = np.bincount(event, minlength=2 * n)
    W = max(int(counts.max()) if len(counts) else 0, 1)
    pos = np.arange(len(event))
    owner = np.empty(2 * n, np.int64)  # read only where written
    owner[event] = pos
    won = owner[event] == pos  # one dep per event (whichever write numpy keeps)
    first = np.full(2 * n, NO_CHILD, np.int64)
    first[event[won]] = child[won]
    table = np.full((2 * n, W), NO_CHILD, np.int64)
    table[:, 0] = first
    rest = np.flatnonzero(~won)
    if len(rest):  # the others of each event in columns 1, 2, ...
        ev = event[rest]
        order = np.argsort(ev, kind="stable")
        ev_sorted = ev[order]
        starts = np.flatnonzero(np.r_[True, ev_sorted[1:] != ev_sorted[:-1]])
        slot = np.arange(len(ev)) - np.repeat(starts, np.diff(np.r_[starts, len(ev)]))
        table[ev_sorted, 1 + slot] = child[rest[order]]
    return table, first, counts > 1, np.bincount(child, minlength=n), np.flatnonzero(counts == 0)


def _graph(sched):
    """The :class:`WindowGraph` of *sched* (size-free)."""
    n = sched.num_nodes
    children, first_child, more_children, ndeps, sinks = _children(sched.deps, n)
    lengths = np.array([len(p) for p in sched.paths] + [0], np.int64)
    H = max(int(lengths.max()), 1)
    table = np.full((len(sched.paths) + 1, H), -1, np.int64)
    row = np.repeat(np.arange(len(lengths)), lengths)
    table[row, np.arange(len(row)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = \
        np.fromiter(itertools.chain.from_iterable(sched.paths), np.int64, len(row))
    pid = sched.path_id
    path_len = lengths[pid]
    last = sinks % n  # nodes of the events no node waits for (a barrier twice: harmless in a maximum)
    last = last if not path_len[last].any() else None
    path_links = table.take(pid, axis=0).ravel()  # (take: quicker than fancy indexing of rows)
    return WindowGraph(num_nodes=n, num_parents=np.asarray(ndeps, np.int64), children=children,
                       first_child=first_child, more_children=more_children if children.shape[1] > 1 else None,
                       path_links=path_links, hops=H, path_len=path_len, is_message=path_len > 0,
                       roots=np.flatnonzero(ndeps == 0), hop_node=np.repeat(np.arange(n), path_len),
                       hop_link=path_links[path_links >= 0],  # link keys are >= 0, -1 pads
                       last_barriers=last if last is not None and len(last) else None)


def graph_of(sched):
    """The :class:`WindowGraph` of *sched*, kept on the schedule's shared structure when it has one."""
    if sched.structure is None:
        return _graph(sched)
    tables = sched.structure.engine_tables
    if "window" not in tables:
        tables["window"] = _graph(sched)
    return tables["window"]


def clean_units_of(sched, g):
    """:func:`.clean_rings.clean_units` of *sched* (*g*: its :func:`graph_of`), kept on the
    schedule's shared structure; ``None`` for a schedule built without one."""
    if sched.structure is None:
        return None
    tables = sched.structure.engine_tables
    if "clean rings" not in tables:
        topo = sched.plan.topology
        tables["clean rings"] = clean_units(sched, g, link_key_Bps(topo), link_key_latency_s(topo))
    return tables["clean rings"]


def link_counters(sched, g, bw):
    """Bytes, busy seconds and messages per link key. Which links a message crosses is fixed,
    so they need no timing: per structure, the sums of the messages' fractions of ``S / K``
    (and of those over the link's bandwidth), scaled by this size's ``S / K``."""
    size = len(bw)
    if sched.structure is None:
        per_piece, frac = 1.0, sched.msg_bytes
    else:
        per_piece, frac = sched.nbytes / sched.chunks, sched.structure.frac
        if "window counters" in sched.structure.engine_tables:
            link_frac, link_frac_s, messages = sched.structure.engine_tables["window counters"]
            return link_frac * per_piece, link_frac_s * per_piece, messages
    hop_link = g.hop_link
    hop_frac = frac[g.hop_node]
    tables = (np.bincount(hop_link, weights=hop_frac, minlength=size),
              np.bincount(hop_link, weights=hop_frac / bw[hop_link], minlength=size),
              np.bincount(hop_link, minlength=size))
    if sched.structure is not None:
        sched.structure.engine_tables["window counters"] = tables
    return tables[0] * per_piece, tables[1] * per_piece, tables[2]
