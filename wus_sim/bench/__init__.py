"""Benchmark: simulation wall time of registered cases, as flat records.

A case is a name, an engine label, an untimed ``setup()`` and a timed ``run(state)``
that returns what it simulated (:class:`Measurement`). Cases live in one ordered
registry (:mod:`wus_sim.bench.builders`; the shipped cases are :mod:`wus_sim.bench.cases`),
so other parts of wus-sim add theirs with :func:`register` and the loop
in :func:`run_bench` does not change::

    register(BenchCase("step: bert 2048 replicas", "timeline", setup=..., run=..., quick=False))

Each case runs ``repeat`` times (fresh ``setup()`` each time, so per-topology caches
are part of the timed work); the record holds the median and minimum wall time,
the messages per second (``events / median wall``) and, from one extra untimed
run under :mod:`tracemalloc`, the peak Python/numpy memory. A case that cannot run
here (the fast engine does not support it, its experiment file is not found) is a
record with ``status = "unavailable"`` and a ``reason``, not a crash.

Record fields (one flat dict per case):

========================  ====================================================
``case``                  registry name
``engine``                engine label (``fast``, ``simpy``, ``cli``, ...)
``problem``               what is simulated; cases sharing it must agree
``status``                ``ok`` or ``unavailable`` (then ``reason`` says why)
``sim_time_s``            simulated time, seconds
``events``                messages (per hop, per piece) the simulation handled
``wall_median_s``         median wall time of ``repeat`` runs, seconds
``wall_min_s``            fastest run, seconds
``messages_per_s``        ``events / wall_median_s``
``peak_mem_bytes``        tracemalloc peak of one run (``None`` if not measured)
``repeat``                runs timed
========================  ====================================================
"""

import os
import platform
import statistics
import sys
import time
import tracemalloc

from .builders import (CASES, BenchCase, Measurement, Unavailable, cli_case, cluster_experiment_case,  # noqa: F401
                       collective_case, collective_problem, experiment_case, point_case, register, step_case)
from . import cases as _cases  # noqa: F401  (registers the shipped cases)
from ..inputs.units import format_bytes, format_time

__all__ = [
    "Measurement", "BenchCase", "CASES", "register", "collective_problem", "collective_case", "cli_case", "step_case", "experiment_case",
    "cluster_experiment_case",
    "run_case", "run_bench", "format_table", "machine_info", "Unavailable",
]


# ===================================================================== running
def run_case(case, *, repeat=5, memory=True):
    """Time *case*; return its record (see the module docstring)."""
    repeat = repeat if case.max_runs is None else min(repeat, case.max_runs)
    rec = {"case": case.name, "engine": case.engine, "problem": case.problem, "status": "ok",
           "sim_time_s": None, "events": None, "wall_median_s": None, "wall_min_s": None,
           "messages_per_s": None, "peak_mem_bytes": None, "repeat": repeat}
    walls = []
    result = None
    try:
        for _ in range(repeat):
            state = case.setup()
            try:
                t0 = time.perf_counter()
                result = case.run(state)
                walls.append(time.perf_counter() - t0)
            finally:
                if case.teardown is not None:
                    case.teardown(state)
        if memory and case.measure_memory:
            state = case.setup()
            tracemalloc.start()
            try:
                case.run(state)
                rec["peak_mem_bytes"] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    except Unavailable as exc:
        rec["status"] = "unavailable"
        rec["reason"] = str(exc)
        return rec
    med = statistics.median(walls)
    rec.update(sim_time_s=result.sim_time_s, events=result.events, wall_median_s=med, wall_min_s=min(walls),
               messages_per_s=result.events / med if med > 0 else None)
    return rec


def run_bench(*, quick=False, repeat=5, names=None, memory=True, progress=None):
    """Run the registered cases (the ``quick`` set, or the full set; *names* filters by
    substring) and return their records in registry order."""
    # an opt-in case runs when a name picks it, in either set
    cases = [c for c in CASES.values() if (c.quick if quick else c.full) or (names and c.opt_in)]
    if names:
        cases = [c for c in cases if any(n in c.name for n in names)]
    records = []
    for case in cases:
        if progress:
            progress(case)
        records.append(run_case(case, repeat=repeat, memory=memory))
    return records


def machine_info():
    """Where the figures were measured."""
    import numpy

    return {"python": platform.python_version(), "numpy": numpy.__version__, "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "system": platform.system(), "load_average": _load_average(),
            # without cached bytecode (PYTHONDONTWRITEBYTECODE) every whole-command case compiles
            # wus-sim's sources again: its start-up is then far above an installed copy's
            "bytecode_cached": not sys.flags.dont_write_bytecode}


def _load_average():
    """The 1-, 5- and 15-minute load averages when the bench finished (``None`` where the system
    has none): figures from a shared machine are slower by about ``load / cpus``."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _rate(x):
    return "-" if x is None else f"{x:.3g}"


def format_table(records):
    """A plain-text table of the records (markdown-compatible)."""
    head = ["case", "engine", "simulated time", "wall (median)", "messages/s", "peak memory"]
    rows = []
    for r in records:
        if r["status"] != "ok":
            rows.append([r["case"], r["engine"], r["status"], "-", "-", "-"])
            continue
        sim = "-" if r["sim_time_s"] is None else format_time(r["sim_time_s"])
        rows.append([r["case"], r["engine"], sim, format_time(r["wall_median_s"]),
                     _rate(r["messages_per_s"]),
                     "-" if r["peak_mem_bytes"] is None else format_bytes(r["peak_mem_bytes"])])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    out += [f"unavailable: {r['case']}: {r['reason']}" for r in records if r["status"] != "ok"]
    return "\n".join(out)


# the registry's cases (a module of their own: they only call the builders above); imported
