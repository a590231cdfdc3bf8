"""`wus-sim step --json` has one shape for every --strategy, described by the shipped,
versioned JSON Schema wus_sim/schemas/step.v1.json; the old top-level keys remain as
documented aliases for one release."""

import json
from pathlib import Path

import jsonschema
import pytest

from wus_sim.cli import main
from wus_sim.inputs.shipped import schema_path

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "wus_sim" / "schemas" / "step.v1.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text())
ALIASES = ("strategy", "status", "error", "step_time_s", "breakdown", "memory", "collectives")
STRATEGY_OPTIONS = ("replicated", "sharded", "fully-sharded", "both", "all")


def step_json(capsys, *argv):
    assert main(["step", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def outputs():
    """resnet50 on tpu-v3-32 under each --strategy (module-scoped: five simulations in all)."""
    import contextlib
    import io

    runs = {}
    for strategy in STRATEGY_OPTIONS:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["step", "resnet50", "-t", "tpu-v3-32", "--strategy", strategy, "--json"]) == 0
        runs[strategy] = json.loads(buf.getvalue())
    return runs


def test_the_schema_is_a_valid_draft_2020_12_schema_and_shipped():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert schema_path("step", 1) == SCHEMA_FILE


@pytest.mark.parametrize("strategy", STRATEGY_OPTIONS)
def test_every_strategy_validates(outputs, strategy):
    jsonschema.Draft202012Validator(SCHEMA).validate(outputs[strategy])
    assert outputs[strategy]["schema_version"] == 1  # the version in the schema's file name


def test_one_shape_for_every_strategy(outputs):
    shapes = {s: set(d) for s, d in outputs.items()}
    assert all(shape == shapes["replicated"] for shape in shapes.values())
    assert set(outputs["replicated"]["strategies"]) == {"replicated"}
    assert set(outputs["sharded"]["strategies"]) == {"sharded"}
    assert set(outputs["fully-sharded"]["strategies"]) == {"fully-sharded"}
    assert set(outputs["both"]["strategies"]) == {"replicated", "sharded"}
    assert set(outputs["all"]["strategies"]) == {"replicated", "sharded", "fully-sharded"}


def test_speedup_only_when_two_ran(outputs):
    for single in ("replicated", "sharded", "fully-sharded"):
        assert outputs[single]["speedup"] is None and outputs[single]["speedups"] is None
    both = outputs["both"]["strategies"]
    ratio = both["replicated"]["step_time_s"] / both["sharded"]["step_time_s"]
    assert outputs["both"]["speedup"] == pytest.approx(ratio, rel=1e-12)
    assert outputs["both"]["speedups"] == {"sharded": outputs["both"]["speedup"]}


def test_speedups_compare_every_strategy_with_replicated(outputs):
    d = outputs["all"]
    per = d["strategies"]
    assert d["speedup"] == pytest.approx(per["replicated"]["step_time_s"] / per["sharded"]["step_time_s"], rel=1e-12)
    assert set(d["speedups"]) == {"sharded", "fully-sharded"}
    for s, up in d["speedups"].items():
        assert up == pytest.approx(per["replicated"]["step_time_s"] / per[s]["step_time_s"], rel=1e-12)


def test_a_strategy_does_not_depend_on_what_else_ran(outputs):
    for s in ("replicated", "sharded", "fully-sharded"):
        assert outputs[s]["strategies"][s] == outputs["all"]["strategies"][s]


def resolve(doc, path):
    for part in path.split("."):
        doc = doc[part]
    return doc


@pytest.mark.parametrize("strategy", STRATEGY_OPTIONS)
def test_aliases_copy_what_they_say(outputs, strategy):
    d = outputs[strategy]
    assert set(d["deprecated_aliases"]) == set(ALIASES)
    assert d["strategy"] == strategy
    for key, path in d["deprecated_aliases"].items():
        if key != "strategy":
            assert d[key] == resolve(d, path)
    # the old shape's rule: under both (and all), the top level was the sharded strategy's
    expected = "sharded" if strategy in ("both", "all") else strategy
    assert d["step_time_s"] == d["strategies"][expected]["step_time_s"]
    for per in d["strategies"].values():
        assert per["memory"] == per["memory_bytes"]


def test_an_infeasible_step_validates_with_nulls(capsys):
    d = step_json(capsys, "transformer-big", "-t", "tpu-v3-32", "--per-replica-batch", "128")
    jsonschema.Draft202012Validator(SCHEMA).validate(d)
    assert {p["status"] for p in d["strategies"].values()} == {"infeasible"}
    assert d["speedup"] is None and d["step_time_s"] is None


def test_the_schema_rejects_the_old_single_strategy_shape(outputs):
    old = {k: v for k, v in outputs["replicated"].items()
           if k not in ("strategies", "speedup", "speedups", "schema_version")}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(old)
