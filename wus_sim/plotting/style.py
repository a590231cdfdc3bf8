"""How saved plots look: rcParams, part colours, legends outside the axes, log2 axes."""

from .labels import _fmt

__all__ = ["STYLE"]


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


def _cmap(name):
    import matplotlib

    return matplotlib.colormaps[name]


def _prop_cycle():
    import matplotlib.pyplot as plt

    return list(plt.rcParams["axes.prop_cycle"])
