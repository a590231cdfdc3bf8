"""Measured step times of Google's MLPerf v0.6 TPU-v3 runs, as shipped in a CSV.

The table is generated from the public logs by ``tests/regenerate_mlperf_v06.py``;
its columns, units and method are documented in ``wus_sim/data/validation/README.md``.
:func:`load_measured` reads it strictly: an unknown or missing column, or a value
that does not parse, is a :class:`~wus_sim.errors.ConfigError` naming the file,
the row and the column.
"""

import csv
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import ConfigError

__all__ = ["MeasuredRun", "load_measured", "SHIPPED_MEASURED", "KINDS", "UPDATES", "DATA_SOURCE"]

DATA_SOURCE = {
    "name": "Google's MLPerf v0.6 TPU-v3 runs",
    "repository": "github.com/mlcommons/training_results_v0.6",
    "commit": "f312518c2d6107eec983750eed23950f1f0c8a0e",
    "table": "wus_sim/data/validation/mlperf_v06_tpu_v3.csv",
    "generator": "tests/regenerate_mlperf_v06.py",
}
"""Where the shipped table comes from (the commit tests/regenerate_mlperf_v06.py pins)."""

SHIPPED_MEASURED = Path(__file__).resolve().parent.parent / "data" / "validation" / "mlperf_v06_tpu_v3.csv"
"""The shipped table (Google's MLPerf v0.6 TPU-v3 submission logs)."""

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
    """Paths in github.com/mlcommons/training_results_v0.6 at the pinned commit."""


COLUMNS = tuple(f.name for f in fields(MeasuredRun))


def _parse(value, name, kind):
    if kind is str:
        return value
    if kind is int:
        return int(value)
    if kind is float:
        x = float(value)
        if not x > 0:
            raise ValueError("must be > 0")
        return x
    if name == "bn_group_cores":
        return None if value == "" else int(value)
    if name == "eval_on_device":
        return {"true": True, "false": False, "unknown": None}[value]
    if name == "sources":
        return tuple(s.strip() for s in value.split(";") if s.strip())
    raise AssertionError(f"no parser for column {name}")


_TYPES = {"cores": int, "replicas": int, "spatial_ways": int, "global_batch": int,
          "per_replica_batch": int, "steps_per_loop": int, "runs": int,
          "measured_step_s": float, "step_s_min": float, "step_s_max": float,
          "bn_group_cores": None, "eval_on_device": None, "sources": None}


def load_measured(path=None):
    """Rows of the measured-step-time table (the shipped one by default)."""
    path = Path(path) if path is not None else SHIPPED_MEASURED
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError("file not found", file=path) from None
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    for name in header:
        if name not in COLUMNS:
            raise ConfigError(f"is not a known column; known columns: {', '.join(COLUMNS)}",
                              file=path, key_path=name, show_value=False)
    for name in COLUMNS:
        if name not in header:
            raise ConfigError("column is missing", file=path, key_path=name, show_value=False)
    rows = []
    for i, raw in enumerate(reader, start=2):          # line 1 is the header
        if None in raw or any(v is None for v in raw.values()):
            raise ConfigError("has a different number of fields from the header", file=path,
                              key_path=f"line {i}", show_value=False)
        values = {}
        for name in COLUMNS:
            try:
                values[name] = _parse(raw[name], name, _TYPES.get(name, str))
            except (ValueError, KeyError) as exc:
                rule = str(exc) if isinstance(exc, ValueError) and "must" in str(exc) else "does not parse"
                raise ConfigError(rule, file=path, key_path=f"line {i}.{name}", value=raw[name]) from None
        for name, allowed in (("kind", KINDS), ("update", UPDATES)):
            if values[name] not in allowed:
                raise ConfigError(f"must be one of {', '.join(allowed)}", file=path,
                                  key_path=f"line {i}.{name}", value=values[name])
        rows.append(MeasuredRun(**values))
    return rows
