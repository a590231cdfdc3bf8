"""Numbers that cannot go stale (issue 36, item 2): every figure the README and the docs pages
quote sits in a marked span (``<!-- num:KEY -->...<!-- /num -->``) that
tests/tools/regenerate_docs_numbers.py writes by running the commands; the committed text must
be what the code prints today. Speed figures are checked against the committed bench output, not
a live run (they depend on the machine)."""

from pathlib import Path

import pytest

import regenerate_docs_numbers as numbers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def found():
    return numbers.spans()


def test_the_readme_and_the_pages_quote_generated_numbers(found):
    keys = {key for _, key, _ in found}
    files = {path.name for path, _, _ in found}
    assert {"README.md", "validation.md", "llm.md", "model.md", "bench-results.md", "api.md"} <= files
    # the headline, today's question, the validation table, a speed table
    assert {"paper.tfm_2048", "llm.v6e.b1.fsd_step", "validation.table", "bench.table"} <= keys


def test_no_quoted_number_is_stale(found):
    stale = numbers.stale()
    assert not stale, "stale figures (run python3 tests/tools/regenerate_docs_numbers.py):\n" + "\n".join(
        f"{path.relative_to(ROOT)}: {key}: committed {old.strip()[:80]!r}, the code prints {new.strip()[:80]!r}"
        for path, key, old, new in stale)


def test_a_number_broken_by_hand_fails(tmp_path):
    """The check can fail: a copy of the README with one figure changed is reported, that figure
    and only it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = next(m for m in numbers.SPAN.finditer(text) if m.group(1) == "llm.v5p.b1.shd_step")
    broken = text[:m.start(2)] + "9.999 s" + text[m.end(2):]
    copy = tmp_path / "README.md"
    copy.write_text(broken, encoding="utf-8")
    stale = numbers.stale([copy])
    assert [(key, old) for _, key, old, _ in stale] == [("llm.v5p.b1.shd_step", "9.999 s")]
    # and the generator puts it back
    assert numbers.rewrite([copy]) == [copy]
    assert copy.read_text(encoding="utf-8") == text


def test_an_unknown_key_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("a <!-- num:paper.no_such_point -->1.00x<!-- /num --> b\n")
    with pytest.raises(KeyError, match="paper.no_such_point"):
        numbers.stale([page])


def test_speed_is_quoted_from_the_committed_bench_run_with_its_machine():
    text = numbers.BENCH_FILE.read_text(encoding="utf-8")
    assert "CPUs" in text.strip().splitlines()[-1]  # the machine's core count
    page = (ROOT / "docs" / "bench-results.md").read_text(encoding="utf-8")
    for line in text.strip().splitlines():
        assert line in page


def test_no_inline_figure_starts_a_line(found):
    """A line that starts with an HTML comment starts an HTML block in Markdown, which cuts the
    paragraph in two: an inline figure never starts a line of prose."""
    for path in numbers.pages():
        text = path.read_text(encoding="utf-8")
        for m in numbers.SPAN.finditer(text):
            if "\n" not in m.group(2) and m.start() > 1 and text[m.start() - 1] == "\n" and text[m.start() - 2] != "\n":
                line = text.count("\n", 0, m.start()) + 1
                raise AssertionError(f"{path.relative_to(ROOT)}:{line}: {m.group(1)} starts a line of prose")
