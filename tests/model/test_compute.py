"""Chip compute model: closed forms and invariants."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.model.compute import (ComputeParams, backward_time_s, forward_time_s, layer_times, spatial_row_share,
                             memory_bound_time_s, replica_peak_flops, update_time_s, vector_peak_flops)
from wus_sim.inputs.errors import ConfigError
from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.workload_files import load_workload
from workload_sample import sample_workloads

import make_workload

V3 = load_topology("tpu-v3-32")


@pytest.mark.parametrize("name", sample_workloads())
def test_forward_closed_form_and_backward_ratio(name):
    w = load_workload(name)
    p = ComputeParams(mxu_efficiency=0.4, backward_flops_ratio=2.0)
    fwd = forward_time_s(w, V3, 3, p)
    # v3 core: half the chip's 123 TFLOP/s (Cloud TPU v3 docs), at 40 %
    assert fwd == pytest.approx(3 * w.fwd_flops_per_example / (123e12 / 2 * 0.4))
    assert backward_time_s(w, V3, 3, p) == pytest.approx(2 * fwd)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 512), eff=st.floats(0.05, 1.0), ratio=st.floats(0.5, 4.0),
       split=st.sampled_from(["flops", "params"]), name=st.sampled_from(sample_workloads()))
def test_layer_times_sum_to_totals(batch, eff, ratio, split, name):
    w = load_workload(name)
    # without elementwise work and fixed costs a layer is its matmul, or slower when
    # reading its weights takes longer (the roofline): never faster than the matrix time
    p = ComputeParams(mxu_efficiency=eff, backward_flops_ratio=ratio, layer_split=split,
                      elementwise_fwd_bytes=0, elementwise_bwd_bytes=0)
    lt = layer_times(w, V3, batch, p)
    assert lt.forward_s.shape == lt.backward_s.shape == (w.num_layers,)
    assert np.all(lt.forward_s >= 0)
    assert lt.forward_total_s >= forward_time_s(w, V3, batch, p) * (1 - 1e-12)
    assert lt.backward_total_s >= backward_time_s(w, V3, batch, p) * (1 - 1e-12)
    done = lt.backward_done_s()
    assert done[0] == pytest.approx(lt.backward_total_s) and np.all(np.diff(done) <= 1e-18)


def test_layer_split_by_flops_differs_from_params_for_a_convnet():
    # ResNet-50's last group holds most parameters but a quarter of the FLOPs
    w = load_workload("resnet50")
    matmul_only = {"elementwise_fwd_bytes": 0, "elementwise_bwd_bytes": 0}
    by_flops = layer_times(w, V3, 256, ComputeParams(layer_split="flops", **matmul_only)).forward_s
    by_params = layer_times(w, V3, 256, ComputeParams(layer_split="params", **matmul_only)).forward_s
    last = [i for i, n in enumerate(w.layer_names) if n.startswith(("group4", "fc"))]
    assert by_params[last].sum() > 2 * by_flops[last].sum()


def test_update_is_memory_bound_with_documented_defaults():
    p = ComputeParams()
    n, b, f = 10**8, 28, 12   # Adam fp32: 16 B read + 12 B written, ~12 flops
    t = update_time_s(n, b, f, V3, p)
    # v3: 900 GB/s per chip (Cloud TPU v3 docs) shared by its 2 cores, at 80 %
    assert t == pytest.approx(n * b / (900e9 / 2 * 0.8))
    assert n * f / vector_peak_flops(V3, p) < t


def test_update_vector_bound_when_vector_peak_is_tiny():
    p = ComputeParams(vector_flops_per_replica=1e9)
    assert update_time_s(1000, 28, 12, V3, p) == pytest.approx(1000 * 12 / 1e9)


def test_cores_share_hbm_bandwidth():
    one = load_topology("tpu-v3-32", cores_per_chip=1)
    two = load_topology("tpu-v3-32", cores_per_chip=2)
    assert memory_bound_time_s(1e9, 0, two) == pytest.approx(2 * memory_bound_time_s(1e9, 0, one))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 10**9), b=st.floats(1, 64), f=st.floats(0, 100))
def test_update_time_is_max_of_two_bounds(n, b, f):
    p = ComputeParams()
    t = update_time_s(n, b, f, V3, p)
    t_mem = n * b / (V3.hbm_Bps_per_replica * p.update_hbm_efficiency)
    t_vec = n * f / vector_peak_flops(V3, p)
    assert t == pytest.approx(max(t_mem, t_vec)) and t >= t_mem and t >= t_vec
    # linear in the element count
    assert update_time_s(2 * n, b, f, V3, p) == pytest.approx(2 * t)


def test_spatial_partitioning_speeds_up_a_replica():
    w = load_workload("ssd-resnet34")
    one = forward_time_s(w, V3, 4)
    assert forward_time_s(w, V3, 4, spatial_ways=4) == pytest.approx(one / 4)
    half = ComputeParams(spatial_efficiency=0.5)
    assert replica_peak_flops(V3, half, spatial_ways=4) == pytest.approx(
        replica_peak_flops(V3, half) * 2.5)


@pytest.mark.parametrize("kw", [dict(mxu_efficiency=0), dict(mxu_efficiency=1.5),
                                dict(update_hbm_efficiency=-1), dict(backward_flops_ratio=0),
                                dict(vector_flops_per_replica=0), dict(layer_split="tensors")])
def test_bad_parameters_are_config_errors(kw):
    with pytest.raises(ConfigError) as err:
        ComputeParams(**kw)
    assert next(iter(kw)) in str(err.value)


def test_bad_batch_is_config_error():
    with pytest.raises(ConfigError):
        forward_time_s(load_workload("ncf"), V3, 0)


def test_vector_peak_default_is_documented_ratio():
    assert vector_peak_flops(V3) == pytest.approx(123e12 / 2 / 32)
    assert math.isclose(ComputeParams().to_dict()["mxu_efficiency"], 0.5)


# A toy convnet: one 3x3 conv, 64 -> 64 channels, on a 10x10 map (a map whose rows do not
# divide over 4 cores), then a 1x1 conv 64 -> 16 on a 1x1 map (one row: one core does it).
@pytest.fixture(scope="module")
def toyconv(tmp_path_factory):
    return make_workload.make(
        tmp_path_factory.mktemp("conv"), "toyconv", "two convs with round sizes (spatial partitioning by hand)",
        params=37888, unit="image", batch=64, layers=[("c0", 7372800), ("c1", 2048)],
        tensors=[("c0.kernel", [3, 3, 64, 64], 0), ("c1.kernel", [1, 1, 64, 16], 1)])


def test_spatial_partitioning_gives_whole_rows_to_each_core(toyconv):
    """4 cores per replica: the 10-row map leaves one core ceil(10/4) = 3 rows (1.2 x an even
    share), the 1-row map one core all of it (4 x); matrix and output work scale by that,
    weight reads and the halo do not. Every figure written out from the shapes."""
    assert 2 * 9 * 64 * 64 * 100 == 7372800 and 2 * 64 * 16 == 2048   # FLOPs per image
    assert list(toyconv.layer_map_side) == [10.0, 1.0]
    assert list(spatial_row_share(toyconv, 4)) == [pytest.approx(1.2), 4.0]
    assert list(spatial_row_share(toyconv, 2)) == [1.0, 2.0]          # 5 rows each; 1 row on one
    assert list(spatial_row_share(toyconv, 1)) == [1.0, 1.0]

    v3 = load_topology("tpu-v3-8")                   # 2 cores per chip
    batch, ways = 64, 4
    p = ComputeParams(mxu_efficiency=0.5, elementwise_fwd_bytes=6.0, elementwise_bwd_bytes=10.0)
    peak = 123e12 / 2 * 0.5 * ways                   # the replica's 4 cores at 50 %
    hbm = 900e9 / 2 * 0.8                            # a core's half of the chip's HBM, at 80 %
    share = (1.2, 4.0)
    outputs = (100 * 64, 1 * 16)                     # output elements per image
    weights = (9 * 64 * 64, 64 * 16)
    halo_s = (1e-6 + 1 * 10 * 64 * batch * 2 / 100e9, 0.0)   # 1 row of 10 x 64 bf16 per image
    for layer, flops in enumerate((7372800, 2048)):
        per_core = outputs[layer] * batch / ways * share[layer]
        matrix = flops * batch / peak * share[layer]
        io = (weights[layer] * 2 + per_core * 2) / hbm
        fwd = max(matrix, io) + per_core * 6.0 / hbm + halo_s[layer]
        lt = layer_times(toyconv, v3, batch, p, spatial_ways=ways)
        assert lt.forward_s[layer] == pytest.approx(fwd, rel=1e-12)
        io_b = (weights[layer] * (2 + 4) + 2 * per_core * 2) / hbm
        bwd = max(2 * matrix, io_b) + per_core * 10.0 / hbm + halo_s[layer]
        assert lt.backward_s[layer] == pytest.approx(bwd, rel=1e-12)
