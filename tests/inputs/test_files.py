"""The one way in for files (wus_sim/inputs/files.py): every file the program reads is looked at
before it is opened, opened without blocking and read only up to the format's limit; every
failure is one ConfigError naming the file, the option or key that named it, and the rule.

Special files are made here (a FIFO, a loop of links, a link to nothing, a folder with a
file's name); each case is checked through the library call and through the command that
reads such a file, as a real process with a time budget (a FIFO opened for reading blocks
forever, /dev/zero never ends: a hang is the failure these tests guard against)."""

import csv
import os
from pathlib import Path
import subprocess
import sys
import time

import pytest

from wus_sim.cli import main
from wus_sim.inputs.errors import ConfigError
from wus_sim.inputs.files import check_writable_file, read_bytes, read_text
from wus_sim.inputs.limits import MAX_FILE_BYTES

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def special(tmp_path):
    """name -> a path that is not a readable regular file, with a word its error must say."""
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "folder.yaml").mkdir()
    os.symlink(tmp_path / "loop_b.yaml", tmp_path / "loop_a.yaml")
    os.symlink(tmp_path / "loop_a.yaml", tmp_path / "loop_b.yaml")
    os.symlink(tmp_path / "nowhere.yaml", tmp_path / "dangling.yaml")
    return {
        "fifo": (tmp_path / "fifo.yaml", "FIFO"),
        "folder": (tmp_path / "folder.yaml", "folder"),
        "loop": (tmp_path / "loop_a.yaml", "loop"),
        "dangling": (tmp_path / "dangling.yaml", "link to a file that does not exist"),
        "missing": (tmp_path / "missing.yaml", "not found"),
        "device": (Path("/dev/zero"), "device"),
        "long name": (tmp_path / ("n" * 300 + ".yaml"), "too long"),
        "not a folder": (tmp_path / "folder.yaml" / "x" / "y.yaml", "not found"),
    }


@pytest.mark.parametrize("case", ["fifo", "folder", "loop", "dangling", "missing", "device", "long name"])
def test_a_path_that_is_not_a_regular_file_is_one_error_at_once(special, case):
    path, word = special[case]
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        read_bytes(path, what="YAML file", named_by="--x")
    assert time.monotonic() - t0 < 1
    message = str(err.value)
    assert str(path)[:100] in message and "--x" in message and word in message, message
    assert "\n" not in message


def test_a_nul_byte_in_a_name_is_an_error_not_a_ValueError():
    with pytest.raises(ConfigError, match="NUL"):
        read_bytes("a\0b.yaml")


def test_the_size_limit_is_checked_before_reading_and_holds_exactly(tmp_path):
    at, over = tmp_path / "at.yaml", tmp_path / "over.yaml"
    at.write_bytes(b"a" * 100)
    over.write_bytes(b"a" * 101)
    assert read_bytes(at, limit=100) == b"a" * 100
    with pytest.raises(ConfigError, match="larger than the limit of 100 bytes"):
        read_bytes(over, limit=100)
    # a sparse file reports its size: refused without reading a byte of its 2^40
    sparse = tmp_path / "sparse.yaml"
    with open(sparse, "wb") as f:
        f.truncate(2**40)
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="larger than the limit"):
        read_bytes(sparse)
    assert time.monotonic() - t0 < 1


def test_a_file_that_reports_size_0_is_still_read_only_to_the_limit():
    # /proc files say st_size 0 whatever they hold; the read itself is bounded
    data = read_bytes("/proc/self/status", limit=MAX_FILE_BYTES)
    assert 0 < len(data) <= MAX_FILE_BYTES


def test_text_that_is_not_utf8_is_named_not_quoted(tmp_path):
    secret = tmp_path / "s.yaml"
    secret.write_bytes(b"TOKEN=\xff\xfeSECRET")
    with pytest.raises(ConfigError) as err:
        read_text(secret, what="YAML file")
    assert "SECRET" not in str(err.value) and "not UTF-8" in str(err.value)


def test_a_target_that_cannot_be_written_is_refused_before_any_work(special, tmp_path):
    for case in ("fifo", "folder", "device", "not a folder"):
        path, _ = special[case]
        with pytest.raises(ConfigError) as err:
            check_writable_file(path, what="trace file", named_by="--trace")
        assert "--trace" in str(err.value) and str(path) in str(err.value)
    check_writable_file(tmp_path / "new.json", what="trace file")  # a new file in a folder: fine


