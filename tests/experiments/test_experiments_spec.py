"""Experiment YAML: strict validation (errors name file, key path and rule) and sweep expansion."""

import itertools
import json
import math
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import ConfigError
from wus_sim.experiments.spec import (
    POINT_KEYS, check_point_value, complete_point, load_experiment, parse_experiment, point_hash,
)

BASE = {"workloads": ["resnet50"], "topologies": ["tpu-v3-32"]}


def parse(extra, file="exp.yaml"):
    return parse_experiment({**BASE, **extra}, file=file)


def error_of(extra):
    with pytest.raises(ConfigError) as info:
        parse(extra)
    return str(info.value)


# ----------------------------------------------------------------- the table
def test_every_default_passes_its_own_rule():
    for key, param in POINT_KEYS.items():
        if param.required:
            continue
        assert check_point_value(key, param.default) == param.default, key


def test_required_keys_and_documentation():
    assert [k for k, p in POINT_KEYS.items() if p.required] == ["workload", "topology"]
    for key, param in POINT_KEYS.items():
        assert param.meaning and param.rule(), key
        # YAML keys carry the user's unit (style rule): a unit means a suffix in the name.
        if param.unit in ("GB/s", "us", "MiB"):
            assert key.endswith({"GB/s": "_GBps", "us": "_us", "MiB": "_MiB"}[param.unit])


def test_complete_point_fills_defaults_and_rejects_unknown_keys():
    point = complete_point({"workload": "resnet50", "topology": "tpu-v3-32"})
    assert list(point) == list(POINT_KEYS)
    assert point["strategy"] == "both" and point["algorithm"] == "2d"
    with pytest.raises(ConfigError, match="link_Gbps"):
        complete_point({"workload": "resnet50", "topology": "tpu-v3-32", "link_Gbps": 1})


@pytest.mark.parametrize("key, value, rule", [
    ("link_GBps", -5, ">= 0.001"),
    ("link_GBps", "fast", "a number"),
    ("link_GBps", True, "a number"),
    ("hop_latency_us", -1, ">= 0"),
    ("per_replica_batch", 2.5, "a whole number"),
    ("per_replica_batch", 0, ">= 1"),
    ("global_batch", "1k", "a whole number"),
    ("wraparound", "yes", "true/false"),
    ("wraparound", [True, 1], "true/false"),
    ("algorithm", "tree", "one of ring"),
    ("strategy", "half", "one of replicated"),
    ("grad_dtype", "fp16", "one of fp32, bf16"),
    ("mxu_efficiency", 1.5, "<= 1"),
    ("steps", 1, ">= 2"),
    ("overlap_all_gather", "no", "true or false"),
    ("bidirectional", 3, "true or false"),
    ("gather_prefetch", -1, ">= 0"),
    ("gather_prefetch", 1.5, "a whole number"),
    ("keep_gathered_weights", "yes", "true or false"),
    ("workload", None, "a workload name"),
])
def test_bad_values_name_file_key_path_value_and_rule(key, value, rule):
    message = error_of({"sweep": {key: [value]}} if key not in ("workload",) else {"workloads": [value]})
    assert message.startswith("exp.yaml: ")
    where = "workloads[0]" if key == "workload" else f"sweep.{key}[0]"
    assert where in message and rule in message


def test_bad_value_in_base_names_base_path():
    message = error_of({"base": {"link_GBps": 0}})
    assert "exp.yaml: base.link_GBps: 0 must be a number >= 0.001 and <= 1000000 (or null)" == message


def test_unknown_keys_are_errors_that_list_the_known_ones():
    assert "exp.yaml: sweeps: is not a known key here" in error_of({"sweeps": {}})
    message = error_of({"base": {"link_bw": 100}})
    assert "base.link_bw" in message and "link_GBps" in message
    assert "sweep.batch" in error_of({"sweep": {"batch": [1]}})


def test_unknown_names_list_known_ones():
    message = error_of({"topologies": ["tpu-v3-33"]})
    # a long list names each prefix once (inputs/errors.py, listed): tpu-v3-{...,2048,...}
    assert "topologies[0]" in message and "tpu-v3-32" in message and "2048," in message.split("tpu-v3-{")[1]
    assert "mesh:8x8" in error_of({"topologies": ["torus:8x"]})
    with pytest.raises(ConfigError, match=r"workloads\[1\]: 'nope' is not a known workload; known: .*resnet50"):
        parse_experiment({"workloads": ["resnet50", "nope"], "topologies": ["tpu-v3-32"]}, file="x.yaml")


