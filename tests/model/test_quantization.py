"""int8 matmuls (point key ``quantization``): the weight matmuls at the chip's int8 peak, the
attention score and context matmuls at its bf16 peak; every time derived by hand."""

import json
import subprocess
import sys

import pytest

from wus_sim.hardware.topology_files import load_chips, load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.compute import ComputeParams, backward_time_s, forward_time_s, layer_times
from wus_sim.model.workload_files import load_workload

from make_workload import toy_yaml

V5P = load_topology("tpu-v5p-8")
MATRIX_ONLY = ComputeParams(mxu_efficiency=0.01, elementwise_fwd_bytes=0.0, elementwise_bwd_bytes=0.0)
"""Compute-bound: 1 % of the peak, so weight and output reads never bind; no elementwise work."""

D, SEQ, HEADS = 64, 128, 4
WEIGHT_FLOPS = 2 * 4 * D * D      # q, k, v, o projections per token: 32768
ATTENTION_FLOPS = 4 * SEQ * D     # scores + weighted sum per token: 32768, the same by choice


def _toy(tmp_path, attention=True):
    text = toy_yaml("toy-int8", "one attention layer", params=4 * D * D,
                    layers=[("attn", WEIGHT_FLOPS + ATTENTION_FLOPS)],
                    tensors=[(f"attn/{p}", [D, D], 0) for p in "qkvo"], unit="token")
    text = text.replace("units_per_example: 1", f"units_per_example: {SEQ}")
    if attention:
        text += (f"attention:\n  - {{layer: \"attn\", heads: {HEADS}, head_dim: {D // HEADS}, "
                 f"query_tokens: {SEQ}, key_tokens: {SEQ}}}\n")
    path = tmp_path / "toy-int8.yaml"
    path.write_text(text)
    return load_workload(str(path))


def test_chips_yaml_int8_peaks_are_the_cloud_tpu_docs_figures():
    # Cloud TPU docs (cloud.google.com/tpu/docs/v5e, v5p, v6e): peak compute per chip (int8)
    chips = load_chips()
    assert chips["tpu-v5e"].peak_int8_ops == 394e12
    assert chips["tpu-v5p"].peak_int8_ops == 918e12
    assert chips["tpu-v6e"].peak_int8_ops == 1836e12
    assert chips["tpu-v3"].peak_int8_ops is None and chips["generic"].peak_int8_ops is None


def test_int8_forward_time_by_hand(tmp_path):
    """v5p core: 459/2 TFLOP/s bf16, 918/2 TOP/s int8 (two TensorCores a chip). Weight matmuls at
    int8, scores at bf16; weight and score FLOPs equal here, so int8 / bf16 = (1/2 + 1) / 2 = 3/4."""
    w = _toy(tmp_path)
    batch = 3
    bf16_s = (WEIGHT_FLOPS + ATTENTION_FLOPS) * SEQ * batch / (459e12 / 2 * 0.01)
    int8_s = (WEIGHT_FLOPS * SEQ * batch / (918e12 / 2 * 0.01)
              + ATTENTION_FLOPS * SEQ * batch / (459e12 / 2 * 0.01))
    assert forward_time_s(w, V5P, batch, MATRIX_ONLY) == pytest.approx(bf16_s, rel=1e-12)
    assert forward_time_s(w, V5P, batch, MATRIX_ONLY, quantization="int8") == pytest.approx(int8_s, rel=1e-12)
    lt_bf16 = layer_times(w, V5P, batch, MATRIX_ONLY)
    lt_int8 = layer_times(w, V5P, batch, MATRIX_ONLY, quantization="int8")
    assert lt_int8.forward_total_s / lt_bf16.forward_total_s == pytest.approx(0.75, rel=1e-12)
    # backward: activation- and weight-gradient matmuls int8 too (AQT's dlhs and drhs), 2 x forward
    assert lt_int8.backward_total_s == pytest.approx(2 * int8_s, rel=1e-12)
    assert backward_time_s(w, V5P, batch, MATRIX_ONLY, quantization="int8") == pytest.approx(2 * int8_s, rel=1e-12)


def test_without_attention_every_matmul_is_int8(tmp_path):
    w = _toy(tmp_path, attention=False)
    ratio = (layer_times(w, V5P, 2, MATRIX_ONLY, quantization="int8").forward_total_s
             / layer_times(w, V5P, 2, MATRIX_ONLY).forward_total_s)
    assert ratio == pytest.approx(459 / 918, rel=1e-12)


