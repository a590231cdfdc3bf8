"""Signals and streams, as real processes: Ctrl-C at any moment is one line and exit 130; stdout
on a full device is one line and exit 2 (an OS error, issue 35); stdout into a pipe whose reader left is exit 141 (as
Unix tools do) with nothing on stderr. Never a traceback, never Python's "Exception ignored".

A Ctrl-C is sent two ways: at chosen points inside the program (the process sends it to itself
just before the parser is built, i.e. before the subcommand modules are imported; while they
are imported; while the command runs), which is exact whatever the machine's load; and after
wall-clock delays, which is what a user does. A signal during the interpreter's own start-up
(before any wus-sim code runs, a few tens of ms) is Python's to report and is not tested.
"""

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMAND = ["step", "resnet50", "-t", "tpu-v3-32"]

_SELF_INTERRUPT = """
import importlib, os, signal, sys
import wus_sim.cli as cli
where = sys.argv[1]
def interrupt():
    os.kill(os.getpid(), signal.SIGINT)
if where == "parser":          # before any subcommand module is imported
    build = cli.build_parser
    cli.build_parser = lambda *a: (interrupt(), build(*a))[1]
elif where == "imports":       # while the subcommand modules are imported
    real = importlib.import_module
    def import_module(name, *a):
        if name.endswith(".step"):
            interrupt()
        return real(name, *a)
    importlib.import_module = import_module
elif where == "options":       # after parsing, before the command runs
    import wus_sim.cli.options as options
    check = options.check_options
    options.check_options = lambda args: (interrupt(), check(args))[1]
sys.exit(cli.main(sys.argv[2:]))
"""


def _lines(text):
    return [l for l in text.splitlines() if l.strip()]


def _wait_until_running(out, timeout_s=30):
    """Wait until the run has locked its folder: wus-sim's code runs, whatever the machine's load
    (a signal before that would fall in the interpreter's start-up)."""
    deadline = time.monotonic() + timeout_s
    while not (out / ".wus-sim.lock").exists():
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.01)


@pytest.mark.parametrize("where", ["parser", "imports", "options"])
def test_ctrl_c_at_a_chosen_point_is_one_line_and_130(where):
    proc = subprocess.run([sys.executable, "-c", _SELF_INTERRUPT, where, *COMMAND], cwd=REPO,
                          capture_output=True, text=True, timeout=30)
    lines = _lines(proc.stderr)
    assert proc.returncode == 130 and len(lines) == 1 and "interrupted" in lines[0], proc.stderr[-800:]


@pytest.mark.parametrize("delay_s", [0, 0.1, 0.4, 1.0])
def test_ctrl_c_after_a_delay_is_one_line_and_130(delay_s, tmp_path):
    run = ["run", "quickstart", "--out", str(tmp_path / "o"), "-q", "--no-plots", "--jobs", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "wus_sim", *run], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _wait_until_running(tmp_path / "o")
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=30)[1]
    if proc.returncode == 0:
        pytest.skip("the command finished before the signal")
    assert proc.returncode == 130 and len(_lines(err)) == 1 and "Traceback" not in err, err[-800:]


@pytest.mark.parametrize("args", [["list", "topologies"], ["describe", "topology", "tpu-v3-32"],
                                  ["step", "ncf", "-t", "tpu-v3-8", "--json"]])
