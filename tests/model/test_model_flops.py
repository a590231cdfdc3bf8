"""MaxText's model FLOPs and MFU, checked against counts made by hand from each model's dimensions
(MaxText's calculate_tflops_training_per_device, AI-Hypercomputer/maxtext maxtext_utils.py, written
out here term by term)."""

import math

import pytest

from wus_sim.model.model_flops import model_flops, training_flops_per_example
from wus_sim.model.workload_files import load_workload


def maxtext_flops_per_token(emb, heads, kv_heads, head_dim, mlp, layers, vocab, seq, *, experts=1, top_k=1,
                            causal=True):
    """MaxText's training FLOPs per token (per device, / B S), written out from its formula."""
    ffn = 2 * mlp * emb * 2 + 2 * mlp * emb  # gated SiLU: two input projections and one output projection
    if experts > 1:
        ffn = 2 * emb * experts + ffn * top_k  # router, then top-k experts
    qkv = 2 * emb * (heads + 2 * kv_heads) * head_dim
    proj = 2 * emb * heads * head_dim
    attention = 4 * seq * heads * head_dim / (2 if causal else 1)
    unembed = 2 * emb * vocab
    return 3 * (ffn * layers + (qkv + proj) * layers + unembed) + 3 * attention * layers


@pytest.mark.parametrize("name,dims", [
    # (emb, heads, kv heads, head dim, mlp, layers, vocab, sequence): Meta's and Mistral's config.json files
    ("llama3-8b", dict(emb=4096, heads=32, kv_heads=8, head_dim=128, mlp=14336, layers=32, vocab=128256, seq=8192)),
    ("llama2-70b", dict(emb=8192, heads=64, kv_heads=8, head_dim=128, mlp=28672, layers=80, vocab=32000, seq=4096)),
    ("llama3.1-405b", dict(emb=16384, heads=128, kv_heads=8, head_dim=128, mlp=53248, layers=126, vocab=128256,
                           seq=8192)),
    ("mixtral-8x7b", dict(emb=4096, heads=32, kv_heads=8, head_dim=128, mlp=14336, layers=32, vocab=32000, seq=4096,
                          experts=8, top_k=2)),
])
def test_training_flops_are_maxtexts_count(name, dims):
    w = load_workload(name)
    per_token = training_flops_per_example(w) / w.units_per_example
    assert per_token == pytest.approx(maxtext_flops_per_token(**dims), rel=1e-9)
    # before MaxText PR #1988 attention was not halved: the tiering page's older MFUs
    unhalved = training_flops_per_example(w, causal=False) / w.units_per_example
    assert unhalved == pytest.approx(maxtext_flops_per_token(**dims, causal=False), rel=1e-9)


def test_the_page_mfu_of_llama3_8b_on_v6e_is_its_tokens_times_the_unhalved_count():
    """MaxText's tiering page: Llama 3.1 8B on v6e-256, 45.46 % MFU at 7,207 tokens/s/device, peak 918
    TFLOP/s (performance_metrics.md); the page's MFU uses the unhalved attention count."""
    w = load_workload("llama3-8b")
    per_token = training_flops_per_example(w, causal=False) / w.units_per_example
    assert 7207 * per_token / 918e12 == pytest.approx(0.4546, abs=0.0005)


def test_mfu_of_a_hand_counted_step():
    """A step of 256 sequences of 8,192 tokens on 256 devices of 918 TFLOP/s in 4.546 s: by hand,
    8,192 x 4 tokens a device, so 32,768 / 4.546 = 7,208 tokens/s; FLOPs as counted above."""
    w = load_workload("llama3-8b")
    per_token = maxtext_flops_per_token(emb=4096, heads=32, kv_heads=8, head_dim=128, mlp=14336, layers=32,
                                        vocab=128256, seq=8192)
    mf = model_flops(w, global_batch=1024, devices=256, step_time_s=4.546, device_peak_flops=918e12)
    assert mf.tokens_per_device == 4 * 8192
    assert mf.tokens_per_s_per_device == pytest.approx(32768 / 4.546)
    assert mf.tflops_per_s_per_device == pytest.approx(32768 * per_token / 4.546 / 1e12)
    assert mf.mfu == pytest.approx(32768 * per_token / 4.546 / 918e12)


def test_encoders_are_not_causal():
    """BERT attends both ways: its attention is counted in full."""
    w = load_workload("bert-large")
    assert training_flops_per_example(w) == pytest.approx(3 * w.fwd_flops_per_example)


def test_bad_arguments():
    w = load_workload("llama3-8b")
    for bad in (dict(devices=0), dict(step_time_s=0.0), dict(device_peak_flops=-1.0), dict(global_batch=0)):
        args = dict(global_batch=1, devices=1, step_time_s=1.0, device_peak_flops=1e12) | bad
        with pytest.raises(ValueError):
            model_flops(w, **args)
    assert math.isfinite(model_flops(w, 1, 1, 1.0, 1e12).mfu)
