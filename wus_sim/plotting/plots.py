"""The plot functions: each takes an ``ax`` and a results DataFrame and returns what it drew."""

from ..experiments.results import column_label
from ..model.memory import PARTS as _MEMORY_PART_NAMES, STRATEGY_NAMES
from ..training.timeline.timeline import BREAKDOWN_PARTS  # step-time parts, stacked bottom to top
from .bars import _BAR_WIDTH, _bar_tops, _mark_bars_not_ok, _stack, _strategy_bars, _strategy_ticks
from .labels import _axis_label, _groups, _label_keys, _numeric, _varying, _with, set_title
from .layout import fit_y_range
from .heatmap import (AGGREGATES, SPEEDUP_VALUES, AveragedCells, heatmap_averaged,  # noqa: F401 -- re-exported
                      heatmap_range, heatmap_title, heatmap_value_label, plot_heatmap)
from .series import SeriesStyles, draw_series, label_no_value_band, strategy_variants
from .style import NOT_OK_COLOR, _STRATEGY_SHORT, _legend_outside, _log2_axis, spans_octaves, strategy_style

__all__ = ["BREAKDOWN_PARTS", "MEMORY_PARTS", "plot_speedup", "plot_breakdown", "plot_memory", "plot_heatmap",
           "plot_lines", "heatmap_range", "heatmap_title", "SPEEDUP_VALUES", "heatmap_averaged", "AveragedCells", "AGGREGATES"]


MEMORY_PARTS = tuple(f"mem_{part}_bytes" for part in _MEMORY_PART_NAMES)
"""Per-replica memory parts, stacked bottom to top: the parts that add up to the peak
(:data:`wus_sim.model.memory.PARTS`; padding is inside weights, gradients and slots, so it is not
stacked again)."""


# ----------------------------------------------------------------- plots
def plot_speedup(ax, df, *, x="replicas", y="speedup", hue="workload", logx=None, title=None, styles=None):
    """Speedup of sharded (and fully-sharded) over replicated weight update vs *x* (replicas),
    a line per *hue* and strategy (each strategy its colour and marker, each series its line style).

    Draws the rows of every strategy but replicated with status ok; where a series has a
    point without a speedup (either strategy infeasible or failed) a cross in the band under
    the data marks it, its row named with why (:mod:`~.series`). *logx*: a log2 x axis
    (default: when the values span octaves, :func:`~.style.spans_octaves`). *styles*: the
    figure's :class:`~.series.SeriesStyles`. Returns the list of Line2D drawn, one per series
    and strategy.
    """
    rows = _with(df, [x, y])
    rows = rows[rows["strategy"].isin(STRATEGY_NAMES[1:])].dropna(subset=[x]).reset_index(drop=True)
    good = (rows["status"] == "ok") & rows[y].notna() if "status" in rows.columns else rows[y].notna()
    strategies = strategy_variants(STRATEGY_NAMES[1:], rows["strategy"])
    several = len(strategies) > 1
    keys = _series_keys(rows, hue, x, several)
    styles = styles or SeriesStyles()
    lines, entries, legend_title = draw_series(ax, rows, good, x, y, keys, scale=1.0, strategies=strategies,
                                               styles=styles, why=_speedup_reasons(df, rows, good))
    entries.append(_no_gain(ax))
    entries += _if_replicated_fit(ax, rows, x, y, keys, styles, several)
    if len(rows) and _numeric(rows[x]) and (spans_octaves(rows[x]) if logx is None else logx):
        _log2_axis(ax, rows[x].astype(float))
    fit_y_range(ax)
    label_no_value_band(ax)
    ax.set_xlabel(_axis_label(x))
    what = "sharded" if not several else "sharded (shd) and fully-sharded (fsd)"
    ax.set_ylabel(f"speedup = replicated / {'sharded' if not several else 'strategy'} step time" if y == "speedup"
                  else _axis_label(y))
    set_title(ax, title or f"Speedup of {what} over replicated weight update", rows)
    _legend_outside(ax, entries, title=legend_title)
    return lines


