"""Bands off the validated range (issue 33): on a chip the calibration never measured, or a stack
it has no fitted costs for, the band moves every value fitted elsewhere over its declared range.
Expected ends are re-simulated at the range's corners (StepOptions(compute=...)), not taken from
the band code."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from wus_sim.cli import main
from wus_sim.model.calibration import load_calibration
from wus_sim.training.step import StepOptions, simulate_strategies

CHIPS = yaml.safe_load((Path(__file__).resolve().parents[2] / "topologies" / "chips.yaml").read_text())


def _step(capsys, topology, *extra):
    # --no-megacore: one replica per TensorCore, as the API's simulate_strategies runs a slice by name
    assert main(["step", "resnet50", "-t", topology, "--strategy", "replicated", "--per-replica-batch", "16",
                 "--no-megacore", *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _resimulated(topology, compute):
    return simulate_strategies("resnet50", topology, None, ("replicated",), per_replica_batch=16,
                               options=StepOptions(compute=compute)).results["replicated"].step_time_s


@pytest.fixture
def user_chip(tmp_path, monkeypatch):
    mine = dict(CHIPS["tpu-v4"], peak_bf16_TFLOPs=500, description="a chip of my own")
    (tmp_path / "chips.yaml").write_text(yaml.safe_dump({"my-chip": mine}))
    (tmp_path / "my-chip-64.yaml").write_text("chip: my-chip\nchips_per_axis: [4, 4, 4]\nwraparound: true\n")
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(tmp_path))
    return "my-chip-64"


@pytest.mark.parametrize("topology", ["tpu-v5e-256", "tpu-v4-128", "user"])
def test_unmeasured_chip_gets_an_extrapolated_band_covering_the_declared_ranges(capsys, topology, request):
    if topology == "user":
        topology = request.getfixturevalue("user_chip")
    rep = _step(capsys, topology)
    chip = rep["band"]["why"][0].split()[1]
    assert rep["band"]["kind"] == "extrapolated" and "never measured" in rep["band"]["why"][0]
    per = rep["strategies"]["replicated"]
    t, low, high = per["step_time_s"], per["step_time_s_low"], per["step_time_s_high"]
    cal = load_calibration()
    fitted = cal.compute_params()
    # the declared per-op range starts at 0: the low end is below the step less its fitted op costs
    assert low <= t - per["breakdown"]["op_launch_s"]
    largest_op = max(s["op_overhead_s"] for s in cal.stacks.values())
    # the matrix units' fraction of peak over its declared 0.3-1 (both models' names: the calibration's reads one)
    fast = replace(fitted, mxu_efficiency=1.0, matmul_peak_fraction=1.0, elementwise_fwd_bytes=3.0,
                   elementwise_bwd_bytes=3.0 * fitted.elementwise_bwd_bytes / fitted.elementwise_fwd_bytes,
                   op_overhead_s=0.0, step_overhead_s=0.0)
    slow = replace(fitted, mxu_efficiency=0.3, matmul_peak_fraction=0.3, elementwise_fwd_bytes=6.0,
                   elementwise_bwd_bytes=6.0 * fitted.elementwise_bwd_bytes / fitted.elementwise_fwd_bytes,
                   op_overhead_s=largest_op)
    assert low <= _resimulated(topology, fast) * (1 + 1e-9)
    assert high >= _resimulated(topology, slow) * (1 - 1e-9)
    text = main(["step", "resnet50", "-t", topology, "--strategy", "replicated", "--per-replica-batch", "16",
                 "--no-megacore"])
    out = capsys.readouterr().out
    assert text == 0 and "95% band (extrapolated)" in out and f"chip {chip} never measured" in out


def test_measured_chip_and_stack_keep_the_calibration_band(capsys):
    # the v0.6 stack: its fitted per-op cost (~30 us) is what a band over 0..largest would move
    rep = _step(capsys, "tpu-v3-32", "--software-stack", "tf1-tpuestimator-2019")
    assert rep["band"] == {"kind": "calibration", "why": []}
    per = rep["strategies"]["replicated"]
    # the calibration band is far narrower than moving the op cost over 0..largest
    assert per["step_time_s_low"] > per["step_time_s"] - per["breakdown"]["op_launch_s"]


def test_unfitted_stack_on_a_measured_chip_moves_the_fixed_costs_only(capsys):
    rep = _step(capsys, "tpu-v3-32", "--software-stack", "my-stack")
    assert rep["band"]["kind"] == "extrapolated" and "software stack my-stack" in rep["band"]["why"][0]
    per = rep["strategies"]["replicated"]
    cal = load_calibration()
    largest_op = max(s["op_overhead_s"] for s in cal.stacks.values())
    # the ops the step runs, counted where a stack's per-op cost is not 0 (the v0.6 stack's)
    v06 = _step(capsys, "tpu-v3-32", "--software-stack", "tf1-tpuestimator-2019")["strategies"]["replicated"]
    ops = v06["breakdown"]["op_launch_s"] / cal.stacks["tf1-tpuestimator-2019"]["op_overhead_s"]
    assert ops > 100  # ResNet-50's convs, norms and their backward
    assert per["step_time_s_low"] <= per["step_time_s"] - per["breakdown"]["op_launch_s"]
    assert per["step_time_s_high"] >= per["step_time_s"] + ops * (largest_op - cal.compute_params().op_overhead_s)
