"""The expert mesh axis in the step (wus_sim.training.parallelism.expert_parallel): the mesh without it
is the step before it, to the last bit; its all-to-alls, memory, bucket traffic and the capacity factor
derived by hand on a toy mixture of experts; the shipped MoE models with an expert axis; refusals."""

import json
import math
import os

import pytest

from make_workload import MOE_TOY, make_moe
from pin_mesh_records import records
from wus_sim.hardware.multislice import load_multislice
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.compute import ComputeParams
from wus_sim.training.parallelism.mesh_search import Search
from wus_sim.training.parallelism.mesh_step import simulate_mesh
from wus_sim.training.step import StepOptions, step_layer_times

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")
H, V, FF, N = MOE_TOY["h"], MOE_TOY["vocab"], MOE_TOY["ff"], MOE_TOY["experts"]
ROUTED = 2 * N * 2 * H * FF  # the toy's routed experts' elements: 2 layers x 8 experts x (w1 + w2)
DENSE = 2 * V * H + 2 * H * N  # embedding, head, two routers


def test_expert_one_is_the_step_before_the_axis_to_the_last_bit():
    """Seven meshes (today's fsdp path, tensor, hybrid, a DCN fsdp axis, TensorCores; Llama, BERT, Mixtral)
    with ``expert=1``: every number of every strategy equals what the code gave before the expert axis
    existed (tests/data/mesh_before_expert.json, pinned before the axis: tests/tools/pin_mesh_records.py says how), and the expert parts are 0."""
    with open(os.path.join(DATA, "mesh_before_expert.json")) as f:
        before = json.load(f)
    assert records(",expert=1") == before


def _toy_step(tmp_path, mesh, *, topology="torus:4x2", dcn=None, slices=None, batch=256, **options):
    w = make_moe(tmp_path)
    topo = load_topology(topology)
    if slices:
        topo = load_multislice(topo, slices=slices)[1]
    return simulate_mesh(w, topo, None, ("fully-sharded",), mesh=mesh, dcn_mesh=dcn, per_replica_batch=batch,
                         options=StepOptions(**options))


def test_a_moe_layers_four_all_to_alls_on_a_ring_are_the_textbook_cost(tmp_path):
    """data=2,expert=4 on a 4x2 torus: the expert groups are the rings of x (4 chips, wrapped). Each
    all-to-all moves S = batch x k x hidden x 2 bytes (bf16) a device: 256 x 2 x 1024 x 2 = 1 MiB.

    The ring all-to-all (each block the shorter way, the one half way round split in two; Thakur,
    Rabenseifner and Gropp 2005 count a ring all-to-all's steps the same way) on n = 4: step 1 sends,
    each direction, the neighbour's block S/4 and half the opposite one S/8; step 2 forwards that half,
    S/8. One hop a step, cut-through: T = 2 (a + ...) = 2 a + (3S/8 + S/8) / B = 2 a + S / (2 B), with
    the torus's a = 1 us a hop and B = 100 GB/s a link and direction. A MoE layer runs 4 (dispatch and
    combine, forward and backward), the toy has 2 MoE layers: 8 T exposed, 8 S moved."""
    run = _toy_step(tmp_path, "data=2,expert=4")
    r = run.results["fully-sharded"]
    s = 256 * 2 * H * 2
    one = 2 * 1e-6 + s / (2 * 100e9)
    assert r.breakdown["expert_comm_s"] == pytest.approx(8 * one, rel=1e-12)
    c = run.mesh.comm["expert"]
    assert (c["collectives"], c["nbytes"]) == (8, 8 * s) and c["busy_s"] == pytest.approx(8 * one, rel=1e-12)
    # the wait is in the step and apart from the compute: the parts still add up
    assert sum(r.breakdown[p] for p in ("overhead_s", "host_loop_s", "op_launch_s", "fwd_s", "bwd_s", "batch_norm_s",
                                        "update_s", "exposed_comm_s", "extra_reduction_s", "idle_s", "host_offload_s",
                                        "tensor_comm_s", "expert_comm_s")) == pytest.approx(r.step_time_s, rel=1e-9)


