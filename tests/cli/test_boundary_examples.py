"""The examples of issue 35 ("the boundary, round 3"), run as a user would run them: each is one
line on stderr with exit 2 (or the documented exit), no traceback, within 2 s, the previous file
intact, and valid JSON where ``--json`` was asked. Commands run in-process through the CLI's
``main`` (cheap on a shared machine); the few that need a real process (a closed stdout, an
ASCII-only locale, Ctrl-C in the first milliseconds, the memory of a refused import) run one.
"""

import contextlib
import io
import json
import math
import os
from pathlib import Path
import struct
import subprocess
import sys
import time

import jsonschema
import numpy as np
import pytest
import yaml

import wus_sim
from wus_sim.cli import main
from wus_sim.inputs.errors import WusError
from wus_sim.inputs.shipped import schema_path

from measure import run_measured

REPO = Path(__file__).resolve().parents[2]
BUDGET_S = 2.0

LLAMA = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 32, "_name_or_path": "tiny"}


def refuse(constant):
    raise ValueError(f"not JSON: {constant}")


def run(argv, *, budget_s=BUDGET_S):
    """``(exit code, stdout, stderr lines)`` of the command line *argv*, run in-process."""
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    wall_s = time.monotonic() - t0
    lines = [l for l in err.getvalue().splitlines() if l.strip()]
    assert "Traceback" not in err.getvalue(), err.getvalue()[-1500:]
    assert wall_s < budget_s, f"{argv} took {wall_s:.2f} s"
    return code, out.getvalue(), lines


def refused(argv, *words, budget_s=BUDGET_S):
    """Assert *argv* is one error line with exit 2 holding each of *words*; return the line."""
    code, out, lines = run(argv, budget_s=budget_s)
    assert code == 2 and len(lines) == 1, (code, lines)
    assert len(lines[0]) < 800, lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def config(tmp_path, name="config.json", **changes):
    doc = {**LLAMA, **changes}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# ------------------------------------------------------------------ importer limits, checked first
@pytest.mark.parametrize("key,value", [
    ("num_hidden_layers", 10**6), ("num_hidden_layers", 2**31), ("num_hidden_layers", 2**63),
    ("num_hidden_layers", 2 * 10**5), ("hidden_size", 2**53), ("hidden_size", 2**63), ("vocab_size", 2**40),
    ("intermediate_size", 2**60), ("max_position_embeddings", 2**60), ("num_attention_heads", 2**40),
])
def test_sizes_over_the_limits_are_refused_before_any_work(tmp_path, key, value):
    line = refused(["import-workload", config(tmp_path, **{key: value})], key, "limit")
    assert "largest public" in line


def test_a_huge_safetensors_header_is_refused_by_its_length(tmp_path):
    config(tmp_path)
    st = tmp_path / "model.safetensors"
    st.write_bytes(struct.pack("<Q", 60 * 2**20) + b"{" + b" " * 1000)  # claims 60 MiB
    refused(["import-workload", st], "header of 62,914,560 bytes", "limit")


def test_the_largest_real_sizes_pass(tmp_path):
    """Llama 3.1 405B's sizes (the largest public dense config) are inside every limit."""
    from wus_sim.inputs.limits import IMPORT_MAX, MAX_IMPORT_LAYERS

    assert MAX_IMPORT_LAYERS > 126 and IMPORT_MAX["width"][0] > 20480 and IMPORT_MAX["ff"][0] > 73728
    assert IMPORT_MAX["vocab"][0] > 256000 and IMPORT_MAX["positions"][0] > 10_485_760
    code, out, lines = run(["import-workload", config(tmp_path, hidden_size=16384, num_attention_heads=128,
                                                     num_key_value_heads=8, intermediate_size=53248,
                                                     vocab_size=128256, num_hidden_layers=2,
                                                     max_position_embeddings=131072),
                            "--sequence-length", "8192"])
    assert code == 0 and "model.layers.1.mlp.down_proj.weight" in out, lines


def test_a_refused_import_keeps_the_previous_file_and_writes_nothing_to_stdout(tmp_path):
    good = tmp_path / "w.yaml"
    assert run(["import-workload", config(tmp_path), "--out", good])[0] == 0
    before = good.read_bytes()
    refused(["import-workload", config(tmp_path, "bad.json", num_hidden_layers=10**6), "--out", good], "limit")
    assert good.read_bytes() == before
    code, out, _ = run(["import-workload", config(tmp_path, "bad.json", num_hidden_layers=10**6)])
    assert code == 2 and out == ""


