"""Memory of the code under test, not of whatever ran before it in the test process.

Why not ``resource.getrusage`` or ``os.wait4``'s ``ru_maxrss``: on Linux a process's max RSS
starts at the peak of the process that started it. ``exec`` records the outgoing address space's
high-water mark in the new program's ``maxrss``, and ``subprocess`` starts a child by ``vfork``,
whose outgoing address space is the parent's: ``python -c pass`` started from a pytest process
that once held 1.2 GB reports 1.2 GB (as the whole suite did, one test after another failing a
1 GB budget that each passed alone). Two measurements that do not inherit:

* ``run_measured``: the program runs as the child of a small launcher, so what its ``maxrss``
  inherits is the launcher's peak (a bare interpreter, about 10 MiB), never the test process's.
* ``traced_peak``: ``tracemalloc``'s peak around one in-process call, reset for that call: the
  Python objects and numpy buffers it allocated, whatever the process held before.
"""

import os
import subprocess
import sys
import time
import tracemalloc

__all__ = ["Measured", "run_measured", "traced_peak"]

_LAUNCHER = """\
import os, subprocess, sys
report = int(sys.argv[1])
child = subprocess.Popen([sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(child.pid, 0)
os.write(report, f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}".encode())
"""
"""Runs ``python ARGS`` and writes its exit code and max RSS (KiB) to the file descriptor it is given."""


class Measured:
    """What ``run_measured`` saw of one run."""

    def __init__(self, returncode, stdout, stderr, wall_s, max_rss_kb):
        self.returncode = returncode
        """The program's exit code (negative: the signal that ended it); None if it was killed on time-out."""
        self.stdout = stdout
        self.stderr = stderr
        self.wall_s = wall_s
        """Wall time from start to exit, s."""
        self.max_rss_kb = max_rss_kb
        """The program's own peak resident set, KiB (None if it was killed on time-out)."""


def run_measured(args, *, cwd=None, env=None, timeout_s=None, stdout=subprocess.DEVNULL, text=False):
    """Run ``python ARGS`` (``args`` as for the interpreter: ``["-m", "wus_sim", ...]``) in a new
    session and return a ``Measured``. On time-out the whole session is killed and ``returncode``
    is None. ``stdout`` is discarded unless ``subprocess.PIPE`` is passed."""
    report_r, report_w = os.pipe()
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(report_w), *args], cwd=cwd, env=env,
                                stdout=stdout, stderr=subprocess.PIPE, pass_fds=(report_w,),
                                start_new_session=True, text=text)
    finally:
        os.close(report_w)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        wall_s = time.monotonic() - t0
        with os.fdopen(report_r, "rb") as report:
            code, rss_kb = (int(word) for word in report.read().split())
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        os.close(report_r)
        return Measured(None, out, err, time.monotonic() - t0, None)
    return Measured(code, out, err, wall_s, rss_kb)


def traced_peak(call, *args, **kwargs):
    """``(call's result, peak bytes traced during the call)``: tracemalloc's peak, counted from
    zero at the call's start (what the process held before is not counted). Raises what ``call``
    raises. Tracing slows allocation-heavy Python code a few times over: time the call apart."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        result = call(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if started:
            tracemalloc.stop()
    return result, peak - base