def test_the_all_to_alls_over_the_dcn(tmp_path):
    """expert=4 in each of 2 slices and 2 across (8 = the toy's experts): each all-to-all first sends
    every device's blocks for the other slice to its peer there (a direct exchange: the DCN's 10 us
    + (M-1)/M of the buffer at the generic chip's 6.25 GB/s, one device a chip), then the in-slice ring
    all-to-all of the whole buffer (above)."""
    run = _toy_step(tmp_path, "data=2,expert=4", dcn="expert=2", slices=2)
    s = 256 * 2 * H * 2
    dcn = 10e-6 + 0.5 * s / 6.25e9
    ici = 2 * 1e-6 + s / (2 * 100e9)
    c = run.mesh.comm["expert"]
    assert c["dcn_collectives"] == 8 and c["dcn_busy_s"] == pytest.approx(8 * dcn, rel=1e-12)
    assert run.results["fully-sharded"].breakdown["expert_comm_s"] == pytest.approx(8 * (dcn + ici), rel=1e-12)
    assert run.global_batch == 256 * 16  # data 2 x expert 4 x 2 slices: every group its own batch


def test_memory_holds_a_devices_share_of_the_experts(tmp_path):
    """fsdp=2,expert=4, fully sharded over the 8 chips, Adam, gathered weights kept from forward to
    backward (so the window is every bucket): the persistent shards are 1/8 of every tensor (a device's
    1/4 of the experts, split over fsdp's 2); the gathered weights (bf16) are the dense ones whole and
    1/4 of the routed experts. Without the expert axis (fsdp=8) the same shards, and every expert
    gathered."""
    total = DENSE + ROUTED
    for mesh, gathered in (("fsdp=2,expert=4", DENSE + ROUTED / 4), ("fsdp=8", DENSE + ROUTED)):
        r = _toy_step(tmp_path, mesh, keep_gathered_weights=True).results["fully-sharded"]
        d = r.memory.details
        assert d["weight_shards"] == total / 8 * 4 and d["grad_shards"] == total / 8 * 4, mesh
        assert r.memory.slots == 2 * total / 8 * 4, mesh  # Adam's two fp32 slots of the shard
        assert d["gathered_weights"] == gathered * 2, mesh


def test_bucket_traffic_moves_a_devices_experts_over_fsdp(tmp_path):
    """fsdp=2,expert=4: every bucket's gradient reduce-scatter (fp32) and its two weight gathers (bf16)
    move its dense part over the 8 devices and a device's 1/4 of its routed part over fsdp's 2: per
    device (dense + routed / 4) x (4 + 2 + 2) bytes a step (the collectives' size convention)."""
    run = _toy_step(tmp_path, "fsdp=2,expert=4")
    assert run.mesh.comm["fsdp"]["nbytes"] == (DENSE + ROUTED / 4) * 8
    assert _toy_step(tmp_path, "fsdp=8").mesh.comm["fsdp"]["nbytes"] == (DENSE + ROUTED) * 8


def _linear_options(**kw):
    """The ``flops`` compute model with no elementwise work or fixed costs: a layer's forward is its
    FLOPs / (peak x efficiency), exactly (wus_sim.model.compute.layer_times)."""
    return StepOptions(compute=ComputeParams(compute_model="flops", mxu_efficiency=0.5, elementwise_fwd_bytes=0.0,
                                             elementwise_bwd_bytes=0.0, op_overhead_s=0.0), **kw)


@pytest.mark.parametrize("capacity, ways, imbalance, factor", [
    (-1.0, 1, 1.0, 1.0),  # dropless, even: k experts' work a token
    (1.25, 1, 1.0, 1.25),  # MaxText's capacity factor: each expert's buffer 1.25 x its even share
    (2.0, 4, 3.0, 2.0),  # padded buffers: the routing's imbalance changes nothing
    (-1.0, 4, 2.0, (2 + 6 / 7) / 2),  # dropless, 2 experts a device, the busiest at 2x: 2 + 6/7 shares of 2
])
def test_the_expert_matmuls_scale_by_the_capacity_factor(tmp_path, capacity, ways, imbalance, factor):
    """A MoE layer's forward = (router + factor x 2 experts) FLOPs a token x 1024 tokens / (61.5 TFLOP/s,
    the generic chip's peak, x 0.5); backward twice that."""
    w = make_moe(tmp_path)
    topo = load_topology("torus:4x2")
    layers = step_layer_times(w, topo, 1024, _linear_options(capacity_factor=capacity, expert_load_imbalance=imbalance),
                              expert_ways=ways)
    flops = 2 * H * N + factor * 2 * 2 * (2 * H * FF)
    assert layers.forward_s[1] == pytest.approx(flops * 1024 / (61.5e12 * 0.5), rel=1e-12)
    assert layers.backward_s[2] == pytest.approx(2 * layers.forward_s[2], rel=1e-12)
    assert layers.forward_s[3] == pytest.approx(2 * H * V * 1024 / (61.5e12 * 0.5), rel=1e-12)  # the head: as is