def test_the_written_workload_is_what_describe_reads(tmp_path):
    out = tmp_path / "w.yaml"
    assert run(["import-workload", config(tmp_path), "--out", out])[0] == 0
    code, text, _ = run(["describe", "workload", out, "--json"])
    assert code == 0 and json.loads(text, parse_constant=refuse)["workload"] == "tiny"


# ------------------------------------------------------------------ numbers that are not numbers
@pytest.mark.parametrize("text,words", [
    ('{"model_type": "llama", "attention_dropout": NaN}', ["NaN"]),
    ('{"model_type": "llama", "attention_dropout": Infinity}', ["Infinity"]),
    ('{"model_type": "llama", "attention_dropout": -Infinity}', ["Infinity"]),
    ('{"model_type": "llama", "attention_dropout": 1e400}', ["too large"]),
    ('{"model_type": "llama", "model_type": "gpt2"}', ["model_type", "twice"]),
    ("[" * 1000 + "]" * 1000, ["deeper"]),
    ('{"model_type": "llama", "hidden_size": ' + "9" * 4400 + "}", ["4,400 digits"]),
    ('{"model_type": "llama", "_name_or_path": "\\ud800"}', ["surrogate"]),
])
def test_json_that_is_not_strict_json_is_one_line(tmp_path, text, words):
    path = tmp_path / "config.json"
    path.write_text(text)
    refused(["import-workload", path], "config.json", *words)


@pytest.mark.parametrize("key,value,words", [
    ("model_type", ["llama"], ["model_type"]), ("model_type", {"a": 1}, ["model_type"]),
    ("architectures", 5, ["architectures"]), ("hidden_size", 1e200, ["hidden_size", "whole number"]),
    ("attention_dropout", 1.5, ["probability"]), ("attention_dropout", -0.1, ["probability"]),
    ("num_hidden_layers", True, ["whole number"]), ("hidden_size", "64", ["whole number"]),
])
def test_values_of_the_wrong_kind_are_one_line(tmp_path, key, value, words):
    doc = {**LLAMA, key: value}
    if key == "architectures":
        doc["model_type"] = "bert"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    refused(["import-workload", path], *words)


# ------------------------------------------------------------------ OS errors: one line, exit 2
@pytest.mark.parametrize("kind", ["folder", "missing folder", "loop", "devfull", "empty", "fifo", "long", "proc"])
def test_an_out_that_cannot_be_written_is_one_line_before_any_work(tmp_path, kind):
    target = {"folder": tmp_path, "missing folder": tmp_path / "no" / "w.yaml", "loop": tmp_path / "loop",
              "devfull": "/dev/full", "empty": "", "fifo": tmp_path / "fifo", "long": tmp_path / ("x" * 300),
              "proc": "/proc/w.yaml"}[kind]
    if kind == "loop":
        os.symlink(tmp_path / "loop", tmp_path / "loop")
    if kind == "fifo":
        os.mkfifo(target)
    refused(["import-workload", config(tmp_path), "--out", target], "--out")


def test_an_unreadable_or_too_long_path_is_one_line(tmp_path):
    refused(["import-workload", tmp_path / ("x" * 300 + ".json")], "too long")
    refused(["import-workload", tmp_path / "missing.json"], "not found")


@pytest.mark.parametrize("argv", [
    ["calibrate", "--out", "/proc/cal.yaml"], ["validate", "--out", "/proc"], ["validate", "--out", "/dev/full"],
    ["step", "ncf", "-t", "tpu-v3-8", "--trace", "/proc/t.json"], ["run", "quickstart", "--out", ""],
    ["step", "ncf", "-t", "tpu-v3-8", "--trace", ""],
])
def test_outputs_of_every_command_are_checked_before_the_work(argv):
    refused(argv, argv[-2])


def _process(args, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(REPO), **kwargs.pop("env", {})}
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, env=env, timeout=60, **kwargs)


