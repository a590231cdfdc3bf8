"""One table of point parameters: the defaults and rules of StepOptions, of `wus-sim step`'s
options and of experiment points are read from wus_sim.training.parameters.params.POINT_KEYS, not restated."""

import dataclasses

import pytest

from wus_sim.cli import build_parser
from wus_sim.inputs.errors import ConfigError
from wus_sim.training.parameters.params import POINT_KEYS, complete_point
from wus_sim.training.step import StepOptions

STEP_FIELDS = [f.name for f in dataclasses.fields(StepOptions) if f.name in POINT_KEYS]


def test_step_options_take_every_point_parameter_default_from_the_table():
    assert len(STEP_FIELDS) >= 10
    options = StepOptions()
    for name in STEP_FIELDS:
        assert getattr(options, name) == POINT_KEYS[name].default, name


def test_step_command_defaults_are_the_table_defaults():
    args = build_parser().parse_args(["step", "resnet50", "--topology", "tpu-v3-32"])
    shared = [name for name in vars(args) if name in POINT_KEYS and name not in ("workload", "topology")]
    assert {"strategy", "algorithm", "routing", "steps", "gather_prefetch", "bn_group_replicas",
            "overlap_grad_reduce", "overlap_all_gather", "shard_across_slices"} <= set(shared)
    for name in shared:
        assert getattr(args, name) == POINT_KEYS[name].default, name
    collective = build_parser().parse_args(["collective", "torus:4x4", "--op", "all-reduce", "--algorithm", "2d",
                                            "--size", "1MiB"])
    assert collective.routing == POINT_KEYS["routing"].default


def test_validation_runs_the_step_defaults():
    from wus_sim.validation.simulate import NETWORK_DEFAULTS

    assert all(value == POINT_KEYS[key].default for key, value in NETWORK_DEFAULTS.items())


def test_experiment_points_are_completed_with_the_table_defaults():
    point = complete_point({"workload": "resnet50", "topology": "tpu-v3-32"})
    for name, param in POINT_KEYS.items():
        if name not in ("workload", "topology"):
            assert point[name] == param.default, name


@pytest.mark.parametrize("name,bad", [("steps", 1), ("gather_prefetch", -1), ("bn_group_replicas", 0),
                                      ("keep_gathered_weights", "yes"), ("overlap_grad_reduce", 1)])
def test_step_options_apply_the_table_rules(name, bad):
    with pytest.raises(ConfigError) as exc:
        StepOptions(**{name: bad})
    assert exc.value.key_path == name and POINT_KEYS[name].rule() in str(exc.value)


@pytest.mark.parametrize("point,where,rule", [
    ({"workload": "ncf", "topology": "tpu-v3-32", "per_replica_bach": 8}, "per_replica_bach",
     "is not a point parameter"),
    ({"workload": "ncf"}, "topology", "is required"),
    ({"topology": "tpu-v3-32", "workload": None}, "workload", "is required"),
])
def test_simulate_point_refuses_unknown_and_missing_keys(point, where, rule):
    """The API's simulate_point checks its keys as an experiment file's points are checked: a
    typo ran the default silently, and a missing topology was a bare KeyError."""
    from wus_sim.experiments.records import simulate_point

    with pytest.raises(ConfigError) as err:
        simulate_point(point)
    assert str(err.value).startswith(f"{where}: {rule}")


def test_a_value_checked_again_gives_what_a_first_check_gives():
    """check_param keeps the values that passed (a sweep checks the same few values at every
    point): a kept value comes back as checked, of the same type; a bad one raises every time;
    -0.0 stays -0.0 (it equals 0.0); a numpy scalar comes back as the Python value."""
    import math

    import numpy as np
    import pytest

    from wus_sim.inputs.errors import ConfigError
    from wus_sim.training.parameters.params import check_point_value

    for _ in range(3):
        assert check_point_value("per_replica_batch", 16.0) == 16 and type(check_point_value("per_replica_batch", 16.0)) is int
        assert check_point_value("link_GBps", 100) == 100.0 and type(check_point_value("link_GBps", 100)) is float
        assert type(check_point_value("link_GBps", np.float64(50))) is float
        assert math.copysign(1, check_point_value("hop_latency_us", 0.0)) == 1
        assert math.copysign(1, check_point_value("hop_latency_us", -0.0)) == -1
        for bad in (1.5, -3, True, "8"):
            with pytest.raises(ConfigError):
                check_point_value("per_replica_batch", bad)
        assert check_point_value("overlap_grad_reduce", True) is True
        with pytest.raises(ConfigError):
            check_point_value("overlap_grad_reduce", 1)
