"""Faults with real processes: SIGKILL/SIGTERM at random moments, two runs on one folder, torn
journal lines. Each ends with every point exactly once, results equal to an uninterrupted
run's, and no worker process left behind.

The normal suite kills 3 times; ``-m slow`` runs the issue's 20.
"""

import json
import os
from pathlib import Path
import random
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from wus_sim.experiments.runner import JOURNAL_NAME, read_journal
from wus_sim.experiments.spec import load_experiment, point_hash

LINKS = [10 * i for i in range(1, 13)]


def _experiment(tmp_path, latencies=(1, 2)):
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump({
        "name": "faults", "workloads": ["ncf"], "topologies": ["torus:4x4"], "optimizers": ["adam"],
        "sweep": {"link_GBps": LINKS, "hop_latency_us": list(latencies)}}))
    return path


def _cmd(exp, out, *extra):
    return [sys.executable, "-m", "wus_sim", "run", str(exp), "--out", str(out), "-q", "--no-plots", *extra]


def _processes_mentioning(text):
    """Pids of live processes whose command line contains *text* (workers inherit the parent's)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            pids.append(int(proc.name))
    return pids


def _no_orphans(out, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _processes_mentioning(str(out)):
            return True
        time.sleep(0.05)
    return False


def _comparable(out):
    df = pd.read_csv(out / "results.csv")
    return df.drop(columns=["wall_s"]).sort_values(["point_index", "strategy"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    exp = _experiment(tmp)
    out = tmp / "ref"
    subprocess.run(_cmd(exp, out, "--jobs", "1"), check=True, timeout=120)
    return exp, _comparable(out)


def _kill_and_resume(tmp_path, reference, kills, seed):
    exp, expected = reference
    out = tmp_path / f"killed-{seed}"
    rng = random.Random(seed)
    for k in range(kills):
        proc = subprocess.Popen(_cmd(exp, out, "--jobs", "2", *(["--resume"] if k else [])),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.3, 1.5))
        sig = rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGTERM])
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert _no_orphans(out), f"kill {k} ({sig.name}) left workers: {_processes_mentioning(str(out))}"
        if sig == signal.SIGTERM and proc.returncode == 130:
            assert b"--resume" in err  # an interrupted run says how to resume
        assert b"Traceback" not in err
    subprocess.run(_cmd(exp, out, "--jobs", "2", "--resume"), check=True, timeout=120)
    assert _no_orphans(out)
    hashes = [json.loads(line)["hash"] for line in (out / JOURNAL_NAME).read_text().splitlines()
              if line.strip() and line.startswith("{") and line.endswith("}")]
    points = load_experiment(exp).points()
    assert sorted(set(hashes)) == sorted(point_hash(p) for p in points)
    assert len(hashes) == len(set(hashes)), "a point was journaled twice"
    pd.testing.assert_frame_equal(_comparable(out), expected)


def test_killed_at_random_moments_then_resumed(tmp_path, reference):
    _kill_and_resume(tmp_path, reference, kills=3, seed=1)


@pytest.mark.slow
def test_killed_20_times_then_resumed(tmp_path, reference):
    _kill_and_resume(tmp_path, reference, kills=20, seed=2)


def test_second_run_into_a_locked_folder_fails_clearly(tmp_path, reference):
    exp = _experiment(tmp_path, latencies=[0.5 * i for i in range(1, 21)])  # 240 points: a few seconds
    out = tmp_path / "shared"
    first = subprocess.Popen(_cmd(exp, out, "--jobs", "1"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (out / JOURNAL_NAME).is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.run(_cmd(exp, out, "--jobs", "1"), capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert "is in use by another wus-sim run (pid" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert _no_orphans(out)
    # the kill released the lock: a resume runs the rest, every point once
    subprocess.run(_cmd(exp, out, "--jobs", "2", "--resume"), check=True, timeout=120)
    entries = read_journal(out / JOURNAL_NAME)
    assert len(entries) == len(load_experiment(exp).points()) == len(pd.read_csv(out / "results.csv")) // 2


def test_folder_of_another_experiment_is_refused_unless_overwrite(tmp_path, reference):
    exp, _ = reference
    out = tmp_path / "o"
    subprocess.run(_cmd(exp, out, "--limit", "2", "--jobs", "1"), check=True, timeout=60)
    other = tmp_path / "other.yaml"
    other.write_text(exp.read_text().replace("name: faults", "name: other"))
    refused = subprocess.run(_cmd(other, out, "--limit", "1"), capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "holds results of experiment 'faults', not of 'other'" in refused.stderr
    resumed = subprocess.run(_cmd(other, out, "--limit", "1", "--resume"), capture_output=True, text=True,
                             timeout=60)
    assert resumed.returncode == 2
    subprocess.run(_cmd(other, out, "--limit", "1", "--overwrite"), check=True, timeout=60)
    assert json.loads((out / "run.json").read_text())["experiment"] == "other"
    assert len(pd.read_csv(out / "results.csv")) == 2


def test_torn_and_garbage_journal_lines_lose_nothing(tmp_path, reference):
    exp, expected = reference
    out = tmp_path / "torn"
    subprocess.run(_cmd(exp, out, "--jobs", "1"), check=True, timeout=120)
    lines = (out / JOURNAL_NAME).read_text().splitlines(keepends=True)
    # A garbage line in the middle (e.g. a disk hiccup) and a torn last line (a kill mid-write).
    damaged = lines[:3] + ['{"hash": "torn\n'] + lines[3:-1] + [lines[-1][: len(lines[-1]) // 2]]
    (out / JOURNAL_NAME).write_text("".join(damaged))
    entries = read_journal(out / JOURNAL_NAME)
    assert len(entries) == len(lines) - 1  # only the torn last point is lost; nothing after line 3 is
    subprocess.run(_cmd(exp, out, "--jobs", "1", "--resume"), check=True, timeout=120)
    text = (out / JOURNAL_NAME).read_text()
    assert text.endswith("\n")
    assert len(read_journal(out / JOURNAL_NAME)) == len(lines)
    pd.testing.assert_frame_equal(_comparable(out), expected)


def test_read_journal_drops_only_the_torn_tail(tmp_path):
    path = tmp_path / JOURNAL_NAME
    # whole entries (an entry with no rows is damaged: every point has at least one row)
    good = [json.dumps({"hash": f"h{i}", "point": {}, "model": "m", "wall_s": 0.5, "rows": [{"status": "ok"}]})
            for i in range(3)]
    path.write_text(good[0] + "\nnot json\n" + good[1] + "\n[1, 2]\n" + good[2] + "\n" + good[2][:9])
    assert sorted(read_journal(path)) == ["h0", "h1", "h2"]
    size = path.stat().st_size
    read_journal(path, repair=True)
    assert path.stat().st_size == size - 9 and path.read_text().endswith("\n")
