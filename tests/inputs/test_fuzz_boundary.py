"""Fuzzing the boundary beyond YAML (issue 27): special files given to every option that names a
file, damaged run folders, Ctrl-C at any import, and bad values given to the Python API.

The contract, for every case: the program ends (nothing past 10 s: an in-process alarm turns a
hang into a failure), with exit 0, 1 or 2 (130 for Ctrl-C), at most one line on stderr for an
error and never a traceback; an API call either works or raises a WusError; a resumed run's
results equal an uninterrupted run's. The generators build cases from the families, not from
the examples of the issue, so the product is also checked against cases no one listed.

The normal suite runs a reduced profile (``FUZZ_REDUCED_EXAMPLES`` per generator); ``-m slow``
runs the full one (``FUZZ_FULL_EXAMPLES``, ``WUS_SIM_FUZZ_EXAMPLES`` to change it).
"""

from contextlib import contextmanager
import json
import math
import os
from pathlib import Path
import shutil
import signal
import subprocess
import sys

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest

from test_experiments_fake import fake_point
from test_fuzz import FUZZ_FULL_EXAMPLES, FUZZ_REDUCED_EXAMPLES, _in_process
from wus_sim.inputs.errors import WusError

REPO = Path(__file__).resolve().parents[2]
BUDGET_S = 10

_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)


@contextmanager
def _within(seconds=BUDGET_S):
    """Fail (not hang) if the body runs past *seconds*."""
    def alarm(signum, frame):
        raise AssertionError(f"ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------ special files
KINDS = ["fifo", "folder", "loop", "dangling", "devzero", "devnull", "sparse", "binary", "empty", "longname",
         "notdir", "text"]


def _make(root, kind, suffix):
    """A path of *kind* under *root* named like a *suffix* file."""
    path = root / f"f_{kind}{suffix}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "loop":
        os.symlink(root / f"g_{kind}{suffix}", path)
        os.symlink(path, root / f"g_{kind}{suffix}")
    elif kind == "dangling":
        os.symlink(root / "nowhere", path)
    elif kind == "devzero":
        return Path("/dev/zero")
    elif kind == "devnull":
        os.symlink("/dev/null", path)
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(2**33)
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "longname":
        return root / ("n" * 300 + suffix)
    elif kind == "notdir":
        (root / "plain").write_text("x")
        return root / "plain" / f"x{suffix}"
    elif kind == "text":
        path.write_text("root:x:0:0:TOPSECRET:/root:/bin/bash\n")
    return path


OPTIONS = {
    # name -> (suffix, argv for path p in folder d)
    "experiment": (".yaml", lambda p, d: ["run", str(p), "--out", str(d / "o"), "-q", "--no-plots", "--limit", "1"]),
    "--topology": (".yaml", lambda p, d: ["step", "ncf", "-t", str(p)]),
    "workload": (".yaml", lambda p, d: ["step", str(p), "-t", "tpu-v3-8"]),
    "--optimizer": (".yaml", lambda p, d: ["describe", "optimizer", str(p)]),
    "--calibration": (".yaml", lambda p, d: ["step", "ncf", "-t", "tpu-v3-8", "--calibration", str(p)]),
    "--measured": (".csv", lambda p, d: ["validate", "--measured", str(p), "--no-plot", "--out", str(d / "v")]),
    "--trace": (".json", lambda p, d: ["step", "ncf", "-t", "tpu-v3-8", "--trace", str(p)]),
    "calibrate --out": (".yaml", lambda p, d: ["calibrate", "--out", str(p), "--fit", "step_overhead_s"]),
    "--out": ("", lambda p, d: ["run", "quickstart", "--out", str(p), "-q", "--no-plots", "--limit", "1"]),
}
"""Every option that names a file the program reads or writes."""


def _check_cli(code, err, args):
    lines = [l for l in err.splitlines() if l.strip()]
    shown = " ".join(a[:40] for a in args)
    assert code in (0, 1, 2), f"exit {code} for {shown}: {err[-400:]}"
    assert "Traceback" not in err and "Exception ignored" not in err, f"{shown}: {err[-800:]}"
    assert code == 0 or len(lines) == 1, f"{len(lines)} lines for {shown}: {err[-400:]}"
    assert "TOPSECRET" not in err


def _special_case(tmp_path, capsys, option, kind):
    suffix, make = OPTIONS[option]
    if option == "calibrate --out" and kind in ("binary", "empty", "text", "sparse", "dangling"):
        # a regular file is a fine target to overwrite, and a dangling link one to write (the file
        # takes the link's place): the fit would run for seconds, longer than the budget on a busy machine
        kind = "folder"
    path = _make(tmp_path, kind, suffix)
    args = make(path, tmp_path)
    with _within():
        code = _in_process(args)
    _check_cli(code, capsys.readouterr().err, args)


@settings(max_examples=FUZZ_REDUCED_EXAMPLES, **_SETTINGS)
@given(option=st.sampled_from(sorted(OPTIONS)), kind=st.sampled_from(KINDS))
def test_special_files_for_every_file_option(tmp_path_factory, capsys, option, kind):
    _special_case(tmp_path_factory.mktemp("s"), capsys, option, kind)


@pytest.mark.slow
@settings(max_examples=FUZZ_FULL_EXAMPLES, **_SETTINGS)
@given(option=st.sampled_from(sorted(OPTIONS)), kind=st.sampled_from(KINDS))
def test_special_files_for_every_file_option_full(tmp_path_factory, capsys, option, kind):
    _special_case(tmp_path_factory.mktemp("s"), capsys, option, kind)


@settings(max_examples=FUZZ_REDUCED_EXAMPLES, **_SETTINGS)
@given(variable=st.sampled_from(["WUS_SIM_TOPOLOGY_PATH", "WUS_SIM_OPTIMIZER_PATH", "WUS_SIM_WORKLOAD_PATH"]),
       kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4, unique=True))
