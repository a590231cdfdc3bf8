"""``plan --search --jobs N``: the same output for every N, a bad N one line, and a Ctrl-C to the
whole process group (what a terminal sends) stops the workers and prints the best so far."""

import json
import os
import queue
from pathlib import Path
import signal
import subprocess
import sys
import threading
import time

import pytest

from run_cli import run

REPO = Path(__file__).resolve().parents[2]
SMALL = ("llama3-8b", "-t", "torus:2x4")
"""8 chips: tensor sizes 1, 2, 4 and 8, four parts for the workers."""


def test_jobs_change_nothing_in_the_output():
    out = {}
    for jobs in ("1", "2"):
        rc, text, err = run("plan", *SMALL, "--search", "--json", "--jobs", jobs)
        assert rc == 0, err
        out[jobs] = json.loads(text)
    assert out["1"] == out["2"] and out["1"]["complete"] is True


@pytest.mark.parametrize("bad", ["0", "-1", "1025"])
def test_a_bad_jobs_count_is_one_line(bad):
    rc, out, err = run("plan", *SMALL, "--search", "--jobs", bad)
    assert rc == 2 and "--jobs" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ctrl_c_to_the_group_stops_the_workers_and_prints_the_best_so_far():
    # GPT-3 on the whole v5p pod (8,960 chips): tens of seconds of work, its first tensor size
    # several seconds, so a best so far comes back long before the search could end on any machine
    argv = [sys.executable, "-m", "wus_sim", "plan", "gpt3-175b", "-t", "tpu-v5p-17920", "--search", "--json",
            "--jobs", "2", "--progress"]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    # both pipes read by threads, so the search never blocks on a full pipe and the wait has a deadline
    out, lines = [], queue.Queue()

    def read_stderr():
        for line in iter(proc.stderr.readline, ""):
            lines.put(line)
        lines.put(None)  # its end

    readers = [threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),
               threading.Thread(target=read_stderr, daemon=True)]
    for t in readers:
        t.start()
    try:
        err = []
        while True:  # a progress line with a best so far: a worker's candidates are back
            line = lines.get(timeout=120)
            assert line is not None, "the search ended before a progress line named a best so far: " + "".join(err)
            err.append(line)
            assert "plan --search:" in line, line
            if "best so far" in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    for t in readers:
        t.join(timeout=10)
    while (line := lines.get(timeout=10)) is not None:
        err.append(line)
    err = "".join(err)
    assert proc.returncode == 130 and "Traceback" not in err and err.strip().endswith("interrupted"), err[-800:]
    doc = json.loads(out[0])
    assert doc["stopped"] == "interrupted" and doc["meshes_searched"] < doc["meshes"] and doc["feasible"] >= 1
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):  # no worker outlives the search
        os.killpg(proc.pid, 0)
