"""A real Dask cluster: ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1 (issue 45,
item 4), started by the test (:class:`wus_sim.bench.dask_cluster.LoopbackCluster`) and killed in
its teardown whatever happens. ``wus-sim run --scheduler`` on it

1. gives the rows of ``--jobs 1`` (every column but ``wall_s``, the one measured on the clock);
2. with one worker SIGKILLed mid-run: every row once, the rows of ``--jobs 1`` (Dask runs the lost
   worker's points again on the other);
3. with the scheduler SIGKILLed mid-run: exit 130, one line with the ``--resume`` hint; the hint
   run here with ``--jobs 1``, and on a new cluster, loses nothing: the rows of ``--jobs 1``.

Kills wait on the journal (points.jsonl) holding a fifth of the points, not on a sleep. The
reduced form (300 points) runs in the normal suite; the slow one: 3,000.
"""

import os
from pathlib import Path
import shlex
import shutil
import subprocess
import sys
import time

import pytest
import yaml

pytest.importorskip("distributed")

from wus_sim.bench.dask_cluster import LoopbackCluster  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
TIMING = ["wall_s"]
"""The results' columns measured on the clock (columns.md: wall_s, 'Wall-clock seconds the simulator
spent'); every other column is a function of the point."""

SIZES = [pytest.param(300, id="300-points"), pytest.param(3000, id="3000-points", marks=pytest.mark.slow)]


def _sweep(tmp_path, n):
    """A sweep of *n* cheap points (resnet50 on a v3-32, 20 bandwidths x n/20 batches; a few ms each)."""
    path = tmp_path / f"sweep{n}.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"dask{n}", "workloads": ["resnet50"], "topologies": ["tpu-v3-32"], "optimizers": ["adam"],
        "strategies": ["replicated", "sharded"],
        "sweep": {"link_GBps": list(range(10, 201, 10)), "per_replica_batch": list(range(1, n // 20 + 1))},
        "plots": []}))
    return path


def _command(*argv):
    return [sys.executable, "-m", "wus_sim", "run", *map(str, argv), "-q", "--no-plots"]