def test_the_capacity_factor_pads_the_all_to_alls_too(tmp_path):
    plain = _toy_step(tmp_path, "data=2,expert=4").mesh.comm["expert"]["nbytes"]
    assert _toy_step(tmp_path, "data=2,expert=4", capacity_factor=1.5).mesh.comm["expert"]["nbytes"] == 1.5 * plain


def test_an_expert_axis_is_refused_in_one_line_where_it_cannot_split_experts(tmp_path):
    topo = load_topology("tpu-v5p-256", megacore=True)
    with pytest.raises(ConfigError) as err:  # no experts
        simulate_mesh("llama3-8b", topo, None, ("fully-sharded",), mesh="fsdp=16,expert=8")
    assert "no mixture-of-experts layer" in str(err.value) and err.value.key_path == "mesh"
    for mesh in ("fsdp=8,expert=16", "fsdp=2,expert=64"):  # more than Mixtral's 8 experts
        with pytest.raises(ConfigError) as err:
            simulate_mesh("mixtral-8x7b", topo, None, ("fully-sharded",), mesh=mesh)
        assert "has 8 routed experts" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="must divide them"):  # 3 does not divide 8
        _toy_step(tmp_path, "data=2,expert=3", topology="torus:3x2")


@pytest.mark.parametrize("workload, mesh, moe_layers", [("mixtral-8x7b", "fsdp=16,expert=8", 32),
                                                        ("mixtral-8x7b", "fsdp=8,tensor=2,expert=8", 32),
                                                        ("deepseek", "data=2,fsdp=8,expert=8", 26)])
def test_the_shipped_moe_models_run_with_an_expert_axis(tmp_path, workload, mesh, moe_layers):
    """Mixtral-8x7B (8 experts) and DeepSeek-V2-Lite (64, imported from its config; its first layer dense)
    on v5p-256: 4 all-to-alls a MoE layer, each a device's batch x 4096 tokens x top-k x hidden / tensor
    x 2 bytes (a tensor group's devices share the tokens, each holding hidden / T of them)."""
    if workload == "deepseek":
        from wus_sim.model.importers.importers import import_workload

        path = tmp_path / "deepseek-v2-lite.yaml"
        import_workload(os.path.join(DATA, "hf_configs", "deepseek-v2-lite.json"), name="deepseek-v2-lite", out=path,
                        sequence_length=4096)
        workload, k, h = str(path), 6, 2048
    else:
        k, h = 2, 4096
    tensor = 2 if "tensor=2" in mesh else 1
    run = simulate_mesh(workload, load_topology("tpu-v5p-256", megacore=True), None, ("fully-sharded",), mesh=mesh,
                        per_replica_batch=1)
    r = run.results["fully-sharded"]
    assert r.status == "ok" and r.breakdown["expert_comm_s"] > 0
    c = run.mesh.comm["expert"]
    assert (c["collectives"], c["nbytes"]) == (4 * moe_layers, 4 * moe_layers * 4096 * k * h / tensor * 2)
    assert run.replicas == 128 / tensor and run.mesh.to_dict()["mesh"]["expert"] == 8


def test_stacked_experts_give_the_step_of_experts_one_by_one(tmp_path):
    """The toy with its experts stacked (as MaxText's model library holds them) against one tensor per
    expert: the same weights a device holds, the same all-to-alls (4 a MoE layer of 256 tokens x top-2 x
    1024 x 2 B on the 4-way groups); the compute within 5 % (the shape model times one [1024, 8 x 2048]
    matmul where the other has 8 of [1024, 2048]: the same FLOPs, other operand re-reads)."""
    one_by_one = make_moe(tmp_path)
    stacked = make_moe(tmp_path, "moe-stacked", stacked=True)
    for mesh in ("fsdp=2,expert=4", "data=2,expert=4"):
        a, b = (simulate_mesh(w, load_topology("torus:4x2"), None, ("fully-sharded",), mesh=mesh, per_replica_batch=256)
                for w in (one_by_one, stacked))
        ra, rb = a.results["fully-sharded"], b.results["fully-sharded"]
        assert rb.memory.weights == ra.memory.weights
        assert b.mesh.comm["expert"] == a.mesh.comm["expert"]
        assert (b.mesh.comm["expert"]["collectives"], b.mesh.comm["expert"]["nbytes"]) == (8, 8 * 256 * 2 * 1024 * 2)
        assert rb.step_time_s == pytest.approx(ra.step_time_s, rel=0.05)


