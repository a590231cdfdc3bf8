"""Bands and validated ranges, by hand.

A band is first-order error propagation through the step's parts: for a fixed cost per step
the step time moves one for one, for a fixed cost per op by the ops the step runs, for the
host loop by 1 / steps_per_loop; the fitted values move together (their covariance), the
declared ones to the ends of their range. Every expected value below is derived here from
those rules, not from the code under test.
"""

import math

import pytest

from wus_sim.model.calibration import Calibration
from wus_sim.model.validated_range import outside_validated_range
from wus_sim.training.bands import Z_95, band, speedup_band, step_gradient
from wus_sim.model.validated_range import point_validated_range
from wus_sim.training.bands import point_bands
from wus_sim.training.step import StepOptions, simulate_strategies

import test_step_golden as golden

RANGE = {"chips": ["tpu-v3"], "software_stacks": ["s1"],
         "workloads": {"resnet50": {"examples_per_core": [16.0, 128.0], "cores": [32, 2048], "kinds": ["exact"]}}}


def calibration(cov_names, matrix, declared=None, stacks=None, params=None):
    prov = {"param_covariance": {"names": cov_names, "matrix": matrix}, "declared_ranges": declared or {},
            "validated_range": RANGE}
    return Calibration(id="t", params=params or {}, provenance=prov, stacks=stacks or {},
                       default_stack=next(iter(stacks)) if stacks else None)


def test_a_fixed_cost_per_step_moves_the_band_one_for_one():
    sd = 1e-3
    cal = calibration(["step_overhead_s@s1"], [[sd ** 2]], stacks={"s1": {"step_overhead_s": 5e-3}})
    low, high = band(0.1, {"step_overhead_s": 1.0}, cal, "s1")
    assert (low, high) == pytest.approx((0.1 - Z_95 * sd, 0.1 + Z_95 * sd))
    # another stack's value does not move this stack's step
    assert band(0.1, {"step_overhead_s": 1.0}, cal, "s2") == pytest.approx((0.1, 0.1))


def test_correlated_values_add_their_covariance():
    # T = a + 3 b; var = var(a) + 9 var(b) + 2 * 3 cov(a, b)
    va, vb, cab = 4e-6, 1e-6, -1e-6
    cal = calibration(["step_overhead_s", "op_overhead_s"], [[va, cab], [cab, vb]])
    var = va + 9 * vb + 6 * cab
    low, high = band(1.0, {"step_overhead_s": 1.0, "op_overhead_s": 3.0}, cal, None)
    assert high - 1.0 == pytest.approx(Z_95 * math.sqrt(var))
    assert 1.0 - low == pytest.approx(Z_95 * math.sqrt(var))


def test_a_declared_value_moves_the_band_to_its_range_ends():
    # host loop 1 ms declared in [0, 10 ms], 100 steps per loop: -10 us .. +90 us
    cal = calibration(["step_overhead_s"], [[0.0]], declared={"host_loop_s": [0.0, 10e-3]},
                      params={"host_loop_s": 1e-3})
    low, high = band(0.05, {"host_loop_s": 1 / 100, "step_overhead_s": 1.0}, cal, None)
    assert (low, high) == pytest.approx((0.05 - 1e-5, 0.05 + 9e-5))


def test_what_both_steps_share_cancels_in_the_speedup():
    # both steps pay the same fixed cost: d(r/s)/dc = (s - r) / s^2 per unit of c
    sd = 2e-3
    cal = calibration(["step_overhead_s"], [[sd ** 2]])
    r, s = 0.2, 0.1
    low, high = speedup_band(r, s, {"step_overhead_s": 1.0}, {"step_overhead_s": 1.0}, cal, None)
    half = Z_95 * sd * abs(s - r) / s ** 2
    assert (low, high) == pytest.approx((2 - half, 2 + half))
    # a value only the sharded step depends on moves the speedup by -r/s^2 per unit
    low, high = speedup_band(r, s, {}, {"step_overhead_s": 1.0}, cal, None)
    assert high - 2 == pytest.approx(Z_95 * sd * r / s ** 2)


def test_the_gradient_of_the_fixed_costs_is_counted_by_hand(tmp_path):
    toy = golden.make_toy(tmp_path)
    topo = __import__("wus_sim.hardware.topology_files", fromlist=["x"]).load_topology("torus:2x2")
    g = step_gradient(toy, topo, golden.B, golden.COMPUTE, ops=10, steps_per_loop=4,
                      names=("op_overhead_s", "step_overhead_s", "host_loop_s"))
    assert g == {"op_overhead_s": 10.0, "step_overhead_s": 1.0, "host_loop_s": 0.25}


