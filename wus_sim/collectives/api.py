"""Entry points: simulate a collective, its closed form, and a cached time for the step simulator.

Engines (``engine=``):

* ``"fast"``: :mod:`wus_sim.collectives.engines.fast_engine`, an exact max-plus
  recurrence over numpy arrays for static, uncontended schedules.
* ``"window"``: :mod:`wus_sim.collectives.engines.window_engine`, every message of any
  schedule, contended or not, served a time window at a time over numpy arrays
  (both routings); the same times as SimPy, to the last bits.
* ``"simpy"``: :mod:`wus_sim.collectives.engines.simpy_engine`, every message through
  the SimPy network; the reference.
* ``"auto"`` (default): the fast engine when ``loads.contention(plan)`` finds
  none (what ``fast_engine.supports(...)`` checks); else the window engine
  (contended schedules: halving- and recursive-doubling, explicit replica lists whose routed
  edges share links, bidirectional rings on mesh axes, 2d-split off a square
  uniform torus, detours around failed links), or SimPy where a window would hold nothing
  (:class:`~wus_sim.collectives.engines.window_engine.WindowTooSmall`).

All engines implement the same timing model, store-and-forward or, with
``routing="cut-through"``, cut-through, and the same schedule (see
:mod:`wus_sim.hardware.network` and :mod:`wus_sim.collectives.schedules.plan`) and agree to
rounding where both run. Bandwidths reported follow NCCL's convention:
``algbw = S / time``; ``busbw = algbw * 2(N-1)/N`` for all-reduce and
``algbw * (N-1)/N`` for reduce-scatter, all-gather and all-to-all (``N`` = group size).
"""

from dataclasses import dataclass, field
from functools import lru_cache
import math
import time

import numpy as np

from ..inputs.errors import ConfigError, UnknownNameError
from ..inputs.limits import MAX_CHUNKS, MAX_MESSAGE_HOPS, MAX_SIZE_BYTES, check_limit
from ..hardware.network import ROUTINGS, check_routing
from ..hardware.topology import Topology
from ..hardware.topology_files import load_topology
from ..inputs.units import GB, parse_size
from .engines import fast_engine
from .analytic import is_exact, plan_time
from .schedules.groups import group_key, one_copy
from .schedules.loads import contention
from .schedules.plan import check_op_algorithm
from .schedules.plan_cache import cached_plan, clear_plan_cache
from .engines.uniform_torus import bandwidths as _bandwidths

__all__ = ["ENGINES", "ROUTINGS", "CollectiveResult", "simulate_collective", "analytic_time", "collective_time",
           "collective_times", "clear_caches", "drop_schedules"]

ENGINES = ("auto", "fast", "window", "simpy")
"""Engine names accepted by :func:`simulate_collective`."""


