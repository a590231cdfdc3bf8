"""The whole-slice ring on tori with odd sides: a Hamiltonian cycle of one-hop edges.

The Cartesian product of cycles C_m x C_n (m, n >= 3) is Hamiltonian with unit edges for every
m and n, odd x odd included (a standard result on products of cycles); so is C_a x C_b x C_c.
Neighbour-ness is checked here from the coordinates alone (row-major, axis 0 fastest, as the
README defines chip ids), not from the topology's link tables.
"""

import itertools
import math

import pytest

from wus_sim.collectives import simulate_collective
from wus_sim.collectives.schedules.embedding import slice_ring, slice_ring_order
from wus_sim.inputs.units import MiB

from make_topology import make


def coords_of(chip, dims):
    """Chip id -> coordinates: ``chip = x + X*(y + Y*z)``."""
    out = []
    for d in dims:
        out.append(chip % d)
        chip //= d
    return tuple(out)


def torus_neighbours(a, b, dims, wrap):
    """True iff the coordinates differ in exactly one axis, by 1 (mod the side where it wraps)."""
    diff = [(x, y, d, w) for x, y, d, w in zip(a, b, dims, wrap) if x != y]
    if len(diff) != 1:
        return False
    x, y, d, w = diff[0]
    return abs(x - y) == 1 or (w and (x - y) % d in (1, d - 1))


def assert_one_hop_hamiltonian(dims, wrap):
    topo = make(dims, wrap)
    order = [int(c) for c in slice_ring_order(topo)]
    assert sorted(order) == list(range(math.prod(dims)))  # every chip exactly once
    for i, a in enumerate(order):
        b = order[(i + 1) % len(order)]  # includes last -> first
        assert torus_neighbours(coords_of(a, dims), coords_of(b, dims), dims, wrap), (i, a, b)
    for reverse in (False, True):  # the embedding the engines run: one link per edge
        assert slice_ring(topo, reverse=reverse).hops.max() == 1


@pytest.mark.parametrize("m,n", list(itertools.product(range(3, 10), repeat=2)))
def test_2d_torus_ring_is_one_hop_hamiltonian(m, n):
    assert_one_hop_hamiltonian((m, n), (True, True))


@pytest.mark.parametrize("dims", [(3, 3, 3), (3, 5, 7), (5, 3, 3), (3, 4, 5), (4, 3, 3), (7, 7, 3),
                                  (3, 1, 5), (1, 5, 7)])
def test_3d_torus_ring_is_one_hop_hamiltonian(dims):
    assert_one_hop_hamiltonian(dims, (True, True, True))


@pytest.mark.parametrize("dims,wrap", [((3, 5), (True, False)), ((3, 5), (False, True)),
                                       ((5, 3, 3), (False, False, True))])
def test_one_wrapping_odd_axis_is_enough(dims, wrap):
    """All sides odd, only one axis wraps: the snake can still close over that axis's wraparound."""
    assert_one_hop_hamiltonian(dims, wrap)


@pytest.mark.parametrize("dims", [(3, 5), (5, 7)])
def test_ring_all_reduce_on_odd_torus_equals_textbook_form(dims):
    """Thakur et al. 2005: ring all-reduce over N members = 2(N-1)(alpha + S/(N beta)) when every
    ring edge is one link hop (1 core per chip, 100 GB/s, 1 us per hop)."""
    topo = make(dims, True, link_GBps=100.0, hop_latency_us=1.0)
    S = 64 * MiB
    N = math.prod(dims)
    expect = 2 * (N - 1) * (1e-6 + S / N / 100e9)
    got = simulate_collective(topo, "all-reduce", "ring", S, engine="simpy").time_s
    assert got == pytest.approx(expect, rel=1e-9)
