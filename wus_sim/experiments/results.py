"""The results table: every column, its unit and meaning, in one place; CSV/Parquet writing.

A run's results are long form: one row per simulated point and strategy.
The point's identity comes first (experiment, point index and hash), then the point
parameters (documented by :data:`wus_sim.experiments.spec.POINT_KEYS`, which is
where their meaning lives), then what the runner adds about the run and the slice
(status, error, wall time, replicas, chips, ...), then the simulator's results.
:func:`columns` merges the three into the one table that :func:`write_columns_doc`
writes beside the results as ``columns.md`` and ``columns.json``.
"""

from dataclasses import asdict, dataclass
import json
import os
from pathlib import Path

from ..inputs.errors import ConfigError
from .spec import POINT_KEYS

__all__ = [
    "Column", "RUN_COLUMNS", "RESULT_COLUMNS", "columns", "column", "column_label",
    "to_frame", "write_results", "write_columns_doc", "read_results",
]


@dataclass(frozen=True)
class Column:
    """One documented results column."""

    name: str
    unit: str
    """SI unit of the values ('' for names, flags and ratios)."""
    meaning: str
    group: str
    """'run' (added by the runner), 'parameter' (a point key) or 'result' (from the simulator)."""
    dtype: str
    """pandas dtype the column is written with: 'string', 'Int64', 'float64', 'boolean'."""


def _c(name, unit, dtype, meaning, group="result"):
    return Column(name, unit, meaning, group, dtype)


RUN_COLUMNS = (
    _c("experiment", "", "string", "Experiment name (the YAML's `name`, default its file stem).", "run"),
    _c("point_index", "", "Int64", "Position of the point in the experiment's sweep order (0-based).", "run"),
    _c("point_hash", "", "string", "Stable id of the point's parameters; the resume journal is keyed by it.", "run"),
    _c("status", "", "string", "'ok'; 'infeasible' (does not fit, e.g. over HBM; step results are empty); "
       "'error' (the simulator rejected the point; see `error`).", "run"),
    _c("error", "", "string", "Why the row is not 'ok' (empty when it is).", "run"),
    _c("wall_s", "s", "float64", "Wall-clock seconds the simulator spent on the whole point (all its strategies).",
       "run"),
    _c("replicas", "", "Int64", "Data-parallel replicas over all slices: one per core, or cores / spatial_ways "
       "for the MLPerf runs that partitioned each replica over several cores; times `slices` on a multislice.",
       "run"),
    _c("cores", "", "Int64", "Cores (TensorCores) in the slice: chips x cores_per_chip, the '32' of 'v3-32'.",
       "run"),
    _c("chips", "", "Int64", "Chips in the slice.", "run"),
    _c("chip", "", "string", "Chip model of the slice (tpu-v3, tpu-v4, ...; 'generic' for inline topologies).", "run"),
    _c("dims", "", "string", "Chips per torus axis, e.g. '32x32' or '8x8x8'.", "run"),
    _c("ndim", "", "Int64", "Torus dimensionality (2 for TPU v2/v3, 3 for v4).", "run"),
    _c("wrap", "", "string", "Wraparound per axis, 'T' (torus ring) or 'F' (mesh line), e.g. 'T,F'.", "run"),
)
"""Columns the runner adds to every row (slice columns are filled from the topology
when the simulator does not report them)."""

