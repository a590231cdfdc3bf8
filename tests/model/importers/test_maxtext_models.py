"""MaxText's model library as workloads: every model file of src/maxtext/configs/models/ ships under
MaxText's name or is refused in one line, and each shipped count is checked twice, against the
count MaxText's own code gives (the sum of its parameter arrays, ``max_utils.calculate_num_params_from_pytree``,
over the arrays its decoder blocks create: written out below from each block's layers, never from
the importer) and against the count published for the model (tests/data/maxtext_published.csv).
"""

import csv
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from wus_sim.cli import main
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.importers.maxtext_model import maxtext_document
from wus_sim.model.workload_files import known_workloads, load_workload
from workload_sample import MAXTEXT_SAMPLE, is_maxtext_library

DATA = Path(__file__).resolve().parents[2] / "data"
MODELS = Path(__file__).resolve().parents[3] / "wus_sim" / "data" / "maxtext" / "models"
FILES = sorted(p.stem for p in MODELS.glob("*.yml"))

# base.yml's values of the keys the formula reads (src/maxtext/configs/base.yml, the commit the
# model files are copied at: wus_sim/data/maxtext/models/README.md), typed here again
BASE = {"decoder_block": "llama2", "global_parameter_scale": 1, "base_emb_dim": 2048, "base_num_query_heads": 16,
        "base_num_kv_heads": 16, "base_mlp_dim": 7168, "base_num_decoder_layers": 16, "head_dim": 128,
        "vocab_size": 32000, "logits_via_embedding": False, "max_target_length": 2048, "num_experts": 1,
        "num_experts_per_tok": 1, "base_moe_mlp_dim": -1, "shared_experts": 0, "first_num_dense_layers": 0,
        "interleave_moe_layer_step": 1, "routed_bias": False, "q_lora_rank": 0, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "attention_bias": False,
        "trainable_position_size": -1}
# MaxText names whose workload is the Hugging Face import (tests/tools/import_shipped_llms.py)
HF_SHIPPED = {"llama2-70b": 4096, "llama3-8b": 8192, "llama3-70b": 8192, "llama3.1-405b": 8192,
              "mixtral-8x7b": 4096, "mixtral-8x22b": 4096, "gpt3-175b": 2048}


def keys_of(name):
    return {**BASE, **(yaml.safe_load((MODELS / f"{name}.yml").read_text()) if name != "default" else {})}


def scaled(k):
    """MaxText's effective sizes (types.py, 'CALCULATE MODEL DIMENSIONS'): for a scale 2^n with
    n = 3b + r, embedding x 2^(b + (r > 1)), heads and MLP x 2^(b + (r > 0)), layers x 2^b."""
    b, r = divmod(round(math.log2(k["global_parameter_scale"])), 3)
    wide, emb = 2 ** (b + (r > 0)), 2 ** (b + (r > 1))
    return (emb * k["base_emb_dim"], wide * k["base_num_query_heads"], wide * k["base_num_kv_heads"],
            wide * k["base_mlp_dim"], wide * k["base_moe_mlp_dim"], 2**b * k["base_num_decoder_layers"])


