"""`plan --search` tells the truth (issue 47, item 3; issue 45's bounds): every option plan shares
with step reaches the candidates (the winner's numbers are step's on its mesh), one global batch,
ties and headroom said, what cannot run skipped or refused in one line, a search that stops."""

import json

import jsonschema
import pytest

from wus_sim.inputs.shipped import schema_path

from run_cli import run


def valid(doc):
    jsonschema.Draft202012Validator(json.loads(schema_path("plan-search", 1).read_text())).validate(doc)


V5P = ("llama3-8b", "-t", "tpu-v5p-8", "--megacore")
"""Four v5p chips: a small search (48 candidates) in which most candidates fit."""


def search(*options, slice_=V5P):
    rc, out, err = run("plan", *slice_, "--search", "--json", *options)
    assert rc == 0, err
    doc = json.loads(out)
    valid(doc)
    return doc


def step_of(doc, c, *options, slice_=V5P):
    """step on candidate *c*'s mesh, strategy, remat and the search's global batch, with *options*."""
    remat = ("--remat-policy", c["remat_policy"]) if c["remat_policy"] else ("--remat", c["remat"])
    dcn = ("--dcn-mesh", c["dcn_mesh"]) if c["dcn_mesh"] else ()
    rc, out, err = run("step", *slice_, "--mesh", c["mesh"], *dcn, "--strategy", c["strategy"], *remat,
                       "--global-batch", str(doc["global_batch"]), "--json", *options)
    assert rc == 0, err
    (per,) = json.loads(out)["strategies"].values()
    return per


# each option plan shares with step, and the same words given to step (None: the option only
# narrows the search, step gets the winner's mesh and remat anyway)
OPTIONS = [
    ((), ()),
    (("--quantization", "int8"), ("--quantization", "int8")),
    (("--activation-model", "unfused"), ("--activation-model", "unfused")),
    (("--software-stack", "tf1-tpuestimator-2019"), ("--software-stack", "tf1-tpuestimator-2019")),
    (("--bucket-MiB", "4"), ("--bucket-MiB", "4")),
    (("--grad-dtype", "bf16"), ("--grad-dtype", "bf16")),
    (("--remat-policy", "minimal"), ()),
    (("--mesh", "tensor=2", "--no-collective-matmul"), ("--no-collective-matmul",)),
    (("--mesh", "fsdp=2"), ()),
    (("--replicas", "2"), ()),
    (("--remat", "full"), ()),
    (("--global-batch", "8"), ()),
    (("--per-replica-batch", "2"), ()),
    (("--calibration", "none"), ("--calibration", "none")),
    (("--slices", "2"), ()),
    (("--dcn-mesh", "fsdp=2", "--quantization", "int8"), ("--quantization", "int8")),
]


@pytest.mark.parametrize("given,to_step", OPTIONS, ids=[" ".join(g) or "defaults" for g, _ in OPTIONS])
def test_the_winner_is_what_step_prints_on_its_mesh(given, to_step):
    doc = search(*given)
    ok = [c for c in doc["candidates"] if c["status"] == "ok"]
    assert ok
    for c in ok[:2] + ok[-1:]:  # the winner, the runner-up and the slowest
        per = step_of(doc, c, *to_step)
        assert per["step_time_s"] == c["step_time_s"]
        assert per["memory_bytes"]["peak"] == c["mem_peak_bytes"]
        assert {k: per["breakdown"][k] for k in c["breakdown"]} == c["breakdown"]


def test_each_option_changes_the_ranking_numbers():
    base = {(c["mesh"], c["strategy"], c["remat"]): c["step_time_s"] for c in search()["candidates"]}
    for given in (("--quantization", "int8"), ("--software-stack", "tf1-tpuestimator-2019"),
                  ("--grad-dtype", "bf16"), ("--bucket-MiB", "4"), ("--calibration", "none")):
        other = {(c["mesh"], c["strategy"], c["remat"]): c["step_time_s"] for c in search(*given)["candidates"]}
        assert other != base, given


def test_the_narrowing_options_narrow():
    doc = search("--mesh", "tensor=2", "--remat", "layer", "--replicas", "2")
    assert {c["mesh"] for c in doc["candidates"]} == {"data=2,tensor=2", "fsdp=2,tensor=2"}
    assert {c["remat"] for c in doc["candidates"]} == {"layer"}
    doc = search("--remat-policy", "minimal")
    assert {(c["remat"], c["remat_policy"]) for c in doc["candidates"]} == {("none", "minimal")}
    doc = search("--mesh", "data=1,fsdp=4")  # every axis named: one mesh
    assert {c["mesh"] for c in doc["candidates"]} == {"fsdp=4"}


def test_one_global_batch_for_every_candidate():
    # Mixtral: tensor=... used to run one sequence a step beside meshes running the default batch
    for options in ((), ("--global-batch", "16")):
        doc = search(*options)
        g = doc["global_batch"]
        assert g == (16 if options else 4)  # llama3-8b's default: 1 sequence a device x 4 chips
        for c in doc["candidates"]:
            if c["status"] == "ok" or c["reason"] == "memory":
                m = dict(kv.split("=") for kv in c["mesh"].split(","))
                groups = int(m.get("data", 1)) * int(m.get("fsdp", 1))
                assert c["per_replica_batch"] * groups == g
    rc, out, _ = run("plan", *V5P, "--search")
    assert rc == 0 and "global batch 4 for every candidate (the workload's default" in out.splitlines()[0]


