"""Attention score work and layer outputs: derived from the architecture, checked by hand.

Every expected figure is the textbook count written out here (Vaswani et al. 2017: scores
``Q K^T`` are heads x query x key per sequence; their and the context matmul cost 2 x 2 x
query x key x d_model FLOPs), never read from the code under test.
"""

import dataclasses
import json

import pytest

from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.compute import ComputeParams, layer_times
from wus_sim.model.importers.importers import import_workload
from wus_sim.model.workload_files import load_workload
from make_workload import toy_yaml


def test_bert_large_scores_and_their_flops_per_sequence():
    w = load_workload("bert-large")
    seq, heads, d, layers = 512, 16, 1024, 24
    assert len(w.attention) == layers
    assert w.layer_score_elements.sum() == layers * heads * seq * seq == 100_663_296
    assert w.layer_attention_flops.sum() == layers * 2 * 2 * seq * seq * d
    # the json's weight matmuls (2 x params of the encoder per token) plus the score and context matmuls
    encoder_weights = 24 * (4 * d * d + 2 * d * 4096)
    assert w.fwd_flops_per_example == seq * 2 * encoder_weights + layers * 4 * seq * seq * d
    # the attention layer still writes q, k, v and the output projection: 4 d per token, scores apart
    first = w.layer_names.index("encoder/layer_0/attention")
    assert w.layer_output_elements[first] == 4 * d * seq
    assert w.layer_score_elements[first] == heads * seq * seq


def test_transformer_big_attends_in_18_layers_and_its_ffn_writes_5_d_per_token():
    w = load_workload("transformer-big")
    seq, d = 256, 1024
    kinds = sorted(w.layer_names[a.layer].rsplit("/", 1)[1] for a in w.attention)
    assert kinds == ["encdec_attention"] * 6 + ["self_attention"] * 12
    assert all((a.heads, a.head_dim, a.query_tokens, a.key_tokens) == (16, 64, seq, seq) for a in w.attention)
    ffn = w.layer_names.index("encoder/layer_0/ffn")
    # [d, 4d] then [4d, d]: the hidden 4d and the output d, per token; not 2 x 4d
    assert w.layer_output_elements[ffn] == (4 * d + d) * seq


def _toy(tmp_path, *, attention="", layout=""):
    text = toy_yaml("toy-attn", "one attention layer", params=4 * 64 * 64,
                    layers=[("attn", 2 * 4 * 64 * 64 + 4 * 128 * 64)],
                    tensors=[(f"attn/{p}", [64, 64], 0) for p in "qkvo"], unit="token")
    text = text.replace("units_per_example: 1", "units_per_example: 128")
    path = tmp_path / "toy-attn.yaml"
    path.write_text(text + layout + attention)
    return path


ONE_LAYER = ("attention:\n  - {layer: \"attn\", heads: 4, head_dim: 16, query_tokens: 128, key_tokens: 128}\n")


def test_scores_take_the_elementwise_work_of_layer_outputs(tmp_path):
    """The layer's elementwise traffic is (its q, k, v, o outputs + heads x q x k scores) x batch x
    the bytes per element (matrix-bound settings, so the roofline's weight and output reads never
    bind): the difference between the declared bytes and none."""
    w = load_workload(str(_toy(tmp_path, attention=ONE_LAYER)))
    topo = load_topology("tpu-v3-8")
    p = ComputeParams(mxu_efficiency=0.001, elementwise_fwd_bytes=6.0, elementwise_bwd_bytes=10.0)
    none = dataclasses.replace(p, elementwise_fwd_bytes=0.0, elementwise_bwd_bytes=0.0)
    batch = 3
    a, b = layer_times(w, topo, batch, p), layer_times(w, topo, batch, none)
    hbm = topo.hbm_Bps_per_replica * p.activation_hbm_efficiency
    elements = (4 * 64 * 128 + 4 * 128 * 128) * batch     # q, k, v, o per token; 4 heads x 128 x 128
    assert a.forward_total_s - b.forward_total_s == pytest.approx(elements * 6.0 / hbm, rel=1e-12)
    assert a.backward_total_s - b.backward_total_s == pytest.approx(elements * 10.0 / hbm, rel=1e-12)
    assert w.layer_output_elements[0] == 4 * 64 * 128      # the score matmuls' FLOPs taken out


def test_without_the_entry_the_score_matmuls_count_as_weight_work(tmp_path):
    """The same layer without an attention entry: its 8.4 M FLOPs over 4 x 64 x 64 weights are
    read as 512 positions per example, 4 x 64 outputs each; the FLOPs, hence the matrix time, are
    the same either way (matrix-bound: efficiency 1 %)."""
    w = load_workload(str(_toy(tmp_path)))
    assert w.layer_output_elements[0] == (2 * 4 * 64 * 64 + 4 * 128 * 64) * 128 / (2 * 4 * 64 * 64) * 4 * 64
    (tmp_path / "scores").mkdir()
    s = load_workload(str(_toy(tmp_path / "scores", attention=ONE_LAYER)))
    p = ComputeParams(mxu_efficiency=0.01, elementwise_fwd_bytes=0.0, elementwise_bwd_bytes=0.0)
    topo = load_topology("tpu-v3-8")
    matrix = (2 * 4 * 64 * 64 + 4 * 128 * 64) * 128 * 2 / (topo.peak_flops_per_replica * 0.01)
    for workload in (w, s):
        assert layer_times(workload, topo, 2, p).forward_total_s == pytest.approx(matrix, rel=1e-12)


