"""One grammar for every command (issue 28, item 3): the closest known name, key or option in
every "unknown" error; paired boolean flags; one ``--json`` wording; ``list --json``; ``plan``
taking ``step``'s options; ``collective --topology``; ``validate --no-plots``.

Expected names come from the files on disk and from the parser's own option table, not from
the code under test.
"""

import json
from pathlib import Path

import pytest

from wus_sim.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own exits (usage errors)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, meant, env", [
    (["step", "resnet50", "-t", "tpu-v3-51"], "tpu-v3-512", "WUS_SIM_TOPOLOGY_PATH"),
    (["step", "resnet5", "-t", "tpu-v3-32"], "resnet50", "WUS_SIM_WORKLOAD_PATH"),
    (["step", "resnet50", "-t", "tpu-v3-32", "-o", "lamm"], "lamb", "WUS_SIM_OPTIMIZER_PATH"),
    (["run", "quickstrat"], "quickstart", None),
    (["describe", "topology", "tpu-v3-3"], "tpu-v3-32", "WUS_SIM_TOPOLOGY_PATH"),
])
def test_unknown_names_say_which_was_meant_and_where_to_add_one(capsys, argv, meant, env):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert f"did you mean {meant}" in err
    assert len(err.strip().splitlines()) == 1
    if env:
        assert env in err


