"""Series of the line plots: how each looks, the legend that says so, and its points without a value.

A series is the rows that share the values of its keys (``hue``). Each strategy drawn
(replicated, sharded, fully-sharded) is a variant of a series: same colour and marker, its
own line style, and one legend entry per strategy rather than its name repeated in every
series' label ("..., replicated (adam, 2048), rep" said the strategy twice).

Why, past ten series, colours go by all keys but one and markers by that one: ten colours
are as many as stay apart (matplotlib's tab10). Cycling them gave the eleventh series the
first one's blue with another marker, and readers took the two blues for one series
(whatif_failed_links' 12 series: workload x topology x seed). Split, each colour means one
thing (a workload on a topology) and each marker one thing (a seed), and the legend lists
4 colours and 3 markers instead of 12 combinations.

Points without a value (the strategy does not fit in memory, or the point failed) are crosses
in a grey band under the data, one row per series and strategy, each row named in its
series' colour ("does not fit: transformer-big, replicated"). They used to be crosses at a
made-up height inside the data (paper_speedup's red cross read as a speedup of 1.05), in
the series' colour only, so a reader could neither tell them from values nor tell which
strategy of the series had failed. The y range leaves the band free of data
(:func:`~.layout.fit_y_range`).

A figure of several panels passes one :class:`SeriesStyles` to all of them, so a series
keeps its colour and marker in every panel even where another panel lacks some series.
"""

from typing import NamedTuple

from .labels import _axis_label, _companions, _groups, _label, _numeric, _series_label
from .style import (
    INFEASIBLE_MARKER, NO_VALUE_BAND_COLOR, NO_VALUE_GID, SERIES_COLORS, SERIES_MARKERS, _STRATEGY_LINESTYLE,
)

__all__ = ["SeriesStyles", "draw_series", "strategy_variants", "label_no_value_band", "place_no_value_labels",
           "coinciding_series", "coincide_note", "STRATEGY_KEY_COLOR", "BAND_ROW", "MAX_BAND_ROWS", "BAND_LABEL_PAD_PT"]

STRATEGY_KEY_COLOR = "0.3"
"""Colour of the legend's line-style entries (a strategy is a style, not a colour)."""


class SeriesStyles:
    """Colour and marker of every series of one figure (see the module)."""

    def __init__(self):
        self.marker_key = None
        """The key whose values the markers show when colours go by the other keys (None: one
        colour and marker per series); decided by the first panel drawn."""
        self.decided = False
        self._colours = {}
        self._markers = {}

    def plan(self, keys, series):
        """Decide, on the first call, whether *series* (value tuples of *keys*) are too many for a colour each."""
        if self.decided:
            return
        self.decided = True
        if len(series) <= len(SERIES_COLORS):
            return
        for i in reversed(range(len(keys))):
            marks = {values[i] for values in series}
            colours = {values[:i] + values[i + 1:] for values in series}
            if len(marks) <= len(SERIES_MARKERS) and len(colours) <= len(SERIES_COLORS):
                self.marker_key = keys[i]
                return

    def split(self, keys):
        """Whether the series of *keys* take colours from some keys and markers from another."""
        return self.marker_key is not None and self.marker_key in keys and len(keys) > 1

    def parts(self, keys, values):
        """``(colour keys, their values, marker value or None)`` of one series."""
        if not self.split(keys):
            return list(keys), tuple(values), None
        i = list(keys).index(self.marker_key)
        return [k for k in keys if k != self.marker_key], tuple(values[:i] + values[i + 1:]), values[i]

    def style(self, keys, values):
        """``{"color", "marker"}`` of the series with *values* of *keys*; new series take the next free ones."""
        colour_keys, colour_values, mark = self.parts(keys, tuple(values))
        c = self._colours.setdefault((tuple(colour_keys), colour_values), len(self._colours))
        m = c if mark is None else self._markers.setdefault(mark, len(self._markers))
        return {"color": SERIES_COLORS[c % len(SERIES_COLORS)], "marker": SERIES_MARKERS[m % len(SERIES_MARKERS)]}


