"""`step --mesh/--dcn-mesh` and `plan --mesh/--search` on the command line: today's numbers
where the mesh is today's, strict JSON valid against the shipped schemas, one-line errors."""

import json

import jsonschema
import pytest

from wus_sim.inputs.shipped import schema_path

from run_cli import run


def valid(name, doc):
    jsonschema.Draft202012Validator(json.loads(schema_path(name, 1).read_text())).validate(doc)


BASE = ("step", "llama3-8b", "-t", "tpu-v5p-128", "--megacore", "--global-batch", "64", "--remat", "layer", "--json")


def test_step_mesh_data_n_keeps_every_strategy_value():
    rc, out, _ = run(*BASE, "--strategy", "all")
    rc2, out2, _ = run(*BASE, "--strategy", "all", "--mesh", "data=64")
    assert rc == rc2 == 0
    a, b = json.loads(out), json.loads(out2)
    valid("step", b)
    for s, per in a["strategies"].items():
        assert b["strategies"][s]["step_time_s"] == per["step_time_s"]
        assert {k: b["strategies"][s]["breakdown"][k] for k in per["breakdown"]} == per["breakdown"]
        assert b["strategies"][s]["memory_bytes"] == per["memory_bytes"]
    assert "mesh" not in a and b["mesh"]["path"] == "today"


def test_step_mesh_json_has_the_three_collective_parts():
    rc, out, _ = run(*BASE, "--mesh", "data=2,fsdp=8,tensor=4", "--strategy", "sharded")
    assert rc == 0
    doc = json.loads(out)
    valid("step", doc)
    b = doc["strategies"]["sharded"]["breakdown"]
    assert b["tensor_comm_s"] > 0 and b["fsdp_comm_s"] >= 0 and b["data_comm_s"] >= 0
    assert set(doc["mesh"]["comm"]) == {"tensor", "expert", "context", "pipeline", "fsdp", "data"}
    assert doc["mesh"]["comm"]["expert"]["collectives"] == 0 and b["expert_comm_s"] == 0
    assert doc["mesh"]["groups"]["tensor"] == [0, 1, 2, 3]
    assert doc["mesh"]["comm"]["data"]["collectives"] > 0 and doc["mesh"]["comm"]["fsdp"]["collectives"] > 0


