"""Plots of experiment results: each function takes an ``ax`` and a DataFrame and returns what it drew.

The DataFrame is a results table (:mod:`wus_sim.experiments.results`): long form,
one row per point and strategy. Functions pick the rows they need (sharded rows
for speedups, ``status == 'ok'`` for times) and label axes with units from the
column table. matplotlib is imported inside the functions only.

An experiment's ``plots:`` entries name a *kind* (a key of :data:`PLOT_KINDS`)
and its options; :func:`check_plots` validates them before a run and
:func:`save_plots` draws each into ``NAME.png`` and ``NAME.svg``. Common options:
``title``, ``where`` (``{column: value or [values]}``: keep only those rows),
``facet`` (a column: one panel per value) and ``figsize`` ([width, height] inches).
"""

from dataclasses import dataclass
import math
from pathlib import Path

from .config import key_join
from .experiments.results import column_label, columns
from .timeline import BREAKDOWN_PARTS  # step-time parts, stacked bottom to top

__all__ = [
    "PLOT_KINDS", "BREAKDOWN_PARTS", "MEMORY_PARTS",
    "STYLE", "plot_speedup", "plot_breakdown", "plot_memory", "plot_heatmap", "plot_lines",
    "check_plots", "draw_figure", "save_plots",
]

MEMORY_PARTS = ("mem_weights_bytes", "mem_gradients_bytes", "mem_slots_bytes", "mem_padding_bytes",
                "mem_activations_bytes", "mem_collective_buffers_bytes")
"""Per-replica memory parts, stacked bottom to top (those present in the results)."""

_PART_COLORS = {
    "fwd_s": "#4C72B0", "bwd_s": "#8FAADC", "update_s": "#DD8452", "exposed_comm_s": "#C44E52",
    "extra_reduction_s": "#937860", "idle_s": "#BBBBBB", "overhead_s": "#6C6C6C",
    "mem_weights_bytes": "#4C72B0", "mem_gradients_bytes": "#8FAADC", "mem_slots_bytes": "#DD8452",
    "mem_padding_bytes": "#937860", "mem_activations_bytes": "#55A868",
    "mem_collective_buffers_bytes": "#BBBBBB",
}
_STRATEGY_SHORT = {"replicated": "rep", "sharded": "shd"}
STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.3, "svg.fonttype": "none",
}
"""matplotlib rcParams of the saved plots (``plt.rcParams.update(STYLE)`` in a notebook)."""


# ----------------------------------------------------------------- helpers
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
    from .experiments.spec import POINT_KEYS

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


def _fmt(value):
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


_SHORT = {
    "per_replica_batch": "{}/replica", "global_batch": "global batch {}", "link_GBps": "{} GB/s",
    "hop_latency_us": "{} us/hop", "bucket_MiB": "{} MiB buckets", "grad_dtype": "{} grads",
    "cores": "{} cores", "replicas": "{} replicas", "chips": "{} chips", "ndim": "{}-D",
    "mxu_efficiency": "MXU {}", "steps": "{} steps",
}
"""How a value reads in a legend or group label, per column (others read ``column=value``)."""
_BOOL_WORDS = {"wraparound": ("torus", "mesh"), "bidirectional": ("bidirectional", "unidirectional"),
               "overlap_grad_reduce": ("overlapped reduce", "reduce after backward"),
               "overlap_all_gather": ("overlapped gather", "gather at step end")}


def _label(keys, values):
    import pandas as pd

    if not keys:
        return "all"
    values = values if isinstance(values, tuple) else (values,)
    parts = []
    for k, v in zip(keys, values):
        missing = not isinstance(v, (list, tuple)) and bool(pd.isna(v))
        text = "default" if missing else _fmt(v)
        if k in _BOOL_WORDS and text in ("True", "False"):
            parts.append(_BOOL_WORDS[k][text == "False"])
        elif k in _SHORT:
            parts.append(_SHORT[k].format(text))
        elif isinstance(v, str) and not text.replace(".", "").isdigit() and text not in ("True", "False"):
            parts.append(text)  # names speak for themselves
        else:
            parts.append(f"{k}={text}")
    return ", ".join(parts)


def _groups(df, keys):
    if not keys:
        return [((), df)]
    # Results come in sweep order; keep it (it is the order the user wrote the values in).
    return list(df.groupby(keys, sort=False, dropna=False))


def _legend_outside(ax, **kw):
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                     borderaxespad=0.0, **kw)


