"""Measured step times: Google's MLPerf v0.6 TPU-v3 runs as shipped in a CSV, or your own.

The shipped table is generated from the public logs by ``tests/tools/regenerate_mlperf_v06.py``;
its columns, units and method are documented in ``wus_sim/data/validation/README.md``.
A table of your own measurements has the same columns; only :data:`REQUIRED_COLUMNS`
must be there (the others describe where a figure came from and default to empty).
:func:`load_measured` reads a table strictly: an unknown or missing required column, a
value that does not parse, or two rows with the same ``benchmark/topology`` is a
:class:`~wus_sim.inputs.errors.ConfigError` naming the file, the row and the column.
:func:`table_identity` says which table a calibration was fitted to (the shipped one, or
a file by its SHA-256), so that rows are marked ``calibration`` only in that table.
"""

import csv
from dataclasses import dataclass, field, fields
import math
from pathlib import Path

from ..inputs.errors import ConfigError
from ..inputs.files import read_bytes
from ..inputs.limits import MAX_FILE_BYTES, MAX_REPLICAS
from ..inputs.text import excerpt

__all__ = ["MeasuredRun", "load_measured", "SHIPPED_MEASURED", "SHIPPED_TABLES", "SOFTWARE_STACKS", "KINDS",
           "UPDATES", "DATA_SOURCE", "REQUIRED_COLUMNS", "table_identity", "same_table", "software_stack", "run_key"]

DATA_SOURCE = {
    "name": "Google's MLPerf v0.6 and v0.7 TPU-v3 runs",
    "repository": "github.com/mlcommons/training_results_v0.6; github.com/mlcommons/training_results_v0.7",
    "commit": "f312518c2d6107eec983750eed23950f1f0c8a0e; 0a8a85a209c8e45b661596c382cc20f4e32fd2fe",
    "table": "wus_sim/data/validation/mlperf_v06_tpu_v3.csv; wus_sim/data/validation/mlperf_v07_tpu_v3.csv",
    "generator": "tests/tools/regenerate_mlperf_v06.py; tests/tools/regenerate_mlperf_v07.py",
}
"""Where the shipped tables come from (the commits the generators pin)."""

V06_SOURCE = {
    "name": "Google's MLPerf v0.6 TPU-v3 runs",
    "repository": "github.com/mlcommons/training_results_v0.6",
    "commit": "f312518c2d6107eec983750eed23950f1f0c8a0e",
    "table": "wus_sim/data/validation/mlperf_v06_tpu_v3.csv",
    "generator": "tests/tools/regenerate_mlperf_v06.py",
}
"""The v0.6 table alone: what the shipped calibration names as its data."""

_DATA = Path(__file__).resolve().parent.parent / "data" / "validation"
SHIPPED_MEASURED = _DATA / "mlperf_v06_tpu_v3.csv"
"""The shipped v0.6 table (Google's MLPerf v0.6 TPU-v3 submission logs)."""
SHIPPED_TABLES = {SHIPPED_MEASURED: "v0.6", _DATA / "mlperf_v07_tpu_v3.csv": "v0.7"}
"""Every shipped table, with the MLPerf round its rows come from (the v0.6 table predates
the ``round`` column): :func:`load_measured` with no path reads them all."""

SOFTWARE_STACKS = {
    "v0.6": "tf1-tpuestimator-2019",
    "v0.7": "tf-jax-2020",
    "maxtext": "maxtext-jax-2025",
}
"""The software stack of each round's runs, as the calibration names it: v0.6 ran TF 1.x
TPUEstimator programs (one device loop of ``iterations_per_loop`` steps per session.run);
v0.7 ran TF 2.x (Keras/TPUStrategy), JAX (pmap) and TF1-style session code of mid-2020 on
the same chip; the rows of MaxText's tiering page (``maxtext``, :mod:`wus_sim.validation.tiering`)
ran MaxText on JAX 0.4.35-0.6.1 and libtpu of late 2024 to mid 2025 (the recipes' images). A table
of your own without a ``round`` is its own stack, ``own-runs``."""

KINDS = ("exact", "bound")
"""``exact``: a training-only step time; ``bound``: an upper bound (eval sits inside the interval)."""

UPDATES = ("sharded", "replicated", "unknown")


