"""The heatmap: one value over two swept parameters, a cell per point.

Apart from the other plot kinds because it alone colours values: its title, colour-bar label and
colour scale follow the strategy and value drawn (a speedup of any kind diverges around 1.0), and
a speedup cell left empty only because replicated does not fit in HBM shows the if-fit speedup,
marked (the LLM question, where replicated never fits).
"""

from ..inputs.errors import WusError
from ..experiments.results import column_label
from .labels import _axis_label, display_value, _numeric, _ok, _varying, _with, set_title
from .style import NOT_OK_COLOR, _cmap

__all__ = ["plot_heatmap", "heatmap_range", "heatmap_averaged", "heatmap_title", "heatmap_value_label",
           "AveragedCells", "AGGREGATES", "SPEEDUP_VALUES"]


class AveragedCells(ValueError, WusError):
    """A heatmap whose cells would each average several points (a parameter that varies on none
    of its axes), asked without ``aggregate: mean``: drawn, a cell reads as one point's value."""


AGGREGATES = ("mean",)
"""What a heatmap's ``aggregate`` option may ask for over the points of one cell."""


def plot_heatmap(ax, df, *, x="link_GBps", y="replicas", value="speedup", strategy="sharded",
                 title=None, fmt=".2f", cmap="RdYlGn", vrange=None, colorbar=True, aggregate=None):
    """What-if heatmap: *value* over *x* and *y* (e.g. speedup over link bandwidth x slice size).

    The colour scale is centred on 1 for speedups (green: sharding faster) and spans
    *vrange* (default: this panel's values; a faceted figure passes one range to all its
    panels, :func:`heatmap_range`, so equal colours mean equal values). A cell whose
    rows could not run says so (``infeasible``, ``error``); a cell without rows says
    ``n/a``. A cell holds one point: where several points share one (a parameter varies on
    neither axis) it raises :class:`AveragedCells` unless *aggregate* is ``"mean"``. Without one
    cell to colour, the panel says why in one line instead of a colour scale of nothing.
    Returns the AxesImage (or that line's Text).
    """
    import numpy as np

    xs, ys, grid, notes = _heatmap_grid(df, x, y, value, strategy, aggregate)
    if_fit = _if_fit_cells(df, x, y, value, strategy, grid, notes)
    for cell, v in if_fit.items():
        grid[cell] = v
    finite = grid[np.isfinite(grid)]
    if not finite.size and not notes:
        return None  # no cell to colour nor to explain: nothing drawn
    if not finite.size:
        return _empty_heatmap(ax, xs, ys, x, y, notes, value, title, strategy, df)
    if vrange is None and finite.size:
        vrange = (float(finite.min()), float(finite.max()))
    norm = _heatmap_norm(value, vrange)
    cmap_obj = _cmap(cmap).with_extremes(bad="#DDDDDD")
    image = ax.imshow(np.ma.masked_invalid(grid), origin="lower", aspect="auto", cmap=cmap_obj, norm=norm)
    for (i, j), v in np.ndenumerate(grid):
        if not np.isfinite(v):
            ax.text(j, i, notes.get((i, j), "n/a"), ha="center", va="center", fontsize=8,
                    color=NOT_OK_COLOR if (i, j) in notes else "0.3")
            continue
        r, g, b, _ = cmap_obj(image.norm(v))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # perceived luminance of the cell
        marked = (i, j) in if_fit  # an if-fit value is marked where it is drawn, and in the title
        ax.text(j, i, format(v, fmt) + ("*" if marked else ""), ha="center", va="center", fontsize=8,
                color="white" if dark else "black", fontstyle="italic" if marked else "normal")
    ax.set_xticks(range(len(xs)), [display_value(x, v) for v in xs])
    ax.set_yticks(range(len(ys)), [display_value(y, v) for v in ys])
    ax.grid(False)
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel(_axis_label(y))
    if colorbar:
        ax.figure.colorbar(image, ax=ax, pad=0.02).set_label(heatmap_value_label(value, strategy))
    heading = f"{heatmap_title(value, strategy)}\nby {_axis_label(x, unit=False)} and {_axis_label(y, unit=False)}"
    if if_fit:
        heading += "\n*: replicated does not fit in HBM; the speedup if it did (capacity ignored)"
    set_title(ax, title or heading, _strategy_rows(df, strategy))
    return image