def test_special_files_in_search_folders_do_not_break_what_does_not_name_them(tmp_path_factory, capsys,
                                                                              monkeypatch, variable, kinds):
    d = tmp_path_factory.mktemp("search")
    for kind in kinds:
        _make(d, kind, ".yaml")
    monkeypatch.setenv(variable, str(d))
    args = ["step", "ncf", "-t", "tpu-v3-8", "--strategy", "replicated"]
    with _within():
        code = _in_process(args)
    err = capsys.readouterr().err
    assert code == 0, err[-400:]
    # naming one of them is one line
    args = {"WUS_SIM_TOPOLOGY_PATH": ["step", "ncf", "-t", f"f_{kinds[0]}"],
            "WUS_SIM_OPTIMIZER_PATH": ["describe", "optimizer", f"f_{kinds[0]}"],
            "WUS_SIM_WORKLOAD_PATH": ["step", f"f_{kinds[0]}", "-t", "tpu-v3-8"]}[variable]
    with _within():
        code = _in_process(args)
    _check_cli(code, capsys.readouterr().err, args)


# ------------------------------------------------------------------ damaged run folders
DOC = {"workloads": ["resnet50"], "topologies": ["tpu-v3-32", "tpu-v3-128"], "optimizers": ["adam"],
       "sweep": {"per_replica_batch": [8, 16]}}
NASTY = [None, True, -1, 0, 10**30, 1e308, "", "x" * 100, [], {}, [1, 2], {"status": "ok"}, [{}], [None]]
ROW_NASTY = [{}, {"a": 1}, [[1]], [{}], None, 5, "great", ""]
"""Values a row cell or status can be that the journal's checks can tell from a real one (a
plausible number in place of another cannot be told, and is not generated)."""
FIELDS = ["hash", "point", "model", "wall_s", "rows", "index"]


def boundary_point(point):
    return fake_point(point)


@st.composite
def journal_damage(draw):
    how = draw(st.sampled_from(["field", "drop", "truncate", "garbage", "duplicate", "row cell", "row status"]))
    value = draw(st.sampled_from(ROW_NASTY[:4] if how == "row cell" else ROW_NASTY if how == "row status"
                                 else NASTY))
    return how, draw(st.integers(0, 3)), draw(st.sampled_from(FIELDS)), value, draw(st.integers(1, 200))


def _damaged_folder_case(tmp_path, damage):
    from wus_sim.experiments.runner import JOURNAL_NAME, run_experiment
    from wus_sim.experiments.spec import parse_experiment

    exp = parse_experiment(DOC, name="fuzz")
    ref_dir, out = tmp_path / "ref", tmp_path / "run"
    reference = run_experiment(exp, ref_dir, point_fn=boundary_point, jobs=1).frame
    shutil.copytree(ref_dir, out)
    how, which, field, value, cut = damage
    journal = out / JOURNAL_NAME
    lines = journal.read_text().splitlines()
    which %= len(lines)
    entry = json.loads(lines[which])
    if how == "field":
        entry[field] = value
        lines[which] = json.dumps(entry)
    elif how == "row cell":  # a cell the runner never writes: a mapping, a nested list
        row = entry["rows"][0]
        row[sorted(row)[cut % len(row)]] = value
        lines[which] = json.dumps(entry)
    elif how == "row status":
        entry["rows"][-1]["status"] = value
        lines[which] = json.dumps(entry)
    elif how == "drop":
        entry.pop(field, None)
        lines[which] = json.dumps(entry)
    elif how == "truncate":
        lines[which] = lines[which][:cut]
    elif how == "garbage":
        lines.insert(which, "\x00" * cut)
    elif how == "duplicate":
        lines.insert(which, lines[which])
    journal.write_text("\n".join(lines) + "\n")
    with _within():
        result = run_experiment(exp, out, point_fn=boundary_point, jobs=1, resume=True)
    drop = ["wall_s"]
    a = result.frame.drop(columns=drop).sort_values(["point_index", "strategy"]).reset_index(drop=True)
    b = reference.drop(columns=drop).sort_values(["point_index", "strategy"]).reset_index(drop=True)
    assert a.equals(b), damage