@dataclass(frozen=True)
class MeasuredRun:
    """One benchmark on one slice: configuration and measured step time (one CSV row)."""

    benchmark: str
    """MLPerf benchmark directory name: resnet, ssd, mask, transformer, gnmt."""
    workload: str
    """wus-sim workload name (``wus_sim/data/workloads``)."""
    topology: str
    """wus-sim topology name (``topologies/``), e.g. ``tpu-v3-32``."""
    cores: int
    replicas: int
    spatial_ways: int
    """Cores per replica (spatial partitioning); 1 without it."""
    global_batch: int
    """Examples per step: images, packed 256-token sequences (Transformer), sentence pairs (GNMT)."""
    per_replica_batch: int
    optimizer: str
    """wus-sim optimizer name."""
    precision: str
    grad_allreduce_dtype: str
    """``fp32`` or ``bf16``."""
    bn_group_cores: int | None
    """Cores spanned by one distributed batch-norm group; ``None`` without distributed BN."""
    steps_per_loop: int
    """Training steps per device loop (iterations per loop)."""
    eval_on_device: bool | None
    """Eval runs on the TPU inside the training program; ``None`` if unknown."""
    update: str
    """``sharded``, ``replicated`` or ``unknown``: which weight update the measured run used."""
    update_source: str
    measured_step_s: float
    """Median over the runs of the per-run step time, seconds."""
    step_s_min: float
    step_s_max: float
    runs: int
    """Result files (runs) the figure is taken over."""
    kind: str
    """``exact`` or ``bound``."""
    method: str
    sources: tuple[str, ...]
    """Paths in the round's results repository at the pinned commit."""
    round: str = ""
    """MLPerf round (``v0.6``, ``v0.7``); empty in a table of your own that does not say."""
    framework: str = ""
    """Framework of the run (``tf1``, ``tf2``, ``jax``; empty where the table does not say):
    rows of one round that differ only in it are different runs."""
    origin: tuple = field(default=None, compare=False, repr=False)
    """``(file, line)`` the row was read from (not a column): an error the row causes later,
    when it is simulated, names them."""


COLUMNS = tuple(f.name for f in fields(MeasuredRun) if f.name != "origin")

REQUIRED_COLUMNS = ("benchmark", "workload", "topology", "cores", "replicas", "spatial_ways", "global_batch",
                    "per_replica_batch", "optimizer", "measured_step_s", "kind")
"""What the simulation of a row needs; a table of your own may leave the other columns out."""

_OPTIONAL_DEFAULTS = {"precision": "", "grad_allreduce_dtype": "", "bn_group_cores": "", "steps_per_loop": "1",
                      "eval_on_device": "unknown", "update": "unknown", "update_source": "", "step_s_min": None,
                      "step_s_max": None, "runs": "1", "method": "", "sources": "", "round": "", "framework": ""}
"""Values of the columns a table leaves out (``None``: the row's ``measured_step_s``).
An empty ``grad_allreduce_dtype`` is the workload's gradient dtype."""


MAX_ROWS = 1_000
"""Most rows in a measured table (the shipped one has 26): each row is simulated by ``validate``."""
MAX_CELL_CHARS = 4_000
"""Longest cell (the shipped table's longest, a ``method`` note, has under 600 characters)."""

_INT_RANGES = {"cores": (1, MAX_REPLICAS), "replicas": (1, MAX_REPLICAS), "spatial_ways": (1, 64),
               "global_batch": (1, 2**31), "per_replica_batch": (1, 2**24), "steps_per_loop": (1, 10**9),
               "runs": (1, 10**6), "bn_group_cores": (1, MAX_REPLICAS)}
"""Declared range of each whole-number column (the point rules' ranges where a point has the same
quantity: ``per_replica_batch`` <= 2^24, ``global_batch`` <= 2^31, replicas <= MAX_REPLICAS)."""
MAX_STEP_S = 1e6
"""Longest step time accepted, in seconds (11 days: anything longer is a unit slip)."""


class _BadCell(ValueError):
    """A cell that breaks a column's rule; its message is the rule."""