def test_stdout_on_a_full_device_is_one_line_and_exit_2(args):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "wus_sim", *args], cwd=REPO, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    lines = _lines(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and "cannot write the output" in lines[0], proc.stderr[-800:]
    assert "stdout" in lines[0] and "no space left" in lines[0], lines


@pytest.mark.parametrize("args", [["list", "topologies"], ["describe", "topology", "tpu-v3-32"],
                                  ["step", "ncf", "-t", "tpu-v3-8", "--json"]])
def test_stdout_into_a_closed_pipe_is_exit_141_and_silent(args):
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first byte is written
    try:
        proc = subprocess.run([sys.executable, "-m", "wus_sim", *args], cwd=REPO, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert proc.returncode == 141 and not _lines(proc.stderr), proc.stderr[-800:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_whole_group_of_a_jobs_2_run_is_one_line(tmp_path, sig):
    """The parent stops its workers; the workers themselves ignore the signal (each printed a
    traceback beside the resume hint)."""
    run = ["run", "quickstart", "--out", str(tmp_path / "o"), "-q", "--no-plots", "--jobs", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "wus_sim", *run], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_until_running(tmp_path / "o")
    time.sleep(0.5)
    os.killpg(proc.pid, sig)
    err = proc.communicate(timeout=30)[1]
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")
    assert proc.returncode == 130 and len(_lines(err)) == 1 and "Traceback" not in err, err[-800:]
    assert "--resume" in err


_SELF_TERMINATE = """
import os, signal, sys
import wus_sim.cli as cli
where = sys.argv[1]
def terminate():
    os.kill(os.getpid(), signal.SIGTERM)
if where == "options":         # after parsing, before the command runs
    import wus_sim.cli.options as options
    check = options.check_options
    options.check_options = lambda args: (terminate(), check(args))[1]
elif where == "write":         # while a file is written: its temporary exists, the rename not done
    real = os.replace
    os.replace = lambda *a: (terminate(), real(*a))[1]
sys.exit(cli.main(sys.argv[2:]))
"""

# every command, with a file it writes where it writes one (issue 45: SIGTERM during
# `import-workload --out` and `plan --search --json > file` exited -15)
TERMINATED = {
    "import-workload": ["import-workload", "tests/data/hf_configs/llama3-8b.json", "--out", "{out}/w.yaml"],
    "plan-search": ["plan", "llama3-8b", "-t", "tpu-v5p-128", "--megacore", "--search", "--json"],
    "step": COMMAND,
    "describe": ["describe", "workload", "llama3-8b"],
    "list": ["list", "topologies"],
    "validate": ["validate", "--tiering"],
    "collective": ["collective", "-t", "torus:4x4", "--op", "all-reduce", "--algorithm", "ring", "--size", "1MiB"],
}


@pytest.mark.parametrize("where", ["options", "write"])
@pytest.mark.parametrize("name", sorted(TERMINATED))
def test_sigterm_is_one_line_130_and_leaves_no_temporary(tmp_path, name, where):
    argv = [a.replace("{out}", str(tmp_path)) for a in TERMINATED[name]]
    if where == "write" and name != "import-workload":
        pytest.skip("only import-workload writes a file here")
    proc = subprocess.run([sys.executable, "-c", _SELF_TERMINATE, where, *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    lines = _lines(proc.stderr)
    assert proc.returncode == 130 and len(lines) == 1 and "interrupted" in lines[0], (proc.returncode,
                                                                                      proc.stderr[-800:])
    assert list(tmp_path.iterdir()) == []  # no temporary, no half-written file


_EARLY_INTERRUPT = """
import os, signal, sys
sys.argv = ["/usr/bin/wus-sim", *sys.argv[1:]]  # as the console script starts
import wus_sim                                  # the package's first lines: the handler
os.kill(os.getpid(), signal.SIGINT)             # before the command line's modules are imported
import wus_sim.cli
sys.exit(wus_sim.cli.main())
"""


def test_ctrl_c_right_after_the_package_starts_is_one_line_and_130():
    """Issue 45: a Ctrl-C 0.02 s after start printed a traceback of an import. The package installs
    the handler in its first lines when the import is the command starting (console script or
    ``python -m wus_sim``); a program that imports wus_sim keeps its own (checked below)."""
    proc = subprocess.run([sys.executable, "-c", _EARLY_INTERRUPT, *COMMAND], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    lines = _lines(proc.stderr)
    assert proc.returncode == 130 and lines == ["wus-sim: interrupted"], (proc.returncode, proc.stderr[-800:])
    library = subprocess.run([sys.executable, "-c", "import signal, wus_sim; "
                              "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert library.stdout.strip() == "True", library.stderr