def test_inline_and_path_topologies(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text((Path(__file__).resolve().parents[2] / "topologies" / "tpu-v3-32.yaml").read_text())
    exp = parse({"topologies": ["torus:16x16", "mesh:4x4", "torus:8x8x8", str(path)]})
    assert [p["topology"] for p in exp.points()] == ["torus:16x16", "mesh:4x4", "torus:8x8x8", str(path)]
    # Relative paths are found next to the experiment file.
    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(yaml.safe_dump({"workloads": ["resnet50"], "topologies": ["mine.yaml"]}))
    assert load_experiment(exp_file).points()[0]["topology"] == str(path.resolve())


def test_missing_workload_or_topology():
    with pytest.raises(ConfigError, match="needs a workload"):
        parse_experiment({"topologies": ["tpu-v3-32"]}, file="e.yaml")
    with pytest.raises(ConfigError, match="needs a topology"):
        parse_experiment({"workloads": ["resnet50"]}, file="e.yaml")


def test_a_key_set_twice_is_an_error_naming_both_places():
    message = error_of({"base": {"topology": "tpu-v3-128"}})
    assert "base.topology" in message and "topologies" in message
    message = error_of({"sweep": {"link_GBps": [1], "zip": [{"link_GBps": [2]}]}})
    assert "sweep.zip[0].link_GBps" in message and "sweep.link_GBps" in message


def test_zip_groups_must_have_equal_lengths():
    message = error_of({"sweep": {"zip": [{"per_replica_batch": [1, 2], "link_GBps": [10]}]}})
    assert "sweep.zip[0]" in message and "same length" in message


def test_batch_given_twice_is_an_error():
    message = error_of({"base": {"per_replica_batch": 8}, "sweep": {"global_batch": [512]}})
    assert "per_replica_batch and global_batch are both set" in message


def test_strategies():
    assert parse({"strategies": ["replicated", "sharded"]}).points()[0]["strategy"] == "both"
    assert parse({"strategies": ["sharded"]}).points()[0]["strategy"] == "sharded"
    assert parse({}).points()[0]["strategy"] == "both"
    assert "strategies[1]" in error_of({"strategies": ["sharded", "fast"]})


def test_strategies_all_and_fully_sharded():
    from wus_sim.experiments.spec import strategies_of

    three = ["replicated", "sharded", "fully-sharded"]
    assert parse({"strategies": "all"}).points()[0]["strategy"] == "all"
    assert parse({"strategies": list(reversed(three))}).points()[0]["strategy"] == "all"
    assert parse({"strategies": ["both", "fully-sharded"]}).points()[0]["strategy"] == "all"
    assert parse({"strategies": ["fully-sharded"]}).points()[0]["strategy"] == "fully-sharded"
    assert strategies_of({"strategy": "all"}) == tuple(three)
    assert strategies_of({"strategy": "both"}) == ("replicated", "sharded")
    # a point runs one strategy, both or all: another pair is an error naming the rule
    message = error_of({"strategies": ["replicated", "fully-sharded"]})
    assert message.startswith("exp.yaml: strategies") and "'all'" in message and "sweep 'strategy'" in message


def test_gather_options_default_and_reach_the_point():
    p = parse({"base": {"gather_prefetch": 3, "keep_gathered_weights": True}}).points()[0]
    assert (p["gather_prefetch"], p["keep_gathered_weights"]) == (3, True)
    q = parse({}).points()[0]
    assert (q["gather_prefetch"], q["keep_gathered_weights"]) == (None, False)  # None: a layer ahead


def test_reduce_filters_points_and_is_checked():
    exp = parse({"topologies": ["tpu-v3-32", "tpu-v3-128", "tpu-v3-512"], "sweep": {"link_GBps": [50, 100]},
                 "reduce": {"topology": ["tpu-v3-32"]}})
    assert exp.num_points == 6
    reduced = exp.points(reduced=True)
    assert len(reduced) == 2 and {p["topology"] for p in reduced} == {"tpu-v3-32"}
    assert "reduce.topology[0]" in error_of({"reduce": {"topology": ["tpu-v3-128"]}})
    assert "is not a sweep axis" in error_of({"reduce": {"link_GBps": [50]}})
    assert exp.points(limit=4) == exp.points()[:4]


def test_plots_need_kind_and_unique_names():
    assert "plots[0]: missing required key 'kind'" in error_of({"plots": [{"name": "x"}]})
    message = error_of({"plots": [{"kind": "speedup"}, {"kind": "speedup"}]})
    assert "plots[1].name" in message and "unique" in message


def test_yaml_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("workloads: [resnet50\n")
    with pytest.raises(ConfigError, match="bad.yaml: is not valid YAML"):
        load_experiment(path)
    path.write_text(yaml.safe_dump({"workloads": ["resnet50"], "topologies": ["tpu-v3-32"],
                                    "sweep": {"link_GBps": [100, -1]}}))
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert str(info.value) == f"{path}: sweep.link_GBps[1]: -1 must be a number >= 0.001 and <= 1000000 (or null)"


# ----------------------------------------------------------------- expansion
axis_sizes = st.lists(st.integers(1, 4), min_size=0, max_size=3)


@settings(max_examples=40, deadline=None)
@given(sizes=axis_sizes, zip_len=st.integers(1, 3), with_zip=st.booleans())
def test_sweep_is_the_cartesian_product_with_zip_groups_as_one_axis(sizes, zip_len, with_zip):
    keys = ["link_GBps", "hop_latency_us", "mxu_efficiency"]
    sweep = {k: [0.1 * (i + 1) for i in range(n)] for k, n in zip(keys, sizes)}
    if with_zip:
        sweep["zip"] = [{"steps": list(range(2, 2 + zip_len)), "bucket_MiB": [float(4 * (i + 1))
                                                                           for i in range(zip_len)]}]
    exp = parse({"topologies": ["tpu-v3-32", "tpu-v3-128"], "sweep": sweep})
    points = exp.points()
    expected = 2 * math.prod(sizes) * (zip_len if with_zip else 1)
    assert len(points) == expected == exp.num_points
    # every combination exactly once
    combos = {tuple(p[k] for k in ["topology", *keys[:len(sizes)]] + (["steps"] if with_zip else []))
              for p in points}
    assert len(combos) == expected
    if with_zip:  # zipped keys vary together
        assert all(p["bucket_MiB"] == 4.0 * (p["steps"] - 1) for p in points)
    # complete points with unique, stable hashes
    assert all(list(p) == list(POINT_KEYS) for p in points)
    hashes = [point_hash(p) for p in points]
    assert len(set(hashes)) == len(points)
    assert hashes == [point_hash(dict(reversed(list(p.items())))) for p in points]


def test_first_axis_is_outermost():
    exp = parse({"workloads": ["resnet50", "transformer-big"], "topologies": ["tpu-v3-32", "tpu-v3-128"]})
    got = [(p["workload"], p["topology"]) for p in exp.points()]
    assert got == list(itertools.product(["resnet50", "transformer-big"], ["tpu-v3-32", "tpu-v3-128"]))


def test_hash_changes_with_any_parameter():
    point = complete_point({"workload": "resnet50", "topology": "tpu-v3-32"})
    seen = {point_hash(point)}
    for key, value in [("link_GBps", 50.0), ("wraparound", True), ("steps", 4), ("optimizer", "adam")]:
        seen.add(point_hash({**point, key: value}))
    assert len(seen) == 5


def test_resolved_config_round_trips_through_yaml():
    exp = parse({"sweep": {"link_GBps": [50, 100]}, "base": {"per_replica_batch": 16}})
    resolved = yaml.safe_load(yaml.safe_dump(exp.resolved()))
    assert resolved["num_points"] == 2
    assert resolved["base"]["per_replica_batch"] == 16 and resolved["base"]["algorithm"] == "2d"
    assert "link_GBps" not in resolved["base"]
    assert resolved["swept_keys"] == ["link_GBps"]


def test_optimizer_compositions_are_checked_like_the_simulator_loads_them():
    exp = parse({"optimizers": ["adam+clip", "lamb"]})
    assert [p["optimizer"] for p in exp.points()] == ["adam+clip", "lamb"]
    message = error_of({"optimizers": ["clip+adam"]})
    assert "optimizers[0]: 'clip' is a prefix" in message
    assert "known: +clip, adafactor, adam" in error_of({"optimizers": ["adamm"]})


@pytest.mark.parametrize("kind, text, inner", [
    ("topologies", "chip: tpu-v3\nchips_per_axis: [4, 4]\nwraparound: true\nmultislice: {slices: 0}\n",
     "mine.yaml: multislice.slices: 0 must be >= 1"),
    ("topologies", "chip: tpu-v9\nchips_per_axis: [4, 4]\nwraparound: true\n", "mine.yaml: chip: 'tpu-v9'"),
    ("workloads", "name: mine\n", "mine.yaml: missing required key"),
])
def test_a_broken_topology_or_workload_file_is_an_input_error_before_the_sweep(tmp_path, kind, text, inner):
    # A file named by path is read when the experiment is, as an optimizer file is: its error is
    # the experiment's (exit 2, nothing run), not an error row of every point after the sweep.
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    message = error_of({kind: [str(path)]})
    assert message.startswith(f"exp.yaml: {kind}[0]: ") and inner in message
    assert len(message.splitlines()) == 1


def test_a_value_swept_twice_is_an_error_naming_both_places():
    # The same value twice on an axis makes every point of it twice: results would hold each
    # such point two times (one hash, two point_index values), so it is refused, not run.
    message = error_of({"sweep": {"link_GBps": [50, 100, 50]}})
    assert message.startswith("exp.yaml: sweep.link_GBps[2]: 50") and "sweep.link_GBps[0]" in message
    message = error_of({"topologies": ["tpu-v3-32", "tpu-v3-128", "tpu-v3-32"]})
    assert message.startswith("exp.yaml: topologies[2]: 'tpu-v3-32'") and "topologies[0]" in message
    message = error_of({"sweep": {"zip": [{"link_GBps": [50, 100, 50], "hop_latency_us": [1, 2, 1]}]}})
    assert message.startswith("exp.yaml: sweep.zip[0]") and "position 2" in message and "position 0" in message
    # a zip group may repeat one key's value as long as its rows differ
    exp = parse({"sweep": {"zip": [{"link_GBps": [50, 50], "hop_latency_us": [1, 2]}]}})
    assert exp.count() == 2


def test_the_strategies_rule_names_every_strategy_it_accepts():
    # `strategies: fully-sharded` and `strategies: all` load; the format reference must say so.
    text = (Path(__file__).resolve().parents[2] / "docs" / "formats" / "experiment.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `strategies` |"))
    rule = row.split(" | ")[4]
    for accepted in ("replicated", "sharded", "fully-sharded", "both", "all"):
        parse({"strategies": accepted})
        assert re.search(rf"(?<![\w-]){accepted}(?![\w-])", rule), (accepted, rule)


