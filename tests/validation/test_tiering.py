"""The tiering rows (MaxText docs/reference/models/tiering.md) as shipped, and their simulation."""

from dataclasses import replace
import math

import pytest

from wus_sim.validation.tiering import simulate_one, tiering_rows, tiering_summary

# The page's figures (model, chip, MFU %, tokens/s/device), typed from the page by hand: the table
# must carry them unchanged.
PAGE = [
    ("Llama 2 70B", "tpu-v6e", 43.8, 900), ("Llama 3.1 8B", "tpu-v6e", 45.46, 7207),
    ("Llama 3.1 70B", "tpu-v6e", 50.33, 960), ("Llama 3.1 405B", "tpu-v6e", 38.55, 123),
    ("Mixtral 8x7B", "tpu-v6e", 35.23, 3899), ("Mixtral 8x22B", "tpu-v6e", 36.2, 1326),
    ("Llama 2 70B", "tpu-v5p", 65.4, 692), ("Mixtral 8x7B", "tpu-v5p", 52.56, 2909),
]


def test_the_table_holds_the_pages_eight_rows_with_their_sources():
    rows = tiering_rows()
    assert [(r.model, r.chip, r.measured_mfu_pct, r.measured_tokens_per_s_per_device) for r in rows] == PAGE
    for r in rows:
        assert "github.com/AI-Hypercomputer/" in r.config, r.row
        assert r.expressible or r.why_not, r.row


def test_every_row_is_expressible_and_names_its_capacity_factor():
    """Row 6's expert mesh runs since the expert axis; the recipes' capacity factors, by hand from their
    configs: 1.25 in both dense_matmul Mixtral recipes (rows 5, 6), -1 (dropless megablox) in row 8, none
    for the dense models."""
    rows = tiering_rows()
    assert all(r.expressible and not r.why_not for r in rows)
    assert [r.capacity_factor for r in rows] == ["", "", "", "", "1.25", "1.25", "", "-1"]
    assert [r.capacity for r in rows] == [-1.0] * 4 + [1.25, 1.25, -1.0, -1.0]
    assert rows[5].mesh == "fsdp=64,expert=4"


def test_a_simulated_row_reports_its_throughput_from_its_step():
    """Tokens/s/device = per-device batch x sequence / step time; the error is on the step time."""
    row = tiering_rows()[0]
    res = simulate_one(row)
    assert res.status == "ok"
    # 2 sequences a device: the run the page's figures are from (the recipe README's log line,
    # TFLOP/s/device 402.274 / 918 = 43.8 % MFU), though the recipe's config says 3
    assert row.per_device_batch == 2 and round(402.274 / 918 * 100, 1) == row.measured_mfu_pct
    assert res.simulated_tokens_per_s_per_device == pytest.approx(2 * 4096 / res.simulated_step_s)
    assert res.measured_step_s == pytest.approx(2 * 4096 / 900)
    assert res.error == pytest.approx(res.simulated_step_s / res.measured_step_s - 1)


def test_a_row_not_expressible_says_why_and_has_no_numbers():
    row = tiering_rows()[5]
    res = simulate_one(replace(row, expressible=False, why_not="needs an axis not modelled"))
    assert res.status == "not expressible" and res.why == "needs an axis not modelled"
    assert math.isnan(res.error)


def test_the_expert_mesh_row_runs_its_recipe():
    """Row 6 (Mixtral 8x22B, fsdp=64,expert=4 on v6e-256, capacity factor 1.25): its error is reported
    and its step waits on its expert all-to-alls, not on a tensor axis."""
    res = simulate_one(tiering_rows()[5])
    assert res.status == "ok" and math.isfinite(res.error)
    assert res.breakdown["expert_comm_s"] > 0 and res.breakdown["tensor_comm_s"] == 0
    assert res.global_batch == 8 * 256  # per_device_batch_size 8 x 256 devices: expert splits the batch too


