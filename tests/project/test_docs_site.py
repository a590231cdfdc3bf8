"""The documentation site (issue 36, item 1): README.md is short and links every page; the site
(MkDocs + Material, config docs/mkdocs/mkdocs.yml) lists every page in its nav and builds
strictly (a broken link or anchor fails). The build is skipped only where mkdocs is not
installed (`pip install -e '.[docs]'`; .ci/run installs it); it takes about 2 s.

Pages that stay true (issue 47, item 6): no built page shows a number marker as text (the
validation page showed a literal `num:cal.id` marker, written inside a code span); the
Markdown is checked for it without the build too. The home page shows the headline figure,
the notebook's own file, and its number."""

from html.parser import HTMLParser
import importlib.util
import json
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


needs_mkdocs = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                 reason="mkdocs is not installed (pip install -e '.[docs]')")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(CONFIG),
                           "-d", str(out)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@needs_mkdocs
def test_the_site_builds_strictly(site):
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "simulate_strategies" in api and "doc-function" in api  # the reference, from the docstrings
    assert (site / "formats" / "experiment" / "index.html").exists()


MARKER = re.compile(r"<!--\s*/?num\b")
"""A number marker's opening or closing comment (tests/tools/regenerate_docs_numbers.py)."""


class _Text(HTMLParser):
    """The text a reader sees of an HTML page: its character data (comments are not text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []
        self.images = []

    def handle_data(self, data):
        self.parts.append(data)

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))


def _read(page):
    parser = _Text()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@needs_mkdocs
def test_no_built_page_shows_a_number_marker(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    shown = [str(p.relative_to(site)) for p in pages if MARKER.search(" ".join(_read(p).parts))]
    assert not shown, shown
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    found = [doc["location"] for doc in index["docs"] if MARKER.search(doc.get("text", "").replace("&lt;", "<"))]
    assert not found, found


@needs_mkdocs
def test_the_home_page_shows_the_headline_figure_and_its_number(site):
    home = _read(site / "index.html")
    (figure,) = [img for img in home.images if "paper_speedup" in img.get("src", "")]
    assert (site / figure["src"]).read_bytes() == (ROOT / "notebooks" / "figures" / "paper_speedup.png").read_bytes()
    assert figure.get("alt")
    number = _headline_number()
    text = " ".join(" ".join(home.parts).split())
    assert f"steps {number} faster" in text


def _headline_number():
    m = re.search(r"<!-- num:paper\.tfm_2048 -->(.*?)<!-- /num -->", (DOCS / "index.md").read_text(encoding="utf-8"))
    return m.group(1)


FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def literal_markers(text):
    """Number markers of a Markdown *text* that a renderer shows as text: inside a fenced block or
    a code span (the marker there is code, not a comment)."""
    found = [m.group(0)[:80] for m in FENCE.finditer(text) if MARKER.search(m.group(0))]
    rest = FENCE.sub("", text)
    found += [m.group(0)[:80] for m in CODE_SPAN.finditer(rest) if MARKER.search(m.group(2))]
    return found


def test_no_page_writes_a_number_marker_where_it_shows():
    # without the build: where mkdocs is not installed, the Markdown itself is checked
    pages = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "mkdocs" not in p.parts)]
    shown = {str(p.relative_to(ROOT)): literal_markers(p.read_text(encoding="utf-8")) for p in pages}
    assert not {k: v for k, v in shown.items() if v}
    assert literal_markers("id `<!-- num:cal.id -->abc<!-- /num -->` here")  # the validation page's old line
    assert not literal_markers("id <code><!-- num:cal.id -->abc<!-- /num --></code> here")


def test_the_home_page_names_the_figure_the_site_serves():
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "](figures/paper_speedup.png)" in text
    hooks = (DOCS / "mkdocs" / "hooks.py").read_text(encoding="utf-8")
    assert '"paper_speedup.png"' in hooks and (ROOT / "notebooks" / "figures" / "paper_speedup.png").is_file()
    assert "hooks.py" in CONFIG.read_text(encoding="utf-8")
