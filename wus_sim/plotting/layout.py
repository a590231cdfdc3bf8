"""Layout: where a figure's legend goes, x tick labels that do not collide, and y ranges that
keep a line plot's values off the frame and off its no-value band.

Legend and tick labels are laid out once the figure is drawn, on measured text rather than
on character counts before drawing, because whether two labels collide depends on their
rendered widths and on the width constrained layout leaves
each panel once the legend and the y labels have theirs, and neither is known while a plot
function draws. The estimate the bars used (0.6 em a character, the panel's width before
layout) let "64/replica global batch 32768" run into its neighbour in the quickstart figure;
a measured extent does not.
"""

import math
import textwrap

from .style import BAND_ATTRIBUTE, NO_VALUE_GID

__all__ = ["place_legend", "fit_xtick_labels", "collisions", "fit_y_range", "data_y_range", "band_height",
           "LEGEND_RIGHT_MAX_FRACTION", "MIN_LABEL_GAP_PT", "MIN_WRAP_CHARS", "MIN_TICK_FONT_PT", "Y_MARGIN"]

LEGEND_RIGHT_MAX_FRACTION = 0.45
"""A legend wider than this fraction of the panels goes below them: right of them it would
leave the panels a strip (the multislice step time's legend took two thirds of the figure)."""
MIN_LABEL_GAP_PT = 6.0
"""Least space between two neighbouring x tick labels, points."""
MIN_WRAP_CHARS = 8
"""Narrowest a label is wrapped to, characters: narrower, the figure widens instead."""
MIN_TICK_FONT_PT = 7.0
"""Smallest x tick label font a crowded axis shrinks its labels to before it turns them."""


def place_legend(fig, handles, labels, *, title=None, max_size_in=(14.0, 14.0)):
    """One legend for the figure: right of the panels when it is narrow (at most
    :data:`LEGEND_RIGHT_MAX_FRACTION` of their width) and no taller than they are, else below
    them in as many columns as fit their width. The figure grows by the legend (up to
    *max_size_in*), so the panels keep the size they were given. Returns the Legend or None."""
    if not handles:
        return None
    renderer = fig.canvas.get_renderer()
    width_in, height_in = fig.get_size_inches()

    def legend(loc, ncols=1):
        made = fig.legend(handles, labels, loc=loc, frameon=False, title=title, ncols=ncols)
        box = made.get_window_extent(renderer)
        return made, box.width / fig.dpi, box.height / fig.dpi

    right, w, h = legend("outside right center")
    if w <= LEGEND_RIGHT_MAX_FRACTION * width_in and h <= height_in and width_in + w <= max_size_in[0]:
        fig.set_size_inches(width_in + w, height_in)
        return right
    right.remove()
    for ncols in range(len(handles), 0, -1):
        below, w, h = legend("outside lower center", ncols)
        if w <= width_in or ncols == 1:
            break
        below.remove()
    fig.set_size_inches(width_in, min(height_in + h, max_size_in[1]))
    return below


def fit_xtick_labels(fig, axes, *, max_width_in=14.0, rounds=6):
    """Make the major x tick labels of *axes* stop running into each other, drawing *fig* to
    measure them. Labels with words (group names under bars) are wrapped to the room between
    their neighbours; if they still collide the figure widens (up to *max_width_in*), then
    they are set smaller (down to :data:`MIN_TICK_FONT_PT`), then each is written on one line,
    turned upright. Labels without words (numbers) are thinned to every k-th. Returns the axes
    it changed."""
    changed = set()
    for _ in range(rounds):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        now = [ax for ax in axes if _fit_once(ax, renderer, max_width_in)]
        changed.update(now)
        if not now:
            break
    return changed


def _shown_labels(ax):
    """``(location, Text)`` of the major x tick labels inside the view, in x order."""
    lo, hi = sorted(ax.get_xlim())
    shown = [(loc, label) for loc, label in zip(ax.get_xticks(), ax.get_xticklabels())
             if lo <= loc <= hi and label.get_visible() and label.get_text()]
    return sorted(shown, key=lambda pair: pair[0])


