"""Benchmark: simulation wall time of registered cases, as flat records.

A case is a name, an engine label, an untimed ``setup()`` and a timed ``run(state)``
that returns what it simulated (:class:`Measurement`). Cases live in one ordered
registry, so other parts of wus-sim add theirs with :func:`register` and the loop
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

from dataclasses import dataclass
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Callable

from .inputs.shipped import shipped_dir
from .inputs.units import MiB, format_bytes, format_time

__all__ = [
    "Measurement", "BenchCase", "CASES", "register", "collective_problem", "collective_case", "cli_case", "step_case", "experiment_case",
    "run_case", "run_bench", "format_table", "machine_info", "Unavailable",
]


class Unavailable(Exception):
    """Raised by a case's setup when the case cannot run here (see the module docstring)."""


@dataclass(frozen=True)
class Measurement:
    """What a timed run reports."""

    sim_time_s: float
    events: int


@dataclass(frozen=True)
class BenchCase:
    """One benchmark case."""

    name: str
    engine: str
    setup: Callable[[], object]
    """Untimed preparation; returns the state passed to ``run``. May raise :class:`Unavailable`."""
    run: Callable[[object], Measurement]
    """The timed work."""
    quick: bool = False
    """Part of the reduced ``--quick`` set (small, for tests)."""
    problem: str = ""
    """What is simulated; cases with equal ``problem`` must give the same simulated time."""
    measure_memory: bool = True
    full: bool = True
    """Part of the full set."""


CASES = {}
"""The registry, in insertion order: name -> :class:`BenchCase`."""


def register(case):
    """Add *case* to :data:`CASES` (replacing one of the same name) and return it."""
    CASES[case.name] = case
    return case


# ================================================================ case builders
def collective_problem(topology, op, algorithm, nbytes, **kw):
    """The ``problem`` of a collective case: cases (and CLI cases) simulating the same one share it."""
    return f"{op} {algorithm} {format_bytes(nbytes)} on {topology}" + "".join(
        f" {k}={v}" for k, v in sorted(kw.items()))


def collective_case(name, topology, op, algorithm, nbytes, *, engine="fast", quick=False, full=True, faults=None,
                    **kw):
    """A case simulating one collective on *engine* (``fast`` calls the fast engine
    directly; other names go through ``simulate_collective(engine=...)``). *faults*:
    ``load_topology`` keywords of failed and slow links (``failed_links``, ``slow_links``, ``seed``)."""
    faults = dict(faults or {})
    problem = collective_problem(topology, op, algorithm, nbytes, **kw, **faults)

    def setup():
        from .hardware.topology_files import load_topology

        topo = load_topology(topology, **faults)
        if engine == "fast":
            from .collectives import fast_engine

            reason = fast_engine.why_unsupported(topo, op, algorithm,
                                                 **{k: v for k, v in kw.items() if k != "reduce_Bps"})
            if reason is not None:
                raise Unavailable(reason)
            return topo, fast_engine
        from .collectives import simulate_collective

        return topo, simulate_collective

    def run(state):
        topo, impl = state
        if engine == "fast":
            out = impl.run(topo, op, algorithm, nbytes, **kw)
        else:
            out = impl(topo, op, algorithm, nbytes, engine=engine, **kw)
        return Measurement(out.time_s, out.events)

    return BenchCase(name, engine, setup, run, quick=quick, full=full, problem=problem)


def cli_case(name, argv, *, quick=False, full=True, problem=""):
    """A case timing a whole ``wus-sim ...`` command in a fresh interpreter (imports
    included); *argv* includes ``--json`` so the simulated time can be read back, or is a
    command that prints no JSON (``--version``: no simulated time, no events)."""

    def run(_):
        out = subprocess.run([sys.executable, "-m", "wus_sim", *argv], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"wus-sim {' '.join(argv)} failed: {out.stderr.strip()}")
        if "--json" not in argv:
            return Measurement(None, 0)
        doc = json.loads(out.stdout)
        return Measurement(float(doc["time_s"]), int(doc.get("events", 0)))

    return BenchCase(name, "cli", lambda: None, run, quick=quick, full=full, problem=problem, measure_memory=False)