RESULT_COLUMNS = (
    _c("params", "", "Int64", "Trainable parameters of the workload (elements)."),
    _c("replicas_per_slice", "", "Int64", "Data-parallel replicas in one slice (`replicas` / `slices`)."),
    _c("step_time_s", "s", "float64", "Steady-state training step time (period between consecutive steps)."),
    _c("mfu", "", "float64",
       "Model-FLOPs utilisation, MaxText's definition: the step's model FLOPs (2 x MACs of every matmul x 3 "
       "for forward and backward, causal attention halved, the embedding lookup and remat recompute not "
       "counted) / step time / the device's bf16 peak, a fraction (wus_sim/model/model_flops.py)."),
    _c("tflops_per_s_per_device", "TFLOP/s", "float64", "Model TFLOP/s per device (MaxText's per_device_tflops_per_sec)."),
    _c("tokens_per_s_per_device", "1/s", "float64",
       "The workload's flops units (tokens of an LLM, images of a CNN) per second per device (a TensorCore, "
       "or a chip under megacore)."),
    _c("cost_usd_per_step", "USD", "float64",
       "What one step costs: chips x step_time_s x price_usd_per_chip_hour / 3600 (the chips of every slice, "
       "whatever the mesh uses; empty where the chip has no price or the step did not run)."),
    _c("cost_usd_per_million_tokens", "USD", "float64",
       "cost_usd_per_step / (global_batch x tokens per example) x 10^6, for workloads counted in tokens (the "
       "LLMs, BERT); empty for the others (images, pairs, sentence pairs: see cost_usd_per_thousand_examples)."),
    _c("cost_usd_per_thousand_examples", "USD", "float64",
       "cost_usd_per_step / global_batch x 1,000: the cost of 1,000 examples (images, sequences, pairs)."),
    _c("step_time_s_low", "s", "float64",
       "Low end of the step time's 95 % band: the calibration's fitted values' covariance and its declared "
       "values' ranges, to first order through the step's parts (null where the calibration states no "
       "uncertainty)."),
    _c("step_time_s_high", "s", "float64", "High end of the step time's 95 % band (see step_time_s_low)."),
    _c("band_kind", "", "string",
       "What the band covers: 'calibration' (chip measured, stack fitted: the fit's uncertainty) or "
       "'extrapolated' (a chip never measured or a stack without fitted costs: every value fitted on another "
       "chip or stack moved over its declared range; docs/model-error.md); empty where there is no band."),
    _c("band_why", "", "string", "Why the band is extrapolated ('; '-separated; empty otherwise)."),
    _c("fwd_s", "s", "float64", "Forward compute in the step."),
    _c("bwd_s", "s", "float64", "Backward compute in the step."),
    _c("batch_norm_s", "s", "float64",
       "Cross-replica batch-norm all-reduces in the step (bn_group_replicas > 1: each layer's statistics in "
       "forward and their gradients in backward; 0 without distributed batch norm)."),
    _c("exposed_comm_s", "s", "float64",
       "Time the core waits on gradient or weight collectives (not hidden behind compute)."),
    _c("tensor_comm_s", "s", "float64",
       "Device mesh: time the layers wait on their tensor-parallel collectives (counted apart from fwd_s and "
       "bwd_s; 0 without a tensor axis; empty without a mesh)."),
    _c("expert_comm_s", "s", "float64",
       "Device mesh: time the mixture-of-experts layers wait on their expert all-to-alls (dispatch and combine, "
       "forward and backward, on the expert axis's groups or over the DCN; on the critical path, counted apart "
       "from fwd_s and bwd_s; 0 without an expert axis; empty without a mesh)."),
    _c("context_comm_s", "s", "float64",
       "Device mesh: time the attention layers wait on their K/V collectives over the context axis (an "
       "all-gather of K and V forward, again backward, and their gradients' reduce-scatter; on the critical "
       "path, counted apart from fwd_s and bwd_s; 0 without a context axis; empty without a mesh)."),
    _c("pipeline_bubble_s", "s", "float64",
       "Device mesh: time a pipeline stage idles in the schedule's bubble ((stages-1)/(microbatches x repeats) of "
       "its blocks' busy time, forward and backward: pipeline_schedule); counted apart from fwd_s and bwd_s; 0 "
       "without a pipeline axis; empty without a mesh)."),
    _c("pipeline_comm_s", "s", "float64",
       "Device mesh: time the pipeline's collectives take on the critical path (each loop iteration's "
       "collective-permute of a microbatch's activations to the next stage, over one hop of the pipeline ring or "
       "the DCN, forward and backward, and the embedding and head gradients' all-reduce over the stages); counted "
       "apart from fwd_s and bwd_s; 0 without a pipeline axis; empty without a mesh)."),
    _c("fsdp_comm_s", "s", "float64",
       "Device mesh: the part of exposed_comm_s spent waiting on fsdp weight gathers and gradient "
       "reduce-scatters (empty without a mesh)."),
    _c("data_comm_s", "s", "float64",
       "Device mesh: the rest of exposed_comm_s, waiting on the data axis's collectives (empty without a mesh)."),
    _c("update_s", "s", "float64", "Weight update (optimizer) compute: all weights replicated, 1/N sharded."),
    _c("extra_reduction_s", "s", "float64",
       "Time the core waits on the optimizer's small cross-replica all-reduces (LARS/LAMB norms, clipping)."),
    _c("overhead_s", "s", "float64",
       "Fixed cost of the step that no part of the model explains: the calibrated step_overhead_s of the "
       "software stack."),
    _c("host_loop_s", "s", "float64",
       "The step's share of the host round trip per device loop (host_loop_s / steps_per_loop)."),
    _c("op_launch_s", "s", "float64",
       "Fixed cost of every op the step runs (op_overhead_s x forward, backward and update ops); counted apart "
       "from fwd_s, bwd_s and update_s."),
    _c("idle_s", "s", "float64", "Time the core waits on nothing the model knows (0 in a well-formed step)."),
    _c("host_offload_s", "s", "float64",
       "Time the layers wait on activations moving to or from host memory (an offloading remat_policy: where "
       "a layer's transfer over the host link outlasts its compute; counted apart from fwd_s and bwd_s; 0 "
       "otherwise)."),
    _c("op_overhead_s", "s", "float64", "Fixed cost per op used (compute model; calibrated, see `calibration`)."),
    _c("inside_validated_range", "", "boolean",
       "Whether the point lies inside what its calibration was checked on (chip, software stack, workload, "
       "examples per core, slice size, one slice); the model error the calibration states applies only inside."),
    _c("outside_validated_range", "", "string",
       "Why the point lies outside the validated range, one short reason per dimension ('; '-separated; "
       "empty inside)."),
    _c("step_overhead_s", "s", "float64", "Fixed cost per step used (compute model; calibrated)."),
    _c("elementwise_fwd_bytes", "B", "float64", "HBM bytes of elementwise work per layer-output element, forward."),
    _c("elementwise_bwd_bytes", "B", "float64", "HBM bytes of elementwise work per layer-output element, backward."),
    _c("activation_hbm_efficiency", "", "float64", "Fraction of HBM bandwidth of elementwise kernels and weight reads."),
    _c("update_hbm_efficiency", "", "float64", "Fraction of HBM bandwidth of the weight update."),
    _c("spatial_efficiency", "", "float64", "Matrix-unit speed-up per extra core of a spatially partitioned replica."),
    _c("backward_flops_ratio", "", "float64", "Backward FLOPs / forward FLOPs."),
    _c("peak_TFLOPs", "TFLOP/s", "float64", "Chip matrix-unit peak (bf16) from the chip datasheet figure."),
    _c("peak_int8_TOPs", "TOP/s", "float64",
       "Chip matrix-unit peak (int8) from the chip datasheet figure; the weight matmuls' peak under quantization "
       "int8 (empty for a chip without one)."),
    _c("hbm_GBps", "GB/s", "float64", "Chip HBM bandwidth (10^9 B/s) from the chip datasheet figure."),
    _c("onchip_GBps", "GB/s", "float64", "Core-to-core on-chip bandwidth used (10^9 B/s)."),
    _c("mem_weights_bytes", "B", "float64", "Per-replica HBM for weights."),
    _c("mem_gradients_bytes", "B", "float64", "Per-replica HBM for gradients."),
    _c("mem_slots_bytes", "B", "float64", "Per-replica HBM for optimizer slots (1/N of them when sharded)."),
    _c("mem_padding_bytes", "B", "float64", "Per-replica HBM lost to padding tensors to a multiple of N (sharded)."),
    _c("mem_activations_bytes", "B", "float64", "Per-replica HBM for activations kept for backward."),
    _c("mem_collective_buffers_bytes", "B", "float64", "Per-replica HBM for collective staging buffers."),
    _c("mem_peak_bytes", "B", "float64", "Per-replica peak HBM use."),
    _c("hbm_bytes", "B", "float64", "HBM capacity of one replica (the chip's, split over its cores)."),
    _c("grad_comm_bytes", "B", "float64",
       "Gradient bytes per replica entering the step's gradient collectives (all-reduce or reduce-scatter), "
       "summed over buckets (size convention: the full unsharded buffer)."),
    _c("gather_comm_bytes", "B", "float64",
       "Weight bytes per replica leaving the step's weight all-gathers (full buffer): sharded, one per sharded "
       "bucket after the update; fully-sharded, one before each bucket's forward and one before its backward "
       "(none with keep_gathered_weights); 0 replicated."),
    _c("update_bytes", "B", "float64", "HBM bytes the weight update reads and writes per replica per step."),
    _c("speedup", "", "float64",
       "Rows of every strategy but replicated: replicated step time / this row's step time, same point "
       "(> 1: faster than replicated; empty when replicated did not run or either did not fit)."),
    _c("speedup_low", "", "float64",
       "Low end of the speedup's 95 % band (the calibration's uncertainty through both steps at once; empty "
       "where speedup is, or where the calibration states no uncertainty)."),
    _c("speedup_high", "", "float64", "High end of the speedup's 95 % band (see speedup_low)."),
    _c("speedup_if_replicated_fit", "", "float64",
       "Rows of every strategy but replicated, where replicated does not fit in HBM and this row does: "
       "replicated's step time with HBM capacity ignored / this row's step time (a hypothetical; `speedup` "
       "stays empty). Empty elsewhere."),
    _c("speedup_over_sharded", "", "float64",
       "Fully-sharded rows: the sharded step time / this row's, same point (empty unless both ran and fit)."),
)
"""Results of the point simulator (``wus_sim.experiments.records.simulate_point``)."""


