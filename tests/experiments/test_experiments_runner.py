"""The experiment runner: parallel processes, status rows, exact-once resume (a real SIGKILL), Dask.

These tests run against the fake point function of test_experiments_fake.py so they
check the runner's own contract; test_experiments_shipped.py runs the real simulator.
"""

import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import ConfigError
from wus_sim.experiments.results import columns, read_results
from wus_sim.experiments.runner import JOURNAL_NAME, read_journal, run_experiment
from wus_sim.experiments.spec import parse_experiment, point_hash

from test_experiments_fake import fake_point

TESTS = Path(__file__).resolve().parent  # test_experiments_fake lives beside this file
REPO = TESTS.parents[1]

DOC = {
    "workloads": ["resnet50", "transformer-big"],
    "topologies": ["tpu-v3-32", "tpu-v3-128", "tpu-v3-512"],
    "optimizers": ["adam", "lars"],
    "sweep": {"zip": [{"per_replica_batch": [16, 4096, 8], "bucket_MiB": [32, 32, 13]}]},
}


def experiment(doc=DOC, name="t"):
    return parse_experiment(doc, name=name)


def comparable(df):
    return df.drop(columns=["wall_s"]).reset_index(drop=True)


def check_exactly_once(df, exp):
    points = exp.points()
    assert df.groupby(["point_hash", "strategy"]).size().eq(1).all()
    assert set(df["point_hash"]) == {point_hash(p) for p in points}
    assert len(df) == 2 * len(points)
    assert list(df["point_index"]) == sorted(df["point_index"])


def test_rows_statuses_and_speedup(tmp_path):
    exp = experiment()
    result = run_experiment(exp, tmp_path, point_fn=fake_point, jobs=1)
    df = result.frame
    check_exactly_once(df, exp)
    # every row carries its point's parameters
    by_hash = {point_hash(p): p for p in exp.points()}
    for _, row in df.iterrows():
        point = by_hash[row["point_hash"]]
        assert row["workload"] == point["workload"] and row["topology"] == point["topology"]
    ok = df[df["status"] == "ok"]
    sharded = ok[ok["strategy"] == "sharded"].set_index("point_hash")
    replicated = ok[ok["strategy"] == "replicated"].set_index("point_hash")
    ratio = replicated.loc[sharded.index, "step_time_s"] / sharded["step_time_s"]
    assert (sharded["speedup"] - ratio).abs().max() < 1e-12
    # batch 4096 runs out of the fake's HBM; bucket 13 raises InfeasibleError for the whole point
    assert set(df.loc[df["per_replica_batch"] == 4096, "status"]) == {"infeasible"}
    whole = df[df["bucket_MiB"] == 13]
    assert set(whole["status"]) == {"infeasible"} and whole["error"].str.contains("bucket 13").all()
    assert whole["step_time_s"].isna().all()
    # the slice columns are filled from the topology
    assert set(zip(df["topology"], df["replicas"], df["dims"])) == {
        ("tpu-v3-32", 32, "4x4"), ("tpu-v3-128", 128, "8x8"), ("tpu-v3-512", 512, "16x16")}
    assert result.num_run == exp.num_points and result.num_errors == 0


def test_error_rows_do_not_stop_the_sweep(tmp_path):
    doc = {**DOC, "sweep": {"bucket_MiB": [32, 666]}}
    result = run_experiment(experiment(doc), tmp_path, point_fn=fake_point)
    df = result.frame
    assert set(df.loc[df["bucket_MiB"] == 666, "status"]) == {"error"}
    assert set(df.loc[df["bucket_MiB"] == 32, "status"]) == {"ok"}
    assert result.num_errors == (df["bucket_MiB"] == 666).sum() > 0


def test_processes_give_the_same_results_as_in_process(tmp_path):
    exp = experiment()
    one = run_experiment(exp, tmp_path / "one", point_fn=fake_point, jobs=1).frame
    two = run_experiment(exp, tmp_path / "two", point_fn=fake_point, jobs=2).frame
    pd.testing.assert_frame_equal(comparable(one), comparable(two))


