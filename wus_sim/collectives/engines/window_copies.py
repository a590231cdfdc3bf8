"""How :func:`.window_engine.run_schedules` runs ``C`` sizes of one schedule structure in one
run: as copies that share no node and no link (:class:`Copies`), whose per-node values are
computed where read (:class:`SizedNodes`) and whose counters start from one structure's
(:func:`sparse_tile`)."""

from dataclasses import dataclass

import numpy as np

__all__ = ["Copies", "SizedNodes", "sparse_tile"]


@dataclass(frozen=True)
class Copies:
    """Where a global node of :func:`.window_engine.run_schedules` lives: copy ``c`` of ``C``, node ``m`` of
    the structure's ``n``, as ``c * n + m`` (one copy: the node itself, no array work). Events
    are copy by copy, each copy's as a schedule alone numbers them (node ``m`` ready at
    ``m``, delivered at ``n + m``), so copy ``c``'s event ``e`` is ``2 * n * c + e``: then
    a copy's event times are one slice of the run's."""

    count: int
    nodes: int
    links: int

    def local(self, g):
        """The structure's node of global nodes *g*."""
        return g if self.count == 1 else g % self.nodes

    def of(self, g):
        """The copy of global nodes *g*."""
        return g // self.nodes

    def ready(self, g):
        """The event: global nodes *g* ready."""
        return g if self.count == 1 else g + g // self.nodes * self.nodes

    def delivered(self, g):
        """The event: global nodes *g* delivered."""
        return self.nodes + self.ready(g)


class SizedNodes:
    """A per-node value of ``C`` sizes of one structure, read by global node (copy ``c``'s node
    ``m`` is ``c * n + m``) and computed when read, with the schedule's float operations:
    ``frac[m] * S[c] / K`` (the message bytes), then ``/ speed[c]`` if *speed* is given (the
    reduction time of ``frac = rho_frac``).

    Why not the copies' arrays side by side: the window engine reads a few thousand nodes'
    values of a dozen sizes of 267k nodes each (a 2048-chip all-reduce), and writing those
    arrays, tens of MiB, cost more than the run's reads."""

    def __init__(self, frac, S, K, speed=None):
        self.frac, self.S, self.K, self.speed = frac, np.asarray(S, float), K, speed
        self.n = len(frac)
        if speed is not None:
            self.speed = np.asarray(speed, float)

    def __getitem__(self, nodes):
        c, m = np.divmod(nodes, self.n)
        out = self.frac[m] * self.S[c] / self.K
        return out if self.speed is None else out / self.speed[c]

    def item(self, node):
        """The value of one node, as a Python float."""
        return float(self[node])


def sparse_tile(initial, C, tables):
    """``np.tile(initial, C)`` for a table that is zero but at a few entries (the counters of a
    schedule whose clean rings hold most nodes): zeros, then the nonzero entries written, so
    only the memory pages that hold them are ever touched."""
    if C == 1:
        return initial.copy()
    nonzero = tables.get("window nonzero remaining")  # of the structure's clean units' counters
    if nonzero is None:
        nonzero = tables["window nonzero remaining"] = np.flatnonzero(initial)
    n = len(initial)
    out = np.zeros(C * n, initial.dtype)
    out.reshape(C, n)[:, nonzero] = initial[nonzero]  # (every copy's row: one broadcast write)
    return out