@pytest.mark.parametrize("name", ["", "   ", "two\nlines", "tab\there", "x" * 201])
def test_an_experiment_name_labels_something(name):
    """A blank or multi-line name labelled every result row with nothing (or broke the CSV's
    lines); the file's schema says the same as the parser."""
    import jsonschema

    assert "name: " in error_of({"name": name}) and "non-empty name of one line" in error_of({"name": name})
    validator = jsonschema.Draft202012Validator(
        json.loads((Path(__file__).resolve().parents[2] / "wus_sim/schemas/experiment-file.v1.json").read_text()))
    assert not validator.is_valid({**BASE, "name": name})
    assert parse({"name": "ok name-1 (v2)"}).name == "ok name-1 (v2)"
    assert validator.is_valid({**BASE, "name": "ok name-1 (v2)"})


@settings(max_examples=60, deadline=None)
@given(links=st.lists(st.sampled_from([25, 50, 100, 200]), min_size=1, max_size=4, unique=True),
       batches=st.lists(st.integers(1, 64), min_size=1, max_size=5, unique=True),
       hops=st.lists(st.sampled_from([0.5, 1, 2]), min_size=1, max_size=3, unique=True),
       mxu=st.sampled_from([None, [0.5], [0.4, 0.6]]), reduce_links=st.booleans(),
       limit=st.one_of(st.none(), st.integers(1, 12), st.sampled_from([8, 16, 24, 32, 48]), st.integers(1, 400)))