def _strategy_rows(df, strategy):
    """The rows a heatmap of *strategy* draws (all of them for None)."""
    return df if strategy is None or "strategy" not in df.columns else df[df["strategy"] == strategy]


def _empty_heatmap(ax, xs, ys, x, y, notes, value, title, strategy="sharded", df=None):
    """A heatmap none of whose cells has a value: its axes, and one line saying why (an all-grey
    grid under a colour bar from -0.1 to 0.1 read as a scale of something)."""
    from collections import Counter

    counts = Counter("do not fit" if s == "infeasible" else f"failed ({s})" for s in notes.values())
    why = ", ".join(f"{n} {s}" for s, n in counts.most_common())
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(-0.5, len(ys) - 0.5)
    ax.set_xticks(range(len(xs)), [display_value(x, v) for v in xs])
    ax.set_yticks(range(len(ys)), [display_value(y, v) for v in ys])
    ax.grid(False)
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel(_axis_label(y))
    set_title(ax, title or f"{heatmap_title(value, strategy)}\nby {_axis_label(x, unit=False)} and "
                           f"{_axis_label(y, unit=False)}", _strategy_rows(df.iloc[:0] if df is None else df, strategy))
    return ax.text(0.5, 0.5, f"no cell has a value: of {len(xs) * len(ys)} cells, {why}", transform=ax.transAxes, ha="center", va="center",
                   fontsize=9, color=NOT_OK_COLOR, wrap=True)


SPEEDUP_VALUES = ("speedup", "speedup_low", "speedup_high", "speedup_if_replicated_fit", "speedup_over_sharded")
"""Results columns that are ratios of step times: a heatmap of one is coloured diverging around 1."""


def heatmap_title(value, strategy="sharded"):
    """What a heatmap of *value* over the rows of *strategy* shows, in words: the title follows
    both (a fully-sharded speedup is not titled as the sharded one)."""
    if value in ("speedup", "speedup_low", "speedup_high"):
        bound = {"speedup_low": " (low end of the 95% band)", "speedup_high": " (high end of the 95% band)"}
        return f"Speedup of {strategy or 'each strategy'} over replicated{bound.get(value, '')}"
    if value == "speedup_if_replicated_fit":
        return f"Speedup of {strategy or 'each strategy'} over replicated if replicated fit in HBM"
    if value == "speedup_over_sharded":
        return "Speedup of fully-sharded over sharded"
    label = column_label(value)[0]
    return f"{label[:1].upper()}{label[1:]}" + (f", {strategy}" if strategy else "")


def heatmap_value_label(value, strategy="sharded"):
    """Colour-bar label of a heatmap of *value* (over the rows of *strategy*)."""
    if value in ("speedup", "speedup_low", "speedup_high", "speedup_if_replicated_fit"):
        return f"speedup (replicated / {strategy or 'strategy'})"
    if value == "speedup_over_sharded":
        return "speedup (sharded / fully-sharded)"
    return column_label(value)[0]


def _if_fit_cells(df, x, y, value, strategy, grid, notes):
    """``{(i, j): value}`` of the speedup cells left empty only because replicated does not fit
    in HBM, from ``speedup_if_replicated_fit`` (drawn marked): a strategy that fits must not
    be a blank cell on the LLM question, where replicated never fits."""
    import math

    if value != "speedup" or "speedup_if_replicated_fit" not in df.columns:
        return {}
    df = _with(df, [x, y, value])
    xs, ys = _heatmap_axes(df, x, y, strategy)
    rows = _ok(df if strategy is None else df[df["strategy"] == strategy]).dropna(subset=[x, y])
    out = {}
    for (yv, xv), v in rows.groupby([y, x])["speedup_if_replicated_fit"].mean().items():
        cell = (ys.index(yv), xs.index(xv))
        if not math.isfinite(grid[cell]) and cell not in notes and math.isfinite(v):
            out[cell] = float(v)
    return out