def test_step_two_slices_over_the_dcn():
    rc, out, _ = run("step", "llama3-8b", "-t", "tpu-v5e-256", "--dcn-mesh", "data=2", "--mesh", "fsdp=16,tensor=16",
                     "--global-batch", "64", "--remat", "layer", "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("step", doc)
    assert doc["parameters"]["slices"] == 2 and doc["mesh"]["dcn_mesh"] == {"data": 2, "pipeline": 1, "fsdp": 1, "expert": 1}


@pytest.mark.parametrize("argv,says", [
    (("--mesh", "tensor=3"), "multiplies to 3 devices"),
    (("--mesh", "stage=2"), "unknown axis"),
    (("--dcn-mesh", "tensor=2"), "unknown axis"),
    (("--dcn-mesh", "data=2", "--slices", "4"), "slices is 4"),
    # one integer rule: what Python's int() would take and the experiment schema refuses
    (("--mesh", "data=1_6,fsdp=4"), "--mesh.data: '1_6' must be a whole number"),
    (("--mesh", "data=+16,fsdp=4"), "--mesh.data: '+16'"),
    (("--mesh", "data=\t16,fsdp=4"), "--mesh.data: '\\t16'"),
    (("--mesh", "data=\u00a016,fsdp=4"), "--mesh.data: '\\xa016'"),
    (("--mesh", "data=\u0661\u0666,fsdp=4"), "--mesh.data:"),
    (("--mesh", "data=\uff11\uff16,fsdp=4"), "--mesh.data:"),
    (("--mesh", "data=\u0967\u096c,fsdp=4"), "--mesh.data:"),
    (("--dcn-mesh", "data=\uff12"), "--dcn-mesh.data:"),
    # llama3-8b has 32 query heads a layer: a tensor axis of 64 would hold half a head
    (("--mesh", "tensor=64"), "--mesh: 'tensor=64' splits attention 64 ways, but llama3-8b has 32 query heads"),
])
def test_mesh_errors_are_one_line_exit_2(argv, says):
    rc, out, err = run("step", "llama3-8b", "-t", "tpu-v5p-128", "--megacore", *argv)
    assert rc == 2 and out == ""
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_negative_times_are_now_a_refusal():
    # tensor=1024 on 32 heads printed forward -28.49 ms; step and plan refuse it, naming the heads
    for cmd in ("step", "plan"):
        rc, out, err = run(cmd, "llama3-8b", "-t", "tpu-v5p-2048", "--megacore", "--mesh", "tensor=1024")
        assert rc == 2 and out == "" and err.count("\n") == 1
        assert err == (f"wus-sim {cmd}: error: --mesh: 'tensor=1024' splits attention 1024 ways, but llama3-8b has "
                       "32 query heads a layer; tensor must be at most the query heads\n")


@pytest.mark.parametrize("mesh,says", [("nonsense!", "--mesh: 'nonsense!' must be axis=size pairs"),
                                       ("data=\uff11", "--mesh.data: "),
                                       ("tensor=4", "--mesh: 'tensor=4' applies to describe topology only")])
def test_describe_workload_refuses_a_mesh(mesh, says):
    for kind, name in (("workload", "llama3-8b"), ("optimizer", "adamw")):
        rc, out, err = run("describe", kind, name, "--mesh", mesh)
        assert rc == 2 and out == "" and err.count("\n") == 1
        assert err.startswith(f"wus-sim describe: error: {says}")


def test_plan_mesh_shows_the_groups():
    rc, out, _ = run("plan", "llama3-8b", "-t", "tpu-v5p-128", "--megacore", "--mesh", "fsdp=16,tensor=4")
    assert rc == 0 and "one tensor group: chips 0, 1, 2, 3" in out and "one fsdp group: chips 0, 4, 8" in out
    rc, out, _ = run("plan", "llama3-8b", "-t", "tpu-v5p-128", "--megacore", "--mesh", "fsdp=16,tensor=4", "--json")
    doc = json.loads(out)
    valid("plan", doc)
    assert doc["mesh"]["layout"][0] == "tensor=4: x"


def test_plan_search_ranks_every_candidate():
    rc, out, _ = run("plan", "llama3-8b", "-t", "torus:2x2", "--search", "--global-batch", "4", "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("plan-search", doc)
    cands = doc["candidates"]
    # 4 devices: meshes (d, f, t) with d f t = 4: 6; strategies 3 where data > 1 (3 meshes), else 1;
    # remat none, selective, layer, full
    assert len(cands) == (3 * 3 + 3 * 1) * 4
    times = [c["step_time_s"] for c in cands if c["status"] == "ok"]
    assert times == sorted(times)
    assert doc["feasible"] + sum(doc["infeasible"].values()) == len(cands)
    assert all(c["reason"] in ("memory", "batch") for c in cands if c["status"] != "ok")


def test_plan_search_counts_the_meshes_beyond_the_heads():
    # bert-large's 16 heads on 32 chips: the mesh tensor=32 (no data axis: fully-sharded only) x 4 remats
    rc, out, _ = run("plan", "bert-large", "-t", "torus:4x8", "--search", "--global-batch", "32", "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("plan-search", doc)
    heads = [c for c in doc["candidates"] if c["reason"] == "heads"]
    assert doc["infeasible"].get("heads") == len(heads) == 4
    assert {c["mesh"] for c in heads} == {"tensor=32"} and all(c["step_time_s"] is None for c in heads)


def test_describe_topology_mesh_names_the_replica_cores():
    # the v0.7 Transformer's mesh: both cores of two chips per replica (y wraps, x does not)
    rc, out, _ = run("describe", "topology", "tpu-v3-8192", "--mesh", "data=2048,tensor=4", "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("describe-topology", doc)
    assert doc["mesh"]["groups"]["tensor"] == [0, 1, 256, 257]  # chips 0 and 128 (y=1 of a 128 x 32 slice)
    rc, _, err = run("describe", "topology", "tpu-v3-8192", "--mesh", "tensor=0")
    assert rc == 2 and err.startswith("wus-sim describe: error: --mesh.tensor:")


def test_a_mesh_the_reshape_straddles_runs_as_jax_lays_it_out():
    # issue 44: data=12,fsdp=16,tensor=8 on an 8x12x16 v5p slice was refused (fsdp would take
    # 4 of y and 4 of z); JAX gives each axis a whole physical axis: tensor x, fsdp z, data y
    mesh = ("--megacore", "--mesh", "data=12,fsdp=16,tensor=8")
    rc, out, _ = run("step", "gpt3-175b", "-t", "tpu-v5p-3072", *mesh, "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("step", doc)
    assert doc["mesh"]["layout"] == ["tensor=8: x", "fsdp=16: z", "data=12: y"]
    assert doc["mesh"]["groups"]["fsdp"] == [96 * z for z in range(16)]  # x 8 times y 12 chips apart
    assert all(s["status"] == "ok" and s["step_time_s"] > 0 for s in doc["strategies"].values())
    rc, out, _ = run("describe", "topology", "tpu-v5p-3072", *mesh)
    assert rc == 0 and "tensor=8: x; fsdp=16: z; data=12: y" in out
    # a mesh that splits: data's ring over y takes every 4th chip, each edge 4 links
    rc, out, _ = run("describe", "topology", "tpu-v5p-3072", "--megacore", "--mesh", "data=24,fsdp=8,tensor=8")
    assert rc == 0 and "y[3 of stride 4, 4-hop ring edges]" in out


def test_fsdp_in_a_slice_data_across_slices_reports_the_dcn():
    # issue 44: mesh.comm.data of --mesh fsdp=256 --dcn-mesh data=32 counted 0 collectives, 0 bytes.
    # Each bucket's fsdp shard crosses the DCN once (an all-reduce): over the step, a chip sends its
    # 1/256 of llama3-8b's fp32 gradients, 8,030,261,248 parameters x 4 bytes / 256
    argv = ("step", "llama3-8b", "-t", "tpu-v5p-512", "--megacore", "--mesh", "fsdp=256", "--dcn-mesh", "data=32")
    rc, out, _ = run(*argv, "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("step", doc)
    data = doc["mesh"]["comm"]["data"]
    buckets = doc["mesh"]["comm"]["fsdp"]["collectives"] // 3  # a reduce-scatter and two gathers a bucket
    assert data["dcn_collectives"] == buckets and data["dcn_nbytes"] == 8_030_261_248 * 4 / 256
    assert data["dcn_busy_s"] > 0 and doc["strategies"]["fully-sharded"]["breakdown"]["data_comm_s"] > 0
    rc, out, _ = run(*argv)
    assert rc == 0 and f"data over the DCN: {buckets} cross-slice phases per step" in out


MOE = ("step", "mixtral-8x7b", "-t", "tpu-v5p-256", "--megacore", "--global-batch", "128")


def test_step_with_an_expert_axis():
    """Mixtral's 32 MoE layers on an 8-way expert axis: 4 all-to-alls each, in --json (schema-valid) and in
    the text (the breakdown line and the expert group)."""
    rc, out, _ = run(*MOE, "--mesh", "fsdp=16,expert=8", "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("step", doc)
    assert doc["mesh"]["mesh"]["expert"] == 8 and doc["mesh"]["groups"]["expert"] == list(range(8))
    assert doc["mesh"]["comm"]["expert"]["collectives"] == 128
    assert doc["strategies"]["fully-sharded"]["breakdown"]["expert_comm_s"] > 0
    rc, text, _ = run(*MOE, "--mesh", "fsdp=16,expert=8", "--capacity-factor", "1.25")
    assert rc == 0 and "expert all-to-alls" in text and "mesh data=1 x fsdp=16 x tensor=1 x expert=8" in text
    assert "one expert group: chips 0, 1, 2, 3, 4, 5, 6, 7" in text


def test_an_expert_axis_or_imbalance_that_cannot_be_is_one_line():
    rc, _, err = run("step", "llama3-8b", "-t", "tpu-v5p-256", "--megacore", "--mesh", "fsdp=16,expert=8")
    assert rc == 2 and err.count("\n") == 1 and "--mesh" in err and "no mixture-of-experts layer" in err
    rc, _, err = run("plan", "llama3-8b", "-t", "tpu-v5p-256", "--megacore", "--mesh", "fsdp=16,expert=8")
    assert rc == 2 and err.count("\n") == 1 and "no mixture-of-experts layer" in err
    rc, _, err = run(*MOE, "--mesh", "fsdp=16,expert=8", "--expert-load-imbalance", "0.5")
    assert rc == 2 and err.count("\n") == 1 and "--expert-load-imbalance" in err


def test_plan_search_of_a_fixed_expert_mesh_is_schema_valid():
    rc, out, _ = run("plan", "mixtral-8x7b", "-t", "tpu-v5p-256", "--megacore", "--search", "--mesh",
                     "fsdp=16,expert=8", "--remat", "none", "--capacity-factor", "1.25", "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("plan-search", doc)
    assert doc["options"]["capacity_factor"] == 1.25
    assert {c["mesh"] for c in doc["candidates"]} == {"fsdp=16,expert=8"}


GPT3_PIPE = ("step", "gpt3-175b", "-t", "tpu-v5p-2048", "--megacore", "--mesh", "fsdp=-1,tensor=8", "--dcn-mesh",
             "pipeline=2")


def test_gpt3_with_two_pipeline_stages_across_two_slices():
    """Issue 46's run: GPT-3 175B, 2 stages over the DCN of 2 v5p-2048 slices. The text gives the bubble
    and the pipeline comm, the pipeline line (MaxText's defaults: M = the stages, 1 block a stage: 48
    repeats, bubble 1/96 of the busy time); --json is schema-valid with both columns > 0."""
    rc, text, err = run(*GPT3_PIPE)
    assert rc == 0, err
    assert "pipeline bubble" in text and "pipeline comm" in text
    assert "across slices data=1 x pipeline=2 x fsdp=1" in text
    assert "pipeline: 2 stages, 2 microbatches, circular schedule (48 repeats of 1 blocks a stage)" in text
    rc, out, _ = run(*GPT3_PIPE, "--json")
    doc = json.loads(out)
    valid("step", doc)
    b = doc["strategies"]["fully-sharded"]["breakdown"]
    assert b["pipeline_bubble_s"] > 0 and b["pipeline_comm_s"] > 0
    assert doc["mesh"]["pipeline"]["bubble_fraction"] == 1 / 96 and doc["mesh"]["dcn_mesh"]["pipeline"] == 2
    assert doc["mesh"]["comm"]["pipeline"]["dcn_collectives"] > 0


def test_pipeline_options_and_refusals_are_one_line():
    rc, out, _ = run(*GPT3_PIPE, "--pipeline-schedule", "1f1b", "--pipeline-microbatches", "2", "--json")
    assert rc == 0 and json.loads(out)["mesh"]["pipeline"]["schedule"] == "1f1b"
    rc, _, err = run(*GPT3_PIPE, "--pipeline-microbatches", "3")
    assert rc == 2 and err.count("\n") == 1 and "--pipeline-microbatches" in err and "multiple of the 2" in err
    rc, _, err = run("step", "resnet50", "-t", "tpu-v3-32", "--mesh", "data=8,pipeline=4")
    assert rc == 2 and err.count("\n") == 1 and "--mesh" in err and "transformer blocks" in err


def test_describe_topology_shows_the_pipeline_group():
    rc, out, _ = run("describe", "topology", "tpu-v5p-256", "--megacore", "--mesh", "pipeline=4,fsdp=8,tensor=4")
    assert rc == 0
    assert "pipeline=4: z[4 of stride 2, 2-hop ring edges]" in out and "one pipeline group: chips 0, 32, 64, 96" in out


def test_plan_mesh_shows_the_pipeline_group_and_refuses_as_step_does():
    rc, out, _ = run("plan", "default", "-t", "torus:2x4", "--mesh", "fsdp=2,pipeline=4")
    assert rc == 0 and "one pipeline group: chips 0, 2, 4, 6" in out
    rc, _, err = run("plan", "default", "-t", "torus:2x4", "--mesh", "fsdp=2,pipeline=4", "--pipeline-microbatches", "6")
    assert rc == 2 and err.count("\n") == 1 and "--pipeline-microbatches" in err


def test_plan_search_over_two_slices_tries_two_stages_and_is_schema_valid():
    rc, out, _ = run("plan", "default", "-t", "tpu-v5p-16", "--megacore", "--slices", "2", "--search", "--remat",
                     "none", "--json")
    assert rc == 0
    doc = json.loads(out)
    valid("plan-search", doc)
    assert {c["dcn_mesh"] for c in doc["candidates"]} == {"data=2", "fsdp=2", "pipeline=2"}
    piped = [c for c in doc["candidates"] if c["dcn_mesh"] == "pipeline=2" and c["status"] == "ok"]
    assert piped and all(c["breakdown"]["pipeline_bubble_s"] > 0 for c in piped)
    assert doc["options"]["pipeline_schedule"] == "circular"