def test_stdout_closed_and_an_ascii_locale(tmp_path):
    path = config(tmp_path, _name_or_path="org/modèle-ü")
    closed = subprocess.run(f'"{sys.executable}" -m wus_sim import-workload "{path}" >&-', shell=True, cwd=REPO,
                            capture_output=False, stderr=subprocess.PIPE, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = [l for l in closed.stderr.splitlines() if l.strip()]
    assert closed.returncode == 2 and len(lines) == 1 and "stdout is closed" in lines[0], closed.stderr
    ascii_run = _process(["-m", "wus_sim", "import-workload", str(path)], env={"PYTHONIOENCODING": "ascii"})
    assert ascii_run.returncode == 0 and not ascii_run.stderr, ascii_run.stderr
    assert 'name: "modèle-ü"' in ascii_run.stdout.decode("utf-8")


def test_a_refused_import_stays_within_time_and_memory(tmp_path):
    """The issue's heaviest refusals, in a process of their own: under 2 s and 300 MB each."""
    cfg = config(tmp_path, num_hidden_layers=2**63)
    st = tmp_path / "model.safetensors"
    st.write_bytes(struct.pack("<Q", 60 * 2**20) + b"{}")
    for target in (cfg, st):
        code = ("import sys, time\nfrom wus_sim.cli import main\nt = time.monotonic()\n"
                f"rc = main(['import-workload', {str(target)!r}])\n"
                "print(rc, time.monotonic() - t, file=sys.stderr)")
        # the process's own peak (measure.py: its getrusage would start at this test process's)
        proc = run_measured(["-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout_s=60,
                            text=True)
        rc, wall_s = proc.stderr.splitlines()[-1].split()
        assert rc == "2" and float(wall_s) < BUDGET_S and proc.max_rss_kb < 300 * 1024, (proc.max_rss_kb, proc.stderr)


def test_ctrl_c_while_the_entry_point_imports_the_command_line_is_one_line():
    """The handler is installed in ``python -m wus_sim``'s first lines: a Ctrl-C while
    ``wus_sim.cli`` is being imported (before ``main`` runs) is one line and 130."""
    code = ("import builtins, os, runpy, signal, sys\nreal = builtins.__import__\n"
            "def hook(name, globals=None, locals=None, fromlist=(), level=0):\n"
            "    if level == 1 and name == 'cli':\n        os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real(name, globals, locals, fromlist, level)\n"
            "builtins.__import__ = hook\nsys.argv = ['wus_sim', 'list', 'topologies']\n"
            "runpy.run_module('wus_sim', run_name='__main__')")
    proc = _process(["-c", code], text=True)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 130 and lines == ["wus-sim: interrupted"], proc.stderr[-800:]


# ------------------------------------------------------------------ tiny values inside the ranges
@pytest.mark.parametrize("argv,words", [
    (["step", "ncf", "-t", "torus:4x4", "--link-GBps", "1e-300"], ["--link-GBps", ">= 0.001"]),
    (["step", "ncf", "-t", "torus:4x4", "--slow-links", "1:1e300"], ["--slow-links", "1e+06"]),
    (["step", "ncf", "-t", "torus:4x4", "--slices", "2", "--dcn-GBps", "1e-300"], ["--dcn-GBps"]),
    (["collective", "-t", "torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB", "--link-GBps",
      "1e-300"], ["--link-GBps"]),
])
def test_values_below_the_physical_range_are_refused(argv, words):
    refused(argv, *words)


def test_the_api_refuses_an_efficiency_below_its_range():
    with pytest.raises(WusError, match=r"mxu_efficiency.*\[0.001, 1\]"):
        wus_sim.load_calibration().compute_params(mxu_efficiency=1e-300)


# ------------------------------------------------------------------ placement and chips files
@pytest.mark.parametrize("argv", [["plan", "ncf", "-t", "mesh:1x1"], ["plan", "ncf", "-t", "tpu-v3-8",
                                                                     "--spatial-ways", "8"]])
def test_one_replica_plans(argv):
    code, out, lines = run(argv)
    assert code == 0 and "1 replicas" in out, lines


def _chips(tmp_path, **changes):
    chips = yaml.safe_load((REPO / "topologies" / "chips.yaml").read_text())
    chip = {**chips["tpu-v3"], **changes}
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "chips.yaml").write_text(yaml.safe_dump({"my-chip": chip}))
    (folder / "my-slice.yaml").write_text(yaml.safe_dump({"chip": "my-chip", "chips_per_axis": [2, 2],
                                                          "wraparound": False}))
    return folder


@pytest.mark.parametrize("key,value,words", [("cores_per_chip", 65, ["<= 64"]), ("cores_per_chip", 2.5, ["whole"]),
                                             ("peak_bf16_TFLOPs", 1e300, ["<= 1"]),
                                             ("link_GBps", 1e-300, [">= 0.001"])])
def test_a_chips_file_out_of_range_is_one_line(tmp_path, monkeypatch, key, value, words):
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(_chips(tmp_path, **{key: value})))
    refused(["describe", "topology", "my-slice", "--json"], key, *words)


