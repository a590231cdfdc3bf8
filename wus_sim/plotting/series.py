"""Series of the line plots: how each looks, the legend that says so, and its points without a value.

A series is the rows that share the values of its keys (``hue``); each strategy drawn
(replicated, sharded, fully-sharded) draws a line of it. A strategy has its own colour and
marker in every figure (:data:`~.style.STRATEGY_STYLES`); a series has its own line style and
a shade of its strategy's colour (:func:`~.style.series_look`), the same in every panel and for
every strategy. The legend says so once: one entry per series (its line style, in grey when
several strategies are drawn, else as drawn) and one per strategy (its colour and marker).

Why the strategy owns the colour: a reader of a design doc compares strategies first ("is
sharded faster?"); colours per series and line styles per strategy drew sharded and
fully-sharded as the same hollow circle wherever a point was a what-if marker, and told the
strategies apart only by a dash pattern. Why shade and dash both for a series: five dashes and
four shades are coprime, so the first 20 series of a strategy all look different, and the
first four differ twice over.

Points without a value (the strategy does not fit in memory, or the point failed) are crosses
in a grey band under the data, one row per series and strategy, each row named in its
series' colour ("does not fit: transformer-big, replicated"). They used to be crosses at a
made-up height inside the data (paper_speedup's red cross read as a speedup of 1.05), so a
reader could not tell them from values. The y range leaves the band free of data
(:func:`~.layout.fit_y_range`).

A series' 95 % band (``{y}_low``..``{y}_high``) is a light fill in its colour behind the lines
(:data:`BAND_ZORDER`), inside the y range (the range includes it), named by its kind:
"calibration" where the calibration's fit covers the point, "extrapolated" where it does not
(:func:`band_kind`), hatched so that the two read apart without the legend.

A figure of several panels passes one :class:`SeriesStyles` to all of them, so a series
keeps its look in every panel even where another panel lacks some series.
"""

from typing import NamedTuple

from .labels import _axis_label, _companions, _groups, _label, _numeric, _series_label
from .style import INFEASIBLE_MARKER, NO_VALUE_BAND_COLOR, NO_VALUE_GID, SERIES_DASHES, series_look, strategy_style

__all__ = ["SeriesStyles", "draw_series", "strategy_variants", "label_no_value_band", "place_no_value_labels",
           "coinciding_series", "coincide_note", "band_kind", "STRATEGY_KEY_COLOR", "BAND_ROW", "MAX_BAND_ROWS",
           "BAND_LABEL_PAD_PT", "BAND_ALPHA", "BAND_ZORDER", "LINE_ZORDER"]

STRATEGY_KEY_COLOR = "0.3"
"""Colour of the legend's series entries when several strategies are drawn (a series is a
line style there, not a colour)."""
LINE_ZORDER = 2.5
"""Layer of the series' lines: above their bands and the grid."""


class SeriesStyles:
    """The look of every series of one figure: the order it was first drawn in (see the module)."""

    def __init__(self):
        self._index = {}

    def index(self, keys, values):
        """Place of the series with *values* of *keys* among the figure's series (new ones go last)."""
        return self._index.setdefault((tuple(keys), tuple(values)), len(self._index))

    def look(self, keys, values, strategy):
        """``{"color", "marker", "linestyle"}`` of that series' line of *strategy*."""
        return series_look(strategy, self.index(keys, values))


def draw_series(ax, rows, good, x, y, keys, *, scale, strategies=(None,), styles=None, why=None):
    """One line per series of *keys* and strategy through its *good* rows; the other rows are
    crosses in the band under the data (their reason: *why*, a Series over *rows*; default
    "does not fit" for status infeasible, else the status).

    *strategies*: those drawn (None: the rows are one strategy's, or have none); each line takes
    its colour and marker from its strategy and its line style from its series (*styles*, a
    :class:`SeriesStyles`; default: one for this axes alone). Returns the lines, the legend
    entries ``[(label, handle)]`` (the series; then the strategies when there are several; then
    the bands by kind; then the cross when one was drawn) and the legend's title. Call
    :func:`label_no_value_band` once the x axis is final."""
    from matplotlib.lines import Line2D

    styles = styles or SeriesStyles()
    if why is None:
        why = _reasons(rows)
    groups = _groups(rows, keys)
    companions = _companions(rows, keys, exclude=(x,))
    several = len(strategies) > 1
    lines, missing, bands = [], [], {}
    series_entries = {}
    for values, group in groups:
        values = values if isinstance(values, tuple) else (values,)
        i = styles.index(keys, values)
        label = _series_label(keys, values, companions, group) if keys else ""
        if keys and several:
            series_entries.setdefault(label, Line2D([], [], color=STRATEGY_KEY_COLOR, linewidth=1.8,
                                                    linestyle=SERIES_DASHES[i % len(SERIES_DASHES)]))
        elif keys:  # without keys the one series needs no entry: the title names its strategy
            series_entries.setdefault(label, Line2D([], [], linewidth=1.8, markersize=5,
                                                    **series_look(strategies[0], i)))
        for strategy in strategies:
            part = group if strategy is None else group[group["strategy"] == strategy]
            if part.empty:
                continue
            look = series_look(strategy, i)
            ok = part[good.loc[part.index]].sort_values(x)
            name = ", ".join(t for t in (label, strategy if several or not keys else None) if t) or "all"
            (line,) = ax.plot(_xvalues(ok[x]), ok[y].astype(float) * scale, linewidth=1.8, markersize=5,
                              label=name, zorder=LINE_ZORDER, **look)
            line.series_label, line.strategy = label, strategy  # for coinciding_series
            lines.append(line)
            for kind in _draw_band(ax, ok, x, y, scale, look["color"]):
                bands.setdefault((strategy, kind), look["color"] if not keys or not several
                                 else strategy_style(strategy).colour)
            bad = part[~good.loc[part.index] & why.loc[part.index].notna()]
            for reason, points in bad.groupby(why.loc[bad.index], sort=False):
                missing.append(_Missing(reason, label, strategy if several else None, look["color"],
                                        tuple(_xvalues(points[x]))))
    entries = list(series_entries.items())
    if several:
        entries += [(strategy, Line2D([], [], color=strategy_style(strategy).colour, marker=strategy_style(strategy).marker,
                                      linewidth=1.8, markersize=5))
                    for strategy in strategies if (rows["strategy"] == strategy).any()]
    entries += band_entries(bands, several)
    if missing:
        _draw_no_value_band(ax, _band_rows(missing))
        entries.append(("no value (does not fit, or failed)", Line2D(
            [], [], linestyle="none", marker=INFEASIBLE_MARKER, color=STRATEGY_KEY_COLOR, markeredgewidth=1.8)))
    return lines, entries, _legend_title(rows, keys, companions)


