"""``wus-sim docs [FORMAT]`` (issue 28, item 4): the format references at hand from the installed
package, the heatmap's strategy line as the check has it, and a quiet ``pytest -q``."""

from pathlib import Path
import subprocess
import sys

import pytest

from wus_sim.cli import main
from wus_sim.experiments.spec import parse_experiment
from wus_sim.plotting import check_plots

ROOT = Path(__file__).resolve().parents[2]
FORMATS = sorted(p.stem for p in (ROOT / "docs" / "formats").glob("*.md"))


def run_cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", FORMATS)
def test_docs_prints_the_format_reference(capsys, name):
    code, out, _ = run_cli(capsys, "docs", name)
    assert code == 0 and out == (ROOT / "docs" / "formats" / f"{name}.md").read_text()


def test_docs_lists_every_format_and_the_optimizer_language(capsys):
    code, out, _ = run_cli(capsys, "docs")
    listed = [line.split()[0] for line in out.splitlines() if line and not line.startswith("wus-sim")]
    assert set(listed) == set(FORMATS) | {"optimizer-language"}
    code, out, _ = run_cli(capsys, "docs", "optimizer-language")
    assert out == (ROOT / "wus_sim" / "data" / "optimizers" / "README.md").read_text()


def test_docs_of_an_unknown_format_says_which_was_meant(capsys):
    code, _, err = run_cli(capsys, "docs", "experimnt")
    assert code == 2 and "did you mean experiment?" in err


def _accepted_strategies():
    accepted = []
    for s in ("replicated", "sharded", "fully-sharded", "both", "all", "nope"):
        doc = {"workloads": ["resnet50"], "topologies": ["tpu-v3-32"],
               "plots": [{"kind": "heatmap", "strategy": s}]}
        try:
            check_plots(parse_experiment(doc, file="x.yaml").plots)
            accepted.append(s)
        except Exception:
            pass
    return accepted


def test_the_heatmap_strategy_line_names_what_the_check_accepts():
    accepted = _accepted_strategies()
    assert "fully-sharded" in accepted
    text = (ROOT / "docs" / "formats" / "experiment.md").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("| `strategy` | a string |")]
    for s in accepted:
        assert s in line, (s, line)


def test_pytest_q_prints_nothing_of_its_own():
    """A test printed ``wus_sim from ...`` through capsys.disabled() into every ``pytest -q``."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/project/test_readme_commands.py::test_the_installed_package_runs_when_ci_says_so"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "wus_sim from" not in r.stdout
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == 2, r.stdout  # the dots, and "1 passed in ..."
