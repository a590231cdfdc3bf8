"""Sweeps share work (issue 34): points that differ only in scalars (link bandwidth, batch)
reuse the loaded workloads and slices, the optimizer analyses, the sharding plans, the update
work and the collective times of the points before them (wus_sim/inputs/memo.py and the
collectives' memo). Checked here: every row of a sweep is the same, to the last bit, as the
point run alone with no memo at all (collective caches cleared before it, the memos off);
and the memos are hit.
"""

import json

from wus_sim.collectives import clear_caches
from wus_sim.experiments.records import simulate_point
from wus_sim.experiments.spec import parse_experiment
from wus_sim.inputs.memo import clear_memos, memos_off
from wus_sim.training import planner

SWEEP = {
    "name": "shared_work",
    "workloads": ["resnet50", "transformer-big"],
    "topologies": ["tpu-v3-32", "tpu-v3-128"],
    "optimizers": ["adam", "lars"],
    "strategies": ["replicated", "sharded"],
    "sweep": {"link_GBps": [35, 70, 140], "per_replica_batch": [2, 8]},
    "plots": [],
}


def _rows(point):
    # NaN-aware, bit-exact comparison: JSON keeps every float's repr
    return json.dumps(simulate_point(point), sort_keys=True, default=str)


def test_a_sweep_gives_the_rows_of_its_points_run_alone():
    points = parse_experiment(dict(SWEEP)).points()
    assert len(points) == 48
    clear_memos()
    clear_caches()
    shared = [_rows(p) for p in points]  # in sweep order: later points reuse earlier work
    with memos_off():
        for p, row in zip(points, shared):
            clear_caches()
            assert _rows(p) == row, p


def test_points_that_differ_in_link_bandwidth_share_one_plan():
    clear_memos()
    seen = []
    real = planner._plan

    def spy(*args):
        seen.append(args[0].name)
        return real(*args)

    planner._plan = spy
    try:
        for bw in (35, 70, 140):
            for batch in (2, 8):
                simulate_point({"workload": "resnet50", "topology": "tpu-v3-32", "optimizer": "adam",
                                "link_GBps": bw, "per_replica_batch": batch})
    finally:
        planner._plan = real
    assert seen == ["resnet50"]  # planned once for the six points