def test_deepseek_v2_lite_from_maxtexts_library_runs_with_an_expert_axis():
    """deepseek2-16b (MaxText's DeepSeek-V2-Lite, its experts stacked): 26 MoE layers, 4 all-to-alls each of a
    device's 1 sequence x 2048 tokens x top-6 x hidden 2048 x 2 B."""
    run = simulate_mesh("deepseek2-16b", load_topology("tpu-v5p-256", megacore=True), None, ("fully-sharded",),
                        mesh="fsdp=16,expert=8", per_replica_batch=1)
    r = run.results["fully-sharded"]
    assert r.status == "ok" and r.breakdown["expert_comm_s"] > 0
    c = run.mesh.comm["expert"]
    assert (c["collectives"], c["nbytes"]) == (4 * 26, 4 * 26 * 2048 * 6 * 2048 * 2)


def test_remat_reruns_the_dispatch():
    """remat layer reruns each MoE layer's forward in backward, and with it its dispatch all-to-all (not
    the combine, whose output no gradient reads): Mixtral's 32 MoE layers wait on 5 each, not 4."""
    topo = load_topology("tpu-v5p-256", megacore=True)

    def expert(remat):
        run = simulate_mesh("mixtral-8x7b", topo, None, ("fully-sharded",), mesh="fsdp=16,expert=8",
                            per_replica_batch=1, options=StepOptions(remat=remat))
        return run.mesh.comm["expert"]["collectives"], run.results["fully-sharded"].breakdown["expert_comm_s"]

    (n0, t0), (n1, t1) = expert("none"), expert("layer")
    assert (n0, n1) == (4 * 32, 5 * 32) and t1 == pytest.approx(t0 * 5 / 4, rel=1e-12)


def test_the_search_adds_expert_meshes_only_for_experts(tmp_path):
    """The toy's 8 experts on 8 chips: expert sizes 1, 2, 4, 8 join; a dense model's search has none."""
    moe = Search(make_moe(tmp_path), load_topology("torus:4x2"), remats=("none",))
    assert {m.expert for _, m in moe.meshes} == {1, 2, 4, 8}
    dense = Search("llama3-8b", load_topology("tpu-v5p-256", megacore=True), remats=("none",))
    assert {m.expert for _, m in dense.meshes} == {1}


def test_a_search_runs_an_expert_axis_across_slices_where_it_is_fixed(tmp_path):
    """Two 4x2 slices with --dcn-mesh expert=2 fixed: every candidate's DCN mesh has it, the slice's
    expert sizes with it dividing the toy's 8 experts (1, 2, 4)."""
    from wus_sim.hardware.mesh import Mesh

    two = load_multislice(load_topology("torus:4x2"), slices=2)[1]
    search = Search(make_moe(tmp_path), two, remats=("none",), dcn_mesh=Mesh(expert=2))
    assert {str(d) for d, _ in search.meshes} == {"expert=2"}
    assert {m.expert for _, m in search.meshes} == {1, 2, 4}


@pytest.mark.slow
def test_the_search_picks_an_expert_mesh_for_mixtral_on_v5p_256():
    """Issue 46's check: plan --search for Mixtral-8x7B on v5p-256 (--megacore, the workload's default
    batch) ranks an expert mesh first, faster than every mesh without one."""
    from wus_sim.training.parallelism.mesh_search import search_meshes

    ranked = search_meshes("mixtral-8x7b", load_topology("tpu-v5p-256", megacore=True))
    best = ranked[0]
    dense = next(c for c in ranked if c.status == "ok" and "expert=" not in c.mesh)
    assert "expert=" in best.mesh and best.step_time_s < dense.step_time_s
    assert math.isfinite(best.breakdown["expert_comm_s"]) and best.breakdown["expert_comm_s"] > 0
