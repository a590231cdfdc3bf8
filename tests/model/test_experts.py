"""Mixture-of-experts structure (wus_sim.model.ops.experts): which tensors are routed experts, top-k from
the FLOPs, the busiest device's share, and the work one device of an expert group runs, checked
against hand counts of the toy and of the shipped Mixtral."""

import os

from hypothesis import given, strategies as st
import pytest

from make_workload import MOE_TOY, make, make_moe
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.layer_stack import layer_stack, moe_device_view
from wus_sim.model.ops.experts import busiest_device_share, expert_view, is_routed_expert, moe_layers
from wus_sim.model.workload_files import load_workload

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "data", "hf_configs")


def test_routed_expert_names():
    assert is_routed_expert("model.layers.3.block_sparse_moe.experts.7.w1.weight") == 7
    assert is_routed_expert("model.layers.3.mlp.experts.12.gate_proj.weight") == 12
    assert is_routed_expert("experts.0.w") == 0
    # the router and DeepSeek's shared experts are dense: every token passes through them
    assert is_routed_expert("model.layers.3.mlp.shared_experts.gate_proj.weight") is None
    assert is_routed_expert("model.layers.3.block_sparse_moe.gate.weight") is None


def test_mixtral_by_hand():
    """Mixtral-8x7B (its config.json): 32 MoE layers of 8 experts, 2 a token; an expert is w1, w2, w3 of
    14336 x 4096; the router 8 x 4096 is the rest of the layer's matrices."""
    w = load_workload("mixtral-8x7b")
    moe = moe_layers(w)
    assert moe.layers == tuple(range(2, 66, 2))  # embed, then attention and MoE alternating
    assert (moe.experts, moe.experts_per_token, moe.expert_elements) == (8, 2, 3 * 14336 * 4096)
    e, d = 3 * 14336 * 4096, 8 * 4096
    assert moe.expert_share == pytest.approx([2 * e / (d + 2 * e)] * 32, rel=1e-15)
    assert len(moe.expert_tensors) == 32 * 8 * 3
    assert moe_layers(load_workload("llama3-8b")) is None


def test_deepseek_v2_lite_by_hand(tmp_path):
    """DeepSeek-V2-Lite's config: 27 layers, the first dense (first_k_dense_replace 1), 64 routed experts of
    3 x 2048 x 1408, 6 a token, 2 shared experts (dense weights of the layer)."""
    from wus_sim.model.importers.importers import import_workload

    out = tmp_path / "dsv2-lite.yaml"
    import_workload(os.path.join(CONFIGS, "deepseek-v2-lite.json"), name="dsv2-lite", out=out, sequence_length=4096)
    moe = moe_layers(load_workload(str(out)))
    assert len(moe.layers) == 26 and (moe.experts, moe.experts_per_token) == (64, 6)
    assert moe.expert_elements == 3 * 2048 * 1408


