"""The pieces of a ``wus-sim bench`` case: :class:`BenchCase`, the registry :data:`CASES`
that :mod:`wus_sim.bench` runs, and builders of the usual kinds of case (a collective, a
whole command, a step, an experiment point, an experiment run). See :mod:`wus_sim.bench`."""

from dataclasses import dataclass
import json
import os
import subprocess
import sys
from typing import Callable, NamedTuple

from ..inputs.units import format_bytes

__all__ = ["Measurement", "BenchCase", "CASES", "register", "collective_problem", "collective_case", "cli_case", "interpreter_case", "search_case",
           "installed_command", "mesh_case",
           "step_case", "point_case", "experiment_case", "cluster_experiment_case", "Unavailable"]


class Unavailable(Exception):
    """Raised by a case's setup when the case cannot run here (see the module docstring)."""


class Measurement(NamedTuple):
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
    max_runs: int = None
    """Timed runs at most, whatever ``repeat`` asks (``None``: no cap): a case of a minute (the
    whole what-if grid) runs three times, not five."""
    opt_in: bool = False
    """Run only when ``--case TEXT`` names it (in neither set: a case of minutes, or one that
    starts processes of its own, such as a Dask cluster)."""
    teardown: Callable[[object], None] = None
    """Untimed clean-up after each run (given the state ``setup`` returned), also when it raised."""


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
        from ..hardware.topology_files import load_topology

        topo = load_topology(topology, **faults)
        if engine == "fast":
            from ..collectives.engines import fast_engine

            reason = fast_engine.why_unsupported(topo, op, algorithm,
                                                 **{k: v for k, v in kw.items() if k != "reduce_Bps"})
            if reason is not None:
                raise Unavailable(reason)
            return topo, fast_engine
        from ..collectives import simulate_collective

        return topo, simulate_collective

    def run(state):
        topo, impl = state
        if engine == "fast":
            out = impl.run(topo, op, algorithm, nbytes, **kw)
        else:
            out = impl(topo, op, algorithm, nbytes, engine=engine, **kw)
        return Measurement(out.time_s, out.events)

    return BenchCase(name, engine, setup, run, quick=quick, full=full, problem=problem)


def installed_command():
    """The ``wus-sim`` command to time: the console script installed beside this interpreter
    (``sys.executable``'s bin folder), as a user runs it, not a shim on ``PATH`` (pyenv's is a
    shell script that costs more than the command) nor ``python -m wus_sim``; the latter only
    where no script is installed there. The figures then include the script's own start-up."""
    folder = os.path.dirname(sys.executable)
    for name in ("wus-sim", "wus-sim.exe"):
        script = os.path.join(folder, name)
        if os.path.isfile(script) and os.access(script, os.X_OK):
            return [script]
    return [sys.executable, "-m", "wus_sim"]


def cli_case(name, argv, *, quick=False, full=True, problem=""):
    """A case timing a whole ``wus-sim ...`` command in a fresh interpreter (imports
    included; :func:`installed_command`); *argv* includes ``--json`` so the simulated time can
    be read back, or is a command that prints no JSON (``--version``: no simulated time, no
    events)."""

    def run(_):
        out = subprocess.run([*installed_command(), *argv], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"wus-sim {' '.join(argv)} failed: {out.stderr.strip()}")
        if "--json" not in argv:
            return Measurement(None, 0)
        doc = json.loads(out.stdout)
        return Measurement(float(doc["time_s"]), int(doc.get("events", 0)))

    return BenchCase(name, "cli", lambda: None, run, quick=quick, full=full, problem=problem, measure_memory=False)


def interpreter_case(name, flags, *, quick=False, full=True):
    """A case timing this interpreter doing nothing (``python FLAGS -c pass``): the floor under
    every whole-command case, which no command of wus-sim's can go below. With ``-S`` (no
    ``site``) it is the interpreter alone; without, what the environment's ``site`` adds
    (its ``.pth`` files: an editable install's path finder, packages' start-up hooks)."""

    def run(_):
        subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)
        return Measurement(None, 0)

    return BenchCase(name, "python", lambda: None, run, quick=quick, full=full, measure_memory=False)


