"""docs/chips.md's worked custom chip: its two YAML files, taken from the page, load and run, and
the collective it quotes equals the alpha-beta closed form computed here by hand."""

import re
from pathlib import Path

import pytest

import wus_sim
from wus_sim.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "chips.md"


def page_files(tmp_path):
    blocks = re.findall(r"`(my-hw/[\w.-]+)`[^`]*?```yaml\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert [name for name, _ in blocks] == ["my-hw/chips.yaml", "my-hw/my-accel-8.yaml"]
    for name, text in blocks:
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    return tmp_path / "my-hw"


def test_the_worked_custom_chip_loads_and_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(page_files(tmp_path)))
    topo = wus_sim.load_topology("my-accel-8")
    assert topo.chip.name == "my-accel" and topo.num_replicas == 8
    assert topo.hbm_bytes_per_replica == 48 * 2**30
    # one-direction ring all-gather: (n - 1) (alpha + S / (n link)), alpha 2 us, link 50 GB/s per direction
    n, S = 8, 64 * 2**20
    expected = (n - 1) * (2e-6 + S / n / 50e9)
    assert wus_sim.analytic_time(topo, "all-gather", "ring", S) == pytest.approx(expected, rel=1e-12)
    sim = wus_sim.simulate_collective(topo, "all-gather", "ring", S)
    assert sim.time_s == pytest.approx(expected, rel=1e-9)
    assert "1.188 ms" in PAGE.read_text()           # the figure the page quotes
    assert main(["step", "transformer-big", "-t", "my-accel-8"]) == 0
    assert "my-accel-8" in capsys.readouterr().out
