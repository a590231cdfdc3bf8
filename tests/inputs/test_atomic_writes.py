"""One writer for every single-file output (issue 35): beside, fsync, rename. Each writer the
program has is killed mid-file in a child process (a file-size limit, ``RLIMIT_FSIZE``: the
kernel's SIGXFSZ at the limit, or EFBIG when the signal is ignored) and the previous file must
be intact; with the signal ignored the error is one line naming the file and the temporary is
gone. Special targets (FIFO, device, folder) are refused before anything is opened."""

import json
import os
from pathlib import Path
import signal
import stat
import subprocess
import sys

import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.inputs.writes import write_atomic

REPO = Path(__file__).resolve().parents[2]
OLD = b"the previous good file\n" * 20
LIMIT = 700
"""Bytes a child may write into any one file: every writer below writes more, so each is cut mid-file."""

CONFIG = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 32}

# Each writer: (the file it replaces, relative to the child's folder; the code that writes it,
# run after the limit is set; the set-up before the limit, where imports and work happen).
WRITERS = {
    "calibration": ("cal.yaml", "write_calibration(cal, 'cal.yaml')",
                    "from wus_sim.validation.calibrate import write_calibration\n"
                    "from wus_sim.model.calibration import load_calibration\ncal = load_calibration()"),
    "workload": ("w.yaml", "import_workload('config.json', out='w.yaml')",
                 "from wus_sim.model.importers.importers import import_workload\n"
                 "import wus_sim.model.workload_files, wus_sim.inputs.writes"),
    "trace": ("t.json", "sys.exit(main(['step', 'ncf', '-t', 'tpu-v3-8', '--trace', 't.json']))",
              "from wus_sim.cli import main\nimport wus_sim.training.timeline.trace, wus_sim.training.step, wus_sim.cli.step"),
    "validation table": ("v/validation.csv", "write_outputs(rows, Path('v'), plot=False)",
                         "from pathlib import Path\nfrom wus_sim.validation.report import write_outputs\n"
                         "from wus_sim.validation.measured import load_measured\n"
                         "from wus_sim.validation.validate import validate\n"
                         "rows = validate(runs=[r for r in load_measured() if r.benchmark == 'ssd'][:1])\n"
                         "import pandas"),
    "plot": ("v/validation.png", "plot_validation(rows, 'v/validation.png')",
             "from wus_sim.validation.report import plot_validation\n"
             "from wus_sim.validation.measured import load_measured\n"
             "from wus_sim.validation.validate import validate\n"
             "rows = validate(runs=[r for r in load_measured() if r.benchmark == 'ssd'][:1])\n"
             "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"),
    "results": ("r/results.csv", "write_results(df, 'r')",
                "import pandas as pd\nfrom wus_sim.experiments.results import write_results\n"
                "df = pd.DataFrame({'workload': ['ncf'] * 200, 'topology': ['tpu-v3-8'] * 200, "
                "'strategy': ['sharded'] * 200, 'status': ['ok'] * 200, 'step_time_s': [0.1] * 200})\n"
                "import pyarrow"),
}

CHILD = """
import os, resource, signal, sys
os.chdir(sys.argv[1])
{setup}
from wus_sim.inputs.errors import WusError
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
# Python itself ignores SIGXFSZ (a write past the limit is then EFBIG); "kill" restores the
# kernel's default, which ends the process at the limit, mid-write
signal.signal(signal.SIGXFSZ, signal.SIG_IGN if sys.argv[2] == "ignore" else signal.SIG_DFL)
try:
    {write}
except WusError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


def _child(tmp_path, name, mode):
    target, write, setup = WRITERS[name]
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    path = tmp_path / target
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(OLD)
    code = CHILD.format(setup=setup, write=write, limit=LIMIT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), mode], capture_output=True, text=True,
                          timeout=120, env=env)
    return path, proc


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_writer_killed_mid_file_leaves_the_previous_file(tmp_path, name):
    path, proc = _child(tmp_path, name, "kill")
    assert proc.returncode == -signal.SIGXFSZ, (proc.returncode, proc.stderr[-600:])
    assert path.read_bytes() == OLD
    # it was killed mid-file: its temporary, beside the target, holds exactly the limit
    temps = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.") and p.name.endswith(".tmp")]
    assert len(temps) == 1 and temps[0].stat().st_size == LIMIT, temps


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_write_past_the_size_limit_is_one_line_and_leaves_nothing(tmp_path, name):
    path, proc = _child(tmp_path, name, "ignore")
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-800:]
    assert path.name in lines[0] and "file-size limit" in lines[0], lines
    assert path.read_bytes() == OLD
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------------ the writer itself, in process
def test_write_replaces_whole_and_keeps_the_mode(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_atomic(path, "new text")
    assert path.read_text() == "new text" and stat.S_IMODE(path.stat().st_mode) == 0o640
    fresh = write_atomic(tmp_path / "fresh.bin", b"\x00\x01")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.read_bytes() == b"\x00\x01" and stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


def test_a_writer_that_fails_part_way_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    path.write_bytes(OLD)

    def half_then_fail(f):
        f.write(b"half of it")
        raise RuntimeError("the writer broke")

    with pytest.raises(RuntimeError):
        write_atomic(path, half_then_fail)
    assert path.read_bytes() == OLD and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("kind", ["fifo", "folder", "device", "missing folder", "empty", "file as folder"])
def test_special_targets_are_refused_before_opening(tmp_path, kind):
    if kind == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
    elif kind == "folder":
        target = tmp_path
    elif kind == "device":
        target = Path("/dev/null")
    elif kind == "missing folder":
        target = tmp_path / "no" / "such" / "x.yaml"
    elif kind == "file as folder":
        (tmp_path / "f").write_text("x")
        target = tmp_path / "f" / "x.yaml"
    else:
        target = ""
    with pytest.raises(ConfigError) as err:  # a FIFO opened for writing would block this test forever
        write_atomic(target, "data", named_by="--out")
    assert "--out" in str(err.value) and "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["pipe"], ["f"])
