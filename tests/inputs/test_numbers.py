"""Every number of every input format through a declared range: an integer past float range, a
boolean or text where a number belongs, an infinity, a value of the wrong type is one
ConfigError naming the file, the key path and the rule, never an OverflowError or TypeError
from deeper inside; every excerpt of input in a message is at most 60 characters.

The files are the shipped ones with one value replaced (written out as YAML text by hand,
since PyYAML cannot dump a 400-digit integer)."""

from pathlib import Path
import re

import pytest
import yaml

from wus_sim.inputs.errors import ConfigError, WusError

REPO = Path(__file__).resolve().parents[2]
HUGE = "1" + "0" * 400
"""A YAML integer far past float range (10^400)."""


def _edit(tmp_path, source, path, text):
    """*source* with the value at key *path* replaced by the YAML text *text*."""
    doc = yaml.safe_load(source.read_text())
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "@@VALUE@@"
    out = tmp_path / source.name
    out.write_text(yaml.safe_dump(doc, width=10**6, sort_keys=False).replace("'@@VALUE@@'", text))
    return out


def _loaders():
    from wus_sim.hardware.topology_files import load_chips, load_topology
    from wus_sim.model.calibration import load_calibration
    from wus_sim.model.workload_files import load_workload
    from wus_sim.optimizers import load_optimizer

    return {"workload": load_workload, "chips": load_chips, "topology": load_topology,
            "calibration": lambda p: load_calibration(str(p)), "optimizer": load_optimizer}


SOURCES = {
    "workload": REPO / "wus_sim/data/workloads/ncf.yaml",
    "chips": REPO / "topologies/chips.yaml",
    "topology": REPO / "topologies/tpu-v3-32.yaml",
    "calibration": REPO / "wus_sim/data/calibration/default.yaml",
    "optimizer": REPO / "wus_sim/data/optimizers/adam.yaml",
}

CASES = [
    ("workload", ("params",), HUGE),
    ("workload", ("activation_memory", 0, "elements"), HUGE),
    ("workload", ("fwd_flops", "units_per_example"), HUGE),
    ("workload", ("fwd_flops", "per_unit"), ".inf"),
    ("workload", ("fwd_flops", "per_unit"), "true"),
    ("workload", ("tensors", 0, 1), "[" + ", ".join(["10"] * 2500) + "]"),
    ("workload", ("tensors", 0, 1), "[" + ", ".join(["100000"] * 8) + "]"),
    ("workload", ("default_per_replica_batch", ), HUGE),
    ("chips", ("tpu-v3", "cores_per_chip"), HUGE),
    ("chips", ("tpu-v3", "link_GBps"), ".inf"),
    ("chips", ("tpu-v3", "hbm_GiB"), "abc"),
    ("chips", ("tpu-v3", "description"), "[1, 2]"),
    ("topology", ("cores_per_chip",), HUGE),
    ("topology", ("hop_latency_us",), ".nan"),
    ("topology", ("description",), "{a: 1}"),
    ("calibration", ("params", "mxu_efficiency"), "true"),
    ("calibration", ("params", "mxu_efficiency"), HUGE),
    ("calibration", ("params", "step_overhead_s"), ".inf"),
    ("calibration", ("params", "elementwise_fwd_bytes"), "abc"),
    ("calibration", ("provenance", "validation", "held_out_median_abs"), ".inf"),
    ("calibration", ("provenance", "validation", "held_out_rows"), HUGE),
    ("optimizer", ("hyper", "lr"), HUGE),
    ("optimizer", ("hyper", "lr"), ".inf"),
]


@pytest.mark.parametrize("kind, path, text", CASES, ids=lambda c: str(c)[:40])
def test_a_number_outside_its_range_is_one_error_naming_file_and_key(tmp_path, kind, path, text):
    bad = _edit(tmp_path, SOURCES[kind], path, text)
    with pytest.raises(ConfigError) as err:
        _loaders()[kind](bad)
    message = str(err.value)
    assert "\n" not in message and len(message) < 700, message
    assert bad.name in message, message
    # the key path of the bad value is named (a tensor row by its index)
    assert str(path[-1] if kind != "workload" or path[0] != "tensors" else "tensors[0]") in message, message
    assert _longest_quoted_run(message) <= 60, message


def test_a_chip_named_null_is_an_error_not_a_TypeError(tmp_path):
    from wus_sim.hardware.topology_files import load_chips

    bad = tmp_path / "chips.yaml"
    bad.write_text(SOURCES["chips"].read_text() + "\n~:\n  cores_per_chip: 1\n")
    with pytest.raises(ConfigError, match="chip name"):
        load_chips(bad)


@pytest.mark.parametrize("kwargs", [dict(mxu_efficiency=True), dict(mxu_efficiency=10**400),
                                    dict(mxu_efficiency=float("nan")), dict(vector_flops_per_replica="abc"),
                                    dict(step_overhead_s=float("inf")), dict(backward_flops_ratio="2"),
                                    dict(layer_split=["flops"]), dict(op_overhead_s=None)])
def test_compute_params_refuse_what_a_file_would_refuse(kwargs):
    from wus_sim.model.compute import ComputeParams

    with pytest.raises(ConfigError) as err:
        ComputeParams(**kwargs)
    assert next(iter(kwargs)) in str(err.value)


def test_bn_group_replicas_has_the_same_maximum_in_yaml_and_on_the_command_line():
    from wus_sim.cli import main
    from wus_sim.inputs.limits import MAX_REPLICAS
    from wus_sim.training.parameters.params import check_point_value

    assert check_point_value("bn_group_replicas", MAX_REPLICAS) == MAX_REPLICAS
    with pytest.raises(ConfigError, match="<= 131072"):
        check_point_value("bn_group_replicas", 10**31, file="x.yaml", key_path="base.bn_group_replicas")
    assert main(["step", "resnet50", "-t", "tpu-v3-8", "--bn-group-replicas", str(10**31)]) == 2


def _longest_quoted_run(message):
    """Longest run of one repeated character: the test inputs are runs ('aaaa...'), so this is
    the longest excerpt of them in the message."""
    return max((len(m.group(0)) for m in re.finditer(r"(.)\1*", message)), default=0)


@pytest.mark.parametrize("make", [
    lambda d: d.update({"k" * 500: 1}),                                   # an unknown key
    lambda d: d.update({"program": ["w = w - " + "f" * 500 + "(g)"]}),     # an unknown function
    lambda d: d.update({"program": ["w = w - " + "v" * 500 + " * g"]}),    # an undefined name
])
def test_excerpts_of_input_are_at_most_60_characters(tmp_path, make):
    from wus_sim.optimizers import load_optimizer

    doc = yaml.safe_load(SOURCES["optimizer"].read_text())
    make(doc)
    path = tmp_path / "o.yaml"
    path.write_text(yaml.safe_dump(doc, width=10**6))
    with pytest.raises(WusError) as err:
        load_optimizer(str(path))
    assert _longest_quoted_run(str(err.value)) <= 60, str(err.value)


def test_an_unknown_key_of_an_experiment_is_cut_to_an_excerpt(tmp_path):
    from wus_sim.experiments.spec import load_experiment

    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({"workloads": ["ncf"], "topologies": ["tpu-v3-8"], "q" * 1000: 1}))
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert _longest_quoted_run(str(err.value)) <= 60 and "not a known key" in str(err.value)
