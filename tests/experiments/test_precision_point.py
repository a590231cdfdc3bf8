"""The points keys ``quantization`` and ``remat: selective`` reach a results row, and a bad value
is a one-line error naming the key."""

import pytest

from wus_sim.experiments.records import simulate_point
from wus_sim.inputs.errors import ConfigError

POINT = dict(workload="bert-large", topology="tpu-v5p-8", strategy="sharded", per_replica_batch=8)
"""8 sequences a replica: at 2 the int8 operands' quantize passes cost more than the int8 matmuls save."""


def test_quantization_and_selective_remat_are_columns():
    base = simulate_point(POINT)[0]
    int8 = simulate_point({**POINT, "quantization": "int8", "remat": "selective"})[0]
    assert (base["quantization"], base["remat"]) == ("none", "none")
    assert (int8["quantization"], int8["remat"]) == ("int8", "selective")
    assert int8["peak_int8_TOPs"] == 918 and base["peak_TFLOPs"] == 459
    assert int8["fwd_s"] < base["fwd_s"]                           # weight matmuls at twice the peak
    assert int8["mem_activations_bytes"] < base["mem_activations_bytes"]  # 20 of 74 B per element kept
    assert not int8["inside_validated_range"]


@pytest.mark.parametrize("key, value", [("quantization", "int4"), ("remat", "minimal")])
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ConfigError, match=f"{key}: .*must be one of") as err:
        simulate_point({**POINT, key: value})
    assert "\n" not in str(err.value)


def test_int8_on_a_chip_without_an_int8_peak_names_the_chip():
    with pytest.raises(ConfigError, match="chip tpu-v3 gives none"):
        simulate_point({**POINT, "topology": "tpu-v3-8", "quantization": "int8"})


def test_an_experiment_sweeps_quantization_and_remat():
    from wus_sim.experiments.spec import parse_experiment

    exp = parse_experiment({"name": "precision", "workloads": ["bert-large"], "topologies": ["tpu-v5p-8"],
                            "strategies": ["sharded"], "base": {"per_replica_batch": 2},
                            "sweep": {"quantization": ["none", "int8"], "remat": ["none", "selective"]}})
    points = list(exp.points())
    assert sorted((p["quantization"], p["remat"]) for p in points) == [
        ("int8", "none"), ("int8", "selective"), ("none", "none"), ("none", "selective")]
    with pytest.raises(ConfigError, match="quantization"):
        parse_experiment({"name": "bad", "workloads": ["bert-large"], "topologies": ["tpu-v5p-8"],
                          "sweep": {"quantization": ["int4"]}})
