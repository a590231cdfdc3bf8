"""The results frame is assembled from the journal's rows as they are, the run's and slice's
columns set whole (assemble.results_frame): the frame must be the one the row-by-row assembly
(a new dict per row: run columns, the row, slice columns where it has none) gives."""

import math

import pandas as pd
import pytest
from hypothesis import example, given, settings, strategies as st

from wus_sim.experiments.assemble import _full_rows, results_frame
from wus_sim.experiments.records import simulate_point
from wus_sim.experiments.results import to_frame
from wus_sim.experiments.runner import _slice_columns


def _row_by_row(name, hashes, points, done):
    return to_frame(_full_rows(name, hashes, points, [done[h] for h in hashes], _slice_columns))


@pytest.fixture(scope="module")
def simulated():
    """Real rows: two points of two slices, one point whose parameters are wrong (error rows
    carry no slice columns), one whose topology does not load."""
    points = [{"workload": "resnet50", "topology": "tpu-v3-32", "per_replica_batch": b, "link_GBps": 50.0}
              for b in (16, 32)]
    points.append({"workload": "transformer-big", "topology": "tpu-v3-128"})
    done, hashes = {}, []
    for i, p in enumerate(points):
        h = f"h{i}"
        done[h] = {"rows": simulate_point(p), "wall_s": 0.25 * i}
        hashes.append(h)
    for h, p, why in (("e1", {"workload": "resnet50", "topology": "tpu-v3-32"}, "bad batch"),
                      ("e2", {"workload": "resnet50", "topology": "no-such-slice"}, "no slice")):
        done[h] = {"rows": [{"strategy": s, "status": "error", "error": why} for s in ("replicated", "sharded")],
                   "wall_s": 0.0}
        hashes.append(h)
        points.append(p)
    return hashes, points, done


def test_real_rows_give_the_row_by_row_frame(simulated):
    hashes, points, done = simulated
    fast = results_frame("exp", hashes, points, done, _slice_columns)
    pd.testing.assert_frame_equal(fast, _row_by_row("exp", hashes, points, done), check_exact=True)
    # the error rows of the loadable slice got its columns; the other's stay empty
    assert fast.loc[fast["point_hash"] == "e1", "chips"].tolist() == [16, 16]
    assert fast.loc[fast["point_hash"] == "e2", "chips"].isna().all()
    assert fast["point_index"].tolist() == [i for i in range(len(hashes)) for _ in range(2)]


cells = st.one_of(st.none(), st.integers(0, 99), st.floats(-1e6, 1e6) | st.just(math.nan),
                  st.text(max_size=4), st.booleans())


@st.composite
def journals(draw):
    """``(hashes, points, done)``: rows of any shape: slice keys present, null or missing; a run
    key in a row (its value wins); points whose slice loads and points whose slice does not."""
    keys = ["strategy", "status", "step_time_s", "chips", "wrap", "my_extra", "wall_s", "point_index"]
    n_points = draw(st.integers(1, 5))
    points = [{"workload": "resnet50", "topology": draw(st.sampled_from(["tpu-v3-32", "nowhere"]))}
              for _ in range(n_points)]
    hashes = [f"h{i}" for i in range(n_points)]
    done = {}
    for h in hashes:
        rows = []
        for _ in range(draw(st.integers(1, 3))):
            chosen = draw(st.lists(st.sampled_from(keys), unique=True))
            row = {k: draw(cells) for k in chosen}
            row["status"] = "ok"
            rows.append(row)
        done[h] = {"rows": rows, "wall_s": draw(st.floats(0, 5))}
    return hashes, points, done


_V3_32 = {"workload": "resnet50", "topology": "tpu-v3-32"}


@settings(max_examples=60, deadline=None)
@given(journal=journals())
# an int slice cell beside a row the slice fills: pandas reads [0, missing] as floats ('0.0' as
# text) but [0, 'F,F'] as they are ('0'); the fills once went into the column typed the first way
@example(journal=(["h0"], [_V3_32], {"h0": {"rows": [{"wrap": 0, "status": "ok"}, {"status": "ok"}], "wall_s": 0.0}}))
def test_any_rows_give_the_row_by_row_frame(journal):
    hashes, points, done = journal
    try:
        expected = _row_by_row("exp", hashes, points, done)
    except (ValueError, TypeError, OverflowError) as exc:  # a column no frame can type ('INF' chips)
        with pytest.raises(type(exc)):  # the faster assembly refuses it alike
            results_frame("exp", hashes, points, done, _slice_columns)
        return
    pd.testing.assert_frame_equal(results_frame("exp", hashes, points, done, _slice_columns), expected,
                                  check_exact=True)
