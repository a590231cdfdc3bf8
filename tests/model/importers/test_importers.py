"""import-workload: Hugging Face configs and safetensors headers into workload files.

Every parameter count below is derived here by hand from the architecture's formula (and,
where a model card publishes one, compared with it), never read from the importer.
"""

import json
import struct
import time

import pytest

from wus_sim.cli import main
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.importers.importers import import_workload, workload_document
from wus_sim.model.workload_files import load_workload

# Llama-3-8B's public config.json (huggingface.co/meta-llama/Meta-Llama-3-8B, config.json).
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5,
             "rope_theta": 500000.0}
# GPT-2 small (huggingface.co/openai-community/gpt2, config.json).
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
        "n_positions": 1024, "n_ctx": 1024, "attn_pdrop": 0.1, "resid_pdrop": 0.1}
# BERT-large uncased (huggingface.co/google-bert/bert-large-uncased, config.json) with its pre-training heads.
BERT_LARGE = {"architectures": ["BertForPreTraining"], "model_type": "bert", "hidden_size": 1024,
              "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096, "vocab_size": 30522,
              "max_position_embeddings": 512, "type_vocab_size": 2, "attention_probs_dropout_prob": 0.1,
              "hidden_dropout_prob": 0.1}


def write(tmp_path, doc, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def imported(tmp_path, doc, **kw):
    out = tmp_path / "imported.yaml"
    import_workload(write(tmp_path, doc), out=out, **kw)
    return load_workload(str(out))


def test_llama3_8b_has_its_8_030_261_248_parameters_in_under_a_second(tmp_path):
    h, ff, L, V, kv = 4096, 14336, 32, 128256, 8 * 128
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * ff + 2 * h   # q, o; k, v; gate, up, down; two RMSNorms
    expected = 2 * V * h + L * per_layer + h                     # untied embedding and head, final norm
    assert expected == 8_030_261_248
    t0 = time.perf_counter()
    w = imported(tmp_path, LLAMA3_8B)
    assert time.perf_counter() - t0 < 1.0
    assert w.params == expected and len(w.tensors) == 291 and w.num_layers == 2 * L + 2
    # forward FLOPs per token: 2 per weight of every matmul (all but the embedding lookup and the
    # norms) plus attention's 4 s d per layer at the default s = min(8192, 4096): 6N + 12 L d s as PaLM counts
    s = 4096
    matmul_weights = expected - V * h - (2 * L + 1) * h
    assert w.fwd_flops_per_unit == 2 * matmul_weights + 4 * L * s * h
    assert w.units_per_example == s and w.fwd_flops_per_example == w.fwd_flops_per_unit * s
    assert w.weight_bytes == 4 and w.activation_bytes == 2
    assert w.tensors[0].name == "model.embed_tokens.weight" and w.tensors[-1].name == "lm_head.weight"
    assert w.tensors[-1].layer == w.num_layers - 1


def test_sequence_length_sets_the_attention_flops(tmp_path):
    short = workload_document(write(tmp_path, LLAMA3_8B), sequence_length=2048)
    full = workload_document(write(tmp_path, LLAMA3_8B))
    assert full["fwd_flops"]["per_unit"] - short["fwd_flops"]["per_unit"] == 4 * 32 * 4096 * (4096 - 2048)
    assert short["fwd_flops"]["units_per_example"] == 2048 and full["fwd_flops"]["units_per_example"] == 4096
    # the default is stated: min(the config's 8,192, 4,096)
    assert "max_position_embeddings 8,192" in full["sources"]["sequence"] and "sequence" not in short["sources"]


def test_gpt2_small_has_124_439_808_parameters_with_a_tied_head(tmp_path):
    d, L, V, P = 768, 12, 50257, 1024
    per_layer = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    expected = V * d + P * d + L * per_layer + 2 * d
    assert expected == 124_439_808
    w = imported(tmp_path, GPT2)
    assert w.params == expected
    assert not any(t.name == "lm_head.weight" for t in w.tensors)  # tied: the embedding at layer 0
    assert w.tensors[0].name == "transformer.wte.weight" and w.tensors[0].layer == 0
    # the tied head still multiplies: 2 V d per token, and attention at n_positions = 1024
    matmuls = L * (4 * d * d + 8 * d * d) + V * d
    assert w.fwd_flops_per_unit == 2 * matmuls + 4 * L * 1024 * d
    # dropout in the config: Korthikanti et al.'s 34 h + 5 a s bytes per token per layer exactly
    layers = w.activation_terms[0]
    assert layers.nbytes == L * 1024 * (34 * d + 5 * 12 * 1024)


def test_bert_large_matches_the_shipped_profile(tmp_path):
    w = imported(tmp_path, BERT_LARGE)
    shipped = load_workload("bert-large")
    assert w.params == shipped.params == 336_226_108
    assert len(w.tensors) == len(shipped.tensors) and w.num_layers == shipped.num_layers
    assert sorted(t.size for t in w.tensors) == sorted(t.size for t in shipped.tensors)
    # the encoder's matmuls are the shipped profile's whole count; the importer adds attention and the heads
    encoder = sum(f for n, f in zip(w.layer_names, w.layer_fwd_flops) if ".encoder." in n and "attention" not in n)
    assert encoder == sum(f for n, f in zip(shipped.layer_names, shipped.layer_fwd_flops)
                          if n.startswith("encoder") and not n.endswith("attention"))
    # the same activation estimate: 34 h + 5 a s per token and layer, 76 masked positions x 6 B
    assert w.activation_bytes_per_example == shipped.activation_bytes_per_example
    assert w.default_optimizer == "lamb"


# published totals of four more families (model cards); each derived by the formula too
@pytest.mark.parametrize("config, expected", [
    # Mistral-7B-v0.1 (huggingface.co/mistralai/Mistral-7B-v0.1): 7,241,732,096
    ({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
      "max_position_embeddings": 32768, "sliding_window": 4096, "tie_word_embeddings": False},
     2 * 32000 * 4096 + 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 4096),
    # Qwen2-0.5B (huggingface.co/Qwen/Qwen2-0.5B): 494,032,768; biases on q, k, v; tied
    ({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
      "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
      "max_position_embeddings": 32768, "tie_word_embeddings": True},
     151936 * 896 + 24 * (2 * 896 * 896 + 896 + 2 * (896 * 128 + 128) + 3 * 896 * 4864 + 2 * 896) + 896),
    # Gemma-2B (huggingface.co/google/gemma-2b): 2,506,172,416; head_dim 256, one KV head, tied
    ({"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 18,
      "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 256000,
      "max_position_embeddings": 8192},
     256000 * 2048 + 18 * (2 * 2048 * 2048 + 2 * 2048 * 256 + 3 * 2048 * 16384 + 2 * 2048) + 2048),
    # Pythia-160m (huggingface.co/EleutherAI/pythia-160m, gpt_neox): 162,322,944; untied
    ({"model_type": "gpt_neox", "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
      "num_attention_heads": 12, "vocab_size": 50304, "max_position_embeddings": 2048},
     2 * 50304 * 768 + 12 * (4 * 768 + 3 * 768 * 768 + 3 * 768 + 768 * 768 + 768 + 2 * 768 * 3072 + 3072 + 768)
     + 2 * 768),
], ids=["mistral-7b", "qwen2-0.5b", "gemma-2b", "pythia-160m"])
def test_other_families_match_their_formulas(tmp_path, config, expected):
    published = {"mistral": 7_241_732_096, "qwen2": 494_032_768, "gemma": 2_506_172_416, "gpt_neox": 162_322_944}
    assert expected == published[config["model_type"]]
    assert imported(tmp_path, config).params == expected


def test_mistral_attention_stops_at_its_sliding_window(tmp_path):
    doc = workload_document(write(tmp_path, {"model_type": "mistral", "hidden_size": 64, "intermediate_size": 128,
                                             "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 100,
                                             "max_position_embeddings": 1024, "sliding_window": 256}))
    attn = dict(doc["layers"])["model.layers.0.self_attn"]
    assert attn == 2 * 64 * (4 * 64) + 4 * 256 * 64


def test_written_file_round_trips_and_describes(tmp_path, capsys):
    out = tmp_path / "llama.yaml"
    assert main(["import-workload", str(write(tmp_path, LLAMA3_8B)), "--name", "llama3-8b", "--out", str(out)]) == 0
    assert "8,030,261,248 parameters" in capsys.readouterr().err
    w = load_workload(str(out))
    doc = workload_document(tmp_path / "config.json", name="llama3-8b")
    assert [[t.name, list(t.shape), t.layer] for t in w.tensors] == doc["tensors"]
    assert [[n, f / w.units_per_example] for n, f in zip(w.layer_names, w.layer_fwd_flops)] == doc["layers"]
    assert "config" in w.sources and "config.json" in w.sources["config"]
    assert main(["describe", "workload", str(out), "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["params"] == 8_030_261_248 and described["workload"] == "llama3-8b"
    assert main(["import-workload", str(tmp_path / "config.json"), "--name", "llama3-8b"]) == 0
    assert capsys.readouterr().out == out.read_text()  # deterministic: stdout is the file


def test_step_runs_every_strategy_on_an_imported_model(tmp_path, capsys):
    out = tmp_path / "small.yaml"
    small = dict(LLAMA3_8B, hidden_size=512, intermediate_size=1024, num_hidden_layers=2, vocab_size=1000,
                 max_position_embeddings=256)
    import_workload(write(tmp_path, small), out=out)
    assert main(["step", str(out), "--topology", "tpu-v3-8", "--strategy", "all", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {s: r["status"] for s, r in result["strategies"].items()} == {
        "replicated": "ok", "sharded": "ok", "fully-sharded": "ok"}


# ------------------------------------------------------------------ safetensors headers
def safetensors(path, tensors, dtype="BF16"):
    """A safetensors file whose header lists *tensors* {name: shape}; the data is not written
    (the importer must not read past the header)."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors.items():
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    return path


TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 128,
        "tie_word_embeddings": False}


def tiny_tensors():
    from wus_sim.model.importers.hf_families import HFConfig as _Config
    from wus_sim.model.importers.hf_decoder import decoder as _decoder
    model, _, _ = _decoder(_Config(TINY, "x"), "llama", 128)
    return {n: s for n, s, _ in model.tensors}


def test_sharded_checkpoint_gives_the_stored_names_and_shapes(tmp_path):
    write(tmp_path, TINY)
    tensors = tiny_tensors()
    names = list(tensors)
    first = dict((n, tensors[n]) for n in names[:7])
    second = dict((n, tensors[n]) for n in names[7:])
    second["model.layers.0.self_attn.rotary_emb.inv_freq"] = [8]  # a buffer, not trained
    safetensors(tmp_path / "model-00001-of-00002.safetensors", first)
    safetensors(tmp_path / "model-00002-of-00002.safetensors", second)
    index = {"metadata": {}, "weight_map": {**{n: "model-00001-of-00002.safetensors" for n in first},
                                            **{n: "model-00002-of-00002.safetensors" for n in second}}}
    write(tmp_path, index, "model.safetensors.index.json")
    for path in (tmp_path, tmp_path / "model.safetensors.index.json"):
        doc = workload_document(path)
        assert [(n, s) for n, s, _ in doc["tensors"]] == list(tensors.items())
        assert "safetensors headers" in doc["sources"]["tensors"] and "1 buffers" in doc["sources"]["tensors"]


def test_gpt2_checkpoint_without_prefix_and_its_mask_buffers(tmp_path):
    small = dict(GPT2, n_embd=64, n_layer=1, n_head=4, vocab_size=100, n_positions=32)
    write(tmp_path, small)
    from wus_sim.model.importers.hf_families import _gpt2, HFConfig as _Config
    model, _, _ = _gpt2(_Config(small, "x"), "gpt2", 32)
    stored = {n.removeprefix("transformer."): s for n, s, _ in model.tensors}
    stored["h.0.attn.bias"] = [1, 1, 32, 32]
    safetensors(tmp_path / "model.safetensors", stored, dtype="F32")
    doc = workload_document(tmp_path / "model.safetensors")
    assert doc["tensors"][0][0] == "wte.weight"
    assert doc["params"] == sum(s[0] * (s[1] if len(s) > 1 else 1) for n, s in stored.items() if n != "h.0.attn.bias")


def test_a_shape_that_contradicts_the_config_is_one_line_naming_file_and_tensor(tmp_path, capsys):
    write(tmp_path, TINY)
    tensors = tiny_tensors()
    tensors["model.layers.1.self_attn.k_proj.weight"] = [64, 64]  # the config says 2 KV heads: [32, 64]
    path = safetensors(tmp_path / "model.safetensors", tensors)
    assert main(["import-workload", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "model.safetensors" in err and "model.layers.1.self_attn.k_proj.weight" in err and "[32, 64]" in err


@pytest.mark.parametrize("change, words", [
    ({"model_type": "t5"}, ["model_type", "'t5'", "llama"]),
    ({"hidden_size": None}, ["hidden_size", "is missing"]),
    ({"num_key_value_heads": 3}, ["num_key_value_heads", "divide"]),
    ({"tie_word_embeddings": "yes"}, ["tie_word_embeddings", "true or false"]),
])
def test_bad_configs_are_one_line_naming_file_and_key(tmp_path, capsys, change, words):
    doc = {k: v for k, v in {**LLAMA3_8B, **change}.items() if v is not None}
    path = write(tmp_path, doc)
    assert main(["import-workload", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err
    for word in words:
        assert word in err


def test_bad_files_and_options_are_one_line(tmp_path, capsys):
    (tmp_path / "model.safetensors").write_bytes(b"\x05")
    write(tmp_path, TINY)
    for argv, word in ((["import-workload", str(tmp_path / "model.safetensors")], "8-byte"),
                       (["import-workload", str(tmp_path / "config.json"), "--sequence-length", "0"],
                        "--sequence-length"),
                       (["import-workload", str(tmp_path / "nothing.json")], "file not found")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and word in err
    with pytest.raises(ConfigError, match="checkpoint|config.json"):
        safetensors(tmp_path / "alone" / "model.safetensors", {}) if (tmp_path / "alone").mkdir() is None else 0
        workload_document(tmp_path / "alone" / "model.safetensors")


def test_every_required_key_the_reference_lists_is_required(tmp_path):
    from wus_sim.model.importers.hf_families import CONFIG_KEYS
    for key in (k for k, default in CONFIG_KEYS["llama"] if default is None):
        doc = {k: v for k, v in LLAMA3_8B.items() if k != key}
        with pytest.raises(ConfigError, match=f"{key}: is missing"):
            workload_document(write(tmp_path, doc))


def test_shipped_llms_are_what_the_importer_writes_from_their_public_configs(tmp_path):
    import runpy
    from pathlib import Path

    tool = runpy.run_path(str(Path(__file__).resolve().parents[2] / "tools" / "import_shipped_llms.py"))
    tool["main"](["--out", str(tmp_path)])
    for name in ("llama3-8b", "llama3-70b", "gpt3-175b"):
        shipped = Path(load_workload(name).path)
        assert (tmp_path / f"{name}.yaml").read_text() == shipped.read_text(), name
    assert load_workload("llama3-8b").params == 8_030_261_248
    h, ff, L, V, kv = 8192, 28672, 80, 128256, 8 * 128
    assert load_workload("llama3-70b").params == 2 * V * h + L * (2 * h * h + 2 * h * kv + 3 * h * ff + 2 * h) + h \
        == 70_553_706_496
    assert "huggingface.co/meta-llama/Meta-Llama-3-70B" in load_workload("llama3-70b").sources["config"]