def _if_replicated_fit(ax, rows, x, y, keys, styles, several):
    """Hollow markers, in each line's colour and its strategy's marker, at
    ``speedup_if_replicated_fit`` where the speedup is empty because replicated does not fit in
    HBM: a hypothetical, drawn apart from the lines (no line joins them) and named so in the
    legend, once per strategy (a square for sharded, a triangle for fully-sharded: both were one
    hollow circle). Returns the legend entries."""
    col = "speedup_if_replicated_fit"
    if y != "speedup" or col not in rows.columns or not len(rows):
        return []
    marked = rows[rows[y].isna() & rows[col].notna()]
    if marked.empty or not _numeric(marked[x]):
        return []
    return _hollow_points(ax, marked, x, col, keys, styles, 1.0, gid="if-replicated-fit",
                          label="if replicated fit in HBM (capacity ignored)", several=several)


def _hollow_points(ax, rows, x, y, keys, styles, scale, *, gid, label, several):
    """Hollow markers at *rows*' *y* (x *scale*), each in its series' colour and its strategy's
    marker; returns one legend entry per strategy drawn ("LABEL: sharded" when *several*)."""
    from matplotlib.lines import Line2D

    styles = styles or SeriesStyles()
    drawn = {}
    for strategy, by_strategy in rows.groupby("strategy", sort=False) if "strategy" in rows.columns \
            else [(None, rows)]:
        groups = _groups(by_strategy, list(keys))
        for values, group in groups:
            values = values if isinstance(values, tuple) else (values,)
            look = styles.look(keys, values, strategy)
            ax.plot(group[x].astype(float), group[y].astype(float) * scale, linestyle="none", marker=look["marker"],
                    markersize=7, markerfacecolor="none", markeredgecolor=look["color"], markeredgewidth=1.4,
                    zorder=4, label=f"_{label}", gid=gid)
        drawn[strategy] = strategy_style(strategy)
    return [(label + (f": {strategy}" if several and strategy else ""),
             Line2D([], [], marker=style.marker, linestyle="none", markerfacecolor="none",
                    markeredgecolor=style.colour, markeredgewidth=1.4))
            for strategy, style in drawn.items()]


def _speedup_reasons(df, rows, good):
    """Why each row of *rows* (strategies but replicated) has no speedup: it does not fit, or
    the replicated row of its point does not ("replicated does not fit"), or its status."""
    import pandas as pd

    why = pd.Series("no value", index=rows.index, dtype=object)
    if "status" not in rows.columns:
        return why
    replicated = {}
    if "point_index" in df.columns:
        rep = df[df["strategy"] == "replicated"]
        replicated = dict(zip(rep["point_index"], rep["status"]))
    for i, row in rows[~good].iterrows():
        if row["status"] == "infeasible":
            why[i] = "does not fit"
        elif row["status"] != "ok":
            why[i] = str(row["status"])
        elif replicated.get(row.get("point_index")) == "infeasible":
            why[i] = "replicated does not fit"
        elif replicated.get(row.get("point_index"), "ok") != "ok":
            why[i] = f"replicated: {replicated[row['point_index']]}"
    return why


def _series_keys(rows, hue, x, several):
    """The keys that name *rows*' series: *hue*, less the strategy when *several* strategies
    are drawn (each has its line style and legend entry), plus what it takes to tell them apart."""
    hue = [hue] if isinstance(hue, str) else list(hue or [])
    if several:
        hue = [h for h in hue if h != "strategy"]
    return _label_keys(rows, hue, exclude=(x,), unique_by=(x, "strategy"))


def _no_gain(ax):
    """The line at speedup 1, and its legend entry (a label on the axes sat on the data)."""
    line = ax.axhline(1.0, color="0.45", linestyle=(0, (4, 3)), linewidth=1, zorder=0, label="_no gain")
    return "no gain (speedup 1)", line


