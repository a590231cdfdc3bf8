"""Which rows a plot draws and what its series, groups and axes are called (a single value as a figure
writes it: :mod:`wus_sim.experiments.display`)."""

from ..experiments.display import BOOL_WORDS, NAMED_KEYS, display_value, is_truth_value, value_text
from ..experiments.results import column_label

__all__ = ["fixed_parameters", "subtitle", "display_value", "NAMED_KEYS", "follows_x", "SLICE_KEYS", "what_ran",
           "set_title", "titled"]


def _with(df, names):
    """*df* with any missing column of *names* added empty (a run whose points all failed has none)."""
    missing = [n for n in names if n and n not in df.columns]
    return df.assign(**{n: float("nan") for n in missing}) if missing else df


def _ok(df, strategy=None):
    rows = df[df["status"] == "ok"] if "status" in df.columns else df
    if strategy is not None:
        rows = rows[rows["strategy"] == strategy]
    return rows


def _varying(df, exclude=()):
    """Point parameters (and slice columns) that take more than one value in *df*."""
    from ..experiments.spec import POINT_KEYS

    candidates = [k for k in POINT_KEYS if k != "strategy"] + ["replicas"]
    out = []
    for key in candidates:
        if key in df.columns and key not in exclude and df[key].astype("string").nunique(dropna=False) > 1:
            out.append(key)
    if "replicas" in out and ("topology" in out or "topology" in exclude):
        out.remove("replicas")  # it follows from the topology
    return out


def _label_keys(df, wanted, exclude, unique_by=("strategy",)):
    """*wanted* columns, plus as few other varying parameters as it takes for the rows
    of each (label, *unique_by*) to be one, so that no two series collapse into one.

    Greedy: add the parameter that separates the most rows, until none is left to separate
    (or none helps); the topology comes last among equals, its replica count says more.
    """
    wanted = [wanted] if isinstance(wanted, str) else list(wanted or [])
    keys = [k for k in wanted if k in df.columns]
    candidates = [k for k in _varying(df, exclude=set(keys)) if k not in exclude]
    candidates.sort(key=lambda k: k == "topology")
    by = [c for c in unique_by if c in df.columns]

    def clashes(cols):
        return int(df.duplicated(subset=cols + by).sum()) if len(df) else 0

    current = clashes(keys)
    while candidates and current:
        best = min(candidates, key=lambda k: (clashes(keys + [k]), candidates.index(k)))
        after = clashes(keys + [best])
        if after >= current:
            break
        keys.append(best)
        candidates.remove(best)
        current = after
    return keys


_SHORT = {
    "per_replica_batch": "{}/replica", "global_batch": "global batch {}", "link_GBps": "{} GB/s",
    "hop_latency_us": "{} us/hop", "bucket_MiB": "{} MiB buckets", "grad_dtype": "{} grads",
    "cores": "{} cores", "replicas": "{} replicas", "chips": "{} chips", "ndim": "{}-D",
    "mxu_efficiency": "MXU {}", "steps": "{} steps", "gather_prefetch": "prefetch {}",
    "failed_links": "{} failed links", "slices": "{} slices", "dcn_GBps": "DCN {} GB/s", "seed": "seed {}",
    "remat": "remat {}", "remat_policy": "remat {}", "quantization": "{} quantization", "software_stack": "stack {}",
    "megacore": "megacore {}", "mesh": "mesh {}", "dcn_mesh": "DCN mesh {}",
}
"""How a value reads in a legend or group label, per column (others read ``column=value``)."""


def _label(keys, values):
    import pandas as pd

    if not keys:
        return "all"
    values = values if isinstance(values, tuple) else (values,)
    parts = []
    for k, v in zip(keys, values):
        missing = not isinstance(v, (list, tuple)) and bool(pd.isna(v))
        text = "default" if missing else display_value(k, v)
        if k in BOOL_WORDS and not missing:
            parts.append(text)  # words of their own: "torus", "overlapped reduce"
        elif k in _SHORT:
            parts.append(_SHORT[k].format(text))
        elif isinstance(v, str) and not text.replace(".", "").isdigit() and not is_truth_value(v):
            parts.append(text)  # names speak for themselves
        else:
            parts.append(f"{_axis_label(k, unit=False)} {text}" if is_truth_value(v) else f"{k}={text}")
    return ", ".join(parts)


