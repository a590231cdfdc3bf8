"""A run's output folder: created with clear errors, locked, and owned by one experiment.

Rules (docs/inputs.md, "Run folders"):

* ``--out DIR`` is created if missing; a path that is a file, lies under a file, or
  cannot be written is a one-line error before any point runs.
* A run holds an exclusive lock on ``DIR/.wus-sim.lock`` (``fcntl.flock``) for its whole
  life; a second run into DIR fails at once naming the holder's pid. The kernel drops
  the lock when the holder dies, even by SIGKILL, so a stale lock never blocks a resume.
* ``DIR/run.json`` names the experiment whose results DIR holds. A run of another
  experiment (or into a folder holding results with no ``run.json``) is refused unless
  ``overwrite``; ``resume`` is allowed only for the same experiment.
* A run of the same experiment into a folder whose last run did not finish (its journal
  holds points and its ``run.json`` lists no files: killed or interrupted) is refused
  unless ``resume`` (continue it) or ``overwrite`` (start over): a fresh start would
  truncate the journal and lose the finished points without a word.
* A finished run removes the files an earlier run of the same experiment wrote and it did
  not (``run.json`` keeps their names as ``earlier`` while a run is unfinished), so no plot
  of earlier results is left beside new ones.
* Every file the run reads or replaces in DIR (:data:`RUN_FILES`) must be a regular file if it
  is there at all: one replaced by a folder, a FIFO, a device or a link to one (``/dev/null``)
  is a one-line error naming it before any point runs, never a hang or a traceback.
* The journal is read line by line (a line over :data:`MAX_JOURNAL_LINE` is skipped like any
  other damaged line), and each entry is checked field by field (:func:`journal_entry_ok`): an
  entry that fails is ignored, so its point is simulated again, never dropped from the results.
"""

import errno
import fcntl
import json
import math
import os
import time
from pathlib import Path
import stat

from ..inputs.errors import ConfigError
from ..inputs.files import kind_of, read_text

__all__ = ["RunDir", "LOCK_NAME", "OWNER_NAME", "RESULT_NAMES", "JOURNAL_NAME", "RUN_FILES", "read_journal",
           "journal_entry_ok", "journal_text", "MAX_JOURNAL_LINE"]

LOCK_NAME = ".wus-sim.lock"
OWNER_NAME = "run.json"
RESULT_NAMES = ("points.jsonl", "results.csv", "results.parquet")
"""Files whose presence means the folder holds some experiment's results."""


JOURNAL_NAME = "points.jsonl"
"""The points journal: one JSON line per finished point, appended as points finish."""

RUN_FILES = (LOCK_NAME, OWNER_NAME, JOURNAL_NAME, "results.csv", "results.parquet", "columns.md", "columns.json",
             "config.resolved.yaml")
"""The files a run reads or replaces in its folder: each must be a regular file if present."""

MAX_JOURNAL_LINE = 64 * 2**20
"""Longest journal line read (one point's rows; a shipped point's line is under 10 KiB)."""

MAX_OWNER_BYTES = 2**20
"""Largest ``run.json`` read (it lists the run's files: a few KiB)."""

ROW_STATUSES = ("ok", "infeasible", "error")


def journal_entry_ok(entry):
    """Whether a parsed journal line is a whole entry: a point hash, the point, its wall time and
    at least one row (a mapping of column names to scalars or flat lists, with a known ``status``). A point always has a row
    (an error row if it failed), so ``rows: []`` is a damaged entry, not a point without results."""
    if not isinstance(entry, dict) or not isinstance(entry.get("hash"), str) or not entry["hash"]:
        return False
    if not isinstance(entry.get("point"), dict) or not isinstance(entry.get("model"), str):
        return False
    wall = entry.get("wall_s")
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not (0 <= wall < math.inf):
        return False
    rows = entry.get("rows")
    if not isinstance(rows, list) or not rows:
        return False
    return all(isinstance(r, dict) and r.get("status") in ROW_STATUSES
               and all(isinstance(k, str) and _cell_ok(v) for k, v in r.items()) for r in rows)


