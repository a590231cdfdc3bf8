"""The reference engine: every message of a schedule through the SimPy network.

The schedule (:mod:`wus_sim.collectives.messages`) is a dependency graph of
nodes: messages and per-member barriers. A node becomes ready when its
dependencies are met (a delivery, or another node becoming ready), plus its
reduction time; a ready message is handed to :class:`wus_sim.network.Network`,
which moves it hop by hop through FIFO links (see the timing model there).

Cost per message is kept to a few Python calls: nodes are plain integers,
dependencies are flat lists, and the network batches all events of one time
into one SimPy event. Its speed is measured by ``wus-sim bench`` (SimPy
reference cases) and reported in the README's "Speed" section, not here.
"""

from dataclasses import dataclass
import time

import numpy as np

from ..network import Network

__all__ = ["SimpyOutcome", "run_schedule"]


@dataclass
class SimpyOutcome:
    """What :func:`run_schedule` returns."""

    time_s: float
    """Completion time: the last node ready or delivered (last member's last arrival plus its reduction)."""
    events: int
    """Message hops sent (one per message per link)."""
    link_bytes: np.ndarray
    """Bytes sent per link key (ICI slots, then on-chip links)."""
    link_busy_s: np.ndarray
    """Seconds each link key was busy."""
    link_messages: np.ndarray
    """Messages sent per link key."""
    wall_s: float
    """Wall-clock seconds of the simulation (not the schedule build)."""
    ready_t: list = None
    """Per node: ready time (only with ``record=True``)."""
    deliver_t: list = None
    """Per node: delivery time (only with ``record=True``)."""


def run_schedule(sched, *, record=False, routing="store-and-forward"):
    """Simulate *sched* (a :class:`~wus_sim.collectives.messages.Schedule`) on a fresh network
    with the given *routing* (:data:`wus_sim.network.ROUTINGS`)."""
    import simpy

    t0 = time.perf_counter()
    env = simpy.Environment()
    net = Network(env, sched.plan.topology, routing=routing)
    ndeps, rptr, rch, dptr, dch = (a.tolist() for a in sched.dependency_arrays())
    path_id = sched.path_id.tolist()
    if not (sched.msg_bytes[sched.path_id >= 0] > 0).all():  # send_at does not check
        raise ValueError("a message needs nbytes > 0")
    paths = sched.paths
    nbytes = sched.msg_bytes.tolist()
    rank = sched.rank.tolist()
    rho = sched.rho.tolist()
    n = sched.num_nodes
    ready_t = [0.0] * n if record else None
    deliver_t = [0.0] * n if record else None
    send_at, after = net.send_at, net.after
    end_t = 0.0  # the latest delivery time (the SimPy clock shows slots' first times)

    # Hot path: a few calls per message. Every closure gets the current time t (== net.now,
    # the exact time of the delivery or call being handled) as an argument rather than
    # reading the net.now property. Counting a met dependency of each child and starting
    # those now complete is written out in delivered and in ready (not a shared helper:
    # a call per node less); a child with a reduction time is ready r seconds later, and
    # after() calls ready(x, t + r) at net.now + r, the same float as t + r.
    def delivered(m, t):
        nonlocal end_t
        if record:
            deliver_t[m] = t
        # every node is delivered at or after its ready time (a barrier at it), so the
        # latest delivery is also the latest ready or delivery time
        if t > end_t:
            end_t = t
        for x in dch[dptr[m]:dptr[m + 1]]:
            k = ndeps[x] - 1
            ndeps[x] = k
            if k == 0:
                r = rho[x]
                if r > 0.0:
                    after(r, ready, x, t + r)
                else:
                    ready(x, t)

    def ready(m, t):
        if record:
            ready_t[m] = t
        p = path_id[m]
        if p >= 0:
            send_at(t, paths[p], nbytes[m], rank[m], m, delivered, m)
        for x in rch[rptr[m]:rptr[m + 1]]:
            k = ndeps[x] - 1
            ndeps[x] = k
            if k == 0:
                r = rho[x]
                if r > 0.0:
                    after(r, ready, x, t + r)
                else:
                    ready(x, t)
        if p < 0:
            delivered(m, t)

    t = net.now  # SimPy's initial time
    for m in [m for m in range(n) if ndeps[m] == 0]:  # roots, listed before any is resolved
        r = rho[m]
        if r > 0.0:
            after(r, ready, m, t + r)
        else:
            ready(m, t)
    env.run()
    left = sum(1 for x in ndeps if x > 0)
    assert left == 0, f"{left} schedule nodes never became ready (a dependency cycle)"
    return SimpyOutcome(
        time_s=float(end_t), events=net.hops_sent, link_bytes=net.link_bytes(),
        link_busy_s=net.link_busy_s(), link_messages=net.link_messages(),
        wall_s=time.perf_counter() - t0, ready_t=ready_t, deliver_t=deliver_t)
