"""One copy of a mesh group's collective (groups.one_copy): the groups at each coordinate of an axis
the group does not span share no link, so the collective's time on the slice cut to the spanned
axes is its time on the whole slice, to the last bit. The reference is the same memoized time on
the whole slice (the cut switched off, the memos cleared: the path before the cut), and for the
contended groups also the whole slice simulated message by message (simulate_collective, which
never cuts)."""

import pytest

from wus_sim.collectives import api, clear_caches, collective_time, collective_times, simulate_collective
from wus_sim.collectives.schedules.groups import Group, mesh_group, one_copy
from wus_sim.collectives.schedules.loads import contention
from wus_sim.collectives.schedules.plan_cache import cached_plan
from wus_sim.hardware.mesh import CORE_AXES, Mesh, factorisations, layout

from make_topology import make

S = 24 * 2**20
OPS = ("reduce-scatter", "all-gather", "all-reduce")
TORUS = make((4, 6, 4), True, link_GBps=(100.0, 100.0, 50.0), hop_latency_us=1.0)
"""A small 3-D torus with an uneven axis (6: strided parts interleave their groups, whose rings
then share links: contended, so the time is an event engine's, not a closed form) and a slower z."""

AXIS_SETS = (("data",), ("fsdp",), ("tensor",), ("data", "fsdp", "expert"), ("fsdp", "expert"))


def groups(topo):
    """Every distinct mesh group of every mesh of *topo* that leaves some axis unspanned, the
    contended ones (an event engine's time) first."""
    seen = {}
    for mesh in factorisations(topo, CORE_AXES):
        lay = layout(topo, mesh)
        for axes in AXIS_SETS:
            g = mesh_group(lay, *axes)
            if g.size > 1 and one_copy(topo, g)[0] is not topo:
                seen.setdefault(g.parts, g)
    return sorted(seen.values(), key=lambda g: contention(cached_plan(topo, "all-reduce", "2d", group=g)) is None)


GROUPS = groups(TORUS)


@pytest.fixture
def whole(monkeypatch):
    """The time of a collective on the whole slice, as collective_time gave it before the cut."""

    def time_s(*args, **kwargs):
        clear_caches()
        with monkeypatch.context() as m:
            m.setattr(api, "one_copy", lambda topology, group: (topology, group))
            t = collective_time(TORUS, *args, **kwargs)
        clear_caches()
        return t

    return time_s


def test_some_groups_leave_axes_unspanned():
    assert len(GROUPS) >= 8
    assert contention(cached_plan(TORUS, "all-reduce", "2d", group=GROUPS[3])) is not None
    assert any(len({a for a, _, _ in g.parts}) == 2 for g in GROUPS)


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: str(g.parts))
@pytest.mark.parametrize("op", OPS)
def test_one_copy_times_the_whole_slice(group, op, whole):
    t = collective_time(TORUS, op, "2d", S, group=group)
    assert t == whole(op, "2d", S, group=group)  # to the last bit
    event = simulate_collective(TORUS, op, "2d", S, group=group)
    assert t == pytest.approx(event.time_s, rel=1e-12)


@pytest.mark.parametrize("group", GROUPS[:4], ids=lambda g: str(g.parts))
def test_one_copy_under_cut_through_and_both_directions(group, whole):
    for kw in ({"routing": "cut-through"}, {"bidirectional": True}):
        assert collective_time(TORUS, "all-reduce", "ring", S, group=group, **kw) == whole(
            "all-reduce", "ring", S, group=group, **kw)


@pytest.mark.parametrize("group", GROUPS[:4], ids=lambda g: str(g.parts))
def test_one_copy_of_an_all_to_all(group, whole):
    for algorithm in ("2d", "pairwise"):
        assert collective_time(TORUS, "all-to-all", algorithm, S, group=group) == whole(
            "all-to-all", algorithm, S, group=group)


def test_batched_sizes_take_the_copy_too(whole):
    for g in GROUPS[:4]:
        sizes = [S / 7, S, 3 * S]
        clear_caches()
        assert collective_times(TORUS, "all-reduce", "2d", sizes, group=g) == [
            whole("all-reduce", "2d", s, group=g) for s in sizes]


def test_the_copy_keeps_the_spanned_axes_only():
    g = mesh_group(layout(TORUS, Mesh(data=4, fsdp=6, tensor=4)), "fsdp")  # fsdp on the y axis
    assert g.parts == ((1, 1, 6),)
    copy, same = one_copy(TORUS, g)
    assert same is g
    assert copy.dims == (1, 6, 1) and copy.wrap == (False, True, False)
    assert copy.axis_link_Bps == TORUS.axis_link_Bps and copy.hop_latency_s == TORUS.hop_latency_s
    assert one_copy(TORUS, g)[0] is copy  # one object per slice and axes: the memos share it


def test_what_is_kept_whole():
    g = mesh_group(layout(TORUS, Mesh(data=4, fsdp=6, tensor=4)), "fsdp")
    whole = mesh_group(layout(TORUS, Mesh(data=96)), "data")
    assert one_copy(TORUS, whole) == (TORUS, whole)  # spans every axis
    listed = Group("list", replicas=(0, 1, 2), size=3)
    assert one_copy(TORUS, listed) == (TORUS, listed)
    assert one_copy(TORUS, None) == (TORUS, None)
    failed = make((4, 6, 4), True)
    failed = type(failed)(**{**{f: getattr(failed, f) for f in ("name", "chip", "dims", "wrap", "axis_link_Bps",
                                                                 "hop_latency_s", "onchip_Bps", "cores_per_chip")},
                             "failed_links": (0,)})
    assert one_copy(failed, g)[0] is failed  # link ids of the whole slice