def _log2_axis(ax, values):
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ticks = sorted({float(v) for v in values if v == v and v > 0})
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([_fmt(t) for t in ticks])
    if len(ticks) > 1:
        ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)


# ----------------------------------------------------------------- plots
def plot_speedup(ax, df, *, x="replicas", y="speedup", hue="workload", logx=True, title=None):
    """Speedup of sharded over replicated weight update vs *x* (replicas, log2 axis), a line per *hue*.

    Uses the sharded rows with status ok. Returns the list of Line2D drawn.
    """
    rows = _ok(_with(df, [x, y]), "sharded").dropna(subset=[x, y])
    keys = _label_keys(rows, hue, exclude=(x,), unique_by=(x,))
    lines = []
    markers = "osD^v<>ph*"
    for i, (values, group) in enumerate(_groups(rows, keys)):
        group = group.sort_values(x)
        (line,) = ax.plot(group[x].astype(float), group[y].astype(float), marker=markers[i % len(markers)],
                          linewidth=1.8, markersize=5, label=_label(keys, values))
        lines.append(line)
    ax.axhline(1.0, color="0.35", linestyle="--", linewidth=1, zorder=0)
    ax.text(1.0, 1.0, " no gain", transform=ax.get_yaxis_transform(), va="bottom", ha="right",
            fontsize=8, color="0.35")
    if logx and len(rows):
        _log2_axis(ax, rows[x].astype(float))
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel("speedup = replicated / sharded step time" if y == "speedup" else _axis_label(y))
    ax.set_title(title or "Speedup of sharded over replicated weight update")
    _legend_outside(ax, title=", ".join(keys) if keys else None)
    return lines


def plot_breakdown(ax, df, *, by=None, parts=BREAKDOWN_PARTS, title=None, annotate=True):
    """Stacked step-time breakdown (ms), replicated vs sharded bar side by side for each group.

    Groups are the values of *by* (default: the parameters that vary). Returns the
    list of BarContainers drawn (one per part).
    """
    rows = _ok(_with(df, ["step_time_s", "speedup"]))
    parts = [p for p in parts if p in rows.columns]
    keys = _label_keys(rows, by if by is not None else _varying(rows), exclude=())
    bars = _strategy_bars(rows, keys, parts, scale=1e3)
    containers = _stack(ax, bars.positions, _BAR_WIDTH, parts, bars.values)
    if annotate:
        for xpos, srow in zip(bars.positions, bars.rows):
            if srow["strategy"] == "sharded" and "speedup" in srow and srow["speedup"] == srow["speedup"]:
                ax.annotate(f"x{float(srow['speedup']):.2f}", (xpos, float(srow["step_time_s"]) * 1e3),
                            xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=8)
    _strategy_ticks(ax, bars)
    ax.set_ylim(0, max(_bar_tops(containers), default=1.0) * 1.12)
    ax.set_ylabel("step time [ms]")
    ax.set_title(title or "Step-time breakdown: replicated (rep) vs sharded (shd) update")
    _legend_outside(ax, reverse=True)
    return containers


def plot_memory(ax, df, *, by=None, parts=MEMORY_PARTS, title=None, capacity=True):
    """Per-replica memory (GiB), stacked by part, replicated vs sharded for each group (e.g. optimizer).

    Rows of every status are drawn (an infeasible point is exactly the one that
    does not fit); a dashed line marks the HBM capacity when ``hbm_bytes`` is known.
    Returns the list of BarContainers drawn.
    """
    rows = _with(df, ["mem_peak_bytes"]).dropna(subset=["mem_peak_bytes"])
    parts = [p for p in parts if p in rows.columns and rows[p].fillna(0).abs().sum() > 0]
    keys = _label_keys(rows, by if by is not None else ["optimizer"], exclude=())
    bars = _strategy_bars(rows, keys, parts, scale=2.0**-30)
    peaks = [float(srow["mem_peak_bytes"]) / 2**30 for srow in bars.rows]
    containers = _stack(ax, bars.positions, _BAR_WIDTH, parts, bars.values)
    ax.scatter(bars.positions, peaks, marker="_", s=200, color="black", zorder=3, label="peak")
    for xpos, peak, srow in zip(bars.positions, peaks, bars.rows):
        if srow.get("status", "ok") != "ok":
            ax.annotate("does not fit", (xpos, peak), xytext=(0, 3), textcoords="offset points",
                        ha="center", fontsize=7, color="#C44E52")
    hbm = None
    if capacity and "hbm_bytes" in rows.columns and rows["hbm_bytes"].notna().any():
        hbm = float(rows["hbm_bytes"].dropna().min()) / 2**30
        if max(peaks, default=0.0) >= 0.4 * hbm:
            ax.axhline(hbm, color="#C44E52", linestyle="--", linewidth=1, label=f"HBM per replica ({hbm:.3g} GiB)")
        else:
            # Far above the bars: say it rather than squash them.
            ax.plot([], [], " ", label=f"HBM per replica: {hbm:.3g} GiB (off scale)")
            hbm = None
    _strategy_ticks(ax, bars)
    tops = _bar_tops(containers) + peaks + ([hbm] if hbm else [])
    ax.set_ylim(0, max(tops, default=1.0) * 1.1)
    ax.set_ylabel("memory per replica [GiB]")
    ax.set_title(title or "Per-replica memory: replicated (rep) vs sharded (shd)")
    _legend_outside(ax, reverse=True)
    return containers