def collisions(ax, renderer, gap_pt=MIN_LABEL_GAP_PT):
    """Pairs of neighbouring major x tick labels of *ax* closer than *gap_pt* (as drawn by *renderer*)."""
    gap_px = gap_pt * ax.figure.dpi / 72
    boxes = [label.get_window_extent(renderer) for _, label in _shown_labels(ax)]
    return [(a, b) for a, b in zip(boxes, boxes[1:]) if a.x1 + gap_px > b.x0]


def _fit_once(ax, renderer, max_width_in):
    """One remedy for *ax*'s colliding x tick labels, if any; whether it changed anything."""
    shown = _shown_labels(ax)
    pairs = collisions(ax, renderer)
    if len(shown) < 2 or not pairs or shown[0][1].get_rotation():
        return False
    texts = [label.get_text() for _, label in shown]
    size = shown[0][1].get_fontsize()
    if not any(" " in t or "-" in t for t in texts):
        return _thin(ax, shown, renderer)
    wrapped = _wrap_to_room(ax, shown, renderer)
    if wrapped != texts:
        _set_major_labels(ax, shown, wrapped, size=size)
        return True
    if _widen(ax, pairs, max_width_in):
        return True
    if size > MIN_TICK_FONT_PT:
        _set_major_labels(ax, shown, texts, size=max(MIN_TICK_FONT_PT, size - 1))
        return True
    upright = [", ".join(t.replace("-\n", "-").split("\n")) for t in texts]
    # anchored at the end of the text, which turned upright is its top, under the tick
    _set_major_labels(ax, shown, upright, size=size, rotation=90, ha="right", va="center", rotation_mode="anchor")
    return True


def _widen(ax, pairs, max_width_in):
    """Widen *ax*'s figure by what its panels need for the colliding label *pairs* to clear
    each other (up to *max_width_in*); whether it could."""
    fig = ax.figure
    width_in, height_in = fig.get_size_inches()
    if width_in >= max_width_in - 0.01:
        return False
    gap_px = MIN_LABEL_GAP_PT * fig.dpi / 72
    factor = max(((a.width + b.width) / 2 + gap_px) / max((b.x0 + b.x1 - a.x0 - a.x1) / 2, 1.0) for a, b in pairs)
    row = ax.get_position().y0
    panels_in = sum(other.get_position().width for other in fig.axes
                    if other.axison and abs(other.get_position().y0 - row) < 1e-3) * width_in
    fig.set_size_inches(min(max_width_in, width_in + panels_in * (factor - 1) + 0.1), height_in)
    return True


def _wrap_to_room(ax, shown, renderer):
    """Each label's lines wrapped (at spaces and after hyphens) to the room between its
    neighbours' centres, at the width its own characters take."""
    gap_px = MIN_LABEL_GAP_PT * ax.figure.dpi / 72
    centres = [ax.transData.transform((loc, 0))[0] for loc, _ in shown]
    out = []
    for i, (_, label) in enumerate(shown):
        text = label.get_text()
        lines = text.split("\n")
        longest = max(len(line) for line in lines)
        char_px = label.get_window_extent(renderer).width / max(longest, 1)
        room = min([abs(centres[j] - centres[i]) for j in (i - 1, i + 1) if 0 <= j < len(centres)])
        chars = max(MIN_WRAP_CHARS, int((room - gap_px) / char_px))
        out.append("\n".join(part for line in lines
                             for part in (textwrap.wrap(line, chars, break_long_words=False) or [line])))
    return out


def _thin(ax, shown, renderer):
    """Blank all but every k-th label, for the smallest k whose labels clear each other."""
    boxes = [label.get_window_extent(renderer) for _, label in shown]
    gap_px = MIN_LABEL_GAP_PT * ax.figure.dpi / 72
    texts = [label.get_text() for _, label in shown]
    k = next((k for k in range(2, len(shown))
              if all(a.x1 + gap_px <= b.x0 for a, b in zip(boxes[::k], boxes[k::k]))), len(shown))
    _set_major_labels(ax, shown, [t if i % k == 0 else "" for i, t in enumerate(texts)],
                      size=shown[0][1].get_fontsize())
    return True


