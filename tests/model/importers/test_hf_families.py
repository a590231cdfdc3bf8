"""The ten public configs in tests/data/hf_configs/ import with the parameter counts of their
architectures, each derived here by hand from the config's numbers and the architecture's
formula (never from the importer), and checked against the count published for the model
(sources in tests/data/README.md); forward FLOPs per token of the mixtures of experts count the
active experts only; refusals say why and what to do instead."""

import json
import re
from pathlib import Path

import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.model.importers.importers import workload_document

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "hf_configs"


def imported(name, **kw):
    return workload_document(CONFIGS / name, **kw)


def llama_like(h, ff, layers, vocab, heads, kv_heads, head_dim, *, tied=False, qkv_bias=False, norms=2):
    """Embedding, per block q/k/v/o (+ q/k/v biases), a gated MLP and `norms` RMSNorms, final norm, head."""
    q, kv = heads * head_dim, kv_heads * head_dim
    attn = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if qkv_bias else 0)
    block = attn + 3 * h * ff + norms * h
    return vocab * h * (1 if tied else 2) + layers * block + h


# name: (config file, hand-derived count, published count and where it is published: tests/data/README.md)
HAND = {
    "Llama-3-8B": ("llama3-8b.json", llama_like(4096, 14336, 32, 128256, 32, 8, 128), 8_030_261_248),
    "Mistral-7B": ("mistral-7b.json", llama_like(4096, 14336, 32, 32000, 32, 8, 128), 7_241_732_096),
    "Qwen2-7B": ("qwen2-7b.json", llama_like(3584, 18944, 28, 152064, 28, 4, 128, qkv_bias=True), 7_615_616_512),
    # Gemma 2: head_dim 256 (not 3584 / 16), four norms per block, tied head
    "Gemma-2-9B": ("gemma2-9b.json", llama_like(3584, 14336, 42, 256000, 16, 8, 256, tied=True, norms=4),
                   9_241_705_984),
    # Phi-3: fused qkv [3 x 3072, 3072] and gate_up [2 x 8192, 3072]: the same elements as unfused
    "Phi-3-mini": ("phi3-mini-4k.json", llama_like(3072, 8192, 32, 32064, 32, 32, 96), 3_821_079_552),
    # Mixtral: the dense MLP replaced by 8 experts of 3 x 4096 x 14336 and a router [8, 4096]
    "Mixtral-8x7B": ("mixtral-8x7b.json", llama_like(4096, 14336, 32, 32000, 32, 8, 128)
                     + 32 * (7 * 3 * 4096 * 14336 + 8 * 4096), 46_702_792_704),
    "DeepSeek-V2-Lite": ("deepseek-v2-lite.json", None, 15_706_484_224),   # below
    "GPT-2": ("gpt2.json", None, 124_439_808),                            # below
    "T5-base": ("t5-base.json", None, 222_903_552),                       # below
    "ViT-base": ("vit-base-patch16-224.json", None, 86_567_656),          # below
}


def deepseek_v2_lite():
    h, L, heads, vocab = 2048, 27, 16, 102400
    nope, rope, v, kv_rank = 128, 64, 128, 512
    attn = heads * (nope + rope) * h + (kv_rank + rope) * h + kv_rank + heads * (nope + v) * kv_rank + h * heads * v
    dense_mlp = 3 * h * 10944                       # layer 0 (first_k_dense_replace 1)
    moe = 64 * 3 * h * 1408 + 64 * h + 3 * h * (2 * 1408)   # 64 routed experts, router, 2 shared experts fused
    return 2 * vocab * h + L * (attn + 2 * h) + dense_mlp + (L - 1) * moe + h


def gpt2_small():
    d, L, V, P = 768, 12, 50257, 1024
    block = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    return V * d + P * d + L * block + 2 * d


def t5_base():
    d, inner, ff, L, V, buckets, heads = 768, 12 * 64, 3072, 12, 32128, 32, 12
    attn = 4 * d * inner
    mlp = 2 * d * ff
    encoder = L * (attn + mlp + 2 * d) + buckets * heads + d
    decoder = L * (2 * attn + mlp + 3 * d) + buckets * heads + d
    return V * d + encoder + decoder                 # the head is tied to the shared embedding


