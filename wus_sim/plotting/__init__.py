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
An experiment without ``plots:`` gets :func:`default_plots`.

Modules: :mod:`.plots` (the plot functions), :mod:`.kinds` (plot kinds and the
checks of their options), :mod:`.figure` (figures, facets, files), :mod:`.layout` (legend
place and tick labels, measured once a figure is drawn), :mod:`.labels` (rows and names of
series), :mod:`.series` (line series: colours, markers, strategies' line styles, their
legend), :mod:`.bars` (side-by-side stacked bars), :mod:`.style` (colours, markers, axes),
:mod:`.defaults` (the plots of an experiment without any).

Why not seaborn's FacetGrid for the facets: what a figure does across its panels here is
one shared y range, one shared colour range for heatmaps, one legend ordered like the
stacked parts and a subtitle of what is fixed, around plot functions that must keep
working on a single ``ax`` (notebooks); a FacetGrid would wrap the same functions and
leave every one of those to write anyway, for a new dependency.
"""

from .defaults import default_plots
from .figure import NothingToDraw, draw_figure, save_plots
from .kinds import PLOT_KINDS, check_plots
from .plots import BREAKDOWN_PARTS, MEMORY_PARTS, plot_breakdown, plot_heatmap, plot_lines, plot_memory, plot_speedup
from .style import STYLE

__all__ = [
    "PLOT_KINDS", "BREAKDOWN_PARTS", "MEMORY_PARTS",
    "STYLE", "plot_speedup", "plot_breakdown", "plot_memory", "plot_heatmap", "plot_lines",
    "check_plots", "draw_figure", "save_plots", "default_plots", "NothingToDraw",
]
