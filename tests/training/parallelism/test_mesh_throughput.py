"""MaxText's units on a device mesh: a step's model FLOPs belong to the model, not to the mesh that
splits it (a tensor group's plan holds 1/T of the model; the FLOPs counted are the whole model's)."""

import pytest

from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.workload_files import load_workload
from wus_sim.training.parallelism.mesh_step import simulate_mesh


@pytest.mark.parametrize("mesh", ["fsdp=64", "fsdp=16,tensor=4"])
def test_mfu_counts_the_whole_models_flops_on_any_mesh(mesh):
    topo = load_topology("tpu-v5p-128", megacore=True)  # 64 chips, one device each, 459 TFLOP/s
    run = simulate_mesh("llama3-8b", topo, None, ("fully-sharded",), mesh=mesh, global_batch=64)
    res = run.results["fully-sharded"]
    mf = run.throughput("fully-sharded", topo)
    # by hand: 64 sequences x 3 x (forward FLOPs, causal attention halved) over 64 devices
    w = load_workload("llama3-8b")
    per_sequence = 3 * (w.fwd_flops_per_example - sum(a.flops for a in w.attention) / 2)
    assert mf.flops_per_device == pytest.approx(64 * per_sequence / 64, rel=1e-12)
    assert mf.mfu == pytest.approx(per_sequence / res.step_time_s / 459e12, rel=1e-12)
    assert mf.tokens_per_s_per_device == pytest.approx(8192 / res.step_time_s, rel=1e-12)