@settings(max_examples=FUZZ_REDUCED_EXAMPLES, **_SETTINGS)
@given(damage=journal_damage())
def test_a_damaged_journal_resumes_to_the_uninterrupted_results(tmp_path_factory, damage):
    _damaged_folder_case(tmp_path_factory.mktemp("j"), damage)


@pytest.mark.slow
@settings(max_examples=FUZZ_FULL_EXAMPLES, **_SETTINGS)
@given(damage=journal_damage())
def test_a_damaged_journal_resumes_to_the_uninterrupted_results_full(tmp_path_factory, damage):
    _damaged_folder_case(tmp_path_factory.mktemp("j"), damage)


# ------------------------------------------------------------------ early signals
_INTERRUPT_AT_IMPORT = """
import importlib.abc, os, signal, sys
target = sys.argv[1]
class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target_=None):
        if name == target:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Finder())
from wus_sim.cli import main
sys.exit(main(sys.argv[2:]))
"""

MODULES = ["argparse", "wus_sim.cli.options", "wus_sim.cli.step", "wus_sim.cli.run", "wus_sim.training.parameters.params",
           "numpy", "yaml", "wus_sim.hardware.topology_files", "wus_sim.training.step", "simpy", "pandas",
           "wus_sim.collectives", "wus_sim.model.calibration", "wus_sim.optimizers"]


def _early_signal_case(module, command):
    proc = subprocess.run([sys.executable, "-c", _INTERRUPT_AT_IMPORT, module, *command], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    if proc.returncode == 0:  # the module was never imported by this command
        return
    assert proc.returncode == 130 and len(lines) == 1 and "interrupted" in lines[0], (module, proc.stderr[-600:])


@settings(max_examples=max(4, FUZZ_REDUCED_EXAMPLES // 5), **_SETTINGS)
@given(module=st.sampled_from(MODULES),
       command=st.sampled_from([["step", "ncf", "-t", "tpu-v3-8"], ["list", "topologies"],
                                ["describe", "topology", "tpu-v3-8"]]))
def test_ctrl_c_while_any_module_is_imported(module, command):
    _early_signal_case(module, command)


@pytest.mark.slow
@settings(max_examples=len(MODULES) * 3, **_SETTINGS)
@given(module=st.sampled_from(MODULES),
       command=st.sampled_from([["step", "ncf", "-t", "tpu-v3-8"], ["list", "topologies"],
                                ["describe", "topology", "tpu-v3-8"]]))
def test_ctrl_c_while_any_module_is_imported_full(module, command):
    _early_signal_case(module, command)


# ------------------------------------------------------------------ API values
API_NASTY = [None, True, False, -1, 0, 1.5, 2**63, 10**400, math.inf, -math.inf, math.nan, "", "8", "x" * 300,
             [], [1], {}, {"a": 1}, (1, 2), b"8", object()]


@st.composite
def api_call(draw):
    import wus_sim
    from wus_sim.training.parameters.params import POINT_KEYS

    which = draw(st.sampled_from(["point", "topology", "compute", "read_results", "collective"]))
    value = draw(st.sampled_from(API_NASTY))
    if which == "point":
        key = draw(st.sampled_from(sorted(POINT_KEYS)))
        return f"simulate_point {key}", lambda: wus_sim.simulate_point(
            {"workload": "ncf", "topology": "tpu-v3-8", "strategy": "replicated", key: value})
    if which == "topology":
        key = draw(st.sampled_from(["link_GBps", "hop_latency_us", "wraparound", "cores_per_chip", "spec"]))
        if key == "spec":
            return "load_topology spec", lambda: wus_sim.load_topology(value)
        return f"load_topology {key}", lambda: wus_sim.load_topology("torus:2x2", **{key: value})
    if which == "compute":
        from dataclasses import fields

        key = draw(st.sampled_from([f.name for f in fields(wus_sim.ComputeParams)]))
        return f"ComputeParams {key}", lambda: wus_sim.ComputeParams(**{key: value})
    if which == "read_results":
        return "read_results", lambda: wus_sim.read_results(value)
    size = value
    return "collective_time", lambda: wus_sim.collective_time("torus:2x2", "all-reduce", "ring", size)


def _api_case(call):
    label, fn = call
    with _within():
        try:
            fn()
        except WusError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000, (label, str(exc)[:300])
        except Exception as exc:  # anything else is the bug this test looks for
            pytest.fail(f"{label}: {type(exc).__name__}: {str(exc)[:200]}")


@settings(max_examples=FUZZ_REDUCED_EXAMPLES * 2, **_SETTINGS)
@given(call=api_call())
def test_api_values_are_the_projects_errors(call):
    _api_case(call)


@pytest.mark.slow
@settings(max_examples=FUZZ_FULL_EXAMPLES, **_SETTINGS)
@given(call=api_call())
def test_api_values_are_the_projects_errors_full(call):
    _api_case(call)