def _groups(df, keys):
    """``(key tuple, rows)`` per value of *keys*, in sweep order, NaN a group too (by hand for one key: pandas 2.2 fails)."""
    if len(keys) == 1 and df[keys[0]].isna().any():
        return [((v,), df[df[keys[0]].isna() if v != v else df[keys[0]] == v]) for v in df[keys[0]].unique()]
    return list(df.groupby(list(keys), sort=False, dropna=False)) if len(keys) else [((), df)]


_AXIS_NAMES = {
    "replicas": ("data-parallel replicas", ""), "cores": ("slice size", "TPU cores"),
    "chips": ("slice size", "chips"), "per_replica_batch": ("per-replica batch", "examples"),
    "global_batch": ("global batch", "examples"), "link_GBps": ("link bandwidth", "GB/s"),
    "hop_latency_us": ("hop latency", "us"), "bucket_MiB": ("fusion bucket", "MiB"),
    "step_time_s": ("step time", "ms"), "speedup": ("speedup (replicated / strategy)", ""),
    "step_time_s_low": ("step time, low end of its band", "ms"),
    "step_time_s_high": ("step time, high end of its band", "ms"),
    "speedup_low": ("speedup, low end of its band", ""), "speedup_high": ("speedup, high end of its band", ""),
    "dcn_GBps": ("DCN bandwidth per chip", "GB/s"), "dcn_latency_us": ("DCN latency", "us"),
    "mem_peak_bytes": ("peak memory per replica", "GiB"), "mxu_efficiency": ("MXU efficiency", ""),
    "hbm_GBps": ("HBM bandwidth", "GB/s"), "onchip_GBps": ("on-chip bandwidth", "GB/s"),
    "peak_TFLOPs": ("peak compute", "TFLOP/s"),
    "mfu": ("MFU (MaxText's definition)", ""),
    "tflops_per_s_per_device": ("model FLOP rate per device", "TFLOP/s"),
    "tokens_per_s_per_device": ("tokens (or images) per second per device", "1/s"),
    "cost_usd_per_step": ("cost of a step", "USD"), "cost_usd_per_million_tokens": ("cost per million tokens", "USD"),
    "cost_usd_per_thousand_examples": ("cost per 1,000 examples", "USD"),
    "price_usd_per_chip_hour": ("price of a chip-hour", "USD"),
}
_UNIT_WORDS = {"GBps", "Bps", "MiB", "GiB", "KiB", "us", "ms", "s", "bytes", "TFLOPs"}
"""Units as YAML keys spell them (``dcn_GBps``): a label drops such a last word, its bracket says it."""


def _axis_label(name, *, unit=True):
    """Readable axis label with the unit values are shown in (ms for seconds, GiB for bytes).

    The unit is said once: a column without its own wording (:data:`_AXIS_NAMES`) loses the
    unit word of its key (``dcn GBps [GB/s]`` read the unit twice), and a unit that repeats
    the name's last word (``steps [steps]``) is left out."""
    text, shown = _AXIS_NAMES.get(name, (None, None))
    if text is None:
        label = column_label(name)[0]
        text, _, rest = label.partition(" [")
        shown = rest.rstrip("]")
        words = text.split(" ")
        if shown and len(words) > 1 and words[-1] in _UNIT_WORDS:
            text = " ".join(words[:-1])
        if shown and text.split(" ")[-1] == shown:
            shown = ""
    return f"{text} [{shown}]" if unit and shown else text


def _numeric(series):
    import pandas as pd

    return pd.api.types.is_numeric_dtype(series)


HEADLINE_KEYS = ("workload", "topology", "optimizer", "global_batch", "per_replica_batch")
"""Parameters a figure names in its subtitle whenever they are fixed in it: without them a
speedup cannot be read (the same model gains 1.5x at 2 examples per replica, 1.1x at 16)."""
MAX_COMPANIONS = 3


