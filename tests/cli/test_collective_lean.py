"""``wus-sim collective`` on a uniform torus answered before numpy loads
(wus_sim.cli.collective_lean): the same JSON document as the full command, key for key and bit for
bit but wall_s, and the same table but the wall time; every other command line left to the full
command; and, in a fresh interpreter, no numpy, YAML, pandas, SimPy or argparse imported on that
path."""

import json
import os
import subprocess
import sys

import pytest

from wus_sim import cli
from wus_sim.cli import collective_lean, main

BENCH = ["-t", "torus:32x32", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB", "--link-GBps", "100",
         "--hop-latency-us", "1", "--json"]
HEAVY = ("numpy", "yaml", "pandas", "simpy", "argparse", "matplotlib", "scipy", "json")


def _both(capsys, monkeypatch, words):
    """(lean document, full document) of ``collective WORDS``."""
    assert main(["collective", *words]) == 0
    lean = capsys.readouterr().out
    with monkeypatch.context() as m:
        m.setattr(cli, "_lean", lambda words: None)
        assert main(["collective", *words]) == 0
    full = capsys.readouterr().out
    return lean, full


def _without_wall(text):
    doc = json.loads(text)
    doc.pop("wall_s")
    return doc


COMMANDS = [
    BENCH,
    BENCH + ["--routing", "store-and-forward"],
    BENCH + ["--bidirectional", "--chunks", "4"],
    BENCH + ["--no-bidirectional", "--engine", "fast", "--group", "y"],
    ["--json", "--op", "reduce-scatter", "--algorithm", "ring", "--group", "x", "-t", "torus:5x3x4", "--size",
     "1000", "--link-GBps", "37.5", "--hop-latency-us", "0", "--chunks", "3"],
    ["-t", "torus:7", "--op", "all-gather", "--algorithm", "bidir-ring", "--size", "1.5GB", "--link-GBps", "0.25",
     "--hop-latency-us", "2.5e1", "--json", "--no-reduce"],
    ["-t", "torus:4x4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "3", "--link-GBps", "1e3",
     "--hop-latency-us", ".5", "--json", "--group", "z"],
    ["-t", "torus:256x256", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB", "--link-GBps", "100",
     "--hop-latency-us", "1", "--json"],
    ["-t", "torus:16x8", "--op", "all-reduce", "--algorithm", "ring", "--size", "64MiB", "--link-GBps", "100",
     "--hop-latency-us", "1", "--json"],                          # the whole-slice snake ring
    ["-t", "torus:3x5x3", "--op", "reduce-scatter", "--algorithm", "bidir-ring", "--size", "1GiB", "--link-GBps",
     "45", "--hop-latency-us", "0.7", "--json", "--chunks", "2"],
]


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w))
def test_the_same_document_as_the_full_command(capsys, monkeypatch, words):
    assert collective_lean._request(words) is not None  # the lean path answers it
    lean, full = _both(capsys, monkeypatch, words)
    assert list(json.loads(lean)) == list(json.loads(full))  # same keys, same order
    assert _without_wall(lean) == _without_wall(full)
    # the same text but the wall time: every float printed with the same digits
    assert lean.split('"wall_s"')[0] == full.split('"wall_s"')[0]
    assert lean.split('"wall_s"')[1].split(",", 1)[1] == full.split('"wall_s"')[1].split(",", 1)[1]


@pytest.mark.parametrize("words", [c for c in COMMANDS if "256x256" not in c[1]], ids=lambda w: " ".join(w))
def test_the_same_table_as_the_full_command(capsys, monkeypatch, words):
    words = [w for w in words if w != "--json"]
    assert collective_lean._request(words) is not None
    lean, full = _both(capsys, monkeypatch, words)
    engine = [i for i, line in enumerate(full.splitlines()) if line.startswith("engine ")]
    assert len(engine) == 1 and lean.splitlines()[engine[0]].split(" in ")[0] == full.splitlines()[engine[0]].split(" in ")[0]
    assert [l for i, l in enumerate(lean.splitlines()) if i != engine[0]] == \
        [l for i, l in enumerate(full.splitlines()) if i != engine[0]]


@pytest.mark.parametrize("value", [None, True, False, 0, -3, 2**70, 0.1, 1e-300, 5e-324, 1.7976931348623157e308, 2.0**53,
                                   -0.0, "", "torus:32x32", "all-reduce", "a\"b", "é", "\n", float("inf"), [1]])
