"""Run an experiment's points in parallel, journal each finished point, write the results.

Each point goes to a *point function* (``wus_sim.experiments.records.simulate_point`` unless
another one with the same signature is given): ``point_fn(point) -> list[dict]``,
one flat record per strategy. Points run in worker processes
(``concurrent.futures.ProcessPoolExecutor``), or on a Dask cluster when a
scheduler address is given, or in this process with ``jobs=1``.

Resume. Every finished point is appended to ``DIR/points.jsonl`` as one JSON
line (``hash``, ``index``, ``model``, ``point``, ``rows``, ``wall_s``), flushed
before the next one is taken (and fsynced at least once a second and at the end), so a run
killed at any moment has every point it has collected on disk (a line cut short by the kill is ignored and
truncated on resume; with ``jobs > 1`` a worker hands points back in chunks of about
:func:`chunk_size` (:func:`worker_chunks`), so a kill also loses the chunks still in a worker,
under a second of work each). With ``resume=True`` the points whose hash is in the
journal are not run again; the results are always assembled from the journal,
one entry per hash, so each point appears exactly once. ``model`` is the *model
fingerprint* (a hash of the simulator's source, its data files and the shipped
topologies, or the point function's name for a custom one): entries made by
another version of the model are stale and their points run again, so a resume
after a code or data change never mixes old and new results.

Infeasible points. A point function may return rows with ``status='infeasible'``
(e.g. out of HBM); if it raises :class:`~wus_sim.inputs.errors.InfeasibleError` for the
whole point, the runner writes such rows itself. Any other
:class:`~wus_sim.inputs.errors.WusError` becomes rows with ``status='error'`` so one bad
combination does not stop a sweep of thousands (the CLI reports them and
exits non-zero). Programming errors propagate.
"""

from dataclasses import dataclass
import hashlib
import json
import os
from pathlib import Path
import sys
import time

from ..inputs.errors import ConfigError, InfeasibleError, WusError
from .dask_points import SCHEDULER_TIMEOUT_S
from .chunks import chunk_size, worker_chunks
from .rundir import JOURNAL_NAME, _Journal, journal_text, read_journal
from .spec import point_hash, strategies_of

__all__ = [
    "RunResult", "run_experiment", "evaluate_point", "read_journal", "model_fingerprint",
    "JOURNAL_NAME",
]



@dataclass
class RunResult:
    """What :func:`run_experiment` did."""

    frame: object
    """pandas DataFrame of every row (see :mod:`.results` for the columns)."""
    out_dir: Path
    files: dict
    """Name -> path of each file written (results_csv, results_parquet, columns_md, ...)."""
    num_points: int
    num_run: int
    """Points simulated by this call (the rest came from the journal)."""
    num_resumed: int
    wall_s: float
    num_stale: int = 0
    """Journal entries not reused because another version of the model made them."""

    @property
    def num_errors(self):
        return int((self.frame["status"] == "error").sum()) if len(self.frame) else 0


def _default_point_fn():
    # Imported lazily: the simulator pulls in SimPy and the whole model stack.
    from .records import simulate_point

    return simulate_point


def evaluate_point(point_fn, point):
    """Run one point; return ``{'rows': [...], 'wall_s': float}`` with status rows for failures."""
    t0 = time.perf_counter()
    try:
        rows = [dict(r) for r in point_fn(dict(point))]
        if not rows:
            raise ConfigError("the point function returned no rows")
    except InfeasibleError as exc:
        rows = [{"strategy": s, "status": "infeasible", "error": str(exc)} for s in strategies_of(point)]
    except WusError as exc:
        rows = [{"strategy": s, "status": "error", "error": str(exc)} for s in strategies_of(point)]
    wall_s = time.perf_counter() - t0
    out = []
    for row in rows:
        full = dict(point)
        # The simulator's record wins where it resolved a default (None in the point).
        full.update({k: v for k, v in row.items() if v is not None or k not in full})
        full.setdefault("status", "ok")
        if full.get("error") is None:
            full["error"] = ""
        out.append(full)
    return {"rows": out, "wall_s": wall_s}