def test_a_batch_that_divides_no_mesh_is_a_batch_row():
    doc = search("--global-batch", "2")
    batch = [c for c in doc["candidates"] if c["reason"] == "batch"]
    assert batch and all(c["mesh"] in ("data=4", "fsdp=4", "data=2,fsdp=2") for c in batch)


def test_ties_grouped_with_what_differs():
    doc = search()
    ok = [c for c in doc["candidates"] if c["status"] == "ok"]
    # independently: walk the ranking, a new group where a time is > 0.5 % above the group's first
    expected, first = [], 0
    for i in range(1, len(ok) + 1):
        if i == len(ok) or ok[i]["step_time_s"] > ok[first]["step_time_s"] * 1.005:
            if i - 1 > first:
                expected.append([first + 1, i])
            first = i
    assert [g["ranks"] for g in doc["ties"]] == expected and expected
    for g in doc["ties"]:
        members = ok[g["ranks"][0] - 1:g["ranks"][1]]
        assert all(c["tie"] == g["ranks"][0] for c in members)
        assert set(g["differ"]) == {k for k in ("mesh", "dcn_mesh", "strategy", "remat")
                                    if len({c[k] for c in members}) > 1}
    rc, out, _ = run("plan", *V5P, "--search")
    assert "ties #" in out and "= #" in out


def test_picks_near_the_hbm_limit_are_marked():
    doc = search()
    for c in doc["candidates"]:
        if c["status"] == "ok":
            assert c["near_limit"] == (c["mem_peak_bytes"] > 0.95 * c["mem_capacity_bytes"])
    assert any(c["near_limit"] for c in doc["candidates"])  # data=4 sharded none: 94.2 of 95.7 GiB
    assert not any(c["near_limit"] for c in search("--hbm-headroom", "0")["candidates"])
    rc, _, err = run("plan", *V5P, "--search", "--hbm-headroom", "1")
    assert rc == 2 and err.count("\n") == 1 and "--hbm-headroom" in err


@pytest.mark.parametrize("argv,option,says", [
    (("llama3-8b", "-t", "tpu-v5p-128", "--megacore", "--mesh", "tensor=64"), "--mesh",
     "splits attention 64 ways, but llama3-8b has 32 query heads"),
    (V5P + ("--spatial-ways", "2"), "--spatial-ways", "is not a mesh"),
    (V5P + ("--replica", "1"), "--replica", "shapes plan's own table"),
    (V5P + ("--max-padding-ratio", "2"), "--max-padding-ratio", "shapes plan's own table"),
    (V5P + ("--software-stack", "no-such-stack"), "--software-stack", "has no fitted costs"),
    (V5P + ("--mesh", "tensor=3"), "--mesh", "fixes no mesh"),
    (V5P + ("--replicas", "3"), "--replicas", "fixes no mesh"),
    (V5P + ("--remat", "layer", "--remat-policy", "minimal"), "--remat-policy", "not with remat layer"),
])
def test_what_a_search_cannot_take_is_one_line(argv, option, says):
    rc, out, err = run("plan", *argv, "--search")
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"wus-sim plan: error: {option}: ") and says in err, err


def test_a_remat_the_workload_cannot_run_is_skipped_with_a_word():
    rc, out, err = run("plan", "transformer-big", "-t", "torus:2x2", "--search", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    valid(doc)
    assert "selective" in doc["skipped_remats"] and "selective" not in doc["options"]["remats"]
    assert {c["remat"] for c in doc["candidates"]} == {"none", "layer", "full"}
    rc, out, _ = run("plan", "transformer-big", "-t", "torus:2x2", "--search")
    assert "remat selective not searched: needs what each layer keeps" in out


def test_check_exits_non_zero_when_nothing_fits():
    argv = ("plan", "llama3-8b", "-t", "torus:2x2", "--search", "--global-batch", "4")
    rc, out, err = run(*argv)
    assert rc == 0 and "0 fit" in out
    rc, out, err = run(*argv, "--check")
    assert rc == 2 and "0 fit" in out and err.count("\n") == 1 and "no candidate fits (--check)" in err
    rc, _, _ = run("plan", *V5P, "--search", "--check")
    assert rc == 0


def test_a_time_limit_ranks_what_was_found():
    rc, out, err = run("plan", *V5P, "--search", "--json", "--time-limit", "1e-9", "--progress")
    assert rc == 0, err
    doc = json.loads(out)
    valid(doc)
    assert doc["complete"] is False and doc["stopped"] == "time-limit" and len(doc["candidates"]) == 1
    full = search()
    assert full["complete"] is True and full["stopped"] is None and full["meshes_searched"] == full["meshes"]


def test_ctrl_c_prints_the_best_so_far_and_exits_130(monkeypatch):
    from wus_sim.training.parallelism import mesh_search

    real, calls = mesh_search.simulate_mesh, []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) > 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(mesh_search, "simulate_mesh", interrupted)
    # in this process (a worker's simulate_mesh would raise in the worker; a real Ctrl-C reaches
    # the parent alone: tests/cli/test_plan_search_jobs.py)
    rc, out, err = run("plan", *V5P, "--search", "--json", "--jobs", "1")
    assert rc == 130 and err.strip().endswith("interrupted")
    doc = json.loads(out)
    valid(doc)
    assert doc["stopped"] == "interrupted" and doc["feasible"] >= 1


def test_candidates_are_streamed():
    import inspect

    from wus_sim.training.parallelism.mesh_search import Search

    s = Search("llama3-8b", "torus:2x2", global_batch=4)
    stream = s.candidates()
    assert inspect.isgenerator(stream)
    first = next(stream)
    assert first.mesh and s.size == 48
