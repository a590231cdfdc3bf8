"""The network as a discrete-event model over a :class:`~wus_sim.hardware.topology.Topology`.

Timing model (the fast engine and the closed forms implement the same):

* Every direction of every ICI link, and every on-chip core-to-core link, is a
  server with one place (capacity 1), a bandwidth ``bw`` (bytes/s) and a
  latency (``topology.hop_latency_s`` on ICI links, 0 on-chip: intra-die,
  an assumption).
* A message of ``b`` bytes follows a path of links. Store-and-forward
  (``routing="store-and-forward"``): at each hop it waits until the
  link is free, occupies it for ``b / bw`` seconds, the link is then free for
  the next message, and the message reaches the next chip ``latency`` seconds
  later. It is delivered after its last hop.
* Cut-through (``routing="cut-through"``, the commands' default,
  :data:`DEFAULT_ROUTING`; virtual cut-through): the head moves on
  as soon as the hop starts, the tail follows. Over hops ``1..h``, hop ``i``
  starts at ``s_i = max(head arrival, link i free)``, the head reaching the
  next chip at ``s_i + latency_i`` (``s_0 + latency_0`` = the ready time);
  the tail cannot leave hop ``i`` before it has arrived from hop ``i-1``, so
  the hop ends at ``e_i = max(s_i + b / bw_i, e_{i-1} + latency_{i-1})``;
  link ``i`` is held ``[s_i, e_i]`` (its busy counter adds ``b / bw_i``, the
  time at line rate, which is ``e_i - s_i`` unless an upstream hop is slower);
  delivery at ``e_h + latency_h``. On one hop both routings are the same;
  uncontended over ``h`` hops of equal bandwidth a message takes
  ``h * latency + b / bw`` instead of ``h * (latency + b / bw)``. A message whose next
  link is busy waits whole at that chip (virtual cut-through, not wormhole:
  it does not hold the links behind it; an assumption).
* Each link serves its queue first-in first-out (under cut-through a message
  reaches a link when its head does). Messages that reach a link
  at the same time are ordered by ``(sender rank, sequence number)``; so the
  order is ``(ready time, rank, seq)``, independent of event-processing order.
  "The same time" means the same :func:`tie_key` (times within about a
  picosecond, see there), so that times equal in exact arithmetic tie even when
  their floats differ in the last bits. A hop starts at ``max(ready, link
  free)``, both kept as floats: the key decides only the order, never a time.

How the tie-break is made deterministic. SimPy processes events scheduled for
the same time in insertion order, which depends on history. We therefore keep
one SimPy event per distinct :func:`tie_key` (a "slot") holding everything due
then, each item with its own float time, process slots in key order and a slot
in a fixed order: (1) messages reaching the next chip
(store-and-forward: the whole message; cut-through: its head, carrying the
time its tail will follow) move on to the next hop's request list, or are
delivered (their callback runs and may send
new messages at this time); (2) zero-delay calls; (3) links that become free
take the first of their waiting messages (which were ready strictly earlier);
(4) this time's new requests, sorted by ``(rank, seq)``, take their link if it
is idle or join its queue. Batching same-time events also keeps the cost per
message hop near two list appends, which is what keeps the SimPy engine's cost
per message hop near a microsecond (figures: ``wus-sim bench`` and
docs/bench-results.md).

A message that becomes ready at a time whose slot already ran (e.g. sent by
a SimPy process resumed later at that same time) gets a new slot at that time;
it is ordered after the earlier slot's requests. The collective engines never
do that: they only send from inside slots or at time 0. Inside a slot,
:attr:`Network.now` is the exact time of the delivery or call being handled
(the SimPy clock shows the slot's first time, which may differ in the last bits).

Why not ``simpy.Resource`` per link: request/release events per hop cost
several times the batched FIFO below (two SimPy events per hop instead of a
share of one per time), and a plain Resource grants a free
link to whichever same-time request is processed first, not to the lowest
``(rank, seq)``. The links here are resources in the SimPy sense (a FIFO
server driven by the SimPy clock), just without an event per request.

Link keys: ``0 .. topology.num_link_slots - 1`` are the topology's dense ICI
link ids; on a chip with ``c > 1`` cores, the on-chip link from core ``q`` to
core ``q+1 (mod c)`` has key :func:`onchip_link_key`. The pure helpers at the
top of this module import no SimPy.
"""

import heapq
from itertools import islice
import math

import numpy as np

from ..inputs.errors import UnknownNameError
from .routings import DEFAULT_ROUTING, ROUTINGS

__all__ = [
    "ROUTINGS", "DEFAULT_ROUTING", "TIE_QUANTUM_S", "tie_key", "check_routing",
    "num_link_keys", "onchip_link_key", "link_key_Bps", "link_key_latency_s", "replica_route",
    "Link", "Network", "transfer",
]


