"""The context mesh axis in the step (wus_sim.training.parallelism.context_parallel): the mesh without it
is the step before it, to the last bit; its K/V all-gathers and reduce-scatters, its compute and memory
derived by hand on a tiny Llama; Llama-3-8B at 128k tokens; refusals; the search's context sizes."""

import json
import os

import pytest

from make_workload import make_tiny_llama
from pin_mesh_records import records
from wus_sim.hardware.mesh import DCN_AXES, Mesh, parse_mesh
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.compute import ComputeParams
from wus_sim.model.importers.importers import import_workload
from wus_sim.model.ops.context import context_view
from wus_sim.training.parallelism.context_parallel import SEARCH_MIN_TOKENS, with_context_meshes
from wus_sim.training.parallelism.mesh_search import Search
from wus_sim.training.parallelism.mesh_step import simulate_mesh
from wus_sim.training.step import StepOptions, step_layer_times

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")
def tiny(tmp_path, tokens=4096):
    """The tiny Llama (4 query heads of 64, 2 KV heads, 2 layers; tests/helpers/make_workload.py)."""
    return make_tiny_llama(tmp_path, tokens)


def _step(workload, mesh, topology="torus:4x2", batch=1, **options):
    return simulate_mesh(workload, load_topology(topology), None, ("fully-sharded",), mesh=mesh,
                         per_replica_batch=batch, options=StepOptions(**options))


def test_context_one_is_the_step_before_the_axis_to_the_last_bit():
    """The seven pinned meshes (tests/data/mesh_before_expert.json: today's fsdp path, tensor, hybrid, a DCN
    fsdp axis, TensorCores; Llama, BERT, Mixtral) with ``context=1``: every number of every strategy equals
    what the code gave before the expert and context axes existed."""
    with open(os.path.join(DATA, "mesh_before_expert.json")) as f:
        before = json.load(f)
    assert records(",context=1") == before


def test_the_kv_collectives_on_a_ring_are_the_textbook_cost(tmp_path):
    """data=2,context=4 on a 4x2 torus: the context groups are the rings of x (4 chips, wrapped). Each
    attention layer's K and V, gathered, are S = 2 x 4096 tokens x 2 KV heads x 64 x 2 bytes = 2 MiB a
    device (one sequence a group).

    A ring all-gather on n = 4 (bidirectional: each device's S/4 split in halves, one each way round)
    takes n - 1 = 3 steps, each a hop (a = 1 us, the generic torus's) and S/8 over a link direction of
    B = 100 GB/s: T = 3 (a + S / (8 B)); the reduce-scatter of the gradients the same. Each attention layer
    waits on an all-gather forward, and in backward on the all-gather again and the reduce-scatter: the
    tiny Llama's 2 layers, 6 T in all, T forward each, 2 T backward, nothing overlapped."""
    run = _step(tiny(tmp_path), "data=2,context=4")
    assert run.mesh.layout.describe()[1] == "context=4: x"
    s = 2 * 4096 * 2 * 64 * 2
    one = 3 * (1e-6 + s / (8 * 100e9))
    r = run.results["fully-sharded"]
    assert r.breakdown["context_comm_s"] == pytest.approx(6 * one, rel=1e-12)
    c = run.mesh.comm["context"]
    assert (c["collectives"], c["nbytes"]) == (6, 6 * s) and c["busy_s"] == pytest.approx(6 * one, rel=1e-12)
    # on the critical path, apart from the compute: the parts still add up to the step
    assert sum(r.breakdown[p] for p in ("overhead_s", "host_loop_s", "op_launch_s", "fwd_s", "bwd_s", "batch_norm_s",
                                        "update_s", "exposed_comm_s", "extra_reduction_s", "idle_s", "host_offload_s",
                                        "tensor_comm_s", "expert_comm_s", "context_comm_s")) == pytest.approx(
        r.step_time_s, rel=1e-9)
    # forward waits on one of the three: the step without the axis's wait is the step less 6 T
    assert run.mesh.comm["tensor"]["collectives"] == 0


