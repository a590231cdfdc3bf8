"""How saved plots look: rcParams, series colours and markers, legends outside the axes, log2 axes."""

import math

from .labels import _fmt

__all__ = ["STYLE", "SERIES_COLORS", "SERIES_MARKERS", "series_style", "spans_octaves"]


_PART_COLORS = {
    "fwd_s": "#4C72B0", "bwd_s": "#8FAADC", "batch_norm_s": "#8172B3", "update_s": "#DD8452", "exposed_comm_s": "#C44E52",
    "extra_reduction_s": "#937860", "idle_s": "#BBBBBB", "overhead_s": "#6C6C6C",
    "mem_weights_bytes": "#4C72B0", "mem_gradients_bytes": "#8FAADC", "mem_slots_bytes": "#DD8452",
    "mem_padding_bytes": "#937860", "mem_activations_bytes": "#55A868",
    "mem_collective_buffers_bytes": "#BBBBBB",
}
_STRATEGY_SHORT = {"replicated": "rep", "sharded": "shd", "fully-sharded": "fsd"}
_STRATEGY_LINESTYLE = {"replicated": "-", "sharded": "--", "fully-sharded": ":"}
"""Line style of each strategy where several share a series' colour (:func:`~.plots.plot_lines`)."""
_SPEEDUP_LINESTYLE = {"sharded": "-", "fully-sharded": "--"}
"""The same in a speedup plot, which has no replicated line: sharded, the paper's, stays solid."""
STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.3, "svg.fonttype": "none",
}
"""matplotlib rcParams of the saved plots (``plt.rcParams.update(STYLE)`` in a notebook)."""

SERIES_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf")
"""Colours of series, in order (matplotlib's tab10: ten hues that stay apart)."""
SERIES_MARKERS = ("o", "s", "D", "^", "v", "<", ">", "p", "h")
"""Markers of series, in order. Nine, one fewer than the colours: series *i* gets colour
``i % 10`` and marker ``i % 9``, so no two of the first 90 series look alike (ten more
colours would not stay distinguishable; pairing them with markers does)."""
NOT_OK_COLOR = "#C44E52"
"""What could not run, and the HBM capacity it ran into (bars, their status, the capacity line)."""
INFEASIBLE_MARKER = "x"
"""A point of a series that has no value (could not run): a cross in the band under the data."""
NO_VALUE_BAND_COLOR = "0.93"
"""Fill of that band, so that nothing drawn in it reads as a value on the y axis."""
NO_VALUE_GID = "no-value"
"""gid of the band and of its crosses (the y range and the tests find them by it)."""


def series_style(i):
    """Colour and marker of the *i*-th series (see :data:`SERIES_MARKERS`)."""
    return {"color": SERIES_COLORS[i % len(SERIES_COLORS)], "marker": SERIES_MARKERS[i % len(SERIES_MARKERS)]}


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
    ax.set_xticklabels([_fmt(t) for t in ticks])
    if len(ticks) > 1:
        ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)


def _cmap(name):
    import matplotlib

    return matplotlib.colormaps[name]
