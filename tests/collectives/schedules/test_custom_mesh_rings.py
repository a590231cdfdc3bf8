"""The collectives of MaxText's hybrid_ring_64x4 groups on a 16 x 16 torus (wus_sim.hardware.mesh,
custom_mesh), timed against ring counts by hand: every group of the axis at once, one ring pass per part
(the 2-D schedule), store-and-forward, no link shared."""

import pytest

from wus_sim.collectives import collective_time, simulate_collective
from wus_sim.collectives.schedules.groups import mesh_group
from wus_sim.hardware.mesh import Mesh, layout

from make_topology import make

S = 48 * 2**20
BW, LAT = 100e9, 1e-6
TORUS = make((16, 16), True, link_GBps=100.0, hop_latency_us=1.0)
LAY = layout(TORUS, Mesh(fsdp=64, tensor=4), custom_mesh="hybrid_ring_64x4")


def step(nbytes, links):
    """One ring step: a message of *nbytes* over *links* links, store-and-forward (each link its latency
    and the whole message)."""
    return links * (LAT + nbytes / BW)


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather", "all-reduce"])
def test_tensor_block_by_hand(op):
    # the 2 x 2 block: a pass over the x pair (one step of S/2 over 1 link, the pair's two links one
    # each way), then the y pair on the S/2 left (one step of S/4); all-reduce: x reduce-scatter,
    # the y pair's all-reduce (2 steps of S/4), x all-gather. The 64 blocks share no link.
    g = mesh_group(LAY, "tensor")
    assert g.parts == ((0, 1, 2), (1, 1, 2)) and g.size == 4
    one_way = step(S / 2, 1) + step(S / 4, 1)
    want = 2 * step(S / 2, 1) + 2 * step(S / 4, 1) if op == "all-reduce" else one_way
    got = simulate_collective(TORUS, op, "2d", S, group=g, bidirectional=True, engine="simpy").time_s
    assert got == pytest.approx(want, rel=1e-9)
    assert collective_time(TORUS, op, "2d", S, group=g, bidirectional=True) == pytest.approx(got, rel=1e-9)


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather"])
def test_fsdp_strided_rings_by_hand(op):
    # x at stride 2: a ring of 8 round the wraparound, each edge 2 links; the two interleaved groups of
    # a line (even and odd x) run opposite ways, so no link carries two: 7 steps of S/8 over 2 links;
    # then y the same on the S/8 left: 7 steps of S/64 over 2 links
    g = mesh_group(LAY, "fsdp")
    assert g.parts == ((0, 2, 8), (1, 2, 8)) and g.size == 64
    want = 7 * step(S / 8, 2) + 7 * step(S / 64, 2)
    got = simulate_collective(TORUS, op, "2d", S, group=g, bidirectional=True, engine="simpy").time_s
    assert got == pytest.approx(want, rel=1e-9)
    assert collective_time(TORUS, op, "2d", S, group=g, bidirectional=True) == pytest.approx(got, rel=1e-9)


def test_both_axes_together_are_the_whole_slice():
    # tensor and fsdp together hold every chip: the parts merge into the two whole axes
    assert mesh_group(LAY, "fsdp", "tensor").parts == ((0, 1, 16), (1, 1, 16))