def test_the_matrix_efficiency_gradient_is_minus_matrix_time_over_efficiency(tmp_path):
    # every toy layer compute-bound at a low efficiency: matrix time ~ 1 / efficiency, so
    # dT/deff = -(fwd + bwd matrix time) / eff; the toy's layer 1 is bound by reading weights
    # (golden), so only layer 0's matrix time counts
    from wus_sim.model.compute import ComputeParams

    toy = golden.make_toy(tmp_path)
    topo = __import__("wus_sim.hardware.topology_files", fromlist=["x"]).load_topology("torus:2x2")
    c = ComputeParams(mxu_efficiency=0.05, elementwise_fwd_bytes=0, elementwise_bwd_bytes=0)
    matrix0 = golden.LAYER_FLOPS[0] * golden.B * (1 + c.backward_flops_ratio) / (golden.PEAK * 0.05)
    g = step_gradient(toy, topo, golden.B, c, names=("mxu_efficiency",))
    assert g["mxu_efficiency"] == pytest.approx(-matrix0 / 0.05, rel=1e-3)


def test_fitted_forward_bytes_move_the_backward_bytes_with_them():
    """A calibration that fits elementwise_fwd_bytes alone keeps backward at a fixed multiple: the
    step's derivative is the elementwise elements' traffic time per byte x (1 + bwd / fwd); both
    fitted, each has its own (fwd: x 1). A matrix-bound dense layer [64, 32] at 1 % efficiency:
    2 x 64 x 32 FLOPs per example, 32 outputs, batch 8."""
    import tempfile
    from pathlib import Path

    from make_workload import make
    from wus_sim.hardware.topology_files import load_topology
    from wus_sim.model.compute import ComputeParams

    toy = make(Path(tempfile.mkdtemp()), "dense", "one dense layer", params=64 * 32,
               layers=[("dense", 2 * 64 * 32)], tensors=[("dense/kernel", [64, 32], 0)])
    topo = load_topology("tpu-v3-8")
    c = ComputeParams(mxu_efficiency=0.01, elementwise_fwd_bytes=3.0, elementwise_bwd_bytes=5.0)
    per_byte = 32 * 8 / (topo.hbm_Bps_per_replica * c.activation_hbm_efficiency)
    tied = step_gradient(toy, topo, 8, c, names=("elementwise_fwd_bytes",))
    assert tied["elementwise_fwd_bytes"] == pytest.approx(per_byte * (1 + 5.0 / 3.0), rel=1e-6)
    both = step_gradient(toy, topo, 8, c, names=("elementwise_fwd_bytes", "elementwise_bwd_bytes"))
    assert both["elementwise_fwd_bytes"] == pytest.approx(per_byte, rel=1e-6)
    assert both["elementwise_bwd_bytes"] == pytest.approx(per_byte, rel=1e-6)


def test_host_loop_share_is_the_loop_cost_over_its_steps(tmp_path):
    from dataclasses import replace

    toy = golden.make_toy(tmp_path)
    compute = replace(golden.COMPUTE, host_loop_s=2e-3)
    run = simulate_strategies(toy, "torus:2x2", "adam", ("sharded",),
                              options=golden.options(compute=compute, steps_per_loop=40))
    assert run.results["sharded"].breakdown["host_loop_s"] == pytest.approx(2e-3 / 40)


@pytest.mark.parametrize("chip, workload, per_core, cores, stack, outside", [
    ("tpu-v3", "resnet50", 64, 512, None, []),
    ("tpu-v3", "resnet50", 64, 512, "s1", []),
    ("tpu-v5e", "resnet50", 64, 256, None, ["chip tpu-v5e"]),
    ("tpu-v3", "bert-large", 8, 512, None, ["workload bert-large"]),
    ("tpu-v3", "resnet50", 8, 512, None, ["8 examples per core"]),
    ("tpu-v3", "resnet50", 64, 8192, None, ["8192 cores"]),
    ("tpu-v3", "resnet50", 64, 512, "s2", ["software stack s2"]),
])
def test_validated_range_names_each_dimension_outside(chip, workload, per_core, cores, stack, outside):
    cal = calibration([], [])
    got = outside_validated_range(cal, chip=chip, workload=workload, examples_per_core=per_core, cores=cores,
                                  stack=stack)
    assert len(got) == len(outside)
    for want, reason in zip(outside, got):
        assert reason.startswith(want), (want, reason)


def test_no_validated_range_is_outside():
    assert outside_validated_range(Calibration(id="none"), chip="tpu-v3", workload="resnet50",
                                   examples_per_core=64, cores=32) == \
        ["uncalibrated physics: not checked against measurements"]


