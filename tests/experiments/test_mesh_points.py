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