def _parse(value, name, kind):
    if kind is str:
        return value
    if kind is int:
        if not value.strip().lstrip("+-").isdigit() or len(value) > 30:
            raise _BadCell("does not parse as a whole number")
        x = int(value)
        low, high = _INT_RANGES[name]
        if not low <= x <= high:
            raise _BadCell(f"must be a whole number from {low:,} to {high:,}")
        return x
    if kind is float:
        try:
            x = float(value)
        except ValueError:
            raise _BadCell("does not parse as a number") from None
        if not x > 0:
            raise _BadCell("must be > 0")
        if not math.isfinite(x):  # inf passed '> 0' and broke the fit's residuals
            raise _BadCell("must be finite")
        if x > MAX_STEP_S:
            raise _BadCell(f"must be at most {MAX_STEP_S:g} s")
        return x
    if name == "bn_group_cores":
        return None if value == "" else _parse(value, name, int)
    if name == "eval_on_device":
        if value not in ("true", "false", "unknown"):
            raise _BadCell("must be one of true, false, unknown")
        return {"true": True, "false": False, "unknown": None}[value]
    if name == "sources":
        return tuple(s.strip() for s in value.split(";") if s.strip())
    raise AssertionError(f"no parser for column {name}")


_TYPES = {"cores": int, "replicas": int, "spatial_ways": int, "global_batch": int,
          "per_replica_batch": int, "steps_per_loop": int, "runs": int,
          "measured_step_s": float, "step_s_min": float, "step_s_max": float,
          "bn_group_cores": None, "eval_on_device": None, "sources": None}


def load_measured(path=None):
    """Rows of the measured-step-time table at *path*; by default (or ``"shipped"``) every
    shipped table (:data:`SHIPPED_TABLES`), in round order. A shipped table loads alone by its path."""
    if path is None or (isinstance(path, str) and path == "shipped"):
        rows = []
        for table, round_ in SHIPPED_TABLES.items():
            rows += _load_table(table, round_)
        return rows
    path = Path(path)
    try:
        shipped_round = SHIPPED_TABLES.get(path.resolve(), "")
    except (OSError, RuntimeError):  # a loop of links: _load_table's look names it
        shipped_round = ""
    return _load_table(path, shipped_round)


def software_stack(run):
    """The software stack a measured run ran on (:data:`SOFTWARE_STACKS`)."""
    return SOFTWARE_STACKS.get(run.round, run.round or "own-runs")


def run_key(run):
    """How a row is named: ``benchmark/topology`` (v0.6 and tables of your own), and for other
    rounds ``round:benchmark/topology``, with ``/framework`` where the table gives one."""
    if run.round in ("", "v0.6"):
        return f"{run.benchmark}/{run.topology}"
    return f"{run.round}:{run.benchmark}/{run.topology}" + (f"/{run.framework}" if run.framework else "")


