"""The public Python API applies the command line's rules: a bad value is the project's own error
(ConfigError, a WusError) with the same one-line message, naming the parameter; never a
TypeError, OverflowError or AttributeError from inside, never a hang.

Expected outcomes come from the declared rules (POINT_KEYS and the README), not from the code
under test: e.g. per_replica_batch is a whole number in 1..2^24, link_GBps a number in (0, 10^6].
"""

import math
import os

import pytest

import wus_sim
from wus_sim import ConfigError, WusError

POINT = {"workload": "ncf", "topology": "tpu-v3-8"}

BAD_POINT_VALUES = [
    ("per_replica_batch", 1.5), ("per_replica_batch", "8"), ("per_replica_batch", 0), ("per_replica_batch", True),
    ("global_batch", 2**40), ("global_batch", -1),
    ("link_GBps", True), ("link_GBps", "50"), ("link_GBps", math.inf), ("link_GBps", 10**400),
    ("link_GBps", math.nan), ("link_GBps", 0),
    ("hop_latency_us", -1), ("hop_latency_us", [1]),
    ("workload", 5), ("workload", None), ("workload", ""), ("topology", 5), ("topology", ["tpu-v3-8"]),
    ("optimizer", 3.5), ("calibration", 5), ("strategy", ["both"]), ("strategy", "fastest"),
    ("steps", 1), ("steps", 10**6), ("bucket_MiB", -1), ("seed", -1), ("wraparound", "yes"),
    ("bn_group_replicas", 10**31), ("mxu_efficiency", 2), ("grad_dtype", 16),
]


@pytest.mark.parametrize("key, value", BAD_POINT_VALUES, ids=lambda v: repr(v)[:30])
def test_simulate_point_refuses_what_an_experiment_file_would(key, value):
    with pytest.raises(ConfigError) as err:
        wus_sim.simulate_point({**POINT, key: value})
    message = str(err.value)
    assert key in message and "\n" not in message and len(message) < 600, message


@pytest.mark.parametrize("point", [5, None, "ncf", [("workload", "ncf")], {**POINT, "per_replica_bach": 8}])
def test_simulate_point_refuses_a_point_that_is_not_one(point):
    with pytest.raises(ConfigError):
        wus_sim.simulate_point(point)


def test_simulate_point_still_takes_a_whole_float_as_yaml_does():
    """2.0 steps is 2 steps in YAML (the rule is 'a whole number'), and so in Python."""
    rows = wus_sim.simulate_point({**POINT, "steps": 2.0, "strategy": "replicated"})
    assert rows[0]["steps"] == 2 and isinstance(rows[0]["steps"], int)


@pytest.mark.parametrize("kwargs", [dict(hop_latency_us="1"), dict(link_GBps=True), dict(link_GBps=-1),
                                    dict(link_GBps=[1, "a"]), dict(link_GBps=math.inf), dict(cores_per_chip=1.5),
                                    dict(cores_per_chip=10**400), dict(cores_per_chip=65), dict(wraparound="no"),
                                    dict(wraparound=[True, "no"])])
def test_load_topology_overrides_have_the_point_rules(kwargs):
    with pytest.raises(ConfigError) as err:
        wus_sim.load_topology("tpu-v3-8", **kwargs)
    assert next(iter(kwargs)) in str(err.value)
    with pytest.raises(ConfigError):  # an inline slice uses two of them to build itself
        wus_sim.load_topology("torus:4x4", **kwargs)


def test_load_topology_override_ranges_are_the_point_parameters():
    from wus_sim.hardware.topology_files import OVERRIDE_RANGES
    from wus_sim.training.parameters.params import POINT_KEYS

    for key, (_, maximum, _) in OVERRIDE_RANGES.items():
        assert POINT_KEYS[key].maximum == maximum
    topo = wus_sim.load_topology("tpu-v3-8", link_GBps=1e6, hop_latency_us=0, cores_per_chip=64)
    assert topo.cores_per_chip == 64


@pytest.mark.parametrize("spec", [5, None, 2.5, ["tpu-v3-8"]])
def test_load_topology_refuses_a_spec_that_is_not_a_name(spec):
    with pytest.raises(ConfigError, match="topology"):
        wus_sim.load_topology(spec)


@pytest.fixture
def special(tmp_path):
    os.mkfifo(tmp_path / "results.csv")
    (tmp_path / "binary.parquet").write_bytes(bytes(range(256)))
    (tmp_path / "text.csv").write_text("")
    return tmp_path


@pytest.mark.parametrize("name", ["/dev/zero", "results.csv", "binary.parquet", "text.csv", "missing.csv", "."])
def test_read_results_of_what_is_not_results_is_one_error_at_once(special, name):
    path = name if name.startswith("/") else special / name
    with pytest.raises(ConfigError) as err:
        wus_sim.read_results(path)
    assert "\n" not in str(err.value)


def test_read_results_refuses_a_path_that_is_not_one():
    with pytest.raises(ConfigError):
        wus_sim.read_results(5)


def test_plot_validation_of_no_rows_is_an_error_not_min_of_nothing(tmp_path):
    with pytest.raises(ConfigError, match="rows"):
        wus_sim.plot_validation([], tmp_path / "v.png")
    with pytest.raises(ConfigError, match="rows"):
        wus_sim.plot_validation([5], tmp_path / "v.png")


def test_run_experiment_and_draw_figure_refuse_what_they_cannot_use(tmp_path):
    with pytest.raises(ConfigError, match="experiment"):
        wus_sim.run_experiment(5, tmp_path / "o")
    exp = wus_sim.load_experiment("quickstart")
    with pytest.raises(ConfigError, match="out_dir"):
        wus_sim.run_experiment(exp, 5)
    plot = wus_sim.default_plots(exp)[0]
    with pytest.raises(ConfigError, match="DataFrame"):
        wus_sim.draw_figure(plot, 5)
    with pytest.raises(ConfigError, match="plot"):
        wus_sim.draw_figure("speedup", 5)


def test_every_api_error_is_a_wus_error():
    """The contract the README states: user errors of the API raise WusError subclasses."""
    assert issubclass(ConfigError, WusError)
