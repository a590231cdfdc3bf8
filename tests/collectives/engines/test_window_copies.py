"""window_copies: the per-node values of several sizes read where needed are the schedules'
own arrays, bit for bit; a copy's events are one block of the run's; sparse_tile is np.tile."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.collectives.schedules.messages import compile_messages
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.collectives.engines.window_copies import Copies, SizedNodes, sparse_tile
from wus_sim.hardware.topology_files import load_topology


@pytest.fixture(scope="module")
def plan():
    return plan_collective(load_topology("torus:4x4"), "all-reduce", "2d")


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.floats(1.0, 1e10), min_size=1, max_size=5),
       speeds=st.one_of(st.none(), st.lists(st.floats(1e6, 1e13), min_size=5, max_size=5)),
       chunks=st.integers(1, 3))
def test_sized_nodes_are_the_schedules_arrays(plan, sizes, speeds, chunks):
    """Every node's bytes and reduction time, read by global node, equal the schedule's own
    (``Schedule.msg_bytes`` and ``.rho``, computed from the same fractions) to the last bit."""
    speeds = None if speeds is None else speeds[:len(sizes)]
    scheds = [compile_messages(plan, S, chunks=chunks, reduce_Bps=None if speeds is None else speeds[i])
              for i, S in enumerate(sizes)]
    s0 = scheds[0]
    everyone = np.arange(len(sizes) * s0.num_nodes)
    nbytes = SizedNodes(s0.frac, [s.nbytes for s in scheds], chunks)
    assert np.array_equal(nbytes[everyone], np.concatenate([s.msg_bytes for s in scheds]))
    if speeds is not None:
        rho = SizedNodes(s0.rho_frac, [s.nbytes for s in scheds], chunks, speeds)
        assert np.array_equal(rho[everyone], np.concatenate([s.rho for s in scheds]))
        last = len(everyone) - 1
        assert rho.item(last) == scheds[-1].rho[-1]


@pytest.mark.parametrize("C", [1, 3])
def test_copies_number_events_copy_by_copy(C):
    n = 7
    copies = Copies(C, n, 5)
    g = np.arange(C * n)
    c, m = g // n, g % n
    assert np.array_equal(copies.local(g), m)
    assert np.array_equal(copies.ready(g), 2 * n * c + m)
    assert np.array_equal(copies.delivered(g), 2 * n * c + n + m)


@pytest.mark.parametrize("C", [1, 4])
def test_sparse_tile_is_tile(C):
    initial = np.zeros(50, np.int64)
    initial[[3, 17, 49]] = [2, 1, 5]
    assert np.array_equal(sparse_tile(initial, C, {}), np.tile(initial, C))