def _set_major_labels(ax, shown, texts, *, size, **kw):
    """Set the labels of the *shown* ticks to *texts* (ticks outside the view keep theirs)."""
    locs = list(ax.get_xticks())
    labels = [label.get_text() for label in ax.get_xticklabels()]
    for (loc, _), text in zip(shown, texts):
        labels[locs.index(loc)] = text
    ax.set_xticks(locs, labels, fontsize=size, **kw)


Y_MARGIN = 0.05
"""Free space above the highest and below the lowest value of a line plot, a fraction of the
axes: a line on the edge is half hidden by the frame (whatif_failed_links' ResNet-50 panel,
whose range was the union of two panels' ranges with none to spare)."""


def data_y_range(ax):
    """``(lowest, highest)`` y of *ax*'s lines and of its 95 % bands (positive ones on a log axis),
    without the crosses of the no-value band; None if it has none. The bands count: a range of
    the lines alone cut the top of a band off (the step time's, on the LLM question)."""
    values = [float(v) for line in ax.lines if line.get_gid() != NO_VALUE_GID
              for v in line.get_ydata() if v == v]
    values += [float(v) for band in ax.collections if getattr(band, BAND_ATTRIBUTE, None)
               for path in band.get_paths() for v in path.vertices[:, 1] if v == v]
    values = [v for v in values if ax.get_yscale() != "log" or v > 0]
    return (min(values), max(values)) if values else None


def band_height(ax):
    """Height of *ax*'s no-value band, a fraction of the axes (0 without one)."""
    return max((p.get_height() for p in ax.patches if p.get_gid() == NO_VALUE_GID), default=0.0)


def fit_y_range(ax, low=None, high=None, band=None):
    """Set *ax*'s y limits so that its values (*low*..*high*, default: its own) keep
    :data:`Y_MARGIN` from the top and from the no-value band (height *band*, default its own)
    at the foot; on a log axis, in ratio."""
    if low is None or high is None:
        found = data_y_range(ax)
        if found is None:
            return
        low, high = found
    band = band_height(ax) if band is None else band
    log = ax.get_yscale() == "log"
    lo, hi = (math.log10(low), math.log10(high)) if log else (low, high)
    if hi - lo <= 0:
        half = abs(hi) * 0.05 or 0.5
        lo, hi = lo - half, hi + half
    total = (hi - lo) / (1 - band - 2 * Y_MARGIN)
    bottom, top = lo - (band + Y_MARGIN) * total, hi + Y_MARGIN * total
    ax.set_ylim(*((10 ** bottom, 10 ** top) if log else (bottom, top)))
    if band:
        _ticks_above(ax, band)


def _ticks_above(ax, band):
    """Keep *ax*'s y ticks (and grid lines) off the no-value band: a tick beside it would give
    its crosses a value. The ticks are fixed for the final limits; the locator that chose them
    is kept on them for a later fit."""
    from matplotlib.ticker import FixedLocator

    lo, hi = ax.get_ylim()
    log = ax.get_yscale() == "log"
    floor = 10 ** (math.log10(lo) + band * (math.log10(hi) - math.log10(lo))) if log else lo + band * (hi - lo)
    for get, put in ((ax.yaxis.get_major_locator, ax.yaxis.set_major_locator),
                     (ax.yaxis.get_minor_locator, ax.yaxis.set_minor_locator)):
        chooser = getattr(get(), "chosen_by", get())
        fixed = FixedLocator([t for t in chooser.tick_values(lo, hi) if floor <= t <= hi])
        fixed.chosen_by = chooser
        put(fixed)
        chooser.set_axis(ax.yaxis)
