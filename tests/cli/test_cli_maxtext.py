"""``--maxtext``, ``--maxtext-config``, ``-v`` and a mesh axis of -1 on the command line (step, plan,
plan --search): exit codes, one-line errors, what is listed, and that the run is the one asked
for (its numbers equal to the same step given by wus-sim's own options)."""

import json

import pytest

from helpers.run_cli import run

LLAMA = "model_name=llama3-8b max_target_length=8192 per_device_batch_size=1"
SLICE = "tpu-v5p-16"  # 8 chips: a MaxText device is a chip (megacore)


def _json(*argv):
    rc, out, err = run(*argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_a_maxtext_step_is_the_same_step_given_by_options():
    a = _json("step", "-t", SLICE, "--maxtext", f"{LLAMA} ici_tensor_parallelism=2 remat_policy=minimal")
    # by hand: 8 chips, tensor 2, fsdp -1 = 4; 1 a device = 8; base.yml's AdamW with clipping, replicated data axis
    b = _json("step", "llama3-8b", "-t", SLICE, "--megacore", "--mesh", "fsdp=4,tensor=2", "--global-batch", "8",
              "--remat-policy", "minimal", "--optimizer", "adamw+clip", "--strategy", "replicated")
    assert a["strategies"] == b["strategies"] and a["global_batch"] == b["global_batch"] == 8
    assert a["maxtext"]["point"]["mesh"] == "fsdp=4,tensor=2" and "maxtext" not in b


def test_keys_not_modelled_exit_2_in_one_line_naming_each():
    rc, out, err = run("step", "-t", SLICE, "--maxtext", f"{LLAMA} gradient_accumulation_steps=2 mu_dtype=bfloat16")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "gradient_accumulation_steps=2" in err and "mu_dtype=bfloat16" in err and "not modelled" in err


def test_an_unknown_key_exits_2_naming_the_closest():
    rc, out, err = run("plan", "-t", SLICE, "--maxtext", f"{LLAMA} remat_polcy=full")
    assert rc == 2 and err.count("\n") == 1 and "did you mean remat_policy" in err


def test_v_lists_what_changes_nothing_and_what_was_skipped():
    words = f"python3 -m MaxText.train MaxText/configs/base.yml {LLAMA} steps=5 dataset_type=synthetic --xla=1"
    rc, out, err = run("plan", "-t", SLICE, "--maxtext", words, "-v")
    assert rc == 0, err
    lines = err.splitlines()
    assert "wus-sim plan: maxtext: steps=5: how many steps" in "\n".join(lines)
    assert any(line.startswith("wus-sim plan: maxtext: --xla=1: a launcher's option") for line in lines)
    assert sum(": the launcher's command" in line for line in lines) == 3  # python3, -m, MaxText.train
    rc, out, quiet = run("plan", "-t", SLICE, "--maxtext", words)
    assert quiet == "" and "2 MaxText keys change nothing in a step here and 5 words were skipped (-v lists them)" in out
    assert "MaxText run: model_name=llama3-8b -> llama3-8b" in out and "is a chip" in out


def test_config_file_then_words_later_keys_winning(tmp_path):
    cfg = tmp_path / "run.yml"
    cfg.write_text("model_name: llama3-8b\nmax_target_length: 8192\nper_device_batch_size: 4\nremat_policy: minimal\n")
    # the words come after every config file, wherever they stand on the command line
    doc = _json("plan", "-t", SLICE, "--maxtext", "per_device_batch_size=2", "--maxtext-config", str(cfg))
    assert doc["maxtext"]["point"]["global_batch"] == 2 * 8 and doc["maxtext"]["point"]["remat_policy"] == "minimal"
    doc = _json("plan", "-t", SLICE, "--maxtext-config", str(cfg), "--maxtext", "per_device_batch_size=2",
                "--maxtext", "per_device_batch_size=3")
    assert doc["maxtext"]["point"]["global_batch"] == 3 * 8


def test_an_option_contradicting_a_given_key_names_both():
    rc, out, err = run("step", "-t", SLICE, "--maxtext", f"{LLAMA} quantization=int8", "--quantization", "none")
    assert rc == 2 and "--quantization none: contradicts quantization=int8 of the MaxText run" in err
    rc, out, err = run("step", "-t", SLICE, "--maxtext", LLAMA, "--no-megacore")
    assert rc == 2 and "--no-megacore: contradicts the MaxText run" in err
    rc, out, err = run("step", "llama3-70b", "-t", SLICE, "--maxtext", LLAMA)
    assert rc == 2 and "WORKLOAD llama3-70b: contradicts model_name=llama3-8b" in err


def test_an_option_beside_a_default_key_asks_a_what_if():
    doc = _json("plan", "-t", SLICE, "--maxtext", LLAMA, "--quantization", "int8", "--remat-policy", "minimal")
    assert doc["compute"]["quantization"] == "int8" and doc["compute"]["remat_policy"] == "minimal"
    said = {e["key"]: e["why"] for e in doc["maxtext"]["no_effect"]}
    assert said["remat_policy=full"] == "base.yml's default, not used: --remat-policy minimal given"


def test_a_workload_is_required_without_a_maxtext_run():
    rc, out, err = run("step", "-t", SLICE)
    assert rc == 2 and "WORKLOAD: is required" in err and err.count("\n") == 1


def test_the_search_keeps_the_runs_fixed_part():
    doc = _json("plan", "-t", SLICE, "--search", "--maxtext", f"{LLAMA} ici_tensor_parallelism=2")
    assert doc["global_batch"] == 8 and doc["global_batch_source"] == "maxtext"
    assert {c["mesh"].split("tensor=")[1] for c in doc["candidates"]} == {"2"}
    assert doc["options"]["quantization"] == "none" and doc["maxtext"]["megacore"] is True


# ------------------------------------------------------------------ -1: the rest
def test_mesh_minus_one_is_the_rest_of_the_devices():
    a = _json("step", "llama3-8b", "-t", SLICE, "--megacore", "--mesh", "fsdp=-1,tensor=2", "--global-batch", "8")
    b = _json("step", "llama3-8b", "-t", SLICE, "--megacore", "--mesh", "fsdp=4,tensor=2", "--global-batch", "8")
    assert a["strategies"] == b["strategies"] and a["mesh"]["mesh"]["fsdp"] == 4


def test_dcn_mesh_minus_one_is_the_rest_of_the_slices():
    doc = _json("step", "llama3-8b", "-t", SLICE, "--megacore", "--slices", "4", "--mesh", "fsdp=-1",
                "--dcn-mesh", "data=-1,fsdp=2", "--global-batch", "32")
    assert doc["mesh"]["dcn_mesh"] == {"data": 2, "pipeline": 1, "fsdp": 2, "expert": 1}


@pytest.mark.parametrize("mesh, said", [("fsdp=-1,tensor=-1", "at most one axis may be -1"),
                                        ("fsdp=-1,tensor=3", "does not divide"), ("fsdp=-2", "whole number")])
def test_a_bad_minus_one_is_one_line(mesh, said):
    rc, out, err = run("step", "llama3-8b", "-t", SLICE, "--megacore", "--mesh", mesh)
    assert rc == 2 and said in err and err.count("\n") == 1 and "--mesh" in err


def test_search_with_a_minus_one_axis_fixes_the_rest():
    doc = _json("plan", "llama3-8b", "-t", SLICE, "--megacore", "--search", "--mesh", "fsdp=-1,tensor=2",
                "--global-batch", "8")
    assert {c["mesh"] for c in doc["candidates"]} == {"fsdp=4,tensor=2"}


def test_the_pages_examples_run():
    """docs/maxtext.md's commands and its experiment run as shown."""
    import re
    import shlex
    from pathlib import Path

    import yaml

    from wus_sim.experiments.spec import parse_experiment

    page = (Path(__file__).resolve().parents[2] / "docs" / "maxtext.md").read_text(encoding="utf-8")
    commands = re.findall(r"```text\n(wus-sim .*?)```", page, flags=re.S)
    assert len(commands) == 2
    for command in commands:
        words = shlex.split(command.replace("\n", " "))
        rc, out, err = run(*words[1:])
        assert rc == 0, (command, err)
        assert "MaxText run: model_name=llama2-70b -> llama2-70b" in out
    (experiment,) = re.findall(r"```yaml\n(.*?)```", page, flags=re.S)
    assert parse_experiment(yaml.safe_load(experiment)).count() == 2


def test_the_pipeline_keys_are_read():
    """ici/dcn_pipeline_parallelism are the pipeline axis, num_pipeline_microbatches and
    num_layers_per_pipeline_stage its options (the same step given by wus-sim's own); without a pipeline
    axis the two keys change nothing (listed); num_pipeline_repeats away from -1 is refused."""
    run_ = ("model_name=default per_device_batch_size=2 ici_fsdp_parallelism=-1 ici_pipeline_parallelism=2 "
            "num_pipeline_microbatches=4 num_layers_per_pipeline_stage=2")
    a = _json("step", "-t", SLICE, "--maxtext", run_)
    b = _json("step", "default", "-t", SLICE, "--megacore", "--mesh", "fsdp=4,pipeline=2", "--global-batch", "16",
              "--pipeline-microbatches", "4", "--pipeline-layers-per-stage", "2", "--remat-policy", "full",
              "--optimizer", "adamw+clip", "--strategy", "replicated")
    assert a["strategies"] == b["strategies"] and a["mesh"]["pipeline"]["repeats"] == 4  # 16 blocks / (2 x 2)
    assert a["maxtext"]["point"]["pipeline_microbatches"] == 4
    rc, _, err = run("step", "-t", SLICE, "-v", "--maxtext", "model_name=default num_pipeline_microbatches=4")
    assert rc == 0 and "num_pipeline_microbatches=4" in err and "no pipeline axis" in err
    rc, _, err = run("step", "-t", SLICE, "--maxtext", f"{run_} num_pipeline_repeats=2")
    assert rc == 2 and err.count("\n") == 1 and "num_pipeline_repeats=2" in err