@pytest.mark.parametrize("entry, words", [
    ("{layer: \"nope\", heads: 4, head_dim: 16, query_tokens: 128, key_tokens: 128}", "attention[0].layer"),
    # 4 x 128 x 256 x 4 x 16 FLOPs per example is more than the layer holds
    ("{layer: \"attn\", heads: 4, head_dim: 16, query_tokens: 128, key_tokens: 4096}", "layers must count them"),
    ("{layer: \"attn\", heads: 0, head_dim: 16, query_tokens: 128, key_tokens: 128}", "attention[0].heads"),
    ("{layer: \"attn\", heads: 4, head_dim: 16, query_tokens: 128}", "key_tokens"),
    ("{layer: \"attn\", heads: 4, head_dim: 16, query_tokens: 128, key_tokens: 128, keys: 1}", "keys"),
])
def test_bad_attention_entries_are_one_line_naming_the_key(tmp_path, entry, words):
    with pytest.raises(ConfigError) as err:
        load_workload(str(_toy(tmp_path, attention=f"attention:\n  - {entry}\n")))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_dense_layout_out_in_reads_a_weight_s_first_dimension(tmp_path):
    """A [64, 32] weight: in_out writes 32 per position, out_in 64."""
    def load(layout, folder):
        folder.mkdir()
        path = folder / "w.yaml"
        path.write_text(toy_yaml("w", "one dense", params=64 * 32, layers=[("dense", 2 * 64 * 32)],
                                 tensors=[("dense/kernel", [64, 32], 0)]) + layout)
        return load_workload(str(path))

    assert load("", tmp_path / "a").layer_output_elements[0] == 32
    assert load("dense_layout: out_in\n", tmp_path / "b").layer_output_elements[0] == 64
    with pytest.raises(ConfigError, match="dense_layout"):
        load("dense_layout: sideways\n", tmp_path / "c")


def test_imported_llama_writes_what_its_linears_output(tmp_path):
    """Llama-3-8B-shaped, 2 layers: per token each block writes q 4096 + k 1024 + v 1024 + o 4096
    and gate 14336 + up 14336 + down 4096; the head writes the vocabulary; scores 32 heads x s x s."""
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 2,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
           "max_position_embeddings": 8192, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "llama.yaml"
    import_workload(tmp_path / "config.json", out=out, sequence_length=1024)
    w = load_workload(str(out))
    assert w.dense_layout == "out_in"
    per_token = 2 * (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096) + 128256
    assert w.layer_output_elements.sum() == pytest.approx(per_token * 1024, rel=1e-12)
    assert w.layer_score_elements.sum() == 2 * 32 * 1024 * 1024


def test_imported_gpt2_keeps_its_conv1d_layout(tmp_path):
    cfg = {"model_type": "gpt2", "n_embd": 768, "n_layer": 1, "n_head": 12, "vocab_size": 50257,
           "n_positions": 1024}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "gpt2.yaml"
    import_workload(tmp_path / "config.json", out=out, sequence_length=256)
    w = load_workload(str(out))
    assert w.dense_layout == "in_out"
    attn = w.layer_names.index("transformer.h.0.attn")
    assert w.layer_output_elements[attn] == (3 * 768 + 768) * 256     # c_attn [768, 2304], c_proj [768, 768]
    assert [(a.heads, a.head_dim, a.query_tokens, a.key_tokens) for a in w.attention] == [(12, 64, 256, 256)]


def test_workload_json_lists_the_attention_layers():
    d = load_workload("bert-large").to_dict()
    assert len(d["attention"]) == 24
    first = d["attention"][0]
    assert first["layer"] == "encoder/layer_0/attention"
    assert first["score_elements_per_example"] == 16 * 512 * 512
    assert load_workload("resnet50").to_dict()["attention"] == []


def test_causal_and_fused_attention_flags_default_off_and_the_importer_sets_them_for_decoders():
    # a file without the keys (every MLPerf workload: TF 2019-2020 attention wrote its scores to HBM,
    # and BERT and the Transformer's encoders see every token) keeps both off
    for name in ("bert-large", "transformer-big"):
        assert all(not a.causal and not a.fused for a in load_workload(name).attention), name
    # Llama 3 is a decoder (causal) trained without attention dropout: the importer marks both
    w = load_workload("llama3-70b")
    assert len(w.attention) == 80
    assert all(a.causal and a.fused for a in w.attention)
    assert w.to_dict()["attention"][0]["causal"] is True


def test_a_non_boolean_causal_flag_is_a_one_line_error(tmp_path):
    text = load_workload("bert-large").path
    src = open(text).read().replace("key_tokens: 512}", 'key_tokens: 512, causal: "yes"}', 1)
    path = tmp_path / "w.yaml"
    path.write_text(src)
    with pytest.raises(ConfigError, match="causal"):
        load_workload(str(path))