# ROUTINGS and DEFAULT_ROUTING live in .routings (no numpy: the lean collective command reads them)


TIE_QUANTUM_S = 2.0 ** -40
"""Resolution of the event order, s (about 0.91 ps): times this close count as simultaneous."""

_TIE_PER_S = 2.0 ** 40  # 1 / TIE_QUANTUM_S; a power of two, so t * _TIE_PER_S rounds nothing

_NO_TAIL = -math.inf  # the tail time of a message's first hop under cut-through: no constraint


def tie_key(t_s):
    """Ordering key of event time *t_s* (s, a float or a numpy array): the nearest whole
    number of :data:`TIE_QUANTUM_S`, ``floor(t_s / TIE_QUANTUM_S + 1/2)``.

    The rule of every engine and reference: events are ordered by ``(tie_key(ready),
    rank, seq)``, and events with equal keys are simultaneous. A time reached along
    different sums differs in its last bits: after a hop of 1.5 us, a second hop of 1 us
    plus 0.5 us latency ends at ``(1.5e-6 + 1e-6) + 5e-7 = 2.9999999999999997e-06``
    added in that order and at ``1.5e-6 + (1e-6 + 5e-7) = 3e-06`` with the hop's cost
    summed first. Comparing floats would let that bit decide which of two messages a
    link serves first, and move deliveries by whole message times. Rounding to the
    quantum makes such times equal. The quantum is far above float noise (an ulp of
    1 ms is 2e-19 s, of 1 s 2e-16 s) and below any time the model tells apart (a byte
    at 1 TB/s takes 1 ps, hop latencies are us), so two times equal but for rounding
    straddle a half-quantum point only with odds near (their difference) / quantum,
    about 1e-6 near 1 ms. The rule is exact below 2**52 quanta (4096 s: adding 1/2
    rounds nothing) and keys never decrease with time beyond. Times stay floats; only
    the order uses the key.
    Scalars give an int, arrays a float array of whole numbers (the same values).
    """
    x = t_s * _TIE_PER_S + 0.5
    return math.floor(x) if x.__class__ is float else np.floor(x)


def check_routing(routing):
    """*routing* if it is one of :data:`ROUTINGS`, else :class:`~wus_sim.inputs.errors.UnknownNameError`."""
    if routing not in ROUTINGS:
        raise UnknownNameError("routing", routing, ROUTINGS)
    return routing


# ================================================================ link keys (pure)
def num_link_keys(topology):
    """Length of arrays indexed by link key: ICI link slots, then on-chip links."""
    c = topology.cores_per_chip
    return topology.num_link_slots + (topology.num_chips * c if c > 1 else 0)


def onchip_link_key(topology, chip, core):
    """Key of the on-chip link from *core* to core ``core+1 (mod c)`` of *chip* (arrays work)."""
    return topology.num_link_slots + np.asarray(chip) * topology.cores_per_chip + np.asarray(core)


def link_key_Bps(topology):
    """Per-direction bandwidth of every link key, bytes/s (``nan`` where an ICI slot has no link)."""
    onchip = np.full(num_link_keys(topology) - topology.num_link_slots, float(topology.onchip_Bps))
    return np.concatenate([topology.link_Bps, onchip])


def link_key_latency_s(topology):
    """Latency of every link key, seconds: the hop latency on ICI, 0 on-chip."""
    out = np.zeros(num_link_keys(topology))
    out[: topology.num_link_slots] = topology.hop_latency_s
    return out


def replica_route(topology, src, dst):
    """Link keys from replica *src* to replica *dst*.

    Cores of one chip: forward around the chip's on-chip ring. Different chips:
    the dimension-order ICI route between the chips (a chip's cores share its
    ICI links, so the core does not change the route).
    """
    c = topology.cores_per_chip
    src, dst = int(src), int(dst)
    chip_s, chip_d = src // c, dst // c
    if chip_s != chip_d:
        return topology.route(chip_s, chip_d)
    q, q_dst = src % c, dst % c
    keys = []
    while q != q_dst:
        keys.append(int(onchip_link_key(topology, chip_s, q)))
        q = (q + 1) % c
    return keys


# ================================================================== SimPy model
class Link:
    """One direction of one link: a FIFO server with a bandwidth and a latency."""

    __slots__ = ("key", "bw_Bps", "latency_s", "busy_until", "queue", "nbytes", "busy_s", "messages")

    def __init__(self, key, bw_Bps, latency_s):
        self.key = key
        """Link key (see the module docstring)."""
        self.bw_Bps = bw_Bps
        """Bandwidth of this direction, bytes/s."""
        self.latency_s = latency_s
        """Hop latency, s: the message reaches the next chip this long after the send ends
        (cut-through: its head, this long after the send starts)."""
        self.busy_until = 0.0
        """Time the message now on the link finishes, s (a new message starts no earlier; the
        link is idle in the slots of ``tie_key(busy_until)`` and later)."""
        self.queue = []
        """Heap of waiting messages ``(ready_key, rank, seq, uid, msg, hop, ready_t, tail_t)``."""
        self.nbytes = 0.0
        """Bytes sent so far (counter)."""
        self.busy_s = 0.0
        """Seconds spent sending so far (counter)."""
        self.messages = 0
        """Messages sent so far (counter)."""

    def __repr__(self):
        return f"<Link {self.key}: {self.bw_Bps / 1e9:g} GB/s, {self.messages} messages>"