def draw_series(ax, rows, good, x, y, keys, *, scale, variants=((None, "-"),), styles=None, why=None):
    """One line per series of *keys* and variant through its *good* rows; the other rows are
    crosses in the band under the data (their reason: *why*, a Series over *rows*; default
    "does not fit" for status infeasible, else the status).

    *variants*: ``(strategy or None, linestyle)``; a series' variants share its colour and
    marker (*styles*, a :class:`SeriesStyles`; default: one for this axes alone). Returns the
    lines, the legend entries ``[(label, handle)]`` (the series, or split their colours then
    their markers; then the strategies' line styles when there are several; then the cross
    when one was drawn) and the legend's title. Call :func:`label_no_value_band` once the x
    axis is final."""
    from matplotlib.lines import Line2D

    styles = styles or SeriesStyles()
    if why is None:
        why = _reasons(rows)
    groups = _groups(rows, keys)
    styles.plan(keys, [values if isinstance(values, tuple) else (values,) for values, _ in groups])
    split = styles.split(keys)
    colour_keys = styles.parts(keys, (None,) * len(keys))[0] if split else keys
    companions = _companions(rows, colour_keys, exclude=(x,))
    several = len(variants) > 1
    lines, missing = [], []
    banded = False
    colour_entries, marker_entries = {}, {}
    for values, group in groups:
        values = values if isinstance(values, tuple) else (values,)
        style = styles.style(keys, values)
        label = _series_label(keys, values, companions, group) if keys else ""
        if split:
            ckeys, cvalues, mark = styles.parts(keys, values)
            colour_entries.setdefault(_series_label(ckeys, cvalues, companions, group),
                                      Line2D([], [], color=style["color"], linewidth=1.8))
            marker_entries.setdefault(_label([styles.marker_key], (mark,)),
                                      Line2D([], [], color=STRATEGY_KEY_COLOR, marker=style["marker"],
                                             linestyle="none", markersize=5))
        elif keys:  # without keys the one series needs no entry: its strategies have theirs
            colour_entries.setdefault(label, Line2D([], [], linewidth=1.8, markersize=5, **style))
        for strategy, linestyle in variants:
            part = group if strategy is None else group[group["strategy"] == strategy]
            if part.empty:
                continue
            ok = part[good.loc[part.index]].sort_values(x)
            name = ", ".join(t for t in (label, strategy if several or not keys else None) if t) or "all"
            (line,) = ax.plot(_xvalues(ok[x]), ok[y].astype(float) * scale, linestyle=linestyle, linewidth=1.8,
                              markersize=5, label=name, **style)
            line.series_label, line.strategy = label, strategy  # for coinciding_series
            lines.append(line)
            banded = banded | _draw_band(ax, ok, x, y, scale, style["color"])
            bad = part[~good.loc[part.index] & why.loc[part.index].notna()]
            for reason, points in bad.groupby(why.loc[bad.index], sort=False):
                missing.append(_Missing(reason, label, strategy if several else None, style["color"],
                                        tuple(_xvalues(points[x]))))
    entries = list(colour_entries.items()) + list(marker_entries.items())
    if several:
        entries += [(strategy, Line2D([], [], color=STRATEGY_KEY_COLOR, linestyle=linestyle, linewidth=1.8))
                    for strategy, linestyle in variants if (rows["strategy"] == strategy).any()]
    if banded:
        from matplotlib.patches import Patch

        entries.append(("shaded: 95% band (calibration)", Patch(color=STRATEGY_KEY_COLOR, alpha=BAND_ALPHA, linewidth=0)))
    if missing:
        _draw_no_value_band(ax, _band_rows(missing))
        entries.append(("no value (does not fit, or failed)", Line2D(
            [], [], linestyle="none", marker=INFEASIBLE_MARKER, color=STRATEGY_KEY_COLOR, markeredgewidth=1.8)))
    return lines, entries, _legend_title(rows, colour_keys, companions)


BAND_ALPHA = 0.18
"""Opacity of a series' band: light enough that crossing bands and the lines stay readable."""


def _draw_band(ax, ok, x, y, scale, color):
    """Shade *ok*'s ``{y}_low``-``{y}_high`` (the calibration's 95 % band) in the series' colour;
    whether anything was drawn."""
    low, high = f"{y}_low", f"{y}_high"
    if low not in ok.columns or high not in ok.columns:
        return False
    band = ok[ok[low].notna() & ok[high].notna()]
    if band.empty:
        return False
    ax.fill_between(_xvalues(band[x]), band[low].astype(float) * scale, band[high].astype(float) * scale,
                    color=color, alpha=BAND_ALPHA, linewidth=0)
    return True


def _reasons(rows):
    """Why each row has no value: "does not fit" (status infeasible), else its status; None
    for a row that ran (one without a value is no point of its series: no cross)."""
    import pandas as pd

    if "status" not in rows.columns:
        return pd.Series(None, index=rows.index, dtype=object)
    return rows["status"].map(lambda s: None if s == "ok" else "does not fit" if s == "infeasible" else str(s))


BAND_ROW = 0.06
"""Height of one row of the band, a fraction of the axes (about 11 pt of a 2.6 in panel)."""
MAX_BAND_ROWS = 4
"""Rows the band grows to; more series without values share rows, in turn."""


