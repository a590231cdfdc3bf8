"""Figures of plot specs: panels per facet, one legend, files written."""

import inspect
import math
from pathlib import Path

from ..inputs.errors import WusError
from ..experiments.results import column_label
from ..training.timeline.timeline import BREAKDOWN_PARTS
from .kinds import _COMMON, PLOT_KINDS
from .labels import _groups, _label, follows_x, subtitle, titled
from .layout import band_height, data_y_range, fit_xtick_labels, fit_y_range, place_legend
from .plots import MEMORY_PARTS, AveragedCells, heatmap_averaged, heatmap_range, heatmap_value_label
from .series import SeriesStyles, coincide_note, coinciding_series, place_no_value_labels
from .style import STYLE

__all__ = ["draw_figure", "save_plots", "panel_grid", "NothingToDraw", "FIGURE_MAX_IN"]


def _select(df, where):
    for col, want in (where or {}).items():
        want = want if isinstance(want, list) else [want]
        df = df[df[col].astype("string").isin([str(w) for w in want]) | df[col].isin(want)]
    return df


FIGURE_MAX_IN = (14.0, 14.0)
"""Largest figure (width, height) in inches: 2,100 pixels at the saved 150 dpi. A wider
figure shown at page width (a README, a slide) shrinks its 9-10 pt text below legibility
(a 2,900-pixel figure did)."""
MAX_PANELS_ACROSS = 3
MIN_PANEL_WIDTH_IN = 4.5
"""Panels narrow to this before facets wrap to another row (group labels under bars need it)."""


class NothingToDraw(WusError):
    """A plot spec whose rows hold nothing its kind can draw (reported, then skipped); a
    WusError, as every error of the API for the caller's input is."""