def test_summary_counts_by_hand():
    class R:  # the fields tiering_summary reads
        def __init__(self, error, status="ok"):
            self.error, self.status = error, status

    s = tiering_summary([R(0.05), R(-0.15), R(0.30), R(math.nan, "not expressible"), R(math.nan, "infeasible")])
    assert s["rows"] == 3 and s["median_abs_error"] == pytest.approx(0.15) and s["worst_abs_error"] == pytest.approx(0.30)
    assert (s["within_10pct"], s["within_20pct"], s["infeasible"], s["not_expressible"]) == (1, 2, 1, 1)
    # per chip generation: v5p |0.05|, |-0.15| (median 0.10); v6e |0.30|, |-0.02|, |0.08| (median 0.08)
    rows = [R(0.05), R(-0.15), R(0.30), R(-0.02), R(0.08)]
    for r, chip in zip(rows, ["tpu-v5p", "tpu-v5p", "tpu-v6e", "tpu-v6e", "tpu-v6e"]):
        r.chip = chip
    by = tiering_summary(rows)["by_chip"]
    assert by["tpu-v5p"] == {"rows": 2, "median_abs_error": pytest.approx(0.10), "worst_abs_error": pytest.approx(0.15)}
    assert by["tpu-v6e"] == {"rows": 3, "median_abs_error": pytest.approx(0.08), "worst_abs_error": pytest.approx(0.30)}
    assert "leave_one_model_out" not in tiering_summary(rows)  # no calibration states one
    # leave-one-model-out errors, summarised apart: |0.12|, |-0.25|, |0.04| -> median 0.12, one over 20 %
    for r, lomo in zip(rows, [0.12, -0.25, 0.04, math.nan, math.nan]):
        r.lomo_error = lomo
    lomo = tiering_summary(rows)["leave_one_model_out"]
    assert lomo["rows"] == 3 and lomo["median_abs_error"] == pytest.approx(0.12)
    assert (lomo["worst_abs_error"], lomo["within_10pct"], lomo["within_20pct"]) == (pytest.approx(0.25), 1, 2)
    assert lomo["by_chip"]["tpu-v5p"]["median_abs_error"] == pytest.approx((0.12 + 0.25) / 2)


def test_a_tensor_group_shares_its_examples_so_the_global_batch_is_every_devices():
    """Row 4: per_device_batch_size 1 on 2 x 256 devices is 512 sequences (MaxText counts every device,
    tensor=4 groups included), so each of the 128 data-parallel groups runs 4."""
    res = simulate_one(tiering_rows()[3])
    assert res.global_batch == 512


@pytest.mark.parametrize("row", [r for r in tiering_rows() if r.expressible], ids=lambda r: f"row{r.row}")
def test_every_measured_run_fits(row):
    """Every row ran on its slice: the memory model must say it fits (each run's recipe, as measured)."""
    res = simulate_one(row)
    assert res.status == "ok", res.why


def test_the_shipped_fit_saw_the_expressible_rows_and_states_each_ones_leave_one_model_out_error():
    """The shipped calibration's second stage (validation/fit_tiering.py) is fitted to every expressible
    row; its provenance keeps, per row, the error of a refit without that row's model, which
    validate --tiering prints beside the fitted error."""
    from wus_sim.model.calibration import load_calibration
    from wus_sim.validation.measured import run_key
    from wus_sim.validation.tiering import simulate_tiering, tiering_fit_rows

    cal = load_calibration()
    keys = {run_key(r) for r in tiering_fit_rows()}
    assert keys <= set(cal.provenance["rows"])
    lomo = cal.provenance["leave_one_model_out"]
    assert set(lomo["per_row"]) == keys and lomo["rows"] == len(keys)
    errs, n = sorted(abs(e) for e in lomo["per_row"].values()), len(keys)
    assert lomo["median_abs"] == pytest.approx(errs[n // 2] if n % 2 else (errs[n // 2 - 1] + errs[n // 2]) / 2)
    fitted = {r.row: run_key(r) for r in tiering_fit_rows()}
    for r in simulate_tiering():
        if r.status == "not expressible":
            assert r.role == "held-out" and math.isnan(r.lomo_error)
        else:
            assert r.role == "calibration" and r.lomo_error == lomo["per_row"][fitted[r.row]]
    # the 2025 stack has its own matmul peak fraction; the chip-wide output block binds on v6e only
    mine = cal.stacks["maxtext-jax-2025"]
    assert 0.3 <= mine["matmul_peak_fraction"] <= 1.0 and 128 <= cal.params["matmul_block"] <= 4096


def test_a_calibration_stack_may_hold_its_own_peak_fraction_and_nothing_else(tmp_path):
    """A calibration file's stacks hold the fixed costs and optionally a matmul peak fraction in (0, 1]."""
    import yaml

    from wus_sim.inputs.errors import ConfigError
    from wus_sim.model.calibration import load_calibration

    shipped = load_calibration()
    doc = {"id": "t", "params": dict(shipped.params), "provenance": {"rows": [], "method": "test"},
           "stacks": {"s": {"op_overhead_s": 0.0, "step_overhead_s": 0.0, "matmul_peak_fraction": 0.8}},
           "default_stack": "s"}
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(doc))
    assert load_calibration(str(good)).compute_params().matmul_peak_fraction == 0.8
    for bad in ({"matmul_peak_fraction": 1.5}, {"matmul_block": 512.0}):
        doc["stacks"]["s"] = {"op_overhead_s": 0.0, **bad}
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(doc))
        with pytest.raises(ConfigError, match="stacks.s"):
            load_calibration(str(path))