def test_values_of_a_key_are_those_of_the_points(links, batches, hops, mxu, reduce_links, limit):
    """Experiment.values_of, read from the axes, equals the values the expanded points take, with
    --reduced and --limit: what `wus-sim run` summarizes without expanding a big sweep again."""
    sweep = {"link_GBps": links, "zip": [{"per_replica_batch": batches, "steps": list(range(2, 2 + len(batches)))}],
             "hop_latency_us": hops}
    doc = {"workloads": ["resnet50", "bert-large"], "sweep": sweep}
    if mxu is not None:
        doc["base"] = {"mxu_efficiency": mxu[0]} if len(mxu) == 1 else {}
        if len(mxu) > 1:
            sweep["mxu_efficiency"] = mxu
    if reduce_links:
        doc["reduce"] = {"link_GBps": links[:1]}
    exp = parse(doc)
    points = exp.points(reduced=reduce_links, limit=limit)
    for key in ("link_GBps", "per_replica_batch", "steps", "hop_latency_us", "workload", "mxu_efficiency",
                "calibration", "topology"):
        assert exp.values_of(key, reduced=reduce_links, limit=limit) == {p[key] for p in points}, key


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                                       st.text(max_size=8), st.lists(st.integers(), max_size=3)),
                       max_size=8))
def test_point_hash_is_the_sha256_of_the_sorted_json(point):
    # the id every journal holds: a change to how it is made would redo every resumed point
    import hashlib
    import json

    text = json.dumps(point, sort_keys=True, separators=(",", ":"), default=str)
    assert point_hash(point) == hashlib.sha256(text.encode()).hexdigest()[:16]