def panel_grid(panels, panel_in):
    """``(rows, columns, figsize)`` of a figure of *panels* panels of *panel_in* inches each:
    up to :data:`MAX_PANELS_ACROSS` across, narrowed (then wrapped) to fit :data:`FIGURE_MAX_IN`."""
    w, h = panel_in
    fit = int(FIGURE_MAX_IN[0] // min(w, MIN_PANEL_WIDTH_IN))
    ncols = max(1, min(panels, MAX_PANELS_ACROSS, fit))
    nrows = math.ceil(panels / ncols)
    return nrows, ncols, (min(w * ncols, FIGURE_MAX_IN[0]), min(h * nrows, FIGURE_MAX_IN[1]))


def draw_figure(plot, df, *, chosen=()):
    """A matplotlib Figure for one plot spec (one panel per ``facet`` value).

    The panels of a figure share their y scale (heatmaps: their colour scale) so that equal
    heights mean equal values, and one legend. The subtitle names the parameters the figure's
    rows hold fixed and the title does not already name (:func:`~.labels.subtitle`; *chosen*:
    the keys the experiment set).
    Raises :class:`NothingToDraw` when the rows hold nothing to draw.
    """
    import pandas as pd

    from ..experiments.experiment import PlotSpec
    from ..inputs.errors import ConfigError

    if not isinstance(plot, PlotSpec):
        raise ConfigError("must be a plot spec (an experiment's .plots, or wus_sim.default_plots(experiment))",
                          key_path="plot", value=plot)
    if not isinstance(df, pd.DataFrame):
        raise ConfigError("must be a DataFrame of results (wus_sim.read_results(DIR))", key_path="df", value=df)
    if plot.kind not in PLOT_KINDS:
        raise ConfigError(f"must be one of {', '.join(PLOT_KINDS)}", key_path="plot.kind", value=plot.kind)
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    kind = PLOT_KINDS[plot.kind]
    opts = {k: v for k, v in plot.options.items() if k not in _COMMON}
    where = plot.options.get("where")
    # an infinite value (a speedup over a zero-time step) has no place on an axis: drawn as missing
    rows = _select(df, where).replace([float("inf"), float("-inf")], float("nan"))
    if rows.empty:
        raise NothingToDraw(f"no rows to plot: 'where' {where} matches none of the {len(df)} rows" if where
                            else "no rows to plot: the results are empty")
    facet = plot.options.get("facet")
    panels = _groups(rows, [facet]) if facet else [((), rows)]
    if plot.kind == "heatmap" and len(panels) > 1:
        ranges = [r for _, panel in panels if (r := heatmap_range(panel, **_heatmap_keys(opts))) is not None]
        if ranges:
            opts["vrange"] = (min(lo for lo, _ in ranges), max(hi for _, hi in ranges))
        opts["colorbar"] = False
    if "styles" in inspect.signature(kind.function).parameters:
        opts["styles"] = SeriesStyles()  # one per figure: a series looks the same in every panel
    nrows, ncols, figsize = panel_grid(len(panels), plot.options.get("figsize", kind.size))
    # names are text, never TeX: a workload named "$\\sqrt{" must not reach the mathtext parser
    with plt.rc_context({**STYLE, "text.parse_math": False}):
        fig, axes = plt.subplots(nrows, ncols, figsize=figsize, layout="constrained", squeeze=False)
        used = list(axes.flat)[:len(panels)]
        drawn, title = [], plot.options.get("title")
        for ax, (value, panel) in zip(used, panels):
            drawn.append(kind.function(ax, panel, title=title, **opts))
            if facet:
                title = title or getattr(ax, "wus_heading", None) or ax.get_title()  # the kind's own title heads it
                ax.set_title(_label([facet], value))
        if not any(d is not None and (not isinstance(d, list) or d) for d in drawn):
            plt.close(fig)
            asked = {k: v for k, v in opts.items() if k in kind.options}
            raise NothingToDraw(f"nothing to draw: none of the {len(rows)} rows selected are "
                                f"{kind.needs}" + (f" ({', '.join(f'{k}={v}' for k, v in asked.items())})"
                                                   if asked else ""))
        for ax in list(axes.flat)[len(panels):]:
            ax.set_axis_off()
        if len(panels) > 1:
            title = titled(title, rows)  # what every panel ran, not the first one's
        heading = title if len(panels) > 1 else used[0].get_title()
        fixed = subtitle(rows, title=heading, exclude={facet} if facet else (), chosen=chosen)
        fixed = "\n".join(t for t in (fixed, *_moving_with_axes(plot, kind, opts, rows), _averaged(plot, opts, rows))
                           if t)
        if len(panels) > 1:
            if plot.kind == "heatmap":
                images = [d for d in drawn if d is not None and hasattr(d, "norm")]  # not an empty panel's text
                if images:
                    fig.colorbar(images[0], ax=used, pad=0.02).set_label(
                        heatmap_value_label(opts.get("value", "speedup"), opts.get("strategy", "sharded")))
            else:
                _share_y(used, ncols)
            fig.suptitle("\n".join(t for t in (title, fixed) if t), fontsize=11)
        elif fixed:
            _subtitle(used[0], fixed)
        _say_coinciding(used)
        _figure_legend(fig, axes.flat)
        fit_xtick_labels(fig, used, max_width_in=FIGURE_MAX_IN[0])
        place_no_value_labels(fig, used)
    return fig


def _heatmap_keys(opts):
    return {k: opts[k] for k in ("x", "y", "value", "strategy") if k in opts}


def _share_y(axes, ncols):
    """One y range for all *axes*, tick labels on the left column only. Bars keep the union of
    their ranges (from 0); lines get the union of their values with a margin above and below
    (:func:`~.layout.fit_y_range`), not the union of ranges that had one only for themselves."""
    if any(ax.containers for ax in axes):
        lows, highs = zip(*(ax.get_ylim() for ax in axes))
        for ax in axes:
            ax.set_ylim(min(lows), max(highs))
    else:
        ranges = [r for r in map(data_y_range, axes) if r is not None]
        if ranges:
            band = max(band_height(ax) for ax in axes)
            for ax in axes:
                fit_y_range(ax, min(lo for lo, _ in ranges), max(hi for _, hi in ranges), band)
    for i, ax in enumerate(axes):
        if i % ncols:
            ax.tick_params(axis="y", labelleft=False)
            ax.set_ylabel("")


def _moving_with_axes(plot, kind, opts, rows):
    """The subtitle's lines that say what else each axis changes (:func:`~.labels.follows_x`)."""
    params = inspect.signature(kind.function).parameters
    axes = [a for a in ("x", "y") if a in params and (plot.kind == "heatmap" or a == "x")]
    out = []
    for a in axes:
        column = opts.get(a, params[a].default)
        if isinstance(column, str):
            said = follows_x(rows, column)
            out.append(said if a == "x" else said.replace("x also changes", "y also changes", 1))
    return [t for t in out if t]


def _averaged(plot, opts, rows):
    """The subtitle's line of a heatmap asked to average its cells: over what, and which values."""
    from .labels import _axis_label, display_value

    if plot.kind != "heatmap" or opts.get("aggregate") is None:
        return ""
    over = heatmap_averaged(rows, **{k: v for k, v in _heatmap_keys(opts).items() if k != "value"})
    if not over:
        return ""
    return "each cell the mean over " + "; ".join(
        f"{_axis_label(k, unit=False)} " + ", ".join(display_value(k, v) for v in values) for k, values in over)


SUBTITLE_PT = 8
"""Font size of the subtitle."""


def _subtitle(ax, text):
    """*text* in small grey type between the axes and its title, each line wrapped to the width
    of the axes (a line wider than the figure left it)."""
    import textwrap

    width_pt = ax.get_position().width * ax.figure.get_figwidth() * 72
    chars = max(30, int(width_pt / (0.55 * SUBTITLE_PT)))
    text = "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))
    ax.set_title(ax.get_title(), pad=6 + 11 * (text.count("\n") + 1))
    ax.annotate(text, (0.5, 1.0), xycoords="axes fraction", xytext=(0, 4), textcoords="offset points",
                ha="center", va="bottom", fontsize=SUBTITLE_PT, color="0.35", linespacing=1.2)


def _say_coinciding(axes):
    """Name, in the legend, each series drawn on top of another in every panel that draws it
    (:func:`~.series.coinciding_series`): the reader sees one line and must learn it is two."""
    per_axes = [coinciding_series(ax) for ax in axes]
    drawn = [{getattr(line, "series_label", None) for line in ax.lines} for ax in axes]
    notes = {}
    for label in set().union(*per_axes) if per_axes else ():
        said = [found.get(label) for found, labels in zip(per_axes, drawn) if label in labels]
        if said and all(s is not None and s == said[0] for s in said):
            notes[label] = coincide_note(*said[0])
    if not notes:
        return
    for ax in axes:
        legend = ax.get_legend()
        for text in legend.get_texts() if legend else ():
            if text.get_text() in notes:
                text.set_text(text.get_text() + notes[text.get_text()])


def _figure_legend(fig, axes):
    """One legend for all panels instead of one per panel (:func:`~.layout.place_legend` says where)."""
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
    place_legend(fig, list(seen.values()), list(seen.keys()), title=title, max_size_in=FIGURE_MAX_IN)


def save_plots(plots, df, out_dir, *, on_skip=None, chosen=()):
    """Draw every plot spec into ``out_dir/NAME.png`` and ``NAME.svg``; return the paths written.

    A plot that cannot be drawn (no rows, nothing its kind draws, or any failure) is skipped,
    not raised: the results are written before the plots, and no plot is worth losing a
    sweep's exit status or its other plots over. ``on_skip(plot, reason)`` is told about
    each (default: one line on stderr). *chosen*: see :func:`draw_figure`.
    """
    import matplotlib.pyplot as plt

    from ..inputs.writes import write_atomic

    out_dir = Path(out_dir)
    written = []
    for plot in plots:
        fig = None
        try:
            fig = draw_figure(plot, df, chosen=chosen)
            for ext in ("png", "svg"):
                path = out_dir / f"{plot.name}.{ext}"
                write_atomic(path, lambda f, ext=ext: fig.savefig(f, format=ext, dpi=150, bbox_inches="tight"),
                             what="plot")
                written.append(path)
        except Exception as exc:  # noqa: BLE001 -- any failure of one plot is reported, then skipped
            reason = str(exc) if isinstance(exc, (NothingToDraw, AveragedCells)) else f"{type(exc).__name__}: {exc}"
            if on_skip is None:
                import sys

                from ..inputs.text import excerpt, short_repr

                print(f"warning: plot {short_repr(plot.name)} skipped: {excerpt(reason, 300)}", file=sys.stderr)
            else:
                on_skip(plot, reason)
        finally:
            if fig is not None:
                plt.close(fig)
    return written