def step_case(name, workload, topology, optimizer=None, *, strategies=("replicated", "sharded"), quick=False,
              full=True, slices=None, faults=None, options=None):
    """A case simulating one point, *strategies* (plan, collectives, SimPy timeline), from
    cold caches; the simulated time is the last strategy's step time, events are SimPy events.
    *slices*: that many slices of *topology* over the data-center network (multislice);
    *faults*: failed/slow cables (keyword arguments of ``topology.with_link_faults``);
    *options*: :class:`~wus_sim.training.step.StepOptions` fields other than the defaults."""

    def setup():
        from .collectives import clear_caches

        clear_caches()
        return None

    def run(_):
        from .hardware.multislice import load_multislice
        from .training.step import StepOptions, simulate_strategies

        topo = topology if slices is None else load_multislice(topology, slices=slices)[1]
        if faults:
            from .hardware.topology_files import load_topology
            from .hardware.link_faults import with_link_faults

            topo = with_link_faults(load_topology(topo) if isinstance(topo, str) else topo, **faults)
        results = simulate_strategies(workload, topo, optimizer, strategies,
                                      options=StepOptions(**options) if options else None).results
        events = sum(r.timeline.events for r in results.values() if r.timeline is not None)
        return Measurement(results[strategies[-1]].step_time_s, events)

    where = topology if slices is None else f"{slices}x {topology}"
    return BenchCase(name, "timeline", setup, run, quick=quick, full=full,
                problem=f"step {workload} {optimizer or 'default'} on {where}")


def point_case(name, point, *, quick=False, full=True):
    """A case simulating one experiment point as ``run`` does (every strategy of it, the rows with
    their bands and validated range), from cold caches; events are the rows it gives."""

    def setup():
        from .collectives import clear_caches

        clear_caches()
        return None

    def run(_):
        from .experiments.records import simulate_point

        rows = simulate_point(point)
        return Measurement(rows[-1]["step_time_s"], len(rows))

    return BenchCase(name, "point", setup, run, quick=quick,
                     problem=f"point {point['workload']} on {point['topology']} with bands")


def experiment_case(name, path, *, jobs=2, quick=False, full=True, extra=()):
    """A case timing ``wus-sim run PATH --jobs N`` end to end in a fresh interpreter (plots
    included); events are the points simulated, simulated time is not applicable. *path*: a
    file, or a callable that writes one and returns its path (the bench's own sweeps)."""
    def setup():
        where = path() if callable(path) else path
        if not os.path.isfile(where):
            raise Unavailable(f"{where} not found (run the benchmark from a source checkout)")
        return where

    def run(path):
        import csv
        import tempfile

        # a fresh output directory per run (no journal to resume from), removed afterwards
        with tempfile.TemporaryDirectory(prefix="wus-bench-") as out_dir:
            argv = [sys.executable, "-m", "wus_sim", "run", path, "--jobs", str(jobs), "--out", out_dir, "--quiet",
                    *extra]
            out = subprocess.run(argv, capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"{' '.join(argv[2:])} failed: {out.stderr.strip()}")
            with open(os.path.join(out_dir, "results.csv")) as fh:
                points = len({row["point_hash"] for row in csv.DictReader(fh)})
        return Measurement(None, points)

    return BenchCase(name, "run", setup, run, quick=quick, full=full,
                     problem=f"experiment {name if callable(path) else path}", measure_memory=False)


WHATIF_SWEEP = {
    "name": "bench_whatif_sweep",
    "description": "The issue-34 what-if grid: 5 workloads x 4 TPU-v3 slices x 5 optimizers x 20 link "
                   "bandwidths x 50 per-replica batches = 100,000 points, both strategies.",
    "workloads": ["resnet50", "transformer-big", "bert-large", "gnmt", "ssd-resnet34"],
    "topologies": ["tpu-v3-32", "tpu-v3-128", "tpu-v3-512", "tpu-v3-2048"],
    "optimizers": ["adam", "sgd", "momentum", "lars", "lamb"],
    "strategies": ["replicated", "sharded"],
    "sweep": {"link_GBps": list(range(10, 201, 10)), "per_replica_batch": list(range(1, 51))},
}
"""The what-if sweep of issue 34 (100,000 points); the bench runs a prefix of it (``--limit``)."""


