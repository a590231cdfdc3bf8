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

ROOT = Path(__file__).resolve().parent.parent


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
