"""The format references (docs/formats/*.md) and the input JSON Schemas are generated from the
loaders' key tables: the committed files are what the generator writes, every shipped YAML file
validates against its schema, and the loaders and the schemas accept and refuse the same edits
of each format's example."""

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from wus_sim import docs
from wus_sim.inputs.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "wus_sim" / "schemas"


def schema(fmt):
    return json.loads((SCHEMAS / f"{fmt}-file.v1.json").read_text())


def validator(fmt):
    return jsonschema.Draft202012Validator(schema(fmt))


def load(fmt, doc, tmp_path):
    """Read *doc* with the real loader of *fmt* (through a file where the loader takes one)."""
    if fmt == "experiment":
        from wus_sim.experiments.spec import parse_experiment
        from wus_sim.plotting.kinds import check_plots

        check_plots(parse_experiment(doc).plots)
        return
    if fmt == "optimizer":
        from wus_sim.optimizers.spec import parse_optimizer

        parse_optimizer(doc, name="example")
        return
    path = tmp_path / f"example-{fmt}.yaml"
    path.write_text(yaml.safe_dump(doc))
    if fmt == "topology":
        from wus_sim.hardware.topology_files import load_topology

        load_topology(str(path))
    elif fmt == "chips":
        from wus_sim.hardware.topology_files import load_chips

        load_chips(path)
    else:
        from wus_sim.model.workload_files import load_workload

        load_workload(str(path))


def test_committed_references_and_schemas_are_what_the_generator_writes():
    assert docs.stale(ROOT) == [], "run `python -m wus_sim.docs` and commit the result"


def test_generator_check_mode_reports_a_stale_file(tmp_path, capsys):
    assert docs.main(["--root", str(tmp_path)]) == 0
    assert docs.main(["--root", str(tmp_path), "--check"]) == 0
    (tmp_path / "docs" / "formats" / "topology.md").write_text("old\n")
    assert docs.main(["--root", str(tmp_path), "--check"]) == 1
    assert "docs/formats/topology.md" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", docs.FORMATS)
def test_schema_is_valid_draft_2020_12_and_shipped(fmt):
    jsonschema.Draft202012Validator.check_schema(schema(fmt))
    from wus_sim.inputs.shipped import schema_path

    assert schema_path(f"{fmt}-file", 1) == SCHEMAS / f"{fmt}-file.v1.json"


def shipped_files():
    from wus_sim.inputs.shipped import PACKAGE_DIR

    out = [("experiment", p) for p in sorted((ROOT / "experiments").glob("*.yaml"))]
    out += [("chips" if p.stem == "chips" else "topology", p) for p in sorted((ROOT / "topologies").glob("*.yaml"))]
    out += [("optimizer", p) for p in sorted((PACKAGE_DIR / "data" / "optimizers").glob("*.yaml"))]
    out += [("workload", p) for p in sorted((PACKAGE_DIR / "data" / "workloads").glob("*.yaml"))]
    return out


@pytest.mark.parametrize("fmt,path", shipped_files(), ids=lambda x: getattr(x, "name", x))
def test_every_shipped_file_validates_against_its_schema(fmt, path):
    validator(fmt).validate(yaml.safe_load(path.read_text()))


def test_every_format_has_shipped_files():
    assert {fmt for fmt, _ in shipped_files()} == set(docs.FORMATS)


@pytest.mark.parametrize("fmt", docs.FORMATS)
def test_the_example_loads_and_validates(fmt, tmp_path):
    doc = yaml.safe_load(docs.EXAMPLES[fmt])
    load(fmt, doc, tmp_path)
    validator(fmt).validate(doc)
    assert docs.EXAMPLES[fmt].rstrip("\n") in (ROOT / "docs" / "formats" / f"{fmt}.md").read_text()


def _mapping_of(fmt, doc):
    """The mapping whose keys the format's top table describes (a chip, for chips.yaml)."""
    return doc[next(iter(doc))] if fmt == "chips" else doc


