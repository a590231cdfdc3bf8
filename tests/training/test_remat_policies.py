"""MaxText's remat policies by name: what each saves, offloads and recomputes for a Llama-3-8B block,
derived here by hand from its config (Meta-Llama-3-8B config.json: d 4096, 32 query heads and 8
key/value heads of 128, MLP 14336 gated, 8192-token sequences, bf16 activations) and MaxText's
policy lists (src/maxtext/layers/decoders.py, get_remat_policy)."""

import json

import pytest

from wus_sim.cli import main
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.compute import layer_times
from wus_sim.model.layer_stack import (block_widths, policy_bytes_per_element, policy_layer_times,
                                       recompute_fractions)
from wus_sim.model.workload_files import load_workload
from wus_sim.training.step import StepOptions, simulate_strategies
from wus_sim.training.timeline.timeline import BREAKDOWN_PARTS

D, Q, KV, FF, S = 4096, 4096, 1024, 14336, 8192

# per token of one block, elements: the block input (every policy) + the named tensors it saves that
# backward reads. Llama's blocks are pre-norm: the MLP's output (mlpwo) only enters the residual sum,
# the next block's input (saved as that block's), so JAX stores it under no policy that names it
SAVED = {
    "minimal": D + (Q + KV + KV) + D + (FF + FF),  # q, k, v, out_proj, mlpwi_0, mlpwi_1
    "save_dot_except_mlpwi": D + (Q + KV + KV) + D,  # mlpwo named, not read: as save_dot_except_mlp
    "save_dot_except_mlp": D + (Q + KV + KV) + D,
    "save_qkv_proj": D + (Q + KV + KV),
    "save_out_proj": D + D,
    "qkv_proj_offloaded": D,
    "minimal_offloaded": D,
    "full": D,
}
OFFLOADED = {"qkv_proj_offloaded": Q + KV + KV, "minimal_offloaded": (Q + KV + KV) + D + (FF + FF)}


@pytest.fixture(scope="module")
def llama():
    return load_workload("llama3-8b")


def test_block_widths_are_the_config(llama):
    w = block_widths(llama)
    assert (w.d_model, w.q_dim, w.kv_dim, w.mlp_dim, w.mlp_inputs) == (D, Q, KV, FF, 2)


@pytest.mark.parametrize("policy", sorted(SAVED))
def test_each_policy_saves_its_named_tensors(llama, policy):
    device, host = policy_bytes_per_element(llama, policy)
    # bytes per element of the stack's term, one element = one token x d of one block; bf16 = 2 B
    assert device * D == 2 * SAVED[policy]
    assert host * D == 2 * OFFLOADED.get(policy, 0)


def test_activation_memory_of_a_policy_by_hand(llama):
    # save_out_proj: every block keeps its input and out_proj (2 x 2 x d B per token); the one block
    # recomputed in backward holds the rest of its activations (the file's 34.03125 B per element
    # less those 4), or, before backward reaches the blocks, the fp32 logits (8192 x vocab 128256
    # x 4 B as XLA keeps them): the larger of the two
    blocks = 32 * S * D
    expected = blocks * 4 + max(S * D * (34.03125 - 4), 8192 * 128256 * 4)
    assert llama.activation_bytes_kept(policy="save_out_proj") == pytest.approx(expected, rel=1e-12)
    # MaxText's full is our remat: layer, exactly
    assert llama.activation_bytes_kept(policy="full") == llama.activation_bytes_kept("layer")


def test_recompute_is_the_unsaved_matmuls_flop_share(llama):
    weight = 2 * (2 * Q + 2 * KV) * D  # per token: q, k, v, o
    attention = 4 * S * Q  # score and context matmuls: no policy saves `context`
    attn_layer, mlp_layer = 1, 2
    frac = recompute_fractions(llama, "save_qkv_proj")  # out_proj and the MLP's input projections recomputed
    assert frac[attn_layer] == pytest.approx((attention + 2 * Q * D) / (weight + attention), rel=1e-12)
    assert frac[mlp_layer] == pytest.approx(2 / 3, rel=1e-12)  # mlpwo's output no gradient reads: not rerun
    frac = recompute_fractions(llama, "save_dot_except_mlpwi")  # the MLP's two input projections
    assert frac[attn_layer] == pytest.approx(attention / (weight + attention), rel=1e-12)
    assert frac[mlp_layer] == pytest.approx(2 / 3, rel=1e-12)
    assert recompute_fractions(llama, "minimal")[mlp_layer] == 0.0
    assert recompute_fractions(llama, "minimal")[0] == 0.0  # the embedding: outside the blocks