def _slice_columns(point, cache):
    """Slice facts for the results (filled where the simulator did not report them); derived
    when the results are assembled, so rows resumed from an older journal get them too."""
    from ..hardware.topology_files import load_topology
    from .records import slice_columns

    # (each value with its type: True and 1 are equal keys but not the same wraparound)
    key = tuple((point.get(k).__class__, point.get(k))
                for k in ("topology", "link_GBps", "hop_latency_us", "wraparound", "cores_per_chip"))
    try:
        hash(key)
    except TypeError:  # an inline topology or a list: its JSON text stands for it
        key = tuple(json.dumps(v, default=str) for _, v in key)
    if key in cache:
        return cache[key]
    cache[key] = {}
    try:
        topo = load_topology(point["topology"], link_GBps=point.get("link_GBps"),
                             hop_latency_us=point.get("hop_latency_us"),
                             wraparound=point.get("wraparound"), cores_per_chip=point.get("cores_per_chip"))
    except (WusError, ValueError):
        return cache[key]
    cache[key] = slice_columns(topo)
    return cache[key]


# ----------------------------------------------------------------- journal
def model_fingerprint(point_fn=None, points=None):
    """Stable id of the model behind *point_fn*: for the shipped simulator, a hash of
    every ``wus_sim`` source and data file, the shipped topology files, and the files of the
    user's search folders (``WUS_SIM_TOPOLOGY_PATH``, ...) that *points* name (every
    ``chips.yaml`` there, since every slice's chip is looked up in all of them); for another
    function, its qualified name.

    Only the files the run uses are read: a broken or huge file elsewhere in a search folder
    must not stop (or slow) every run. A named file that cannot be read is hashed as its error,
    and the point that names it reports the error as its own."""
    if point_fn is not None and point_fn is not _default_point_fn():
        return f"fn:{getattr(point_fn, '__module__', '?')}.{getattr(point_fn, '__qualname__', repr(point_fn))}"
    package = Path(__file__).resolve().parent.parent
    from ..inputs.shipped import shipped_dir

    files = sorted(package.rglob("*.py")) + sorted(package.rglob("*.yaml"))
    shipped_topologies = shipped_dir("topologies")
    if shipped_topologies.is_dir():
        files += sorted(shipped_topologies.glob("*.yaml"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        digest.update(f.read_bytes())
    for f in user_files(points or ()):
        digest.update(str(f).encode())
        digest.update(_file_digest(f))
    return "sim:" + digest.hexdigest()[:16]


def user_files(points):
    """The files outside the package the *points* read: paths they give, and the first match of
    each name in the user's search folders (the shipped folders are hashed whole)."""
    from ..hardware.topology_files import topology_dirs
    from ..inputs.config import present
    from ..model.workload_files import workload_dirs
    from ..optimizers.registry import optimizer_dirs

    search = {"topology": topology_dirs()[:-1], "workload": workload_dirs()[:-1],
              "optimizer": optimizer_dirs()[:-1]}
    names = {key: set() for key in (*search, "calibration")}
    for point in points:
        for key, seen in names.items():
            value = point.get(key)
            if isinstance(value, str):
                seen.update(value.split("+") if key == "optimizer" else [value])
    found = set(d / "chips.yaml" for d in search["topology"] if present(d / "chips.yaml"))
    for key, values in names.items():
        for value in values:
            if value.endswith((".yaml", ".yml")) or "/" in value or os.sep in value:
                found.add(Path(value))
                continue
            for d in search.get(key, ()):
                if present(d / f"{value}.yaml"):
                    found.add(d / f"{value}.yaml")
                    break
    return sorted(found, key=str)


def _file_digest(path):
    from ..inputs.errors import ConfigError
    from ..inputs.files import read_bytes

    try:
        return hashlib.sha256(read_bytes(path)).digest()
    except ConfigError as exc:
        return str(exc).encode()


# ----------------------------------------------------------------- running
def run_experiment(experiment, out_dir, *, point_fn=None, jobs=1, resume=False, scheduler=None,
                   reduced=False, limit=None, progress=None, write=True, overwrite=False, on_results=None,
                   scheduler_timeout=SCHEDULER_TIMEOUT_S):
    """Run every point of *experiment* and write the results into *out_dir*.

    *point_fn*: ``point -> list[dict]`` (default ``wus_sim.experiments.records.simulate_point``; must be
    importable by worker processes). *jobs*: worker processes (1 = in this process).
    *resume*: skip points already in ``out_dir/points.jsonl``. *scheduler*: a Dask
    scheduler address (or a ``distributed.Client``) to run the points on instead; an address is
    checked and reached (within *scheduler_timeout* seconds) before anything else is done.
    *reduced*/*limit*: the experiment's reduced form / the first N points.
    *progress*: show a tqdm bar on stderr (default: when stderr is a terminal).
    Returns a :class:`RunResult`; writes results.csv/.parquet, columns.md/.json,
    config.resolved.yaml when *write*. *out_dir* is locked for the run and must not hold
    another experiment's results unless *overwrite* (see :mod:`.rundir`). *on_results*:
    called with the RunResult while the folder is still locked (the CLI draws plots there);
    it may return the paths it wrote, which ``run.json`` then lists.
    """
    t0 = time.perf_counter()
    from .experiment import Experiment

    if not isinstance(experiment, Experiment):
        raise ConfigError("must be an Experiment (wus_sim.load_experiment(path) reads one)", key_path="experiment",
                          value=experiment)
    if not isinstance(out_dir, (str, os.PathLike)):
        raise ConfigError("must be a folder path", key_path="out_dir", value=out_dir)
    if point_fn is None:
        point_fn = _default_point_fn()
    elif not callable(point_fn):
        raise ConfigError("must be a function point -> list of row dicts", key_path="point_fn", value=point_fn)
    from ..inputs.api_args import check_bool, check_int, check_number

    jobs = check_int(jobs, "--jobs", minimum=1, maximum=1024)
    limit = check_int(limit, "--limit", minimum=1, maximum=2**62, nullable=True)
    scheduler_timeout = check_number(scheduler_timeout, "scheduler_timeout", positive=True, maximum=600)
    resume, write, overwrite, reduced = (check_bool(v, k) for k, v in (("resume", resume), ("write", write),
                                                                     ("overwrite", overwrite), ("reduced", reduced)))
    if scheduler is not None and isinstance(scheduler, str):
        from .dask_points import check_scheduler

        check_scheduler(scheduler, scheduler_timeout)
    out_dir = Path(out_dir)
    points = experiment.points(reduced=reduced, limit=limit)  # counted against the limit first
    from ..inputs.writes import WriteError
    from .rundir import RunDir

    try:
        with RunDir(out_dir, experiment.name, resume=resume, overwrite=overwrite) as run_dir:
            result = _run_locked(experiment, out_dir, points, point_fn, jobs, resume,
                                 (scheduler, scheduler_timeout) if scheduler is not None else None, reduced, limit,
                                 progress, write, t0)
            run_dir.files = list(result.files.values())
            if on_results is not None:
                extra = on_results(result)
                run_dir.files += list(extra or [])
    except (OSError, WriteError) as exc:
        # The folder was removed, made read-only or filled up while the run wrote into it: one
        # line. Every point journaled before that is kept (each line is flushed when it is written).
        if isinstance(exc, WriteError):
            where, why = exc.file, exc.rule.removeprefix("cannot be written: ")
        else:
            where, why = getattr(exc, "filename", None) or out_dir, exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot be written: {why}; the points finished "
                          f"before are kept in {out_dir / JOURNAL_NAME} (if the folder is still there): "
                          "fix it and run again with --resume", file=where) from None
    return result


def _run_locked(experiment, out_dir, points, point_fn, jobs, resume, scheduler, reduced, limit, progress, write,
                t0):
    hashes = [point_hash(p) for p in points]
    journal_path = out_dir / JOURNAL_NAME
    wanted = set(hashes)
    done = read_journal(journal_path, repair=True, wanted=wanted) if resume else {}
    fingerprint = model_fingerprint(point_fn, points)
    stale = sum(1 for h, e in done.items() if h in wanted and e.get("model") != fingerprint)
    done = {h: e for h, e in done.items() if h in wanted and e.get("model") == fingerprint}
    todo = [(i, h, p) for i, (h, p) in enumerate(zip(hashes, points)) if h not in done]
    # Duplicated points (the same parameters twice in a sweep) run once.
    seen, unique_todo = set(done), []
    for item in todo:
        if item[1] not in seen:
            seen.add(item[1])
            unique_todo.append(item)

    journal = _Journal(journal_path, fresh=not resume)
    bar = _progress_bar(len(set(hashes)), len(done), progress)
    try:
        for index, h, point, outcome, text in _execute(point_fn, unique_todo, jobs, scheduler):
            entry = {"hash": h, "index": index, "model": fingerprint, "point": point, **outcome}
            journal.append(entry, text)
            done[h] = entry
            bar.update(1)
    finally:
        bar.close()
        journal.close()

    from .assemble import results_frame

    frame = results_frame(experiment.name, hashes, points, done, _slice_columns)
    files = {"journal": journal_path}
    if write:
        files.update(write_run_files(experiment, frame, out_dir, reduced=reduced, limit=limit))
    return RunResult(frame=frame, out_dir=out_dir, files=files, num_points=len(points),
                     num_run=len(unique_todo), num_resumed=len(points) - len(todo),
                     wall_s=time.perf_counter() - t0, num_stale=stale)


def write_run_files(experiment, frame, out_dir, *, reduced=False, limit=None):
    """Write results.csv/.parquet, columns.md/.json and config.resolved.yaml; return their paths."""
    import yaml

    from .results import write_columns_doc, write_results

    out_dir = Path(out_dir)
    csv_path, parquet_path = write_results(frame, out_dir)
    columns_md = write_columns_doc(frame, out_dir)
    resolved = out_dir / "config.resolved.yaml"
    from ..inputs.writes import write_atomic

    write_atomic(resolved, yaml.safe_dump(experiment.resolved(reduced=reduced, limit=limit), sort_keys=False))
    return {"results_csv": csv_path, "results_parquet": parquet_path, "columns_md": columns_md,
            "columns_json": out_dir / "columns.json", "config_resolved": resolved}


def _progress_bar(total, initial, enabled):
    from tqdm import tqdm

    if enabled is None:
        enabled = sys.stderr.isatty()
    return tqdm(total=total, initial=initial, disable=not enabled, file=sys.stderr, unit="point",
                desc="points", dynamic_ncols=True)


def _execute(point_fn, todo, jobs, scheduler):
    """Yield ``(index, hash, point, outcome, text)`` as points finish, in completion order;
    *text*: the point's journal text (:func:`journal_text`) where a worker made it, else ``None``."""
    if not todo:
        return
    if scheduler is not None:
        from .dask_points import execute_dask

        yield from execute_dask(_evaluate_chunk, point_fn, todo, *scheduler)
    elif jobs == 1 or len(todo) == 1:
        from ..inputs.memo import files_fixed

        size = chunk_size(len(todo), 1)
        for i in range(0, len(todo), size):
            with files_fixed():  # as a worker's chunk: each point is journaled as soon as it is done
                for index, h, point in todo[i:i + size]:
                    yield index, h, point, evaluate_point(point_fn, point), None
    else:
        from concurrent.futures import as_completed
        from ..inputs.workers import stop_pool, worker_pool

        pool = worker_pool(min(jobs, len(todo)))
        finished = False
        try:
            futures = {pool.submit(_evaluate_chunk, point_fn, [p for _, _, p in chunk]): chunk
                       for chunk in worker_chunks(todo, jobs)}
            for future in as_completed(futures):
                for (index, h, point), (outcome, text) in zip(futures[future], future.result()):
                    yield index, h, point, outcome, text
            finished = True
        finally:
            # On an error, Ctrl-C or SIGTERM: drop the queued points and stop the running ones
            # now (they are redone on --resume); finished ones are journaled.
            stop_pool(pool, finished)


def _evaluate_chunk(point_fn, points):
    """``(outcome, journal text)`` of each of *points*, in order (in a worker process): its
    :func:`evaluate_point` with the named input files looked up once for the chunk
    (:func:`~wus_sim.inputs.memo.files_fixed`), and the outcome's JSON (:func:`journal_text`),
    written here so that the workers share it instead of the parent alone."""
    from ..inputs.memo import files_fixed

    with files_fixed():
        outcomes = [evaluate_point(point_fn, point) for point in points]
    return [(outcome, journal_text(point, outcome)) for point, outcome in zip(points, outcomes)]
