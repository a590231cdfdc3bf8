"""The documentation site (issue 36, item 1): README.md is short and links every page; the site
(MkDocs + Material, config docs/mkdocs/mkdocs.yml) lists every page in its nav and builds
strictly (a broken link or anchor fails). The build is skipped only where mkdocs is not
installed (`pip install -e '.[docs]'`; .ci/run installs it)."""

import importlib.util
from pathlib import Path
import re
import subprocess
import sys

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONFIG = DOCS / "mkdocs" / "mkdocs.yml"


def _nav_pages(nav):
    for item in nav:
        for value in item.values():
            if isinstance(value, list):
                yield from _nav_pages(value)
            else:
                yield value


def _config():
    # the config's !!python tags are none; plain YAML
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def test_the_readme_is_short_and_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    linked = set(re.findall(r"\]\(docs/([^)#]+\.md)", readme))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "mkdocs" not in p.parts} - {"index.md"}
    assert pages <= linked, sorted(pages - linked)


def test_the_nav_lists_every_page():
    nav = set(_nav_pages(_config()["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "mkdocs" not in p.parts}
    assert pages == nav, (sorted(pages - nav), sorted(nav - pages))


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_the_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(CONFIG),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "simulate_strategies" in api and "doc-function" in api  # the reference, from the docstrings
    assert (tmp_path / "site" / "formats" / "experiment" / "index.html").exists()