def test_none_is_todays_result_bit_for_bit():
    w = load_workload("bert-large")
    a = layer_times(w, V5P, 4, ComputeParams())
    b = layer_times(w, V5P, 4, ComputeParams(), quantization="none")
    assert (a.forward_s == b.forward_s).all() and (a.backward_s == b.backward_s).all()


def test_elementwise_work_does_not_change(tmp_path):
    """Memory-bound elementwise time is the same under int8: the difference between int8 and
    bf16 is the matrix-time difference alone."""
    w = _toy(tmp_path)
    with_elem = ComputeParams(mxu_efficiency=0.01)
    diff_elem = (layer_times(w, V5P, 2, with_elem).forward_total_s
                 - layer_times(w, V5P, 2, with_elem, quantization="int8").forward_total_s)
    diff_matrix = (layer_times(w, V5P, 2, MATRIX_ONLY).forward_total_s
                   - layer_times(w, V5P, 2, MATRIX_ONLY, quantization="int8").forward_total_s)
    assert diff_elem == pytest.approx(diff_matrix, rel=1e-9)


def test_a_chip_without_an_int8_peak_is_a_one_line_error(tmp_path):
    w = _toy(tmp_path)
    with pytest.raises(ConfigError, match="chip tpu-v3 gives none") as err:
        layer_times(w, load_topology("tpu-v3-8"), 1, MATRIX_ONLY, quantization="int8")
    assert err.value.key_path == "quantization"
    with pytest.raises(ConfigError, match="must be one of none, int8"):
        forward_time_s(w, V5P, 1, MATRIX_ONLY, quantization="int4")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "wus_sim", *args], capture_output=True, text=True, timeout=300)


def test_step_cli_int8_says_which_work_and_which_efficiency():
    # 8 sequences a replica: at 2 the quantize passes cost more than the int8 matmuls save
    base = ["step", "bert-large", "-t", "tpu-v5p-8", "-s", "sharded", "--per-replica-batch", "8", "--json"]
    bf16, int8 = json.loads(_cli(*base).stdout), json.loads(_cli(*base, "--quantization", "int8").stdout)
    assert bf16["quantization_note"] is None and bf16["parameters"]["quantization"] == "none"
    note = int8["quantization_note"]
    assert "918 TOP/s" in note and "same MXU efficiency" in note
    assert int8["parameters"]["quantization"] == "int8" and int8["parameters"]["peak_int8_TOPs"] == 918
    fwd = lambda r: r["strategies"]["sharded"]["breakdown"]["fwd_s"]  # noqa: E731
    assert fwd(int8) < fwd(bf16)
    bad = _cli("step", "bert-large", "-t", "tpu-v3-8", "--quantization", "int8")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--quantization" in bad.stderr and "tpu-v3" in bad.stderr


def test_int8_lies_outside_the_validated_range():
    """The calibration was measured on bf16 runs: an int8 point on a measured chip and workload
    still lies outside, and says why."""
    from wus_sim.model.calibration import load_calibration
    from wus_sim.model.validated_range import point_validated_range
    from wus_sim.training.step import StepOptions, simulate_strategies

    cal = load_calibration(None)
    topo = load_topology("tpu-v5p-8")
    reasons = {}
    for q in ("none", "int8"):
        options = StepOptions(quantization=q, calibration=cal)
        _, meta = simulate_strategies("bert-large", topo, None, ("sharded",), per_replica_batch=2, options=options)
        reasons[q] = point_validated_range(cal, topo, meta, options)["outside"]
    assert reasons["int8"] == reasons["none"] + ["quantization int8: checked on bf16 matmuls only"]


def test_describe_topology_shows_the_int8_peak_and_its_source():
    d = V5P.to_dict()
    assert d["chip"]["peak_int8_TOPs"] == 918 and "Cloud TPU v5p docs" in d["sources"]["peak_int8_TOPs"]
    v3 = load_topology("tpu-v3-8").to_dict()
    assert v3["chip"]["peak_int8_TOPs"] is None and "peak_int8_TOPs" not in v3["sources"]


def test_the_point_keys_choices_are_the_models():
    from wus_sim.model.ops.precision import QUANTIZATIONS
    from wus_sim.model.workload import REMAT_MODES
    from wus_sim.training.parameters.params import POINT_KEYS

    assert POINT_KEYS["quantization"].choices == QUANTIZATIONS
    assert POINT_KEYS["remat"].choices == REMAT_MODES
