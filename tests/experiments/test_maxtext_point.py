"""The point key ``maxtext``: a MaxText run per experiment point, checked when the file is read,
swept like any point key, translated on the point's slice; and ``mesh: fsdp=-1`` in a point.
Expected rows worked out by hand (tpu-v5p-16: 8 chips, a MaxText device a chip)."""

import pytest

from wus_sim.experiments.records import simulate_point
from wus_sim.experiments.runner import run_experiment
from wus_sim.experiments.spec import parse_experiment
from wus_sim.inputs.errors import ConfigError
from wus_sim.training.parameters.params import check_point_value

WORDS = "model_name=llama3-8b max_target_length=8192 per_device_batch_size=2 ici_tensor_parallelism=2"
MAPPING = {"model_name": "llama3-8b", "max_target_length": 8192, "per_device_batch_size": 1,
           "remat_policy": "minimal"}


def test_the_value_is_kept_as_its_words_and_its_keys_checked():
    assert check_point_value("maxtext", MAPPING) == ("model_name=llama3-8b max_target_length=8192 "
                                                     "per_device_batch_size=1 remat_policy=minimal")
    assert check_point_value("maxtext", WORDS) == WORDS
    with pytest.raises(ConfigError, match="e.yaml: sweep.maxtext\\[1\\]: .*is not a key of MaxText's base.yml"):
        check_point_value("maxtext", {"per_device_batch": 1}, file="e.yaml", key_path="sweep.maxtext[1]")


def test_an_experiment_sweeps_two_maxtext_runs(tmp_path):
    exp = parse_experiment({"name": "mx", "topologies": ["tpu-v5p-16"], "strategies": "all",
                            "sweep": {"maxtext": [MAPPING, WORDS]}})
    assert exp.count() == 2  # a MaxText run names the model: no workloads key needed
    frame = run_experiment(exp, tmp_path, jobs=1).frame
    rows = {r["maxtext"]: r for r in frame.to_dict("records")}
    first, second = rows[check_point_value("maxtext", MAPPING)], rows[WORDS]
    for row in (first, second):
        assert row["status"] == "ok" and row["workload"] == "llama3-8b" and row["megacore"]
        assert row["optimizer"] == "adamw+clip"  # base.yml: AdamW, gradients clipped at 1.0
    assert (first["mesh"], first["global_batch"], first["remat_policy"]) == ("fsdp=8", 8, "minimal")   # 1 x 8
    assert (second["mesh"], second["global_batch"], second["remat_policy"]) == ("fsdp=4,tensor=2", 16, "full")


def test_a_point_key_beside_the_run_fills_what_it_leaves_at_base_ymls_default():
    point = {"topology": "tpu-v5p-16", "maxtext": MAPPING, "quantization": "int8", "strategy": "fully-sharded"}
    (row,) = simulate_point(point)
    assert row["quantization"] == "int8" and row["remat_policy"] == "minimal"
    with pytest.raises(ConfigError, match="remat_policy: full: contradicts remat_policy=minimal"):
        simulate_point({**point, "remat_policy": "full"})


def test_approximated_keys_need_maxtext_approximate():
    run = {**MAPPING, "weight_dtype": "bfloat16"}
    with pytest.raises(ConfigError, match="weight_dtype=bfloat16 \\(--maxtext-approximate"):
        simulate_point({"topology": "tpu-v5p-16", "maxtext": run})
    rows = simulate_point({"topology": "tpu-v5p-16", "maxtext": run, "maxtext_approximate": True})
    assert rows[0]["status"] == "ok"


def test_an_experiment_without_workload_or_maxtext_is_refused():
    with pytest.raises(ConfigError, match="needs a workload.*or a maxtext run's model_name"):
        parse_experiment({"topologies": ["tpu-v5p-16"]})


def test_a_point_mesh_of_minus_one_fills_the_slice():
    assert check_point_value("mesh", "tensor=2,fsdp=-1") == "fsdp=-1,tensor=2"
    base = {"workload": "llama3-8b", "topology": "tpu-v5p-16", "megacore": True, "global_batch": 8,
            "strategy": "fully-sharded"}
    (a,) = simulate_point({**base, "mesh": "fsdp=-1,tensor=2"})
    (b,) = simulate_point({**base, "mesh": "fsdp=4,tensor=2"})
    assert a["step_time_s"] == b["step_time_s"] and a["status"] == "ok"


def test_a_hybrid_ring_runs_as_maxtext_lays_it():
    # the point's own MaxText run sets the layout (no point key of its own): the same step as
    # simulate_mesh with custom_mesh, and not the one JAX's layout of the mesh gives
    from wus_sim.training.parallelism.mesh_step import simulate_mesh
    from wus_sim.training.step import StepOptions

    ring = {"model_name": "llama3-8b", "per_device_batch_size": 1, "ici_fsdp_parallelism": 64,
            "ici_tensor_parallelism": 4, "allow_split_physical_axes": True, "custom_mesh": "hybrid_ring_64x4"}
    (row,) = simulate_point({"topology": "tpu-v6e-256", "maxtext": ring})
    plain = {k: v for k, v in ring.items() if k != "custom_mesh"}
    (jax,) = simulate_point({"topology": "tpu-v6e-256", "maxtext": plain})
    assert row["mesh"] == jax["mesh"] == "fsdp=64,tensor=4"
    run = simulate_mesh("llama3-8b@2048", "tpu-v6e-256", "adamw+clip", ("replicated",), mesh="fsdp=64,tensor=4",
                        global_batch=256, options=StepOptions(remat_policy="full", custom_mesh="hybrid_ring_64x4"))
    assert run.mesh.layout.members("tensor") == [0, 1, 17, 16]
    (result,) = run.results.values()
    assert row["step_time_s"] == pytest.approx(result.step_time_s, rel=1e-12)
    assert row["step_time_s"] != pytest.approx(jax["step_time_s"], rel=1e-6)
