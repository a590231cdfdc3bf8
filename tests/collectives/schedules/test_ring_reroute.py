"""Line rings around failed links: only the edges over a failed link change, each into its
detour, and the plans of one slice's ops share the rings (issue 34: a step plans all-reduce,
reduce-scatter and all-gather over them)."""

import numpy as np
import pytest

from wus_sim.collectives import clear_caches
from wus_sim.collectives.schedules.embedding import active_axes, axis_rings, part_rings
from wus_sim.collectives.schedules.plan_cache import cached_plan
from wus_sim.hardware.topology_files import load_topology


def _by_hand(topology, path):
    """*path* with each failed link replaced by the topology's detour for it, link by link."""
    failed = set(topology.failed_links)
    out = []
    for k in path:
        out += list(topology.detour(k)) if k in failed else [k]
    return out


@pytest.mark.parametrize("spec, faults", [
    ("torus:8x8", {"failed_links": "27+x"}),
    ("torus:8x8", {"failed_links": 3, "seed": 4}),
    ("tpu-v3-128", {"failed_links": 2, "seed": 1}),
    ("mesh:6x5", {"failed_links": 1, "seed": 1}),
    ("torus:4x4x4", {"failed_links": 2, "seed": 2}),
])
def test_every_edge_over_a_failed_link_becomes_its_detour_and_no_other_edge_changes(spec, faults):
    healthy = load_topology(spec)
    faulty = load_topology(spec, **faults)
    assert faulty.failed_links
    changed = 0
    for axis in active_axes(faulty):
        for reverse in (False, True):
            built = [(axis_rings(healthy, axis, reverse), axis_rings(faulty, axis, reverse))]
            d = faulty.dims[axis]
            if d % 4 == 0:  # the halves of a line at stride 2 (a mesh-axis part), rerouted the same way
                built.append((part_rings(healthy, axis, 2, d // 4, reverse, alternate=True),
                              part_rings(faulty, axis, 2, d // 4, reverse, alternate=True)))
            for before, after in built:
                assert np.array_equal(before.members, after.members)
                width, here = 1, 0
                for r in range(before.num_rings):
                    for i in range(before.size):
                        want = _by_hand(faulty, before.edge_path(r, i))
                        assert after.edge_path(r, i) == want
                        assert list(after.links[r, i, len(want):]) == [-1] * (after.links.shape[2] - len(want))
                        here += want != before.edge_path(r, i)
                        width = max(width, len(want))
                if here:  # rebuilt: padded to its longest edge, as a ring built from edge lists is
                    assert after.links.shape == before.links.shape[:2] + (width,)
                    assert after.links.dtype == np.int64 and after.hops.dtype == np.int64
                else:  # no edge crosses a failed link: the embedding itself
                    assert after.links.shape == before.links.shape and np.array_equal(after.links, before.links)
                changed += here
    assert changed > 0


def test_the_ops_of_one_faulty_slice_share_their_line_rings_until_the_caches_are_cleared():
    topo = load_topology("torus:8x8", failed_links="27+x")
    clear_caches()
    plans = [cached_plan(topo, op, "2d", bidirectional=True) for op in ("all-reduce", "reduce-scatter", "all-gather")]
    rings = [{(p.axis, id(e)) for p in plan.passes if p.level == "chip" for e in p.rings} for plan in plans]
    assert rings[0] == rings[1] == rings[2]
    clear_caches()
    again = cached_plan(topo, "all-reduce", "2d", bidirectional=True)
    assert not {id(e) for p in again.passes for e in p.rings} & {i for _, i in rings[0]}
