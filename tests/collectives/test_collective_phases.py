"""Phases of a collective (what traces draw) add up to its exact closed form."""

import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.collectives import REDUCE_OPS, analytic_time, phase_times
from wus_sim.hardware.topology_files import load_topology


@settings(max_examples=60, deadline=None)
@given(dims=st.lists(st.integers(1, 12), min_size=1, max_size=3), op=st.sampled_from(REDUCE_OPS),
       algorithm=st.sampled_from(["ring", "bidir-ring", "2d"]), wrap=st.booleans(),
       nbytes=st.integers(2**10, 2**32))
def test_phases_tile_the_closed_form_or_are_absent(dims, op, algorithm, wrap, nbytes):
    kind = "torus" if wrap else "mesh"
    topo = load_topology(f"{kind}:{'x'.join(map(str, dims))}")
    phases = phase_times(topo, op, algorithm, nbytes)
    total = analytic_time(topo, op, algorithm, nbytes)
    if phases is None:
        return
    assert sum(t for _, t in phases) == pytest.approx(total, rel=1e-9, abs=1e-15)
    assert all(t > 0 for _, t in phases)


@settings(max_examples=40, deadline=None)
@given(dims=st.lists(st.integers(2, 12), min_size=1, max_size=3))
def test_2d_reduce_scatter_on_a_torus_is_one_phase_per_axis_in_order(dims):
    topo = load_topology(f"torus:{'x'.join(map(str, dims))}")
    phases = phase_times(topo, "reduce-scatter", "2d", 2**26)
    assert [name for name, _ in phases] == [f"axis {'XYZ'[a]} reduce-scatter" for a in range(len(dims))]
    ag = phase_times(topo, "all-gather", "2d", 2**26)
    assert [name for name, _ in ag] == [f"axis {'XYZ'[a]} all-gather" for a in reversed(range(len(dims)))]


def test_contended_or_split_schedules_have_no_phases():
    topo = load_topology("torus:8x8")
    assert phase_times(topo, "all-reduce", "halving-doubling", 2**20) is None
    assert phase_times(topo, "all-reduce", "2d-split", 2**20) is None
