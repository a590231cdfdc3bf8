"""How saved plots look: rcParams, the strategies' colours and markers, series' line styles, legends outside the axes, log2 axes."""

import math
from typing import NamedTuple

from ..experiments.display import value_text

__all__ = ["STYLE", "STRATEGY_STYLES", "StrategyStyle", "SERIES_DASHES", "strategy_style", "series_look", "spans_octaves"]


_PART_COLORS = {
    "fwd_s": "#4C72B0", "bwd_s": "#8FAADC", "batch_norm_s": "#8172B3", "update_s": "#DD8452", "exposed_comm_s": "#C44E52",
    "extra_reduction_s": "#937860", "idle_s": "#BBBBBB", "overhead_s": "#6C6C6C",
    "mem_weights_bytes": "#4C72B0", "mem_gradients_bytes": "#8FAADC", "mem_slots_bytes": "#DD8452",
    "mem_padding_bytes": "#937860", "mem_activations_bytes": "#55A868",
    "mem_collective_buffers_bytes": "#BBBBBB",
}


class StrategyStyle(NamedTuple):
    """How one update strategy looks in every plot (lines, markers, bands, bar labels)."""

    colour: str
    """Its colour: its lines, markers, band and bar labels."""
    marker: str
    """Its marker, on every point of its lines and on its hollow what-if points."""
    shades: tuple
    """Colours of its series when there are several, the first its own :attr:`colour`: all of
    one hue, so a strategy reads as one colour however many series it draws."""
    short: str
    """Its name under a bar."""


STRATEGY_STYLES = {
    "replicated": StrategyStyle("#1f77b4", "o", ("#1f77b4", "#08306b", "#6baed6", "#4a6fa5"), "rep"),
    "sharded": StrategyStyle("#e6550d", "s", ("#e6550d", "#7f2704", "#fd9a4e", "#b8540f"), "shd"),
    "fully-sharded": StrategyStyle("#2ca02c", "^", ("#2ca02c", "#00441b", "#74c476", "#4d8a3a"), "fsd"),
}
"""The one style table of the strategies: every plot takes a strategy's colour and marker from
here, so replicated is a blue circle, sharded an orange square and fully-sharded a green
triangle in every figure (a mesh point runs one of these, and is drawn as it). Why colour and
marker both: the speedup plot drew sharded and fully-sharded as the same hollow circle, told
apart by a dash pattern a reader had to find in the legend; a series (a workload, a slice) is
told apart by its line style and shade instead (:data:`SERIES_DASHES`)."""
NO_STRATEGY_STYLE = StrategyStyle("#6a3d9a", "D", ("#6a3d9a", "#3f007d", "#9e9ac8", "#807dba"), "all")
"""The style of rows without a strategy (a results table of another tool)."""
_STRATEGY_SHORT = {name: style.short for name, style in STRATEGY_STYLES.items()}
SERIES_DASHES = ("-", "--", ":", "-.", (0, (6, 1.5, 1, 1.5, 1, 1.5)))
"""Line styles of a strategy's series, in order. Series *i* gets dash ``i % 5`` and shade
``i % 4`` of its strategy: five and four are coprime, so no two of the first 20 series of a
strategy look alike, and the first four differ in both."""


def strategy_style(strategy):
    """The :class:`StrategyStyle` of *strategy* (None or an unknown name: :data:`NO_STRATEGY_STYLE`)."""
    return STRATEGY_STYLES.get(strategy, NO_STRATEGY_STYLE)


def series_look(strategy, i):
    """``{"color", "marker", "linestyle"}`` of the *i*-th series of *strategy* (see :data:`SERIES_DASHES`)."""
    style = strategy_style(strategy)
    return {"color": style.shades[i % len(style.shades)], "marker": style.marker,
            "linestyle": SERIES_DASHES[i % len(SERIES_DASHES)]}


STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.3, "svg.fonttype": "none",
}
"""matplotlib rcParams of the saved plots (``plt.rcParams.update(STYLE)`` in a notebook)."""

NOT_OK_COLOR = "#C44E52"
"""What could not run, and the HBM capacity it ran into (bars, their status, the capacity line)."""
INFEASIBLE_MARKER = "x"
"""A point of a series that has no value (could not run): a cross in the band under the data."""
NO_VALUE_BAND_COLOR = "0.93"
"""Fill of that band, so that nothing drawn in it reads as a value on the y axis."""
NO_VALUE_GID = "no-value"
"""gid of the band and of its crosses (the y range and the tests find them by it)."""
BAND_ATTRIBUTE = "band_kind"
"""Attribute of a 95 % band's artist holding its kind (the y range and the tests find bands by it;
not a gid, which the SVG writes as an id, and ids must be unique in a page)."""


def spans_octaves(values):
    """Whether *values* read better on a log2 axis than on a linear one.

    Yes when all are positive, the largest is at least 4x the smallest (two octaves),
    and they are spaced more evenly in ratio than in difference: 50/100/200 GB/s or
    32..2048 replicas, yes; 1, 2, ..., 8, no (on a log axis its points crowd to the right).
    """
    v = sorted({float(x) for x in values if x == x})
    if len(v) < 2 or v[0] <= 0 or v[-1] / v[0] < 4:
        return False
    if len(v) == 2:
        return True

    def spread(steps):  # coefficient of variation of the steps between neighbours
        mean = sum(steps) / len(steps)
        return math.sqrt(sum((s - mean) ** 2 for s in steps) / len(steps)) / mean

    ratios = [math.log(b / a) for a, b in zip(v, v[1:])]
    diffs = [b - a for a, b in zip(v, v[1:])]
    return spread(ratios) <= spread(diffs)


def _legend_outside(ax, entries=None, **kw):
    """The axes' legend right of it, in as many columns as it takes to be no taller than the
    axes. *entries*: ``[(label, handle)]`` (default: the axes' labelled artists)."""
    if entries is None:
        handles, labels = ax.get_legend_handles_labels()
    else:
        labels, handles = [list(t) for t in zip(*entries)] if entries else ([], [])
    if not handles:
        return None
    height_in = ax.get_position().height * ax.figure.get_figheight()
    ncols = legend_columns(len(handles), height_in)
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                     borderaxespad=0.0, ncols=ncols, **kw)


def legend_columns(entries, height_in, fontsize_pt=9):
    """Columns a legend of *entries* needs to fit in *height_in* inches (an entry is about 1.7 lines
    of its font, title included)."""
    fit = max(1, int(height_in * 72 / (1.7 * fontsize_pt)) - 1)
    return max(1, math.ceil(entries / fit))


def _log2_axis(ax, values):
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ticks = sorted({float(v) for v in values if v == v and v > 0})
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([value_text(t) for t in ticks])
    if len(ticks) > 1:
        ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)


def _cmap(name):
    import matplotlib

    return matplotlib.colormaps[name]