def test_offload_time_is_bytes_over_the_host_link(llama):
    topo = load_topology("tpu-v5e-256")
    assert topo.chip.host_Bps == 15e9  # chips.yaml host_GBps of v5e (one chip, one core: the replica's)
    params = StepOptions().compute
    t = policy_layer_times(llama, topo, 1, params, policy="minimal_offloaded")
    base = layer_times(llama, topo, 1, params)
    attn_bytes = S * 2 * (Q + KV + KV + D)  # query/key/value_proj and out_proj of one sequence, bf16
    mlp_bytes = S * 2 * (FF + FF)  # mlpwi_0, mlpwi_1 (mlpwo is no residual of a pre-norm block)
    # the block (attention layer 1, MLP layer 2) copies its tensors beside its whole compute: exposed
    # only where the block's bytes outlast the block's forward (on its last layer) or backward (first)
    transfer = (attn_bytes + mlp_bytes) / 15e9
    block_fwd = base.forward_s[1] + base.forward_s[2]
    block_bwd = t.backward_s[1] - t.host_bwd_s[1] + t.backward_s[2]
    assert t.host_fwd_s[2] == pytest.approx(max(0.0, transfer - block_fwd), rel=1e-12)
    assert t.host_fwd_s[2] > 0  # 0.6 GB a sequence outlasts the block's forward on v5e
    assert t.forward_s[2] == pytest.approx(base.forward_s[2] + t.host_fwd_s[2], rel=1e-12)
    assert t.host_bwd_s[1] == pytest.approx(max(0.0, transfer - block_bwd), rel=1e-12)
    assert t.host_fwd_s[1] == 0.0 and t.host_bwd_s[2] == 0.0 and t.host_fwd_s[0] == 0.0
    # every block the same
    assert t.host_fwd_s[2::2].tolist() == pytest.approx([t.host_fwd_s[2]] * len(t.host_fwd_s[2::2]))


@pytest.fixture(scope="module")
def v5e_runs():
    topo = load_topology("tpu-v5e-256")
    out = {}
    for policy in ("minimal", "save_dot_except_mlp", "save_out_proj", "minimal_offloaded", "full", None):
        options = StepOptions(remat="layer") if policy is None else StepOptions(remat_policy=policy)
        out[policy or "layer"] = simulate_strategies("llama3-8b", topo, None, ("fully-sharded",), per_replica_batch=1,
                                                     options=options).results["fully-sharded"]
    return out


def test_policies_trade_memory_for_backward_time(v5e_runs):
    order = ("minimal", "save_dot_except_mlp", "save_out_proj", "full")  # MaxText's docs: fastest to slowest
    mem = [v5e_runs[p].memory.activations for p in order]
    assert mem == sorted(mem, reverse=True) and len(set(mem)) == len(mem)
    feasible = [p for p in order if v5e_runs[p].status == "ok"]
    bwd = [v5e_runs[p].timeline.breakdown["bwd_s"] for p in feasible]
    assert bwd == sorted(bwd)


def test_maxtext_full_is_remat_layer(v5e_runs):
    a, b = v5e_runs["full"], v5e_runs["layer"]
    assert a.step_time_s == b.step_time_s and a.memory.peak == b.memory.peak


def test_offloaded_policy_waits_on_the_host_link(v5e_runs):
    r = v5e_runs["minimal_offloaded"]
    assert r.status == "ok" and r.breakdown["host_offload_s"] > 0
    assert sum(r.breakdown[p] for p in BREAKDOWN_PARTS) == pytest.approx(r.step_time_s, rel=1e-9)
    assert r.memory.details["host_activations"] == pytest.approx(32 * (S * 2 * OFFLOADED["minimal_offloaded"]),
                                                                 rel=1e-12)
    assert r.memory.activations < v5e_runs["minimal"].memory.activations


