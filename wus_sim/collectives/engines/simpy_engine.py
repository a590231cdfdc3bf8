"""The reference engine: every message of a schedule through the SimPy network.

The schedule (:mod:`wus_sim.collectives.schedules.messages`) is a dependency graph of
nodes: messages and per-member barriers. A node becomes ready when its
dependencies are met (a delivery, or another node becoming ready), plus its
reduction time; a ready message is handed to :class:`wus_sim.hardware.network.Network`,
which moves it hop by hop through FIFO links (see the timing model there).

Cost per message is kept to a few Python calls: nodes are plain integers,
dependencies are flat lists (a node's only child read directly, see
:func:`_children`), and the network batches all events of one time into one
SimPy event. Its speed is measured by ``wus-sim bench`` (SimPy
reference cases) and reported in docs/bench-results.md, not here.
"""

from dataclasses import dataclass
import time

import numpy as np

from ...hardware.network import Network

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


def _per_node(a, dtype):
    """A numpy column read by the hot loop, as a memoryview: its items become Python numbers
    (the same values) as they are read, about once per node. Cheaper than ``.tolist()``,
    which makes, and at the end frees, a Python object for every node up front."""
    return memoryview(np.ascontiguousarray(a, dtype))


def _children(ptr, children):
    """The CSR lists *ptr*, *children* (numpy) as ``(one, several)``: ``one[m]`` is the
    only child of node ``m``, or -1 if it has none, or ``-2 - i`` if it has several, which
    are the tuple ``several[i]`` (in CSR order).

    Nearly every node has at most one child of each kind, and reading one list entry costs
    the hot loop far less than slicing ``children[ptr[m]:ptr[m + 1]]``."""
    count = np.diff(ptr)
    one = np.full(len(count), -1, np.int64)
    single = count == 1
    one[single] = children[ptr[:-1][single]]
    nodes = np.flatnonzero(count > 1)
    one[nodes] = -2 - np.arange(len(nodes))
    flat = children[np.repeat(count > 1, count)].tolist()
    ends = np.cumsum(count[nodes]).tolist()
    several = [tuple(flat[a:b]) for a, b in zip([0] + ends[:-1], ends)]
    return _per_node(one, np.int64), several


def run_schedule(sched, *, record=False, routing="store-and-forward"):
    """Simulate *sched* (a :class:`~wus_sim.collectives.schedules.messages.Schedule`) on a fresh network
    with the given *routing* (:data:`wus_sim.hardware.network.ROUTINGS`)."""
    import simpy

    t0 = time.perf_counter()
    env = simpy.Environment()
    net = Network(env, sched.plan.topology, routing=routing)
    ndeps, rptr, rch, dptr, dch = sched.dependency_arrays()
    roots = np.flatnonzero(ndeps == 0).tolist()
    ndeps = ndeps.tolist()  # counted down; small ints (Python keeps one object of each)
    # the nodes waiting for m to be ready, and for m's delivery (kept per shared structure)
    tables = sched.structure.engine_tables if sched.structure is not None else {}
    if "simpy" not in tables:
        tables["simpy"] = (_children(rptr, rch), _children(dptr, dch))
    (r_one, r_several), (d_one, d_several) = tables["simpy"]
    path_id = _per_node(sched.path_id, np.int64)
    if not (sched.msg_bytes[sched.path_id >= 0] > 0).all():  # send_at does not check
        raise ValueError("a message needs nbytes > 0")
    paths = sched.paths
    nbytes = _per_node(sched.msg_bytes, float)
    rank = _per_node(sched.rank, np.int64)
    rho = _per_node(sched.rho, float)
    n = sched.num_nodes
    ready_t = [0.0] * n if record else None
    deliver_t = [0.0] * n if record else None
    send_at, after = net.send_at, net.after
    end_t = 0.0  # the latest delivery time (the SimPy clock shows slots' first times)

    # Hot path: a few calls per message. Every closure gets the current time t (== net.now,
    # the exact time of the delivery or call being handled) as an argument rather than
    # reading the net.now property.
    def start(x, t):
        """Node *x* has all its dependencies at time *t*: ready now, or after its reduction
        time r (after() calls ready(x, t + r) at net.now + r, the same float as t + r)."""
        r = rho[x]
        if r > 0.0:
            after(r, ready, x, t + r)
        else:
            ready(x, t)

    def met(children, t):
        """A dependency of each of several *children* is met at time *t*."""
        for x in children:
            k = ndeps[x] - 1
            ndeps[x] = k
            if k == 0:
                start(x, t)

    # delivered and ready handle the common single child themselves (a call per node less)
    def delivered(m, t):
        nonlocal end_t
        if record:
            deliver_t[m] = t
        # every node is delivered at or after its ready time (a barrier at it), so the
        # latest delivery is also the latest ready or delivery time
        if t > end_t:
            end_t = t
        x = d_one[m]
        if x >= 0:
            k = ndeps[x] - 1
            ndeps[x] = k
            if k == 0:
                start(x, t)
        elif x != -1:
            met(d_several[-2 - x], t)

    def ready(m, t):
        if record:
            ready_t[m] = t
        p = path_id[m]
        if p >= 0:
            send_at(t, paths[p], nbytes[m], rank[m], m, delivered, m)
        x = r_one[m]
        if x >= 0:
            k = ndeps[x] - 1
            ndeps[x] = k
            if k == 0:
                start(x, t)
        elif x != -1:
            met(r_several[-2 - x], t)
        if p < 0:
            delivered(m, t)

    t = net.now  # SimPy's initial time
    for m in roots:  # listed before any is resolved
        start(m, t)
    env.run()
    if any(ndeps):
        left = sum(1 for x in ndeps if x > 0)
        raise AssertionError(f"{left} schedule nodes never became ready (a dependency cycle)")
    return SimpyOutcome(
        time_s=float(end_t), events=net.hops_sent, link_bytes=net.link_bytes(),
        link_busy_s=net.link_busy_s(), link_messages=net.link_messages(),
        wall_s=time.perf_counter() - t0, ready_t=ready_t, deliver_t=deliver_t)