def test_chunked_workers_give_the_same_results_as_in_process(tmp_path):
    """Enough points that each worker task runs several (chunk_size > 1), with a count that does
    not divide into whole chunks: the same rows, each point once, in point order."""
    from wus_sim.experiments.runner import chunk_size

    doc = {**DOC, "sweep": {"per_replica_batch": list(range(1, 15)), "bucket_MiB": [32, 13]}}
    exp = experiment(doc)
    assert exp.num_points == 2 * 3 * 2 * 14 * 2 and exp.num_points % chunk_size(exp.num_points, 2) != 0
    assert chunk_size(exp.num_points, 2) > 1
    one = run_experiment(exp, tmp_path / "one", point_fn=fake_point, jobs=1).frame
    two = run_experiment(exp, tmp_path / "two", point_fn=fake_point, jobs=2).frame
    check_exactly_once(two, exp)
    pd.testing.assert_frame_equal(comparable(one), comparable(two))


def test_chunk_size_is_one_for_few_points_and_bounded_for_many():
    from wus_sim.experiments.runner import chunk_size

    assert chunk_size(1, 2) == chunk_size(31, 2) == 1
    assert chunk_size(100_000, 2) == 32 and chunk_size(100_000, 64) == 32
    for n in (1, 10, 100, 1000, 10**5):
        for jobs in (1, 2, 8):
            size = chunk_size(n, jobs)
            assert 1 <= size <= 32
            assert size == 1 or -(-n // size) >= 16 * jobs  # every worker gets at least 16 tasks


def test_files_written_and_every_column_documented(tmp_path):
    exp = experiment()
    result = run_experiment(exp, tmp_path, point_fn=fake_point, jobs=1)
    for name in ("results.csv", "results.parquet", "columns.md", "columns.json", "config.resolved.yaml",
                 JOURNAL_NAME):
        assert (tmp_path / name).is_file(), name
    documented = {c.name for c in columns()}
    assert set(result.frame.columns) <= documented
    md = (tmp_path / "columns.md").read_text()
    for name in result.frame.columns:
        assert f"| `{name}` |" in md
    assert "undocumented" not in md
    listed = [c["name"] for c in json.loads((tmp_path / "columns.json").read_text())]
    assert listed == list(result.frame.columns)
    parquet, csv = read_results(tmp_path / "results.parquet"), read_results(tmp_path / "results.csv")
    pd.testing.assert_frame_equal(parquet, result.frame)
    pd.testing.assert_frame_equal(csv, result.frame, check_dtype=False, atol=1e-12)
    assert read_results(tmp_path).shape == result.frame.shape


def test_resume_skips_journaled_points_and_survives_a_torn_line(tmp_path, monkeypatch):
    exp = experiment()
    log = tmp_path / "calls.log"
    monkeypatch.setenv("WUS_FAKE_LOG", str(log))
    full = run_experiment(exp, tmp_path / "a", point_fn=fake_point).frame
    journal = tmp_path / "a" / JOURNAL_NAME
    lines = journal.read_text().splitlines(keepends=True)
    kept = lines[: len(lines) // 2]
    # a line cut short by a kill: no newline, invalid JSON
    journal.write_text("".join(kept) + lines[len(kept)][:25])
    log.unlink()
    resumed = run_experiment(exp, tmp_path / "a", point_fn=fake_point, resume=True)
    rerun = log.read_text().split()
    kept_hashes = {json.loads(line)["hash"] for line in kept}
    assert not kept_hashes & set(rerun), "journaled points were simulated again"
    assert len(rerun) == exp.num_points - len(kept)
    assert resumed.num_resumed == len(kept)
    pd.testing.assert_frame_equal(comparable(resumed.frame), comparable(full))
    # the torn line was cut off; the journal now holds each point once
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert sorted(e["hash"] for e in entries) == sorted({point_hash(p) for p in exp.points()})


def test_resume_redoes_points_journaled_by_another_model_version(tmp_path, monkeypatch):
    from wus_sim.experiments import runner

    exp = experiment()
    run_experiment(exp, tmp_path, point_fn=fake_point)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("WUS_FAKE_LOG", str(log))
    same = run_experiment(exp, tmp_path, point_fn=fake_point, resume=True)
    assert same.num_stale == 0 and not log.exists()
    monkeypatch.setattr(runner, "model_fingerprint", lambda point_fn=None, points=None: "fn:changed")
    again = run_experiment(exp, tmp_path, point_fn=fake_point, resume=True)
    assert again.num_stale == exp.num_points and again.num_resumed == 0
    assert len(log.read_text().split()) == exp.num_points
    # the redone points are journaled after the stale ones; a further resume under the same
    # model takes the fresh entries and simulates nothing (the stale ones must not win)
    log.unlink()
    third = run_experiment(exp, tmp_path, point_fn=fake_point, resume=True)
    assert third.num_stale == 0 and third.num_resumed == exp.num_points and not log.exists()
    pd.testing.assert_frame_equal(comparable(third.frame), comparable(again.frame))


def test_shipped_model_fingerprint_follows_the_sources():
    from wus_sim.experiments.runner import model_fingerprint
    from wus_sim.experiments.records import simulate_point

    fp = model_fingerprint(simulate_point)
    assert fp.startswith("sim:") and fp == model_fingerprint()
    assert model_fingerprint(fake_point).startswith("fn:")


def test_run_without_resume_starts_over(tmp_path, monkeypatch):
    exp = experiment()
    run_experiment(exp, tmp_path, point_fn=fake_point)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("WUS_FAKE_LOG", str(log))
    run_experiment(exp, tmp_path, point_fn=fake_point)
    assert len(log.read_text().split()) == exp.num_points
    assert len(read_journal(tmp_path / JOURNAL_NAME)) == exp.num_points


def _interrupted_after(n):
    """:func:`fake_point`, interrupted (Ctrl-C) at its call *n* + 1 (the same model to the
    journal, which keys entries by the function's name)."""
    import functools

    calls = []

    @functools.wraps(fake_point)
    def point_fn(point):
        if len(calls) == n:
            raise KeyboardInterrupt
        calls.append(point)
        return fake_point(point)
    return point_fn


def test_a_fresh_run_into_an_interrupted_one_is_refused_not_started_over(tmp_path, monkeypatch):
    """The journal of an interrupted run is not truncated by running the same experiment
    again without --resume: the run is refused, naming both ways on; --resume continues,
    --overwrite starts over."""
    exp = experiment()
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, tmp_path, point_fn=_interrupted_after(3))
    journal = tmp_path / JOURNAL_NAME
    before = journal.read_bytes()
    assert len(read_journal(journal)) == 3
    with pytest.raises(ConfigError, match="holds 3 finished points of an interrupted run of 't'; add --resume "
                                          "to continue it, or --overwrite to start over"):
        run_experiment(exp, tmp_path, point_fn=fake_point)
    assert journal.read_bytes() == before
    log = tmp_path / "calls.log"
    monkeypatch.setenv("WUS_FAKE_LOG", str(log))
    resumed = run_experiment(exp, tmp_path, point_fn=fake_point, resume=True)
    assert resumed.num_resumed == 3 and len(log.read_text().split()) == exp.num_points - 3
    # a finished run may be run again from scratch, as before
    log.unlink()
    run_experiment(exp, tmp_path, point_fn=fake_point)
    assert len(log.read_text().split()) == exp.num_points
    # and an interrupted one started over on request
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, tmp_path, point_fn=_interrupted_after(2))
    log.unlink()
    run_experiment(exp, tmp_path, point_fn=fake_point, overwrite=True)
    assert len(log.read_text().split()) == exp.num_points


