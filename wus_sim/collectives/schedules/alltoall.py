"""All-to-all as a plan: each of ``N`` replicas sends a distinct block of ``S/N`` bytes to every
other replica.

Size convention: ``nbytes = S`` is each replica's whole send buffer (its ``N`` blocks, its own
block included), as MPI's ``MPI_Alltoall`` (``sendcount x N``) and XLA's ``all-to-all`` (the
operand, split ``N`` ways along its split dimension) count it; each replica receives ``S`` too.

Algorithms (:data:`.plan.ALLTOALL_ALGORITHMS`), each a list of passes of kind ``"a2a"``:

* ``ring``: the direct algorithm on a bidirectional ring (one axis line, or the whole slice's
  Hamiltonian ring): every block goes the shorter way round, one hop per step, each member
  forwarding the blocks still in transit (pattern ``"ring"``, both directions, ``floor(n/2)``
  steps; see :func:`.passes.a2a_step_blocks`). With ``n`` even the block half way round
  is split, half each way. A ring of two members runs one direction.
* ``2d``: the ``ring`` algorithm along each active axis in turn (dimension-ordered, as a
  dimension-order router would send each block): a member first sends each block to the
  member of its X line in the destination's column (``S/X`` per column), then along Y.
  Every phase moves the whole buffer ``S``.
* ``2d-split``: two halves of the buffer, one in axis order (X, Y), the other rotated (Y, X),
  at once, so that every axis's links are busy in every phase; on a square torus with uniform
  links the halves take turns on each axis (uncontended, as the reduce collectives' 2d-split).
* ``pairwise``: ``n-1`` rounds; at round ``k`` (1-based) member ``i`` sends its block for
  ``i+k`` to it and receives from ``i-k`` (mod ``n``), along the dimension-order shortest
  route (Thakur, Rabenseifner and Gropp 2005, the long-message algorithm for a
  non-power-of-two count, here for every count). A round's routes overlap on a torus: the
  messages contend.
* ``bruck``: ``ceil(log2 n)`` steps; at step ``k`` member ``i`` sends to ``i + 2^k`` every block
  whose offset has bit ``k`` set (``n/2`` blocks for ``n`` a power of two), routed as pairwise
  (Bruck, Ho, Kipnis, Upfal and Weathersby, "Efficient algorithms for all-to-all
  communications in multiport message-passing systems", IEEE TPDS 8(11), 1997; the local
  rotations before and after are free here).

A member's step ``k+1`` waits for its step ``k`` and for the arrival of the step-``k`` message
it receives (the data Bruck and the ring forward; pairwise's send-receive rounds).
``ring``, ``2d`` and ``2d-split`` run over chips (one replica per chip);
``pairwise`` and ``bruck`` over replicas, on any slice or replica list. A mesh axis's groups
(:func:`.groups.mesh_group`): ``ring`` and ``2d`` one ring pass per chip-level part of the
group, ``2d-split`` two halves over them, pairwise and Bruck over each group's replicas
(:func:`mesh_members`).
"""

import numpy as np

from ...inputs.errors import ConfigError
from .embedding import active_axes, axis_rings, part_rings, sequence_ring, slice_ring
from .passes import CollectivePlan, Pass, exchange_members

__all__ = ["plan_alltoall", "default_alltoall_algorithm", "mesh_members"]

_PATTERNS = {"pairwise": "pw", "bruck": "bruck"}