@dataclass
class CollectiveResult:
    """One simulated collective. Times in seconds, sizes in bytes, bandwidths in GB/s (10^9 B/s)."""

    op: str
    algorithm: str
    topology: str
    """Topology name."""
    nbytes: float
    """``S``: the full, unsharded buffer per replica."""
    group_size: int
    """Replicas in one group (``N``)."""
    time_s: float
    """Simulated completion time."""
    analytic_time_s: float
    """Closed-form time (:func:`analytic_time`); equal to ``time_s`` when ``exact``."""
    exact: bool
    """True when the closed form is exact for this schedule (no link carries two streams)."""
    events: int
    """Message hops simulated (one per message per link)."""
    engine: str
    """``"fast"``, ``"window"`` or ``"simpy"``: the engine that ran."""
    wall_s: float
    """Wall-clock seconds of the simulation (plan, messages and run; not topology loading)."""
    algbw_GBps: float
    """``S / time_s`` in GB/s (``inf`` for a zero-time collective)."""
    busbw_GBps: float
    """``algbw`` times ``2(N-1)/N`` (all-reduce) or ``(N-1)/N`` (reduce-scatter, all-gather, all-to-all)."""
    link_bytes: np.ndarray = field(repr=False, default=None)
    """Bytes carried per ICI link slot (``topology.num_link_slots`` long, 0 where no link)."""
    link_busy_s: np.ndarray = field(repr=False, default=None)
    """Seconds each ICI link slot was busy."""
    chunks: int = 1
    bidirectional: bool = False
    reduce_Bps: float = None
    routing: str = "store-and-forward"
    """``"store-and-forward"`` or ``"cut-through"`` (see :mod:`wus_sim.hardware.network`)."""

    def to_dict(self):
        """Flat, JSON-ready record (no per-link arrays; their maximum and total instead)."""
        def num(x):
            return None if x is None or not math.isfinite(x) else float(x)

        return {
            "topology": self.topology, "op": self.op, "algorithm": self.algorithm,
            "nbytes": num(self.nbytes), "group_size": self.group_size,
            "time_s": num(self.time_s), "analytic_time_s": num(self.analytic_time_s),
            "exact": self.exact, "algbw_GBps": num(self.algbw_GBps), "busbw_GBps": num(self.busbw_GBps),
            "events": int(self.events), "engine": self.engine, "wall_s": num(self.wall_s),
            "chunks": self.chunks, "bidirectional": self.bidirectional, "routing": self.routing,
            "reduce_GBps": None if self.reduce_Bps is None else self.reduce_Bps / GB,
            "max_link_bytes": num(float(np.max(self.link_bytes))) if self.link_bytes is not None
            and len(self.link_bytes) else 0.0,
            "total_link_bytes": num(float(np.sum(self.link_bytes))) if self.link_bytes is not None else 0.0,
        }


# ================================================================ arguments
def _topology(topology):
    return topology if isinstance(topology, Topology) else load_topology(topology)


def _size(nbytes):
    if isinstance(nbytes, str):
        return float(parse_size(nbytes))
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float, np.integer, np.floating)) \
            or not 0 < nbytes <= MAX_SIZE_BYTES:
        raise ConfigError(f"must be a size > 0 bytes and <= {MAX_SIZE_BYTES} (1 PiB), e.g. 67108864 or '64MiB'",
                          key_path="size", value=nbytes)
    return float(nbytes)


def _chunks(chunks, op=None):
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or not 1 <= chunks <= MAX_CHUNKS:
        raise ConfigError(f"must be a whole number >= 1 and <= {MAX_CHUNKS}", key_path="chunks", value=chunks)
    if op == "all-to-all" and chunks != 1:
        raise ConfigError("must be 1 for all-to-all: each step's blocks go as one message (its closed forms "
                          "and fast engine are for whole messages)", key_path="chunks", value=chunks)
    return int(chunks)


