"""Collective algorithms as static plans: passes of rings (the size comes later).

A collective is planned (:func:`plan_collective`) as a list of *passes*; a
pass is one ring operation (or one halving-doubling exchange) run by every
ring of a level at once. The plan does not depend on the size, so it is
cached and shared by the SimPy engine, the closed form and the static link
loads. :func:`compile_messages` turns a plan and a size into the flat message
table the SimPy engine runs.

Size convention: ``nbytes = S`` is the full, unsharded buffer per replica for
all three operations (reduce-scatter: ``S`` in, ``S/N`` out; all-gather:
``S/N`` in, ``S`` out; all-reduce: ``S`` in and out). Messages carry exact
float byte counts: ``S/n`` and ``S/(n K)`` need not be whole numbers (a real
implementation pads; padding is below the model's resolution).

Schedule (shared with the fast engine):

* Levels: with ``c > 1`` cores per chip, an on-chip ring reduce-scatter of
  ``S`` among the cores first (``core`` level), then the chip-level collective
  on ``S`` per chip (``chip`` level; the cores' portions share the chip's
  links), then an on-chip all-gather. An explicit replica list is one ``flat``
  level over replicas (no hierarchy: ring in the given order, routed edges).
* A ring pass over ``n`` members and a buffer ``B`` per member sends ``n-1``
  steps of ``B/n`` (reduce-scatter, all-gather) or ``2(n-1)`` (all-reduce: the
  all-gather steps continue the ring piece by piece right after the
  reduce-scatter steps). Member ``i`` sends to ``i+1``; at reduce-scatter step
  ``k`` it sends chunk ``(i-k-1) mod n`` and ends owning chunk ``i``; at
  all-gather step ``k`` it sends chunk ``(i-k) mod n``.
* Timing inside a pass (member ``i``, step ``k``, piece ``c``):
  ``ready(i,0,c) = start(i)``; ``ready(i,k+1,c) = max(arrival(i,k,c),
  ready(i,k,c)) + reduce_k`` where ``reduce_k = piece / reduce_Bps`` on
  reduce-scatter steps (0 otherwise). A member finishes a pass at
  ``max_c ready(i,N,c)``; it starts the next pass when it has finished the
  previous one in every direction (per-member barrier, no global barrier).
* ``bidirectional``: each pass runs two rings, ``+`` and reverse, each on half
  of the pass's buffer, so both directions of every link carry data. A line
  ring on a mesh (unwrapped) axis is the exception: its folded ring already
  uses both directions of every link of the line and its reverse would use the
  same links, so that pass keeps one ring with the whole buffer.
* ``2d``: one pass per active axis for reduce-scatter, fastest line first (most
  bytes per second per member, see :func:`_line_Bps`; ties, e.g. every axis of
  a uniform torus or mesh, in axis order), reverse order for all-gather;
  all-reduce = reduce-scatter passes, the last axis's ring all-reduce,
  all-gather passes. ``2d-split``: two halves of the buffer, independent until
  the end, one in that order, the other in that order rotated by one (``Y, X``;
  3-D ``Y, Z, X``); with fewer than two active axes it is ``2d``.
* ``halving-doubling`` (Rabenseifner): ``log2 P`` steps; reduce-scatter step
  ``j`` exchanges ``B/2^(j+1)`` with partner ``i XOR P/2^(j+1)`` (recursive
  halving), all-gather step ``j`` exchanges ``B 2^j / P`` with ``i XOR 2^j``
  (recursive doubling), all-reduce = both, piece by piece. Messages are
  routed dimension-order. Pieces are interleaved slices of every chunk, so
  piece ``c`` of a step only needs piece ``c`` of the previous one.
* Tie-break rank of a message: its sender replica (a chip's first core for
  chip-level messages); sequence: its index in the table, which is ordered by
  (half, pass, step, piece) for every sender.
"""

import numpy as np

from ...inputs.errors import ConfigError, UnknownNameError
from .embedding import active_axes, axis_rings, onchip_rings, part_rings, sequence_ring, slice_ring
from .groups import resolve_group
from .passes import CollectivePlan, Pass, exchange_members
from .alltoall import plan_alltoall
from .pass_order import KINDS, pass_order