def default_alltoall_algorithm(topology, group=None):
    """The all-to-all algorithm of least closed-form time on this slice and group: ``ring`` on one
    line, ``2d-split`` over two or more axes, ``pairwise`` where those do not apply (replicas
    sharing a chip, an explicit replica list).

    Why (``B`` link bandwidth, every link alike, ``n`` a line's length, even, ``b = S/n``): on a
    ring ``ring``'s busiest link carries ``n S / 8`` and it takes ``n/2`` latencies;
    ``pairwise``'s round ``k`` sends every block ``min(k, n-k)`` hops the same way, ``n^2/4``
    hop-blocks in all, in ``n-1`` rounds that each wait for the last (at best ``n S / 4`` over
    ``B`` and ``n-1`` latencies); ``bruck``'s step ``k`` sends ``S/2`` over ``2^k`` hops
    (``(n-1) S / 2`` over ``B``). On an ``X x Y`` torus ``2d`` moves ``X S/8`` then ``Y S/8``
    over one axis's links at a time; ``2d-split`` keeps both axes busy, ``(X + Y) S / 16``
    when ``X = Y``, the bisection bound of any shortest-path all-to-all (``S`` times the mean
    distance ``(X+Y)/4`` spread over the ``4`` links a chip sends on). A mesh line's folded
    ring still beats the routed algorithms (its two directions share the line's links, but
    every block crosses each link once); ``tests/collectives/test_alltoall.py`` checks the
    choice against every algorithm on rings, tori and meshes, small and large."""
    from .groups import resolve_group

    g = resolve_group(topology, group)
    if g.kind not in ("all", "axis", "mesh") or topology.cores_per_chip > 1:
        return "pairwise"
    if g.kind == "mesh":
        return "2d-split" if sum(p[2] > 1 for p in g.parts) >= 2 else "ring"
    axes = [g.axis] if g.kind == "axis" else active_axes(topology)
    axes = [a for a in axes if topology.dims[a] > 1]
    return "2d-split" if len(axes) >= 2 else "ring"


def plan_alltoall(topology, algorithm, g):
    """The :class:`~.plan.CollectivePlan` of an all-to-all of *algorithm* over the resolved group *g*."""
    c = topology.cores_per_chip
    if algorithm in _PATTERNS:
        members, level = _exchange_groups(topology, g)
        p = Pass(level, "a2a", _PATTERNS[algorithm], (exchange_members(members),), 1.0,
                 stream=(level, algorithm))
        passes = (p,) if p.size > 1 else ()
        return CollectivePlan(topology, "all-to-all", algorithm, g, False, halves=(passes,),
                              level_sizes=(((1, p.size),) if passes else (),))
    if g.kind == "list":
        if algorithm != "ring":
            raise ConfigError(f"{algorithm} needs group all or an axis (x, y, z); an explicit replica list "
                              "has no axes", key_path="group", value=list(g.replicas))
        rings = _directions(lambda rev: sequence_ring(topology, g.replicas, reverse=rev), g.size)
        passes = (Pass("flat", "a2a", "ring", rings, 1.0, stream=("flat", "ring")),) if g.size > 1 else ()
        return CollectivePlan(topology, "all-to-all", algorithm, g, False, halves=(passes,),
                              level_sizes=(((len(rings), g.size),) if passes else (),))
    if c > 1:
        raise ConfigError(f"{algorithm} all-to-all runs over chips, one replica each; this slice has {c} "
                          "cores per chip: use pairwise or bruck", key_path="algorithm", value=algorithm,
                          show_value=False)
    if g.kind == "mesh":
        return _mesh_plan(topology, algorithm, g)
    axes = [g.axis] if g.kind == "axis" else active_axes(topology)
    axes = [a for a in axes if topology.dims[a] > 1]
    if algorithm == "ring" and g.kind == "all" and len(axes) >= 2:
        rings = _directions(lambda rev: slice_ring(topology, reverse=rev), topology.num_chips)
        p = Pass("chip", "a2a", "ring", rings, 1.0, stream=("chip", "slice"))
        return CollectivePlan(topology, "all-to-all", algorithm, g, False, halves=((p,),),
                              level_sizes=(((len(rings), p.size),),))
    orders = [axes]
    separated = False
    if algorithm == "2d-split" and len(axes) >= 2:
        orders = [axes, axes[1:] + axes[:1]]
        separated = (all(topology.wrap[a] for a in axes) and len({topology.dims[a] for a in axes}) == 1
                     and len({topology.axis_link_Bps[a] for a in axes}) == 1
                     and not topology.link_Bps_override and not topology.failed_links)
    halves, sizes = [], []
    for h, order in enumerate(orders):
        passes = []
        for i, a in enumerate(order):
            rings = _directions(lambda rev: axis_rings(topology, a, reverse=rev), topology.dims[a])
            stream = ("chip", a) if separated else ("chip", h, a)
            passes.append(Pass("chip", "a2a", "ring", rings, 1.0 / len(orders), h, i, stream, a))
        halves.append(tuple(passes))
        sizes.append(tuple((len(p.rings), p.size) for p in passes))
    return CollectivePlan(topology, "all-to-all", algorithm, g, False, halves=tuple(halves),
                          level_sizes=tuple(sizes), split_time_separated=separated)