def _run(*argv, timeout=600):
    proc = subprocess.run(_command(*argv), cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _rows(out):
    """results.csv as text (no parsing that could hide a difference), less the timing columns."""
    import pandas as pd

    frame = pd.read_csv(out / "results.csv", dtype=str, keep_default_na=False)
    return frame.drop(columns=TIMING)


def _same_rows(out, reference, n):
    import pandas as pd

    rows = _rows(out)
    assert len(rows) == 2 * n and rows["point_hash"].nunique() == n  # every point once, both strategies
    assert not rows.duplicated(["point_hash", "strategy"]).any()
    pd.testing.assert_frame_equal(rows, reference)


def _journaled(out):
    try:
        with open(out / "points.jsonl", "rb") as fh:
            return fh.read().count(b"\n")
    except OSError:
        return 0


def _start_and_wait(argv, out, count, timeout=120):
    """Start ``wus-sim run ARGV`` and return it once *count* points are journaled."""
    proc = subprocess.Popen(_command(*argv), cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while _journaled(out) < count:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, f"{count} points not journaled in {timeout} s"
            time.sleep(0.02)
    except BaseException:
        _stop(proc)
        raise
    return proc


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
    proc.communicate()


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """``--jobs 1`` rows of each sweep size, made once."""
    made = {}

    def get(n):
        if n not in made:
            where = tmp_path_factory.mktemp(f"jobs1-{n}")
            _run(_sweep(where, n), "--out", where / "out", "--jobs", "1")
            made[n] = _rows(where / "out")
        return made[n]

    return get


@pytest.fixture
def cluster():
    with LoopbackCluster(workers=2, env=ENV) as c:
        yield c


@pytest.mark.parametrize("n", SIZES)
def test_a_sweep_on_the_cluster_gives_the_rows_of_jobs_1(tmp_path, cluster, references, n):
    assert cluster.address.startswith("tcp://127.0.0.1:")
    _run(_sweep(tmp_path, n), "--out", tmp_path / "out", "--scheduler", cluster.address)
    _same_rows(tmp_path / "out", references(n), n)


@pytest.mark.parametrize("n", SIZES)
def test_a_worker_killed_mid_run_loses_no_row_and_doubles_none(tmp_path, cluster, references, n):
    out = tmp_path / "out"
    proc = _start_and_wait([_sweep(tmp_path, n), "--out", out, "--scheduler", cluster.address], out, n // 5)
    try:
        cluster.kill_worker(0)
        done_at_kill = _journaled(out)
        _, err = proc.communicate(timeout=600)
    finally:
        _stop(proc)
    assert done_at_kill < n, "the sweep ended before the kill: make it larger"
    assert cluster.workers[0].returncode == -9 and cluster.workers[1].poll() is None
    assert proc.returncode == 0, err[-2000:]
    _same_rows(out, references(n), n)


@pytest.mark.parametrize("n", SIZES)
def test_a_lost_scheduler_is_one_line_with_the_resume_hint_and_resuming_loses_nothing(tmp_path, references, n):
    out = tmp_path / "out"
    with LoopbackCluster(workers=2, env=ENV) as cluster:
        proc = _start_and_wait([_sweep(tmp_path, n), "--out", out, "--scheduler", cluster.address], out, n // 5)
        try:
            cluster.kill_scheduler()
            t0 = time.monotonic()
            _, err = proc.communicate(timeout=60)  # bounded: no hang on the dead scheduler
        finally:
            _stop(proc)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130 and len(lines) == 1, err[-3000:]
    assert "lost the Dask scheduler" in lines[0] and "Resume with: wus-sim run " in lines[0], lines[0]
    assert time.monotonic() - t0 < 30
    done = _journaled(out)
    assert 0 < done < n
    # the hint, as printed: without the dead address (runs here), or given a new cluster's
    hint = shlex.split(lines[0].split("Resume with: ", 1)[1].split(" (here, ", 1)[0])
    assert hint[:2] == ["wus-sim", "run"] and "--resume" in hint and "--scheduler" not in hint
    here = tmp_path / "here"
    shutil.copytree(out, here)
    _run(*[here if a == str(out) else a for a in hint[2:]], "--jobs", "1")
    _same_rows(here, references(n), n)
    with LoopbackCluster(workers=2, env=ENV) as cluster:
        proc = _run(*hint[2:], "--scheduler", cluster.address)
    _same_rows(out, references(n), n)


def test_a_scheduler_that_stops_answering_is_found_lost_in_a_bounded_time(tmp_path):
    # SIGSTOP: the scheduler's connection stays open and says nothing (a hung or partitioned
    # machine); asked after QUIET_S (1 s here, 10 s by default) without a finished point, it has
    # --scheduler-timeout (1 s) to answer. Before, the run waited for ever.
    import signal

    n = 300
    out = tmp_path / "out"
    with LoopbackCluster(workers=2, env=ENV) as cluster:
        code = ("import sys; import wus_sim.experiments.dask_points as d; d.QUIET_S = 1.0; "
                "from wus_sim.cli import main; sys.argv[0] = 'wus-sim'; sys.exit(main(sys.argv[1:]))")
        argv = ["run", str(_sweep(tmp_path, n)), "--out", str(out), "-q", "--no-plots", "--scheduler",
                cluster.address, "--scheduler-timeout", "1"]
        proc = subprocess.Popen([sys.executable, "-c", code, *argv], cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            while _journaled(out) < n // 5:
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                time.sleep(0.02)
            os.kill(cluster.scheduler.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            _, err = proc.communicate(timeout=60)
            waited = time.monotonic() - t0
        finally:
            _stop(proc)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130 and len(lines) == 1, err[-3000:]
    assert "lost the Dask scheduler" in lines[0] and "no answer in 1 s" in lines[0] and "--resume" in lines[0]
    assert waited < 20, waited
    assert 0 < _journaled(out) < n