def test_a_tensor_axis_splits_the_kv_heads(tmp_path):
    """tensor=2: each device gathers its 1 KV head of the 2 (MaxText's activation_kv_heads -> tensor):
    S / 2 a collective."""
    run = _step(tiny(tmp_path), "context=4,tensor=2")
    assert run.mesh.comm["context"]["nbytes"] == 6 * (2 * 4096 * 64 * 2)


def _linear(**kw):
    """The ``flops`` compute model with no elementwise work or fixed costs: a layer's forward is its
    FLOPs / (peak x efficiency), exactly."""
    return StepOptions(compute=ComputeParams(compute_model="flops", mxu_efficiency=0.5, elementwise_fwd_bytes=0.0,
                                             elementwise_bwd_bytes=0.0, op_overhead_s=0.0), **kw)


def test_a_device_computes_a_quarter_of_each_sequence(tmp_path):
    """context=4: every layer's forward is its FLOPs a sequence / 4 (a quarter of the tokens, the whole
    sequence's keys for each query: 1/4 of the score work too) x 2 sequences / (61.5 TFLOP/s x 0.5)."""
    w = tiny(tmp_path)
    topo = load_topology("torus:4x2")
    layers = step_layer_times(context_view(w, 4), topo, 2, _linear())
    whole = step_layer_times(w, topo, 2, _linear())
    for f, t, t1 in zip(w.layer_fwd_flops, layers.forward_s, whole.forward_s):
        if f > 0:
            assert t == pytest.approx(f / 4 * 2 / (61.5e12 * 0.5), rel=1e-12)
        else:  # the embedding lookup: no FLOPs, a cost that is not per token here, unchanged
            assert t == t1
    a = context_view(w, 4).attention[0]
    assert (a.query_tokens, a.key_tokens) == (1024, 4096)


def test_memory_moves_the_batch_split_to_the_sequence(tmp_path):
    """fsdp=2,context=4 against fsdp=8, the same group batch: the weights are sharded over the same 8
    devices (MaxText's embed rule puts context beside fsdp), so weights, gradients, slots and the fsdp
    traffic are equal; each device keeps a quarter of a sequence's activations where fsdp=8 keeps a whole
    one."""
    w = tiny(tmp_path)
    a, b = _step(w, "fsdp=2,context=4", batch=2), _step(w, "fsdp=8", batch=2)
    ra, rb = a.results["fully-sharded"], b.results["fully-sharded"]
    for part in ("weights", "gradients", "slots"):
        assert getattr(ra.memory, part) == getattr(rb.memory, part), part
    assert ra.memory.activations == pytest.approx(rb.memory.activations / 4, rel=1e-12)
    # and one attention layer's gathered K and V (2 sequences x 4,096 x 128 x 2 bytes each) with their whole
    # gradients in backward: 2 x 2 x 2 x 4,096 x 128 x 2 bytes of transient buffers
    kv = 2 * (2 * 2 * 4096 * 128 * 2)
    assert ra.memory.collective_buffers == rb.memory.collective_buffers + kv
    assert ra.memory.details["kv_gather_buffers"] == kv
    assert a.mesh.comm["fsdp"]["nbytes"] == b.mesh.comm["fsdp"]["nbytes"]
    # (fsdp=8 runs on today's path, which times its collectives in the timeline) fsdp=4,context=2's weight
    # collectives go over the same 8 devices in the same ring order: the same seconds
    c = _step(w, "fsdp=4,context=2", batch=2)
    assert a.mesh.comm["fsdp"]["busy_s"] == c.mesh.comm["fsdp"]["busy_s"] > 0
    assert (a.global_batch, b.global_batch) == (4, 16)  # 2 groups of 4 devices, 8 groups of 1