def plot_breakdown(ax, df, *, by=None, parts=BREAKDOWN_PARTS, title=None, annotate=True):
    """Stacked step-time breakdown (ms), replicated vs sharded bar side by side for each group.

    Groups are the values of *by* (default: the parameters that vary). A point that
    could not run keeps its place, its empty bar marked with its status. Returns the
    list of BarContainers drawn (one per part).
    """
    rows = _with(df, ["step_time_s", "speedup"])
    parts = [p for p in parts if p in rows.columns]
    keys = _label_keys(rows, by if by is not None else _varying(rows), exclude=())
    bars = _strategy_bars(rows, keys, parts, scale=1e3)
    containers = _stack(ax, bars.positions, _BAR_WIDTH, parts, bars.values)
    if annotate:
        tops = dict(zip(bars.positions, _bar_tops(containers) or [0.0] * len(bars.positions)))
        for xpos, srow in zip(bars.positions, bars.rows):
            if srow["strategy"] != "replicated" and "speedup" in srow and srow["speedup"] == srow["speedup"]:
                # above its neighbours too: "x1.12" is wider than a bar and sat on the taller one beside it
                clear = max(tops.get(xpos + dx, 0.0) for dx in (-1.0, 0.0, 1.0))
                ax.annotate(f"x{float(srow['speedup']):.2f}", (xpos, clear), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=8)
    _mark_bars_not_ok(ax, bars)
    _strategy_ticks(ax, bars)
    ax.set_ylim(0, max(_bar_tops(containers), default=1.0) * 1.12)
    ax.set_ylabel("step time [ms]")
    set_title(ax, title or f"Step-time breakdown: {_strategies_named(bars)} update", rows)
    _legend_outside(ax, reverse=True)
    return containers


def _strategies_named(bars):
    """``replicated (rep) vs sharded (shd)``: the strategies drawn, with their tick names."""
    drawn = [s for s in STRATEGY_NAMES if s in bars.strategies] or ["replicated", "sharded"]
    return " vs ".join(f"{s} ({_STRATEGY_SHORT[s]})" for s in drawn)


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
    _hatch_not_ok(ax, bars.positions, peaks, bars.rows)
    hbm = None
    if capacity and "hbm_bytes" in rows.columns and rows["hbm_bytes"].notna().any():
        hbm = float(rows["hbm_bytes"].dropna().min()) / 2**30
        if max(peaks, default=0.0) >= 0.4 * hbm:
            ax.axhline(hbm, color=NOT_OK_COLOR, linestyle="--", linewidth=1, label=f"HBM per replica ({hbm:.3g} GiB)")
        else:
            # Far above the bars: say it rather than squash them. Still drawn, out of view: a
            # panel sharing its y range with one that reaches it shows it too.
            ax.axhline(hbm, color=NOT_OK_COLOR, linestyle="--", linewidth=1, label="_HBM per replica")
            ax.plot([], [], " ", label=f"HBM per replica: {hbm:.3g} GiB (off scale)")
            hbm = None
    _strategy_ticks(ax, bars)
    tops = _bar_tops(containers) + peaks + ([hbm] if hbm else [])
    ax.set_ylim(0, max(tops, default=1.0) * 1.1)
    ax.set_ylabel("memory per replica [GiB]")
    set_title(ax, title or f"Per-replica memory: {_strategies_named(bars)}", rows)
    _legend_outside(ax, reverse=True)
    return containers


def _hatch_not_ok(ax, positions, peaks, rows):
    """Hatch each bar whose row could not run, up to its peak, with a legend entry per status
    ("does not fit in HBM"). Text above the bar, wider than it, ran over its neighbour."""
    from matplotlib.patches import Rectangle

    named = set()
    for xpos, peak, srow in zip(positions, peaks, rows):
        status = srow.get("status", "ok")
        if status == "ok":
            continue
        label = "does not fit in HBM" if status == "infeasible" else str(status)
        ax.add_patch(Rectangle((xpos - _BAR_WIDTH / 2, 0), _BAR_WIDTH, peak, fill=False, hatch="///",
                               edgecolor=NOT_OK_COLOR, linewidth=1.2, zorder=2.5,
                               label=label if label not in named else f"_{label}"))
        named.add(label)