def test_limit_and_reduced(tmp_path):
    doc = {**DOC, "reduce": {"topology": ["tpu-v3-32"]}}
    exp = experiment(doc)
    assert len(run_experiment(exp, tmp_path / "l", point_fn=fake_point, limit=5).frame) == 10
    reduced = run_experiment(exp, tmp_path / "r", point_fn=fake_point, reduced=True).frame
    assert set(reduced["topology"]) == {"tpu-v3-32"}
    assert len(reduced) == 2 * len(exp.points(reduced=True))


def test_bad_jobs_and_limit():
    with pytest.raises(ConfigError, match="--jobs"):
        run_experiment(experiment(), "/nonexistent/never", point_fn=fake_point, jobs=0)
    with pytest.raises(ConfigError, match="--limit: 0 must be a whole number >= 1"):
        run_experiment(experiment(), "/nonexistent/never", point_fn=fake_point, limit=0)


KILL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_experiments_fake import fake_point
    from wus_sim.experiments.runner import run_experiment
    from wus_sim.experiments.spec import parse_experiment
    exp = parse_experiment({doc!r}, name="kill")
    run_experiment(exp, {out!r}, point_fn=fake_point, jobs=2, resume={resume!r})
""")

KILL_DOC = {"workloads": ["resnet50", "transformer-big", "bert-large"],
            "topologies": ["tpu-v3-32", "tpu-v3-128", "tpu-v3-512", "tpu-v3-2048"],
            "sweep": {"per_replica_batch": [1, 2, 4, 8, 16]}}


def test_sigkill_mid_run_then_resume_runs_each_point_exactly_once(tmp_path):
    """A real kill: the run is SIGKILLed (workers too) after some points, then resumed."""
    out = tmp_path / "out"
    log = tmp_path / "calls.log"
    env = {**os.environ, "WUS_FAKE_SLEEP_S": "0.05", "WUS_FAKE_LOG": str(log)}
    script = KILL_SCRIPT.format(tests=str(TESTS), doc=KILL_DOC, out=str(out), resume=False)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = out / JOURNAL_NAME
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            if journal.is_file() and journal.read_bytes().count(b"\n") >= 10:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.01)
        else:
            pytest.fail("the run did not journal 10 points in 30 s")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its worker processes
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    exp = parse_experiment(KILL_DOC, name="kill")
    before = read_journal(journal)
    assert 10 <= len(before) < exp.num_points, "the kill must land mid-run"
    assert not (out / "results.csv").exists()
    calls_before = log.read_text().split()

    env["WUS_FAKE_SLEEP_S"] = "0"
    script = KILL_SCRIPT.format(tests=str(TESTS), doc=KILL_DOC, out=str(out), resume=True)
    subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, check=True, timeout=60)
    calls_after = log.read_text().split()[len(calls_before):]
    assert not set(before) & set(calls_after), "finished points were simulated again"
    # every point not journaled before the kill ran exactly once after it
    assert sorted(calls_after) == sorted(set(point_hash(p) for p in exp.points()) - set(before))
    df = read_results(out / "results.parquet")
    check_exactly_once(df, exp)
    assert (df["status"] == "ok").all()


def test_dask_local_cluster_gives_the_same_results(tmp_path):
    distributed = pytest.importorskip("distributed")
    exp = experiment()
    local = run_experiment(exp, tmp_path / "local", point_fn=fake_point).frame
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        result = run_experiment(exp, tmp_path / "dask", point_fn=fake_point, scheduler=cluster.scheduler_address)
    pd.testing.assert_frame_equal(comparable(result.frame), comparable(local))
    assert len(read_journal(tmp_path / "dask" / JOURNAL_NAME)) == exp.num_points


def test_dask_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'wus-sim\[dask\]'"):
        run_experiment(experiment(), tmp_path, point_fn=fake_point, scheduler="tcp://127.0.0.1:1")


def test_progress_bar_on_stderr_only_when_asked(tmp_path, capsys):
    exp = experiment()
    run_experiment(exp, tmp_path / "a", point_fn=fake_point, progress=True)
    err = capsys.readouterr().err
    assert f"{exp.num_points}/{exp.num_points}" in err and "points" in err
    run_experiment(exp, tmp_path / "b", point_fn=fake_point)  # default: only on a terminal
    assert capsys.readouterr().err == ""


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(st.integers(1, 120), min_size=1, max_size=60), jobs=st.integers(1, 8))
def test_worker_chunks_keep_runs_of_batches_together(runs, jobs):
    """Worker tasks: every point once, in order, at most 64 a task, at least 16 tasks a worker
    (or one a point), and a run of points that differ only in the batch is not cut in two when
    it is no longer than a task's usual size (which is where the run's collectives are shared)."""
    from wus_sim.experiments.runner import worker_chunks

    todo, run_of = [], []
    for r, length in enumerate(runs):
        for b in range(length):
            point = {"workload": "resnet50", "link_GBps": float(10 + r), "per_replica_batch": b + 1}
            todo.append((len(todo), f"h{len(todo)}", point))
            run_of.append(r)
    chunks = worker_chunks(todo, jobs)
    assert [item for chunk in chunks for item in chunk] == todo
    assert all(1 <= len(chunk) <= 64 for chunk in chunks)
    n = len(todo)
    assert len(chunks) >= min(n, 16 * jobs)
    usual = min(32, n // (16 * jobs))
    chunk_of = [c for c, chunk in enumerate(chunks) for _ in chunk]
    for r, length in enumerate(runs):
        if length <= usual:
            assert len({chunk_of[i] for i in range(n) if run_of[i] == r}) == 1, (r, length)
