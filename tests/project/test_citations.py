"""Shipped files cite public sources, never internal notes that users do not have.

Users get the repository, not the notes it was written from: anything the product needs
from them is copied in with its public source named (papers, datasheets, repositories).
"""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["wus_sim", "topologies", "experiments", "notebooks", "docs", "README.md", "pyproject.toml"]
FORBIDDEN = ("../shared", "shared/reference", "hardware.md", "workloads.md", "paper.md")
# This module is the only file under tests/ allowed to name them (it has to, to look for them).
THIS = Path(__file__).resolve()


def _files(roots):
    for root in roots:
        path = REPO / root
        if path.is_file():
            yield path
        elif path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".png"):
                    yield f


def _hits(files):
    out = []
    for f in files:
        if f.resolve() == THIS:
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            text = f.read_bytes().decode("latin-1")
        for lineno, line in enumerate(text.splitlines(), 1):
            for word in FORBIDDEN:
                if word in line:
                    name = f.relative_to(REPO) if f.is_relative_to(REPO) else f
                    out.append(f"{name}:{lineno}: {word}")
    return out


@pytest.mark.parametrize("root", SHIPPED)
def test_shipped_files_cite_no_internal_notes(root):
    assert (REPO / root).exists(), root
    assert _hits(_files([root])) == []


def test_tests_cite_no_internal_notes():
    assert _hits(_files(["tests"])) == []


def test_guard_finds_a_citation(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("a: 1  # see ../shared/reference/hard" + "ware.md\n")
    assert len(_hits([f])) == 3


def test_reference_tensor_lists_are_in_the_repository():
    assert (REPO / "tests" / "data" / "model_tensors.json").is_file()
    assert (REPO / "tests" / "data" / "README.md").is_file()