def test_a_step_on_v5e_is_outside_the_shipped_calibrations_range():
    from wus_sim.model.calibration import load_calibration

    cal = load_calibration()
    options = StepOptions(calibration=cal)
    run = simulate_strategies("bert-large", "tpu-v5e-256", "lamb", options=options)
    topo = __import__("wus_sim.hardware.topology_files", fromlist=["x"]).load_topology("tpu-v5e-256")
    checked = point_validated_range(cal, topo, run, options)
    assert checked["inside"] is False
    assert any(r.startswith("chip tpu-v5e") for r in checked["outside"])
    bands = point_bands(cal, topo, run, options)
    if bands is not None:  # a calibration with stated uncertainty: the band holds the step time
        for s, (low, high) in bands["strategies"].items():
            assert low <= run.results[s].step_time_s <= high


def test_step_says_when_it_is_outside_and_carries_its_bands(capsys):
    import json

    from wus_sim.cli import main

    assert main(["step", "resnet50", "-t", "tpu-v5e-256"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("  outside the validated range") and "chip tpu-v5e: checked on tpu-v3, tpu-v5p, tpu-v6e only" in line
    assert "median |error|" not in line
    assert main(["step", "resnet50", "-t", "tpu-v5e-256", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["validated_range"]["inside"] is False and doc["validated_range"]["outside"]
    # inside: the model error line, and every strategy's band holds its step time
    assert main(["step", "resnet50", "-t", "tpu-v3-512", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["validated_range"] == {"inside": True, "outside": []}
    for s in doc["strategies"].values():
        assert s["step_time_s_low"] <= s["step_time_s"] <= s["step_time_s_high"]
    assert doc["speedup_low"] <= doc["speedup"] <= doc["speedup_high"]
    # one strategy: no speedup, so no speedup band
    assert main(["step", "resnet50", "-t", "tpu-v3-512", "--strategy", "sharded", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["speedup"] is None and doc["speedup_low"] is None and doc["speedup_high"] is None


def test_a_bound_row_caps_a_range_where_it_would_go_over():
    """Fitter.bound_limits: a per-step cost moves a step one for one, so a bound row measured
    1 ms above its simulation caps the cost's range 1 ms above its fitted value (bisection: to
    within (range / 2^12)); the low end, which only speeds the step up, stays."""
    from dataclasses import replace

    import numpy as np

    from wus_sim.validation.calibrate import DECLARED_PARAMS, FITTABLE_PARAMS
    from wus_sim.validation.fit import Fitter
    from wus_sim.validation.measured import SHIPPED_MEASURED, load_measured
    from wus_sim.validation.simulate import run_topology
    from wus_sim.validation.validate import row_key

    runs = {row_key(r): r for r in load_measured(SHIPPED_MEASURED)}
    exact, bound = runs["resnet/tpu-v3-32"], runs["ssd/tpu-v3-2048"]
    rows = [exact, bound]
    fitter = Fitter(rows, {row_key(r): run_topology(r) for r in rows}, ["step_overhead_s"], None,
                    bounds=FITTABLE_PARAMS, declared=dict(DECLARED_PARAMS))
    s0 = 2e-3
    x = np.array([s0 / fitter.scale[0]])
    sim = fitter.simulated(x, [bound])[0]
    fitter.rows = [exact, replace(bound, measured_step_s=sim + 1e-3)]
    low, high = fitter.bound_limits(x, {"step_overhead_s": [0.0, 20e-3]})["step_overhead_s"]
    assert low == 0.0
    assert high == pytest.approx(s0 + 1e-3, abs=20e-3 / 2 ** 12)
    assert high <= s0 + 1e-3 + 1e-12   # the end kept never breaks the bound


def test_a_shape_calibrations_peak_fraction_moves_the_band():
    # under the shape model at a low peak fraction every matmul of BERT-large is compute-bound: with no
    # elementwise work and no fixed costs the layer times are (padded FLOPs / peak) / fraction, so
    # dT/dfraction = -T / fraction
    from wus_sim.hardware.topology_files import load_topology
    from wus_sim.model.compute import ComputeParams, layer_times
    from wus_sim.model.workload_files import load_workload

    w, topo = load_workload("bert-large"), load_topology("tpu-v3-32")
    c = ComputeParams(compute_model="shape", matmul_peak_fraction=0.05, elementwise_fwd_bytes=0,
                      elementwise_bwd_bytes=0)
    lt = layer_times(w, topo, 14, c)
    g = step_gradient(w, topo, 14, c, names=("matmul_peak_fraction",))
    assert g["matmul_peak_fraction"] == pytest.approx(-(lt.forward_total_s + lt.backward_total_s) / 0.05, rel=1e-3)