def message_hops_estimate(plan, chunks):
    """The message hops the schedule of *plan* simulates, from the plan's passes without
    compiling it: ring passes exactly (their edges' hop counts); pairwise exchanges
    (halving-, recursive-doubling) over a whole slice exactly too (ranks are row-major, so
    the step-k partner is 2^k chips along one axis), else messages x the slice's diameter
    (an upper bound)."""
    topo = plan.topology
    diameter = sum(d // 2 if w else d - 1 for d, w in zip(topo.dims, topo.wrap)) or 1
    total = 0
    for p in plan.passes:
        members = len(p.rings) * p.rings[0].num_rings * p.size
        if p.pattern == "ring":
            total += p.steps * sum(int(np.maximum(e.hops, 1).sum()) for e in p.rings)
        elif p.kind == "a2a":  # pairwise, Bruck: partners at any distance
            total += p.steps * members * diameter
        elif p.level == "chip" or (p.level == "flat" and topo.cores_per_chip == 1):
            total += members * sum(_axis_distance(topo, p.step_partner_distance(k)) for k in range(p.steps))
        else:
            total += p.steps * members * diameter
    return chunks * total


def _axis_distance(topo, stride):
    """Hops between chips *stride* apart in row-major order (axis 0 fastest), when *stride*
    moves along one axis (a power of two on power-of-two axes); else the slice's diameter."""
    for d, w in zip(topo.dims, topo.wrap):
        if stride < d:
            return min(stride, d - stride) if w else stride
        if stride % d:
            break
        stride //= d
    return sum(d // 2 if w else d - 1 for d, w in zip(topo.dims, topo.wrap)) or 1


def _reduce(reduce_Bps):
    if reduce_Bps is None:
        return None
    if isinstance(reduce_Bps, bool) or not isinstance(reduce_Bps, (int, float, np.integer, np.floating)) \
            or not 0 < reduce_Bps < math.inf:
        raise ConfigError("must be > 0 bytes/s (or None for no reduction cost)", key_path="reduce_Bps",
                          value=reduce_Bps)
    return float(reduce_Bps)


# ================================================================ entry points
def analytic_time(topology, op, algorithm, nbytes, *, group=None, bidirectional=False, chunks=1,
                  reduce_Bps=None, routing="store-and-forward"):
    """Closed-form alpha-beta time, seconds (see :mod:`wus_sim.collectives.analytic`).

    *nbytes* = ``S``, the full buffer per replica for all four ops (all-to-all: the whole send
    buffer); *routing* as in :func:`simulate_collective`.
    """
    topology = _topology(topology)
    cached_plan(topology, op, algorithm, group=group, bidirectional=bidirectional)  # validates op/algorithm/group
    return _cached_analytic(topology, op, algorithm, _size(nbytes), group_key(group), bool(bidirectional),
                            _chunks(chunks, op), _reduce(reduce_Bps), check_routing(routing))


@lru_cache(maxsize=4096)
def _cached_analytic(topology, op, algorithm, S, group, bidirectional, chunks, reduce_Bps, routing):
    # a step asks the same closed forms many times (each small all-reduce bounds every candidate
    # algorithm by its closed form; halving-doubling's is costly to evaluate on a large slice)
    plan = cached_plan(topology, op, algorithm, group=group, bidirectional=bidirectional)
    return plan_time(plan, S, chunks=chunks, reduce_Bps=reduce_Bps, routing=routing)


def simulate_collective(topology, op, algorithm, nbytes, *, group=None, bidirectional=False, chunks=1,
                        engine="auto", reduce_Bps=None, routing="store-and-forward"):
    """Simulate one collective and return a :class:`CollectiveResult`.

    *topology*: a :class:`~wus_sim.hardware.topology.Topology` or a spec for
    :func:`~wus_sim.hardware.topology.load_topology`. *op* in :data:`OPS`, *algorithm*
    in :data:`ALGORITHMS` (all-to-all: :data:`ALLTOALL_ALGORITHMS`, ``chunks`` 1, no
    ``bidirectional``, ``reduce_Bps`` without effect). *nbytes* = ``S`` (a number or a size string such as
    ``"64MiB"``). *group*: ``None``/``"all"``, an axis (``"x"``, ``"y"``,
    ``"z"`` or 0, 1, 2: every line along it at once) or a list of replica ids
    (ring in that order). *chunks*: pieces per step, pipelined. *reduce_Bps*:
    if given, each reduce-scatter arrival of ``b`` bytes is summed in
    ``b / reduce_Bps`` seconds before it is forwarded. *engine*: ``"auto"``,
    ``"fast"``, ``"window"`` or ``"simpy"`` (see the module docstring). *routing*: ``"store-and-forward"`` (this
    function's default, the engines' reference; the commands, the step and experiment points
    default to :data:`~wus_sim.hardware.network.DEFAULT_ROUTING`, cut-through) or
    ``"cut-through"`` (see :mod:`wus_sim.hardware.network`; the two differ only on
    multi-hop edges: mesh folded rings, routed edges, halving- and recursive-doubling).
    """
    topology = _topology(topology)
    if engine not in ENGINES:
        raise UnknownNameError("engine", engine, ENGINES)
    check_routing(routing)
    S = _size(nbytes)
    K = _chunks(chunks, op)
    red = _reduce(reduce_Bps)
    t0 = time.perf_counter()
    plan = cached_plan(topology, op, algorithm, group=group, bidirectional=bidirectional)
    time_s, events, used, link_bytes, link_busy = _run(plan, S, K, red, routing, engine)
    wall = time.perf_counter() - t0
    analytic = plan_time(plan, S, chunks=K, reduce_Bps=red, routing=routing)
    algbw, busbw = _bandwidths(op, S, time_s, plan.group_size)
    return CollectiveResult(
        op=op, algorithm=algorithm, topology=topology.name, nbytes=S, group_size=plan.group_size,
        time_s=time_s, analytic_time_s=analytic, exact=is_exact(plan, chunks=K, reduce_Bps=red, routing=routing),
        events=events, engine=used,
        wall_s=wall, algbw_GBps=algbw, busbw_GBps=busbw, link_bytes=np.asarray(link_bytes, float),
        link_busy_s=np.asarray(link_busy, float), chunks=K, bidirectional=bool(bidirectional),
        reduce_Bps=red, routing=routing)


def _run(plan, S, K, red, routing, engine):
    """Simulate *plan* on the engine *engine* picks (arguments checked): ``(time_s, events,
    engine used, link_bytes, link_busy_s)``, the link arrays over the ICI link slots."""
    why = contention(plan) if engine in ("auto", "fast") else None
    if why is not None and engine == "fast":
        raise ConfigError(f"cannot run this collective: {why}; use --engine window or simpy",
                          key_path="engine", value="fast")
    if engine in ("auto", "fast") and why is None:
        from .engines.fast_alltoall import OutOfOrder

        try:
            out = fast_engine.run_plan(plan, S, chunks=K, reduce_Bps=red, routing=routing)
            return float(out.time_s), int(out.events), "fast", out.link_bytes, out.link_busy_s
        except OutOfOrder as exc:  # an all-to-all whose links would serve out of schedule order
            if engine == "fast":
                raise ConfigError(f"cannot run this collective exactly: {exc} serves out of schedule order; "
                                  "use --engine window or simpy", key_path="engine", value="fast") from None
    from .engines import window_engine  # contended schedules only: a short command does not load it

    sched = _schedule(plan, S, K, red)
    out = None
    if engine in ("auto", "window"):
        try:
            out, used = window_engine.run_schedule(sched, routing=routing), "window"
        except window_engine.WindowTooSmall:
            if engine == "window":
                raise ConfigError("hops here are shorter than the event-order quantum (or, under cut-through, "
                                  "a multi-hop message crosses a link of zero latency); use --engine simpy",
                                  key_path="engine", value="window") from None
    if out is None:
        from .engines.simpy_engine import run_schedule

        out, used = run_schedule(sched, routing=routing), "simpy"
    n = plan.topology.num_link_slots
    return out.time_s, out.events, used, out.link_bytes[:n], out.link_busy_s[:n]


def _schedule(plan, S, K, red):
    """The compiled schedule of *plan* for an event engine, within the message-hop limit."""
    from .schedules.messages import compile_messages

    check_limit("message hops for an event engine", message_hops_estimate(plan, K), MAX_MESSAGE_HOPS,
                key_path="engine",
                hint="use fewer chunks, a smaller slice, or a schedule the fast engine runs")
    return compile_messages(plan, S, chunks=K, reduce_Bps=red)


_prefetched = {}
"""Times :func:`collective_times` computed for :func:`_cached_time` keys, taken (and
forgotten here) by its first call for the key."""

_known = set()
"""Keys :func:`_cached_time` has computed or taken (so :func:`collective_times` skips them);
may hold keys its LRU memo has since dropped, which are then simply computed again alone."""

_MAX_KNOWN = 1 << 16  # the memo's own size


@lru_cache(maxsize=_MAX_KNOWN)
def _cached_time(topology, op, algorithm, S, group, bidirectional, chunks, reduce_Bps, routing):
    key = (topology, op, algorithm, S, group, bidirectional, chunks, reduce_Bps, routing)
    if len(_known) >= _MAX_KNOWN:
        _known.clear()
    _known.add(key)
    if key in _prefetched:
        return _prefetched.pop(key)
    plan = cached_plan(topology, op, algorithm, group=group, bidirectional=bidirectional)
    if is_exact(plan, chunks=chunks, reduce_Bps=reduce_Bps, routing=routing):
        return plan_time(plan, S, chunks=chunks, reduce_Bps=reduce_Bps, routing=routing)
    return _run(plan, S, chunks, reduce_Bps, routing, "auto")[0]


def collective_time(topology, op, algorithm, nbytes, *, group=None, bidirectional=False, chunks=1,
                    reduce_Bps=None, routing="store-and-forward"):
    """Time in seconds of a collective, memoized; for callers that ask thousands of times.

    Uses the closed form where it is exact (every uncontended ring schedule),
    else the engine ``engine="auto"`` picks (fast, window, or SimPy where a window holds nothing).
    """
    topology, group = one_copy(_topology(topology), group)  # a mesh group's copies are timed once
    check_op_algorithm(op, algorithm)
    key = (topology, op, algorithm, _size(nbytes), group_key(group), bool(bidirectional), _chunks(chunks, op),
           _reduce(reduce_Bps), check_routing(routing))
    try:
        known = key in _known
    except TypeError:  # an unhashable group: the plan says what is wrong with it
        known = False
    if not known:  # a time computed before had its arguments checked then (and needs no plan now)
        cached_plan(topology, op, algorithm, group=group, bidirectional=bidirectional)  # validates the group
    return _cached_time(*key)


def collective_times(topology, op, algorithm, sizes, *, group=None, bidirectional=False, chunks=1,
                     reduce_Bps=None, routing="store-and-forward"):
    """:func:`collective_time` of every size in *sizes* (a list of seconds, in their order),
    the same times to the last bit; the memo then holds them all.

    Why: a contended plan runs the window engine, whose cost is mostly per
    window, not per message; its sizes not yet memoized run in one
    :func:`.window_engine.run_schedules` call (each alone again, SimPy where the engine
    cannot, if a window holds nothing). The other sizes are computed as
    :func:`collective_time` does."""
    topology, group = one_copy(_topology(topology), group)
    plan = cached_plan(topology, op, algorithm, group=group, bidirectional=bidirectional)
    K, red, routing = _chunks(chunks, op), _reduce(reduce_Bps), check_routing(routing)
    keys = [(topology, op, algorithm, _size(S), group_key(group), bool(bidirectional), K, red, routing)
            for S in sizes]
    todo = list(dict.fromkeys(k for k in keys if k not in _known and k not in _prefetched))  # once each
    # exact plans take the closed form (is_exact is memoized per plan, contention would cost a
    # second pass over the links), uncontended ones the fast engine: only the rest batch
    if len(todo) > 1 and not is_exact(plan, chunks=K, reduce_Bps=red, routing=routing) \
            and contention(plan) is not None:
        from .engines import window_engine

        for i in range(0, len(todo), MAX_BATCH):
            batch = todo[i:i + MAX_BATCH]
            try:
                outs = window_engine.run_schedules([_schedule(plan, k[3], K, red) for k in batch], routing=routing)
            except window_engine.WindowTooSmall:
                continue  # each alone, as _run does
            _prefetched.update((k, out.time_s) for k, out in zip(batch, outs))
    return [_cached_time(*k) for k in keys]


MAX_BATCH = 12
"""Sizes :func:`collective_times` runs in one window-engine run at most: each holds its own
event arrays (about 17 MiB per size allocated for a 2048-replica all-reduce, most of it never
touched), and past a handful of sizes the per-window cost they share is already small next to
their own. A step asks for up to a dozen sizes of one plan (its buckets and norms)."""


def drop_schedules():
    """Forget memoized plans and compiled schedules (the memory: arrays per replica) but keep the
    memoized times (a float each): a long search bounds its memory so and still never simulates a
    collective twice."""
    from .schedules.messages import clear_structure_cache

    clear_plan_cache()
    clear_structure_cache()
    _prefetched.clear()


def clear_caches():
    """Forget memoized plans and times (benchmarks time cold runs with it)."""
    from .schedules.messages import clear_structure_cache

    clear_plan_cache()
    clear_structure_cache()
    _cached_time.cache_clear()
    _cached_analytic.cache_clear()
    _prefetched.clear()
    _known.clear()
