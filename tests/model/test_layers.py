"""Layering: a module never imports from a layer above its own (style.md, "Layers").

Imports inside functions count too: a lazy import is still a dependency.
"""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "wus_sim"

# The layers, lowest first: one entry per folder of wus_sim/ (a package is a layer; packages on
# one line share a rank and may import each other's modules only if no circle results), then
# the tools that stand at the top beside cli/. The folder list is read from disk, so a new
# package fails here until it is given its place.
LAYERS = [
    ("inputs",),
    ("optimizers", "hardware"),
    ("model",),
    ("collectives",),
    ("training",),
    ("experiments", "validation"),
    ("plotting",),
    ("cli", "bench", "docs", "doors", "__main__"),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
TOOLS = {"bench", "docs", "doors", "__main__"}
"""Modules allowed directly in wus_sim/ besides __init__ (issue: at most four)."""


def test_every_folder_has_a_layer():
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in PKG.glob("*.py")} - {"__init__"}
    assert packages | modules == set(RANK), "tests/model/test_layers.py LAYERS must name exactly the folders and tools of wus_sim/"
    assert modules <= TOOLS and len(modules) <= 4, modules


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
    assert me in RANK, f"{me} is not in the layer map of tests/model/test_layers.py; add it to its layer"
    for dep in imported_top_modules(path):
        if dep == me:
            continue
        assert dep in RANK, f"{path.name} imports wus_sim.{dep}, which is not in the layer map"
        assert RANK[dep] <= RANK[me], (
            f"{path.relative_to(PKG)} (layer {RANK[me]}: {me}) imports {dep} (layer {RANK[dep]})")


# The rooms inside the three big layers, lowest first (each sub-package's docstring says the
# same): a module imports only from its own room, a lower room of its layer, or lower layers.
# "" is the layer's top (its modules beside the rooms); rooms on one line share a rank.
ROOMS = {
    "collectives": [("schedules",), ("engines",), ("",)],
    "training": [("parameters",), ("update", "timeline"), ("",), ("parallelism",)],
    "model": [("ops",), ("",), ("importers",)],
}
ROOM_RANK = {layer: {room: i for i, rooms in enumerate(order) for room in rooms} for layer, order in ROOMS.items()}
MAX_ENTRIES = 12
"""Entries (modules and sub-packages, __init__ included) a layer's folder may list."""
MORE_ENTRIES = {
    "cli": "one module per command (its name is the command's), plus the parser and option ranges",
    "inputs": "14 small boundary modules (errors, text, files, config, units, ...): not yet grouped",
}
"""Layers allowed past MAX_ENTRIES, each with why."""


def _room(module):
    """(layer, room) of a dotted module name below wus_sim ("" for a layer's top modules)."""
    parts = module.split(".")
    layer = parts[0]
    if layer in ROOMS and len(parts) >= 2 and (PKG / layer / parts[1]).is_dir():
        return layer, parts[1]
    return layer, ""


def test_every_room_has_a_rank():
    for layer in ROOMS:
        rooms = {p.name for p in (PKG / layer).iterdir() if (p / "__init__.py").is_file()}
        assert rooms | {""} == set(ROOM_RANK[layer]), f"ROOMS[{layer!r}] must name exactly the sub-packages of wus_sim/{layer}/"


@pytest.mark.parametrize("layer", sorted({p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}))
def test_layer_folders_list_few_entries(layer):
    entries = [p.name for p in (PKG / layer).iterdir()
               if p.name != "__pycache__" and (p.suffix == ".py" or (p / "__init__.py").is_file())]
    if layer in MORE_ENTRIES:
        pytest.skip(MORE_ENTRIES[layer])
    assert len(entries) <= MAX_ENTRIES, f"wus_sim/{layer}/ lists {len(entries)} entries: group them into rooms ({sorted(entries)})"


@pytest.mark.parametrize("path", [p for p in MODULES if top_module(p) in ROOMS], ids=lambda p: str(p.relative_to(PKG)))
def test_no_upward_imports_between_rooms(path):
    me = _module_name(path)
    layer, room = _room(me[len("wus_sim."):] if me.startswith("wus_sim.") else me)
    for dep in _imported_modules(path):
        dep_layer, dep_room = _room(dep)
        if dep_layer != layer or dep_room == room:
            continue  # another layer (test_no_upward_imports) or its own room
        assert ROOM_RANK[layer][dep_room] <= ROOM_RANK[layer][room], (
            f"{path.relative_to(PKG)} (room {room or 'top'!r} of {layer}) imports {dep} (room {dep_room or 'top'!r})")


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


def _module_name(path):
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imported_modules(path):
    """Fully qualified modules below wus_sim that *path* imports (lazy imports included)."""
    tree = ast.parse(path.read_text())
    me = _module_name(path).split(".") if _module_name(path) else []
    pkg = me if path.name == "__init__.py" else me[:-1]
    known = {_module_name(p) for p in PKG.rglob("*.py")}
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "wus_sim":
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                sub = ".".join(target + [alias.name])
                out.add(sub if sub in known else ".".join(target))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "wus_sim":
                    out.add(".".join(parts[1:]))
    return {m for m in out if m}


def test_no_import_circles():
    """No module reaches itself through imports, lazy ones included (a package's __init__
    re-exporting its modules is not an edge back: the edges are the modules' own imports)."""
    graph = {}
    for p in PKG.rglob("*.py"):
        if p.name == "__init__.py":
            continue
        graph[_module_name(p)] = {m for m in _imported_modules(p)}
    inits = {_module_name(p) for p in PKG.rglob("__init__.py")}
    for deps in graph.values():
        deps -= inits  # importing a package's public name: its __init__ only re-exports
    circles = []
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                circles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_long_modules_say_why():
    """At most three modules over 450 lines, each with a docstring line that says why it is one concept."""
    long = {p: len(p.read_text().splitlines()) for p in PKG.rglob("*.py")}
    long = {p: n for p, n in long.items() if n > 450}
    assert len(long) <= 3, {str(p.relative_to(PKG)): n for p, n in long.items()}
    for p in long:
        doc = ast.get_docstring(ast.parse(p.read_text())) or ""
        assert "One concept" in doc, f"{p.relative_to(PKG)} is {long[p]} lines; its docstring must say why it is one concept ('One concept: ...')"
