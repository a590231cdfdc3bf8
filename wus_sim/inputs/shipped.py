"""Where the shipped data files are, and how user files are layered over them.

In a checkout the top-level ``topologies/`` and ``experiments/`` folders are the source of
truth. A wheel cannot reach beside the package, so ``pyproject.toml`` maps both folders into
it as ``wus_sim/data/topologies`` and ``wus_sim/data/experiments``. :func:`shipped_dir` looks
inside the package first and falls back to the checkout's folder, so one rule serves an
installed wheel, an editable install and a bare checkout alike (no copy step to forget).

User directories (``WUS_SIM_TOPOLOGY_PATH``, ...) add to the shipped files; an entry of the
same name overrides the shipped one and :func:`note_override` says so once on stderr, so a
stray file cannot silently change a result.
"""

import os
from pathlib import Path
import sys

__all__ = ["PACKAGE_DIR", "shipped_dir", "schema_path", "env_dirs", "note_override", "note_once"]

PACKAGE_DIR = Path(__file__).resolve().parent.parent
"""The installed (or checked-out) ``wus_sim`` package folder."""

_NOTED = set()


_CHECKOUT = {"formats": Path("docs") / "formats"}
"""Where a checkout keeps a kind whose folder is not named after it (the others: ``kind/``)."""


def shipped_dir(kind):
    """The folder of shipped ``kind`` files (``"topologies"``, ``"experiments"`` or ``"formats"``,
    the format references)."""
    inside = PACKAGE_DIR / "data" / kind
    if inside.is_dir():
        return inside
    return PACKAGE_DIR.parent / _CHECKOUT.get(kind, kind)


def schema_path(output, version):
    """The JSON Schema of an output's shape, e.g. ``schema_path("step", 1)`` for ``step --json``."""
    return PACKAGE_DIR / "schemas" / f"{output}.v{version}.json"


def env_dirs(variable):
    """Directories listed in the environment *variable* (``os.pathsep``-separated), in order."""
    return [Path(p) for p in os.environ.get(variable, "").split(os.pathsep) if p]


def note_override(kind, name, path):
    """Say on stderr (once per process and file) that the user's *path* replaces the shipped *kind* *name*."""
    key = (kind, name, str(path))
    if key in _NOTED:
        return
    _NOTED.add(key)
    print(f"wus-sim: note: {kind} {name!r} from {path} overrides the shipped one", file=sys.stderr)


def note_once(text):
    """Say *text* on stderr as a note, once per process."""
    if text in _NOTED:
        return
    _NOTED.add(text)
    print(f"wus-sim: note: {text}", file=sys.stderr)
