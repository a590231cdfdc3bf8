"""The plot functions: each takes an ``ax`` and a results DataFrame and returns what it drew."""

from ..experiments.results import column_label
from ..timeline import BREAKDOWN_PARTS  # step-time parts, stacked bottom to top
from .bars import _BAR_WIDTH, _bar_tops, _stack, _strategy_bars, _strategy_ticks
from .labels import _axis_label, _fmt, _groups, _label, _label_keys, _numeric, _ok, _varying, _with
from .style import _STRATEGY_SHORT, _cmap, _legend_outside, _log2_axis, _prop_cycle

__all__ = ["BREAKDOWN_PARTS", "MEMORY_PARTS", "plot_speedup", "plot_breakdown", "plot_memory", "plot_heatmap",
           "plot_lines"]


MEMORY_PARTS = ("mem_weights_bytes", "mem_gradients_bytes", "mem_slots_bytes", "mem_padding_bytes",
                "mem_activations_bytes", "mem_collective_buffers_bytes")
"""Per-replica memory parts, stacked bottom to top (those present in the results)."""


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
