"""The README's Python API: every ```python block runs as written, from any directory, and every
``wus_sim.NAME`` it uses (or mentions) is a curated public name."""

import contextlib
import io
from pathlib import Path
import re

import wus_sim

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


def test_the_readme_has_a_python_example():
    assert BLOCKS


def test_every_python_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the checkout: shipped names must resolve from the package
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(BLOCKS):
            exec(compile(block, f"README.md python block {i}", "exec"), {"__name__": "__readme__"})
    text = out.getvalue()
    # what the example prints, checked against the model independently of the README's wording
    m = re.search(r"speedup ([0-9.]+)x", text)
    assert m and float(m.group(1)) > 1  # sharding helps Transformer-big with Adam on 512 replicas
    assert "tpu-v3-512: 512 replicas" in text
    assert list(tmp_path.iterdir()) == []  # the example leaves nothing behind


def test_every_name_the_readme_uses_is_exported():
    used = set(re.findall(r"wus_sim\.([A-Za-z_]+)\(", "\n".join(BLOCKS)))
    mentioned = set(re.findall(r"`([a-z_]+)\(", TEXT[TEXT.index("## Python API"):TEXT.index("## What it says")]))
    assert used and mentioned
    for name in used | mentioned:
        assert name in wus_sim.__all__, name
        assert callable(getattr(wus_sim, name))


def test_every_public_name_resolves():
    for name in wus_sim.__all__:
        assert getattr(wus_sim, name) is not None
