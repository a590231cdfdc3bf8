"""docs/commands.md names every command and every option (issue 47, item 6): its tables are
generated from the parsers (wus_sim/cli/reference.py, written by `python -m wus_sim.docs`), and
this test reads the committed page, so an option added to a parser and not to the page fails
here (the page used to say it listed every option while `step` lacked --mesh, --quantization,
--global-batch and `plan` lacked --search)."""

from pathlib import Path
import re

import pytest

from wus_sim.cli.reference import REGION, command_parsers, option_names, render_page

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "commands.md"


def missing_options(text):
    """``[(command, option)]`` of the parsers' options the page *text* does not name in the
    command's own section (as `OPTION` in a row of its table)."""
    regions = {m.group(1): m.group(2) for m in REGION.finditer(text)}
    out = []
    for name, (parser, _) in command_parsers().items():
        body = regions.get(name)
        if body is None:
            out.append((name, "(no section)"))
            continue
        rows = [line for line in body.splitlines() if line.startswith("| `") or line.startswith("Also accepted")]
        for option in option_names(parser):
            if not any(f"`{option}`" in row for row in rows):
                out.append((name, option))
    return out


def test_the_page_names_every_option_of_every_command():
    assert missing_options(PAGE.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("command, options", [
    ("step", ["--mesh", "--dcn-mesh", "--quantization", "--global-batch"]),
    ("plan", ["--search"]),
])
def test_the_options_the_page_lacked_are_there(command, options):
    text = PAGE.read_text(encoding="utf-8")
    body = {m.group(1): m.group(2) for m in REGION.finditer(text)}[command]
    for option in options:
        assert f"| `{option}`" in body
    if command == "step":
        assert "`selective`" in body  # a choice of --remat


def test_a_missing_option_or_command_is_found():
    text = PAGE.read_text(encoding="utf-8")
    step = {m.group(1): m.group(2) for m in REGION.finditer(text)}["step"]
    cut = text.replace(step, re.sub(r"\n\| `--quantization` \|[^\n]*", "", step))
    assert missing_options(cut) == [("step", "--quantization")]
    without_run = re.sub(r"<!-- commands:run -->.*?<!-- /commands -->", "", text, flags=re.S)
    assert ("run", "(no section)") in missing_options(without_run)
    # and the generator puts both back
    assert missing_options(render_page(cut)) == [] and missing_options(render_page(without_run)) == []


def test_the_tables_are_the_parsers_own():
    text = PAGE.read_text(encoding="utf-8")
    assert render_page(text) == text, "run `python -m wus_sim.docs` and commit docs/commands.md"


def test_every_command_is_in_the_list_and_linked():
    text = PAGE.read_text(encoding="utf-8")
    index = {m.group(1): m.group(2) for m in REGION.finditer(text)}["index"]
    for name in command_parsers():
        assert f"| `wus-sim {name}` |" in index and f"(#wus-sim-{name})" in index
        assert f"\n## wus-sim {name}\n" in text
