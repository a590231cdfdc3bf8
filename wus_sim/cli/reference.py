"""The command reference, docs/commands.md, from the parsers themselves: every command and every option.

The page said it listed every command and option while ``step`` lacked ``--mesh``,
``--quantization``, ``--global-batch`` and more, and ``plan`` lacked ``--search``: a table
typed by hand falls behind the parsers. Its tables are now generated from them; the prose
around them (what a command's output means, an example) stays written by hand.

The page holds a region per command between two HTML comments (invisible on GitHub and in the
site), ``<!-- commands:NAME -->`` ... ``<!-- /commands -->``, and one for the list of commands,
``<!-- commands:index -->``. :func:`render_page` rewrites every region from the parsers and adds
the section of a command that has none at the end of the page, so a new command or option
shows up on the next ``python -m wus_sim.docs`` (whose ``--check`` the test suite runs:
tests/inputs/test_docs_formats.py; tests/project/test_commands_page.py checks every option is on
the page).
"""

import argparse
import re

__all__ = ["render_page", "command_parsers", "option_names", "REGION", "generated_pages"]

REGION = re.compile(r"<!-- commands:([a-z\-]+) -->\n(.*?)<!-- /commands -->", re.S)
"""A generated region of the page: its name (a command, or ``index``) and its text."""


def command_parsers():
    """``{command: (its parser, its one-line help)}`` of every ``wus-sim`` command, in ``--help`` order."""
    from . import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {a.dest: a.help for a in sub._choices_actions}
    return {name: (p, helps.get(name, "")) for name, p in parser.commands.items()}


def _shown_actions(parser):
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def option_names(parser):
    """What the page must name of *parser*: each option string, and each positional's metavar
    (or name)."""
    out = []
    for action in _shown_actions(parser):
        out += list(action.option_strings) or [action.metavar or action.dest]
    return out


def _cell(text):
    """*text* in a Markdown table cell: a bar escaped, ``<stem>`` text rather than an HTML tag."""
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;").strip()


def _value(action):
    if isinstance(action, argparse.BooleanOptionalAction) or action.nargs == 0:
        return ""
    if action.choices is not None and action.metavar is None:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    text = action.metavar or action.dest.upper()
    return f"`{text if isinstance(text, str) else ' '.join(text)}`"


def _default(action):
    default = action.default
    if not action.option_strings:
        return "required" if action.nargs not in ("?", "*") else "optional"
    if default is None or default is argparse.SUPPRESS:
        return ""
    if isinstance(default, bool):
        return "on" if default else "off"
    return f"`{default}`"


def _help(action):
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": "wus-sim"}
    return text


def _usage(name, parser):
    usage = parser.format_usage().strip()
    usage = re.sub(r"^usage:\s*", "", usage)
    return re.sub(r"\s+", " ", usage)


def command_section(name, parser, help_text):
    """The generated text of command *name*: its usage, what it does and a table of every option."""
    lines = ["```text", _usage(name, parser), "```", ""]
    description = parser.description or help_text
    if description:
        lines += [description, ""]
    lines += ["| option | value | default | what it does |", "|---|---|---|---|"]
    hidden = []
    for action in _shown_actions(parser):
        if action.help == argparse.SUPPRESS:
            hidden += list(action.option_strings)
            continue
        names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
        lines.append(f"| {names} | {_value(action)} | {_cell(_default(action))} | {_cell(_help(action))} |")
    if hidden:
        lines += ["", "Also accepted, old spellings kept for one release: " + ", ".join(f"`{o}`" for o in hidden) + "."]
    return "\n".join(lines) + "\n"


def index_section(commands):
    """The generated list of commands, each linked to its section."""
    lines = ["| command | what it does |", "|---|---|"]
    for name, (_, help_text) in commands.items():
        lines.append(f"| `wus-sim {name}` | {_cell(help_text)} ([options](#wus-sim-{name})) |")
    return "\n".join(lines) + "\n"


def render_page(text):
    """*text* (the page as committed) with every region rewritten from the parsers, and a section
    added at the end for each command the page has none for."""
    commands = command_parsers()

    def region(m):
        name = m.group(1)
        if name == "index":
            body = index_section(commands)
        elif name in commands:
            body = command_section(name, *commands[name])
        else:
            body = f"(no command {name!r}: remove this section)\n"
        return f"<!-- commands:{name} -->\n{body}<!-- /commands -->"

    out = REGION.sub(region, text)
    have = {m.group(1) for m in REGION.finditer(out)}
    for name, (parser, help_text) in commands.items():
        if name not in have:
            out = out.rstrip("\n") + (f"\n\n## wus-sim {name}\n\n<!-- commands:{name} -->\n"
                                      f"{command_section(name, parser, help_text)}<!-- /commands -->\n")
    return out


def generated_pages(root=None):
    """``{path: text}`` of docs/commands.md (:func:`render_page`) and docs/maxtext.md (its tables
    from :mod:`wus_sim.training.parameters.maxtext_table`) under the checkout *root*, each page's
    prose kept and its generated regions rewritten."""
    from pathlib import Path

    from ..training.parameters.maxtext_table import render_page as maxtext_page

    docs = Path(root or Path(__file__).resolve().parents[2]) / "docs"
    out = {}
    for name, render in (("commands.md", render_page), ("maxtext.md", maxtext_page)):
        page = docs / name
        out[f"docs/{name}"] = render(page.read_text(encoding="utf-8") if page.is_file() else "")
    return out