# ------------------------------------------------------------------ every command that reads a file
def _run(args, env=None, cwd=REPO, timeout=20):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "wus_sim", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)
    return proc.returncode, proc.stderr, time.monotonic() - t0


def _one_line(err):
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


COMMANDS = {
    # option -> a command line reading the file that option names, and the name its error must give
    "--measured": (lambda p, d: ["validate", "--measured", str(p), "--no-plot", "--out", str(d / "v")],
                   "measured"),
    "--calibration": (lambda p, d: ["step", "ncf", "-t", "tpu-v3-8", "--calibration", str(p)], "calibration"),
    "experiment": (lambda p, d: ["run", str(p), "--out", str(d / "o")], str),
    "--topology": (lambda p, d: ["step", "ncf", "-t", str(p)], str),
    "--optimizer": (lambda p, d: ["step", "ncf", "-t", "tpu-v3-8", "--optimizer", str(p)], "optimizer"),
    "--trace": (lambda p, d: ["step", "ncf", "-t", "tpu-v3-8", "--trace", str(p)], "--trace"),
    "calibrate --out": (lambda p, d: ["calibrate", "--out", str(p)], "--out"),
}


@pytest.mark.parametrize("option", sorted(COMMANDS))
@pytest.mark.parametrize("case", ["fifo", "folder", "loop", "device"])
def test_every_file_option_refuses_a_special_file_in_one_line(special, tmp_path, option, case):
    path, word = special[case]
    make, named = COMMANDS[option]
    code, err, wall = _run(make(path, tmp_path))
    line = _one_line(err)
    assert code == 2 and wall < 10, (code, wall, line)
    assert str(path) in line and word in line, line
    if named is not str:
        assert f"{named}: " in line, line


# ------------------------------------------------------------------ search folders
def test_a_bad_file_in_a_search_folder_is_read_only_when_it_is_named(tmp_path):
    """`run` read every *.yaml of WUS_SIM_TOPOLOGY_PATH for the model fingerprint: one folder
    named x.yaml there broke every run (IsADirectoryError), and a FIFO hung it."""
    d = tmp_path / "topologies"
    d.mkdir()
    (d / "x.yaml").mkdir()
    os.mkfifo(d / "y.yaml")
    with open(d / "big.yaml", "wb") as f:
        f.truncate(3 * 2**20)
    env = {"WUS_SIM_TOPOLOGY_PATH": str(d), "WUS_SIM_OPTIMIZER_PATH": str(d), "WUS_SIM_WORKLOAD_PATH": str(d)}
    code, err, wall = _run(["run", "quickstart", "--limit", "1", "--out", str(tmp_path / "o"), "--no-plots"], env)
    assert code == 0 and "Traceback" not in err and wall < 20, err
    for args, name in ((["step", "ncf", "-t", "y"], "y.yaml"), (["step", "ncf", "-t", "x"], "x.yaml"),
                       (["step", "y", "-t", "tpu-v3-8"], "y.yaml"),
                       (["step", "ncf", "-t", "tpu-v3-8", "--optimizer", "x"], "x.yaml"),
                       (["step", "ncf", "-t", "big"], "big.yaml")):
        code, err, wall = _run(args, env)
        line = _one_line(err)
        assert code == 2 and str(d / name) in line and wall < 10, line


def test_the_fingerprint_hashes_the_user_files_a_run_names_and_only_those(tmp_path, monkeypatch):
    from wus_sim.experiments.runner import model_fingerprint

    d = tmp_path / "t"
    d.mkdir()
    shipped = (REPO / "topologies" / "tpu-v3-8.yaml").read_text()
    (d / "mine.yaml").write_text(shipped)
    (d / "other.yaml").write_text(shipped)
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(d))
    points = [{"topology": "mine", "workload": "ncf", "optimizer": "sgd"}]
    before = model_fingerprint(points=points)
    (d / "other.yaml").unlink()
    (d / "other.yaml").mkdir()          # a file the run does not name: no effect, not read
    assert model_fingerprint(points=points) == before
    (d / "mine.yaml").write_text(shipped + "\n# edited\n")  # the file the run uses: a new model
    assert model_fingerprint(points=points) != before