def test_its_json_writer_is_dumps_strict(value):
    from wus_sim.inputs.errors import ConfigError
    from wus_sim.inputs.strict_json import dumps_strict

    record = {"schema_version": 1, "key_b": value, "z": "x"}
    try:
        expected = dumps_strict(record)
    except ConfigError:
        with pytest.raises(ConfigError):
            collective_lean._flat_json(record)
        return
    assert collective_lean._flat_json(record) == expected


def test_names_it_keeps_are_the_plans():
    from wus_sim.collectives import EXCHANGE_ALGORITHMS

    assert collective_lean._EXCHANGE_ALGORITHMS == EXCHANGE_ALGORITHMS


@pytest.mark.parametrize("words", [
    [w if w != "--op" else "--op=all-reduce" for w in BENCH],     # --op=VALUE
    BENCH + ["--json"],                                           # an option twice
    ["torus:32x32"] + BENCH[2:],                                  # the positional topology
    [w if w != "--algorithm" else "--alg" for w in BENCH],        # an abbreviation
    BENCH + ["--help"],
    BENCH + ["--reduce"],
    BENCH + ["--failed-links", "1"],
    BENCH + ["--engine", "simpy"],
    BENCH + ["--routing", "wormhole"],
    BENCH + ["--group", "0,1,2"],
    BENCH + ["--group", "X"],                                     # the full command lowercases it
    BENCH + ["--chunks", "0"],
    BENCH + ["--chunks", "1_0"],
    [w if w != "100" else "nan" for w in BENCH],
    [w if w != "100" else "0" for w in BENCH],
    [w if w != "100" else "1e7" for w in BENCH],                  # above the declared maximum
    [w if w != "1" else "-1" for w in BENCH],
    [w if w != "64MiB" else "64M" for w in BENCH],
    [w if w != "torus:32x32" else "mesh:32x32" for w in BENCH],
    [w if w != "torus:32x32" else "tpu-v3-32" for w in BENCH],
    [w if w != "torus:32x32" else "torus:0x4" for w in BENCH],
    [w if w != "torus:32x32" else "torus:512x512" for w in BENCH],  # above the chip limit
    [w for w in BENCH if w not in ("--link-GBps", "100")],        # the chip file's default
])
def test_other_command_lines_go_to_the_full_command(words):
    assert collective_lean._request(words) is None


def test_not_with_a_topology_path(monkeypatch, tmp_path):
    """Chip files of the user's are read (and checked) by the full command."""
    monkeypatch.setenv(collective_lean.TOPOLOGY_PATH_ENV, str(tmp_path))
    assert collective_lean._request(BENCH) is None


def test_errors_are_the_full_commands(capsys):
    assert main(["collective", *[w if w != "100" else "0" for w in BENCH]]) == 2
    assert "--link-GBps" in capsys.readouterr().err


def test_its_ranges_and_names_are_the_full_commands():
    """What the lean path accepts, the full command accepts: the same declared bounds."""
    from wus_sim.hardware import topology_files
    from wus_sim.training.parameters.params import POINT_KEYS, default_of

    assert collective_lean.HOP_LATENCY_US_MAX == topology_files.OVERRIDE_RANGES["hop_latency_us"][1] \
        == POINT_KEYS["hop_latency_us"].maximum
    from wus_sim.inputs.limits import RATE_RANGES

    assert RATE_RANGES["link_GBps"][:2] == (POINT_KEYS["link_GBps"].minimum, POINT_KEYS["link_GBps"].maximum)
    assert collective_lean.TOPOLOGY_PATH_ENV == topology_files.TOPOLOGY_PATH_ENV
    from wus_sim.hardware.routings import DEFAULT_ROUTING

    assert default_of("routing") == DEFAULT_ROUTING


def _imported(words):
    """Top-level modules a fresh ``python -X importtime -m wus_sim WORDS`` imports, and its stdout."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "wus_sim", *words], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    names = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    return names, out.stdout


def test_the_lean_path_imports_no_numpy_yaml_pandas_simpy_or_argparse():
    names, stdout = _imported(["collective", *BENCH])
    assert "wus_sim" in names and json.loads(stdout)["engine"] == "fast"
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
    names, stdout = _imported(["collective", *BENCH[:-1]])  # the table
    assert not names & set(HEAVY) and "fast: 126976 message hops" in stdout
    # the check can fail: the full command (a mesh) imports numpy and argparse
    names, _ = _imported(["collective", *[w if w != "torus:32x32" else "mesh:8x8" for w in BENCH]])
    assert {"numpy", "argparse"} <= names
