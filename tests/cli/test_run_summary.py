"""The table `wus-sim run` prints: one line per point shown, then how many more there are."""

import pandas as pd
import pytest

from wus_sim.cli.run import summary_table


def _frame(num_points, *, unfit=()):
    """Two rows a point (replicated 10 + i ms, sharded 5 + i ms); points in *unfit*: replicated
    does not fit, so the sharded row has no speedup, only the one if replicated fit."""
    rows = []
    for i in range(num_points):
        rep_ok = i not in unfit
        rows.append({"point_index": i, "workload": "resnet50", "topology": "tpu-v3-32", "link_GBps": 10.0 + i,
                     "strategy": "replicated", "status": "ok" if rep_ok else "infeasible",
                     "step_time_s": (10 + i) * 1e-3 if rep_ok else float("nan"), "speedup": float("nan"),
                     "speedup_if_replicated_fit": float("nan")})
        rows.append({"point_index": i, "workload": "resnet50", "topology": "tpu-v3-32", "link_GBps": 10.0 + i,
                     "strategy": "sharded", "status": "ok", "step_time_s": (5 + i) * 1e-3,
                     "speedup": (10 + i) / (5 + i) if rep_ok else float("nan"),
                     "speedup_if_replicated_fit": (10 + i) / (5 + i)})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # rows in completion order, not point order


@pytest.mark.parametrize("num_points, max_rows", [(1, 40), (40, 40), (45, 40), (1000, 7)])
def test_the_first_points_are_shown_then_a_count_of_the_rest(num_points, max_rows):
    text = summary_table(_frame(num_points), ["link_GBps"], max_rows=max_rows)
    lines = text.splitlines()
    shown = min(num_points, max_rows)
    body = lines[1:1 + shown]
    assert len(body) == shown
    # point i: link 10 + i GB/s, replicated 10 + i ms, sharded 5 + i ms, speedup (10 + i) / (5 + i)
    for i, line in enumerate(body):
        assert line.split() == [f"{10 + i:g}", f"{10 + i:.3f}", f"{5 + i:.3f}", f"{(10 + i) / (5 + i):.3f}"]
    if num_points > max_rows:
        assert lines[-1] == f"... {num_points - max_rows} more points in results.csv"
    else:
        assert len(lines) == 1 + shown


def test_a_shown_point_whose_replicated_does_not_fit_is_marked_and_explained():
    text = summary_table(_frame(50, unfit={3}), ["link_GBps"])
    line = text.splitlines()[1 + 3]
    assert line.split()[1] == "infeasible" and line.split()[-1] == f"{13 / 8:.3f}*"
    assert "replicated does not fit in HBM" in text


def test_no_note_when_no_shown_point_is_marked():
    assert "does not fit" not in summary_table(_frame(50, unfit={45}), ["link_GBps"])