def test_unknown_experiment_key_says_which_was_meant(capsys, tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("name: x\nworkloads: [resnet50]\ntopologie: [tpu-v3-32]\n")
    code, _, err = run_cli(capsys, "run", str(f), "--out", str(tmp_path / "out"))
    assert code == 2 and "topologie" in err and "did you mean topologies?" in err


def test_unknown_point_parameter_says_which_was_meant(capsys, tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("name: x\nworkloads: [resnet50]\ntopologies: [tpu-v3-32]\nsweep:\n  per_replica_bach: [4]\n")
    code, _, err = run_cli(capsys, "run", str(f), "--out", str(tmp_path / "out"))
    assert code == 2 and "did you mean per_replica_batch?" in err


def test_unknown_option_and_choice_say_which_was_meant(capsys):
    code, _, err = run_cli(capsys, "step", "resnet50", "-t", "tpu-v3-32", "--bucket-mb", "4")
    assert code == 2 and "--bucket-mb (did you mean --bucket-MiB?)" in err
    code, _, err = run_cli(capsys, "list", "toplogies")
    assert code == 2 and "did you mean topologies?" in err
    code, _, err = run_cli(capsys, "stpe")
    assert code == 2 and "did you mean step?" in err


def _subparsers():
    parser = build_parser()
    return parser.commands


def test_every_boolean_flag_has_its_no_form():
    import argparse

    aliases = {("validate", "--no-plot")}  # the old spelling of --no-plots, hidden, kept for one release
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if action.nargs != 0 or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            longs = [o for o in action.option_strings if o.startswith("--")]
            if any((name, o) in aliases for o in longs):
                continue
            for o in longs:
                if not o.startswith("--no-"):
                    assert "--no-" + o[2:] in action.option_strings, f"{name} {o} has no --no- form"


def test_one_json_wording_on_every_command_that_prints():
    helps = {name: next((a.help for a in sub._actions if "--json" in a.option_strings), None)
             for name, sub in _subparsers().items()}
    assert {n for n, h in helps.items() if h is None} <= {"run", "calibrate", "docs", "import-workload"}  # they print files or text
    assert len({h for h in helps.values() if h is not None}) == 1, helps


def test_collective_takes_topology_as_step_does_and_the_positional_still(capsys):
    args = ["--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB", "--json"]
    code, new, _ = run_cli(capsys, "collective", "-t", "torus:8x8", *args)
    assert code == 0
    code, old, _ = run_cli(capsys, "collective", "torus:8x8", *args)
    assert code == 0
    drop = lambda d: {k: v for k, v in d.items() if k != "wall_s"}
    assert drop(json.loads(new)) == drop(json.loads(old))
    code, _, err = run_cli(capsys, "collective", "--topology", "torus:8x8", "torus:4x4", *args)
    assert code == 2 and "given twice" in err
    code, _, err = run_cli(capsys, "collective", *args)
    assert code == 2 and "--topology" in err and "required" in err


@pytest.mark.parametrize("argv, plots", [([], True), (["--no-plots"], False), (["--no-plot"], False),
                                         (["--no-plots", "--plots"], True)])
def test_validate_and_run_spell_no_plots_alike(argv, plots):
    parser = build_parser()
    assert parser.parse_args(["validate", *argv]).plots is plots
    if "--no-plot" not in argv:
        assert parser.parse_args(["run", "quickstart", *argv]).plots is plots


def test_list_json_is_the_lines_as_a_list(capsys):
    for kind in ("topologies", "workloads", "optimizers", "experiments"):
        code, text, _ = run_cli(capsys, "list", kind)
        assert code == 0
        code, js, _ = run_cli(capsys, "list", kind, "--json")
        assert code == 0 and json.loads(js) == text.split()
    assert "tpu-v3-512" in json.loads(run_cli(capsys, "list", "topologies", "--json")[1])


def _plan(capsys, *argv):
    code, out, err = run_cli(capsys, "plan", "transformer-big", "-t", "tpu-v3-128", "--json", *argv)
    assert code == 0, err
    return json.loads(out)


def test_plan_takes_steps_batch_slices_and_calibration(capsys):
    base = _plan(capsys)
    assert _plan(capsys, "--global-batch", str(4 * base["replicas"]))["per_replica_batch"] == 4
    two = _plan(capsys, "--slices", "2", "--per-replica-batch", "4")
    assert two["replicas"] == 2 * base["replicas"] and two["multislice"]["slices"] == 2
    # the same slices and batch as step takes them: the same replicas and batches
    code, out, _ = run_cli(capsys, "step", "transformer-big", "-t", "tpu-v3-128", "--slices", "2",
                           "--global-batch", str(8 * two["replicas"]), "--json", "--steps", "2", "-s", "sharded")
    step = json.loads(out)
    assert (step["replicas"], step["per_replica_batch"]) == (two["replicas"], 8)
    assert _plan(capsys, "--slices", "2", "--global-batch", str(8 * two["replicas"]))["per_replica_batch"] == 8
    none = _plan(capsys, "--calibration", "none")
    assert none["calibration"] != base["calibration"]
    assert none["compute"]["fwd_time_s"] != base["compute"]["fwd_time_s"]


def test_plan_takes_the_placement_options_as_step_does(capsys):
    # --megacore, --spatial-ways and --remat (issue 25) beside --slices and the batch (issue 28)
    argv = ["-t", "tpu-v4-128", "--megacore", "--slices", "2", "--per-replica-batch", "2", "--remat", "layer"]
    code, out, err = run_cli(capsys, "plan", "bert-large", *argv, "--json")
    assert code == 0, err
    plan = json.loads(out)
    code, out, err = run_cli(capsys, "step", "bert-large", *argv, "--json", "--steps", "2", "-s", "sharded")
    assert code == 0, err
    step = json.loads(out)
    assert plan["replicas"] == step["replicas"] == 2 * 64  # one replica per chip, two slices
    assert (plan["per_replica_batch"], step["per_replica_batch"]) == (2, 2)
    assert _plan(capsys, "--spatial-ways", "2")["replicas"] == _plan(capsys)["replicas"] // 2
    parser = build_parser()
    for command in ("plan", "step"):
        base = [command, "bert-large", "-t", "tpu-v4-128"]
        assert parser.parse_args(base + ["--megacore", "--no-megacore"]).megacore is False
        assert parser.parse_args(base + ["--megacore"]).megacore is True


def test_unknown_option_of_a_dashed_command_says_which_was_meant(capsys):
    code, _, err = run_cli(capsys, "import-workload", "config.json", "--sequence-lenght", "8")
    assert code == 2 and "did you mean --sequence-length?" in err


def test_list_json_has_the_renamed_v4_slices(capsys):
    names = json.loads(run_cli(capsys, "list", "topologies", "--json")[1])
    assert {"tpu-v4-128", "tpu-v4-1024", "tpu-v5p-128", "tpu-v6e-256"} <= set(names)
    # every Cloud TPU name resolves: tpu-v4-512 is Google's v4-512 (256 chips), and says what it used to be
    assert {"tpu-v4-64", "tpu-v4-512"} <= set(names)
    # (the stderr note that it meant another slice before wus-sim 0.2: tests/hardware/test_todays_tpus.py)
    code, out, _ = run_cli(capsys, "step", "resnet50", "-t", "tpu-v4-512")
    assert code == 0 and "tpu-v4-512" in out
