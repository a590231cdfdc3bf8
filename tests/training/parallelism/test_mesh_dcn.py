"""Multislice as MaxText runs it (issue 44 item 6): data across slices, fsdp inside. Each
bucket's gradient is reduce-scattered over the fsdp rings, then its fsdp shard all-reduced over
the DCN; the per-axis comm summary counts those cross-slice phases, and the last bucket's DCN
reduction, after backward, is exposed. Every expected figure is derived here by hand."""

import pytest

from wus_sim.hardware.multislice import Multislice
from wus_sim.training.parallelism.mesh_step import simulate_mesh
from wus_sim.training.step import StepOptions

import make_workload
from make_topology import make

MiB = 2**20
TENSOR = 1024 * 1024 * 4          # one fp32 gradient of a 1024 x 1024 weight: 4 MiB
LAYERS = 4                         # one tensor a layer, one bucket a tensor (bucket_bytes = TENSOR)
DCN_BPS, DCN_LAT = 10e9, 5e-6
OPTIONS = StepOptions(bucket_bytes=TENSOR)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    # backward of a layer (~ms on the generic chip) far longer than a bucket's collectives (~0.1 ms):
    # every bucket's reduction hides behind the next layers' backward but the last one's
    return make_workload.make(
        tmp_path_factory.mktemp("dcn"), "toy", "four 1024x1024 layers (DCN tests)", params=LAYERS * 1024 * 1024,
        layers=[(f"l{i}", 2e11) for i in range(LAYERS)], tensors=[(f"w{i}", [1024, 1024], i) for i in range(LAYERS)])


def slices(m):
    topo = make((4,), True)
    return topo if m == 1 else Multislice(slice=topo, slices=m, dcn_Bps=DCN_BPS, dcn_latency_s=DCN_LAT)


def dcn_allreduce_s(m, shard):
    """A DCN all-reduce among m slices of *shard* bytes a chip: reduce-scatter + all-gather, each
    one direct exchange, alpha + (m-1)/m shard / B (wus_sim.hardware.multislice)."""
    return 2 * (DCN_LAT + (m - 1) / m * shard / DCN_BPS)


def step(toy, m, mesh="fsdp=4", strategies=("fully-sharded",)):
    return simulate_mesh(toy, slices(m), "sgd", strategies, mesh=mesh, dcn_mesh=None if m == 1 else f"data={m}",
                         per_replica_batch=1, options=OPTIONS)


def test_fsdp_in_slice_data_across_reports_its_dcn_collectives(toy):
    run = step(toy, 2)
    comm = run.mesh.comm
    # every bucket: fsdp reduce-scatter of 4 MiB over the 4 chips, then each chip's 1 MiB shard
    # all-reduced over the DCN; the weight gathers stay in the slice (shards are per slice)
    shard = TENSOR / 4
    assert comm["data"]["dcn_collectives"] == LAYERS
    assert comm["data"]["dcn_nbytes"] == LAYERS * shard == 4 * MiB
    assert comm["data"]["dcn_busy_s"] == pytest.approx(LAYERS * dcn_allreduce_s(2, shard), rel=1e-12)
    assert comm["fsdp"]["dcn_collectives"] == 0 and comm["fsdp"]["collectives"] == 3 * LAYERS
    assert comm["tensor"]["dcn_nbytes"] == 0


def test_the_last_buckets_dcn_reduction_is_the_exposed_tail(toy):
    one = step(toy, 1).results["fully-sharded"]
    for m in (2, 8, 32):
        r = step(toy, m).results["fully-sharded"]
        tail = dcn_allreduce_s(m, TENSOR / 4)  # the last bucket's; the other three hide behind backward
        assert r.step_time_s - one.step_time_s == pytest.approx(tail, rel=1e-9)
        assert r.breakdown["data_comm_s"] == pytest.approx(tail, rel=1e-9)
        assert r.breakdown["fsdp_comm_s"] == pytest.approx(one.breakdown["exposed_comm_s"], rel=1e-9)


def test_per_chip_step_time_grows_with_slices(toy):
    times = [step(toy, m).results["fully-sharded"].step_time_s for m in (1, 2, 8, 32)]
    assert times == sorted(times) and times[0] < times[1] < times[2] < times[3]
    # from 2 to 32 slices the DCN share (m-1)/m of the shard goes from 1/2 to 31/32
    assert times[3] - times[1] == pytest.approx((31 / 32 - 1 / 2) * 2 * (TENSOR / 4) / DCN_BPS, rel=1e-9)


def test_hybrid_mesh_counts_the_data_axis_dcn_phase(toy):
    # data=2,fsdp=2 in a slice, data=2 across (the mesh step's hybrid, replicated): each bucket's
    # fsdp shard (4 MiB / 2) is all-reduced over data, in the slice (2 devices) then over the DCN
    # on the device's half of it: 1 MiB a device a bucket
    run = step(toy, 2, mesh="data=2,fsdp=2", strategies=("replicated",))
    comm = run.mesh.comm
    assert run.mesh.path == "mesh"
    assert comm["data"]["collectives"] == LAYERS and comm["data"]["nbytes"] == LAYERS * TENSOR / 2
    assert comm["data"]["dcn_collectives"] == LAYERS and comm["data"]["dcn_nbytes"] == LAYERS * MiB
    assert comm["data"]["dcn_busy_s"] == pytest.approx(LAYERS * dcn_allreduce_s(2, MiB), rel=1e-12)
    assert comm["fsdp"]["dcn_collectives"] == 0