def step_case(name, workload, topology, optimizer=None, *, strategies=("replicated", "sharded"), quick=False,
              full=True, slices=None, faults=None, options=None):
    """A case simulating one point, *strategies* (plan, collectives, SimPy timeline), from
    cold caches; the simulated time is the last strategy's step time, events are SimPy events.
    *slices*: that many slices of *topology* over the data-center network (multislice);
    *faults*: failed/slow cables (keyword arguments of ``topology.with_link_faults``);
    *options*: :class:`~wus_sim.training.step.StepOptions` fields other than the defaults."""

    def setup():
        from ..collectives import clear_caches
        from ..inputs.memo import clear_memos

        clear_caches()
        clear_memos()  # cold: the files, analyses and plans a sweep shares are read and built again
        return None

    def run(_):
        from ..hardware.multislice import load_multislice
        from ..training.step import StepOptions, simulate_strategies

        topo = topology if slices is None else load_multislice(topology, slices=slices)[1]
        if faults:
            from ..hardware.topology_files import load_topology
            from ..hardware.link_faults import with_link_faults

            topo = with_link_faults(load_topology(topo) if isinstance(topo, str) else topo, **faults)
        results = simulate_strategies(workload, topo, optimizer, strategies,
                                      options=StepOptions(**options) if options else None).results
        events = sum(r.timeline.events for r in results.values() if r.timeline is not None)
        return Measurement(results[strategies[-1]].step_time_s, events)

    where = topology if slices is None else f"{slices}x {topology}"
    return BenchCase(name, "timeline", setup, run, quick=quick, full=full,
                problem=f"step {workload} {optimizer or 'default'} on {where}")


def mesh_case(name, workload, topology, optimizer=None, *, mesh, dcn_mesh=None, megacore=False, global_batch=None,
              strategies=("sharded",), options=None, quick=False, full=True):
    """A case simulating one device-mesh point (:func:`~wus_sim.training.parallelism.mesh_step.simulate_mesh`),
    from cold caches; *dcn_mesh*'s product is the number of slices of *topology*."""

    def setup():
        from ..collectives import clear_caches
        from ..inputs.memo import clear_memos

        clear_caches()
        clear_memos()
        return None

    def run(_):
        from ..hardware.mesh import Placement
        from ..training.parallelism.mesh_step import simulate_mesh
        from ..training.step import StepOptions

        placement = Placement(megacore=megacore, mesh=mesh, dcn_mesh=dcn_mesh)  # slices: dcn_mesh's product
        results = simulate_mesh(workload, topology, optimizer, strategies, global_batch=global_batch,
                                options=StepOptions(**options) if options else None, placement=placement).results
        events = sum(r.timeline.events for r in results.values() if r.timeline is not None)
        return Measurement(results[strategies[-1]].step_time_s, events)

    where = topology if not dcn_mesh else f"{dcn_mesh} x {topology}"
    return BenchCase(name, "timeline", setup, run, quick=quick, full=full,
                     problem=f"mesh step {workload} {optimizer or 'default'} {mesh} on {where}")


def search_case(name, workload, topology, *, megacore=False, slices=None, jobs=1, quick=False, full=True,
                opt_in=False, max_runs=None):
    """A case timing a whole mesh search (``plan WORKLOAD -t TOPOLOGY --search --jobs JOBS``'s
    :class:`~wus_sim.training.parallelism.mesh_search.Search`, every candidate streamed and ranked),
    from cold caches; the simulated time is the fastest candidate's step, events the candidates.
    A topology not shipped here is unavailable, not an error. With *jobs* > 1 the memory column is
    not measured (tracemalloc sees this process, not its workers; each worker runs a subset of the
    meshes the one-process case runs, with the same memo bounds)."""

    def setup():
        from ..collectives import clear_caches
        from ..inputs.memo import clear_memos
        from ..hardware.multislice import load_multislice
        from ..inputs.errors import WusError

        clear_caches()
        clear_memos()
        try:
            slice_, ms = load_multislice(topology, slices=slices, megacore=megacore)
        except WusError as exc:
            raise Unavailable(str(exc)) from None
        return ms or slice_

    def run(topo):
        from ..training.parallelism.mesh_search import Search, rank_key

        found = sorted(Search(workload, topo).candidates(jobs=jobs), key=rank_key)
        return Measurement(found[0].step_time_s if found and found[0].status == "ok" else None, len(found))

    # megacore=False is one replica per TensorCore (plan --search --no-megacore on v4 and v5p, whose default is a chip)
    where = topology + (" (chips)" if megacore else "") + (f" x {slices} slices" if slices else "")
    return BenchCase(name, "search", setup, run, quick=quick, full=full, problem=f"plan --search {workload} on {where}",
                     measure_memory=jobs == 1, opt_in=opt_in, max_runs=max_runs)


