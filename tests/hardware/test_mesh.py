"""Device meshes on the torus: JAX's device order reshaped (data, fsdp, tensor), tensor innermost;
every axis's groups partition the devices; impossible meshes are one-line errors listing ones that fit."""

import itertools
import math

import numpy as np
import pytest

from wus_sim.hardware.mesh import Mesh, Placement, _jax_assign, factorisations, layout, parse_mesh
from wus_sim.inputs.errors import ConfigError

from make_topology import make


def test_parse_text_mapping_and_errors():
    assert parse_mesh("fsdp=64,tensor=4") == Mesh(data=1, fsdp=64, tensor=4)
    assert parse_mesh({"data": 2}) == Mesh(data=2)
    assert str(Mesh(fsdp=8, tensor=2)) == "fsdp=8,tensor=2"
    for bad in ("tensor", "tensor=0", "tensor=x", "stage=2", "data=2,data=4", 3):
        with pytest.raises(ConfigError):
            parse_mesh(bad)
    with pytest.raises(ConfigError, match="unknown axis 'tensor'"):
        parse_mesh("tensor=2", axes=("data", "fsdp"))


# Sizes Python's int() takes and the experiment schema refuses: one rule now refuses them on every
# path (text, mapping, Mesh(...)), naming the axis.
NOT_DIGITS = ["1_6", "+16", "-16", "\t16", "16\t", "\u00a016", "1 6", "16.0", "\u0661\u0666", "\uff11\uff16",
              "\u0967\u096c", "0x10", ""]


@pytest.mark.parametrize("size", NOT_DIGITS)
def test_text_sizes_are_ascii_digits_as_the_schema_says(size):
    import jsonschema

    from wus_sim.hardware.mesh import mesh_json_schema

    text = f"data={size}"
    with pytest.raises(ConfigError) as err:
        parse_mesh(text)
    assert str(err.value).startswith("mesh.data: ") and "\n" not in str(err.value)
    with pytest.raises(jsonschema.ValidationError):  # the experiment file's rule says the same
        jsonschema.validate(text, mesh_json_schema(("data", "fsdp", "tensor")))


def test_spaces_around_the_parts_are_the_schemas_too():
    import jsonschema

    from wus_sim.hardware.mesh import mesh_json_schema

    text = " data = 16 , tensor = 2 "
    jsonschema.validate(text, mesh_json_schema(("data", "fsdp", "tensor")))
    assert parse_mesh(text) == Mesh(data=16, tensor=2)
    with pytest.raises(ConfigError, match="^dcn_mesh.fsdp: "):
        parse_mesh("fsdp=\u0662", key_path="dcn_mesh", axes=("data", "fsdp"))


@pytest.mark.parametrize("kw,axis", [({"data": -16, "fsdp": -1}, "data"), ({"data": 4.0}, "data"),
                                     ({"tensor": True}, "tensor"), ({"fsdp": "4"}, "fsdp"), ({"fsdp": 0}, "fsdp"),
                                     ({"tensor": 2**17 + 1}, "tensor")])
def test_mesh_and_mappings_take_integers_only(kw, axis):
    for make_mesh in (lambda: Mesh(**kw), lambda: parse_mesh(kw), lambda: Placement(mesh=kw)):
        with pytest.raises(ConfigError) as err:
            make_mesh()
        assert str(err.value).startswith(f"mesh.{axis}: ") and "\n" not in str(err.value)
    assert Mesh(data=np.int64(4)).data == 4 and type(Mesh(data=np.int64(4)).data) is int


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


def test_wrong_device_count_is_one_line_with_meshes_that_fit():
    topo = make((6, 4), True)
    with pytest.raises(ConfigError) as exc:
        layout(topo, Mesh(data=2, tensor=4))
    text = str(exc.value)
    assert "\n" not in text and "multiplies to 8 devices; t has 24" in text and "--mesh" in text
    for m in text.split("meshes that fit: ")[1].split(" (and")[0].split(", --mesh "):
        layout(topo, parse_mesh(m.replace("--mesh ", "")))  # every suggestion lays out