class _Missing(NamedTuple):
    """Points of one series and strategy without a value, for one reason."""

    reason: str
    series: str
    strategy: object
    colour: str
    xs: tuple


def _band_rows(missing):
    """``(text, colour, xs)`` of each row of the band. One row per series and strategy while
    they fit (:data:`MAX_BAND_ROWS`); past that, the series that miss the same points for the
    same reason and strategy share a grey row ("does not fit: replicated, 6 series"), then
    those that miss any points for it ("... some of 6 series"): twelve named rows in four
    overwrote each other (whatif_fully_sharded's step time without its own plots)."""
    def row(group, some=False):
        first = group[0]
        if len(group) == 1:
            who = ", ".join(str(t) for t in (first.series, first.strategy) if t)
            return (f"{first.reason}: {who}" if who else first.reason), first.colour, first.xs
        xs = tuple(sorted({x for m in group for x in m.xs}, key=lambda v: (isinstance(v, str), v)))
        many = f"{'some of ' if some else ''}{len(group)} series"
        return f"{first.reason}: {', '.join(str(t) for t in (first.strategy, many) if t)}", STRATEGY_KEY_COLOR, xs

    if len(missing) <= MAX_BAND_ROWS:
        return [row([m]) for m in missing]
    for key, some in ((lambda m: (m.reason, m.strategy, m.xs), False), (lambda m: (m.reason, m.strategy), True)):
        groups = {}
        for m in missing:
            groups.setdefault(key(m), []).append(m)
        if len(groups) <= MAX_BAND_ROWS:
            break
    return [row(group, some) for group in groups.values()]


def _draw_no_value_band(ax, missing):
    """The grey band under the data with one row of crosses per ``(text, colour, xs)`` of *missing*."""
    from matplotlib.patches import Rectangle

    rows = min(len(missing), MAX_BAND_ROWS)
    height = BAND_ROW * (rows + 0.4)
    ax.add_patch(Rectangle((0, 0), 1, height, transform=ax.transAxes, facecolor=NO_VALUE_BAND_COLOR,
                           edgecolor="none", zorder=1.6, gid=NO_VALUE_GID))
    for i, (text, colour, xs) in enumerate(missing):
        y = BAND_ROW * (i % MAX_BAND_ROWS + 0.7)
        (marks,) = ax.plot(list(xs), [y] * len(xs), transform=ax.get_xaxis_transform(), linestyle="none",
                           marker=INFEASIBLE_MARKER, color=colour, markersize=6, markeredgewidth=1.6,
                           zorder=4, label="_no value", gid=NO_VALUE_GID)
        marks.no_value_text = text


COINCIDE_FRACTION = 0.015
"""Two lines whose points all lie within this fraction of the axes height of each other look
like one (a 5 pt marker on a 3.8 in panel is about 0.018 of it)."""


def coinciding_series(ax):
    """``{series label: (label of the series it lies on, strategies)}`` of the series of *ax*
    (drawn by :func:`draw_series`) some of whose lines lie on an earlier series' line of the same
    strategy at every point: drawn, the later one hides the first ("three v5p series look like
    one"). *strategies*: the strategies whose lines coincide (None: the series' one line)."""
    import numpy as np

    lines = [line for line in ax.lines if getattr(line, "series_label", None) and len(line.get_xdata())]
    to_axes = ax.transAxes.inverted()

    def points(line):
        xs = [ax.convert_xunits(x) for x in line.get_xdata()]
        return to_axes.transform(ax.transData.transform(np.column_stack([xs, np.asarray(line.get_ydata(), float)])))

    found = {}
    for j, later in enumerate(lines):
        for first in lines[:j]:
            if first.series_label == later.series_label or first.strategy != later.strategy:
                continue
            a, b = points(first), points(later)
            if a.shape == b.shape and np.allclose(a[:, 0], b[:, 0], atol=1e-6) \
                    and np.all(np.abs(a[:, 1] - b[:, 1]) <= COINCIDE_FRACTION):
                partner, strategies = found.get(later.series_label, (first.series_label, []))
                if partner == first.series_label:
                    found[later.series_label] = (partner, strategies + [later.strategy])
                break
    out = {}
    for label, (partner, strategies) in found.items():
        drawn = [line.strategy for line in lines if line.series_label == label]
        out[label] = (partner, None if sorted(strategies, key=str) == sorted(drawn, key=str) else strategies)
    return out


def coincide_note(partner, strategies):
    """The legend's words for a series that lies on *partner*: ``(on X)`` or ``(sharded on X)``."""
    return f" ({', '.join(strategies) + ' ' if strategies else ''}on {partner})"


BAND_LABEL_PAD_PT = 6.0
"""Least space between a row's name and its nearest cross (or the frame), points."""


