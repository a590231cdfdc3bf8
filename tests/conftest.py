"""Test folders mirror the package's layers (tests/README.md).

Test modules import shared fixtures by module name (``from make_topology import make``,
``from test_step_golden import ...``), as they did when tests/ was flat; every folder under
tests/ except data/ goes on sys.path so those imports still resolve whichever layer's
folder pytest is collecting (the rooms inside a layer's folder, e.g. collectives/engines/, too).
"""
import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
for _folder in sorted(p for p in _TESTS.rglob("*") if p.is_dir() and not {"data", "__pycache__"} & set(p.relative_to(_TESTS).parts)):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
