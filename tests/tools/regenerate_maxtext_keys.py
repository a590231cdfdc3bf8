"""Regenerate the list of MaxText's config keys and their defaults from MaxText's base.yml.

Not runtime code: it writes ``wus_sim/data/maxtext/base_keys.csv``, the keys ``--maxtext`` and
``--maxtext-config`` accept (a key in none of the pinned base.yml files is an unknown key, one
line, exit 2) and each key's default value (a key that would change a step and is not modelled
is accepted at its default only; ``wus_sim.training.parameters.maxtext_keys``). Run it from the
repository root with a clone (bare or not) of github.com/AI-Hypercomputer/maxtext that has the
pinned commits::

    python tests/tools/regenerate_maxtext_keys.py [--repo PATH] [--check]

``--check`` writes nothing and exits 1 if the shipped CSV differs. Every file is read with
``git show COMMIT:path``. The commits are today's main (the tiering page's commit) and the
commits of the tiering recipes (wus_sim/data/validation/maxtext_tiering.csv's ``config``
column), so that a recipe's keys that main has since dropped (e.g.
``ici_tensor_transpose_parallelism``) are known too. A key's default is main's; a key main no
longer has takes the newest pinned commit's; other pinned commits' different defaults are kept
in ``also_default`` (a recipe run on that commit had them by default).

Only key names, value types and default values are read (facts of MaxText's interface, no code).
"""

import json
import subprocess
import sys
from pathlib import Path

import yaml

from csv_tool import generator_main, render_csv

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "wus_sim" / "data" / "maxtext" / "base_keys.csv"
DEFAULT_SNAPSHOT = Path("/work/.mirror/AI-Hypercomputer+maxtext/repo")
UPSTREAM = "github.com/AI-Hypercomputer/maxtext"
PINNED = (  # newest first: the first commit that has a key gives its default
    "e591f30cbbf217ed67ef71263ec0538239f9c3b8",  # main when the tiering page was read (2026-08-22)
    "5e6a7caff904f67fa654fc0ae983a16156bc21f8",  # tiering row 4's recipe
    "92e59fdf547421f647590087f50fea5729da42d8",  # rows 3 and 7
    "9f1820b472ef362e7b5c782fe1d6fda8a0943eff",  # row 2
    "14b5876ea857c09cc3d8645385f984689376a331",  # rows 1, 5 and 6
    "1d27abf83ee189760fbcc789588951dbc7b892b0",  # row 8's base.yml (tpu-recipes' MaxText of 2024-10)
)
BASE_PATHS = ("src/maxtext/configs/base.yml", "src/MaxText/configs/base.yml", "MaxText/configs/base.yml")
"""Where base.yml has lived (newest first)."""
COLUMNS = ("key", "kind", "default", "also_default", "source")


def base_yml(repo, commit):
    """``(path, mapping)`` of base.yml at *commit*."""
    for path in BASE_PATHS:
        r = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, text=True)
        if r.returncode == 0:
            return path, yaml.safe_load(r.stdout)
    raise SystemExit(f"no base.yml at {commit} in {repo} (tried {', '.join(BASE_PATHS)})")


def kind_of(value):
    return "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else "scalar"


def build_rows(repo):
    """One row per key of any pinned base.yml, in main's order, then the dropped keys by name."""
    found = [(commit, *base_yml(repo, commit)) for commit in PINNED]
    order = list(found[0][2])
    order += sorted({k for _, _, doc in found[1:] for k in doc} - set(order))
    rows = []
    for key in order:
        have = [(commit, path, doc[key]) for commit, path, doc in found if key in doc]
        commit, path, default = have[0]
        kind = kind_of(default)
        # lists and mappings (mesh_axes, logical_axis_rules, ...) are not kept: a value given for
        # one is compared with nothing, so only their kind is recorded
        shown = None if kind != "scalar" else default
        others = []
        for _, _, v in have[1:]:
            if kind_of(v) == "scalar" and kind == "scalar" and v != default and v not in others:
                others.append(v)
        rows.append({"key": key, "kind": kind, "default": json.dumps(shown), "also_default": json.dumps(others)
                     if others else "", "source": f"{commit[:12]}:{path}"})
    return rows


def render(rows):
    return render_csv(COLUMNS, rows)


def main(argv=None):
    return generator_main(argv, description=__doc__.splitlines()[0], snapshot=DEFAULT_SNAPSHOT, upstream=UPSTREAM,
                          pinned="the pinned commits", out=OUT, build=lambda repo: render(build_rows(Path(repo))),
                          tool="tests/tools/regenerate_maxtext_keys.py")


if __name__ == "__main__":
    sys.exit(main())