# ------------------------------------------------------------------ calibrate, residue
def _mixed_table(tmp_path):
    """Two shipped SSD rows and one LLM row the simulator cannot run (Llama 3 8B on 32 v3 cores)."""
    import csv

    from test_measured_own import _write
    from wus_sim.validation.measured import SHIPPED_MEASURED

    with open(SHIPPED_MEASURED, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["benchmark"] == "ssd"][:2]
    rows.append(dict(benchmark="llm", workload="llama3-8b", topology="tpu-v3-32", cores=32, replicas=32,
                     spatial_ways=1, global_batch=32, per_replica_batch=1, optimizer="adamw", measured_step_s=1.5,
                     kind="exact"))
    return _write(tmp_path / "mixed.csv", rows)


def test_calibrate_on_a_table_with_an_llm_row_names_the_row(tmp_path):
    refused(["calibrate", "--measured", _mixed_table(tmp_path), "--out", tmp_path / "c.yaml"], "llm/tpu-v3-32",
            budget_s=30)
    assert not (tmp_path / "c.yaml").exists()


def test_validate_json_with_an_llm_row_is_strict_json(tmp_path):
    code, out, _ = run(["validate", "--measured", _mixed_table(tmp_path), "--out", tmp_path / "v", "--json",
                        "--no-plots"], budget_s=30)
    assert code == 0
    rows = json.loads(out, parse_constant=refuse)
    jsonschema.Draft202012Validator(json.loads(schema_path("validate", 1).read_text())).validate(rows)
    assert rows[-1]["simulated_step_s"] is None