__all__ = ["OPS", "REDUCE_OPS", "ALGORITHMS", "ALLTOALL_ALGORITHMS", "EXCHANGE_ALGORITHMS", "Pass", "CollectivePlan",
           "plan_collective", "check_op_algorithm"]

REDUCE_OPS = ("reduce-scatter", "all-gather", "all-reduce")
"""The operations of :data:`ALGORITHMS` (ring and pairwise-exchange passes that sum or gather)."""
OPS = REDUCE_OPS + ("all-to-all",)
"""Collective operations (all-to-all: :mod:`.alltoall`, its algorithms :data:`ALLTOALL_ALGORITHMS`)."""
ALGORITHMS = ("ring", "bidir-ring", "2d", "2d-split", "halving-doubling", "recursive-doubling")
"""Algorithms of the reduce-scatter, all-gather and all-reduce."""
ALLTOALL_ALGORITHMS = ("ring", "2d", "2d-split", "pairwise", "bruck")
"""Algorithms of the all-to-all (see :mod:`.alltoall`)."""

_EXCHANGE_PATTERN = {"halving-doubling": "hd", "recursive-doubling": "rd"}
"""Pairwise-exchange algorithms (no ring direction, power-of-two groups) and their pass pattern."""
EXCHANGE_ALGORITHMS = tuple(_EXCHANGE_PATTERN)
"""Pairwise-exchange algorithms: no ring direction, power-of-two groups."""


def check_op_algorithm(op, algorithm, bidirectional=False):
    """Raise UnknownNameError/ConfigError unless *op* and *algorithm* are known and agree
    with *bidirectional*."""
    if op not in OPS:
        raise UnknownNameError("collective op", op, OPS)
    if op == "all-to-all":
        if algorithm not in ALLTOALL_ALGORITHMS:
            raise UnknownNameError("all-to-all algorithm", algorithm, ALLTOALL_ALGORITHMS)
        if bidirectional:
            raise ConfigError("does not apply to all-to-all: its ring algorithms already send each block the "
                              "shorter way round, in both directions", key_path="bidirectional", value=True)
        return
    if algorithm not in ALGORITHMS:
        raise UnknownNameError("algorithm", algorithm, ALGORITHMS)
    if algorithm == "recursive-doubling" and op != "all-reduce":
        raise ConfigError("recursive-doubling is an all-reduce algorithm (every step exchanges the whole "
                          "buffer); reduce-scatter and all-gather by recursive halving / doubling are "
                          "halving-doubling", key_path="algorithm", value=algorithm, show_value=False)
    if algorithm in _EXCHANGE_PATTERN and bidirectional:
        raise ConfigError(f"applies to ring algorithms, not {algorithm}", key_path="bidirectional",
                          value=True)