def _whatif_sweep_file():
    """:data:`WHATIF_SWEEP` as an experiment file in the temporary directory (the same file
    each time), its path."""
    import tempfile

    import yaml

    path = os.path.join(tempfile.gettempdir(), "wus-bench-whatif-sweep.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump({**WHATIF_SWEEP, "plots": []}, fh, sort_keys=False)
    return path


# ======================================================================= cases
_S = 64 * MiB
for _dims in ("32x32", "64x64", "128x128", "256x256"):
    register(collective_case(f"2d all-reduce 64MiB torus:{_dims}", f"torus:{_dims}", "all-reduce", "2d", _S))
register(collective_case("2d all-reduce 64MiB tpu-v3-2048", "tpu-v3-2048", "all-reduce", "2d", _S))
register(collective_case("2d all-reduce 64MiB torus:32x32 (SimPy reference)", "torus:32x32", "all-reduce",
                         "2d", _S, engine="simpy"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32", "torus:32x32", "all-reduce",
                         "halving-doubling", _S, engine="simpy"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32 (window engine)", "torus:32x32",
                         "all-reduce", "halving-doubling", _S, engine="window"))
register(collective_case("ring all-reduce 64MiB torus:32x32", "torus:32x32", "all-reduce", "ring", _S))
register(collective_case("2d all-reduce 64MiB tpu-v3-2048 (api, engine auto)", "tpu-v3-2048", "all-reduce",
                         "2d", _S, engine="auto"))
# issue 34: start-up of short commands (a fresh interpreter each run: Python, numpy, wus-sim)
register(cli_case("wus-sim --version (whole command)", ["--version"]))
register(cli_case("wus-sim collective torus:32x32 2d all-reduce 64MiB (whole command)",
                  ["collective", "-t", "torus:32x32", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB",
                   "--link-GBps", "100", "--hop-latency-us", "1", "--json"],
                  problem=collective_problem("torus:32x32", "all-reduce", "2d", _S) + " cut-through"))
register(cli_case("wus-sim collective tpu-v3-2048 2d all-reduce 64MiB (whole command)",
                  ["collective", "-t", "tpu-v3-2048", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB",
                   "--json"],
                  problem=collective_problem("tpu-v3-2048", "all-reduce", "2d", _S)))
# issue 10: one failed cable (2 links): the detours share links, so an event engine runs it
# (engine auto: the window engine; SimPy as the reference)
register(collective_case("2d all-reduce 64MiB tpu-v3-2048, 1 failed cable (api, engine auto)", "tpu-v3-2048",
                         "all-reduce", "2d", _S, engine="auto", faults={"failed_links": 1, "seed": 0}))
register(collective_case("2d all-reduce 64MiB tpu-v3-2048, 1 failed cable (SimPy reference)", "tpu-v3-2048",
                         "all-reduce", "2d", _S, engine="simpy", faults={"failed_links": 1, "seed": 0}))
# issue 34: the same contended schedules under cut-through, the commands' default routing: the
# window engine, not SimPy, runs them (SimPy remains the reference: same problem, same time)
register(collective_case("2d all-reduce 64MiB tpu-v3-2048, 1 failed cable, cut-through (api, engine auto)",
                         "tpu-v3-2048", "all-reduce", "2d", _S, engine="auto", faults={"failed_links": 1, "seed": 0},
                         routing="cut-through"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32, cut-through (api, engine auto)",
                         "torus:32x32", "all-reduce", "halving-doubling", _S, engine="auto", routing="cut-through"))
register(collective_case("halving-doubling all-reduce 64MiB torus:32x32, cut-through (SimPy reference)",
                         "torus:32x32", "all-reduce", "halving-doubling", _S, engine="simpy", routing="cut-through"))
# the reduced set run by tests: small, one problem on both engines
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8", "torus:8x8", "all-reduce", "2d", MiB,
                         quick=True, full=False))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8 (SimPy)", "torus:8x8", "all-reduce", "2d", MiB,
                         engine="simpy", quick=True, full=False))