def plot_heatmap(ax, df, *, x="link_GBps", y="replicas", value="speedup", strategy="sharded",
                 title=None, fmt=".2f", cmap="RdYlGn"):
    """What-if heatmap: *value* over *x* and *y* (e.g. speedup over link bandwidth x slice size).

    The colour scale is centred on 1 for speedups (green: sharding faster). Cells
    without an ok row are grey and marked 'n/a'. Returns the AxesImage.
    """
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    df = _with(df, [x, y, value])
    rows = df if strategy is None else df[df["strategy"] == strategy]
    ok = _ok(rows)
    xs = sorted(rows[x].dropna().unique(), key=float if _numeric(rows[x]) else str)
    ys = sorted(rows[y].dropna().unique(), key=float if _numeric(rows[y]) else str)
    if not xs or not ys:
        ax.text(0.5, 0.5, f"no values of {x} and {y} to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return None
    grid = np.full((len(ys), len(xs)), np.nan)
    table = ok.groupby([y, x])[value].mean()
    for (yv, xv), v in table.items():
        grid[ys.index(yv), xs.index(xv)] = v
    finite = grid[np.isfinite(grid)]
    norm = None
    if value == "speedup" and finite.size:
        # Symmetric in ratio: x1.25 and x0.8 get equally strong colours.
        spread = max(float(finite.max()), 1.0 / float(finite.min()), 1.001)
        norm = TwoSlopeNorm(vcenter=1.0, vmin=1.0 / spread, vmax=spread)
    cmap_obj = _cmap(cmap).with_extremes(bad="#DDDDDD")
    image = ax.imshow(np.ma.masked_invalid(grid), origin="lower", aspect="auto", cmap=cmap_obj, norm=norm)
    for (i, j), v in np.ndenumerate(grid):
        if not np.isfinite(v):
            ax.text(j, i, "n/a", ha="center", va="center", fontsize=8, color="0.3")
            continue
        r, g, b, _ = cmap_obj(image.norm(v))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # perceived luminance of the cell
        ax.text(j, i, format(v, fmt), ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_fmt(v) for v in ys])
    ax.grid(False)
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel(_axis_label(y))
    cbar = ax.figure.colorbar(image, ax=ax, pad=0.02)
    cbar.set_label("speedup (replicated / sharded)" if value == "speedup" else column_label(value)[0])
    what = "Speedup of sharded over replicated" if value == "speedup" else column_label(value)[0]
    ax.set_title(title or f"{what}\nby {_axis_label(x, unit=False)} and {_axis_label(y, unit=False)}")
    return image