class Network:
    """Links of a topology driven by a SimPy environment.

    ``send`` starts a message; its callback runs when the message is delivered.
    ``transfer`` is the same as a SimPy event, for processes (see :func:`transfer`).
    """

    def __init__(self, env, topology, *, routing="store-and-forward"):
        self.env = env
        """The ``simpy.Environment`` whose clock drives the links."""
        self.topology = topology
        self.routing = check_routing(routing)
        """``"store-and-forward"`` or ``"cut-through"`` (see the module docstring)."""
        self._start = self._start_cut_through if routing == "cut-through" else self._start_store_forward
        bw = link_key_Bps(topology)
        lat = link_key_latency_s(topology)
        self.links = [Link(k, float(bw[k]), float(lat[k])) if bw[k] == bw[k] else None
                      for k in range(len(bw))]
        """``Link`` per link key (``None`` for ICI slots that a mesh edge lacks)."""
        self._slots = {}
        """The slot of every float time due, until it has run (times of one tie key share it)."""
        self._by_key = {}
        """Slots by tie key: ``(arrivals, calls, frees, requests, key, times)``."""
        self._pending = []
        """Heap of the keys in ``_by_key`` not yet run: a SimPy event runs the lowest."""
        self._now = None
        self._uid = 0

    @property
    def now(self):
        """Time of the delivery or call being handled, s; outside those, the SimPy clock.

        Use it, not ``env.now``, for times inside callbacks: a slot gathers every time of
        one :func:`tie_key`, and the clock shows only the first.
        """
        return self.env.now if self._now is None else self._now

    # ------------------------------------------------------------ scheduling
    def _slot(self, t):
        """The lists of things due at time *t* (its tie key's), creating its event if needed.

        The hot paths look a slot up by the float time first (``_slots``), so the key is
        computed only once per distinct float time, not once per message hop.
        """
        slot = self._slots.get(t)
        if slot is None:
            key = tie_key(t)
            slot = self._by_key.get(key)
            if slot is None:
                slot = self._by_key[key] = ([], [], [], [], key, [t])  # arrivals, calls, frees, requests
                heapq.heappush(self._pending, key)
                now = self.env.now
                self.env.timeout(t - now if t > now else 0.0).callbacks.append(self._fire)
            else:
                slot[5].append(t)
            self._slots[t] = slot
        return slot

    def after(self, delay, fn, *args):
        """Call ``fn(*args)`` *delay* seconds from :attr:`now` (at that time's step (2), see module doc)."""
        t = self.now + delay
        self._slot(t)[1].append((fn, args, t))

    def send(self, path, nbytes, *, rank, seq, callback, tag=None, delay=0.0):
        """Send *nbytes* over *path* (link keys), ready ``delay`` s from now.

        ``callback(tag, t)`` runs at delivery time ``t``. ``(rank, seq)``
        breaks ties between messages that reach a link at the same time (the same
        :func:`tie_key`).
        A message with an empty path is delivered at its ready time.
        """
        if not nbytes > 0:
            raise ValueError(f"a message needs nbytes > 0, got {nbytes!r}")
        t = self.now + delay
        if not path:
            self._slot(t)[1].append((callback, (tag, t), t))
            return
        self.send_at(t, path, float(nbytes), rank, seq, callback, tag)

    def send_at(self, t, path, nbytes, rank, seq, callback, tag):
        """:meth:`send` for an engine's inner loop: ready at time *t* (s, not before
        :attr:`now`), positional arguments and no checks (*path* non-empty, *nbytes* a
        float > 0: the caller's to ensure)."""
        uid = self._uid = self._uid + 1
        slot = self._slots.get(t)
        if slot is None:
            slot = self._slot(t)
        slot[3].append((rank, seq, uid, (path, nbytes, rank, seq, callback, tag), 0, t, _NO_TAIL))

    def transfer(self, path, nbytes, *, rank=0, seq=0):
        """A SimPy event that succeeds with the delivery time of a message sent now."""
        event = self.env.event()
        self.send(path, nbytes, rank=rank, seq=seq, callback=lambda _tag, t: event.succeed(t))
        return event

    def _start_store_forward(self, link, msg, hop, t, tail):
        # hot path: one call per message hop (t: ready at this hop; tail: unused, the
        # whole message is here)
        nbytes = msg[1]
        s = nbytes / link.bw_Bps
        t_free = link.busy_until
        if t > t_free:
            t_free = t
        t_free += s
        link.busy_until = t_free
        link.nbytes += nbytes
        link.busy_s += s
        link.messages += 1
        slots = self._slots
        slot = slots.get(t_free)
        if slot is None:
            slot = self._slot(t_free)
        slot[2].append(link)
        t_arrive = t_free + link.latency_s
        slot = slots.get(t_arrive)
        if slot is None:
            slot = self._slot(t_arrive)
        slot[0].append((msg, hop, t_arrive, tail))

    def _start_cut_through(self, link, msg, hop, t, tail):
        # t: when the head reaches this hop; tail: when the tail does (e_{i-1} + latency_{i-1};
        # -inf on hop 1)
        nbytes = msg[1]
        s = nbytes / link.bw_Bps
        begin = t if t > link.busy_until else link.busy_until
        t_free = max(begin + s, tail)
        link.busy_until = t_free
        link.nbytes += nbytes
        link.busy_s += s  # at line rate, as the fast engine counts (docstring)
        link.messages += 1
        self._slot(t_free)[2].append(link)
        lat = link.latency_s
        # the head moves on at once; after the last hop, delivery is when the tail arrives
        t_head = t_free + lat if hop + 1 == len(msg[0]) else begin + lat
        self._slot(t_head)[0].append((msg, hop, t_head, t_free + lat))

    def _fire(self, event):
        # the lowest pending key: SimPy's times for two keys a bit apart may round equal
        key = heapq.heappop(self._pending)
        # the slot stays registered while it runs, so zero-delay sends and calls join it
        slot = self._by_key[key]
        arrivals, calls, frees, requests = slot[:4]
        # tie_key(t) <= key exactly when t < (key + 1/2) quanta (the scaling is by a power of two)
        t_idle = (key + 0.5) * TIE_QUANTUM_S
        links = self.links
        start = self._start
        # Each list is walked from where the last round stopped; a for loop over islice
        # (it sees items appended meanwhile) costs less per item than indexing in a while loop.
        ia = ic = jf = 0
        while True:
            # (1) hops that end now: move on, or deliver (callbacks may send at this time)
            for msg, hop, t, tail in islice(arrivals, ia, None):
                hop += 1
                if hop < len(msg[0]):
                    uid = self._uid = self._uid + 1
                    requests.append((msg[2], msg[3], uid, msg, hop, t, tail))
                else:
                    self._now = t
                    msg[4](msg[5], t)
            ia = len(arrivals)
            # (2) zero-delay calls
            for fn, args, self._now in islice(calls, ic, None):
                fn(*args)
            ic = len(calls)
            # (3) freed links serve their queue: those messages were ready before now
            for link in islice(frees, jf, None):
                if link.queue and link.busy_until < t_idle:
                    _, _, _, _, msg, hop, t, tail = heapq.heappop(link.queue)
                    start(link, msg, hop, t, tail)
            jf = len(frees)
            if requests:
                # (4) new requests in (rank, seq) order take an idle link or queue
                batch = sorted(requests)
                requests.clear()
                for rank, seq, uid, msg, hop, t, tail in batch:
                    link = links[msg[0][hop]]
                    if link.busy_until < t_idle and not link.queue:
                        start(link, msg, hop, t, tail)
                    else:
                        heapq.heappush(link.queue, (key, rank, seq, uid, msg, hop, t, tail))
            # a service shorter than the quantum can end in this slot: go round again
            elif ia == len(arrivals) and ic == len(calls) and jf == len(frees):
                break
        for t in slot[5]:
            del self._slots[t]
        del self._by_key[key]
        self._now = None

    # --------------------------------------------------------------- counters
    @property
    def hops_sent(self):
        """Message hops started so far (one per message per link)."""
        return sum(l.messages for l in self.links if l is not None)

    def link_bytes(self):
        """Bytes sent per link key (array; 0 where no link)."""
        return np.array([l.nbytes if l is not None else 0.0 for l in self.links])

    def link_busy_s(self):
        """Busy seconds per link key (array)."""
        return np.array([l.busy_s if l is not None else 0.0 for l in self.links])

    def link_messages(self):
        """Messages sent per link key (array)."""
        return np.array([l.messages if l is not None else 0 for l in self.links], dtype=np.int64)


def transfer(env, net, path, nbytes, *, rank=0, seq=0):
    """SimPy process: send *nbytes* over *path* on *net* now; returns the delivery time.

    Use from another process as ``t = yield env.process(transfer(env, net, path, b))``
    or directly ``t = yield net.transfer(path, b)``.
    """
    t = yield net.transfer(path, nbytes, rank=rank, seq=seq)
    return t