def _cell_ok(value):
    """A results cell as the runner writes it: a scalar, or a flat list of them (per-axis values)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, list) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value)


def read_journal(path, *, repair=False, wanted=None):
    """Entries of a points journal, keyed by point hash (only the hashes in *wanted*, if given:
    a huge journal of other points costs a read, not memory).

    The journal is append-only in the order points finished, so a later entry for a hash is
    the newer simulation of that point and wins: a point redone because its entry came from
    another model version is then taken from the redo, not simulated again at every resume.

    Read tolerantly, line by line: a line that does not parse as an entry, or whose fields do
    not hold (:func:`journal_entry_ok`), is skipped and reading goes on, so nothing after a good
    line is lost and a bad entry's point runs again. A last line with no newline was cut short
    by a kill and is dropped; with *repair* the file is truncated to its last newline (only that
    torn tail) so that appends start on a line of their own. A journal that is not a regular file
    (a folder, a FIFO, a link to a device) is a ConfigError naming it.
    """
    path = Path(path)
    entries = {}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return entries
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror}", file=path) from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"is {kind_of(st.st_mode)}, not a journal; remove it, or give another --out", file=path)
    end = 0  # offset just past the last newline
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            while True:
                line = f.readline(MAX_JOURNAL_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_JOURNAL_LINE:  # skip the rest of an over-long line
                    while line and not line.endswith(b"\n"):
                        line = f.readline(MAX_JOURNAL_LINE + 1)
                    end = f.tell() if line else end
                    continue
                if not line.endswith(b"\n"):
                    break  # torn last line
                end = f.tell()
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if journal_entry_ok(entry) and (wanted is None or entry["hash"] in wanted):
                    entries[entry["hash"]] = entry
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror}", file=path) from None
    if repair and end < st.st_size:
        try:
            with open(path, "r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise ConfigError(f"cannot be repaired (its torn last line cut off): {exc.strerror}", file=path) from None
    return entries


def journal_text(point, outcome):
    """The JSON of a journal entry's *point* and *outcome* (``rows``, ``wall_s``): the end of the
    line :class:`_Journal` writes for them, made where the point ran (a worker process)."""
    return _ENCODER.encode({"point": point, **outcome})


_ENCODER = json.JSONEncoder(default=str, separators=(",", ":"), check_circular=False)
"""``json.dumps(..., default=str, separators=(",", ":"))``'s text, made by one encoder kept for
every line and without the circular-reference check (an entry is fresh dicts and lists of
scalars): a sweep point's 6 KB of JSON in about half the time."""


class _Journal:
    def __init__(self, path, *, fresh):
        self.path = Path(path)
        if fresh:
            # A fresh run starts a new journal; the run folder's lock guarantees no other
            # run is appending to the old one.
            self.path.unlink(missing_ok=True)
        # Append-only (O_APPEND): every write lands at the end, after every whole line.
        self.file = open(self.path, "a", encoding="utf-8")
        self._synced = time.monotonic()

    SYNC_EVERY_S = 1.0
    """Longest time a written line waits for ``fsync``."""

    def append(self, entry, text=None):
        """Write *entry* (hash, index, model, point, then its outcome's keys); *text*: its point's
        and outcome's JSON already made (:func:`journal_text`), so only the head is written here:
        the same line, byte for byte (a sweep's parent wrote 100,000 entries' JSON alone)."""
        # One write per line, flushed at once: a killed process (SIGKILL, Ctrl-C) leaves every
        # finished point on disk, whole lines plus at most one torn one, because a flushed write
        # is the kernel's. fsync (what survives a machine crash too) at most once a second and
        # on close: per point it cost more than a point of a sweep (about 3 ms against 1 ms).
        if text is None:
            line = _ENCODER.encode(entry)
        else:  # the head's JSON without its closing brace, then the text without its opening one
            head = {"hash": entry["hash"], "index": entry["index"], "model": entry["model"]}
            line = _ENCODER.encode(head)[:-1] + "," + text[1:]
        self.file.write(line + "\n")
        self.file.flush()
        now = time.monotonic()
        if now - self._synced >= self.SYNC_EVERY_S:
            os.fsync(self.file.fileno())
            self._synced = now

    def close(self):
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
        finally:
            self.file.close()


