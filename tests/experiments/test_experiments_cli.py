"""`wus-sim run`: files, plots, summary, one-line errors, --resume, --limit, --scheduler.

The point function is the fake of test_experiments_fake.py (patched in as the runner's
default) so these tests check the command, not the simulator.
"""

import pytest
import yaml

from wus_sim.model.calibration import load_calibration
from wus_sim.cli import main
from wus_sim.experiments import runner
from wus_sim.experiments.results import read_results
from wus_sim.experiments.spec import load_experiment, point_hash

from test_experiments_fake import fake_point

DOC = {
    "name": "clitest",
    "workloads": ["resnet50", "transformer-big"],
    "topologies": ["tpu-v3-32", "tpu-v3-512"],
    "optimizers": ["adam"],
    "sweep": {"link_GBps": [50, 100]},
    "reduce": {"topology": ["tpu-v3-32"]},
    "plots": [{"kind": "speedup", "name": "speedup"},
              {"kind": "breakdown", "name": "breakdown", "where": {"link_GBps": 100}}],
}


@pytest.fixture(autouse=True)
def fake_simulator(monkeypatch):
    monkeypatch.setattr(runner, "_default_point_fn", lambda: fake_point)


@pytest.fixture
def exp_file(tmp_path):
    path = tmp_path / "clitest.yaml"
    path.write_text(yaml.safe_dump(DOC))
    return path


def test_run_writes_results_columns_config_and_plots(exp_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(exp_file), "--out", str(out), "--jobs", "2"]) == 0
    for name in ("results.csv", "results.parquet", "columns.md", "columns.json", "config.resolved.yaml",
                 "points.jsonl", "speedup.png", "speedup.svg", "breakdown.png", "breakdown.svg"):
        assert (out / name).stat().st_size > 0, name
    df = read_results(out)
    assert len(df) == 2 * 8 and set(df["experiment"]) == {"clitest"}
    resolved = yaml.safe_load((out / "config.resolved.yaml").read_text())
    assert resolved["num_points"] == 8 and resolved["source"] == str(exp_file)
    captured = capsys.readouterr()
    # the summary: one line per point with both step times and the speedup
    lines = captured.out.splitlines()
    header = lines[0].split()
    assert {"workload", "topology", "link_GBps", "speedup"} <= set(header)
    sharded = df[df["strategy"] == "sharded"].sort_values("point_index")
    for line, speedup in zip(lines[1:9], sharded["speedup"]):
        assert line.split()[-1] == f"{speedup:.3f}"
    assert "8 points (8 simulated, 0 from the journal)" in captured.out
    # every number the run printed names the error its calibration was checked to
    checked = load_calibration().provenance["validation"]
    error_lines = [line for line in lines if line.startswith("  model error (calibration ")]
    assert len(error_lines) == 1
    assert f"median |error| {checked['leave_one_benchmark_out_median_abs']:.1%}" in error_lines[0]
    assert captured.err == ""  # no progress bar when stderr is not a terminal


def test_default_out_dir_is_results_slash_stem(exp_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(exp_file), "-q", "--jobs", "1", "--no-plots"]) == 0
    assert (tmp_path / "results" / "clitest" / "results.csv").is_file()
    assert not (tmp_path / "results" / "clitest" / "speedup.png").exists()


