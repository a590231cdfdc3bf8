"""`wus-sim bench`: structure of its output, the case registry, and engine agreement.

No timing assertions: wall times depend on the machine.
"""

import json
import math

import pytest

from wus_sim import bench
from wus_sim.cli import main

FIELDS = {"case", "engine", "problem", "status", "sim_time_s", "events", "wall_median_s", "wall_min_s",
          "messages_per_s", "peak_mem_bytes", "repeat"}


@pytest.fixture(scope="module")
def quick_run():
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["bench", "--quick", "--json", "--repeat", "2"])
    assert code == 0
    return json.loads(buf.getvalue())


def test_quick_json_structure(quick_run):
    doc = quick_run
    assert doc["quick"] is True and doc["repeat"] == 2
    assert {"python", "numpy", "cpus"} <= set(doc["machine"])
    quick_names = [c.name for c in bench.CASES.values() if c.quick]
    assert [r["case"] for r in doc["cases"]] == quick_names
    for rec in doc["cases"]:
        assert FIELDS <= set(rec)
        if rec["engine"] == "fast":
            assert rec["status"] == "ok", rec
        if rec["status"] == "ok":
            assert rec["sim_time_s"] > 0 and rec["events"] > 0
            assert 0 < rec["wall_min_s"] <= rec["wall_median_s"]
            assert math.isclose(rec["messages_per_s"], rec["events"] / rec["wall_median_s"], rel_tol=1e-12)
        else:
            assert rec["status"] == "unavailable" and rec["reason"]


def test_engines_agree_on_shared_problems(quick_run):
    by_problem = {}
    for rec in quick_run["cases"]:
        if rec["status"] == "ok":
            by_problem.setdefault(rec["problem"], []).append(rec)
    shared = {p: recs for p, recs in by_problem.items() if len({r["engine"] for r in recs}) > 1}
    if not shared:
        reasons = [r.get("reason") for r in quick_run["cases"] if r["status"] != "ok"]
        pytest.skip(f"only one engine ran the shared quick problem: {reasons}")
    for problem, recs in shared.items():
        times = [r["sim_time_s"] for r in recs]
        assert max(times) - min(times) <= 1e-9 * max(times), (problem, recs)
        assert len({r["events"] for r in recs}) == 1, (problem, recs)


def test_registry_takes_new_cases_without_touching_the_loop():
    calls = []
    case = bench.BenchCase("test: a registered case", "dummy", setup=lambda: 3,
                      run=lambda n: calls.append(n) or bench.Measurement(1.5, 10), quick=True, full=False,
                      problem="dummy")
    missing = bench.BenchCase("test: needs something", "dummy", setup=lambda: (_ for _ in ()).throw(
        bench.Unavailable("not built yet")), run=lambda s: None, quick=True, full=False)
    try:
        bench.register(case)
        bench.register(missing)
        recs = bench.run_bench(quick=True, repeat=3, names=["test: "], memory=False)
    finally:
        bench.CASES.pop(case.name)
        bench.CASES.pop(missing.name)
    assert [r["case"] for r in recs] == [case.name, missing.name]
    assert calls == [3, 3, 3]
    assert recs[0]["sim_time_s"] == 1.5 and recs[0]["events"] == 10
    assert recs[1]["status"] == "unavailable" and recs[1]["reason"] == "not built yet"
    table = bench.format_table(recs)
    assert "test: a registered case" in table and "not built yet" in table


def test_a_case_of_a_minute_runs_at_most_its_own_count():
    calls = []
    case = bench.BenchCase("test: a long case", "dummy", setup=lambda: 7,
                           run=lambda n: calls.append(n) or bench.Measurement(None, 4), quick=True, full=False,
                           problem="dummy long", max_runs=2)
    try:
        bench.register(case)
        (rec,) = bench.run_bench(quick=True, repeat=5, names=["test: a long case"], memory=False)
        (fewer,) = bench.run_bench(quick=True, repeat=1, names=["test: a long case"], memory=False)
    finally:
        bench.CASES.pop(case.name)
    assert calls == [7, 7, 7] and rec["repeat"] == 2 and fewer["repeat"] == 1


def test_the_whole_what_if_grid_is_a_case_of_the_full_set():
    (case,) = [c for c in bench.CASES.values() if "whole 100,000-point grid" in c.name]
    assert case.full and not case.quick and case.engine == "run" and case.max_runs == 3


def test_full_set_names_the_issue_cases():
    full = [c for c in bench.CASES.values() if c.full]
    names = " | ".join(c.name for c in full)
    for shape in ("32x32", "64x64", "128x128", "256x256"):
        assert f"torus:{shape}" in names
    assert {c.engine for c in full} >= {"fast", "simpy", "cli"}
    assert any("halving-doubling" in c.name and c.engine == "simpy" for c in full)
    assert any("halving-doubling" in c.name and c.engine == "window" for c in full)
    assert any("failed cable" in c.name and c.engine == "timeline" for c in full)
    assert any(c.name.startswith("ring all-reduce") and c.engine == "fast" for c in full)


def test_bad_repeat_and_unknown_case_are_user_errors(capsys):
    assert main(["bench", "--repeat", "0"]) == 2
    assert main(["bench", "--quick", "--case", "no such case"]) == 2
    err = capsys.readouterr().err
    assert "--repeat" in err and "no such case" in err