def fixed_parameters(rows, *, exclude=(), chosen=()):
    """``(keys, values)`` of the point parameters with one value over *rows* that the figure's
    subtitle names: the :data:`HEADLINE_KEYS`, those in *chosen* (the keys the experiment set),
    and any whose value is not the parameter's own default (a fixed ``algorithm: ring`` is news;
    ``steps: 3`` is not). Values that are the model's default (null) are not named."""
    import pandas as pd

    from ..experiments.spec import POINT_KEYS

    keys, values = [], []
    for key, param in POINT_KEYS.items():
        if key == "strategy" or key in exclude or key not in rows.columns or rows.empty:
            continue
        if rows[key].astype("string").nunique(dropna=False) != 1:
            continue
        value = rows[key].iloc[0]
        if not isinstance(value, (list, tuple)) and bool(pd.isna(value)):
            continue
        if key in HEADLINE_KEYS or key in chosen or (param.default is not None and value_text(value) != value_text(param.default)):
            keys.append(key)
            values.append(value)
    return keys, tuple(values)


def subtitle(rows, *, title="", exclude=(), chosen=()):
    """``fixed: ...``, the :func:`fixed_parameters` of *rows* that the *title* does not already
    name (a title "Step time on TPU-v3-512" over "fixed: tpu-v3-512" said it twice); "" if none."""
    keys, values = fixed_parameters(rows, exclude=exclude, chosen=chosen)
    said = (title or "").lower()
    parts = [text for text in (_label([k], (v,)) for k, v in zip(keys, values)) if text.lower() not in said]
    return f"fixed: {', '.join(parts)}" if parts else ""


SLICE_KEYS = ("topology", "replicas", "cores", "chips")
"""Columns that name the slice: an axis of one of them moves the others with it (not news)."""
FOLLOWER_KEYS = ("per_replica_batch", "global_batch", "replicas", "slices", "grad_dtype", "bucket_MiB",
                 "link_GBps", "hop_latency_us", "wraparound", "bn_group_replicas")
"""Parameters the simulator may resolve per point (a batch from the slice's MLPerf run, the
replicas of a slice): when one moves with the x axis the figure says so."""


def follows_x(rows, x):
    """What else the x axis changes: ``"x also changes the per-replica batch: transformer-big 16,
    4, 4; resnet50 128, 128, 64 (at 32, 128, 512 replicas)"``, or "".

    A parameter follows x when, among rows alike in every other varying parameter, it takes
    more than one value and exactly one at each x: the quickstart's speedup over replicas is
    also a speedup over Transformer-big's per-replica batch (16 on v3-32, 4 on v3-128), which
    the MLPerf run of each slice sets, and most of its jump is the batch."""
    if x not in rows.columns or rows.empty:
        return ""
    # on a slice axis the global batch is the per-replica batch times the replicas: one of the
    # two moves by construction, and the per-replica batch is the one the step time answers to
    near = set(SLICE_KEYS) | {"global_batch"} if x in SLICE_KEYS else {x}
    xs = sorted(rows[x].dropna().unique(), key=float if _numeric(rows[x]) else str)
    parts = []
    for key in FOLLOWER_KEYS:
        if key in near or key not in rows.columns or rows[key].astype("string").nunique(dropna=True) < 2:
            continue
        others = [k for k in _varying(rows, exclude=near | set(FOLLOWER_KEYS))]
        groups = _groups(rows.dropna(subset=[x]), others)
        per_x = [g.groupby(x)[key].nunique(dropna=False) for _, g in groups]
        if any((n > 1).any() for n in per_x):
            continue  # two values at one x: swept beside x, a series of its own
        moving = [(v, g) for v, g in groups if g[key].astype("string").nunique(dropna=False) > 1]
        if not moving:
            continue
        # name the rows by the fewest of the other parameters that tell their sequences apart
        sequences = {}
        for values, g in moving:
            seq = tuple(display_value(key, g.loc[g[x] == v, key].iloc[0]).removeprefix(f"{key} ")  # said once
                        if (g[x] == v).any() else "-" for v in xs)
            sequences.setdefault(seq, values if isinstance(values, tuple) else (values,))
        # named when the rows differ: several sequences, or some rows whose value stays put
        named = len(sequences) > 1 or len(moving) < len(groups)
        every = [v if isinstance(v, tuple) else (v,) for v, _ in groups]
        by = [k for k in others if len({vals[others.index(k)] for vals in every}) > 1][:1] if named else []
        texts = []
        for seq, vals in sequences.items():
            who = _label(by, tuple(vals[others.index(k)] for k in by)) + " " if by else ""
            texts.append(who + ("; " if any(", " in t for t in seq) else ", ").join(seq))
        parts.append(f"{_axis_label(key, unit=False)}: {'; '.join(texts)}")
    if not parts:
        return ""
    where = ", ".join(display_value(x, v) for v in xs)
    return f"x also changes the {' and the '.join(parts)} (at {where} {_axis_label(x, unit=False)})"


