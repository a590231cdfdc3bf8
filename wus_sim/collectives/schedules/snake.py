"""The whole-slice ring's order (the snake of :func:`wus_sim.collectives.schedules.embedding.slice_ring`)
as coordinates, in plain Python: :mod:`wus_sim.collectives.schedules.embedding` turns it into chip ids, and
the numpy-free :mod:`wus_sim.collectives.engines.uniform_torus` walks it. The construction is described
in :mod:`wus_sim.collectives.schedules.embedding`'s docstring."""

import math

__all__ = ["boustrophedon", "slice_ring_coords"]


def boustrophedon(dims):
    """Hamiltonian path over a grid (first axis fastest), as a list of coordinate tuples."""
    seq = [(v,) for v in range(dims[0])]
    for d in dims[1:]:
        new = []
        for v in range(d):
            part = seq if v % 2 == 0 else seq[::-1]
            new.extend(p + (v,) for p in part)
        seq = new
    return seq


def slice_ring_coords(dims, wrap):
    """Coordinates (one tuple of ``len(dims)`` per chip) of the whole-slice ring, in ring order,
    for a slice of two or more active axes (axes longer than 1)."""
    active = [a for a, d in enumerate(dims) if d > 1]
    if len(active) <= 1:
        raise ValueError("slice_ring_order needs two or more active axes")  # callers use axis_rings
    line = None
    for a in active:
        others = [b for b in active if b != a]
        if math.prod(dims[b] for b in others) % 2 == 0:
            line = a
            break
    if line is None:
        # every active side odd: the snake then ends at position a-1 of the line, not 1; a
        # wrapped line axis closes it in one hop (a-1 -> 0 over the wraparound link), so any
        # torus (C_m x C_n, C_a x C_b x C_c) gets a one-hop cycle
        line = next((a for a in active if wrap[a]), None)
    coords = []
    if line is not None:
        others = [b for b in active if b != line]
        path = boustrophedon([dims[b] for b in others])
        for j, h in enumerate(path):
            positions = range(1, dims[line]) if j % 2 == 0 else range(dims[line] - 1, 0, -1)
            for x in positions:
                coords.append(((line, x),) + tuple(zip(others, h)))
        for h in reversed(path):
            coords.append(((line, 0),) + tuple(zip(others, h)))
    else:
        for h in boustrophedon([dims[b] for b in active]):
            coords.append(tuple(zip(active, h)))
    full = []
    for c in coords:
        point = [0] * len(dims)
        for axis, x in c:
            point[axis] = x
        full.append(tuple(point))
    return full