def plan_collective(topology, op, algorithm, *, group=None, bidirectional=False):
    """The :class:`CollectivePlan` of a collective (raises ConfigError/UnknownNameError on bad input)."""
    check_op_algorithm(op, algorithm, bidirectional)
    g = resolve_group(topology, group)
    if op == "all-to-all":
        return plan_alltoall(topology, algorithm, g)
    kind = KINDS[op]
    bidir = bool(bidirectional) or algorithm == "bidir-ring"
    directions = (False, True) if bidir else (False,)
    c = topology.cores_per_chip

    if g.kind == "list":
        if algorithm in ("2d", "2d-split"):
            raise ConfigError(f"{algorithm} needs group all or an axis (x, y, z); an explicit replica list "
                              "has no axes", key_path="group", value=list(g.replicas))
        if algorithm in _EXCHANGE_PATTERN:
            _check_power_of_two(algorithm, g.size, "replicas")
            pattern = _EXCHANGE_PATTERN[algorithm]
            members = exchange_members(np.array([g.replicas], dtype=np.int64))
            passes = [Pass("flat", kind, pattern, (members,), 1.0, stream=("flat", pattern))]
            sizes = ((1, g.size),)
        else:
            rings = tuple(sequence_ring(topology, g.replicas, reverse=rev) for rev in directions)
            passes = [Pass("flat", kind, "ring", rings, 1.0 / len(directions), stream=("flat", "ring"))]
            sizes = ((len(directions), g.size),)
        passes = [p for p in passes if p.size > 1]
        return CollectivePlan(topology, op, algorithm, g, bidir, halves=(tuple(passes),), level_sizes=(sizes,))

    if g.kind == "mesh":
        return _mesh_plan(topology, op, algorithm, g, kind, directions)

    axes = [g.axis] if g.kind == "axis" else active_axes(topology)
    axes = [a for a in axes if topology.dims[a] > 1]
    pre = post = ()
    if c > 1:
        ring = onchip_rings(topology)  # every chip is on one of an axis group's lines too
        if kind != "ag":
            pre = (Pass("core", "rs", "ring", (ring,), 1.0, stream=("core",)),)
        if kind != "rs":
            post = (Pass("core", "ag", "ring", (ring,), 1.0, stream=("core",)),)

    if algorithm in _EXCHANGE_PATTERN:
        if g.kind == "axis":
            members = topology.axis_rings(g.axis) if axes else np.zeros((topology.num_chips, 1), np.int64)
        else:
            members = np.arange(topology.num_chips)[None, :]
        _check_power_of_two(algorithm, members.shape[1], "chips", c)
        pattern = _EXCHANGE_PATTERN[algorithm]
        chip = ([Pass("chip", kind, pattern, (exchange_members(members),), 1.0, stream=("chip", pattern))]
                if members.shape[1] > 1 else [])
        return CollectivePlan(topology, op, algorithm, g, False, pre=pre, halves=(tuple(chip),), post=post,
                    level_sizes=(((1, members.shape[1]),) if chip else (),))

    if algorithm in ("ring", "bidir-ring") and g.kind == "all" and len(axes) >= 2:
        rings = tuple(slice_ring(topology, reverse=rev) for rev in directions)
        n = rings[0].size
        chip = (Pass("chip", kind, "ring", rings, 1.0 / len(directions), stream=("chip", "slice")),)
        return CollectivePlan(topology, op, algorithm, g, bidir, pre=pre, halves=(chip,), post=post,
                    level_sizes=(((len(directions), n),),))

    # line rings: ring/bidir-ring on one axis, 2d, 2d-split
    dirs_of = {a: _line_directions(topology, a, directions, algorithm) for a in axes}
    axes = sorted(axes, key=lambda a: -_line_Bps(topology, a, len(dirs_of[a])))
    orders = [axes]
    split_separated = False
    if algorithm == "2d-split" and len(axes) >= 2:
        orders = [axes, axes[1:] + axes[:1]]
        split_separated = (all(topology.wrap[a] for a in axes)
                           and len({topology.dims[a] for a in axes}) == 1
                           and len({topology.axis_link_Bps[a] for a in axes}) == 1
                           and not topology.link_Bps_override and not topology.failed_links)
    halves, level_sizes = [], []
    for h, order in enumerate(orders):
        frac = 1.0 / len(orders)
        levels = []
        for a in order:
            dirs = dirs_of[a]
            rings = tuple(axis_rings(topology, a, reverse=rev) for rev in dirs)
            # on the square uniform torus the halves use an axis one after the other: one stream
            stream = ("chip", a) if split_separated else ("chip", h, a)
            levels.append((a, rings, frac / len(dirs), stream))
            frac /= topology.dims[a]
        halves.append(tuple(Pass("chip", k, "ring", levels[i][1], levels[i][2], h, i, levels[i][3], levels[i][0])
                            for k, i in pass_order(kind, len(levels))))
        level_sizes.append(tuple((len(dirs_of[a]), topology.dims[a]) for a in order))
    return CollectivePlan(topology, op, algorithm, g, bidir, pre=pre, halves=tuple(halves), post=post,
                level_sizes=tuple(level_sizes), split_time_separated=split_separated)


