"""Figures of plot specs: panels per facet, one legend, files written."""

import math
from pathlib import Path

from ..experiments.results import column_label
from ..timeline import BREAKDOWN_PARTS
from .kinds import _COMMON, PLOT_KINDS
from .labels import _fmt, _groups
from .plots import MEMORY_PARTS
from .style import STYLE

__all__ = ["draw_figure", "save_plots"]


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

                from ..limits import excerpt, short_repr

                print(f"warning: plot {short_repr(plot.name)} skipped: {excerpt(reason, 300)}", file=sys.stderr)
            else:
                on_skip(plot, reason)
        finally:
            if fig is not None:
                plt.close(fig)
    return written
