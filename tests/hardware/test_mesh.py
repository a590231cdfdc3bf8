"""Device meshes on the torus: JAX's device order reshaped (data, fsdp, tensor), tensor innermost;
every axis's groups partition the devices; impossible meshes are one-line errors listing ones that fit."""

import itertools
import math

import numpy as np
import pytest

from wus_sim.hardware.mesh import Mesh, Placement, factorisations, layout, parse_mesh
from wus_sim.inputs.errors import ConfigError

from make_topology import make


def test_parse_text_mapping_and_errors():
    assert parse_mesh("fsdp=64,tensor=4") == Mesh(data=1, fsdp=64, tensor=4)
    assert parse_mesh({"data": 2}) == Mesh(data=2)
    assert str(Mesh(fsdp=8, tensor=2)) == "fsdp=8,tensor=2"
    for bad in ("tensor", "tensor=0", "tensor=x", "pipeline=2", "data=2,data=4", 3):
        with pytest.raises(ConfigError):
            parse_mesh(bad)
    with pytest.raises(ConfigError, match="unknown axis 'tensor'"):
        parse_mesh("tensor=2", axes=("data", "fsdp"))


def device_coords(topo):
    """Device id -> (core, x, y, z) as JAX lists TPU devices: core fastest, then x, y, z."""
    c = topo.cores_per_chip
    return {chip * c + core: (core,) + tuple(int(v) for v in topo.coords[chip])
            for chip in range(topo.num_chips) for core in range(c)}


@pytest.mark.parametrize("dims,cores", [((4, 4), 1), ((2, 2, 4), 1), ((4, 2), 2), ((8, 4), 1)])
def test_groups_partition_devices_tensor_innermost(dims, cores):
    topo = make(dims, True, cores=cores)
    n = topo.num_replicas
    fits = factorisations(topo)
    # powers of two: every factorisation into three axes lays out (each part divides its axis)
    k = int(math.log2(n))
    assert len(fits) == (k + 1) * (k + 2) // 2
    for mesh in fits:
        lay = layout(topo, mesh)
        for axis in ("data", "fsdp", "tensor"):
            size = getattr(mesh, axis)
            groups = [lay.members(axis, i) for i in range(n // size)]
            flat = sorted(d for g in groups for d in g)
            assert flat == list(range(n))  # a partition of the devices
            assert math.prod(p[2] for p in lay.parts[axis]) == size
        # tensor innermost: a tensor group is consecutive device ids (the nearest devices)
        assert lay.members("tensor", 0) == list(range(mesh.tensor))


def test_split_axis_parts_on_v5p_shape():
    topo = make((4, 8, 8), True)
    lay = layout(topo, Mesh(fsdp=32, tensor=8))
    # tensor takes x (4) and 2 of y; fsdp the other 4 of y (stride 2) and z
    assert lay.parts["tensor"] == ((0, 1, 4), (1, 1, 2))
    assert lay.parts["fsdp"] == ((1, 2, 4), (2, 1, 8))
    coords = device_coords(topo)
    tensor0 = [coords[d] for d in lay.members("tensor", 0)]
    assert {c[3] for c in tensor0} == {0} and {c[2] for c in tensor0} == {0, 1}  # same z, y in 0..1
    assert {c[1] for c in tensor0} == {0, 1, 2, 3}  # the whole x axis
    # the whole slice's group: adjacent parts of one axis merge back into the whole axis
    assert lay.group_parts("data", "fsdp", "tensor") == ((0, 1, 4), (1, 1, 8), (2, 1, 8))


def test_impossible_meshes_are_one_line_with_ones_that_fit():
    topo = make((6, 4), True)
    with pytest.raises(ConfigError) as exc:
        layout(topo, Mesh(data=6, tensor=4))  # tensor=4 straddles x=6
    text = str(exc.value)
    assert "\n" not in text and "cannot be laid" in text and "--mesh" in text
    for m in text.split("meshes that fit: ")[1].split(" (and")[0].split(", --mesh "):
        layout(topo, parse_mesh(m.replace("--mesh ", "")))  # every suggestion lays out
    with pytest.raises(ConfigError, match="multiplies to 8 devices; t has 24"):
        layout(topo, Mesh(data=2, tensor=4))


def test_placement_sets_slices_from_dcn_mesh():
    p = Placement(mesh="fsdp=16,tensor=16", dcn_mesh="data=16")
    assert p.slices == 16 and p.mesh.tensor == 16
    with pytest.raises(ConfigError, match="slices is 3"):
        Placement(dcn_mesh="data=2", slices=3)
    with pytest.raises(ConfigError, match="not both"):
        Placement(mesh="data=8", spatial_ways=2)


def test_wrapped_axes_first_and_members_are_device_ids():
    # x a mesh line, y a ring: the tensor axis's chips come from y, so data's strided part of y
    # is a torus ring (v3-8192's 128 x 32 with tensor=4 over a replica's cores is this shape)
    topo = make((8, 4), (False, True), cores=2)
    lay = layout(topo, Mesh(data=16, tensor=4))
    assert lay.parts["tensor"] == ((-1, 1, 2), (1, 1, 2))
    assert lay.parts["data"] == ((1, 2, 2), (0, 1, 8))
    coords = device_coords(topo)
    group = [coords[d] for d in lay.members("tensor", 0)]
    assert group == [(0, 0, 0), (1, 0, 0), (0, 0, 1), (1, 0, 1)]  # both cores of chips (0,0) and (0,1)
    for axis in ("data", "tensor"):
        size = getattr(lay.mesh, axis)
        ids = sorted(d for i in range(topo.num_replicas // size) for d in lay.members(axis, i))
        assert ids == list(range(topo.num_replicas))