def _mesh_plan(topology, algorithm, g):
    """A mesh-axis group (:mod:`wus_sim.hardware.mesh`), chips only: the ``ring`` algorithm over
    each chip-level part in turn (``ring`` and ``2d`` alike, as the reduce collectives' mesh
    plans do; ``2d-split`` two halves, the second rotated by one part). A part's rings are
    :func:`.embedding.part_rings`: folded where the part is not a whole wrapped axis, so its
    two directions share links there (the plan's contention says so and the event engines run
    it)."""
    parts = [p for p in g.parts if p[2] > 1]
    orders = [parts, parts[1:] + parts[:1]] if algorithm == "2d-split" and len(parts) >= 2 else [parts]
    halves, sizes = [], []
    for h, order in enumerate(orders):
        passes = []
        for i, (axis, stride, length) in enumerate(order):
            rings = _directions(lambda rev: part_rings(topology, axis, stride, length, reverse=rev), length)
            passes.append(Pass("chip", "a2a", "ring", rings, 1.0 / len(orders), h, i, ("chip", h, axis, stride),
                               axis))
        halves.append(tuple(passes))
        sizes.append(tuple((len(p.rings), p.size) for p in passes))
    return CollectivePlan(topology, "all-to-all", algorithm, g, False, halves=tuple(halves), level_sizes=tuple(sizes))


def mesh_members(topology, parts):
    """``(groups, n)`` replica ids of every group of a mesh-axis group with *parts* (``(axis,
    stride, length)``, axis -1 a chip's cores), each row in rank order (the first part
    fastest)."""
    c = topology.cores_per_chip
    reps = np.arange(topology.num_replicas)
    chip = reps // c
    coords = {-1: reps % c, **{a: topology.coords[chip, a].astype(np.int64) for a in range(topology.ndim)}}
    rank = np.zeros(len(reps), np.int64)
    scale = 1
    for axis, stride, length in parts:
        k = (coords[axis] // stride) % length
        rank += k * scale
        scale *= length
        coords[axis] = coords[axis] - stride * k  # what is left names the group
    order = np.lexsort([rank] + [coords[a] for a in sorted(coords)])
    return reps[order].reshape(-1, scale)


def _directions(make, n):
    """Both ring directions (each block goes the shorter way), or one for ``n <= 2`` (there the
    reverse ring would use the same links)."""
    return (make(False), make(True)) if n > 2 else (make(False),)


def _exchange_groups(topology, g):
    """``(members (R, n), level)`` of a pairwise or Bruck pass: chips when a chip is one replica,
    else replicas (rank order: a chip's cores together)."""
    c = topology.cores_per_chip
    if g.kind == "list":
        return np.array([g.replicas], dtype=np.int64), "flat"
    if g.kind == "mesh":
        members = mesh_members(topology, g.parts)
        return (members, "flat") if c > 1 else (members, "chip")
    if g.kind == "axis":
        lines = (topology.axis_rings(g.axis) if topology.dims[g.axis] > 1
                 else np.arange(topology.num_chips)[:, None])
    else:
        lines = np.arange(topology.num_chips)[None, :]
    if c == 1:
        return np.asarray(lines, dtype=np.int64), "chip"
    reps = (np.asarray(lines)[:, :, None] * c + np.arange(c)[None, None, :]).reshape(len(lines), -1)
    return reps.astype(np.int64), "flat"