def _companions(rows, keys, exclude=()):
    """Varying parameters that are constant within every series of *keys*, said in each series'
    label: paper_speedup's series are workloads, each with its own optimizer and global batch,
    and a reader comparing two lines must see that (at most :data:`MAX_COMPANIONS`)."""
    if not keys or rows.empty:
        return []
    out = []
    for key in _varying(rows, exclude=set(keys) | set(exclude)):
        per_series = rows.groupby(keys, dropna=False, sort=False)[key].nunique(dropna=False)
        if per_series.max() <= 1:
            out.append(key)
    return out[:MAX_COMPANIONS]


def _series_label(keys, values, companions, group):
    """A series' legend label: its *keys* values, then its *companions'* values in parentheses
    (bare: the legend's title names them, and a legend is read down, not across)."""
    label = _label(keys, values)
    if companions:
        label += f" ({', '.join(display_value(c, group[c].iloc[0]) for c in companions)})"
    return label


MAX_NAMED = 3
"""Most values of one parameter a title names; more are counted ("5 workloads")."""


def _named(rows, key, plural):
    """The values of *key* in *rows* as a title names them, in order of appearance; "" if none."""
    import pandas as pd

    if key not in rows.columns:
        return ""
    values = [v for v in rows[key].tolist() if isinstance(v, (list, tuple)) or not bool(pd.isna(v))]
    names = list(dict.fromkeys(display_value(key, v) for v in values))
    if len(names) > MAX_NAMED:
        return f"{len(names)} {plural}"
    return ", ".join(names)


def _slices(rows):
    """The slices of *rows*, smallest first: ``slice tpu-v3-512``, ``slices tpu-v3-32 to tpu-v3-2048 (4)``."""
    import pandas as pd

    if "topology" not in rows.columns:
        return ""
    known = rows.dropna(subset=["topology"])
    size = next((c for c in ("chips", "cores", "replicas") if c in known.columns and known[c].notna().any()), None)
    if size is not None:
        known = known.assign(_size=pd.to_numeric(known[size], errors="coerce")).sort_values("_size", kind="stable")
    names = list(dict.fromkeys(display_value("topology", v) for v in known["topology"]))
    if not names:
        return ""
    if len(names) <= 2:
        return f"slice{'s' if len(names) > 1 else ''} {', '.join(names)}"
    return f"slices {names[0]} to {names[-1]} ({len(names)})"


def what_ran(rows):
    """What a figure's *rows* ran, for its title: workload, optimizer, chip and slice, e.g.
    ``transformer-big with adam; chip tpu-v3, slices tpu-v3-32 to tpu-v3-2048 (4)`` (a heatmap
    named neither optimizer nor chip, and a reader of a design doc could not tell what it was of)."""
    workloads = _named(rows, "workload", "workloads")
    optimizers = _named(rows, "optimizer", "optimizers")
    chips = _named(rows, "chip", "chips")
    slices = _slices(rows)
    head = " with ".join(t for t in (workloads, optimizers) if t)
    tail = ", ".join(t for t in ((f"chip {chips}" if chips and "," not in chips and " " not in chips
                                  else f"chips {chips}" if chips else ""), slices) if t)
    return "; ".join(t for t in (head, tail) if t)


def titled(title, rows):
    """*title* with what its *rows* ran (:func:`what_ran`) on a line of its own."""
    ran = what_ran(rows)
    return "\n".join(t for t in (title, ran) if t)


def set_title(ax, title, rows):
    """Title *ax* with *title* and what its *rows* ran; a figure of several panels heads them with
    *title* (kept as ``ax.wus_heading``) over what all of them ran."""
    import textwrap

    ax.wus_heading = title
    # wrapped to the axes (about 0.55 em a character): the line of what ran is long
    width_pt = ax.get_position().width * ax.figure.get_figwidth() * 72
    chars = max(30, int(width_pt / (0.55 * TITLE_PT)))
    ran = textwrap.fill(what_ran(rows), chars)
    ax.set_title("\n".join(t for t in (title, ran) if t))


TITLE_PT = 11
"""Font size of an axes' title (:data:`~.style.STYLE`'s ``axes.titlesize``)."""