def plot_lines(ax, df, *, x, y="step_time_s", hue=None, strategies=("replicated", "sharded"), logx=False,
               logy=False, title=None):
    """*y* vs *x*, one line per *hue* group and strategy (solid replicated, dashed sharded).

    Returns the list of Line2D drawn.
    """
    rows = _ok(_with(df, [x, y])).dropna(subset=[x, y])
    rows = rows[rows["strategy"].isin(list(strategies))]
    keys = _label_keys(rows, hue, exclude=(x,), unique_by=(x, "strategy"))
    _, scale = column_label(y)
    lines = []
    colors = [c["color"] for c in _prop_cycle()]
    markers = "osD^v<>ph*"
    both = rows["strategy"].nunique() > 1
    for i, (values, group) in enumerate(_groups(rows, keys)):
        for strategy, style in (("replicated", "-"), ("sharded", "--" if both else "-")):
            sgroup = group[group["strategy"] == strategy].sort_values(x)
            if sgroup.empty:
                continue
            label = _label(keys, values) if keys else strategy
            if keys and both:
                label += f" ({_STRATEGY_SHORT[strategy]})"
            xv = sgroup[x].astype(float) if _numeric(sgroup[x]) else sgroup[x].astype(str)
            (line,) = ax.plot(xv, sgroup[y].astype(float) * scale, linestyle=style,
                              marker=markers[i % len(markers)], color=colors[i % len(colors)],
                              linewidth=1.8, markersize=5, label=label)
            lines.append(line)
    if logx and len(rows) and _numeric(rows[x]):
        _log2_axis(ax, rows[x].astype(float))
    if logy:
        ax.set_yscale("log")
    if y == "speedup":
        ax.axhline(1.0, color="0.35", linestyle="--", linewidth=1, zorder=0)
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel(_axis_label(y))
    ax.set_title(title or f"{_axis_label(y, unit=False).capitalize()} vs {_axis_label(x, unit=False)}")
    _legend_outside(ax)
    return lines


_BAR_WIDTH = 0.8
_GROUP_GAP = 1.0  # empty bar slots between groups


@dataclass
class _StrategyBars:
    """Replicated and sharded bars side by side, one pair per group: where they stand, what they show."""

    positions: list
    strategies: list
    rows: list
    """The results row each bar draws."""
    values: dict
    """Per part: the scaled value of each bar (0 where missing)."""
    centers: list
    """Middle of each group's bars, for its label."""
    group_labels: list


def _strategy_bars(rows, keys, parts, scale):
    """Lay out the first replicated and sharded row of each group (by *keys*), values of *parts* x *scale*."""
    bars = _StrategyBars([], [], [], {p: [] for p in parts}, [], [])
    x = 0.0
    for gvalues, group in _groups(rows, keys):
        start = x
        for strategy in ("replicated", "sharded"):
            srow = group[group["strategy"] == strategy]
            if srow.empty:
                continue
            srow = srow.iloc[0]
            bars.positions.append(x)
            bars.strategies.append(strategy)
            bars.rows.append(srow)
            for p in parts:
                bars.values[p].append(float(srow[p]) * scale if srow[p] == srow[p] else 0.0)
            x += 1.0
        if x > start:
            bars.centers.append((start + x - 1.0) / 2)
            bars.group_labels.append(_label(keys, gvalues).replace(", ", "\n"))
            x += _GROUP_GAP
    return bars


def _strategy_ticks(ax, bars):
    """"rep"/"shd" under each bar, the group's name under each pair."""
    ax.set_xticks(bars.positions, [_STRATEGY_SHORT[s] for s in bars.strategies], minor=True)
    _group_ticks(ax, bars.centers, bars.group_labels)
    ax.tick_params(axis="x", which="major", length=0, pad=16)
    ax.tick_params(axis="x", which="minor", length=0, labelsize=8)
    ax.grid(axis="x", visible=False)


def _group_ticks(ax, centers, labels):
    """Group names under each pair of bars; smaller when there are many, so neighbours do not touch."""
    longest = max((len(line) for label in labels for line in label.split("\n")), default=0)
    # characters of a 9 pt label (about 0.6 em wide) that fit under one group of bars
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    fit = width_in * 72 / (9 * 0.6) / max(len(labels), 1)
    crowded = longest > 0.8 * fit
    if crowded:  # break long names after a hyphen: "transformer-\nbig"
        labels = ["\n".join(line.replace("-", "-\n", 1) if len(line) > 12 else line for line in label.split("\n"))
                  for label in labels]
    ax.set_xticks(centers, labels, fontsize=8 if crowded else 9)


def _stack(ax, positions, width, parts, values):
    """Stacked bars, one container per part (parts that are zero everywhere are left out)."""
    containers = []
    bottom = [0.0] * len(positions)
    for p in parts:
        if not any(values[p]):
            continue
        c = ax.bar(positions, values[p], width, bottom=bottom, color=_PART_COLORS.get(p),
                   label=column_label(p)[0].split(" [")[0], edgecolor="white", linewidth=0.5)
        containers.append(c)
        bottom = [b + v for b, v in zip(bottom, values[p])]
    return containers


def _bar_tops(containers):
    """Top of every stacked bar (for the y limit: zero-height bars pin autoscaling)."""
    if not containers:
        return []
    tops = [0.0] * len(containers[0].patches)
    for c in containers:
        for i, patch in enumerate(c.patches):
            tops[i] = max(tops[i], patch.get_y() + patch.get_height())
    return tops