def test_limit_then_resume_runs_only_the_rest(exp_file, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    log = tmp_path / "calls.log"
    monkeypatch.setenv("WUS_FAKE_LOG", str(log))
    assert main(["run", str(exp_file), "--out", str(out), "--limit", "3", "-q", "--jobs", "1"]) == 0
    first = log.read_text().split()
    assert len(first) == 3 and len(read_results(out)) == 6
    assert main(["run", str(exp_file), "--out", str(out), "--resume", "--jobs", "2"]) == 0
    calls = log.read_text().split()
    assert len(calls) == 8 and not set(first) & set(calls[3:])
    assert "8 points (5 simulated, 3 from the journal)" in capsys.readouterr().out
    df = read_results(out)
    assert df.groupby(["point_hash", "strategy"]).size().eq(1).all() and len(df) == 16
    exp = load_experiment(exp_file)
    assert set(df["point_hash"]) == {point_hash(p) for p in exp.points()}


def test_reduced(exp_file, tmp_path):
    out = tmp_path / "out"
    assert main(["run", str(exp_file), "--out", str(out), "--reduced", "-q", "--jobs", "1"]) == 0
    df = read_results(out)
    assert set(df["topology"]) == {"tpu-v3-32"} and len(df) == 2 * 4


@pytest.mark.parametrize("doc_change, args, message", [
    ({"sweep": {"link_GBps": [50, -1]}}, [], "clitest.yaml: sweep.link_GBps[1]: -1 must be a number >= 0.001"),
    ({"plots": [{"kind": "speedup", "x": "nope"}]}, [], "plots[0].x: 'nope' is not a results column"),
    # an option's rule offers no null (it cannot be typed) and shows a huge guard bound as a power
    ({}, ["--limit", "0"], "--limit: 0 must be a whole number >= 1 and <= 2^62\n"),
    ({}, ["--jobs", "0"], "--jobs: 0 must be a whole number >= 1"),
    # a quoted number in YAML is text, and the message says so
    ({"base": {"per_replica_batch": "16"}}, [], "base.per_replica_batch: '16' is text, not a number (write it "
     "without quotes); must be a whole number >= 1 and <= 16777216 (or null)"),
    ({"optimizers": ["adam+clp"]}, [], "'adam+clp' has an unknown gradient prefix 'clp' after '+'; known "
     "prefixes: clip (e.g. adam+clip)"),
    # continue and start over at once: one of them would be ignored without a word
    ({}, ["--resume", "--overwrite"], "--overwrite: cannot be given with --resume"),
])
def test_user_errors_are_one_line_exit_2(exp_file, tmp_path, capsys, doc_change, args, message):
    exp_file.write_text(yaml.safe_dump({**DOC, **doc_change}))
    assert main(["run", str(exp_file), "--out", str(tmp_path / "o"), "-q", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wus-sim run: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o" / "results.csv").exists()


def test_missing_file_is_a_one_line_error(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: file not found" in capsys.readouterr().err


def test_error_rows_make_the_exit_code_1(exp_file, tmp_path, capsys):
    exp_file.write_text(yaml.safe_dump({**DOC, "base": {"bucket_MiB": 666}}))
    assert main(["run", str(exp_file), "--out", str(tmp_path / "o"), "-q", "--jobs", "1"]) == 1
    assert "rows failed; first: bucket 666" in capsys.readouterr().err
    assert (tmp_path / "o" / "results.csv").is_file()  # results are written anyway


def test_scheduler_runs_on_a_local_dask_cluster(exp_file, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        code = main(["run", str(exp_file), "--out", str(tmp_path / "d"), "-q", "--no-plots",
                     "--scheduler", cluster.scheduler_address])
    assert code == 0 and len(read_results(tmp_path / "d")) == 16


def test_a_rerun_leaves_no_plot_of_an_earlier_run(exp_file, tmp_path, monkeypatch, capsys):
    # A plot the earlier run drew and this one does not (skipped: no rows; or --no-plots) would sit
    # beside the new results showing the old ones; it goes, also when a run in between was cut short.
    out = tmp_path / "out"
    assert main(["run", str(exp_file), "--out", str(out), "-q", "--jobs", "1"]) == 0
    assert (out / "breakdown.png").is_file()
    calls = []

    def interrupted(point):
        if calls:
            raise KeyboardInterrupt
        calls.append(point)
        return fake_point(point)

    monkeypatch.setattr(runner, "_default_point_fn", lambda: interrupted)
    assert main(["run", str(exp_file), "--out", str(out), "-q", "--jobs", "1"]) == 130
    monkeypatch.setattr(runner, "_default_point_fn", lambda: fake_point)
    # the first point has link_GBps 50: breakdown (where link_GBps is 100) has nothing to draw
    assert main(["run", str(exp_file), "--out", str(out), "-q", "--jobs", "1", "--limit", "1", "--resume"]) == 0
    assert "plot 'breakdown' skipped" in capsys.readouterr().err
    assert (out / "speedup.png").is_file()
    assert not (out / "breakdown.png").exists() and not (out / "breakdown.svg").exists()
    assert main(["run", str(exp_file), "--out", str(out), "-q", "--jobs", "1", "--no-plots"]) == 0
    assert not list(out.glob("*.png")) and not list(out.glob("*.svg"))


def test_the_resume_hint_of_an_overwrite_run_is_a_command_that_runs(exp_file, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"

    def interrupted(point):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_default_point_fn", lambda: interrupted)
    argv = ["run", str(exp_file), "--out", str(out), "-q", "--jobs", "1", "--overwrite"]
    monkeypatch.setattr("sys.argv", ["wus-sim", *argv])
    assert main(argv) == 130
    hint = capsys.readouterr().err.split("Resume with: ")[1].split()
    assert hint[:2] == ["wus-sim", "run"] and "--resume" in hint and "--overwrite" not in hint
    monkeypatch.setattr(runner, "_default_point_fn", lambda: fake_point)
    assert main(hint[1:]) == 0