def test_cli_remat_policy_changes_memory_and_backward(capsys):
    def run(*extra):
        assert main(["step", "llama3-8b", "-t", "tpu-v5e-256", "--strategy", "fully-sharded",
                     "--per-replica-batch", "1", "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)["strategies"]["fully-sharded"]

    layer, offloaded = run("--remat", "layer"), run("--remat-policy", "qkv_proj_offloaded")
    # q, k, v in host memory, not in HBM as minimal keeps them
    assert offloaded["memory"]["activations"] < run("--remat-policy", "minimal")["memory"]["activations"]
    assert offloaded["breakdown"]["bwd_s"] < layer["breakdown"]["bwd_s"]  # q, k, v come back, not recomputed


@pytest.mark.parametrize("argv,words", [
    (["--remat", "layer", "--remat-policy", "minimal"], "not with remat layer"),
    (["-t", "tpu-v3-32", "--remat-policy", "minimal_offloaded"], "no host link bandwidth"),
])
def test_one_line_refusals(capsys, argv, words):
    topology = [] if "-t" in argv else ["-t", "tpu-v5e-256"]
    assert main(["step", "llama3-8b", *topology, *argv]) != 0
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "--remat-policy" in err


def test_a_workload_that_is_no_stack_refuses_a_policy():
    with pytest.raises(ConfigError, match="stack of identical transformer blocks"):
        simulate_strategies("resnet50", "tpu-v3-32", options=StepOptions(remat_policy="minimal"))


# MaxText's remat_policy: custom (src/maxtext/configs/types.py: one place per tensor), as the tiering
# recipes for Llama 3.1 8B on v6e set it: the block input and q, k, v and out_proj offloaded
TIERING_CUSTOM = ("custom:decoder_layer_input=offload,query_proj=offload,key_proj=offload,value_proj=offload,"
                  "out_proj=offload")


def test_a_custom_policy_places_each_tensor_where_it_says(llama):
    device, host = policy_bytes_per_element(llama, TIERING_CUSTOM)
    assert device == 0.0  # nothing on the device: even the block input went to the host
    assert host * D == 2 * (D + Q + KV + KV + D)
    device, host = policy_bytes_per_element(llama, "custom:mlpwo=device,query_proj=offload")
    # the input stays on the device unless named; mlpwo, named, is not kept (no residual, pre-norm)
    assert device * D == 2 * D and host * D == 2 * Q
    device, _ = policy_bytes_per_element(llama, "custom:out_proj=device")
    assert device * D == 2 * (D + D)
    # a custom policy that names what a named one saves is that policy, byte for byte and in recompute
    same = "custom:query_proj=device,key_proj=device,value_proj=device"
    assert policy_bytes_per_element(llama, same) == policy_bytes_per_element(llama, "save_qkv_proj")
    assert list(recompute_fractions(llama, same)) == list(recompute_fractions(llama, "save_qkv_proj"))


def test_a_custom_policy_offloads_the_block_input_with_the_attention_layer(llama):
    topo = load_topology("tpu-v5e-256")
    params = StepOptions().compute
    t = policy_layer_times(llama, topo, 1, params, policy=TIERING_CUSTOM)
    base = layer_times(llama, topo, 1, params)
    nbytes = S * 2 * (D + Q + KV + KV + D)  # input, q, k, v, out_proj of one sequence, bf16
    # copied beside the whole block's forward (attention and MLP layers): the MLP offloads nothing but
    # its compute hides the attention layer's copies
    exposed = max(0.0, nbytes / 15e9 - base.forward_s[1] - base.forward_s[2])
    assert t.host_fwd_s[2] == pytest.approx(exposed, rel=1e-12)
    assert t.host_fwd_s[1] == 0.0


@pytest.mark.parametrize("bad", ["custom:", "custom:mlpwo", "custom:mlpwo=host", "custom:context=offload",
                                 "custom:mlpwo=device,mlpwo=remat", "maximal", "custom"])
def test_a_bad_custom_policy_is_one_line(capsys, bad):
    code = main(["step", "llama3-8b", "-t", "tpu-v5e-256", "--remat-policy", bad])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "remat" in err


def test_only_a_post_norm_block_stores_its_mlp_output():
    """BERT closes each block with a norm, whose backward reads the sum the MLP's output enters: a
    policy naming mlpwo stores it there (d = 1024 elements a token); a pre-norm Llama block's
    mlpwo only enters the residual sum, the next block's saved input: never stored, never rerun."""
    bert = load_workload("bert-large")
    assert block_widths(bert).post_norm and not block_widths(load_workload("llama3-8b")).post_norm
    with_out, _ = policy_bytes_per_element(bert, "custom:mlpwo=device")
    without, _ = policy_bytes_per_element(bert, "custom:mlpwo=remat")
    assert (with_out - without) * 1024 == 2 * 1024  # bf16, d = 1024 of one token
    llama = load_workload("llama3-8b")
    assert policy_bytes_per_element(llama, "custom:mlpwo=device") == policy_bytes_per_element(llama, "full")
    # BERT's ungated MLP: mlpwi_0 and mlpwo, one each; unsaved under save_qkv_proj, both rerun
    assert recompute_fractions(bert, "save_qkv_proj")[2] == pytest.approx(1.0)