def vit_base():
    h, L, ff, p, c, labels = 768, 12, 3072, 16, 3, 1000
    tokens = (224 // p) ** 2 + 1
    embeddings = h + tokens * h + (p * p * c * h + h)   # class token, positions, patch projection
    block = 4 * (h * h + h) + (h * ff + ff) + (ff * h + h) + 4 * h
    return embeddings + L * block + 2 * h + (labels * h + labels)


FORMULAS = {"DeepSeek-V2-Lite": deepseek_v2_lite, "GPT-2": gpt2_small, "T5-base": t5_base, "ViT-base": vit_base}


@pytest.mark.parametrize("model", list(HAND))
def test_the_ten_configs_import_with_their_published_parameter_counts(model):
    config, hand, published = HAND[model]
    hand = hand if hand is not None else FORMULAS[model]()
    assert abs(hand - published) <= 0.001 * published        # the bar: within 0.1 %
    assert hand == published                                  # in fact exact
    assert imported(config)["params"] == hand


def test_moe_flops_per_token_count_the_active_experts():
    # Mixtral: router 2 h E plus top-2 of 8 experts, each 2 x 3 h ff, per block; attention as Mistral
    h, ff, L, V, s = 4096, 14336, 32, 32000, 4096
    attn = 2 * (2 * h * h + 2 * h * 1024) + 4 * s * h
    expected = L * (attn + 2 * h * 8 + 2 * 2 * 3 * h * ff) + 2 * h * V
    doc = imported("mixtral-8x7b.json")
    assert doc["fwd_flops"]["per_unit"] == expected
    assert "top-k" in doc["sources"]["notes"] and "split by an expert mesh axis" in doc["sources"]["notes"]
    # DeepSeek-V2-Lite: 6 of 64 routed experts and 2 shared ones; scores 192 wide, values 128 wide
    h, heads, s = 2048, 16, 4096
    attn = 2 * (heads * 192 * h + 576 * h + heads * 256 * 512 + h * heads * 128) + 2 * s * heads * (192 + 128)
    moe = 2 * h * 64 + (6 + 2) * 2 * 3 * h * 1408
    expected = 27 * attn + 2 * 3 * h * 10944 + 26 * moe + 2 * h * 102400
    assert imported("deepseek-v2-lite.json")["fwd_flops"]["per_unit"] == expected


def test_vit_tokens_are_patches_and_t5_examples_are_input_target_pairs():
    doc = imported("vit-base-patch16-224.json")
    h, ff, L, tokens = 768, 3072, 12, 197
    block = 2 * 4 * h * h + 4 * tokens * h + 2 * 2 * h * ff     # per token: q, k, v, o; scores; the MLP
    per_image = 2 * h * 3 * 16 * 16 * 196 + L * tokens * block + 2 * h * 1000   # patches; blocks; classifier
    assert doc["fwd_flops"]["units_per_example"] == tokens and doc["fwd_flops"]["example_unit"] == "image"
    assert doc["fwd_flops"]["per_unit"] * tokens == pytest.approx(per_image, rel=1e-12)
    with pytest.raises(ConfigError, match="patches"):
        imported("vit-base-patch16-224.json", sequence_length=512)
    t5 = imported("t5-base.json")
    assert t5["fwd_flops"]["units_per_example"] == 2 * 512   # T5's n_positions 512: inputs and targets


def test_gemma2_notes_soft_capping_and_the_window_on_every_other_layer():
    doc = imported("gemma2-9b.json", sequence_length=8192)
    notes = doc["sources"]["notes"]
    assert "attn_logit_softcapping 50" in notes and "final_logit_softcapping 30" in notes
    keys = [a["key_tokens"] for a in doc["attention"]]
    assert keys == [4096, 8192] * 21


def test_the_default_sequence_is_moderate_and_stated():
    doc = imported("qwen2-7b.json")                           # max_position_embeddings 131,072
    assert doc["fwd_flops"]["units_per_example"] == 4096
    assert "131,072" in doc["sources"]["sequence"]
    assert imported("gpt2.json")["fwd_flops"]["units_per_example"] == 1024   # below 4,096: the config's


def test_a_config_relabelled_as_another_family_is_refused(tmp_path):
    doc = json.loads((CONFIGS / "gemma2-9b.json").read_text())
    doc["model_type"] = "gemma"
    doc.pop("architectures")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"attn_logit_softcapping.*only gemma2.*set model_type to 'gemma2'"):
        workload_document(path)
    doc = json.loads((CONFIGS / "mistral-7b.json").read_text())
    doc["model_type"] = "llama"                               # architectures still MistralForCausalLM
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="MistralForCausalLM.*set model_type to 'mistral'"):
        workload_document(path)


