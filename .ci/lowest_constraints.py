"""Print a pip constraints file pinning each direct dependency to its lower bound in pyproject.toml.

``python .ci/lowest_constraints.py test dask > lowest.txt`` then
``pip install -c lowest.txt -e '.[test,dask]'`` installs the oldest versions the project says it
supports (the extras named on the command line with the main dependencies), so CI can run the tests
against them. Transitive dependencies are left to pip's resolver: the project promises nothing about
them. A requirement without a ``>=`` bound is not pinned; one with two bounds is pinned to the lower.
"""
import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_LOWER = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(?:[^;]*?)>=\s*([^,;\s]+)")


def lowest_pins(project, extras):
    """``{name: version}`` for each requirement of the main dependencies and ``extras`` with a ``>=``."""
    requirements = list(project.get("dependencies", []))
    for extra in extras:
        if extra not in project.get("optional-dependencies", {}):
            raise SystemExit(f"no extra {extra!r} in {PYPROJECT} (known: {sorted(project['optional-dependencies'])})")
        requirements += project["optional-dependencies"][extra]
    pins = {}
    for requirement in requirements:
        match = _LOWER.match(requirement)
        if match:
            name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            pins[name] = match.group(3)
    return pins


def main(argv):
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    for name, version in sorted(lowest_pins(project, argv).items()):
        print(f"{name}=={version}")


if __name__ == "__main__":
    main(sys.argv[1:])
