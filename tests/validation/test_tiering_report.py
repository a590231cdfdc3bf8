"""``validate --tiering``'s files: tiering.csv (every TIERING_COLUMNS column, a line per row) and
tiering.png (each row's errors over its measured band)."""

import math

import pandas as pd
import pytest

from wus_sim.cli import main
from wus_sim.validation.tiering import TIERING_COLUMNS, simulate_tiering
from wus_sim.validation.tiering_report import tiering_figure


@pytest.fixture(scope="module")
def results():
    return simulate_tiering()


def test_validate_tiering_writes_the_table_and_the_figure(tmp_path, capsys):
    assert main(["validate", "--tiering", "--out", str(tmp_path)]) == 0
    assert f"wrote {tmp_path / 'tiering.csv'}, {tmp_path / 'tiering.png'}" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "tiering.csv")
    assert list(table.columns) == list(TIERING_COLUMNS) and len(table) == 8
    row4 = table[table["row"] == 4].iloc[0]
    # the page's figures for row 4 (123 tokens/s, 1 x 8,192 tokens a device): 66.60 s a step
    assert row4["measured_step_s"] == pytest.approx(8192 / 123)
    assert row4["mfu_convention"] == "attention in full"
    assert (tmp_path / "tiering.png").stat().st_size > 10_000


def test_no_plots_writes_the_table_only(tmp_path):
    assert main(["validate", "--tiering", "--no-plots", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiering.csv"]


def test_the_figure_draws_each_rows_band_and_errors(results):
    """A bar per row from 0 to its MFU's step over its tokens/s step - 1 (row 4: 60.77 / 66.60 - 1 =
    -8.75 %), the fit's error and the leave-one-model-out error as points, in %."""
    fig = tiering_figure(results, "my-cal")
    (ax,) = fig.axes
    bars = [p for p in ax.patches if p.get_height() == 0.5]
    assert len(bars) == 8
    assert bars[3].get_width() == pytest.approx(60.77 / 66.60 * 100 - 100, abs=0.02)
    fit, lomo = _points(ax)
    assert [round(x, 6) for x, _ in fit] == [round(100 * r.error, 6) for r in results]
    assert [round(x, 6) for x, _ in lomo] == [round(100 * r.lomo_error, 6) for r in results]
    assert "my-cal" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["±20%", "±10%", "fit", "leave-one-model-out", "measured band (tokens/s to MFU)"]
    # every point inside the axes
    lo, hi = ax.get_xlim()
    assert all(lo < x < hi for x, _ in fit + lomo)


def _points(ax):
    """The fit's and the leave-one-model-out points, in row order (filled, then hollow markers)."""
    fit, lomo = [], []
    for c in ax.collections:
        face = c.get_facecolors()
        if len(c.get_offsets()) != 1 or len(face) == 0:
            continue
        (x, y), = c.get_offsets().tolist()
        (lomo if math.isclose(face[0][0], 1.0) and math.isclose(face[0][1], 1.0) else fit).append((x, y))
    return sorted(fit, key=lambda p: p[1]), sorted(lomo, key=lambda p: p[1])
