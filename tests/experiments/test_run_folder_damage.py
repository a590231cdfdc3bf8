"""Run folders that may be damaged: each file in DIR replaced by a folder, a FIFO or a link to
/dev/null is one error naming it before any point runs; journal entries are checked field by
field and a bad one is redone, never dropped, so a resumed run's results equal an
uninterrupted run's; a folder removed while the run writes into it is one error.

The fake point function of test_experiments_fake.py keeps these fast; the reference is an
uninterrupted run of the same experiment into a fresh folder."""

import json
import os
import shutil

import pytest

from wus_sim.experiments.rundir import JOURNAL_NAME, RUN_FILES, read_journal
from wus_sim.experiments.runner import run_experiment
from wus_sim.experiments.spec import parse_experiment
from wus_sim.inputs.errors import ConfigError

from test_experiments_fake import fake_point

DOC = {"workloads": ["resnet50"], "topologies": ["tpu-v3-32", "tpu-v3-128"], "optimizers": ["adam"],
       "sweep": {"per_replica_batch": [8, 16, 32]}}


def _experiment():
    return parse_experiment(DOC, name="damage")


def _comparable(df):
    return df.drop(columns=["wall_s"]).sort_values(["point_index", "strategy"]).reset_index(drop=True)


CALLS = []
"""Points :func:`counting_point` simulated (one function for the first run and the resumed one:
the journal's model id is the point function's name, so a different one would redo every point)."""


def counting_point(point):
    CALLS.append(point)
    return fake_point(point)


@pytest.fixture
def finished(tmp_path):
    out = tmp_path / "run"
    reference = run_experiment(_experiment(), out, point_fn=counting_point, jobs=1).frame
    CALLS.clear()
    return out, reference


def _damage_file(path, how):
    if path.is_dir():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if how == "folder":
        path.mkdir()
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "devnull":
        os.symlink("/dev/null", path)
    elif how == "dangling":
        os.symlink(path.parent / "nowhere", path)


@pytest.mark.parametrize("name", RUN_FILES)
@pytest.mark.parametrize("how", ["folder", "fifo", "devnull", "dangling"])
@pytest.mark.parametrize("mode", ["resume", "overwrite"])
def test_a_run_file_that_is_not_a_file_is_named_before_any_point(finished, name, how, mode):
    out, _ = finished
    _damage_file(out / name, how)
    with pytest.raises(ConfigError) as err:
        run_experiment(_experiment(), out, point_fn=counting_point, jobs=1, **{mode: True})
    assert name in str(err.value) and "\n" not in str(err.value)
    assert not CALLS


def _rewrite_journal(out, edit):
    path = out / JOURNAL_NAME
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    lines = [edit(i, e) for i, e in enumerate(entries)]
    path.write_text("".join(l + "\n" for l in lines if l is not None))
    return len(entries)


DAMAGE = {
    "rows empty": lambda e: {**e, "rows": []},
    "rows not mappings": lambda e: {**e, "rows": [1, "x", None]},
    "rows a mapping": lambda e: {**e, "rows": e["rows"][0]},
    "row without status": lambda e: {**e, "rows": [{k: v for k, v in r.items() if k != "status"} for r in e["rows"]]},
    "row status unknown": lambda e: {**e, "rows": [{**r, "status": "great"} for r in e["rows"]]},
    "wall_s text": lambda e: {**e, "wall_s": "fast"},
    "wall_s negative": lambda e: {**e, "wall_s": -1},
    "wall_s missing": lambda e: {k: v for k, v in e.items() if k != "wall_s"},
    "point missing": lambda e: {k: v for k, v in e.items() if k != "point"},
    "hash a number": lambda e: {**e, "hash": 5},
    "model missing": lambda e: {k: v for k, v in e.items() if k != "model"},
    "a list": lambda e: [e],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_journal_entry_is_redone_never_dropped(finished, damage):
    out, reference = finished
    _rewrite_journal(out, lambda i, e: json.dumps(DAMAGE[damage](e)) if i in (1, 4) else json.dumps(e))
    result = run_experiment(_experiment(), out, point_fn=counting_point, jobs=1, resume=True)
    assert len(CALLS) == 2, damage
    assert _comparable(result.frame).equals(_comparable(reference))


def test_the_journal_is_read_line_by_line_and_keeps_only_wanted_points(tmp_path):
    path = tmp_path / JOURNAL_NAME
    good = {"hash": "h1", "point": {}, "model": "m", "wall_s": 0.1, "rows": [{"status": "ok"}]}
    with open(path, "w") as f:
        f.write("x" * (3 * 2**20) + "\n")                           # garbage: skipped
        f.write(json.dumps(good) + "\n")
        for i in range(2000):
            f.write(json.dumps({**good, "hash": f"other{i}"}) + "\n")
        f.write("[" * 100_000 + "\n")                               # nests past the parser: skipped
        f.write('{"hash": "torn"')                                  # a torn last line
    entries = read_journal(path, wanted={"h1"}, repair=True)
    assert list(entries) == ["h1"]
    assert path.read_text().endswith("\n")


def test_a_folder_removed_mid_run_is_one_error(tmp_path):
    out = tmp_path / "run"
    seen = []

    def point_fn(point):
        seen.append(point)
        if len(seen) == 2:
            shutil.rmtree(out)
        return fake_point(point)

    with pytest.raises(ConfigError) as err:
        run_experiment(_experiment(), out, point_fn=point_fn, jobs=1)
    assert "cannot be written" in str(err.value) and "--resume" in str(err.value)
