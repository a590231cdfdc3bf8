"""The model-error line of `wus-sim run` and report.html applies only to rows inside the validated
range (issue 33): an all-outside run states no error and says why; a workload measured only as
upper bounds (transformer-big) is outside."""

import yaml

from wus_sim.cli import main
from wus_sim.model.calibration import load_calibration
from wus_sim.model.validated_range import outside_validated_range


def _run(tmp_path, capsys, doc):
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({"name": "scope", "strategies": ["replicated"], **doc}))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    return capsys.readouterr().out, (out / "report.html").read_text()


def test_all_outside_run_states_no_model_error(tmp_path, capsys):
    text, page = _run(tmp_path, capsys, {"workloads": ["resnet50"], "topologies": ["tpu-v5e-8"]})
    for where in (text, page):
        assert "median |error|" not in where
        assert "none of the 1 rows lies inside" in where and "chip tpu-v5e" in where


def test_inside_run_states_it_for_its_rows(tmp_path, capsys):
    text, page = _run(tmp_path, capsys, {"workloads": ["resnet50"], "topologies": ["tpu-v3-32", "tpu-v5e-8"]})
    checked = load_calibration().provenance["validation"]
    figure = f"median |error| {checked['leave_one_benchmark_out_median_abs']:.1%}"
    for where in (text, page):
        assert figure in where and "applies to the 1 of 2 rows inside" in where


def test_a_workload_measured_only_as_upper_bounds_is_outside():
    cal = load_calibration()
    assert cal.provenance["validated_range"]["workloads"]["transformer-big"]["kinds"] == ["bound"]
    why = outside_validated_range(cal, chip="tpu-v3", workload="transformer-big", examples_per_core=8, cores=512)
    assert why == ["workload transformer-big: only upper bounds measured (eval inside every timed interval)"]
    assert outside_validated_range(cal, chip="tpu-v3", workload="resnet50", examples_per_core=64, cores=512) == []


def test_points_that_set_mxu_efficiency_are_said_to_be_outside_the_fit(tmp_path, capsys):
    swept = {"workloads": ["resnet50"], "topologies": ["tpu-v3-32"], "sweep": {"mxu_efficiency": [0.5]}}
    text, page = _run(tmp_path, capsys, swept)
    for where in (text, page):
        assert "points that set mxu_efficiency override a fitted value" in where
    (tmp_path / "plain").mkdir()
    text, page = _run(tmp_path / "plain", capsys, {"workloads": ["resnet50"], "topologies": ["tpu-v3-32"]})
    assert "override a fitted value" not in text + page
