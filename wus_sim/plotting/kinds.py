"""Plot kinds an experiment may ask for, and the checks of their options."""

from dataclasses import dataclass

from ..inputs.config import key_join
from ..inputs.errors import ConfigError, did_you_mean
from ..model.memory import STRATEGY_NAMES
from ..experiments.results import columns
from .plots import AGGREGATES, plot_breakdown, plot_heatmap, plot_lines, plot_memory, plot_speedup

__all__ = ["PLOT_KINDS", "MAX_FIGSIZE_IN", "OPTION_MEANINGS", "COMMON_OPTIONS", "check_plots"]


# ----------------------------------------------------------------- plot specs
@dataclass(frozen=True)
class _Kind:
    function: object
    options: dict
    """option -> its type: 'column', 'columns', 'bool' or 'string' (defaults are the function's)."""
    size: tuple
    """Default figure size of one panel, inches."""
    needs: str
    """What of the rows it draws (for the message when none of them has it)."""

    def required(self):
        """Options the function cannot do without (keyword-only, no default), e.g. ``lines``' ``x``."""
        import inspect

        return sorted(name for name, p in inspect.signature(self.function).parameters.items()
                      if p.kind is p.KEYWORD_ONLY and p.default is p.empty)


PLOT_KINDS = {
    "speedup": _Kind(plot_speedup, {"x": "column", "y": "column", "hue": "columns", "logx": "bool"}, (6.4, 3.8),
                     "sharded rows with a value of x"),
    "breakdown": _Kind(plot_breakdown, {"by": "columns", "annotate": "bool"}, (6.4, 4.0),
                       "rows with a step-time breakdown (status ok)"),
    "memory": _Kind(plot_memory, {"by": "columns", "capacity": "bool"}, (6.4, 4.0), "rows with a memory peak"),
    "heatmap": _Kind(plot_heatmap, {"x": "column", "y": "column", "value": "column", "strategy": "string",
                                    "fmt": "string", "cmap": "string", "aggregate": "string"}, (6.4, 4.4),
                     "rows of the strategy with values of x and y"),
    "lines": _Kind(plot_lines, {"x": "column", "y": "column", "hue": "columns", "logx": "bool", "logy": "bool"},
                   (6.4, 3.8), "rows of the strategies with a value of x"),
}
"""Plot kinds an experiment may ask for: the function and its options."""

COMMON_OPTIONS = ("title", "where", "facet", "figsize")
"""Options every plot kind takes."""
_COMMON = set(COMMON_OPTIONS)

OPTION_MEANINGS = {
    "x": "Results column on the x axis.",
    "y": "Results column on the y axis (heatmap: the rows).",
    "hue": "Results column(s) whose values are the series (one line each).",
    "logx": "Log x axis (default: when the x values span more than an octave).",
    "logy": "Log y axis.",
    "by": "Results column(s) that group the bars (one replicated/sharded pair per group).",
    "annotate": "Write each bar's total above it.",
    "capacity": "Draw the replica's HBM capacity as a line.",
    "value": "Results column shown by the cells' colour.",
    "strategy": f"Strategy whose rows the heatmap shows ({', '.join(STRATEGY_NAMES[:-1])} or {STRATEGY_NAMES[-1]}).",
    "fmt": "Python format of the cell labels, e.g. '.2f'.",
    "cmap": "Matplotlib colour map name.",
    "aggregate": "mean: a cell may average the points that differ only in a parameter on none of x, y "
                 "and facet (the subtitle says over what); default: such a parameter is an error.",
    "title": "Figure title (default: from the experiment and the plot).",
    "where": "Keep only rows whose column has this value (or one of these values): column -> value(s).",
    "facet": "Results column: one panel per value, sharing axes and colour scale.",
    "figsize": "[width, height] of one panel, inches.",
}
"""What each plot option does (the experiment format reference lists them from here)."""

MAX_FIGSIZE_IN = 12
"""Largest ``figsize`` side, inches (of one panel; a faceted figure is capped as a whole
by :data:`wus_sim.plotting.figure.FIGURE_MAX_IN`)."""