def _mesh_plan(topology, op, algorithm, g, kind, directions):
    """A mesh-axis group's plan (:mod:`wus_sim.hardware.mesh`): every group at once, the ``2d``
    schedule over its parts instead of whole axes: on-chip passes when it holds a chip's cores,
    then one ring pass per chip-level part (reduce-scatter inner part first, the last part's
    ring all-reduce, all-gathers in reverse). A part at stride > 1 interleaves its groups on
    each line: they run one direction each, alternating, so that at stride 2 they share no
    link (:func:`.embedding.part_rings`). A group without the cores of a chip has ``c``
    groups per chip whose rings share the chip's links: each chip-level member then carries
    ``c`` buffers (fraction ``c``). Ring and 2d algorithms only: the exchange algorithms pair
    members by XOR over whole slices."""
    if algorithm in _EXCHANGE_PATTERN:
        raise ConfigError(f"{algorithm} runs over a whole slice or axis; a mesh axis's collectives use ring "
                          "or 2d algorithms", key_path="algorithm", value=algorithm, show_value=False)
    c = topology.cores_per_chip
    with_cores = any(a == -1 for a, _, _ in g.parts)
    pre = post = ()
    if with_cores:
        ring = onchip_rings(topology)
        if kind != "ag":
            pre = (Pass("core", "rs", "ring", (ring,), 1.0, stream=("core",)),)
        if kind != "rs":
            post = (Pass("core", "ag", "ring", (ring,), 1.0, stream=("core",)),)
    frac = 1.0 if (with_cores or c == 1) else float(c)
    levels = []
    for axis, stride, length in (p for p in g.parts if p[0] >= 0 and p[2] > 1):
        if stride > 1:  # interleaved groups: one direction each, alternating (see part_rings)
            dirs = directions[:1]
            rings = (part_rings(topology, axis, stride, length, alternate=True),)
        else:
            full = length == topology.dims[axis]
            dirs = directions if (topology.wrap[axis] and full) or algorithm == "bidir-ring" else directions[:1]
            rings = tuple(part_rings(topology, axis, stride, length, reverse=rev) for rev in dirs)
        levels.append((axis, rings, frac / len(dirs), ("chip", axis, stride)))
        frac /= length
    passes = [Pass("chip", k, "ring", levels[i][1], levels[i][2], 0, i, levels[i][3], levels[i][0])
              for k, i in pass_order(kind, len(levels))]
    return CollectivePlan(topology, op, algorithm, g, len(directions) > 1, pre=pre, halves=(tuple(passes),),
                          post=post, level_sizes=(tuple((len(lv[1]), lv[1][0].size) for lv in levels),))


def _line_Bps(topology, axis, num_directions):
    """Bytes per second one member's line ring moves through on *axis*, for ordering the
    2-D phases: link bandwidth times ring directions, halved on a folded mesh ring (its
    edges between evens or odds take two store-and-forward hops).

    Why fastest first: a reduce-scatter phase over ``d`` members costs ``(1 - 1/d) B / bw``
    on the buffer ``B`` it receives, and each phase shrinks the buffer by its ``d``. Swapping
    two adjacent phases ``a, b`` changes the cost by ``(1 - 1/d_a)(1 - 1/d_b)(1/bw_a -
    1/bw_b)`` (times the buffer), so the order is optimal exactly when ``bw`` falls along it
    (latency terms do not depend on the order). Equal bandwidths keep axis order, so a
    uniform torus or mesh keeps the textbook x, y, z."""
    d = topology.dims[axis]
    Bps = topology.axis_link_Bps[axis] * num_directions
    return Bps / 2 if (not topology.wrap[axis] and d >= 3) else Bps


def _line_directions(topology, axis, directions, algorithm):
    """The ring directions of a line-ring pass on *axis*: a mesh line's ring is folded
    (see :mod:`.embedding`) and already uses every directed link of the line once, and its
    reverse uses the same links, so a second direction there adds only contention; the
    line runs one direction whatever ``bidirectional`` says. ``bidir-ring`` names the two
    counter-rotating rings themselves, so it keeps both."""
    return directions if topology.wrap[axis] or algorithm == "bidir-ring" else directions[:1]


def _check_power_of_two(algorithm, n, what, cores=1):
    """XOR partners pair every member only in a power-of-two group."""
    if n & (n - 1):
        extra = f" x {cores} cores" if cores > 1 else ""
        raise ConfigError(f"{algorithm} needs a power-of-two group; this one has {n} {what}{extra}",
                          key_path="algorithm", value=algorithm, show_value=False)
