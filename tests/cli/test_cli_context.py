"""The context axis on the command line: `step --mesh ...,context=C` at 128k tokens (text and JSON),
`describe topology --mesh` showing its group, MaxText's ici_context_parallelism, one-line refusals."""

import json
import os

import jsonschema
import pytest

from wus_sim.inputs.shipped import schema_path

from helpers.run_cli import run

HF = os.path.join(os.path.dirname(__file__), "..", "data", "hf_configs", "llama3-8b.json")


def valid(name, doc):
    jsonschema.Draft202012Validator(json.loads(schema_path(name, 1).read_text())).validate(doc)


@pytest.fixture(scope="module")
def llama_128k(tmp_path_factory):
    """Llama-3-8B at 131,072 tokens a sequence: how the tool sets a sequence length (import-workload)."""
    out = tmp_path_factory.mktemp("ctx") / "llama3-8b-128k.yaml"
    rc, _, err = run("import-workload", HF, "--sequence-length", "131072", "--name", "llama3-8b", "--out", str(out))
    assert rc == 0, err
    return str(out)


STEP = ("-t", "tpu-v5p-128", "--megacore", "--mesh", "fsdp=16,context=4", "--per-replica-batch", "1",
        "--remat", "full")


def test_step_at_128k_tokens_with_a_context_axis_fits_and_prints_its_comm(llama_128k):
    rc, out, err = run("step", llama_128k, *STEP)
    assert rc == 0, err
    assert "131,072 tokens per sequence" in out  # the whole sequence, not a device's quarter
    assert "mesh data=1 x fsdp=16 x context=4 x tensor=1" in out
    assert "one context group: chips 0, 1, 2, 3" in out
    assert "context collectives (each attention layer's K/V all-gathers and gradient reduce-scatter): 96 per step, " \
           "48 GiB" in out  # 32 layers x 3 x 2 x 131,072 x 8 x 128 x 2 bytes
    assert "context K/V comm" in out and "infeasible" not in out


def test_step_json_has_context_comm_s(llama_128k):
    rc, out, err = run("step", llama_128k, *STEP, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    valid("step", doc)
    b = doc["strategies"]["fully-sharded"]["breakdown"]
    c = doc["mesh"]["comm"]["context"]
    assert b["context_comm_s"] == pytest.approx(c["busy_s"], rel=1e-12) and b["context_comm_s"] > 0
    assert doc["mesh"]["mesh"]["context"] == 4 and doc["mesh"]["groups"]["context"] == [0, 1, 2, 3]


def test_a_mesh_without_context_reports_no_context_line():
    rc, out, _ = run("step", "llama3-8b", "-t", "tpu-v5p-128", "--megacore", "--mesh", "fsdp=16,tensor=4",
                     "--global-batch", "64", "--remat", "layer")
    assert rc == 0 and "context" not in out


def test_describe_shows_the_context_group():
    rc, out, _ = run("describe", "topology", "tpu-v5p-128", "--megacore", "--mesh", "fsdp=16,context=4")
    assert rc == 0
    assert "context=4: x" in out and "one context group: chips 0, 1, 2, 3" in out


def test_maxtext_reads_ici_context_parallelism():
    """MaxText's ici_context_parallelism=4 with fsdp -1 on 64 chips: fsdp=16,context=4; its batch
    (per_device_batch_size 1 x 64 devices) over the 16 data-parallel groups, 4 sequences each."""
    rc, out, err = run("step", "-t", "tpu-v5p-128", "--json", "--maxtext",
                       "model_name=llama3-8b max_target_length=8192 per_device_batch_size=1 ici_context_parallelism=4")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["maxtext"]["point"]["mesh"] == "fsdp=16,context=4"
    assert doc["global_batch"] == 64 and doc["per_replica_batch"] == 4


@pytest.mark.parametrize("argv, says", [
    (("step", "llama3-8b", "-t", "tpu-v5p-128", "--megacore", "--mesh", "fsdp=8,context=8", "--dcn-mesh",
      "context=2"), "--dcn-mesh: 'context=2' puts context across slices, which is not modelled"),
    (("step", "-t", "tpu-v5p-128", "--maxtext", "model_name=llama3-8b max_target_length=8192 "
      "per_device_batch_size=1 num_slices=2 dcn_context_parallelism=2"), "dcn_context_parallelism=2"),
    (("step", "-t", "tpu-v5p-128", "--maxtext", "model_name=llama3-8b max_target_length=8192 "
      "per_device_batch_size=1 ici_context_parallelism=4 context_parallel_strategy=ring"),
     "context_parallel_strategy=ring"),
    (("step", "-t", "tpu-v5p-128", "--maxtext", "model_name=llama3-8b max_target_length=8192 "
      "per_device_batch_size=1 ici_context_parallelism=4 context_parallel_load_balance=false"),
     "context_parallel_load_balance=false"),
])
def test_what_is_not_modelled_is_one_line(argv, says):
    rc, out, err = run(*argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and says in err, err


def test_a_context_that_does_not_divide_the_sequence_is_one_line(tmp_path):
    out = tmp_path / "llama-8200.yaml"
    assert run("import-workload", HF, "--sequence-length", "8200", "--out", str(out))[0] == 0
    for cmd in (("step", str(out)), ("plan", str(out))):
        rc, _, err = run(*cmd, "-t", "tpu-v5p-128", "--megacore", "--mesh", "fsdp=4,context=16")
        assert rc == 2 and err.count("\n") == 1 and "context must divide the tokens per sequence" in err, err


def test_the_search_at_128k_tokens_ranks_a_context_mesh_first(llama_128k):
    """16 sequences of 131,072 tokens on 64 chips: without a context axis a chip holds at least one whole
    sequence's activations; the search's context sizes (2, 4, 8: the sequence is past 32k tokens) win."""
    rc, out, err = run("plan", llama_128k, "-t", "tpu-v5p-128", "--megacore", "--search", "--global-batch", "16",
                       "--json")
    assert rc == 0, err
    doc = json.loads(out)
    valid("plan-search", doc)
    ok = [c for c in doc["candidates"] if c["status"] == "ok"]
    assert "context=" in ok[0]["mesh"] and ok[0]["breakdown"]["context_comm_s"] > 0
    assert {c["mesh"].split("context=")[1].split(",")[0] for c in doc["candidates"] if "context=" in c["mesh"]} \
        == {"2", "4", "8"}
