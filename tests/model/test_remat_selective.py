"""Remat ``selective``: each layer keeps its input and its weight matmuls' outputs; backward reruns
its attention matmuls and elementwise work. Memory and recompute time derived by hand on a toy
transformer layer."""

import json
import subprocess
import sys

import pytest

from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.compute import ComputeParams, layer_times
from wus_sim.model.importers.importers import workload_document
from wus_sim.model.workload_files import load_workload

from make_workload import toy_yaml

V5P = load_topology("tpu-v5p-8")
D, SEQ, HEADS, LAYERS = 64, 128, 4, 2
WEIGHT_FLOPS = 2 * 4 * D * D      # q, k, v, o per token
ATTENTION_FLOPS = 4 * SEQ * D     # scores + weighted sum per token


def _toy(tmp_path, *, selective="18", layers=LAYERS, extra=""):
    """Two attention layers of 4 d x d weights, one per-layer activation term of 34 B per token
    per layer / h (Korthikanti's figure without scores) and *selective* B kept."""
    text = toy_yaml("toy-remat", "attention layers", params=LAYERS * 4 * D * D,
                    layers=[(f"attn{i}", WEIGHT_FLOPS + ATTENTION_FLOPS) for i in range(LAYERS)],
                    tensors=[(f"attn{i}/{p}", [D, D], i) for i in range(LAYERS) for p in "qkvo"], unit="token")
    text = text.replace("units_per_example: 1", f"units_per_example: {SEQ}")
    term = (f"  - what: \"layers\"\n    elements: {LAYERS * SEQ * D}\n    bytes_per_element: 34\n    why: \"test\"\n"
            + (f"    layers: {layers}\n" if layers else "")
            + (f"    selective_bytes_per_element: {selective}\n" if selective is not None else "") + extra)
    start = text.index("activation_memory:\n") + len("activation_memory:\n")
    end = text.index("dtypes:")
    text = text[:start] + term + text[end:]
    text += "attention:\n" + "".join(
        f"  - {{layer: \"attn{i}\", heads: {HEADS}, head_dim: {D // HEADS}, query_tokens: {SEQ}, key_tokens: {SEQ}}}\n"
        for i in range(LAYERS))
    path = tmp_path / "toy-remat.yaml"
    path.write_text(text)
    return load_workload(str(path))


def test_selective_memory_by_hand(tmp_path):
    w = _toy(tmp_path)
    per_layer = SEQ * D                     # one layer's elements per example
    kept = LAYERS * per_layer * 18          # every layer: input + matmul outputs, 18 B per element
    working = per_layer * (34 - 18)         # one layer's recomputed rest while its backward runs
    assert w.activation_bytes_kept("selective") == kept + working
    assert w.activation_bytes_kept("none") == LAYERS * per_layer * 34
    # layer remat: inputs (bf16) + one whole layer while it is recomputed
    assert w.activation_bytes_kept("layer") == LAYERS * per_layer * 2 + per_layer * 34
    assert w.activation_bytes_kept("layer") < w.activation_bytes_kept("selective") < w.activation_bytes_kept("none")


def test_selective_recomputes_attention_and_elementwise_not_weight_matmuls(tmp_path):
    """Backward under selective - backward without remat = the attention matmuls at the bf16 peak
    + the forward elementwise traffic on the layer's outputs (q, k, v, o: 4 d per token) and
    scores (heads x seq x seq); under layer remat the whole forward again."""
    w = _toy(tmp_path)
    p = ComputeParams(mxu_efficiency=0.01, elementwise_fwd_bytes=6.0, elementwise_bwd_bytes=10.0)
    batch = 3
    peak = 459e12 / 2 * 0.01                # one v5p TensorCore (Cloud TPU v5p docs) at 1 %
    hbm = 2765e9 / 2 * p.activation_hbm_efficiency
    per_layer = (ATTENTION_FLOPS * SEQ * batch / peak
                 + (4 * D * SEQ + HEADS * SEQ * SEQ) * batch * 6.0 / hbm)
    none = layer_times(w, V5P, batch, p)
    sel = layer_times(w, V5P, batch, p, remat="selective")
    assert (sel.forward_s == none.forward_s).all()
    assert sel.backward_s - none.backward_s == pytest.approx([per_layer] * LAYERS, rel=1e-12)
    layer = layer_times(w, V5P, batch, p, remat="layer")
    assert layer.backward_s - none.backward_s == pytest.approx(none.forward_s, rel=1e-12)
    # under int8 the recomputed attention matmuls stay bf16: the same extra time
    sel8 = layer_times(w, V5P, batch, p, remat="selective", quantization="int8")
    none8 = layer_times(w, V5P, batch, p, quantization="int8")
    assert sel8.backward_s - none8.backward_s == pytest.approx([per_layer] * LAYERS, rel=1e-12)


def test_importer_derives_what_selective_keeps():
    """Per token per layer, bf16: input 2h, Q K V 2(q + 2 kv), output projection 2h, the MLP's
    first matmuls 2 ff (GELU) or 2 x 2 ff (gated); not the MLP's last output."""
    gpt2 = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100, "n_positions": 32}
    llama = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 2,
             "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 1000,
             "max_position_embeddings": 64}

    def selective(cfg, tmp):
        tmp.write_text(json.dumps(cfg))
        return workload_document(tmp)["activation_memory"][0]["selective_bytes_per_element"]

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        h, ff = 64, 256
        assert selective(gpt2, Path(d) / "a.json") == (2 * h + 2 * 3 * h + 2 * h + 2 * ff) / h == 18
        h, ff, kv = 4096, 14336, 8 * 128
        assert selective(llama, Path(d) / "b.json") == (2 * h + 2 * (h + 2 * kv) + 2 * h + 4 * ff) / h == 21


def test_shipped_figures():
    assert load_workload("bert-large").activation_terms[0].selective_bytes_per_element == 20
    assert load_workload("llama3-8b").activation_terms[0].selective_bytes_per_element == 21
    assert load_workload("gpt3-175b").activation_terms[0].selective_bytes_per_element == 18


def test_a_workload_that_does_not_say_is_a_one_line_error():
    with pytest.raises(ConfigError, match="gives no selective_bytes_per_element"):
        load_workload("transformer-big").activation_bytes_kept("selective")
    r = subprocess.run([sys.executable, "-m", "wus_sim", "step", "transformer-big", "-t", "tpu-v3-8", "--remat", "selective"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--remat" in r.stderr


@pytest.mark.parametrize("kw, words", [
    (dict(selective="40"), "must be at most bytes_per_element"),
    (dict(layers=0), "needs `layers`"),
])
def test_bad_selective_keys_are_one_line(tmp_path, kw, words):
    with pytest.raises(ConfigError, match=words) as err:
        _toy(tmp_path, **kw)
    assert err.value.key_path == "activation_memory[0].selective_bytes_per_element"


def test_importer_keeps_the_mlp_output_of_a_post_norm_block(tmp_path):
    """BERT closes each layer with a norm over the residual sum the MLP's output enters: that
    output is kept too, 2 x (1 + 3 + 1 + 4 + 1) = 20 B per element, as the shipped bert-large says."""
    bert = {"model_type": "bert", "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
            "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 32}
    path = tmp_path / "bert.json"
    path.write_text(json.dumps(bert))
    assert workload_document(path)["activation_memory"][0]["selective_bytes_per_element"] == 20