BAND_ALPHA = 0.15
"""Opacity of a series' band: light enough that crossing bands and the lines stay readable."""
BAND_ZORDER = 1.7
"""Layer of the bands: above the grid and the no-value band, below every line (:data:`LINE_ZORDER`)."""
BAND_HATCH = {"calibration": None, "extrapolated": "////"}
"""Hatching of a band by its kind: an extrapolated band is hatched, so it reads apart unnamed."""


def band_kind(row):
    """What the band of a results *row* covers: ``"calibration"`` where the calibration's fit
    covers the point (``band_kind`` says calibration and the point is inside the range the
    calibration was checked on), else ``"extrapolated"`` (``band_kind`` says so, or
    ``inside_validated_range`` is false: the band moves fitted values to a point no fit saw)."""
    kind = row.get("band_kind")
    inside = row.get("inside_validated_range")
    if isinstance(kind, str) and kind == "extrapolated":
        return "extrapolated"
    if inside is False or (isinstance(inside, str) and inside.lower() == "false"):
        return "extrapolated"
    try:
        if inside is not None and inside == inside and not bool(inside):
            return "extrapolated"
    except (TypeError, ValueError):
        pass
    return "calibration"


def band_entries(bands, several):
    """Legend entries of the bands drawn: *bands* ``{(strategy, kind): colour}``; one entry per kind
    (and strategy, when *several* are drawn), filled and hatched as drawn."""
    from matplotlib.patches import Patch

    out = []
    for (strategy, kind), colour in bands.items():
        label = f"95 % band ({kind})" + (f": {strategy}" if several and strategy else "")
        out.append((label, Patch(facecolor=colour, alpha=BAND_ALPHA * 2 if BAND_HATCH[kind] else BAND_ALPHA * 1.5,
                                 edgecolor=colour, hatch=BAND_HATCH[kind], linewidth=0)))
    return out


def _draw_band(ax, ok, x, y, scale, color):
    """Shade *ok*'s ``{y}_low``-``{y}_high`` (the 95 % band) in the series' colour, one fill per
    kind (:func:`band_kind`); the kinds drawn, in order."""
    low, high = f"{y}_low", f"{y}_high"
    if low not in ok.columns or high not in ok.columns:
        return []
    band = ok[ok[low].notna() & ok[high].notna()]
    if band.empty:
        return []
    kinds = [band_kind(row) for _, row in band.iterrows()]
    drawn = []
    for kind in dict.fromkeys(kinds):
        mask = [k == kind for k in kinds]
        xs = _xvalues(band[x])
        if sum(mask) == 1:  # one point of its kind: a bar at it (a fill of one point has no width)
            j = mask.index(True)
            bar = ax.vlines([xs.iloc[j]], float(band[low].iloc[j]) * scale, float(band[high].iloc[j]) * scale,
                            colors=color, alpha=2 * BAND_ALPHA, linewidth=6, zorder=BAND_ZORDER)
            bar.band_kind = kind
        poly = ax.fill_between(xs, band[low].astype(float) * scale, band[high].astype(float) * scale,
                               where=mask, color=color, alpha=BAND_ALPHA, linewidth=0, zorder=BAND_ZORDER,
                               hatch=BAND_HATCH[kind], edgecolor=color if BAND_HATCH[kind] else "none")
        poly.band_kind = kind
        drawn.append(kind)
    return drawn


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


def strategy_variants(strategies, present):
    """The *strategies* found in *present*, in order (``[None]`` when none is)."""
    drawn = [s for s in strategies if s in set(present)]
    return drawn or [None]


def _xvalues(column):
    return column.astype(float) if _numeric(column) else column.astype(str)


def _legend_title(rows, keys, companions):
    """What a legend's labels are: its keys, then (in parentheses) the companions its labels carry."""
    title = ", ".join(_axis_label(k, unit=False) for k in keys)
    if companions:
        title += f" ({', '.join(_axis_label(k, unit=False) for k in companions)})"
    return title or None
