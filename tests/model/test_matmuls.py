"""The matmuls of a layer and the shape compute model, checked against counts made by hand.

Every expected figure is written out here from the architecture (the model's config, the MXU side,
the chip's rates), never taken from the functions under test.
"""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.hardware.topology import Topology
from wus_sim.hardware.topology_files import load_chips, load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.compute import ComputeParams, layer_matmul_times, layer_times
from wus_sim.model.ops.matmuls import layer_matmuls, padded_flops
from wus_sim.model.workload_files import load_workload
from make_workload import make, toy_yaml

SHAPE = ComputeParams(compute_model="shape", matmul_peak_fraction=0.5, activation_hbm_efficiency=0.5,
                      op_fixed_s=1e-6, elementwise_fwd_bytes=0.0, elementwise_bwd_bytes=0.0)


def chip_slice(*, peak=100e12, hbm=1e12, tile=128, int8=None):
    """A one-chip slice of the generic chip with round rates: one core, *peak* FLOP/s, *hbm* B/s."""
    chip = dataclasses.replace(load_chips()["generic"], cores_per_chip=1, peak_flops=peak, hbm_Bps=hbm,
                               mxu_dim=tile, peak_int8_ops=int8)
    return Topology("t", chip, dims=(1,), wrap=(False,), axis_link_Bps=(1e11,), hop_latency_s=1e-6,
                    cores_per_chip=1, onchip_Bps=2e11)


# ---------------------------------------------------------------- shapes
def test_a_llama_3_8b_layer_by_hand():
    # Meta-Llama-3-8B: d 4096, 32 query heads of 128, 8 KV heads, MLP 14336, 8192 tokens a sequence
    w = load_workload("llama3-8b")
    attn, mlp = w.layer_names.index("model.layers.0.self_attn"), w.layer_names.index("model.layers.0.mlp")
    mms = [m for m in layer_matmuls(w) if m.layer in (attn, mlp)]
    got = sorted((m.name.rsplit(".", 2)[-2] if m.kind == "weight" else m.name, m.rows, m.k, m.n, m.count)
                 for m in mms)
    assert got == sorted([
        ("q_proj", 8192, 4096, 4096, 1), ("k_proj", 8192, 4096, 1024, 1), ("v_proj", 8192, 4096, 1024, 1),
        ("o_proj", 8192, 4096, 4096, 1),
        ("score", 8192, 128, 8192, 32), ("context", 8192, 8192, 128, 32),
        ("gate_proj", 8192, 4096, 14336, 1), ("up_proj", 8192, 4096, 14336, 1),
        ("down_proj", 8192, 14336, 4096, 1)])
    # causal: half of each attention matmul, 2 x 8192 x 8192 x 128 x 32 / 2
    score = next(m for m in mms if m.name == "score")
    assert score.flops() == 2 * 8192 * 8192 * 128 * 32 / 2
    # the weight matmuls of the attention layer: 2 x 8192 x 4096 x (4096 + 1024 + 1024 + 4096)
    weights = sum(m.flops() for m in mms if m.layer == attn and m.kind == "weight")
    assert weights == 2 * 8192 * 4096 * (4096 + 1024 + 1024 + 4096)
    # every dimension is a multiple of 128: no padding on a 128 MXU
    assert all(m.padded_flops(128) == m.flops() for m in mms)
    # on v6e's 256 MXU head_dim 128 pads to 256: the score matmul's contraction and the context's
    # output double; the weight matmuls (4096, 1024, 14336 = 56 x 256) do not pad
    for m in mms:
        assert m.padded_flops(256) == m.flops() * (2 if m.kind == "attention" else 1), m.name


