"""The point keys mesh and dcn_mesh: checked like every point key, swept, and in the rows."""

import pytest

from wus_sim.experiments.records import simulate_point
from wus_sim.inputs.errors import ConfigError
from wus_sim.training.parameters.params import check_point_value


def test_mesh_keys_normalise_text_and_mappings():
    assert check_point_value("mesh", {"tensor": 4, "fsdp": 2}) == "fsdp=2,tensor=4"
    assert check_point_value("mesh", "tensor=4, fsdp=2") == "fsdp=2,tensor=4"
    assert check_point_value("dcn_mesh", "data=4") == "data=4"
    with pytest.raises(ConfigError, match="unknown axis"):
        check_point_value("dcn_mesh", "tensor=2", file="e.yaml", key_path="base.dcn_mesh")


def test_a_mesh_point_over_two_slices():
    rows = simulate_point({"workload": "bert-large", "topology": "torus:2x2", "optimizer": "adam",
                           "mesh": {"fsdp": 2, "tensor": 2}, "dcn_mesh": "data=2", "strategy": "sharded",
                           "global_batch": 8})
    (row,) = rows
    assert row["status"] == "ok" and row["slices"] == 2 and row["replicas"] == 4  # 2 fsdp x 2 slices
    assert row["tensor_comm_s"] > 0 and row["fsdp_comm_s"] + row["data_comm_s"] == pytest.approx(
        row["exposed_comm_s"], abs=1e-12)
    with pytest.raises(ConfigError, match="slices is 3"):
        simulate_point({"workload": "bert-large", "topology": "torus:2x2", "dcn_mesh": "data=2", "slices": 3})


def test_an_expert_mesh_point_with_a_capacity_factor(tmp_path):
    """The toy MoE (8 experts) on 8 chips with expert=4 and capacity_factor 1.5: the row has
    expert_comm_s and the capacity factor it ran with; its all-to-alls move twice the bytes of a point
    at capacity_factor 0.75 and pay the same latencies: 1 MiB buffers at 1.0 on the 4-chip rings,
    (2 us + 7.9 us) / (2 us + 3.9 us) = 1.66 x its wait, over 1.5 x."""
    from make_workload import make_moe

    make_moe(tmp_path)
    point = {"workload": str(tmp_path / "moe-toy.yaml"), "topology": "torus:4x2", "mesh": {"expert": 4, "data": 2},
             "strategy": "fully-sharded", "global_batch": 2048}
    (row,) = simulate_point({**point, "capacity_factor": 1.5})
    (low,) = simulate_point({**point, "capacity_factor": 0.75})
    assert row["status"] == "ok" and row["capacity_factor"] == 1.5
    assert row["expert_comm_s"] > 1.5 * low["expert_comm_s"] > 0
    assert check_point_value("mesh", "expert=4,data=2") == "data=2,expert=4"
    assert check_point_value("dcn_mesh", {"expert": 2}) == "expert=2"
    with pytest.raises(ConfigError, match="capacity_factor"):
        check_point_value("capacity_factor", 65)


def test_a_context_mesh_point(tmp_path):
    """The tiny Llama of the context axis's tests (2 layers, 2 KV heads of 64, 4,096 tokens) on 8 chips
    with data=2,context=4: the row's context_comm_s is the 6 ring collectives of 2 MiB on the 4-chip
    rings, 6 x 3 (1 us + 2 MiB / (8 x 100 GB/s)) (tests/training/parallelism/test_context_axis.py);
    the mesh text is canonical, in MaxText's axis order; context across slices is one line."""
    from make_workload import make_tiny_llama

    w = make_tiny_llama(tmp_path)
    (row,) = simulate_point({"workload": w.path, "topology": "torus:4x2", "mesh": {"context": 4, "data": 2},
                             "strategy": "fully-sharded", "global_batch": 2})
    assert row["status"] == "ok" and row["mesh"] == "data=2,context=4"
    assert row["context_comm_s"] == pytest.approx(6 * 3 * (1e-6 + 2 * 2**20 / (8 * 100e9)), rel=1e-12)
    with pytest.raises(ConfigError, match="not modelled"):
        check_point_value("dcn_mesh", {"context": 2})


def test_a_pipeline_mesh_point():
    """MaxText's default model (16 blocks) on 8 chips with 4 stages, GPipe and 8 microbatches: the row has
    the bubble, (P-1)/M = 3/8 of the stage's block time, and the permutes; 1F1B's bubble is the same,
    16 microbatches halve it; the keys read back as given."""
    point = {"workload": "default", "topology": "torus:2x4", "mesh": {"fsdp": 2, "pipeline": 4},
             "per_replica_batch": 16, "pipeline_schedule": "gpipe", "pipeline_microbatches": 8}
    (row,) = simulate_point(point)
    (one_f,) = simulate_point({**point, "pipeline_schedule": "1f1b"})
    (more,) = simulate_point({**point, "pipeline_microbatches": 16})
    assert row["status"] == "ok" and row["pipeline_schedule"] == "gpipe" and row["pipeline_microbatches"] == 8
    assert row["pipeline_bubble_s"] > 0 and row["pipeline_comm_s"] > 0
    assert one_f["pipeline_bubble_s"] == row["pipeline_bubble_s"]
    assert more["pipeline_bubble_s"] == pytest.approx(row["pipeline_bubble_s"] / 2, rel=1e-12)
    assert check_point_value("mesh", "pipeline=4,fsdp=2") == "pipeline=4,fsdp=2"
    assert check_point_value("dcn_mesh", {"pipeline": 2}) == "pipeline=2"
    with pytest.raises(ConfigError, match="pipeline_schedule"):
        check_point_value("pipeline_schedule", "zero-bubble")