def test_stacked_experts_are_the_experts_one_by_one(tmp_path):
    """The toy with each layer's 8 experts stacked in one tensor per weight (as MaxText holds them) is
    the same mixture: 8 experts (the router's 8 outputs), top-2, an expert 2 x 1024 x 2048; a 4-way
    device view holds 2 experts' rows of each stacked tensor and runs the same FLOPs."""
    one_by_one, stacked = make_moe(tmp_path), make_moe(tmp_path, "moe-stacked", stacked=True)
    a, b = moe_layers(one_by_one), moe_layers(stacked)
    h, ff = MOE_TOY["h"], MOE_TOY["ff"]
    assert (b.layers, b.experts, b.experts_per_token, b.expert_elements) == ((1, 2), 8, 2, 2 * h * ff)
    assert (a.layers, a.experts, a.experts_per_token, a.expert_elements, a.expert_share) == \
        (b.layers, b.experts, b.experts_per_token, b.expert_elements, b.expert_share)
    assert len(b.expert_tensors) == 4 and len(a.expert_tensors) == 2 * 8 * 2
    for ways in (1, 2, 4, 8):
        va, vb = expert_view(one_by_one, ways, 1.25), expert_view(stacked, ways, 1.25)
        assert vb.params == va.params == 2 * 2048 * h + 2 * (h * 8 + 8 // ways * 2 * h * ff)
        assert vb.layer_fwd_flops == pytest.approx(va.layer_fwd_flops, rel=1e-15)
    four = expert_view(stacked, 4)
    assert [t.shape for t in four.tensors if ".experts." in t.name] == [(h, 2 * ff), (ff, 2 * h)] * 2


def test_the_maxtext_librarys_stacked_moe_models_by_hand():
    """The MaxText model library stacks experts: DeepSeek-V2-Lite (deepseek2-16b: 26 MoE layers after
    1 dense, 64 experts of 3 x 2048 x 1408, 6 a token) and Qwen3-30B-A3B (48 MoE layers, 128 experts
    of 3 x 2048 x 768, 8 a token), their configs in tests/data/maxtext_models."""
    ds = moe_layers(load_workload("deepseek2-16b"))
    assert (len(ds.layers), ds.experts, ds.experts_per_token, ds.expert_elements) == (26, 64, 6, 3 * 2048 * 1408)
    qw = moe_layers(load_workload("qwen3-30b-a3b"))
    assert (len(qw.layers), qw.experts, qw.experts_per_token, qw.expert_elements) == (48, 128, 8, 3 * 2048 * 768)


def test_stacked_experts_without_a_router_are_refused_in_one_line(tmp_path):
    w = make_moe(tmp_path, "moe-stacked", stacked=True)
    bad = make(tmp_path, "no-router", "stacked experts, the router renamed", params=w.params,
               layers=list(zip(w.layer_names, w.layer_fwd_flops)),
               tensors=[(t.name.replace("gate.weight", "scores.weight"), list(t.shape), t.layer) for t in w.tensors])
    with pytest.raises(ConfigError) as err:
        moe_layers(bad)
    assert "no router weight" in str(err.value) and "\n" not in str(err.value)


def test_a_top_k_the_flops_do_not_give_is_refused_in_one_line(tmp_path):
    w = make_moe(tmp_path)
    bad = make(tmp_path, "odd-k", "k = 2.5", params=w.params,
               layers=[(n, f * (1.25 if n.startswith("moe") else 1)) for n, f in zip(w.layer_names, w.layer_fwd_flops)],
               tensors=[(t.name, list(t.shape), t.layer) for t in w.tensors])
    with pytest.raises(ConfigError) as err:
        moe_layers(bad)
    assert "not a whole number" in str(err.value) and "\n" not in str(err.value)


def test_the_toy_by_hand(tmp_path):
    moe = moe_layers(make_moe(tmp_path))
    h, ff, n = MOE_TOY["h"], MOE_TOY["ff"], MOE_TOY["experts"]
    assert (moe.layers, moe.experts, moe.experts_per_token, moe.expert_elements) == ((1, 2), n, 2, 2 * h * ff)


def test_busiest_device_share_by_hand():
    # 8 experts, the busiest at twice its share, the other 7 sharing the remaining 6 shares evenly
    assert busiest_device_share(8, 1, 2.0) == 1.0  # one device runs every expert on its own tokens
    assert busiest_device_share(8, 8, 2.0) == 2.0  # one expert a device: the busiest expert's device
    assert busiest_device_share(8, 4, 2.0) == pytest.approx((2 + 6 / 7) / 2)  # 2 experts: 2 + 6/7 shares
    assert busiest_device_share(8, 4, 1.0) == 1.0
    with pytest.raises(ConfigError, match="expert_load_imbalance"):
        busiest_device_share(8, 4, 9.0)


@given(log_n=st.integers(0, 8), log_ways=st.integers(0, 8), f=st.floats(1, 256))
def test_busiest_share_lies_between_even_and_the_busiest_expert(log_n, log_ways, f):
    n, ways = 2 ** log_n, 2 ** min(log_ways, log_n)
    f = min(f, n)
    share = busiest_device_share(n, ways, f)
    assert 1 - 1e-12 <= share <= f + 1e-12
    if ways < n:  # more devices, fewer experts each: the busiest device's share grows
        assert busiest_device_share(n, 2 * ways, f) >= share - 1e-12


def test_a_device_view_holds_its_experts_and_runs_its_tokens(tmp_path):
    """A 4-way expert group: 2 of the 8 experts a layer per device; dropless and even, a MoE layer's
    FLOPs are unchanged (k experts a token); capacity factor 1.25 scales the experts' part by 1.25;
    dropless with the busiest expert at 2 x, the busiest device's share (2 + 6/7) / 2."""
    w = make_moe(tmp_path)
    h, ff, v, n = MOE_TOY["h"], MOE_TOY["ff"], MOE_TOY["vocab"], MOE_TOY["experts"]
    router, expert = 2 * h * n, 2 * 2 * (2 * h * ff)  # a token's FLOPs in the router and its 2 experts
    even = expert_view(w, 4)
    assert even.params == 2 * v * h + 2 * (h * n + 2 * 2 * h * ff)
    assert even.layer_fwd_flops == (0, router + expert, router + expert, 2 * h * v)
    padded = expert_view(w, 4, 1.25)
    assert padded.layer_fwd_flops[1] == pytest.approx(router + 1.25 * expert, rel=1e-15)
    skewed = expert_view(w, 4, -1.0, 2.0)
    assert skewed.layer_fwd_flops[2] == pytest.approx(router + (2 + 6 / 7) / 2 * expert, rel=1e-15)
    assert skewed.fwd_flops_per_example == pytest.approx(sum(skewed.layer_fwd_flops))
    # one device, a capacity factor: every expert kept, their work padded
    assert expert_view(w, 1, 2.0).params == w.params
    assert expert_view(w, 1) is w and expert_view(load_workload("llama3-8b"), 1, 2.0).name == "llama3-8b"


def test_the_device_view_keeps_the_blocks_widths():
    """Mixtral's view keeps the whole model's block widths (the MLP of 2 experts, 2 x 14336, plus the
    router's 8 x 4096 read as 3 more: 28,675), not the padded ones its FLOPs would give (1.25 x that)."""
    w = load_workload("mixtral-8x7b")
    view = moe_device_view(w, 4, 1.25)
    assert layer_stack(view).widths == layer_stack(w).widths
    assert layer_stack(view).widths.mlp_dim == round(2 * 14336 + 2 * 8 * 4096 / (2 * 4096 * 3))
    assert expert_view(w, 4, 1.25).stack is None  # without it, the view's own (padded) widths
    assert moe_device_view(w, 1) is w
