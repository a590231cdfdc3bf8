"""Every ``--json`` output of every command, over odd but valid inputs (1-chip slices, zero hop
latency, infeasible points, several slices, the ends of the physical ranges), parses as strict
JSON (``parse_constant`` refuses NaN and Infinity) and validates against its shipped schema; and
every simulated time in it is finite and non-negative (issue 35)."""

import contextlib
import io
import json
import math

import jsonschema
import pytest

from wus_sim.cli import main
from wus_sim.inputs.limits import RATE_RANGES
from wus_sim.inputs.shipped import schema_path


def refuse(constant):
    raise ValueError(f"not JSON: {constant}")


def strict_json(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main([str(a) for a in argv])
    assert code == 0, argv
    return json.loads(out.getvalue(), parse_constant=refuse)


def check(schema, doc):
    jsonschema.Draft202012Validator(json.loads(schema_path(schema, 1).read_text())).validate(doc)


def times(doc, path=""):
    """``(key path, value)`` of every number whose key says it is a time (``_s``)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from times(v, f"{path}.{k}")
            if k.endswith("_s") and isinstance(v, (int, float)) and not isinstance(v, bool):
                yield f"{path}.{k}", v
    elif isinstance(doc, list):
        for v in doc:
            yield from times(v, path + "[]")


def physical(doc):
    bad = [(k, v) for k, v in times(doc) if not (math.isfinite(v) and v >= 0)]
    assert not bad, bad[:5]


LINK_MIN, LINK_MAX = RATE_RANGES["link_GBps"][:2]
DCN_MIN = RATE_RANGES["dcn_GBps"][0]
MXU_MIN = RATE_RANGES["mxu_efficiency"][0]

STEP = [
    ["ncf", "-t", "mesh:1x1"],
    ["ncf", "-t", "torus:4x4", "--hop-latency-us", "0"],
    ["bert-large", "-t", "tpu-v3-8", "--per-replica-batch", "100000"],  # infeasible: both strategies
    ["ncf", "-t", "tpu-v3-8", "--slices", "2"],
    ["ncf", "-t", "mesh:1x1", "--slices", "2", "--dcn-latency-us", "0"],
    # the ends of every range a step takes
    ["ncf", "-t", "torus:4x4", "--link-GBps", LINK_MIN],
    ["ncf", "-t", "torus:4x4", "--link-GBps", LINK_MAX, "--hop-latency-us", "1e6"],
    ["ncf", "-t", "torus:4x4", "--link-GBps", LINK_MIN, "--slow-links", "2:1e6"],
    ["ncf", "-t", "tpu-v3-8", "--slices", "2", "--dcn-GBps", DCN_MIN],
    ["ncf", "-t", "tpu-v3-8", "--mxu-efficiency", MXU_MIN],
    ["ncf", "-t", "tpu-v3-8", "--mxu-efficiency", "1"],
]


@pytest.mark.parametrize("argv", STEP, ids=[" ".join(map(str, a)) for a in STEP])
def test_step_json_is_strict_valid_and_physical(argv):
    doc = strict_json(["step", *argv, "--json"])
    check("step", doc)
    physical(doc)
    for name, r in doc["strategies"].items():
        if r["status"] == "ok":
            assert r["step_time_s"] > 0, name
            assert all(v >= 0 for v in r["breakdown"].values()), (name, r["breakdown"])


COLLECTIVE = [
    ["-t", "mesh:1x1", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB"],
    ["-t", "mesh:1x1", "--op", "all-gather", "--algorithm", "ring", "--size", "1"],
    ["-t", "torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB", "--hop-latency-us", "0"],
    ["-t", "torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1024TiB", "--link-GBps", LINK_MIN],
    ["-t", "torus:4x4", "--op", "reduce-scatter", "--algorithm", "ring", "--size", "1", "--link-GBps", LINK_MAX],
    ["-t", "torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1GiB", "--link-GBps", LINK_MIN,
     "--slow-links", "1:1e6"],
]


@pytest.mark.parametrize("argv", COLLECTIVE, ids=[" ".join(map(str, a)) for a in COLLECTIVE])
def test_collective_json_is_strict_valid_and_physical(argv):
    doc = strict_json(["collective", *argv, "--json"])
    check("collective", doc)
    physical(doc)


@pytest.mark.parametrize("argv", [["ncf", "-t", "mesh:1x1"], ["ncf", "-t", "tpu-v3-8", "--slices", "2"],
                                  ["ncf", "-t", "tpu-v3-8", "--spatial-ways", "8"]])
def test_plan_json(argv):
    doc = strict_json(["plan", *argv, "--json"])
    check("plan", doc)
    physical(doc)


@pytest.mark.parametrize("argv,schema", [
    (["describe", "topology", "mesh:1x1"], "describe-topology"),
    (["describe", "topology", "tpu-v5e-256x2"], "describe-topology"),
    (["describe", "workload", "ncf"], "describe-workload"),
    (["describe", "optimizer", "adam"], "describe-optimizer"),
    (["describe", "topology"], "names"), (["describe", "workload"], "names"), (["describe", "optimizer"], "names"),
    (["list", "topologies"], "names"), (["list", "workloads"], "names"), (["list", "optimizers"], "names"),
    (["list", "experiments"], "names"),
    (["bench", "--list"], "bench-list"),
])
def test_describe_list_and_bench_json(argv, schema):
    check(schema, strict_json([*argv, "--json"]))


@pytest.mark.parametrize("end", [0, 1], ids=["minimum", "maximum"])
def test_a_chip_at_the_ends_of_every_range_steps_physically(tmp_path, monkeypatch, end):
    """A chips.yaml whose every rate and capacity is at its range's end, through step (both
    strategies and the bands), collective and describe."""
    import yaml

    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    chip = dict(yaml.safe_load((repo / "topologies" / "chips.yaml").read_text())["tpu-v3"])
    for key in ("link_GBps", "dcn_GBps", "onchip_GBps", "hbm_GBps", "peak_bf16_TFLOPs", "hbm_GiB"):
        chip[key] = RATE_RANGES[key][end]
    chip["hop_latency_us"] = (0, 1e6)[end]
    chip["cores_per_chip"] = (1, 64)[end]
    (tmp_path / "chips.yaml").write_text(yaml.safe_dump({"edge-chip": chip}))
    (tmp_path / "edge.yaml").write_text(yaml.safe_dump({"chip": "edge-chip", "chips_per_axis": [2, 2],
                                                        "wraparound": True}))
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(tmp_path))
    doc = strict_json(["step", "ncf", "-t", "edge", "--per-replica-batch", "1", "--json"])
    check("step", doc)
    physical(doc)
    doc = strict_json(["collective", "-t", "edge", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB",
                       "--json"])
    check("collective", doc)
    physical(doc)
    check("describe-topology", strict_json(["describe", "topology", "edge", "--json"]))


@pytest.mark.parametrize("argv,schema", [
    # every candidate infeasible (an 8B model on four 16 GiB cores): the search still prints a document
    (["plan", "llama3-8b", "-t", "torus:2x2", "--search", "--global-batch", "4"], "plan-search"),
    (["step", "llama3-8b", "-t", "tpu-v5p-8", "--megacore", "--mesh", "fsdp=2,tensor=2", "--global-batch", "4"],
     "step"),
    (["describe", "topology", "tpu-v5p-8", "--megacore", "--mesh", "fsdp=2,tensor=2"], "describe-topology"),
])
def test_mesh_json_is_strict_and_valid(argv, schema):
    doc = strict_json([*argv, "--json"])
    check(schema, doc)
    physical(doc)