def test_resnet50_first_bottleneck_convs_on_a_128_mxu():
    w = load_workload("resnet50")
    by_name = {m.name: m for m in layer_matmuls(w)}
    # group1/block1/proj: a 1x1 conv 64 -> 256 over the 56 x 56 map
    proj = by_name["group1/block1/proj/kernel"]
    assert (proj.rows, proj.k, proj.n, proj.taps) == (56 * 56, 64, 256, 1)
    assert proj.flops() == 2 * 3136 * 64 * 256 == 102_760_448
    # cin = 64 fills half of the MXU's 128 rows: twice the FLOPs on the array
    assert proj.padded_flops(128) == 2 * 3136 * 128 * 256 == 2 * proj.flops()
    # the 3x3 conv 64 -> 64: the window folds into the contraction, 9 x 64 = 576 rows -> 640 (5 tiles);
    # its output features pad to 8 only (below)
    c3 = by_name["group1/block1/conv3x3/kernel"]
    assert (c3.rows, c3.k, c3.n, c3.taps) == (3136, 64, 64, 9)
    assert c3.flops() == 2 * 3136 * 576 * 64
    assert c3.padded_flops(128) == 2 * 3136 * 640 * 64
    # the 7x7 stem, cin 3 padded to 8 per tap: 49 x 8 = 392 rows -> 512; 112 x 112 outputs
    stem = by_name["conv0/kernel"]
    assert (stem.rows, stem.k, stem.n, stem.taps) == (112 * 112, 3, 64, 49)
    assert stem.padded_flops(128) == 2 * 12544 * 512 * 64
    # XLA pads a conv's output features to 8 in forward (Cloud TPU docs, at batches from 64, taken at
    # every batch): cout 64 does not pad, the contraction still does
    assert c3.padded_flops(128, examples=128) == 2 * 3136 * 128 * 640 * 64
    assert c3.padded_flops(128, examples=3) == 2 * 3136 * 3 * 640 * 64
    # a dense layer is not a convolution: its output pads to the tile at any batch
    fc = by_name["fc/kernel"] if "fc/kernel" in by_name else next(m for m in by_name.values() if not m.conv)
    assert not fc.conv and fc.padded_flops(128, examples=128) == padded_flops(fc.rows * 128, fc.k, fc.n, 128)
    # the embedding of a language model is looked up, not multiplied: no matmul
    assert not any(m.name == "model.embed_tokens.weight" for m in layer_matmuls(load_workload("llama3-8b")))


def test_conv_output_features_pad_to_8_forward_and_to_the_tile_in_the_weight_gradient(tmp_path):
    # one 1x1 conv 128 -> 64 on a 1x1 map (one position an image)
    w = make(tmp_path, "c", "one conv", params=128 * 64, layers=[("conv", 2 * 128 * 64)],
             tensors=[("conv/kernel", [1, 1, 128, 64], 0)])
    p = dataclasses.replace(SHAPE, op_fixed_s=0.0)
    topo = chip_slice(hbm=1e18)
    for batch in (64, 32):
        t = layer_matmul_times(w, topo, batch, p)
        # forward: [batch, 128] x [128, 64], cout 64 padded to 8 only: no padding
        assert t.forward_s[0] == pytest.approx(2 * batch * 128 * 64 / 50e12, rel=1e-12)
        # activation gradient: [batch, 64] x [64, 128], contraction 64 -> 128, output 128;
        # weight gradient: [128, batch] x [batch, 64], contraction batch -> 128, output 64 -> 128
        dx = 2 * batch * 128 * 128
        dw = 2 * 128 * 128 * 128
        assert t.backward_s[0] == pytest.approx((dx + dw) / 50e12, rel=1e-12), batch


def test_v6e_pads_a_128_wide_dimension_to_256():
    assert padded_flops(1024, 128, 4096, 256) == 2 * 1024 * 256 * 4096  # K 128 -> 256
    assert padded_flops(1024, 128, 4096, 128) == 2 * 1024 * 128 * 4096
    assert padded_flops(1024, 4096, 100, 256) == 2 * 1024 * 4096 * 256  # N 100 -> 256
    assert padded_flops(5, 128, 128, 128) == 2 * 8 * 128 * 128  # M pads to the 8 sublanes


@settings(max_examples=200, deadline=None)
@given(m=st.integers(1, 5000), k=st.integers(1, 5000), n=st.integers(1, 5000), tile=st.sampled_from([128, 256]))
def test_padded_flops_never_below_the_flops_and_equal_on_whole_tiles(m, k, n, tile):
    assert padded_flops(m, k, n, tile) >= 2 * m * k * n
    assert padded_flops(8 * m, tile * k, tile * n, tile) == 2 * (8 * m) * (tile * k) * (tile * n)
    # never more than one tile (and 8 rows) beyond each dimension
    assert padded_flops(m, k, n, tile) <= 2 * (m + 7) * (k + tile - 1) * (n + tile - 1)


# ---------------------------------------------------------------- roofline
def dense(tmp_path, din, dout, name="dense"):
    """One dense layer ``[din, dout]``, one position per example (FLOPs 2 x din x dout)."""
    return make(tmp_path, name, "one dense layer", params=din * dout, layers=[("fc", 2 * din * dout)],
                tensors=[("fc/kernel", [din, dout], 0)])


