"""Sweeps share work (issue 34): points that differ only in scalars (link bandwidth, batch)
reuse the loaded workloads and slices, the optimizer analyses, the sharding plans, the update
work and the collective times of the points before them (wus_sim/inputs/memo.py and the
collectives' memo). Checked here: every row of a sweep is the same, to the last bit, as the
point run alone with no memo at all (collective caches cleared before it, the memos off);
and the memos are hit.
"""

import json

import pytest

from wus_sim.collectives import clear_caches
from wus_sim.experiments.records import simulate_point
from wus_sim.experiments.spec import parse_experiment
from wus_sim.inputs.memo import clear_memos, files_fixed, memos_off
from wus_sim.training.update import planner

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


# spatially partitioned replicas exchange halos over the links: their layer times depend on the
# link bandwidth and hop latency, so points that differ in those share nothing computed from them
SPATIAL = {
    "name": "shared_work_spatial",
    "workloads": ["ssd-resnet34"],
    "topologies": ["tpu-v3-32"],
    "optimizers": ["momentum"],
    "sweep": {"spatial_ways": [1, 4], "hop_latency_us": [1, 3], "link_GBps": [35, 140], "per_replica_batch": [2, 8]},
    "plots": [],
}


@pytest.mark.parametrize("sweep, count", [(SWEEP, 48), (SPATIAL, 16)])
def test_a_sweep_gives_the_rows_of_its_points_run_alone(sweep, count):
    points = parse_experiment(dict(sweep)).points()
    assert len(points) == count
    clear_memos()
    clear_caches()
    with files_fixed():  # as the runner runs a chunk: files looked up once
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


def test_a_run_sees_its_input_files_as_they_were_when_its_chunk_started(tmp_path, monkeypatch):
    """Inside files_fixed (a chunk of a sweep) a named slice is looked up once: an edit made then
    is not half-seen by the chunk's later points; the next chunk (or run) reads the edited file."""
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(tmp_path))
    slice_file = tmp_path / "my-slice.yaml"

    def write(chips):
        slice_file.write_text(f"name: my-slice\nchip: tpu-v3\nchips_per_axis: [{chips}, 4]\n"
                              "wraparound: [false, false]\n")

    def cores():
        row, = simulate_point({"workload": "resnet50", "topology": "my-slice", "strategy": "sharded"})
        return row["cores"]

    write(4)
    with files_fixed():
        assert cores() == 32
        write(8)
        assert cores() == 32  # the chunk's slice is the file as it was
    assert cores() == 64  # outside (the next chunk): the edited file
    with files_fixed():
        assert cores() == 64
        slice_file.unlink()
        assert cores() == 64
    try:
        cores()
    except Exception as exc:  # gone: an unknown name again
        assert "my-slice" in str(exc)
    else:
        raise AssertionError("a deleted slice file still loaded outside files_fixed")