class RunDir:
    """The locked output folder of one run; use as a context manager."""

    def __init__(self, path, experiment_name, *, resume=False, overwrite=False):
        self.path = Path(path)
        self.experiment = experiment_name
        self.resume = resume
        self.overwrite = overwrite
        self._lock_fd = None
        self._earlier = []

    def __enter__(self):
        self._make()
        self._check_files()
        self._lock()
        self.files = []
        """Files this run wrote (recorded in run.json on exit)."""
        try:
            self._claim()
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self.files:
                self._remove_earlier(self.files)
                self.record(self.files)
        finally:
            self.release()
        return False

    # ------------------------------------------------------------ steps
    def _error(self, rule):
        return ConfigError(rule, file=self.path, key_path="--out")

    def _make(self):
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise self._error("is a file, not a folder; give --out a folder") from None
        except NotADirectoryError:
            raise self._error("lies under a file, not a folder; give --out a folder") from None
        except (OSError, ValueError) as exc:
            raise self._error(f"cannot be created: {getattr(exc, 'strerror', None) or 'not a valid path'}") from None
        if not self.path.is_dir():
            raise self._error("is not a folder")
        if not os.access(self.path, os.W_OK | os.X_OK):
            raise self._error("cannot be written (no permission); give --out a writable folder")

    def _check_files(self):
        """Every run file in DIR that is there is a regular file (links followed): a folder, FIFO,
        device or link to one in its place is named now, before the lock and before any point."""
        for name in RUN_FILES:
            path = self.path / name
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if os.path.lexists(path):
                    raise ConfigError("is a symbolic link to a file that does not exist; remove it, or give "
                                      "another --out", file=path) from None
                continue
            except OSError as exc:
                raise ConfigError(f"cannot be read: {exc.strerror}; remove it, or give another --out",
                                  file=path) from None
            if not stat.S_ISREG(st.st_mode):
                raise ConfigError(f"is {kind_of(st.st_mode)}, not the run's file; remove it, or give another "
                                  "--out", file=path)

    def _lock(self):
        lock_path = self.path / LOCK_NAME
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise self._error(f"cannot be written: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_small(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise self._error(f"is in use by another wus-sim run ({holder or 'pid unknown'}); wait for it "
                                  "to finish or give another --out") from None
            raise self._error(f"cannot be locked: {exc.strerror}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        self._lock_fd = fd

    def _claim(self):
        owner = self._owner_doc().get("experiment")
        has_results = any((self.path / name).exists() for name in RESULT_NAMES)
        if has_results and owner != self.experiment and not self.overwrite:
            what = f"results of experiment {owner!r}" if owner else "results of another run (no run.json)"
            raise self._error(f"holds {what}, not of {self.experiment!r}; give another --out, "
                              "or --overwrite to replace them")
        if owner == self.experiment and not (self.resume or self.overwrite) and not self._owner_doc().get("files"):
            finished = self._journaled_points()
            if finished:
                raise self._error(f"holds {finished} finished point{'s' if finished != 1 else ''} of an interrupted "
                                  f"run of {self.experiment!r}; add --resume to continue it, or --overwrite to "
                                  "start over")
        if has_results and owner != self.experiment and self.overwrite:
            # The other experiment's files go (those its run.json lists, and the results), so no
            # stale plot or table of it is left beside the new results.
            listed = self._owner_doc().get("files", [])
            for name in set(RESULT_NAMES) | {n for n in listed if isinstance(n, str) and "/" not in n}:
                try:
                    (self.path / name).unlink()
                except (FileNotFoundError, IsADirectoryError):
                    pass
        # Files earlier runs of this experiment wrote (kept across an interrupted run, which lists
        # none): what this run does not write again goes when it finishes (_remove_earlier).
        doc = self._owner_doc() if owner == self.experiment else {}
        listed = [n for key in ("files", "earlier") if isinstance(doc.get(key), list) for n in doc[key]]
        self._earlier = sorted({n for n in listed
                                if isinstance(n, str) and "/" not in n and n not in (OWNER_NAME, LOCK_NAME)})
        self.record([])

    def _remove_earlier(self, files):
        """Remove what an earlier run wrote and this one did not (a plot skipped for want of rows,
        or not drawn under --no-plots), so that no figure of other results sits beside these."""
        written = {Path(f).name for f in files}
        for name in self._earlier:
            if name not in written:
                try:
                    (self.path / name).unlink()
                except (FileNotFoundError, IsADirectoryError):
                    pass
        self._earlier = []

    def _journaled_points(self):
        """Points in this folder's journal (0 if it has none)."""
        try:
            return len(read_journal(self.path / JOURNAL_NAME))
        except OSError:
            return 0

    def _owner_doc(self):
        if not (self.path / OWNER_NAME).exists():
            return {}
        try:
            from ..inputs.strict_json import loads_strict

            doc = loads_strict(read_text(self.path / OWNER_NAME, what="run file", limit=MAX_OWNER_BYTES),
                               file=self.path / OWNER_NAME, what="a run file")
        except (ConfigError, ValueError, RecursionError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def record(self, files):
        """Write ``run.json``: the experiment this folder's results belong to and the files written."""
        owner_path = self.path / OWNER_NAME
        doc = {"experiment": self.experiment, "files": sorted({Path(f).name for f in files})}
        if self._earlier:
            doc["earlier"] = self._earlier  # an earlier run's files, until this run finishes
        from ..inputs.writes import write_atomic

        write_atomic(owner_path, json.dumps(doc) + "\n", what="run file")

    def release(self):
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None


def _read_small(fd):
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 64).decode("utf-8", "replace").strip()
    except OSError:
        return ""
