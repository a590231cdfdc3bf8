"""Issue 45's API examples of the training layer: plan, step options, meshes and the search at the door.

Checked by class (a WusError) and by the argument the message names, not by whole strings."""

import math

import numpy as np
import pytest

import wus_sim
from wus_sim import WusError


@pytest.fixture(scope="module")
def topo():
    return wus_sim.load_topology("tpu-v3-8")


@pytest.fixture(scope="module")
def ncf():
    return wus_sim.load_workload("ncf")


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 0, -1, True, "25MiB", np.float64(math.inf)])
def test_plan_bucket_bytes_must_be_finite_and_positive(topo, ncf, value):
    """``plan(..., bucket_bytes=float('inf'))``: bytes are a finite, positive whole number."""
    with pytest.raises(WusError) as err:
        wus_sim.plan(ncf, topo, "adam", bucket_bytes=value)
    assert "bucket_bytes" in str(err.value)


def test_plan_bucket_bytes_as_numpy_is_its_value(topo, ncf):
    assert wus_sim.plan(ncf, topo, "adam", bucket_bytes=np.uint32(2**20)) == \
        wus_sim.plan(ncf, topo, "adam", bucket_bytes=2**20)


@pytest.mark.parametrize("value", [True, b"x"])
def test_step_options_bucket_bytes(value):
    with pytest.raises(WusError) as err:
        wus_sim.StepOptions(bucket_bytes=value)
    assert "bucket_bytes" in str(err.value)


@pytest.mark.parametrize("stack", ["nonsense", "tf-jax-202O", "TF-JAX-2020"])
def test_step_options_refuse_a_stack_the_calibration_has_not_fitted(stack):
    """``StepOptions(software_stack='nonsense')`` ran at the default stack's costs without a word."""
    with pytest.raises(WusError) as err:
        wus_sim.StepOptions(software_stack=stack)
    message = str(err.value)
    assert "software_stack" in message
    assert all(known in message for known in wus_sim.load_calibration().stacks)  # the known ones listed


@pytest.mark.parametrize("stack", [5, True, b"tf-jax-2020"])
def test_step_options_stack_of_the_wrong_type(stack):
    with pytest.raises(WusError) as err:
        wus_sim.StepOptions(software_stack=stack)
    assert "software_stack" in str(err.value)


def test_step_options_take_every_fitted_stack():
    for stack in wus_sim.load_calibration().stacks:
        assert wus_sim.StepOptions(software_stack=stack).software_stack == stack


def test_an_unmeasured_stack_with_its_compute_still_runs_as_a_point_does():
    """The point key and --software-stack name a stack nobody measured on purpose (the band says
    'extrapolated'): they give the compute with it, and that stays allowed."""
    cal = wus_sim.load_calibration()
    options = wus_sim.StepOptions(software_stack="my-stack-2031", calibration=cal,
                                  compute=cal.compute_params(stack="my-stack-2031"))
    assert options.software_stack == "my-stack-2031"


@pytest.mark.parametrize("arg, value", [("routing", "nonsense"), ("algorithm", 5), ("grad_dtype", b"bf16"),
                                        ("quantization", True), ("bidirectional", "yes"), ("steps", np.float64(2.5))])
def test_step_options_names_are_checked_where_given(arg, value):
    with pytest.raises(WusError) as err:
        wus_sim.StepOptions(**{arg: value})
    assert arg in str(err.value)


@pytest.mark.parametrize("strategies", [[], (), "all", "sharded", [5], ["fastest"], 5])
def test_simulate_mesh_strategies_must_name_at_least_one(topo, strategies):
    """``simulate_mesh(..., [], mesh=...)`` was a bare StopIteration."""
    with pytest.raises(WusError) as err:
        wus_sim.simulate_mesh("ncf", topo, "adam", strategies, mesh=wus_sim.Mesh(data=8))
    assert "strateg" in str(err.value)


def test_simulate_strategies_strategies_must_name_at_least_one(topo):
    with pytest.raises(WusError) as err:
        wus_sim.simulate_strategies("ncf", topo, "adam", [])
    assert "strategies" in str(err.value)


def test_simulate_mesh_internal_path_refuses_no_strategies_too(topo):
    """Not only at the export: the module's own function (what the CLI and sweeps call)."""
    from wus_sim.training.parallelism.mesh_step import simulate_mesh

    with pytest.raises(WusError) as err:
        simulate_mesh("ncf", topo, "adam", [], mesh=wus_sim.Mesh(data=8))
    assert "strategies" in str(err.value)


@pytest.mark.parametrize("strategies", [[], ()])
def test_search_meshes_strategies_must_name_at_least_one(topo, strategies):
    """``search_meshes(..., strategies=[])`` was a bare StopIteration."""
    with pytest.raises(WusError) as err:
        wus_sim.search_meshes("ncf", topo, "adam", strategies=strategies)
    assert "strategies" in str(err.value)


@pytest.mark.parametrize("progress", [5, "print", True])
def test_search_meshes_progress_must_be_callable(topo, progress):
    """``search_meshes(progress=5)`` searched, then failed calling 5."""
    with pytest.raises(WusError) as err:
        wus_sim.search_meshes("ncf", topo, "adam", progress=progress)
    assert "progress" in str(err.value)


@pytest.mark.parametrize("arg, value", [("remats", []), ("remats", ["nonsense"]), ("global_batch", True),
                                        ("options", 5), ("workload", b"ncf")])
def test_search_meshes_arguments_are_named_when_wrong(topo, arg, value):
    kwargs = {"workload": "ncf", "topology": topo, arg: value}
    with pytest.raises(WusError) as err:
        wus_sim.search_meshes(**kwargs)
    assert arg in str(err.value)


def test_placement_fields(topo):
    for kwargs in (dict(megacore="yes"), dict(slices=True), dict(spatial_ways=1.5), dict(slices=object())):
        with pytest.raises(WusError) as err:
            wus_sim.Placement(**kwargs)
        assert next(iter(kwargs)) in str(err.value)
    assert wus_sim.Placement(slices=np.int64(2)).slices == 2