# ------------------------------------------------------------------ measured tables
def _table(path, rows, header=None):
    shipped = REPO / "wus_sim" / "data" / "validation" / "mlperf_v06_tpu_v3.csv"
    with open(shipped, newline="") as f:
        reader = csv.reader(f)
        head, first = next(reader), next(reader)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header or head)
        for edit in rows:
            row = dict(zip(head, first))
            row.update(edit)
            w.writerow([row[h] for h in head])
    return path


@pytest.mark.parametrize("edit, rule", [
    ({"method": "x" * 200_000}, "longer than"),
    ({"method": "x" * 5_000}, "over the limit of 4,000"),
    ({"cores": "1" * 400, "replicas": "1" * 400}, "whole number"),
    ({"global_batch": str(2**40)}, "from 1 to"),
    ({"measured_step_s": "1e400"}, "finite"),
    ({"measured_step_s": "nan"}, "> 0"),
    ({"runs": "true"}, "whole number"),
])
def test_a_measured_table_cell_breaks_a_declared_rule_in_one_error(tmp_path, edit, rule):
    from wus_sim.validation.measured import load_measured

    path = _table(tmp_path / "t.csv", [edit])
    with pytest.raises(ConfigError) as err:
        load_measured(path)
    message = str(err.value)
    assert rule in message and "t.csv" in message and len(message) < 400, message


def test_a_measured_table_has_a_row_limit(tmp_path):
    from wus_sim.validation.measured import MAX_ROWS, load_measured

    lines = (REPO / "wus_sim/data/validation/mlperf_v06_tpu_v3.csv").read_text().splitlines()
    head = "benchmark,workload,topology,cores,replicas,spatial_ways,global_batch,per_replica_batch,optimizer," \
           "measured_step_s,kind"
    path = tmp_path / "rows.csv"
    path.write_text(head + "\n" + "".join(f"b{i},ncf,tpu-v3-8,8,8,1,8,1,sgd,1,exact\n" for i in range(MAX_ROWS + 1)))
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=f"over the limit of {MAX_ROWS:,}"):
        load_measured(path)
    assert time.monotonic() - t0 < 2 and len(lines) < MAX_ROWS


def test_a_file_that_is_not_a_table_is_named_never_quoted(tmp_path):
    from wus_sim.validation.measured import load_measured

    for text in ("root:x:0:0:TOPSECRET:/root:/bin/bash\n", "TOKEN=TOPSECRET\n", "TOPSECRET\n1\n"):
        path = tmp_path / "p.csv"
        path.write_text(text)
        with pytest.raises(ConfigError) as err:
            load_measured(path)
        assert "TOPSECRET" not in str(err.value) and "p.csv" in str(err.value), str(err.value)
    # a header of known columns with one unknown: that column is quoted, cut to an excerpt
    _table(tmp_path / "u.csv", [], header=None)
    text = (tmp_path / "u.csv").read_text().splitlines()
    (tmp_path / "u.csv").write_text(text[0] + "," + "z" * 500 + "\n")
    with pytest.raises(ConfigError) as err:
        load_measured(tmp_path / "u.csv")
    assert "is not a known column" in str(err.value) and "z" * 61 not in str(err.value)


def test_names_the_os_refuses_in_lookups_are_errors_not_OSError(monkeypatch, tmp_path):
    """Found by the fuzz profile: Path.is_file() / is_dir() raise OSError for a 300-character
    name instead of answering False (a calibration name; a search folder's entry)."""
    import wus_sim

    with pytest.raises(ConfigError, match="unknown calibration"):
        wus_sim.load_calibration("x" * 300)
    for variable in ("WUS_SIM_TOPOLOGY_PATH", "WUS_SIM_OPTIMIZER_PATH", "WUS_SIM_WORKLOAD_PATH"):
        monkeypatch.setenv(variable, str(tmp_path / ("d" * 300)))
    assert main(["step", "ncf", "-t", "nope"]) == 2
    assert main(["list", "optimizers"]) == 0
    assert main(["list", "workloads"]) == 0
