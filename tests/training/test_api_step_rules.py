"""The Python API's step entry points apply the point rules (issue 27, item 8): a value the
command line or an experiment file would refuse is the same one-line ConfigError here."""

import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.training.step import StepOptions, simulate_strategies


@pytest.mark.parametrize("kw, key", [
    ({"per_replica_batch": 1.5}, "per_replica_batch"),
    ({"per_replica_batch": True}, "per_replica_batch"),
    ({"global_batch": 2 ** 40}, "global_batch"),
    ({"strategies": "sharded"}, "strategies"),
])
def test_simulate_strategies_refuses_what_a_point_would(kw, key):
    with pytest.raises(ConfigError) as exc:
        simulate_strategies("resnet50", "tpu-v3-32", **kw)
    assert exc.value.key_path == key and "\n" not in str(exc.value)


@pytest.mark.parametrize("workload", [None, 5, 1.5])
def test_a_workload_that_is_no_workload_is_one_error(workload):
    with pytest.raises(ConfigError, match="must be a workload name"):
        simulate_strategies(workload, "tpu-v3-32")


@pytest.mark.parametrize("value", [-1, 0, 1.5, True, "25MiB", 2 ** 41 + 1])
def test_bucket_bytes_is_a_whole_number_of_bytes_within_the_point_rule(value):
    with pytest.raises(ConfigError, match="bucket_bytes"):
        StepOptions(bucket_bytes=value)


def test_bucket_bytes_at_its_ends_is_accepted():
    assert StepOptions(bucket_bytes=1).bucket_bytes == 1
    assert StepOptions(bucket_bytes=2 ** 40).bucket_bytes == 2 ** 40