def test_compute_bound_dense_layer_by_hand(tmp_path):
    w, topo, batch = dense(tmp_path, 4096, 4096), chip_slice(), 4096
    t = layer_times(w, topo, batch, SHAPE)
    # forward: 2 x 4096^3 FLOPs at 100 TFLOP/s x 0.5; bytes (weight, input, output, bf16) 3 x 4096^2 x 2
    # at 1 TB/s x 0.5 = 0.2 ms, under the 2.75 ms of compute; + 1 us fixed
    compute = 2 * 4096 ** 3 / 50e12
    assert t.forward_s[0] == pytest.approx(compute + 1e-6, rel=1e-12)
    # backward: two matmuls of the same size, each with its fixed cost
    assert t.backward_s[0] == pytest.approx(2 * (compute + 1e-6), rel=1e-12)
    assert layer_matmul_times(w, topo, batch, SHAPE).forward_s[0] == pytest.approx(compute + 1e-6, rel=1e-12)


def test_memory_bound_dense_layer_by_hand(tmp_path):
    w, topo = dense(tmp_path, 4096, 4096), chip_slice()
    t = layer_times(w, topo, 8, SHAPE)
    # batch 8: 2 x 8 x 4096^2 FLOPs = 5.4 us of compute; bytes: weight 4096^2 x 2 + input and output
    # 2 x 8 x 4096 x 2 = 33.69 MB at 0.5 TB/s = 67.4 us
    nbytes = 4096 * 4096 * 2 + 2 * 8 * 4096 * 2
    assert t.forward_s[0] == pytest.approx(nbytes / 0.5e12 + 1e-6, rel=1e-12)
    # backward: the activation gradient reads the weight again (same bytes); the weight gradient reads
    # input and output gradient (bf16) and writes the fp32 weight gradient
    dw_bytes = 2 * 8 * 4096 * 2 + 4096 * 4096 * 4
    assert t.backward_s[0] == pytest.approx(nbytes / 0.5e12 + dw_bytes / 0.5e12 + 2e-6, rel=1e-12)


def test_an_output_block_rereads_the_operands_and_binds_on_hbm_by_hand(tmp_path):
    """A 4096^3 matmul computed in 512-wide output blocks: the input [M, K] is read once per block of
    output columns (4096 / 512 = 8 times), the weight [K, N] once per block of rows (8 times)."""
    w, topo, batch = dense(tmp_path, 4096, 4096), chip_slice(hbm=0.2e12), 4096
    p = dataclasses.replace(SHAPE, op_fixed_s=0.0, matmul_block=512)
    t = layer_matmul_times(w, topo, batch, p)
    elems = 4096 * 4096
    # forward: input and weight bf16, 8 reads each, output written once: (8 + 8 + 1) x 4096^2 x 2 B at
    # 0.2 TB/s x 0.5 = 5.7 ms, over the 2.75 ms the 2 x 4096^3 FLOPs take at 50 TFLOP/s: HBM-bound
    fwd_bytes = (8 + 8 + 1) * elems * 2
    assert fwd_bytes / 0.1e12 > 2 * 4096 ** 3 / 50e12
    assert t.forward_s[0] == pytest.approx(fwd_bytes / 0.1e12, rel=1e-12)
    # backward: dX = dY W^T rereads both 8 times, writes dX (bf16); dW = X^T dY rereads both 8 times,
    # writes the fp32 weight gradient
    bwd_bytes = (8 + 8 + 1) * elems * 2 + (8 + 8) * elems * 2 + elems * 4
    assert t.backward_s[0] == pytest.approx(bwd_bytes / 0.1e12, rel=1e-12)
    # a block wider than the matmul reads each operand once: 3 x 4096^2 x 2 B = 1 ms of HBM, under
    # the compute: compute-bound again
    wide = layer_matmul_times(w, topo, batch, dataclasses.replace(p, matmul_block=8192))
    assert wide.forward_s[0] == pytest.approx(2 * 4096 ** 3 / 50e12, rel=1e-12)


def test_v6e_tile_pads_a_128_input_dense_layer(tmp_path):
    w, batch = dense(tmp_path, 128, 8192), 8192
    p = dataclasses.replace(SHAPE, op_fixed_s=0.0)
    t128 = layer_matmul_times(w, chip_slice(tile=128, hbm=1e15), batch, p).forward_s[0]
    t256 = layer_matmul_times(w, chip_slice(tile=256, hbm=1e15), batch, p).forward_s[0]
    assert t128 == pytest.approx(2 * 8192 * 128 * 8192 / 50e12, rel=1e-12)
    assert t256 == pytest.approx(2 * 8192 * 256 * 8192 / 50e12, rel=1e-12)  # half of the 256 rows idle


