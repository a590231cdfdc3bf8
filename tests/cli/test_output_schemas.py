"""Every `--json` output other than step's (collective, plan, validate, describe topology) and the
results table have a shipped, versioned JSON Schema, checked here against real outputs; byte and
time values carry their unit in the key, and the deprecated aliases copy what they name."""

import contextlib
import io
import json
import math
from pathlib import Path

import jsonschema
import pytest

from wus_sim.cli import main
from wus_sim.inputs.shipped import schema_path
from workload_sample import sample_workloads

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ("collective", "plan", "validate", "describe-topology", "describe-workload", "describe-optimizer",
           "bench", "results", "step")


def schema(name):
    return json.loads(schema_path(name, 1).read_text())


def run_json(*argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == 0
    return json.loads(buf.getvalue())


def check(name, doc):
    jsonschema.Draft202012Validator(schema(name)).validate(doc)


@pytest.mark.parametrize("name", OUTPUTS)
def test_schema_is_shipped_versioned_and_valid(name):
    path = schema_path(name, 1)
    assert path.parent == ROOT / "wus_sim" / "schemas" and path.name == f"{name}.v1.json"
    doc = schema(name)
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["$id"].endswith(f"/{name}.v1.json") and "version 1" in doc["title"]


UNITS = ("_s", "_bytes", "nbytes", "_GBps", "_GiB", "_us", "_TFLOPs", "_bytes_per_element")


def numeric_keys(doc, path=""):
    """Key paths of every number in *doc* (list items share their list's path)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from numeric_keys(v, f"{path}.{k}" if path else k)
    elif isinstance(doc, list):
        for v in doc:
            yield from numeric_keys(v, path + "[]")
    elif isinstance(doc, float):
        yield path


# ---------------------------------------------------------------- collective
COLLECTIVES = [
    ("torus:4x4", "all-reduce", "2d", "64MiB", ()),
    ("mesh:8", "reduce-scatter", "ring", "1MB", ("--bidirectional",)),
    ("tpu-v3-32", "all-gather", "bidir-ring", "4096", ("--reduce", "--group", "x")),
    ("torus:2x2x2", "all-reduce", "halving-doubling", "1GiB", ("--engine", "simpy", "--chunks", "2")),
    ("torus:4x4", "all-to-all", "2d-split", "64MiB", ()),
    ("torus:4x4", "all-to-all", "bruck", "1MB", ("--group", "x")),
]


@pytest.mark.parametrize("topo,op,alg,size,extra", COLLECTIVES)
def test_collective_json_validates(topo, op, alg, size, extra):
    doc = run_json("collective", topo, "--op", op, "--algorithm", alg, "--size", size, *extra, "--json")
    check("collective", doc)
    assert doc["schema_version"] == 1
    assert doc["algbw_GBps"] == pytest.approx(doc["nbytes"] / doc["time_s"] / 1e9)
    # every float is a time, a size or a bandwidth, and its key says which
    assert all(k.endswith(UNITS) for k in numeric_keys(doc)), list(numeric_keys(doc))


# ---------------------------------------------------------------- describe topology
def test_describe_topology_json_validates_for_every_shipped_topology():
    from wus_sim.hardware.topology_files import known_topologies

    for name in [*known_topologies(), "torus:4x4", "mesh:2x3x4"]:
        doc = run_json("describe", "topology", name, "--json")
        check("describe-topology", doc)
        assert doc["cores"] == doc["chips"] * doc["cores_per_chip"] == math.prod(doc["shape"]) * doc["cores_per_chip"]


# ---------------------------------------------------------------- plan
@pytest.fixture(scope="module")
def plans():
    return {
        "resnet50": run_json("plan", "resnet50", "-t", "tpu-v3-32", "--json"),
        "gnmt-bf16": run_json("plan", "gnmt", "-t", "tpu-v3-32", "-o", "adam", "--grad-dtype", "bf16", "--json"),
        "bert-lamb": run_json("plan", "bert-large", "-t", "tpu-v3-128", "-o", "lamb+clip", "--json"),
    }


def test_plan_json_validates(plans):
    for doc in plans.values():
        check("plan", doc)
        assert doc["schema_version"] == 1


def test_plan_per_element_sizes_have_unambiguous_names(plans):
    # gradient bytes per element: 4 for fp32, 2 for bf16 (the dtype's size, not a total)
    assert plans["resnet50"]["grad_bytes_per_element"] == 4
    assert plans["gnmt-bf16"]["grad_bytes_per_element"] == 2
    for doc in plans.values():
        rep = doc["strategies"]["replicated"]
        # the total (step's and plan's grad_nbytes) is every parameter's gradient once
        assert rep["grad_nbytes"] == doc["params"] * doc["grad_bytes_per_element"]


def test_plan_deprecated_aliases_copy_what_they_name(plans):
    for doc in plans.values():
        aliases = doc["deprecated_aliases"]
        for old in ("grad_bytes", "weight_bytes", "slot_bytes", "gather_bytes"):
            assert doc[old] == doc[aliases[old]]
        for e in doc["extra_reductions"]:
            assert e["dtype_bytes"] == e["bytes_per_element"]
            assert e["nbytes"] == e["values"] * e["bytes_per_element"]
        for s in ("replicated", "sharded"):
            old, new = doc["memory"][s], doc["memory_bytes"][s]
            assert {k: old[k] for k in new} == new
            assert old["fits"] == doc["memory_fits"][s] == (new["peak"] <= new["capacity"])


def test_plan_memory_peak_is_the_sum_of_its_parts(plans):
    for doc in plans.values():
        for m in doc["memory_bytes"].values():
            total = m["weights"] + m["gradients"] + m["slots"] + m["activations"] + m["collective_buffers"]
            assert m["peak"] == pytest.approx(total)


# ---------------------------------------------------------------- validate
def test_validate_json_validates(tmp_path):
    rows = run_json("validate", "--json", "--no-plots", "--out", str(tmp_path))
    check("validate", rows)
    for r in rows:
        assert r["error"] == pytest.approx((r["simulated_step_s"] - r["measured_step_s"]) / r["measured_step_s"])
        # a bound row says whether it holds, as a JSON boolean (not 0.0/1.0)
        assert (r["within_bound"] is None) == (r["kind"] == "exact")
        if r["kind"] == "bound":
            assert r["within_bound"] is (r["simulated_step_s"] <= r["measured_step_s"])


# ---------------------------------------------------------------- results
def rows_of(df):
    """Rows as JSON objects: pandas' missing values (NaN, NA) become null."""
    out = []
    for rec in df.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if hasattr(v, "item"):
                v = v.item()
            if v is None or (isinstance(v, float) and math.isnan(v)) or str(v) == "<NA>":
                v = None
            row[k] = v
        out.append(row)
    return out


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart")
    assert main(["run", "quickstart", "--reduced", "--out", str(out), "--quiet", "--no-plots"]) == 0
    return out


def test_results_csv_and_parquet_rows_validate(quickstart_run):
    from wus_sim.experiments.results import read_results

    validator = jsonschema.Draft202012Validator(schema("results"))
    for name in ("results.csv", "results.parquet"):
        rows = rows_of(read_results(quickstart_run / name))
        assert rows
        for row in rows:
            validator.validate(row)
            assert row["status"] == "ok" and row["step_time_s"] > 0


def test_results_schema_lists_the_documented_columns_in_order():
    from wus_sim.experiments.results import columns

    doc = schema("results")
    assert doc["required"] == [c.name for c in columns()]
    for c in columns():
        if c.unit in ("s", "B"):
            assert c.name.endswith(("_s", "_bytes", "_s_low", "_s_high")), c.name  # bands: the names


def test_describe_workload_and_optimizer_json_validate():
    """Every shipped workload (the MaxText library's by a sample: helpers/workload_sample.py) and
    optimizer described with --json fits its versioned schema."""
    from wus_sim.optimizers.registry import known_optimizers

    for name in sample_workloads():
        check("describe-workload", run_json("describe", "workload", name, "--json"))
    for name in known_optimizers():
        check("describe-optimizer", run_json("describe", "optimizer", name, "--json"))


def test_bench_json_validates():
    """The quick benchmark's --json (one timed run, no memory pass) fits its versioned schema."""
    doc = run_json("bench", "--quick", "--json", "--repeat", "1", "--no-memory")
    check("bench", doc)
    assert doc["cases"] and all(c["status"] in ("ok", "unavailable") for c in doc["cases"])
