"""MaxText's custom_mesh ring layouts (wus_sim.hardware.mesh, layout(..., custom_mesh=NAME)) on a 16 x 16
slice, checked against MaxText's own construction written out here from its source
(github.com/AI-Hypercomputer/maxtext, src/maxtext/utils/max_utils.py, reshape_mesh_to_rings), and ring
hop counts counted by hand on the torus."""

import numpy as np
import pytest

from wus_sim.hardware.mesh import Mesh, layout
from wus_sim.inputs.errors import ConfigError

from make_topology import make

TORUS = make((16, 16), True)


def device_array():
    """``a = create_device_mesh([16, 16])`` on a 16 x 16 slice: JAX gives the last (most intensive) mesh
    axis the first physical axis, x, and the other one y, so ``a[i, j]`` is the chip at x = j, y = i,
    id ``16 i + j`` (chips numbered x fastest, as JAX lists them)."""
    return np.arange(256).reshape(16, 16)


def maxtext_rings(a, name):
    """reshape_mesh_to_rings(a, name), its loops as MaxText writes them."""
    b = []
    if name == "hybrid_ring_64x4":
        for i in range(8):
            b.append([[a[2 * i, 2 * j], a[2 * i, 2 * j + 1], a[2 * i + 1, 2 * j + 1], a[2 * i + 1, 2 * j]]
                      for j in range(8)])
        return np.reshape(np.array(b), (64, 4))
    for i in range(8):
        b.append([[a[2 * i, 4 * j + k] for k in range(4)] + [a[2 * i + 1, 4 * j + 3 - k] for k in range(4)]
                  for j in range(4)])
    return np.reshape(np.array(b), (32, 8))


@pytest.mark.parametrize("name, outer, inner, mesh", [
    ("hybrid_ring_64x4", "fsdp", "tensor", Mesh(fsdp=64, tensor=4)),
    ("hybrid_ring_64x4", "fsdp", "expert", Mesh(fsdp=64, expert=4)),
    ("hybrid_ring_64x4", "data", "tensor", Mesh(data=64, tensor=4)),
    ("hybrid_ring_32x8", "fsdp", "tensor", Mesh(fsdp=32, tensor=8)),
])
def test_every_device_is_where_maxtext_puts_it(name, outer, inner, mesh):
    # MaxText reshapes its (blocks, ring) array row-major into the mesh: the outer axis indexes the
    # blocks, the inner one the ring
    want = maxtext_rings(device_array(), name)
    lay = layout(TORUS, mesh, custom_mesh=name)
    got = np.array([[lay.device_at({outer: f, inner: t}) for t in range(want.shape[1])]
                    for f in range(want.shape[0])])
    assert (got == want).all()
    assert lay.rule == name and lay.snake == frozenset((inner,))
    assert sorted(lay.members(inner, 0)) == sorted(want[0]) and lay.members(outer, 1) == list(want[:, 1])


def hops(a, b):
    """Links between chips *a* and *b* on the 16 x 16 torus (shortest way round each axis)."""
    dx, dy = abs(a % 16 - b % 16), abs(a // 16 - b // 16)
    return min(dx, 16 - dx) + min(dy, 16 - dy)


def test_ring_hops_by_hand_64x4():
    lay = layout(TORUS, Mesh(fsdp=64, tensor=4), custom_mesh="hybrid_ring_64x4")
    # tensor: the 2 x 2 block at the origin, round it: (0,0) (1,0) (1,1) (0,1), every edge one link
    ring = lay.members("tensor", 0)
    assert ring == [0, 1, 17, 16]
    assert [hops(ring[i], ring[(i + 1) % 4]) for i in range(4)] == [1, 1, 1, 1]
    # fsdp: every 2nd chip along x, then every 2nd along y; 8 x 8 = 64 chips, each axis's ring
    # closing round the wraparound (2 x 8 = 16) in edges of 2 links
    group = lay.members("fsdp", 0)
    assert group[:9] == [0, 2, 4, 6, 8, 10, 12, 14, 32]
    row = group[:8]
    assert [hops(row[i], row[(i + 1) % 8]) for i in range(8)] == [2] * 8
    column = group[::8]
    assert column == [0, 32, 64, 96, 128, 160, 192, 224]
    assert [hops(column[i], column[(i + 1) % 8]) for i in range(8)] == [2] * 8
    assert lay.parts["tensor"] == ((0, 1, 2), (1, 1, 2)) and lay.parts["fsdp"] == ((0, 2, 8), (1, 2, 8))
    assert lay.describe()[:2] == [
        "tensor=4: x[2 of stride 1, 1-hop ring edges] x y[2 of stride 1, 1-hop ring edges] "
        "(one hybrid_ring_64x4 ring in MaxText's order)",
        "fsdp=64: x[8 of stride 2, 2-hop ring edges] x y[8 of stride 2, 2-hop ring edges]"]
    # JAX's own layout of the same mesh (what --maxtext-approximate ran): tensor a segment of 4 on x,
    # fsdp x at stride 4 times the whole y
    jax = layout(TORUS, Mesh(fsdp=64, tensor=4))
    assert jax.parts["tensor"] == ((0, 1, 4),) and jax.members("tensor", 0) == [0, 1, 2, 3]
    assert jax.parts["fsdp"] == ((0, 4, 4), (1, 1, 16))


def test_ring_of_8_by_hand_32x8():
    lay = layout(TORUS, Mesh(fsdp=32, tensor=8), custom_mesh="hybrid_ring_32x8")
    ring = lay.members("tensor", 0)
    assert ring == [0, 1, 2, 3, 19, 18, 17, 16]  # along y = 0, then back along y = 1
    assert [hops(ring[i], ring[(i + 1) % 8]) for i in range(8)] == [1] * 8
    assert lay.members("fsdp", 0)[:5] == [0, 4, 8, 12, 32]


@pytest.mark.parametrize("topology, mesh, name, said", [
    (make((8, 8, 4), True), Mesh(fsdp=64, tensor=4), "hybrid_ring_64x4", "16 x 16 slice"),
    (make((16, 8), True, cores=2), Mesh(fsdp=64, tensor=4), "hybrid_ring_64x4", "16 x 16 slice"),
    (TORUS, Mesh(fsdp=4, tensor=64), "hybrid_ring_64x4", "an axis of 64 then"),
    (TORUS, Mesh(data=4, fsdp=16, tensor=4), "hybrid_ring_64x4", "an axis of 64 then"),
    (TORUS, Mesh(fsdp=64, tensor=4), "hybrid_ring_32x8", "an axis of 32 then"),
    (TORUS, Mesh(fsdp=64, tensor=4), "ring_16x16", "not a custom mesh"),
])
def test_what_maxtext_refuses_is_one_line(topology, mesh, name, said):
    with pytest.raises(ConfigError, match=said) as err:
        layout(topology, mesh, custom_mesh=name)
    assert "\n" not in str(err.value)