_AXIS_NAMES = {
    "replicas": ("data-parallel replicas", ""), "cores": ("slice size", "TPU cores"),
    "chips": ("slice size", "chips"), "per_replica_batch": ("per-replica batch", "examples"),
    "global_batch": ("global batch", "examples"), "link_GBps": ("link bandwidth", "GB/s"),
    "hop_latency_us": ("hop latency", "us"), "bucket_MiB": ("fusion bucket", "MiB"),
    "step_time_s": ("step time", "ms"), "speedup": ("speedup (replicated / sharded)", ""),
}


def _axis_label(name, *, unit=True):
    """Readable axis label with the unit values are shown in (ms for seconds, GiB for bytes)."""
    text, shown = _AXIS_NAMES.get(name, (None, None))
    if text is None:
        label = column_label(name)[0]
        text, _, rest = label.partition(" [")
        shown = rest.rstrip("]")
    return f"{text} [{shown}]" if unit and shown else text


def _numeric(series):
    import pandas as pd

    return pd.api.types.is_numeric_dtype(series)


def _cmap(name):
    import matplotlib

    return matplotlib.colormaps[name]


def _prop_cycle():
    import matplotlib.pyplot as plt

    return list(plt.rcParams["axes.prop_cycle"])


# ----------------------------------------------------------------- plot specs
@dataclass(frozen=True)
class _Kind:
    function: object
    options: dict
    """option -> its type: 'column', 'columns', 'bool' or 'string' (defaults are the function's)."""
    size: tuple
    """Default figure size of one panel, inches."""

    def required(self):
        """Options the function cannot do without (keyword-only, no default), e.g. ``lines``' ``x``."""
        import inspect

        return sorted(name for name, p in inspect.signature(self.function).parameters.items()
                      if p.kind is p.KEYWORD_ONLY and p.default is p.empty)


PLOT_KINDS = {
    "speedup": _Kind(plot_speedup, {"x": "column", "y": "column", "hue": "columns", "logx": "bool"}, (6.4, 3.8)),
    "breakdown": _Kind(plot_breakdown, {"by": "columns", "annotate": "bool"}, (6.4, 4.0)),
    "memory": _Kind(plot_memory, {"by": "columns", "capacity": "bool"}, (6.4, 4.0)),
    "heatmap": _Kind(plot_heatmap, {"x": "column", "y": "column", "value": "column", "strategy": "string",
                                    "fmt": "string", "cmap": "string"}, (6.4, 4.4)),
    "lines": _Kind(plot_lines, {"x": "column", "y": "column", "hue": "columns", "logx": "bool", "logy": "bool"},
                   (6.4, 3.8)),
}
"""Plot kinds an experiment may ask for: the function and its options."""

_COMMON = {"title", "where", "facet", "figsize"}

MAX_FIGSIZE_IN = 50
"""Largest figure side, inches (a panel; faceted figures have up to 3 across)."""


def check_plots(plots):
    """Validate every :class:`~wus_sim.experiments.spec.PlotSpec`; errors name file and key path."""
    known = {c.name for c in columns()}
    for plot in plots:
        sec = plot.section
        if plot.kind not in PLOT_KINDS:
            raise sec.error("kind", f"must be one of {', '.join(PLOT_KINDS)}", plot.kind)
        kind = PLOT_KINDS[plot.kind]
        # A missing required option is an error now, not a TypeError after the sweep.
        sec.check_keys(required=["kind", *kind.required()], optional={"name"} | _COMMON | set(kind.options))
        for option, otype in kind.options.items():
            if option not in plot.options:
                continue
            value = plot.options[option]
            names = value if otype == "columns" and isinstance(value, list) else [value]
            if otype in ("column", "columns"):
                for i, name in enumerate(names):
                    where = option if len(names) == 1 and not isinstance(value, list) else key_join(option, i)
                    if not isinstance(name, str):
                        rule = "a list of column names" if otype == "columns" else "one column name"
                        raise sec.error(where, f"must be a results column name (a string; {option} takes {rule})",
                                        name)
                    if name not in known:
                        where = option if len(names) == 1 and not isinstance(value, list) else key_join(option, i)
                        raise sec.error(where, f"is not a results column; known: {', '.join(sorted(known))}", name)
            elif otype == "bool":
                sec.boolean(option)
            else:
                sec.string(option)
        if "title" in plot.options:
            sec.string("title")
        if "facet" in plot.options and (not isinstance(plot.options["facet"], str)
                                        or plot.options["facet"] not in known):
            raise sec.error("facet", "is not a results column name", plot.options["facet"])
        if "figsize" in plot.options:
            size = plot.options["figsize"]
            # Bounded: matplotlib allocates width x height x dpi^2 pixels.
            if (not isinstance(size, list) or len(size) != 2
                    or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= MAX_FIGSIZE_IN
                           for v in size)):
                raise sec.error("figsize", f"must be [width, height] in inches, both > 0 and <= {MAX_FIGSIZE_IN}",
                                size)
        if "where" in plot.options:
            where = sec.section("where")
            for col in where.keys():
                if not isinstance(col, str) or col not in known:
                    raise where.error(col, "is not a results column", show_value=False)
                want = where.get(col)
                values = want if isinstance(want, list) else [want]
                if any(isinstance(v, (list, dict)) for v in values):
                    raise where.error(col, "must be a value or a list of values", want)