def test_int8_gains_far_less_than_the_peak_ratio(tmp_path):
    w, batch = dense(tmp_path, 4096, 4096), 4096
    p = dataclasses.replace(SHAPE, op_fixed_s=0.0)
    topo = chip_slice(int8=200e12)  # int8 twice the bf16 peak
    bf16 = layer_times(w, topo, batch, p)
    int8 = layer_times(w, topo, batch, p, quantization="int8")
    compute = 2 * 4096 ** 3 / 50e12
    # forward: the matmul at twice the rate (its int8 bytes 3 x 4096^2 x 1 B stay under it), then the
    # weight and the input quantized, each element read twice (bf16) and written once (int8): 5 B each
    quant = 2 * 4096 * 4096 * 5 / 0.5e12
    assert int8.forward_s[0] == pytest.approx(compute / 2 + quant, rel=1e-12)
    # backward: two int8 matmuls, four operands quantized (weight and dY; X and dY)
    assert int8.backward_s[0] == pytest.approx(2 * compute / 2 + 2 * quant, rel=1e-12)
    gain = (bf16.forward_total_s + bf16.backward_total_s) / (int8.forward_total_s + int8.backward_total_s)
    assert 1.0 < gain < 2.0


def test_causal_fused_attention_by_hand(tmp_path):
    # one fused causal attention layer without weights: 8 heads of 128, 2048 tokens
    heads, d, s = 8, 128, 2048
    per_token = 2 * 1024 * 1024 + 4 * s * heads * d  # the projection, then score + context per token
    src = toy_yaml("a", "fused causal attention", params=1024 * 1024, layers=[("fc", per_token)],
                   tensors=[("fc/kernel", [1024, 1024], 0)]).replace("units_per_example: 1",
                                                                      f"units_per_example: {s}")
    src += (f'attention:\n  - {{layer: "fc", heads: {heads}, head_dim: {d}, query_tokens: {s}, key_tokens: {s}, '
            'causal: true, fused: true}\n')
    path = tmp_path / "a.yaml"
    path.write_text(src)
    w = load_workload(str(path))
    p = dataclasses.replace(SHAPE, op_fixed_s=0.0)
    topo = chip_slice(hbm=1e18)  # attention alone, compute-bound
    t = layer_matmul_times(w, topo, 1, p).forward_s[0]
    weight = 2 * s * 1024 * 1024 / 50e12
    # score and context, each 2 x s x s x d per head, half of it under the causal mask
    attention = 2 * (2 * s * s * d * heads) / 2 / 50e12
    assert t == pytest.approx(weight + attention, rel=1e-12)
    # backward: 5 attention matmuls for the forward's 2 (FlashAttention-2), two weight matmuls
    tb = layer_matmul_times(w, topo, 1, p).backward_s[0]
    assert tb == pytest.approx(2 * weight + attention * 5 / 2, rel=1e-12)
    # fused: no score matrix takes elementwise work under shape; the flops model still charges it
    q = dataclasses.replace(p, elementwise_fwd_bytes=6.0)
    extra_shape = layer_times(w, topo, 1, q).forward_s[0] - layer_times(w, topo, 1, p).forward_s[0]
    outputs = s * 1024  # the dense layer's outputs per example
    assert extra_shape == pytest.approx(outputs * 6.0 / (1e18 * 0.5), rel=1e-9)


def test_compute_model_is_selectable_and_checked():
    assert ComputeParams().compute_model == "flops"
    with pytest.raises(ConfigError, match="compute_model"):
        ComputeParams(compute_model="roofline")
    with pytest.raises(ConfigError, match="matmul_peak_fraction"):
        ComputeParams(matmul_peak_fraction=1.5)
    with pytest.raises(ConfigError, match="op_fixed_s"):
        ComputeParams(op_fixed_s=-1.0)


def test_flops_model_matmul_times_are_the_roofline_of_its_layer_times():
    # under flops, layer times = matrix part + elementwise + per-op overhead: with those at 0 they agree
    w, topo = load_workload("resnet50"), load_topology("tpu-v3-32")
    p = ComputeParams(elementwise_fwd_bytes=0.0, elementwise_bwd_bytes=0.0)
    assert np.array_equal(layer_matmul_times(w, topo, 32, p).forward_s, layer_times(w, topo, 32, p).forward_s)
    assert np.array_equal(layer_matmul_times(w, topo, 32, p).backward_s, layer_times(w, topo, 32, p).backward_s)
    # and match 2 x FLOPs / (peak x efficiency) in the compute-bound total (ResNet-50 at 32 a core)
    flops = w.fwd_flops_per_example * 32
    assert layer_matmul_times(w, topo, 32, p).forward_s.sum() >= flops / (topo.peak_flops_per_replica * 0.5) - 1e-12
    assert math.isfinite(layer_times(w, topo, 32, ComputeParams(compute_model="shape")).forward_total_s)