def test_an_unknown_family_says_why_and_what_to_do(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3", "hidden_size": 8}))
    with pytest.raises(ConfigError) as exc:
        workload_document(path)
    text = str(exc.value)
    assert "tensor names" in text and "set model_type" in text and "by hand" in text


def test_the_user_page_quotes_the_hand_derived_counts_and_the_default_tokens():
    page = (Path(__file__).resolve().parents[3] / "docs" / "importing-models.md").read_text()
    rows = {m.group(1): (int(m.group(2).replace(",", "")), int(m.group(3).replace(",", "")))
            for m in re.finditer(r"^\| `([\w.-]+\.json)` \| [^|]+ \| ([\d,]+) \| ([\d,]+) per", page, flags=re.M)}
    assert len(rows) == len(HAND)
    for model, (config, hand, published) in HAND.items():
        hand = hand if hand is not None else FORMULAS[model]()
        doc = imported(config)
        assert rows[config] == (hand, doc["fwd_flops"]["units_per_example"]), config


def test_a_vit_checkpoint_with_a_pytorch_patch_kernel_matches(tmp_path):
    from test_importers import safetensors   # tests/model/importers/test_importers.py: header-only safetensors files

    (tmp_path / "config.json").write_text((CONFIGS / "vit-base-patch16-224.json").read_text())
    doc = workload_document(tmp_path / "config.json")
    stored = {}
    for name, shape, _ in doc["tensors"]:
        if name.endswith("projection.weight"):
            assert shape == [16, 16, 3, 768]          # the workload format's [kh, kw, cin, cout]
            shape = [768, 3, 16, 16]                  # as PyTorch stores it
        stored[name] = shape
    safetensors(tmp_path / "model.safetensors", stored)
    from_checkpoint = workload_document(tmp_path)
    assert from_checkpoint["params"] == 86_567_656
    assert "safetensors headers" in from_checkpoint["sources"]["tensors"]


def test_deepseek_queries_through_their_lora_rank(tmp_path):
    doc = json.loads((CONFIGS / "deepseek-v2-lite.json").read_text())
    doc.update(q_lora_rank=64, num_hidden_layers=2)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    h, heads, q_head = 2048, 16, 192
    direct = heads * q_head * h
    through = 64 * h + 64 + heads * q_head * 64     # q_a_proj, q_a_layernorm, q_b_proj
    doc["q_lora_rank"] = None
    path2 = tmp_path / "direct.json"
    path2.write_text(json.dumps(doc))
    assert workload_document(path)["params"] - workload_document(path2)["params"] == 2 * (through - direct)


# the importer's limits on every count that multiplies what an import builds (issue 45): each a
# one-line ConfigError naming the key, raised before anything is built (under a second, a few MB)
@pytest.mark.parametrize("config, key, value", [
    ("t5-base.json", "num_decoder_layers", 2**63),
    ("t5-base.json", "num_decoder_layers", 10**6),
    ("t5-base.json", "num_layers", 10**6),
    ("mixtral-8x7b.json", "num_local_experts", 2**31),
    ("mixtral-8x7b.json", "num_local_experts", 10**5),
    ("deepseek-v2-lite.json", "n_routed_experts", 10**5),
    ("deepseek-v2-lite.json", "q_lora_rank", 0),
    ("deepseek-v2-lite.json", "kv_lora_rank", 0),
    ("deepseek-v2-lite.json", "kv_lora_rank", 2**40),
    ("vit-base-patch16-224.json", "image_size", 4096 * 16),  # 16,777,217 tokens: (65536 / 16)^2 + 1
])
def test_a_count_past_the_limits_is_refused_before_anything_is_built(tmp_path, config, key, value):
    import time
    import tracemalloc

    doc = json.loads((CONFIGS / config).read_text())
    doc[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as info:
            workload_document(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.key_path == key and len(str(info.value).splitlines()) == 1
    assert time.perf_counter() - t0 < 5 and peak < 50 * 2**20


def test_experts_times_layers_is_bounded_where_each_alone_is_not(tmp_path):
    """4,096 experts and 1,024 layers are each within their limits; together 3 x 4,096 x 1,024 =
    12,582,912 expert weights, over the 65,536 tensors an import may build."""
    doc = json.loads((CONFIGS / "mixtral-8x7b.json").read_text())
    doc.update(num_local_experts=4096, num_hidden_layers=1024)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="12,582,912 expert tensors") as info:
        workload_document(path)
    assert info.value.key_path == "num_local_experts"