def test_a_straddling_mesh_is_laid_out_as_jax_does():
    # the reshape would give tensor=4 4 of x's 6 (refused before); JAX, most intensive axis
    # first, takes whole axes: tensor=4 -> y (the only subset of (6, 4) of product 4), data=6 -> x
    lay = layout(make((6, 4), True), Mesh(data=6, tensor=4))
    assert lay.rule == "jax"
    assert lay.parts == {"expert": (), "context": (), "pipeline": (), "tensor": ((1, 1, 4),), "fsdp": (), "data": ((0, 1, 6),)}
    assert lay.members("tensor", 0) == [0, 6, 12, 18]  # chips (0,0)..(0,3): the y ring
    # the mesh on an 8x12x16 v5p slice: whole axes, no split (tensor x, fsdp z, data y)
    lay = layout(make((8, 12, 16), True), Mesh(data=12, fsdp=16, tensor=8))
    assert lay.parts == {"expert": (), "context": (), "pipeline": (), "tensor": ((0, 1, 8),), "fsdp": ((2, 1, 16),), "data": ((1, 1, 12),)}
    assert lay.members("fsdp", 0) == [96 * z for z in range(16)]


def test_jax_splits_physical_axes():
    # 8x12x16, data=24, fsdp=8, tensor=8. No whole-axis subset of 12 x 16 (after tensor took
    # x) is 8, so JAX starts again splitting: tensor 8 = x whole (the only candidate with a whole
    # axis of product 8); fsdp 8 from (1, 12, 16): (1,4,2), (1,2,4), (1,1,8) tie on (a)-(c), (d)
    # takes (1,4,2); data 24 gets the rest (1,3,8). On y (12 = data 3 x fsdp 4) fsdp is minor:
    # stride 1, data stride 4; on z (16 = data 8 x fsdp 2) data has stride 2.
    lay = layout(make((8, 12, 16), True), Mesh(data=24, fsdp=8, tensor=8))
    assert lay.rule == "jax"
    assert lay.parts["tensor"] == ((0, 1, 8),)
    assert sorted(lay.parts["fsdp"]) == [(1, 1, 4), (2, 1, 2)]
    assert sorted(lay.parts["data"]) == [(1, 4, 3), (2, 2, 8)]
    coords = device_coords(make((8, 12, 16), True))
    data0 = {coords[d][1:] for d in lay.members("data", 0)}
    assert data0 == {(0, y, z) for y in (0, 4, 8) for z in range(0, 16, 2)}
    for axis in ("data", "fsdp", "tensor"):  # still a partition of the devices
        size = getattr(lay.mesh, axis)
        ids = sorted(d for i in range(1536 // size) for d in lay.members(axis, i))
        assert ids == list(range(1536))


def test_jax_rule_pinned_cases():
    # worked examples run with JAX's own functions (jax/_src/mesh_utils.py): v6e-256's 16x16
    # with (fsdp 64, tensor 4): tensor takes 4 of x (candidates (4,1), (2,2), (1,4) tie, (d)
    # takes (4,1)), fsdp the other 4 of x (stride 4) and y
    assert _jax_assign(make((16, 16), True), Mesh(fsdp=64, tensor=4)) == {
        "data": (), "fsdp": ((1, 1, 16), (0, 4, 4)), "tensor": ((0, 1, 4),), "expert": (), "context": (), "pipeline": ()}
    # 4x4x4, (data 4, fsdp 2, tensor 8): tensor (4,2,1) by (d); fsdp 2 from (1,2,4): (1,2,1)
    # and (1,1,2) tie on (a), (b); (c) prefers the factor on y, an axis tensor already uses
    # (what the code does; its comment says the opposite)
    assert _jax_assign(make((4, 4, 4), True), Mesh(data=4, fsdp=2, tensor=8)) == {
        "data": ((2, 1, 4),), "fsdp": ((1, 2, 2),), "tensor": ((1, 1, 2), (0, 1, 4)), "expert": (), "context": (), "pipeline": ()}
    # 8x12x16, (data 256, fsdp 2, tensor 3): tensor 3 = (1,3,1); fsdp 2 from (8,4,16): (2,1,1),
    # (1,2,1), (1,1,2) tie on (a), (b); (c) takes y, which tensor uses (by (d) it would be x):
    # fsdp is every 3rd chip of y, twice
    lay = layout(make((8, 12, 16), True), Mesh(data=256, fsdp=2, tensor=3))
    assert lay.rule == "jax" and lay.parts["fsdp"] == ((1, 3, 2),) and lay.parts["tensor"] == ((1, 1, 3),)
    assert lay.edge_hops(1, 3, 2) == (3, 3)
    # a v3 slice with its cores as devices: JAX's physical mesh is (x 4, y 2, core 2); tensor 2
    # takes the first single axis of size 2 in combinations order, y (not the cores); data 8
    # takes x and the cores, the cores (the last physical axis) its minor part
    assert _jax_assign(make((4, 2), True, cores=2), Mesh(data=8, tensor=2)) == {
        "data": ((-1, 1, 2), (0, 1, 4)), "fsdp": (), "tensor": ((1, 1, 2),), "expert": (), "context": (), "pipeline": ()}


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


def test_the_expert_axis_is_maxtexts_innermost():
    """MaxText's mesh_axes order puts expert after tensor (src/maxtext/configs/base.yml): the reshape gives
    it the nearest devices, then tensor; it is named in text after tensor, over the DCN too, and a report
    shows it only where it is above 1."""
    m = parse_mesh("expert=4, fsdp=16,tensor=2")
    assert m == Mesh(fsdp=16, tensor=2, expert=4) and m.size == 128 and str(m) == "fsdp=16,tensor=2,expert=4"
    assert parse_mesh("data=2,expert=2", axes=("data", "fsdp", "expert"), key_path="dcn_mesh").expert == 2
    lay = layout(make((4, 4, 8), True), m)
    # a 4x4x8 slice, x fastest: expert takes x, tensor half of y, fsdp the rest of y and z
    assert lay.parts["expert"] == ((0, 1, 4),) and lay.parts["tensor"] == ((1, 1, 2),)
    assert lay.members("expert") == [0, 1, 2, 3] and lay.members("tensor") == [0, 4]
    assert [line.split(":")[0] for line in lay.describe()] == ["expert=4", "tensor=2", "fsdp=16", "data=1"]
    assert [line.split(":")[0] for line in layout(make((4, 4, 8), True), Mesh(fsdp=64, tensor=2)).describe()] == [
        "tensor=2", "fsdp=64", "data=1"]


def test_expert_factorisations_only_when_asked():
    """8 devices: ordered factorisations of 2^3 into 3 axes, C(5, 2) = 10; into 4 axes, C(6, 3) = 20."""
    topo = make((4, 2), True)
    assert len(factorisations(topo)) == 10 and all(m.expert == 1 for m in factorisations(topo))
    four = factorisations(topo, ("data", "fsdp", "tensor", "expert"))
    assert len(four) == 20 and len(set(four)) == 20 and all(m.size == 8 for m in four)


# ---------------------------------------------------------------- -1: the rest of the devices
def test_minus_one_fills_the_rest():
    from wus_sim.hardware.mesh_spec import fill_mesh, has_fill

    assert fill_mesh("fsdp=-1,tensor=4", 256) == Mesh(fsdp=64, tensor=4)          # 256 / 4
    assert fill_mesh({"data": -1, "tensor": 2}, 16) == Mesh(data=8, tensor=2)      # 16 / 2
    assert fill_mesh("data=-1,fsdp=2", 4, key_path="dcn_mesh", axes=("data", "fsdp")) == Mesh(data=2, fsdp=2)
    assert fill_mesh("fsdp=-1", 1) == Mesh()
    assert fill_mesh("fsdp=8", 256) == Mesh(fsdp=8)  # without -1: the sizes as given (the step checks the product)
    assert has_fill("tensor=4, fsdp=-1") and has_fill({"fsdp": -1}) and not has_fill({"fsdp": True})
    assert not has_fill({"fsdp": "-1"}) and not has_fill("fsdp=1") and not has_fill(None)


@pytest.mark.parametrize("value, said", [
    ("fsdp=-1,tensor=-1", "at most one axis may be -1"),
    ("fsdp=-1,tensor=3", "the other axes multiply to 3, which does not divide them"),
    ({"fsdp": -1, "tensor": 0}, "whole number"),
    ("fsdp=-1,bogus=2", "unknown axis"),
])
def test_a_bad_minus_one_is_one_line(value, said):
    from wus_sim.hardware.mesh_spec import fill_mesh

    with pytest.raises(ConfigError, match=said) as e:
        fill_mesh(value, 256)
    assert "\n" not in str(e.value)


def test_minus_one_is_kept_in_a_point_value_and_refused_without_a_slice():
    from wus_sim.hardware.mesh_spec import mesh_json_schema, mesh_text

    assert mesh_text("tensor=4,fsdp=-1") == "fsdp=-1,tensor=4"
    assert mesh_text({"data": -1}) == "data=-1"
    with pytest.raises(ConfigError, match="mesh.fsdp: .*only a mesh for a known slice"):
        parse_mesh("fsdp=-1")
    with pytest.raises(ConfigError, match="mesh.fsdp"):
        Mesh(fsdp=-1)
    import re

    text = mesh_json_schema(("data", "fsdp"))["anyOf"][0]["pattern"]
    assert re.match(text, "data=-1, fsdp=2") and not re.match(text, "data=-2")