def test_experiment_case_leaves_no_output_directory(tmp_path, monkeypatch):
    import os
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    quickstart = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "experiments",
                              "quickstart.yaml")
    case = bench.experiment_case("quickstart reduced", quickstart, jobs=1, extra=("--reduced", "--no-plots"))
    rec = bench.run_case(case, repeat=1)
    assert rec["status"] == "ok" and rec["events"] >= 1, rec
    assert not list(tmp_path.iterdir())


def test_issue_34_cases_and_the_machine_they_ran_on(quick_run):
    """The cases issue 34 asks for are registered; the machine record says its cores and load."""
    names = " | ".join(c.name for c in bench.CASES.values() if c.full)
    for text in ("--version (whole command)", "collective torus:32x32", "1 failed cable, both strategies",
                 "batch norm over 8 cores", "torus:256x256", "100,000-point grid"):
        assert text in names
    machine = quick_run["machine"]
    assert machine["cpus"] >= 1 and "load_average" in machine and "bytecode_cached" in machine


def test_out_writes_the_json_document(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--case", "ring all-reduce", "--repeat", "1", "--no-memory",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["case"] for r in doc["cases"]] == ["quick: ring all-reduce 1MiB torus:4x4"]
    assert doc["cases"][0]["status"] == "ok" and doc["machine"]["cpus"] >= 1
    assert "ring all-reduce" in capsys.readouterr().out  # the table still goes to stdout
    assert main(["bench", "--quick", "--case", "ring", "--repeat", "1", "--out", str(tmp_path / "no" / "x")]) == 2
    assert "--out" in capsys.readouterr().err


def test_whole_commands_run_the_script_installed_beside_the_interpreter(tmp_path, monkeypatch):
    """Not a shim on PATH, not python -m (unless no script is installed there); the interpreter's
    floor is timed beside them."""
    import sys

    from wus_sim.bench.builders import installed_command

    python = tmp_path / "python3"
    monkeypatch.setattr(sys, "executable", str(python))
    assert installed_command() == [str(python), "-m", "wus_sim"]
    script = tmp_path / "wus-sim"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert installed_command() == [str(script)]
    names = [c.name for c in bench.CASES.values() if c.full]
    floor = [n for n in names if n.startswith("python -S -c pass") or n.startswith("python -c pass")]
    assert len(floor) == 2 and names.index(floor[-1]) < names.index("wus-sim --version (whole command)")


def test_the_cluster_sweep_is_an_opt_in_case_beside_jobs_2():
    # issue 45: the whole what-if grid on a Dask scheduler + 2 worker processes on 127.0.0.1, the
    # same sweep file as the --jobs 2 case; run only when --case names it (it starts processes)
    (jobs2,) = [c for c in bench.CASES.values() if "whole 100,000-point grid, --jobs 2" in c.name]
    (cluster,) = [c for c in bench.CASES.values() if c.name.startswith("sweep-cluster: the whole 100,000-point")]
    assert cluster.opt_in and not cluster.full and not cluster.quick and cluster.max_runs == 3
    assert "2 workers on 127.0.0.1" in cluster.name and cluster.engine == jobs2.engine == "run"
    assert all(not c.opt_in for c in bench.CASES.values() if c.full or c.quick)


def test_an_opt_in_case_runs_only_when_named(capsys):
    calls = []
    case = bench.BenchCase("test: opt-in case", "dummy", setup=lambda: 1,
                           run=lambda n: calls.append(n) or bench.Measurement(None, 1), quick=False, full=False,
                           opt_in=True, teardown=lambda n: calls.append(-n))
    try:
        bench.register(case)
        assert bench.run_bench(quick=True, repeat=1, names=["test: "], memory=False)[0]["case"] == case.name
        assert bench.run_bench(quick=False, repeat=1, names=["test: opt-in"], memory=False)[0]["status"] == "ok"
        assert main(["bench", "--list"]) == 0
    finally:
        bench.CASES.pop(case.name)
    assert calls == [1, -1, 1, -1]  # each run's teardown after it
    assert "test: opt-in case  [dummy; opt-in: runs when --case names it]" in capsys.readouterr().out


def test_the_cluster_case_runs_on_loopback_and_leaves_no_process(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    import os
    import tempfile

    from wus_sim.bench import dask_cluster

    made = []

    class Recorded(dask_cluster.LoopbackCluster):
        def start(self):
            made.append(self)
            return super().start()

    monkeypatch.setattr(dask_cluster, "LoopbackCluster", Recorded)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    quickstart = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              "experiments", "quickstart.yaml")
    case = bench.cluster_experiment_case("quickstart on a cluster", quickstart, extra=("--reduced", "--no-plots"))
    rec = bench.run_case(case, repeat=1)
    assert rec["status"] == "ok" and rec["events"] >= 1, rec
    (cluster,) = made
    assert cluster.address.startswith("tcp://127.0.0.1:") and len(cluster.workers) == 2
    assert all(p.poll() is not None for p in [cluster.scheduler, *cluster.workers])  # killed in the teardown
    assert not list(tmp_path.iterdir())
