"""Mesh-axis groups (groups.py kind "mesh"): every group of the axis at once, one ring per group
and physical part. Times against hand-derived ring formulas where the rings are uncontended."""

import pytest

from wus_sim.collectives import analytic_time, collective_time, simulate_collective
from wus_sim.collectives.schedules.groups import Group, mesh_group
from wus_sim.hardware.mesh import Mesh, layout
from wus_sim.inputs.errors import ConfigError

from make_topology import folded_ring_time, make

S = 48 * 2**20
OPS = ("reduce-scatter", "all-gather", "all-reduce")


def ring_time(n, buf, bw, lat, op):
    """A wrapped ring of n members, one-hop edges, no contention: (n-1) steps of buf/n each way
    (reduce-scatter, all-gather), 2(n-1) for all-reduce (Patarasuk & Yuan 2009's ring)."""
    steps = 2 * (n - 1) if op == "all-reduce" else n - 1
    return steps * (lat + buf / n / bw)


@pytest.mark.parametrize("op", OPS)
def test_whole_axis_part_is_the_axis_ring(op):
    topo = make((8, 4), True, link_GBps=100.0, hop_latency_us=1.0)
    g = mesh_group(layout(topo, Mesh(data=4, tensor=8)), "tensor")
    assert g.parts == ((0, 1, 8),)
    t = collective_time(topo, op, "2d", S, group=g, bidirectional=True)
    # two directions, half the buffer each
    assert t == pytest.approx(ring_time(8, S / 2, 100e9, 1e-6, op), rel=1e-9)
    assert t == pytest.approx(collective_time(topo, op, "2d", S, group="x", bidirectional=True), rel=1e-12)


@pytest.mark.parametrize("op", OPS)
def test_contiguous_part_is_a_folded_line(op):
    # tensor=4 on an 8-chip torus axis: chips 0-3 and 4-7, each a line without its own
    # wraparound link: the folded ring of a 4-chip mesh line, both groups on disjoint links
    topo = make((8,), True, link_GBps=50.0, hop_latency_us=2.0)
    g = mesh_group(layout(topo, Mesh(data=2, tensor=4)), "tensor")
    assert g.parts == ((0, 1, 4),)
    kind = {"reduce-scatter": "rs", "all-gather": "ag", "all-reduce": "ar"}[op]
    expected = folded_ring_time(4, S, 50e9, 2e-6, kind)
    got = simulate_collective(topo, op, "2d", S, group=g, bidirectional=True, engine="simpy").time_s
    assert got == pytest.approx(expected, rel=1e-9)


def test_two_axes_is_the_2d_schedule():
    topo = make((4, 4), True, link_GBps=100.0, hop_latency_us=1.0)
    g = mesh_group(layout(topo, Mesh(fsdp=16)), "fsdp")
    for op in OPS:
        assert collective_time(topo, op, "2d", S, group=g, bidirectional=True) == pytest.approx(
            collective_time(topo, op, "2d", S, bidirectional=True), rel=1e-12)


def test_strided_part_contends_and_engines_agree():
    # data=2 over x at stride 4 (tensor=4 takes the 4 neighbours): each + link carries the edges
    # of the 4 interleaved groups, so the time is above one group's alone
    topo = make((8,), True, link_GBps=100.0, hop_latency_us=1.0)
    g = mesh_group(layout(topo, Mesh(data=2, tensor=4)), "data")
    assert g.parts == ((0, 4, 2),)
    simpy = simulate_collective(topo, "all-reduce", "2d", S, group=g, engine="simpy").time_s
    alone = 2 * (4 * 1e-6 + S / 2 / 100e9)  # 2 steps of S/2 over 4 hops, store-and-forward per hop
    assert simpy > alone * 1.5
    assert collective_time(topo, "all-reduce", "2d", S, group=g) == pytest.approx(simpy, rel=1e-9)


def test_cores_of_a_chip_and_bad_groups():
    topo = make((4, 2), True, cores=2)
    g = mesh_group(layout(topo, Mesh(data=8, tensor=2)), "tensor")
    assert g.parts == ((-1, 1, 2),)
    t = analytic_time(topo, "all-reduce", "2d", S, group=g)
    # the on-chip ring of 2 cores alone: a reduce-scatter and an all-gather of S/2 over the on-chip link
    assert t >= 2 * S / 2 / 200e9
    assert simulate_collective(topo, "all-reduce", "2d", S, group=g, engine="simpy").time_s == pytest.approx(t, rel=1e-9)
    with pytest.raises(ConfigError):
        collective_time(topo, "all-reduce", "2d", S, group=Group("mesh", parts=((0, 1, 3),), size=3))
    with pytest.raises(ConfigError, match="runs over a whole slice"):
        collective_time(topo, "all-reduce", "halving-doubling", S, group=g)


@pytest.mark.parametrize("routing", ["store-and-forward", "cut-through"])
@pytest.mark.parametrize("op", OPS)
def test_split_axis_ring_is_timed_from_its_hops(op, routing):
    # 6x4 torus, data=3, fsdp=8: JAX splits x (6 = data 3 x fsdp 2, fsdp minor): a data group is
    # x = inner, inner+2, inner+4 at one y: a wrapped ring of 3 whose every edge crosses 2 links.
    # The two interleaved groups of a line run opposite directions, so no link is shared:
    # each ring step is one message of S/3 over 2 hops, uncontended. By hand:
    # store-and-forward 2 (lat + S/3/bw) per step, cut-through 2 lat + S/3/bw; 2 steps for
    # reduce-scatter and all-gather, 4 for all-reduce.
    topo = make((6, 4), True, link_GBps=100.0, hop_latency_us=1.0)
    lay = layout(topo, Mesh(data=3, fsdp=8))
    g = mesh_group(lay, "data")
    assert g.parts == ((0, 2, 3),) and lay.members("data", 0) == [0, 2, 4]
    steps = 4 if op == "all-reduce" else 2
    lat, msg = 1e-6, S / 3 / 100e9
    per_step = 2 * (lat + msg) if routing == "store-and-forward" else 2 * lat + msg
    got = simulate_collective(topo, op, "2d", S, group=g, bidirectional=True, engine="simpy",
                              routing=routing).time_s
    assert got == pytest.approx(steps * per_step, rel=1e-9)
    assert collective_time(topo, op, "2d", S, group=g, bidirectional=True, routing=routing) == pytest.approx(
        got, rel=1e-9)