def _heatmap_axes(df, x, y, strategy):
    rows = df if strategy is None else df[df["strategy"] == strategy]
    return (sorted(rows[x].dropna().unique(), key=float if _numeric(rows[x]) else str),
            sorted(rows[y].dropna().unique(), key=float if _numeric(rows[y]) else str))


def heatmap_range(df, *, x="link_GBps", y="replicas", value="speedup", strategy="sharded"):
    """``(lowest, highest)`` cell of :func:`plot_heatmap` over *df*, or None if it has no cell."""
    import numpy as np

    _, _, grid, notes = _heatmap_grid(df, x, y, value, strategy, aggregate="mean")
    for cell, v in _if_fit_cells(df, x, y, value, strategy, grid, notes).items():
        grid[cell] = v
    finite = grid[np.isfinite(grid)]
    return (float(finite.min()), float(finite.max())) if finite.size else None


def heatmap_averaged(df, *, x="link_GBps", y="replicas", strategy="sharded"):
    """``[(column, values)]`` of the parameters that vary inside a cell of the heatmap of *df*:
    what a cell of it averages over."""
    from .labels import SLICE_KEYS

    df = _with(df, [x, y])
    rows = _ok(df if strategy is None else df[df["strategy"] == strategy]).dropna(subset=[x, y])
    near = {x, y} | (set(SLICE_KEYS) if {x, y} & set(SLICE_KEYS) else set())
    out = []
    for key in _varying(rows, exclude=near | {"strategy"}):
        if (rows.groupby([y, x])[key].nunique(dropna=False) > 1).any():
            values = sorted(rows[key].dropna().unique(), key=float if _numeric(rows[key]) else str)
            out.append((key, values))
    return out


def _heatmap_grid(df, x, y, value, strategy, aggregate=None):
    """Sorted *x* and *y* values, the grid of *value* over ok rows (NaN: none; several rows in
    a cell: their mean if *aggregate*, else :class:`AveragedCells`), and ``{(i, j): status}`` of
    the cells whose rows all failed to run."""
    import numpy as np

    df = _with(df, [x, y, value])
    rows = df if strategy is None else df[df["strategy"] == strategy]
    if aggregate is None and (_ok(rows).dropna(subset=[x, y, value]).groupby([y, x]).size() > 1).any():
        over = heatmap_averaged(df, x=x, y=y, strategy=strategy)
        names = ", ".join(f"{k} ({len(v)} values)" for k, v in over) or "rows that repeat a point"
        raise AveragedCells(f"each cell would average several points, over {names}: put it on x, y or facet, "
                            "pin it with where, or average it on purpose with aggregate: mean")
    xs, ys = _heatmap_axes(df, x, y, strategy)
    grid = np.full((len(ys), len(xs)), np.nan)
    for (yv, xv), v in _ok(rows).groupby([y, x])[value].mean().items():
        grid[ys.index(yv), xs.index(xv)] = v
    notes = {}
    if "status" in rows.columns:
        for (yv, xv), status in rows.dropna(subset=[x, y]).groupby([y, x])["status"]:
            if not (status == "ok").any():
                notes[(ys.index(yv), xs.index(xv))] = str(status.iloc[0])
    return xs, ys, grid, notes


def _heatmap_norm(value, vrange):
    """Colour normalisation over *vrange*; for speedups, centred on 1 and symmetric in ratio
    (x1.25 and x0.8 get equally strong colours)."""
    from matplotlib.colors import Normalize, TwoSlopeNorm

    if vrange is None:
        return None
    lo, hi = vrange
    if value in SPEEDUP_VALUES:  # diverging around 1: green faster, red slower, whatever the range
        spread = max(hi, 1.0 / lo if lo > 0 else hi, 1.001)
        return TwoSlopeNorm(vcenter=1.0, vmin=1.0 / spread, vmax=spread)
    return Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1e-12)