def columns():
    """Every documented column, in the order results are written."""
    params = [Column(p.name, p.unit, f"{p.meaning} Rule: {p.rule()}.", "parameter", _param_dtype(p))
              for p in POINT_KEYS.values()]
    run = list(RUN_COLUMNS)
    # strategy is a point key, but each row has one: replicated or sharded.
    return run[:3] + params + run[3:] + list(RESULT_COLUMNS)


def _param_dtype(param):
    return {"int": "Int64", "number": "float64", "bool": "boolean"}.get(param.kind, "string")


def column(name):
    """The :class:`Column` called *name* (KeyError if undocumented)."""
    for col in columns():
        if col.name == name:
            return col
    raise KeyError(name)


_DISPLAY = {"s": ("ms", 1e3), "B": ("GiB", 2.0**-30)}


def column_label(name, *, display=True):
    """Axis label for a column with its unit, and the factor to apply to values.

    Returns ``(label, scale)``: seconds are shown in ms and bytes in GiB when *display*.
    """
    try:
        col = column(name)
    except KeyError:
        return name.replace("_", " "), 1.0
    unit, scale = col.unit, 1.0
    if display and unit in _DISPLAY:
        unit, scale = _DISPLAY[unit]
    text = name
    # the unit goes in brackets, so the name's own unit word goes (dcn_GBps -> "dcn [GB/s]")
    for suffix in ("_s", "_bytes", "_GBps", "_us", "_MiB"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
            break
    text = text.replace("mem_", "").replace("_", " ")
    return (f"{text} [{unit}]" if unit else text), scale


def _cell(value):
    # Lists (per-axis wraparound) and dicts are not columnar: store them as JSON text.
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value


def to_frame(rows):
    """A DataFrame of result rows with documented columns first, typed per the table.

    Every documented column is there (results.v1.json promises it), null where no row has a
    value: a run whose every row failed has no row that reports ``params`` or ``spatial_ways``.
    Undocumented columns the simulator adds are kept, after the documented ones.
    """
    import pandas as pd

    # rows that all have the same keys (a sweep's) name the columns for pandas, which otherwise
    # lists every row's keys to find their union
    first = rows[0].keys() if rows and isinstance(rows[0], dict) else None
    same = first is not None and all(isinstance(r, dict) and r.keys() == first for r in rows)
    df = pd.DataFrame(rows, columns=list(first) if same else None)
    for name in df.columns:  # column by column: a sweep's 200,000 rows are 20 million cells
        col = df[name]
        cells = _cells_as_text(col)
        if cells is not col:
            df[name] = cells
    documented = list(columns())
    extra = [c for c in df.columns if c not in {d.name for d in documented}]
    df = df.reindex(columns=[c.name for c in documented] + extra)
    for col in documented:
        df[col.name] = _as_dtype(df[col.name], col.dtype)
    return df


def _cells_as_text(col):
    """*col* with its lists, tuples and dicts written as text (``_cell``); *col* itself if it has none."""
    import pandas as pd

    # (infer_dtype, in C, says which columns can hold a list at all: only a 'mixed' one)
    if col.dtype == object and pd.api.types.infer_dtype(col, skipna=True).startswith("mixed") \
            and any(isinstance(v, (list, tuple, dict)) for v in col):
        return col.map(_cell)
    return col


def _as_dtype(series, dtype):
    import pandas as pd

    if dtype == "string":
        if series.dtype != object and pd.api.types.is_string_dtype(series.dtype):
            return series.astype("string")  # already text (pandas' inferred str dtype): missing -> <NA>
        if series.dtype == object and all(isinstance(v, str) or v is None or v != v for v in series):
            return series.astype("string")  # None and NaN -> <NA>, text as it is
        return series.map(lambda v: None if v is None or (isinstance(v, float) and v != v) else str(v)
                          ).astype("string")
    if dtype == "float64":
        return pd.to_numeric(series, errors="coerce").astype("float64")
    if dtype == "Int64":
        return pd.to_numeric(series, errors="coerce").astype("Int64")
    if dtype == "boolean":
        return series.astype("boolean")
    raise ValueError(dtype)


def write_results(df, out_dir):
    """Write ``results.csv`` and ``results.parquet`` into *out_dir*; return their paths."""
    out_dir = Path(out_dir)
    csv_path, parquet_path = out_dir / "results.csv", out_dir / "results.parquet"
    from ..inputs.writes import write_atomic

    # Atomic: a run killed while writing leaves the old file or the new one, never half of one.
    write_atomic(csv_path, csv_text(df), what="results table")
    write_atomic(parquet_path, lambda f: df.to_parquet(f, index=False), what="results table")
    return csv_path, parquet_path


def csv_text(df):
    """The text ``df.to_csv(index=False)`` writes, built column by column: a float as its
    ``repr`` (the shortest text that reads back as the same double, which is what pandas
    writes), a missing value empty, a field quoted as the :mod:`csv` module pandas writes with
    quotes it (minimal quoting: a comma, a quote or the line terminator's characters inside;
    quotes doubled). A sweep's 200,000 rows take a tenth of pandas' time: most columns hold a
    few values (parameters, names, per-slice figures), each written once. A frame with a column of another kind
    than the results' (float, Int64, boolean, string) is written by pandas."""
    import numpy as np
    import pandas as pd

    if len(df.columns) < 2:  # (the csv module quotes a lone empty field: leave that to pandas)
        return df.to_csv(index=False)
    cells = []
    for name in df.columns:
        s = df[name]
        if s.dtype == np.float64:
            cells.append(_float_cells(s.to_numpy()))
        elif isinstance(s.dtype, (pd.Int64Dtype, pd.BooleanDtype, pd.StringDtype)):
            # each distinct value written once (pd.factorize, in C: names, statuses, counts)
            codes, distinct = pd.factorize(s.array, use_na_sentinel=True)
            texts = _quoted([v if v.__class__ is str else str(v)
                             for v in distinct.to_numpy(dtype=object, na_value=None).tolist()])
            texts.append("")  # code -1: missing
            cells.append(list(map(texts.__getitem__, codes.tolist())))
        else:
            return df.to_csv(index=False)
    header = ",".join(_quoted([str(c) for c in df.columns]))
    return os.linesep.join([header, *map(",".join, zip(*cells))]) + os.linesep


_NEEDS_QUOTES = (",", '"', *dict.fromkeys(os.linesep))
"""What makes the csv module quote a field: the delimiter, the quote, a character of the line
terminator pandas passes it (``os.linesep``; a lone ``\\r`` stays bare on Linux, as there)."""


def _quoted(fields):
    """*fields* as the csv module writes them with minimal quoting (``'"'`` the quote, no escape
    character): in quotes, quotes doubled, where a field holds one of :data:`_NEEDS_QUOTES`."""
    joined = "\0".join(fields)
    if not any(ch in joined for ch in _NEEDS_QUOTES):
        return fields
    return ['"' + f.replace('"', '""') + '"' if any(ch in f for ch in _NEEDS_QUOTES) else f for f in fields]


def _float_cells(values):
    """Each float's ``repr`` (empty for NaN). A column of a few distinct values (a sweep's
    parameters, a slice's figures) writes each once: ``np.unique`` pairs every cell with its
    value, unless a ``-0.0`` is there (it equals ``0.0`` but is written otherwise)."""
    import numpy as np

    if len(values) > 64:
        distinct, which = np.unique(values, return_inverse=True)  # NaNs: one value, last
        if 4 * len(distinct) < len(values) and not (np.signbit(values) & (values == 0)).any():
            texts = ["" if v != v else repr(v) for v in distinct.tolist()]
            return list(map(texts.__getitem__, which.tolist()))
    return ["" if v != v else repr(v) for v in values.tolist()]


RESULTS_IDENTITY = ("workload", "topology", "strategy", "status")
"""Columns every results table has (each row's point and outcome): what read_results requires."""


def read_results(path):
    """Read a results file (``.parquet`` or ``.csv``, or a run directory) as a DataFrame.

    The path is looked at first (:mod:`wus_sim.inputs.files`): a folder must hold results, a
    file must be a regular one (a FIFO or ``/dev/zero`` would never end); a file that is not a
    results table is one :class:`~wus_sim.inputs.errors.ConfigError` naming it."""
    import pandas as pd

    from ..inputs.files import check_file

    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError("must be a results file (.csv or .parquet) or a run folder", key_path="path", value=path)
    path = Path(path)
    if os.path.isdir(path):  # os.path's: False, not OSError, for a name too long
        path = path / "results.parquet" if os.path.isfile(path / "results.parquet") else path / "results.csv"
    check_file(path, what="results file")
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        df = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ConfigError(f"is not a results table: {type(exc).__name__}", file=path) from None
    except Exception as exc:  # pyarrow's own errors (ArrowInvalid, ...) for a file that is not Parquet
        if type(exc).__module__.startswith("pyarrow"):
            raise ConfigError(f"is not a results table: {type(exc).__name__}", file=path) from None
        raise
    missing = [c for c in RESULTS_IDENTITY if c not in df.columns]
    if missing:  # a CSV of anything parses: a results table names its points
        raise ConfigError(f"is not a results table: it has no {', '.join(missing)} column"
                          f"{'s' if len(missing) > 1 else ''} (see columns.md)", file=path)
    for col in columns():
        if col.name in df.columns:
            df[col.name] = _as_dtype(df[col.name], col.dtype)
    if "error" in df.columns:
        df["error"] = df["error"].fillna("")  # CSV cannot tell '' from missing; rows always have one
    return df


def write_columns_doc(df, out_dir):
    """Write ``columns.md`` and ``columns.json``: each column of *df*, its unit and meaning."""
    out_dir = Path(out_dir)
    present = set(df.columns)
    docs = [c for c in columns() if c.name in present]
    undocumented = [c for c in df.columns if c not in {d.name for d in docs}]
    lines = [
        "# Columns of results.csv / results.parquet",
        "",
        "One row per simulated point and strategy (long form). Units: s = seconds, B = bytes;",
        "GB/s = 10^9 B/s, MiB = 2^20 B, us = microseconds.",
        "",
        "| column | unit | group | meaning |",
        "|---|---|---|---|",
    ]
    for c in docs:
        lines.append(f"| `{c.name}` | {c.unit} | {c.group} | {c.meaning.replace('|', '/')} |")
    for name in undocumented:
        lines.append(f"| `{name}` |  | undocumented | Reported by the simulator; not in the column table. |")
    from ..inputs.writes import write_atomic

    write_atomic(out_dir / "columns.md", "\n".join(lines) + "\n")
    payload = [asdict(c) for c in docs] + [
        {"name": n, "unit": "", "meaning": "undocumented", "group": "undocumented", "dtype": ""}
        for n in undocumented]
    write_atomic(out_dir / "columns.json", json.dumps(payload, indent=1, allow_nan=False) + "\n")
    return out_dir / "columns.md"
