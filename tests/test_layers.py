"""Layering: a module never imports from a layer above its own (style.md, "Layers").

Imports inside functions count too: a lazy import is still a dependency.
"""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "wus_sim"

LAYERS = [
    ("errors", "units", "records", "limits", "shipped"),
    ("config", "keys"),
    ("topology", "multislice", "compute", "calibration", "memory", "workloads", "optimizers", "planner"),
    ("network",),
    ("collectives",),
    ("strategies", "small_allreduce"),
    ("timeline", "step", "trace", "params"),
    ("experiments", "plotting", "validation"),
    ("cli", "bench", "docs", "__main__"),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


def top_module(path):
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0]


def imported_top_modules(path):
    tree = ast.parse(path.read_text())
    pkg_parts = path.relative_to(PKG).parent.parts
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(pkg_parts[: len(pkg_parts) - (node.level - 1)])
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    out.add(target[0])
                else:  # `from . import x` at package top level
                    out.update(alias.name for alias in node.names)
            elif node.module and node.module.split(".")[0] == "wus_sim":
                parts = node.module.split(".")
                if len(parts) > 1:
                    out.add(parts[1])
                else:
                    out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "wus_sim" and len(parts) > 1:
                    out.add(parts[1])
    return out


MODULES = sorted(p for p in PKG.rglob("*.py") if p.name != "__init__.py" or p.parent != PKG)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_upward_imports(path):
    me = top_module(path)
    assert me in RANK, f"{me} is not in the layer map of tests/test_layers.py; add it to its layer"
    for dep in imported_top_modules(path):
        if dep == me:
            continue
        assert dep in RANK, f"{path.name} imports wus_sim.{dep}, which is not in the layer map"
        assert RANK[dep] <= RANK[me], (
            f"{path.relative_to(PKG)} (layer {RANK[me]}: {me}) imports {dep} (layer {RANK[dep]})")


def test_package_import_is_light():
    import subprocess
    import sys

    code = "import sys, wus_sim; bad = [m for m in ('simpy', 'pandas', 'matplotlib') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_resolves():
    import wus_sim

    for name in wus_sim.__all__:
        assert getattr(wus_sim, name) is not None, name
    with pytest.raises(AttributeError):
        wus_sim.no_such_name