def point_case(name, point, *, quick=False, full=True):
    """A case simulating one experiment point as ``run`` does (every strategy of it, the rows with
    their bands and validated range), from cold caches; events are the rows it gives."""

    def setup():
        from ..collectives import clear_caches
        from ..inputs.memo import clear_memos

        clear_caches()
        clear_memos()  # cold: the files, analyses and plans a sweep shares are read and built again
        return None

    def run(_):
        from ..experiments.records import simulate_point

        rows = simulate_point(point)
        return Measurement(rows[-1]["step_time_s"], len(rows))

    return BenchCase(name, "point", setup, run, quick=quick,
                     problem=f"point {point['workload']} on {point['topology']} with bands")


def _points_run(argv, out_dir):
    """Run ``wus-sim run`` *argv* (into *out_dir*); the number of points in its results."""
    import csv

    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} failed: {out.stderr.strip()}")
    with open(os.path.join(out_dir, "results.csv")) as fh:
        return len({row["point_hash"] for row in csv.DictReader(fh)})


def experiment_case(name, path, *, jobs=2, quick=False, full=True, extra=(), max_runs=None):
    """A case timing ``wus-sim run PATH --jobs N`` end to end in a fresh interpreter (plots
    included); events are the points simulated, simulated time is not applicable. *path*: a
    file, or a callable that writes one and returns its path (the bench's own sweeps)."""
    def setup():
        where = path() if callable(path) else path
        if not os.path.isfile(where):
            raise Unavailable(f"{where} not found (run the benchmark from a source checkout)")
        return where

    def run(path):
        import tempfile

        # a fresh output directory per run (no journal to resume from), removed afterwards
        with tempfile.TemporaryDirectory(prefix="wus-bench-") as out_dir:
            return Measurement(None, _points_run([sys.executable, "-m", "wus_sim", "run", path, "--jobs", str(jobs),
                                                  "--out", out_dir, "--quiet", *extra], out_dir))

    return BenchCase(name, "run", setup, run, quick=quick, full=full,
                     problem=f"experiment {name if callable(path) else path}", measure_memory=False,
                     max_runs=max_runs)


def cluster_experiment_case(name, path, *, workers=2, extra=(), max_runs=None, opt_in=True):
    """A case timing ``wus-sim run PATH --scheduler ADDRESS`` end to end on a Dask cluster of its
    own: a ``dask scheduler`` and *workers* one-thread ``dask worker`` processes on 127.0.0.1
    (:class:`~wus_sim.bench.dask_cluster.LoopbackCluster`), started in the untimed setup (as a
    user's cluster is up before the sweep) and killed in the teardown, fresh for each run.
    Unavailable without Dask's ``distributed``. Opt-in by default: ``--case`` names it."""

    def setup():
        try:
            import distributed  # noqa: F401 -- only whether it is there
        except ImportError:
            raise Unavailable("needs Dask's 'distributed' package: pip install 'wus-sim[dask]'") from None
        where = path() if callable(path) else path
        if not os.path.isfile(where):
            raise Unavailable(f"{where} not found (run the benchmark from a source checkout)")
        from .dask_cluster import LoopbackCluster

        # the workers import wus_sim: this one, also when it runs from a checkout not installed
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        cluster = LoopbackCluster(workers, env=env)
        try:
            return where, cluster.start()
        except BaseException:
            cluster.close()
            raise

    def run(state):
        import tempfile

        where, cluster = state
        with tempfile.TemporaryDirectory(prefix="wus-bench-") as out_dir:
            return Measurement(None, _points_run([sys.executable, "-m", "wus_sim", "run", where, "--scheduler",
                                                  cluster.address, "--out", out_dir, "--quiet", *extra], out_dir))

    return BenchCase(name, "run", setup, run, quick=False, full=not opt_in, opt_in=opt_in,
                     problem=f"experiment {name if callable(path) else path}", measure_memory=False,
                     max_runs=max_runs, teardown=lambda state: state[1].close())