register(collective_case("quick: ring all-reduce 1MiB torus:4x4", "torus:4x4", "all-reduce", "ring", MiB,
                         quick=True, full=False))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable", "torus:8x8", "all-reduce", "2d", MiB,
                         engine="auto", quick=True, full=False, faults={"failed_links": "27+x"}))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable (SimPy)", "torus:8x8", "all-reduce",
                         "2d", MiB, engine="simpy", quick=True, full=False, faults={"failed_links": "27+x"}))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable, cut-through", "torus:8x8", "all-reduce",
                         "2d", MiB, engine="auto", quick=True, full=False, faults={"failed_links": "27+x"},
                         routing="cut-through"))
register(collective_case("quick: 2d all-reduce 1MiB torus:8x8, 1 failed cable, cut-through (SimPy)", "torus:8x8",
                         "all-reduce", "2d", MiB, engine="simpy", quick=True, full=False,
                         faults={"failed_links": "27+x"}, routing="cut-through"))
# issue 4: what-if sweeps run thousands of points
_EXPERIMENTS = str(shipped_dir("experiments"))
register(step_case("step: transformer-big adam tpu-v3-2048, both strategies", "transformer-big", "tpu-v3-2048",
                   "adam"))
# issue 24: a step point with its bands and validated range stays under 0.2 s
register(point_case("step point with bands: transformer-big adam tpu-v3-2048, both strategies",
                    {"workload": "transformer-big", "topology": "tpu-v3-2048", "optimizer": "adam"}, quick=True))
# issue 10: one point of each what-if on a 2048-replica slice in under 1 s
register(step_case("step: transformer-big adam tpu-v3-2048, fully-sharded (what-if)", "transformer-big",
                   "tpu-v3-2048", "adam", strategies=("fully-sharded",)))
register(step_case("step: transformer-big adam 2 slices of tpu-v3-2048 over the DCN, both strategies",
                   "transformer-big", "tpu-v3-2048", "adam", slices=2))
register(step_case("step: transformer-big adam tpu-v3-2048, 1 failed cable, both strategies", "transformer-big",
                   "tpu-v3-2048", "adam", faults={"failed_links": 1, "seed": 0}))
# issue 34: the detours' contended schedules run on the window engine under both routings (the
# default cut-through above, and store-and-forward here); SimPy stays the reference
register(step_case("step: transformer-big adam tpu-v3-2048, 1 failed cable, store-and-forward", "transformer-big",
                   "tpu-v3-2048", "adam", faults={"failed_links": 1, "seed": 0},
                   options={"routing": "store-and-forward"}))
register(step_case("step: resnet50 lars tpu-v3-2048, batch norm over 8 cores, both strategies", "resnet50",
                   "tpu-v3-2048", options={"bn_group_replicas": 8}))
register(experiment_case("wus-sim run experiments/paper_speedup.yaml --jobs 2 (whole command)",
                         os.path.join(_EXPERIMENTS, "paper_speedup.yaml")))
register(experiment_case("what-if sweep: first 1,000 of the 100,000-point grid, --jobs 2 (whole command)",
                         _whatif_sweep_file, extra=("--limit", "1000", "--no-plots")))
register(step_case("quick: step resnet50 tpu-v3-32", "resnet50", "tpu-v3-32", quick=True, full=False))
register(step_case("quick: step resnet50 tpu-v3-32, batch norm over 8 cores", "resnet50", "tpu-v3-32",
                   quick=True, full=False, options={"bn_group_replicas": 8}))
register(step_case("quick: step resnet50 tpu-v3-32, 1 failed cable", "resnet50", "tpu-v3-32", quick=True,
                   full=False, faults={"failed_links": 1, "seed": 0}))


# ===================================================================== running
def run_case(case, *, repeat=5, memory=True):
    """Time *case*; return its record (see the module docstring)."""
    rec = {"case": case.name, "engine": case.engine, "problem": case.problem, "status": "ok",
           "sim_time_s": None, "events": None, "wall_median_s": None, "wall_min_s": None,
           "messages_per_s": None, "peak_mem_bytes": None, "repeat": repeat}
    walls = []
    result = None
    try:
        for _ in range(repeat):
            state = case.setup()
            t0 = time.perf_counter()
            result = case.run(state)
            walls.append(time.perf_counter() - t0)
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
    cases = [c for c in CASES.values() if (c.quick if quick else c.full)]
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