def test_a_damaged_calibration_is_one_line(tmp_path):
    text = (REPO / "wus_sim" / "data" / "calibration" / "default.yaml").read_text()
    half = tmp_path / "half.yaml"
    half.write_text(text[: len(text) // 2])
    refused(["step", "ncf", "-t", "tpu-v3-8", "--calibration", half], "half.yaml")
    doc = yaml.safe_load(text)
    for key, bad in (("declared_ranges", 5), ("validated_range", "x"), ("param_covariance", [1])):
        mutated = tmp_path / f"{key}.yaml"
        mutated.write_text(yaml.safe_dump({**doc, "provenance": {**doc["provenance"], key: bad}}))
        refused(["step", "ncf", "-t", "tpu-v3-8", "--calibration", mutated], f"provenance.{key}")
    typo = tmp_path / "typo.yaml"
    stacks = {name: {**own, "op_overhead_S": 0.1} for name, own in doc["stacks"].items()}
    typo.write_text(yaml.safe_dump({**doc, "stacks": stacks}))
    refused(["step", "ncf", "-t", "tpu-v3-8", "--calibration", typo], "stacks.")


def test_a_text_file_is_not_read_as_results(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    with pytest.raises(WusError, match="not a results table"):
        wus_sim.read_results(passwd)


@pytest.mark.parametrize("argv_of", [
    lambda tmp: ["run", _long_key_experiment(tmp), "--out", tmp / "o"],
    lambda tmp: ["step", "ncf", "-t", "tpu-v3-8", "--per-replica-batch", "x" * 5000],
    lambda tmp: ["import-workload", _long_tensor_checkpoint(tmp, name="t" * 5000)],
    lambda tmp: ["import-workload", _long_tensor_checkpoint(tmp, shape=[1] * 1000)],
])
def test_echoes_of_hostile_input_are_excerpts(tmp_path, argv_of):
    line = refused(argv_of(tmp_path))
    assert "x" * 61 not in line and "t" * 61 not in line and "1, " * 61 not in line, line


def _long_key_experiment(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"workloads": ["ncf"], "topologies": ["tpu-v3-8"], "sweep": {"x" * 5000: [1]}}))
    return path


def _long_tensor_checkpoint(tmp_path, *, name="w", shape=(4,)):
    config(tmp_path)
    header = json.dumps({name: {"dtype": "F32", "shape": list(shape), "data_offsets": [0, 16]}}).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    return path


# ------------------------------------------------------------------ the Python API's types
T8 = "tpu-v3-8"


def _plan(**kw):
    return wus_sim.plan(wus_sim.load_workload("ncf"), wus_sim.load_topology(T8), "adam", **kw)


API_REFUSED = {
    "StepOptions(compute=5)": lambda: wus_sim.StepOptions(compute=5),
    "compute_params(zz=1)": lambda: wus_sim.load_calibration().compute_params(zz=1),
    "validate(runs=5)": lambda: wus_sim.validate(runs=5),
    "import_workload(5)": lambda: __import__("wus_sim.model.importers.importers", fromlist=["x"]).import_workload(5),
    "plan(bucket_bytes=nan)": lambda: _plan(bucket_bytes=math.nan),
    "plan(replicas=True)": lambda: _plan(replicas=True),
    "plan(replicas=1.5)": lambda: _plan(replicas=1.5),
    "run_experiment(jobs=True)": lambda: wus_sim.run_experiment(wus_sim.load_experiment("quickstart"), "/nonexistent",
                                                                jobs=True),
    "run_experiment(jobs=1.5)": lambda: wus_sim.run_experiment(wus_sim.load_experiment("quickstart"), "/nonexistent",
                                                               jobs=1.5),
    "load_topology(megacore='true')": lambda: wus_sim.load_topology(T8, megacore="true"),
    "load_topology(seed=np.int64(-1))": lambda: wus_sim.load_topology(T8, failed_links=1, seed=np.int64(-1)),
    "memory_breakdown(10**30)": lambda: wus_sim.memory_breakdown(_plan(), "sharded", 10**30),
    "analyse(weight_bytes=-1)": lambda: wus_sim.analyse("adam", weight_bytes=-1),
    "StepOptions(bidirectional='true')": lambda: wus_sim.StepOptions(bidirectional="true"),
    "simulate_strategies(per_replica_batch=True)": lambda: wus_sim.simulate_strategies("ncf", T8,
                                                                                       per_replica_batch=True),
}


@pytest.mark.parametrize("name", sorted(API_REFUSED))
def test_the_api_raises_a_wus_error_for_every_wrong_type(name):
    with pytest.raises(WusError) as err:
        API_REFUSED[name]()
    assert "\n" not in str(err.value)


def test_numpy_scalars_follow_their_value():
    topo = wus_sim.load_topology(T8, failed_links=np.int64(1), seed=np.int64(1), link_GBps=np.float64(10))
    assert topo.num_chips == 4
    assert wus_sim.analyse("adam", weight_bytes=np.int64(2)).weight_bytes == 2
    assert wus_sim.StepOptions(steps=np.int64(4), bidirectional=np.bool_(True)).steps == 4
    assert _plan(replicas=np.int64(8)).replicas == 8


def test_draw_figure_takes_any_name_and_infinite_values(tmp_path):
    """Names are text, never TeX (a workload named ``$\\sqrt{`` recursed in matplotlib's mathtext
    parser); an infinite speedup is drawn as missing; what cannot be drawn is a WusError."""
    import io

    from test_experiments_fake import fake_point

    exp = wus_sim.load_experiment("quickstart")
    df = wus_sim.run_experiment(exp, tmp_path / "q", limit=2, point_fn=fake_point).frame
    for plot in wus_sim.default_plots(exp)[:2]:
        for name in ("$\\sqrt{" * 200 + "$", "$" * 51, "$\\frac{a}{b}$"):
            try:
                fig = wus_sim.draw_figure(plot, df.assign(workload=name))
                fig.savefig(io.BytesIO(), format="png")
            except WusError as exc:
                assert "\n" not in str(exc)
        infinite = df.assign(**{c: math.inf for c in df.columns if "speedup" in c or c.endswith("_s")})
        try:
            wus_sim.draw_figure(plot, infinite).savefig(io.BytesIO(), format="png")
        except WusError as exc:
            assert "\n" not in str(exc)