def test_llama3_8b_at_128k_tokens_runs_with_a_context_axis(tmp_path):
    """Llama-3-8B at 131,072 tokens on v5p-128 (64 chips), one sequence a group: without remat fsdp=64 keeps
    a whole sequence's activations on a chip and does not fit; fsdp=16,context=4 with remat full fits,
    keeps a quarter of what fsdp=64 keeps (remat full) besides one layer's gathered K/V, and each of its 32 attention layers gathers K and V
    of 2 x 131,072 x 8 KV heads x 128 x 2 bytes = 512 MiB three times."""
    path = tmp_path / "llama3-8b-128k.yaml"
    import_workload(os.path.join(DATA, "hf_configs", "llama3-8b.json"), name="llama3-8b", out=str(path),
                    sequence_length=131072)
    topo = load_topology("tpu-v5p-128", megacore=True)

    def run(mesh, remat="full"):
        return simulate_mesh(str(path), topo, None, ("fully-sharded",), mesh=mesh, per_replica_batch=1,
                             options=StepOptions(remat=remat))

    assert run("fsdp=64", "none").results["fully-sharded"].status == "infeasible"
    ctx = run("fsdp=16,context=4")
    r = ctx.results["fully-sharded"]
    assert r.status == "ok" and r.memory.fits and r.breakdown["context_comm_s"] > 0
    assert r.memory.activations == pytest.approx(run("fsdp=64").results["fully-sharded"].memory.activations / 4,
                                                 rel=1e-12)
    assert ctx.mesh.comm["context"]["nbytes"] == 3 * 32 * 2 * 131072 * 8 * 128 * 2


def test_a_context_that_does_not_divide_the_sequence_is_refused_in_one_line(tmp_path):
    w = tiny(tmp_path)
    with pytest.raises(ConfigError) as err:
        _step(w, "data=2,context=3", topology="torus:3x2")
    assert "context must divide the tokens per sequence" in str(err.value) and "\n" not in str(err.value)
    assert err.value.key_path == "mesh"


def test_context_across_slices_is_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        parse_mesh("data=2,context=2", key_path="dcn_mesh", axes=DCN_AXES)
    assert "not modelled" in str(err.value) and "\n" not in str(err.value)


def test_the_search_adds_context_sizes_only_for_long_sequences(tmp_path):
    """The tiny Llama on 8 chips: at 4,096 tokens no context axis; at 32,768 (the rule's threshold) each
    mesh with fsdp 2, 4 or 8 also runs with that much of fsdp moved to context (2, 4, 8): at most 4 x the
    meshes, none lost."""
    topo = load_topology("torus:4x2")
    short = Search(tiny(tmp_path), topo, remats=("none",))
    assert {m.context for _, m in short.meshes} == {1}
    long = Search(tiny(tmp_path, SEARCH_MIN_TOKENS), topo, remats=("none",))
    assert {m.context for _, m in long.meshes} == {1, 2, 4, 8}
    plain = [m for _, m in long.meshes if m.context == 1]
    assert len(plain) == len(short.meshes) and len(long.meshes) <= 4 * len(plain)
    assert all(Mesh(data=m.data, fsdp=m.fsdp * m.context, tensor=m.tensor) in plain for _, m in long.meshes)


def test_a_fixed_context_is_searched_at_any_length(tmp_path):
    w = tiny(tmp_path)
    meshes = with_context_meshes(w, [Mesh(fsdp=8), Mesh(data=8)], fixed=4)
    assert meshes == [Mesh(fsdp=8), Mesh(fsdp=2, context=4), Mesh(data=8)]


def test_with_an_expert_axis_each_device_dispatches_its_part_of_the_sequence():
    """Mixtral-8x7B (4,096 tokens, top-2, hidden 4,096, 32 MoE layers) on v5p-256 with fsdp=8,context=2,
    expert=8: a device holds 2,048 tokens of its group's sequence, so each of the 4 all-to-alls a MoE layer
    moves 2,048 x 2 x 4,096 x 2 bytes; each of its 32 attention layers gathers K and V of the whole
    sequence, 2 x 4,096 x 8 KV heads x 128 x 2 bytes, three times."""
    run = simulate_mesh("mixtral-8x7b", load_topology("tpu-v5p-256", megacore=True), None, ("fully-sharded",),
                        mesh="fsdp=8,context=2,expert=8", per_replica_batch=1)
    assert run.results["fully-sharded"].status == "ok"
    assert run.mesh.comm["expert"]["nbytes"] == 4 * 32 * 2048 * 2 * 4096 * 2
    assert run.mesh.comm["context"]["nbytes"] == 3 * 32 * 2 * 4096 * 8 * 128 * 2
    assert run.replicas == 64  # fsdp 8 x expert 8 groups, each shared by 2 context devices