def _check_heatmap_options(sec, options):
    """The heatmap's text options, which otherwise fail only when drawn, after the sweep."""
    from ..training.update.strategies import STRATEGIES

    if "strategy" in options and options["strategy"] not in STRATEGIES:
        raise sec.error("strategy", f"must be one of {', '.join(STRATEGIES)}", options["strategy"])
    if "fmt" in options:
        try:
            format(1.5, options["fmt"])  # the cells are floats
        except (ValueError, TypeError):
            raise sec.error("fmt", "must be a Python format spec for a number, e.g. '.2f' or '.1%'",
                            options["fmt"]) from None
    if "aggregate" in options and options["aggregate"] not in AGGREGATES:
        raise sec.error("aggregate", f"must be one of {', '.join(AGGREGATES)} (or left out: no averaging)",
                        options["aggregate"])
    if "cmap" in options:
        import matplotlib  # only here: importing the plotting package stays free of matplotlib

        if options["cmap"] not in matplotlib.colormaps:
            raise sec.error("cmap", "is not a Matplotlib colour map name (e.g. RdYlGn, viridis)", options["cmap"])


def check_plots(plots, experiment=None):
    """Validate every :class:`~wus_sim.experiments.spec.PlotSpec`; errors name file and key path.
    With *experiment*, also that no heatmap averages over a swept axis unasked (:func:`check_placed`)."""
    _check_each(plots)
    if experiment is not None:
        check_placed(plots, experiment)


def check_placed(plots, experiment):
    """Every swept axis of *experiment* has a place in each heatmap: x, y, facet, or one value
    pinned by ``where``; else the error names the axis and how to place it (or ``aggregate:
    mean``, which averages on purpose and says so). A cell that averaged two bucket sizes read
    1.73 where the points were 1.739 and 1.715, and nothing said so. The other kinds give
    every varying parameter its own series or group, so they never average."""
    from .labels import SLICE_KEYS

    for plot in plots:
        if plot.kind != "heatmap" or plot.options.get("aggregate") is not None:
            continue
        import inspect

        params = inspect.signature(plot_heatmap).parameters
        placed = {plot.options.get(a, params[a].default) for a in ("x", "y")} | {plot.options.get("facet")}
        where = plot.options.get("where") or {}
        placed |= {k for k, v in where.items() if not isinstance(v, list) or len(v) == 1}
        if placed & set(SLICE_KEYS):
            placed |= set(SLICE_KEYS)
        for axis in experiment.axes:
            if len(axis) < 2 or set(axis.keys) & (placed | {"strategy"}):
                continue
            key, values = axis.keys[0], axis.values[0]
            text = [f"{v:g}" if isinstance(v, float) else str(v) for v in values]
            shown = ", ".join(text[:4]) + (", ..." if len(values) > 4 else "")
            raise ConfigError(
                f"heatmap {plot.name!r} would average each cell over the swept {key} ({shown}), which is "
                      f"on none of x, y and facet: place it (facet: {key}, or as x or y), pin it (where: "
                      f"{{{key}: {text[0]}}}), or average on purpose (aggregate: mean)",
                file=plot.section.file, key_path=plot.section.path)


def _check_each(plots):
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
                        raise sec.error(where, f"is not a results column{did_you_mean(name, known)}; known: "
                                                       f"{', '.join(sorted(known))}", name)
            elif otype == "bool":
                sec.boolean(option)
            else:
                sec.string(option)
        if plot.kind == "heatmap":
            _check_heatmap_options(sec, plot.options)
        if "title" in plot.options:
            sec.string("title")
        if "facet" in plot.options and (not isinstance(plot.options["facet"], str)
                                        or plot.options["facet"] not in known):
            raise sec.error("facet", "is not a results column name" + did_you_mean(plot.options["facet"], known),
                            plot.options["facet"])
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
                    raise where.error(col, "is not a results column" + did_you_mean(col, known), show_value=False)
                want = where.get(col)
                values = want if isinstance(want, list) else [want]
                if any(isinstance(v, (list, dict)) for v in values):
                    raise where.error(col, "must be a value or a list of values", want)