@pytest.mark.parametrize("fmt", docs.FORMATS)
def test_loader_and_schema_both_refuse_an_unknown_key(fmt, tmp_path):
    doc = yaml.safe_load(docs.EXAMPLES[fmt])
    _mapping_of(fmt, doc)["not_a_key"] = 1
    with pytest.raises(ConfigError, match="not_a_key"):
        load(fmt, doc, tmp_path)
    assert not validator(fmt).is_valid(doc)


def required_cases():
    tables = docs._tables()
    return [(fmt, key.name) for fmt in docs.FORMATS for key in tables[fmt] if key.required]


@pytest.mark.parametrize("fmt,key", required_cases())
def test_loader_and_schema_both_need_every_required_key(fmt, key, tmp_path):
    doc = yaml.safe_load(docs.EXAMPLES[fmt])
    del _mapping_of(fmt, doc)[key]
    with pytest.raises(ConfigError, match=key):
        load(fmt, doc, tmp_path)
    assert not validator(fmt).is_valid(doc)


def scalar_bound_cases():
    """(format, key, a value the table's bound refuses) for every bounded scalar key of a top table."""
    tables = docs._tables()
    out = []
    for fmt in docs.FORMATS:
        for key in tables[fmt]:
            if key.type in ("integer", "number") and (key.positive or key.minimum is not None):
                low = (key.minimum if key.minimum is not None else 0)
                out.append((fmt, key.name, low - 1 if key.type == "integer" else (low - 0.5 if not key.positive
                                                                                    else 0)))
            elif key.type == "string" and key.choices:
                out.append((fmt, key.name, "not-a-choice"))
    return out


@pytest.mark.parametrize("fmt,key,value", scalar_bound_cases())
def test_loader_and_schema_both_refuse_a_value_out_of_the_tables_bounds(fmt, key, value, tmp_path):
    doc = yaml.safe_load(docs.EXAMPLES[fmt])
    _mapping_of(fmt, doc)[key] = value
    with pytest.raises(ConfigError, match=key):
        load(fmt, doc, tmp_path)
    assert not validator(fmt).is_valid(doc)


def test_every_point_parameter_and_plot_option_is_in_the_experiment_reference():
    from wus_sim.experiments.spec import POINT_KEYS
    from wus_sim.plotting.kinds import PLOT_KINDS

    text = (ROOT / "docs" / "formats" / "experiment.md").read_text()
    for name in POINT_KEYS:
        assert f"| `{name}` |" in text
    for kind, spec in PLOT_KINDS.items():
        assert f"| `{kind}` |" in text
        for option in spec.options:
            assert f"| `{option}` |" in text
    props = schema("experiment")["properties"]
    assert set(props["base"]["properties"]) == set(POINT_KEYS)
    assert set(props["sweep"]["properties"]) == set(POINT_KEYS) | {"zip"}


def test_plot_schema_refuses_what_check_plots_refuses(tmp_path):
    doc = yaml.safe_load(docs.EXAMPLES["experiment"])
    bad = copy.deepcopy(doc)
    bad["plots"][0]["annotate"] = True  # a breakdown option, not a speedup one
    with pytest.raises(ConfigError, match="annotate"):
        load("experiment", bad, tmp_path)
    assert not validator("experiment").is_valid(bad)
    bad = copy.deepcopy(doc)
    del bad["plots"][1]["name"]
    bad["plots"].append({"kind": "lines"})  # lines needs x
    with pytest.raises(ConfigError, match="x"):
        load("experiment", bad, tmp_path)
    assert not validator("experiment").is_valid(bad)


def test_results_reference_lists_every_column():
    from wus_sim.experiments.results import columns

    text = (ROOT / "docs" / "formats" / "results.md").read_text()
    for c in columns():
        assert f"| `{c.name}` |" in text