def _select(df, where):
    for col, want in (where or {}).items():
        want = want if isinstance(want, list) else [want]
        df = df[df[col].astype("string").isin([str(w) for w in want]) | df[col].isin(want)]
    return df


def draw_figure(plot, df):
    """A matplotlib Figure for one plot spec (one panel per ``facet`` value)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    kind = PLOT_KINDS[plot.kind]
    opts = {k: v for k, v in plot.options.items() if k not in _COMMON}
    rows = _select(df, plot.options.get("where"))
    facet = plot.options.get("facet")
    panels = (_groups(rows, [facet]) if facet else []) or [((), rows)]  # no rows: one empty panel
    ncols = min(len(panels), 3)
    nrows = math.ceil(len(panels) / ncols)
    w, h = plot.options.get("figsize", kind.size)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), layout="constrained", squeeze=False)
        for ax, (value, panel) in zip(axes.flat, panels):
            title = plot.options.get("title")
            if facet and value != ():  # () is the one empty panel of a selection with no rows
                value = value[0] if isinstance(value, tuple) else value
                title = f"{title + ': ' if title else ''}{_fmt(value)}"
            if panel.empty:
                ax.text(0.5, 0.5, "no rows to plot", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            kind.function(ax, panel, title=title, **opts)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_axis_off()
        if len(panels) > 1:
            _figure_legend(fig, axes.flat)
    return fig


def _figure_legend(fig, axes):
    """One legend for all panels, right of them (instead of one per panel)."""
    seen = {}
    title = None
    for ax in axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        title = title or (legend.get_title().get_text() or None)
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            seen.setdefault(text.get_text(), handle)
        legend.remove()
    if any(label.startswith("HBM per replica (") for label in seen):
        seen = {k: v for k, v in seen.items() if not k.endswith("(off scale)")}
    # Stacked parts top to bottom, as in each panel's own legend; then the rest as first seen.
    stack = [column_label(p)[0].split(" [")[0] for p in reversed(BREAKDOWN_PARTS + MEMORY_PARTS)]
    order = {label: i for i, label in enumerate(stack)}
    first = list(seen)
    seen = dict(sorted(seen.items(), key=lambda kv: (order.get(kv[0], len(stack)), first.index(kv[0]))))
    if seen:
        fig.legend(list(seen.values()), list(seen.keys()), loc="outside right upper", frameon=False, title=title)


def save_plots(plots, df, out_dir, *, on_skip=None):
    """Draw every plot spec into ``out_dir/NAME.png`` and ``NAME.svg``; return the paths written.

    A plot that cannot be drawn is skipped, not raised: the results are written before the
    plots, and no plot is worth losing a sweep's exit status or its other plots over.
    ``on_skip(plot, reason)`` is told about each (default: a warning on stderr).
    """
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    written = []
    for plot in plots:
        fig = None
        try:
            fig = draw_figure(plot, df)
            for ext in ("png", "svg"):
                path = out_dir / f"{plot.name}.{ext}"
                fig.savefig(path, dpi=150, bbox_inches="tight")
                written.append(path)
        except Exception as exc:  # noqa: BLE001 -- any failure of one plot is reported, then skipped
            reason = f"{type(exc).__name__}: {exc}"
            if on_skip is None:
                import sys

                from .limits import excerpt, short_repr

                print(f"warning: plot {short_repr(plot.name)} skipped: {excerpt(reason, 300)}", file=sys.stderr)
            else:
                on_skip(plot, reason)
        finally:
            if fig is not None:
                plt.close(fig)
    return written