def maxtext_params(k):
    """Parameters of MaxText's model for keys *k*: the arrays its decoder block creates, summed."""
    E, H, K, M, X, L = scaled(k)
    D, V, block = k["head_dim"], k["vocab_size"], k["decoder_block"]
    n_exp, shared = k["num_experts"], k["shared_experts"]
    gated = 3 * E  # wi_0, wi_1, wo of a gated MlpBlock, per unit of its width
    attn = E * H * D + 2 * E * K * D + H * D * E  # query, key, value, out (DenseGeneral kernels)
    embed = V * E + (0 if k["logits_via_embedding"] else E * V) + E  # token_embedder, logits_dense, decoder_norm
    router = lambda: E * n_exp + (n_exp if k["routed_bias"] else 0)  # noqa: E731 -- GateLogit kernel (+ bias)
    if block in ("llama2", "mistral", "gemma"):  # two RMSNorm scales, attention, MlpBlock
        return embed + L * (2 * E + attn + gated * M)
    if block == "qwen2":  # q, k, v biases with attention_bias (none on out)
        return embed + L * (2 * E + attn + (H * D + 2 * K * D) + gated * M)
    if block == "gemma2":  # one MaxText layer = a local and a global layer, each with four norms
        return embed + L * 2 * (4 * E + attn + gated * M)
    if block == "gemma3":  # four norms and the per-head query and key RMSNorms
        return embed + L * (4 * E + attn + 2 * D + gated * M)
    if block == "qwen3":
        return embed + L * (2 * E + attn + 2 * D + gated * M)
    if block == "olmo3":  # post-attention and post-MLP norms; query and key norms over all heads
        return embed + L * (2 * E + attn + H * D + K * D + gated * M)
    if block == "mixtral":  # routed experts mlp_dim wide (mixtral.py)
        return embed + L * (2 * E + attn + router() + n_exp * gated * M)
    if block == "qwen3_moe":
        return embed + L * (2 * E + attn + 2 * D + router() + n_exp * gated * X)
    if block == "gpt_oss":  # biased q, k, v, out; a sink per head; experts mlp_dim wide with wi_0/wi_1/wo biases
        return embed + L * (2 * E + attn + H * D + 2 * K * D + E + H + router() + n_exp * (gated * M + 2 * M + E))
    if block in ("llama4", "envy"):  # a routed layer every interleave_moe_layer_step layers
        step = k["interleave_moe_layer_step"]
        moe = sum(1 for i in range(L) if (i + 1) % step == 0)
        norms = 2 * E + (E + 2 * D if block == "envy" else 0)  # envy: post-MLP norm, per-head q/k norms
        routed = router() + n_exp * gated * X + shared * gated * X
        return embed + L * (norms + attn) + (L - moe) * gated * M + moe * routed
    if block == "deepseek":  # multi-head latent attention; dense layers first, then routed and shared experts
        nope, rope, v, qr, kvr = (k[x] for x in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                                  "q_lora_rank", "kv_lora_rank"))
        q = E * qr + qr + qr * H * (nope + rope) if qr else E * H * (nope + rope)  # wq_a, q_norm, wq_b | query
        mla = q + E * (kvr + rope) + kvr + kvr * H * (nope + v) + H * v * E  # wkv_a, kv_norm, wkv_b, out
        dense = k["first_num_dense_layers"]
        routed = router() + n_exp * gated * X + shared * gated * X
        return embed + L * (2 * E + mla) + dense * gated * M + (L - dense) * routed
    if block == "gpt3":  # LayerNorms with bias, fused biased QKV, biased out, biased MLP, learned positions
        ln = 2 * E
        layer = ln + (E * 3 * H * D + 3 * H * D) + (H * D * E + E) + ln + (E * M + M) + (M * E + E)
        return V * E + k["trainable_position_size"] * E + L * layer + ln  # tied head, final LayerNorm
    raise AssertionError(f"no formula for {block}")


SHIPPED = [n for n in known_workloads() if is_maxtext_library(n)]


def test_every_library_model_ships_or_is_refused_on_the_page():
    page = (Path(__file__).resolve().parents[3] / "docs" / "maxtext-models.md").read_text()
    refused = page.split("## Refused")[1]
    assert "default" in SHIPPED and len(SHIPPED) == 56
    for name in FILES:
        ships = name in SHIPPED or name in HF_SHIPPED
        assert ships != (f"| `{name}` |" in refused), name   # one or the other, never both or neither
    assert set(HF_SHIPPED) <= set(known_workloads()) and not set(HF_SHIPPED) & set(SHIPPED)


@pytest.mark.parametrize("name", sorted(set(SHIPPED) | set(HF_SHIPPED)))
def test_parameters_are_maxtexts(name):
    w = load_workload(name)
    assert w.params == maxtext_params(keys_of(name)) == sum(t.size for t in w.tensors)


