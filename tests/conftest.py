"""Test folders mirror the package's layers (tests/README.md).

Test modules import shared fixtures by module name (``from make_topology import make``,
``from test_step_golden import ...``), as they did when tests/ was flat; every folder under
tests/ except data/ goes on sys.path so those imports still resolve whichever layer's
folder pytest is collecting (the rooms inside a layer's folder, e.g. collectives/engines/, too).
"""
import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _folder in sorted(p for p in _TESTS.rglob("*") if p.is_dir() and not {"data", "__pycache__"} & set(p.relative_to(_TESTS).parts)):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


def pytest_addoption(parser):
    parser.addoption("--module-order", default=None, metavar="reverse|shuffle:SEED",
                     help="run the test modules in another order (each module's own tests keep theirs, so its "
                          "fixtures are built once): a test that passes only after some other module is a defect")


def pytest_collection_modifyitems(config, items):
    order = config.getoption("--module-order")
    if not order:
        return
    modules = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    names = list(modules)
    if order == "reverse":
        names.reverse()
    elif order.startswith("shuffle:"):
        import random

        random.Random(order.split(":", 1)[1]).shuffle(names)
    else:
        raise pytest.UsageError(f"--module-order: {order!r} is not 'reverse' or 'shuffle:SEED'")
    items[:] = [item for name in names for item in modules[name]]