def _load_table(path, default_round):
    try:
        text = _read(path).decode("utf-8-sig")  # a spreadsheet's UTF-8 export may start with a BOM
    except UnicodeDecodeError:
        raise ConfigError("is not a UTF-8 text (CSV) file", file=path) from None
    lines = text.splitlines()
    if len(lines) > MAX_ROWS + 1:
        raise ConfigError(f"has {len(lines) - 1:,} rows, over the limit of {MAX_ROWS:,} for a measured table",
                          file=path)
    for i, line in enumerate(lines, start=1):
        if len(line) > MAX_CELL_CHARS * len(COLUMNS):
            raise ConfigError(f"has a line longer than {MAX_CELL_CHARS * len(COLUMNS):,} characters (line {i})",
                              file=path)
    reader = csv.DictReader(lines)
    try:
        header = reader.fieldnames or []
    except csv.Error:
        header = [None]
    if not header:
        raise ConfigError(f"is empty: no header line (required columns: {', '.join(REQUIRED_COLUMNS)})", file=path)
    if not any(name in COLUMNS for name in header):
        # Not one known column: a file of another kind, named and never quoted (its first line
        # may be anything: a password file's, a TOKEN=... line).
        raise ConfigError(f"is not a measured table (CSV): its first line names none of the columns "
                          f"({', '.join(REQUIRED_COLUMNS)}, ...)", file=path)
    for name in header:
        if name not in COLUMNS:
            # the column's name as written, cut to an excerpt: it is input
            raise ConfigError(f"is not a known column; known columns: {', '.join(COLUMNS)}",
                              file=path, key_path=excerpt(name), show_value=False)
    for name in REQUIRED_COLUMNS:
        if name not in header:
            raise ConfigError(f"column is missing (required: {', '.join(REQUIRED_COLUMNS)})", file=path,
                              key_path=name, show_value=False)
    rows, seen = [], {}
    for i, raw in _rows(reader, path):          # line 1 is the header
        if None in raw or any(v is None for v in raw.values()):
            raise ConfigError("has a different number of fields from the header", file=path,
                              key_path=f"line {i}", show_value=False)
        values = {}
        for name in COLUMNS:
            text = raw[name] if name in raw else _OPTIONAL_DEFAULTS[name]
            if name == "round" and not text:
                text = default_round
            if text is None:
                text = raw["measured_step_s"]
            try:
                values[name] = _parse(text, name, _TYPES.get(name, str))
            except _BadCell as exc:
                raise ConfigError(str(exc), file=path, key_path=f"line {i}.{name}", value=text) from None
        for name, allowed in (("kind", KINDS), ("update", UPDATES)):
            if values[name] not in allowed:
                raise ConfigError(f"must be one of {', '.join(allowed)}", file=path,
                                  key_path=f"line {i}.{name}", value=values[name])
        for name, want, rule in (
                ("cores", values["replicas"] * values["spatial_ways"], "must be replicas x spatial_ways"),
                ("global_batch", values["per_replica_batch"] * values["replicas"],
                 "must be per_replica_batch x replicas")):
            if values[name] != want:
                raise ConfigError(f"{rule} ({want})", file=path, key_path=f"line {i}.{name}", value=values[name])
        key = run_key(MeasuredRun(**values))
        if key in seen:
            raise ConfigError(f"names the same benchmark/topology as line {seen[key]} (rows are named by it, "
                              "with round and framework where the table gives them)",
                              file=path, key_path=f"line {i}", value=key)
        seen[key] = i
        rows.append(MeasuredRun(**values, origin=(str(path), i)))
    if not rows:
        raise ConfigError("has no measured rows (only a header)", file=path)
    return rows


def _rows(reader, path):
    """``(line, row)`` of the table's rows; a cell over :data:`MAX_CELL_CHARS` or text the CSV
    reader refuses is one error naming the line, never quoting it."""
    i = 1
    while True:
        i += 1
        try:
            raw = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ConfigError(f"is not a CSV table the reader can parse ({str(exc)[:80]})",
                              file=path, key_path=f"line {i}") from None
        for name, value in raw.items():
            if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
                raise ConfigError(f"holds a cell of {len(value):,} characters, over the limit of "
                                  f"{MAX_CELL_CHARS:,}", file=path, key_path=f"line {i}.{name}")
        yield i, raw


def _read(path):
    """The bytes of a table file, through the one way in for files (a regular file of at most
    :data:`~wus_sim.inputs.limits.MAX_FILE_BYTES`); anything else is a one-line error."""
    return read_bytes(path, what="measured table (CSV)", named_by="measured", limit=MAX_FILE_BYTES)


def table_identity(path=None):
    """Provenance of a measured table: :data:`DATA_SOURCE` for the shipped one; for another
    file its name, path and SHA-256 (what a calibration records and :func:`same_table` checks)."""
    if path is None or (isinstance(path, str) and path == "shipped"):
        return dict(DATA_SOURCE)
    path = Path(path)
    data = _read(path)  # looked at first: resolve() of a loop of links raises
    if path.resolve() == SHIPPED_MEASURED:
        return dict(V06_SOURCE)
    if path.resolve() in SHIPPED_TABLES:
        return {
            "name": f"Google's MLPerf {SHIPPED_TABLES[path.resolve()]} TPU-v3 runs",
            "table": f"wus_sim/data/validation/{path.name}"}
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    return {"name": f"the measured runs in {path.name}", "table": str(path), "sha256": digest}


def same_table(data, identity):
    """Whether a calibration's ``provenance.data`` names the table *identity* describes."""
    if not isinstance(data, dict):
        return False
    if "sha256" in identity:
        return data.get("sha256") == identity["sha256"]
    return "sha256" not in data and data.get("table") == identity.get("table")