def published():
    with open(DATA / "maxtext_published.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("row", published(), ids=lambda r: r["model_name"])
def test_parameters_match_the_published_count(row):
    """Exactly, or by the stated difference (Gemma's padded vocabulary), or within the rounding of a
    size its publisher names (tolerance_pct)."""
    ours = load_workload(row["model_name"]).params
    expected = int(row["published"]) + int(row["offset"])
    assert abs(ours - expected) <= float(row["tolerance_pct"]) / 100 * int(row["published"]), (ours, expected)


def test_gemmas_offset_is_its_padded_vocabulary():
    for name, d in (("gemma-2b", 2048), ("gemma-7b", 3072), ("gemma2-2b", 2304), ("gemma2-9b", 3584),
                    ("gemma2-27b", 4608)):
        row = next(r for r in published() if r["model_name"] == name)
        assert int(row["offset"]) == (256128 - 256000) * d == (keys_of(name)["vocab_size"] - 256000) * d


@pytest.mark.parametrize("name", SHIPPED)
def test_sequence_is_max_target_length(name):
    assert load_workload(name).units_per_example == keys_of(name)["max_target_length"]


@pytest.mark.parametrize("name", sorted(HF_SHIPPED))
def test_a_name_shared_with_a_hugging_face_import_keeps_it_and_the_same_parameters(name):
    ours = load_workload(name)
    doc = maxtext_document(yaml.safe_load((MODELS / f"{name}.yml").read_text()), file=MODELS / f"{name}.yml")
    theirs = [(n, tuple(s)) for n, s, _ in doc["tensors"]]
    assert ours.units_per_example == HF_SHIPPED[name] and doc["params"] == ours.params
    if name.startswith("mixtral"):  # one tensor per expert in the checkpoint, stacked in MaxText's layout
        def per_layer(tensors):
            out = {}
            for n, s in tensors:
                out[n.split(".experts")[0]] = out.get(n.split(".experts")[0], 0) + math.prod(s)
            return out
        assert per_layer((t.name, t.shape) for t in ours.tensors) == per_layer(theirs)
    else:
        assert [(t.name, t.shape) for t in ours.tensors] == theirs


@pytest.mark.parametrize("scale", [1, 2, 4, 8, 16, 64])
def test_global_parameter_scale_grows_the_default_model_as_maxtext_does(scale):
    doc = maxtext_document({"global_parameter_scale": scale})
    assert doc["params"] == maxtext_params({**BASE, "global_parameter_scale": scale})
    # scale 8 = 2^3: every size doubles (embedding 4,096, 32 heads, MLP 14,336, 32 layers)
    if scale == 8:
        assert doc["description"].startswith("MaxText default (llama2): 32 layers, d 4096")


def test_the_sample_of_the_contract_tests_covers_every_block():
    blocks = {load_workload(n).sources["config"].split("decoder_block ")[1].split(",")[0] for n in SHIPPED}
    sampled = {load_workload(n).sources["config"].split("decoder_block ")[1].split(",")[0] for n in MAXTEXT_SAMPLE}
    # the blocks left out are built as Hugging Face families other shipped workloads exercise
    assert blocks - sampled == {"gemma", "gemma2", "qwen2", "mistral", "gpt3", "deepseek"} - sampled


def test_experts_are_stacked_and_only_the_routed_ones_count_per_token():
    w = load_workload("qwen3-30b-a3b")  # 128 experts of 768, 8 a token, d 2,048, 48 layers
    E, X, n, k = 2048, 768, 128, 8
    mlp_layer = w.layer_names.index("model.layers.0.mlp")
    shapes = {t.name.split("layers.0.")[1]: t.shape for t in w.tensors if t.layer == mlp_layer}
    assert shapes == {"post_attention_layernorm.weight": (E,), "mlp.gate.weight": (n, E),
                      "mlp.experts.gate_proj.weight": (n * X, E), "mlp.experts.up_proj.weight": (n * X, E),
                      "mlp.experts.down_proj.weight": (n * E, X)}
    mlp = dict(zip(w.layer_names, w.layer_fwd_flops))["model.layers.0.mlp"] / w.units_per_example  # per token
    assert mlp == 2 * E * n + k * 2 * 3 * E * X


def test_weight_flops_per_token_are_maxtexts():
    """MaxText's calculate_tflops_training_per_device (src/maxtext/utils/maxtext_utils.py) counts per
    token and layer 2 x (emb x (heads + 2 kv heads) x head_dim) for q, k, v, 2 x heads x head_dim x emb
    for out, 2 x 3 x mlp x emb for a gated MLP, and 2 x emb x vocab for the logits: ours, less attention."""
    for name in ("llama2-7b", "qwen3-8b"):
        w, k = load_workload(name), keys_of(name)
        E, H, KV, M, _, L = scaled(k)
        D, V = k["head_dim"], k["vocab_size"]
        maxtext = L * (2 * E * (H + 2 * KV) * D + 2 * H * D * E + 2 * 3 * M * E) + 2 * E * V
        assert w.fwd_flops_per_unit - w.layer_attention_flops.sum() / w.units_per_example == maxtext


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_workload_reads_a_maxtext_model_file(tmp_path, capsys):
    out = tmp_path / "l.yaml"
    code, _, err = run_cli(capsys, "import-workload", str(MODELS / "llama2-7b.yml"), "--out", str(out),
                           "--sequence-length", "4096")
    w = load_workload(str(out))
    assert code == 0 and w.name == "llama2-7b" and w.params == 6_738_415_616 and w.units_per_example == 4096
    assert "llama2-7b" in err


@pytest.mark.parametrize("keys, key, words", [
    ({"decoder_block": "qwen3_next"}, "decoder_block", "Gated DeltaNet"),
    ({"decoder_block": "nope"}, "decoder_block", "not a MaxText decoder block"),
    ({"use_multimodal": True}, "use_multimodal", "vision encoder"),
    ({"mtp_num_layers": 1}, "mtp_num_layers", "multi-token prediction"),
    ({"global_parameter_scale": 3}, "global_parameter_scale", "power of two"),
    ({"base_emb_dim": 0}, "base_emb_dim", "whole number"),
    ({"dropout_rate": 0.1}, "dropout_rate", "dropout"),
    ({"dropout_rate": "high"}, "dropout_rate", "probability"),
    ({"rope_max_timescale": 10_000, "per_device_batch_size": 4}, "per_device_batch_size", "not a MaxText model key"),
    ({"decoder_block": "gemma2", "use_post_attn_norm": True, "use_post_ffw_norm": False}, "use_post_ffw_norm",
     "must be true"),
    ({"decoder_block": "mixtral", "num_experts": 8, "routed_bias": True}, "routed_bias", "is true"),
    ({"decoder_block": "gpt3", "mlp_activations": ["gelu"], "trainable_position_size": 1024,
      "logits_via_embedding": True}, "trainable_position_size", "below the sequence length"),
])
def test_what_is_not_built_is_refused_in_one_line_naming_the_key(tmp_path, capsys, keys, key, words):
    path = tmp_path / "model.yml"
    path.write_text(yaml.safe_dump(keys))
    with pytest.raises(ConfigError, match=words) as exc:
        maxtext_document(keys, file=path)
    assert exc.value.key_path == key
    code, out, err = run_cli(capsys, "import-workload", str(path))
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and key in err and str(path) in err


def test_shipped_files_and_the_page_are_what_the_tool_writes(tmp_path):
    import runpy

    tool = runpy.run_path(str(Path(__file__).resolve().parents[2] / "tools" / "import_maxtext_models.py"))
    tool["main"](["--out", str(tmp_path), "--page", str(tmp_path / "page.md")])
    written = sorted(p.stem for p in tmp_path.glob("*.yaml"))
    assert written == sorted(SHIPPED)
    for name in written:
        assert (tmp_path / f"{name}.yaml").read_text() == Path(load_workload(name).path).read_text(), name
    page = Path(__file__).resolve().parents[3] / "docs" / "maxtext-models.md"
    assert (tmp_path / "page.md").read_text() == page.read_text()


def test_the_import_page_names_every_key_read():
    from wus_sim.model.importers.maxtext_keys import BASE_DEFAULTS

    page = (Path(__file__).resolve().parents[3] / "docs" / "importing-models.md").read_text()
    section = page.split("## MaxText model files")[1].split("\n## ")[0]
    assert [k for k in BASE_DEFAULTS if f"`{k}`" not in section] == []


def test_a_maxtext_model_is_told_by_its_keys(tmp_path, capsys):
    (tmp_path / "m.json").write_text('{"base_emb_dim": 1024, "base_num_decoder_layers": 4}')   # no model_type
    (tmp_path / "empty.yml").write_text("")                                                    # the default model
    (tmp_path / "workload.yml").write_text("name: x\nparams: 3\n")                            # not MaxText's keys
    assert run_cli(capsys, "import-workload", str(tmp_path / "m.json"), "--out", str(tmp_path / "m.yaml"))[0] == 0
    k = {**BASE, "base_emb_dim": 1024, "base_num_decoder_layers": 4}
    assert load_workload(str(tmp_path / "m.yaml")).params == maxtext_params(k)
    assert run_cli(capsys, "import-workload", str(tmp_path / "empty.yml"), "--out", str(tmp_path / "d.yaml"))[0] == 0
    assert load_workload(str(tmp_path / "d.yaml")).params == load_workload("default").params == maxtext_params(BASE)
    code, out, err = run_cli(capsys, "import-workload", str(tmp_path / "workload.yml"))
    assert code == 2 and len(err.splitlines()) == 1 and "is not a MaxText model file" in err


BLOCK_KEYS = {  # the keys each block's models set beyond the sizes (as the library's files set them)
    "llama2": {}, "mistral": {}, "gemma": {"logits_via_embedding": True},
    "qwen2": {"attention_bias": True}, "qwen3": {"use_qk_norm": True},
    "gemma2": {"use_post_attn_norm": True, "use_post_ffw_norm": True, "sliding_window_size": 64},
    "gemma3": {"use_post_attn_norm": True, "use_post_ffw_norm": True, "sliding_window_size": 64},
    "olmo3": {"use_qk_norm": True, "sliding_window_size": 64},
    "mixtral": {"num_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"use_qk_norm": True, "num_experts": 4, "num_experts_per_tok": 2},
    "gpt_oss": {"attention_bias": True, "attention_sink": True, "mlp_bias": True, "routed_bias": True,
                "num_experts": 4, "num_experts_per_tok": 2, "sliding_window_size": 64},
    "llama4": {"num_experts": 4, "shared_experts": 1, "interleave_moe_layer_step": 2, "nope_layer_interval": 4,
               "chunk_attn_window_size": 64},
    "envy": {"use_qk_norm": True, "use_post_ffw_norm": True, "num_experts": 4, "interleave_moe_layer_step": 2,
             "logits_via_embedding": True},
    "deepseek": {"attention_type": "mla", "num_experts": 4, "num_experts_per_tok": 2, "shared_experts": 1,
                 "first_num_dense_layers": 1, "routed_bias": True, "q_lora_rank": 24, "kv_lora_rank": 16,
                 "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8},
}


@pytest.mark.parametrize("block", sorted(BLOCK_KEYS))
@settings(max_examples=25, deadline=None)
@given(scale=st.sampled_from([1, 2, 4, 8]),
       emb=st.integers(1, 6), heads=st.integers(1, 4), group=st.sampled_from([1, 2]), mlp=st.integers(1, 40),
       layers=st.integers(1, 3), head_dim=st.sampled_from([4, 8]), vocab=st.integers(1, 300))
def test_any_sizes_and_scale_give_maxtexts_count(block, scale, emb, heads, group, mlp, layers, head_dim, vocab):
    keys = {"decoder_block": block, "global_parameter_scale": scale, "base_emb_dim": 8 * emb,
            "base_num_query_heads": heads * group, "base_num_kv_heads": heads, "base_mlp_dim": mlp,
            "base_moe_mlp_dim": mlp + 1, "base_num_decoder_layers": layers, "head_dim": head_dim,
            "vocab_size": vocab, "max_target_length": 128, **BLOCK_KEYS[block]}
    assert maxtext_document(keys)["params"] == maxtext_params({**BASE, **keys})
