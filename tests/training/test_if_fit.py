"""An answer when replicated does not fit: the speedup against replicated with HBM capacity
ignored, marked as such, and fully-sharded over sharded."""

import json
from pathlib import Path

import jsonschema
import pytest

from wus_sim.cli import main
from wus_sim.experiments.records import simulate_point
from wus_sim.training.step import StepOptions, simulate_strategies

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "wus_sim" / "schemas" / "step.v1.json").read_text())
LLAMA = ["llama3-8b", "--topology", "tpu-v5p-512", "--megacore", "--remat", "layer", "--strategy", "all"]


@pytest.fixture(scope="module")
def llama_json():
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["step", *LLAMA, "--json"]) == 0
    return json.loads(buf.getvalue())


def test_llama3_8b_on_v5p_512_gets_a_marked_speedup(llama_json, capsys):
    rep = llama_json
    jsonschema.validate(rep, SCHEMA)
    per = rep["strategies"]
    assert per["replicated"]["status"] == "infeasible" and per["sharded"]["status"] == "ok"
    assert per["replicated"]["memory_bytes"]["peak"] > 95 * 2**30
    assert rep["speedup"] is None and rep["speedups"]["sharded"] is None  # as before: no real speedup
    fit = rep["speedup_if_replicated_fit"]
    assert fit["sharded"] > 1 and fit["fully-sharded"] > 0
    assert rep["fully_sharded_over_sharded"] == pytest.approx(
        per["sharded"]["step_time_s"] / per["fully-sharded"]["step_time_s"])
    assert main(["step", *LLAMA]) == 0
    out = capsys.readouterr().out
    assert f"replicated does not fit in HBM; if it did: {fit['sharded']:.2f}x" in out
    assert "fully-sharded over sharded:" in out


def test_if_fit_time_is_the_step_time_on_a_chip_whose_hbm_is_big_enough(tmp_path, monkeypatch):
    """The hypothetical replicated time is what the same step takes where it does fit: a v5p
    with 1000 GiB of HBM (every other figure the same) runs it for real."""
    import yaml

    chips = yaml.safe_load((Path(__file__).resolve().parents[2] / "topologies" / "chips.yaml").read_text())
    big = dict(chips["tpu-v5p"], hbm_GiB=1000)
    (tmp_path / "chips.yaml").write_text(yaml.safe_dump({"big-v5p": big}))
    (tmp_path / "big-v5p-128.yaml").write_text("chip: big-v5p\nchips_per_axis: [4, 4, 4]\nwraparound: true\n")
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(tmp_path))
    from wus_sim.hardware.topology_files import load_topology

    options = StepOptions(remat="layer")
    real = simulate_strategies("llama3-8b", load_topology("tpu-v5p-128", megacore=True), None,
                               ("replicated", "sharded"), options=options).results
    roomy = simulate_strategies("llama3-8b", load_topology("big-v5p-128", megacore=True), None,
                                ("replicated", "sharded"), options=options).results
    assert real["replicated"].status == "infeasible" and roomy["replicated"].status == "ok"
    assert real["replicated"].step_time_if_fit_s == pytest.approx(roomy["replicated"].step_time_s)


def test_a_fitting_replicated_update_has_no_hypothetical(capsys):
    assert main(["step", "resnet50", "--topology", "tpu-v3-32", "--strategy", "all", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["speedup_if_replicated_fit"] == {"sharded": None, "fully-sharded": None}
    assert rep["fully_sharded_over_sharded"] > 0
    assert main(["step", "resnet50", "--topology", "tpu-v3-32", "--strategy", "sharded", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["speedup_if_replicated_fit"] is None and rep["fully_sharded_over_sharded"] is None


def test_results_rows_carry_both_columns():
    rows = simulate_point({"workload": "llama3-8b", "topology": "tpu-v5p-128", "megacore": True, "remat": "layer",
                           "strategy": "all", "per_replica_batch": 1})
    by = {r["strategy"]: r for r in rows}
    assert by["sharded"]["speedup_if_replicated_fit"] > 1
    assert by["fully-sharded"]["speedup_over_sharded"] == pytest.approx(
        by["sharded"]["step_time_s"] / by["fully-sharded"]["step_time_s"])


def test_the_speedup_plot_marks_the_hypothetical_apart(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from wus_sim.plotting import plot_speedup

    rows = []
    for batch in (1, 2):
        rows += simulate_point({"workload": "llama3-8b", "topology": "tpu-v5p-128", "megacore": True,
                                "remat": "layer", "strategy": "all", "per_replica_batch": batch})
    df = pd.DataFrame(rows)
    df["point_index"] = [i // 3 for i in range(len(df))]
    fig, ax = plt.subplots()
    plot_speedup(ax, df, x="per_replica_batch", hue=None)
    hollow = [line for line in ax.lines if line.get_gid() == "if-replicated-fit"]
    assert hollow and all(line.get_markerfacecolor() == "none" and line.get_linestyle() == "None" for line in hollow)
    drawn = sorted(float(y) for line in hollow for y in line.get_ydata())
    assert drawn == pytest.approx(sorted(df["speedup_if_replicated_fit"].dropna()))
    low, high = ax.get_ylim()
    assert low < min(drawn) and max(drawn) < high  # inside the y range, above the no-value band
    assert any("if replicated fit" in t.get_text() for t in ax.get_legend().get_texts())
    plt.close(fig)
