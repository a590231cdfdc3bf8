"""Each strategy's bar side by side (replicated, sharded, fully-sharded), stacked by part
(breakdown and memory plots)."""

from dataclasses import dataclass

from ..experiments.results import column_label
from ..model.memory import STRATEGY_NAMES
from .labels import _companions, _groups, _label
from .style import NOT_OK_COLOR, _PART_COLORS, _STRATEGY_SHORT, strategy_style

__all__ = []


_BAR_WIDTH = 0.8
_GROUP_GAP = 1.0  # empty bar slots between groups


@dataclass
class _StrategyBars:
    """Replicated and sharded bars side by side, one pair per group: where they stand, what they show."""

    positions: list
    strategies: list
    rows: list
    """The results row each bar draws."""
    values: dict
    """Per part: the scaled value of each bar (0 where missing)."""
    centers: list
    """Middle of each group's bars, for its label."""
    group_labels: list


def _strategy_bars(rows, keys, parts, scale):
    """Lay out the first row of each strategy in each group (by *keys*), values of *parts* x *scale*.

    A group's label is its *keys* values, then any parameter fixed within each group that
    varies between them (each workload's own global batch, :func:`~.labels._companions`)."""
    bars = _StrategyBars([], [], [], {p: [] for p in parts}, [], [])
    companions = _companions(rows, keys)
    x = 0.0
    for gvalues, group in _groups(rows, keys):
        start = x
        for strategy in STRATEGY_NAMES:
            srow = group[group["strategy"] == strategy]
            if srow.empty:
                continue
            srow = srow.iloc[0]
            bars.positions.append(x)
            bars.strategies.append(strategy)
            bars.rows.append(srow)
            for p in parts:
                bars.values[p].append(float(srow[p]) * scale if srow[p] == srow[p] else 0.0)
            x += 1.0
        if x > start:
            bars.centers.append((start + x - 1.0) / 2)
            label = _label(keys, gvalues).replace(", ", "\n")
            if companions:
                label += "\n" + _label(companions, tuple(group[c].iloc[0] for c in companions)).replace(", ", "\n")
            bars.group_labels.append(label)
            x += _GROUP_GAP
    return bars


def _strategy_ticks(ax, bars):
    """"rep"/"shd"/"fsd" under each bar in its strategy's colour, the group's name under each group."""
    ax.set_xticks(bars.positions, [_STRATEGY_SHORT[s] for s in bars.strategies], minor=True)
    # matplotlib drops a minor tick where a major one stands: the middle of three bars
    ax.xaxis.remove_overlapping_locs = False
    _group_ticks(ax, bars.centers, bars.group_labels)
    ax.tick_params(axis="x", which="major", length=0, pad=16)
    ax.tick_params(axis="x", which="minor", length=0, labelsize=8)
    ax.grid(axis="x", visible=False)
    # each in its strategy's colour, as in the line plots (set last: new ticks copy the first's look)
    for tick, strategy in zip(ax.xaxis.get_minor_ticks(len(bars.strategies)), bars.strategies):
        tick.label1.set_color(strategy_style(strategy).colour)
        tick.label1.set_fontweight("bold")


def _group_ticks(ax, centers, labels):
    """Group names under each group of bars, a line per key. Whether neighbours collide is
    measured once the figure is laid out (:func:`~.layout.fit_xtick_labels` wraps, widens,
    shrinks); guessed here from character counts and the width before layout, it broke
    "transformer-big" in two where it fitted."""
    ax.set_xticks(centers, labels, fontsize=9)


def _stack(ax, positions, width, parts, values):
    """Stacked bars, one container per part (parts that are zero everywhere are left out)."""
    containers = []
    bottom = [0.0] * len(positions)
    for p in parts:
        if not any(values[p]):
            continue
        c = ax.bar(positions, values[p], width, bottom=bottom, color=_PART_COLORS.get(p),
                   label=column_label(p)[0].split(" [")[0], edgecolor="white", linewidth=0.5)
        containers.append(c)
        bottom = [b + v for b, v in zip(bottom, values[p])]
    return containers


def _bar_tops(containers):
    """Top of every stacked bar (for the y limit: zero-height bars pin autoscaling)."""
    if not containers:
        return []
    tops = [0.0] * len(containers[0].patches)
    for c in containers:
        for i, patch in enumerate(c.patches):
            tops[i] = max(tops[i], patch.get_y() + patch.get_height())
    return tops


def _mark_bars_not_ok(ax, bars):
    """Write the status on the (empty) bar of each row that could not run: kept in place, not dropped."""
    for xpos, srow in zip(bars.positions, bars.rows):
        status = srow.get("status", "ok")
        if status != "ok":
            ax.annotate("does not fit" if status == "infeasible" else str(status), (xpos, 0.0), xytext=(0, 3),
                        textcoords="offset points", rotation=90, ha="center", va="bottom", fontsize=7,
                        color=NOT_OK_COLOR)