def plot_lines(ax, df, *, x, y="step_time_s", hue=None, strategies=STRATEGY_NAMES, logx=None,
               logy=False, title=None, styles=None):
    """*y* vs *x*, one line per *hue* group and strategy (each strategy its colour and marker,
    each series its line style).

    Rows that could not run (status not ok) are crosses in the band under the data, a row
    per series and strategy, named (:mod:`~.series`); rows that ran without a *y* (the
    replicated rows of a speedup) are left out. *logx*: a log2 x axis (default: when the
    values span octaves). *styles*: the figure's :class:`~.series.SeriesStyles`. Returns
    the list of Line2D drawn.
    """
    rows = _with(df, [x, y]).dropna(subset=[x])
    if y == "speedup":  # relative to replicated: its rows have none
        strategies = [s for s in strategies if s != "replicated"]
    rows = rows[rows["strategy"].isin(list(strategies))]
    # A row that ran but has no y is no point of its series (nothing to draw, nothing failed);
    # a speedup's is, when the replicated row of its point did not run (_speedup_reasons).
    if "status" in rows.columns:
        rows = rows[(rows["status"] != "ok") | rows[y].notna() | (y == "speedup")]
    else:
        rows = rows[rows[y].notna()]
    needs = _over_capacity_rows(rows, y)  # memory a strategy would need: a value, drawn apart
    rows = rows.drop(index=needs.index).reset_index(drop=True)
    good = (rows["status"] == "ok") & rows[y].notna() if "status" in rows.columns else rows[y].notna()
    why = _speedup_reasons(df, rows, good) if y == "speedup" else None
    _, scale = column_label(y)
    drawn = strategy_variants(strategies, rows["strategy"])
    keys = _series_keys(rows, hue, x, len(drawn) > 1)
    styles = styles or SeriesStyles()
    lines, entries, legend_title = draw_series(ax, rows, good, x, y, keys, scale=scale, strategies=drawn,
                                               styles=styles, why=why)
    if len(rows) and _numeric(rows[x]) and (spans_octaves(rows[x]) if logx is None else logx):
        _log2_axis(ax, rows[x].astype(float))
    if logy:
        _plain_log_y(ax)
    if y == "speedup":
        entries.append(_no_gain(ax))
    entries += _draw_over_capacity(ax, needs, x, y, keys, styles, len(drawn) > 1, scale)
    fit_y_range(ax)
    label_no_value_band(ax)
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel(_axis_label(y))
    set_title(ax, title or f"{_sentence(_axis_label(y, unit=False))} vs {_axis_label(x, unit=False)}", rows)
    _legend_outside(ax, entries, title=legend_title)
    return lines


def _sentence(text):
    """*text* with a capital first letter, the rest as written ("MFU", not "Mfu")."""
    return text[:1].upper() + text[1:]


def _over_capacity_rows(rows, y):
    """The rows of a memory column (``mem_*_bytes``) that did not fit in HBM but say what they
    would need: on the LLM question they are most of the rows, and a cross would hide how far
    over the chip they are."""
    if not y.startswith("mem_") or "status" not in rows.columns:
        return rows.iloc[:0]
    return rows[(rows["status"] == "infeasible") & rows[y].notna()]


def _draw_over_capacity(ax, needs, x, y, keys, styles, several, scale):
    """Hollow markers at what the rows of *needs* would need, in each series' colour and its
    strategy's marker, and a dashed line at each HBM capacity per replica; returns their legend entries."""
    from matplotlib.lines import Line2D

    if needs.empty or not _numeric(needs[x]):
        return []
    entries = _hollow_points(ax, needs, x, y, keys, styles, scale, gid="does-not-fit",
                             label="does not fit in HBM: what it would need", several=several)
    if "hbm_bytes" in needs.columns:
        for hbm in sorted(needs["hbm_bytes"].dropna().unique()):
            ax.axhline(float(hbm) * scale, color=NOT_OK_COLOR, linestyle="--", linewidth=1.0, zorder=1)
        entries.append(("HBM per replica", Line2D([], [], color=NOT_OK_COLOR, linestyle="--", linewidth=1.0)))
    return entries


def _plain_log_y(ax):
    """A log y axis labelled in plain numbers: 60, not 6x10^1 (a step time in ms reads as one)."""
    from matplotlib.ticker import LogFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
