"""The Python API guide (docs/api.md) and the README's example: every ```python block runs as
written, from any directory, and every ``wus_sim.NAME`` it uses (or mentions) is a curated public
name."""

import contextlib
import io
import json
from pathlib import Path
import re

import pytest

import wus_sim

ROOT = Path(__file__).resolve().parents[2]
API = (ROOT / "docs" / "api.md").read_text()
TEXT = (ROOT / "README.md").read_text() + "\n" + API
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


def test_the_readme_has_a_python_example():
    assert BLOCKS


def _run_blocks():
    """What the README's python blocks print, run as written."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(BLOCKS):
            exec(compile(block, f"python block {i}", "exec"), {"__name__": "__readme__"})
    return out.getvalue()


def test_every_python_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the checkout: shipped names must resolve from the package
    text = _run_blocks()
    # what the example prints, checked against the model independently of the README's wording
    m = re.search(r"speedup ([0-9.]+)x", text)
    assert m and float(m.group(1)) > 1  # sharding helps Transformer-big with Adam on 512 replicas
    assert "tpu-v3-512: 512 replicas" in text
    assert list(tmp_path.iterdir()) == []  # the example leaves nothing behind


def test_every_name_the_readme_uses_is_exported():
    used = set(re.findall(r"wus_sim\.([A-Za-z_]+)\(", "\n".join(BLOCKS)))
    mentioned = set(re.findall(r"`([a-z_]+)\(", API[:API.index("## Reference")]))
    assert used and mentioned
    for name in used | mentioned:
        assert name in wus_sim.__all__, name
        assert callable(getattr(wus_sim, name))


def test_every_public_name_resolves():
    for name in wus_sim.__all__:
        assert getattr(wus_sim, name) is not None


def test_the_step_example_is_the_cli_with_that_efficiency(tmp_path, monkeypatch, capsys):
    """The example lowers the matrix-unit efficiency "than the calibrated one": its step times
    are those of `wus-sim step --mxu-efficiency 0.4`, the other fitted parameters kept (a bare
    ComputeParams(mxu_efficiency=0.4) would drop the fitted 9 ms per step and elementwise bytes)."""
    from wus_sim.cli import main

    monkeypatch.chdir(tmp_path)
    m = re.search(r"replicated ([0-9.]+) ms, sharded ([0-9.]+) ms", _run_blocks())
    assert m
    assert main(["step", "transformer-big", "-t", "tpu-v3-512", "-o", "adam", "--mxu-efficiency", "0.4",
                 "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["strategies"]
    for strategy, printed in zip(("replicated", "sharded"), m.groups()):
        assert float(printed) == pytest.approx(cli[strategy]["step_time_s"] * 1e3, abs=0.051), strategy


def test_the_examples_use_the_current_return_shape(tmp_path, monkeypatch):
    """simulate_strategies returns a StepRun; unpacking it as (results, meta) is the 0.1 shape,
    kept for one release only, so the manual must not teach it."""
    from wus_sim.training.step import StepRun

    def old_shape(*_):
        raise AssertionError("the README unpacks a StepRun as (results, meta), the deprecated shape")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(StepRun, "__iter__", old_shape)
    monkeypatch.setattr(StepRun, "__getitem__", old_shape)
    _run_blocks()