def label_no_value_band(ax):
    """Name each row of crosses, in its colour, where its row has most room: right of its last
    cross, left of its first, or between two (run once the x axis is final; a figure then
    places them again on measured text, :func:`place_no_value_labels`)."""
    for marks in [line for line in ax.lines if line.get_gid() == NO_VALUE_GID]:
        text = ax.text(0, marks.get_ydata()[0], marks.no_value_text, transform=ax.transAxes, va="center",
                       fontsize=7, color=marks.get_color(), zorder=4, clip_on=False, gid=NO_VALUE_GID)
        text.no_value_marks = marks
        _place(ax, text, width=0.0)


def _cross_positions(ax, marks):
    to_axes = ax.transAxes.inverted()
    return sorted(to_axes.transform(ax.transData.transform((ax.convert_xunits(x), 1.0)))[0]
                  for x in marks.get_xdata())


def _places(ax, marks, width):
    """``(room left over, x, alignment)`` of each place a name *width* wide (axes fraction) could
    go on its row: right of the last cross, left of the first, or between two."""
    xs = _cross_positions(ax, marks)
    pad = BAND_LABEL_PAD_PT / _axes_pt(ax)
    places = [(1.0 - xs[-1] - 2 * pad - width, xs[-1] + pad, "left"), (xs[0] - 2 * pad - width, xs[0] - pad, "right")]
    places += [(b - a - 2 * pad - width, (a + b) / 2, "center") for a, b in zip(xs, xs[1:])]
    return places


def _axes_pt(ax):
    return ax.get_position().width * ax.figure.get_figwidth() * 72


def _place(ax, text, width):
    room, at, align = max(_places(ax, text.no_value_marks, width), key=lambda p: p[0])
    text.set_x(at)
    text.set_horizontalalignment(align)
    return room >= 0


def place_no_value_labels(fig, axes, *, rounds=3):
    """Place each band row's name where it fits whole, measured on the drawn *fig*: beside or
    between its crosses, never over one and never past the frame. Where no gap of a row holds
    its name, the x axis grows on the right (the data keep their order and spacing; the room
    right of the last cross becomes the name's), so no name covers a cross nor is cut by the
    figure's edge ("oes not fit: replicated, 8 series")."""
    if not any(t.get_gid() == NO_VALUE_GID for ax in axes for t in ax.texts):
        return  # nothing to place: no drawing to pay for
    for _ in range(rounds):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        grew = False
        for ax in axes:
            texts = [t for t in ax.texts if t.get_gid() == NO_VALUE_GID]
            need = 1.0
            for text in texts:
                width = text.get_window_extent(renderer).width / (_axes_pt(ax) * fig.dpi / 72)
                if not _place(ax, text, width):
                    last = _cross_positions(ax, text.no_value_marks)[-1]
                    pad = BAND_LABEL_PAD_PT / _axes_pt(ax)
                    # the old view shrinks to a fraction s of the axes: 1 - s * last >= width + 2 pad
                    need = min(need, max((1.0 - width - 2 * pad) / max(last, 1e-9), 0.3))
            if need < 1.0:
                _grow_x_right(ax, need)
                grew = True
                for text in texts:
                    width = text.get_window_extent(renderer).width / (_axes_pt(ax) * fig.dpi / 72)
                    _place(ax, text, width)
        if not grew:
            return


def _grow_x_right(ax, share):
    """Widen the x view on the right so that the current view takes *share* of the axes."""
    lo, hi = ax.get_xlim()
    scale = ax.xaxis.get_transform()
    u_lo, u_hi = scale.transform([lo, hi])
    ticks = ax.get_xticks()
    ax.set_xlim(lo, float(scale.inverted().transform([u_lo + (u_hi - u_lo) / share])[0]))
    ax.set_xticks(ticks)  # the values' ticks, not new ones in the room made for a name


def strategy_variants(strategies, present, linestyles=_STRATEGY_LINESTYLE):
    """``(strategy, linestyle)`` of each of *strategies* in *present*: each its own style when
    there are several (*linestyles*), solid when one."""
    drawn = [s for s in strategies if s in set(present)]
    if len(drawn) <= 1:
        return [(s, "-") for s in drawn] or [(None, "-")]
    return [(s, linestyles[s]) for s in drawn]


def _xvalues(column):
    return column.astype(float) if _numeric(column) else column.astype(str)


def _legend_title(rows, keys, companions):
    """What a legend's labels are: its keys, then (in parentheses) the companions its labels carry."""
    title = ", ".join(_axis_label(k, unit=False) for k in keys)
    if companions:
        title += f" ({', '.join(_axis_label(k, unit=False) for k in companions)})"
    return title or None
