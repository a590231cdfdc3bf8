"""Every wus-sim command the README and the docs pages written for it show runs: the commands
table (each subcommand's help, docs/commands.md), every command in their code blocks and every
complete command in their prose, and the plan example's printed output is what the command
prints today.

Reduced where the full form is slow or timed: experiment runs use ``--reduced``, ``bench``
its ``--quick`` set, ``calibrate`` its help (the full fit is the slow test in
tests/validation/test_validate.py), ``validate --choices`` two of its choices. CI runs the two install commands themselves (.ci/run).
"""

from pathlib import Path
import re
import shlex

import pytest

from wus_sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
# the README and the pages that took its sections (other pages test their own commands)
PAGES = ["README.md", *(f"docs/{name}.md" for name in ("index", "llm", "model", "validation", "commands", "inputs",
                                                      "api", "architecture", "bench-results"))]
README = "\n".join((ROOT / page).read_text(encoding="utf-8") for page in PAGES)
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{1,}\b|\[|\||\.\.\.")


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _commands():
    out = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            for part in line.split("&&"):
                part = part.split("#")[0].strip()
                if part.startswith("wus-sim "):
                    out.append(part)
    for block in _blocks("text"):
        out += [line[2:].strip() for line in block.splitlines() if line.startswith("$ wus-sim ")]
    for span in re.findall(r"`(wus-sim [^`]+)`", README):
        span = " ".join(span.split())
        # `wus-sim step` alone names a command in prose (and in the commands page's list); it is not one to run
        named_only = len(span.split()) == 2 and span.split()[1] in ("run", "step", "plan", "collective", "describe",
                                                                    "list", "import-workload")
        if not PLACEHOLDER.search(span) and not span.endswith("--out") and not named_only:
            out.append(span)
    return sorted(set(out))


COMMANDS = _commands()
TABLE = sorted(set(re.findall(r"^\| `wus-sim ([a-z-]+)", README, flags=re.M)))


def test_the_readme_shows_commands():
    assert len(COMMANDS) >= 8 and {"run", "step", "plan", "collective", "validate"} <= set(TABLE)


@pytest.mark.parametrize("sub", TABLE)
def test_every_command_in_the_table_exists(sub, capsys):
    with pytest.raises(SystemExit) as exc:
        main([sub, "--help"] if not sub.startswith("-") else [sub])
    assert exc.value.code == 0


@pytest.mark.parametrize("command", COMMANDS)
def test_every_readme_command_runs(command, tmp_path, capsys, monkeypatch):
    argv = shlex.split(command)[1:]
    if "--choices" in argv:  # reduced: two choices, each refitted (the whole table takes minutes)
        import wus_sim.validation.choices as choices

        monkeypatch.setattr(choices, "CHOICES", choices.CHOICES[:2])
    sub = argv[0] if argv else ""
    if sub == "run":
        argv += ["--out", str(tmp_path / "out"), "--reduced", "-q"]
    elif sub == "validate":
        argv += ["--out", str(tmp_path / "val"), "--no-plots"]
    elif sub == "bench":
        argv = ["bench", "--quick", "--repeat", "1", "--no-memory"]
    elif sub == "calibrate":
        argv = ["calibrate", "--help"]
    try:
        code = main(argv)
    except SystemExit as exc:  # --help, --version
        code = exc.code
    assert code == 0, capsys.readouterr().err


def test_the_plan_example_prints_what_the_readme_shows(capsys):
    block = next(b for b in _blocks("text") if b.startswith("$ wus-sim plan"))
    shown = block.splitlines()
    assert main(shlex.split(shown[0][2:])[1:]) == 0
    printed = capsys.readouterr().out.splitlines()
    for line in shown[1:]:
        if line.strip() != "...":
            assert line in printed, line


def test_the_installed_package_runs_when_ci_says_so(capsys):
    """Names the package under test; with WUS_SIM_EXPECT_INSTALLED=1 (.ci/run's wheel check)
    it must be the installed wheel, not the checkout."""
    import os

    import wus_sim

    where = Path(wus_sim.__file__).resolve().parent  # named in the failure, not printed: pytest -q stays quiet
    if os.environ.get("WUS_SIM_EXPECT_INSTALLED") == "1":
        assert "site-packages" in where.parts, where
