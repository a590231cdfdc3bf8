"""The LLM question (issue 36, item 3): Llama-3-8B with AdamW on tpu-v6e-256, where neither the
replicated nor the sharded update fits in a v6e chip's 32 GiB and only fully-sharded does. The
default plots of ``wus-sim run`` show what has values (never an empty panel), titles and colour
scales follow the strategy and value drawn, the run table shows the if-fit speedups marked, and
report.html, rendered in headless Chromium, shows the strategy that fits."""

import json
from pathlib import Path
import re

import matplotlib
import pandas as pd
import pytest

from wus_sim.cli import main
from wus_sim.experiments.spec import load_experiment
from wus_sim.plotting import default_plots, draw_figure
from wus_sim.plotting.defaults import fit_default_plots

from test_report import _chromium, _parse, screenshot_drawn

EXPERIMENT = """name: llm_v6e
workloads: [llama3-8b]
topologies: [tpu-v6e-64, tpu-v6e-256]
optimizers: [adamw]
strategies: all
base: {remat: layer}
sweep: {per_replica_batch: [1, 2]}
"""


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llm")
    (folder / "llm_v6e.yaml").write_text(EXPERIMENT)
    out = folder / "out"
    assert main(["run", str(folder / "llm_v6e.yaml"), "--out", str(out), "--jobs", "1"]) == 0
    return folder, out


def test_only_fully_sharded_fits_on_v6e_256(llm_run):
    _, out = llm_run
    df = pd.read_csv(out / "results.csv")
    fits = df[df["status"] == "ok"]
    assert set(fits["strategy"]) == {"fully-sharded"}  # the case the issue names
    # replicated: fp32 weights, gradients and AdamW's two slots alone are 16 B per parameter
    replicated = df[df["strategy"] == "replicated"]
    assert (replicated["mem_peak_bytes"] > 16 * 8_030_261_248).all()


def test_no_default_plot_is_empty(llm_run):
    """Every default plot drawn has ink where values are: a heatmap has coloured cells (no 'no
    cell has a value' line), and what the defaults dropped had nothing to show."""
    folder, out = llm_run
    exp = load_experiment(folder / "llm_v6e.yaml")
    df = pd.read_csv(out / "results.csv")
    fitted = fit_default_plots(default_plots(exp), df)
    assert {p.name for p in fitted} == {p.stem for p in out.glob("*.png")}
    assert {"speedup", "step_time", "heatmap", "memory"} <= {p.name for p in fitted}
    for plot in fitted:
        fig = draw_figure(plot, df)
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert not any("no cell has a value" in t for t in texts), plot.name
        if plot.kind == "heatmap":
            assert any(isinstance(a, matplotlib.image.AxesImage) for ax in fig.axes for a in ax.images), plot.name
        matplotlib.pyplot.close(fig)


def test_the_default_heatmap_follows_the_strategy_and_value_it_draws(llm_run):
    folder, out = llm_run
    df = pd.read_csv(out / "results.csv")
    heatmap = next(p for p in fit_default_plots(default_plots(load_experiment(folder / "llm_v6e.yaml")), df)
                   if p.kind == "heatmap")
    # sharded has no value anywhere: the heatmap shows fully-sharded's if-fit speedup
    assert (heatmap.options["strategy"], heatmap.options["value"]) == ("fully-sharded", "speedup_if_replicated_fit")
    fig = draw_figure(heatmap, df)
    ax = fig.axes[0]
    assert ax.get_title().startswith("Speedup of fully-sharded over replicated if replicated fit in HBM")
    image = ax.images[0]
    # diverging around 1: a slowdown is on the red side, a speedup on the green one
    assert image.norm.vcenter == 1.0
    value = df[(df["strategy"] == "fully-sharded") & (df["topology"] == "tpu-v6e-256")
               & (df["per_replica_batch"] == 1)]["speedup_if_replicated_fit"].iloc[0]
    assert value != 1
    r, g, _, _ = image.cmap(image.norm(value))
    assert (r > g) == (value < 1)
    for end in (image.norm.vmin, image.norm.vmax):  # both ends of the scale, whichever side the data is on
        if end != 1:
            r, g, _, _ = image.cmap(image.norm(end))
            assert (r > g) == (end < 1)
    cells = {t.get_text() for t in ax.texts}
    assert f"{value:.2f}" in cells
    matplotlib.pyplot.close(fig)


def test_an_asked_speedup_heatmap_marks_if_fit_cells(llm_run):
    """``strategy: fully-sharded`` with the default value: titled for fully-sharded, and the cells
    that fit show the if-fit speedup marked, not blank."""
    from wus_sim.experiments.spec import PlotSpec
    from wus_sim.inputs.config import Section

    _, out = llm_run
    df = pd.read_csv(out / "results.csv")
    options = {"x": "per_replica_batch", "y": "replicas", "strategy": "fully-sharded"}
    plot = PlotSpec(kind="heatmap", name="h", options=options,
                    section=Section({"kind": "heatmap", "name": "h", **options}, file=None, path="plots[0]"))
    fig = draw_figure(plot, df)
    ax = fig.axes[0]
    assert "Speedup of fully-sharded over replicated" in ax.get_title()
    assert "*: replicated does not fit in HBM" in ax.get_title()
    marked = [t.get_text() for t in ax.texts if t.get_text().endswith("*")]
    assert len(marked) == 4
    matplotlib.pyplot.close(fig)


def test_the_run_table_shows_if_fit_speedups_marked(tmp_path, capsys):
    exp = tmp_path / "one.yaml"
    exp.write_text("workloads: [llama3-8b]\ntopologies: [tpu-v6e-256]\noptimizers: [adamw]\nstrategies: all\n"
                   "base: {remat: layer, per_replica_batch: 1}\n")
    assert main(["run", str(exp), "--out", str(tmp_path / "o"), "--jobs", "1", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert main(["step", "llama3-8b", "-t", "tpu-v6e-256", "--strategy", "all", "--remat", "layer",
                 "--per-replica-batch", "1", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)
    if_fit = step["speedup_if_replicated_fit"]["fully-sharded"]
    assert f"{if_fit:.3f}*" in out
    assert "* replicated does not fit in HBM" in out


def test_report_shows_the_strategy_that_fits_in_chromium(llm_run, tmp_path):
    _, out = llm_run
    page = _parse(out / "report.html")
    assert sorted(page.figures) == sorted(p.stem for p in out.glob("*.svg"))
    assert any("fully-sharded" in cells and "ok" in cells for cells in page.rows)
    browser = screenshot_drawn(out / "report.html", tmp_path)
    text = _chromium(browser, "--dump-dom", (out / "report.html").as_uri()).stdout
    assert re.search(r"fully-sharded", text) and "Speedup of fully-sharded" in text


def test_a_large_sweep_shows_memory_of_every_strategy_against_hbm(tmp_path):
    """Past the bar plots' size, the defaults draw peak memory per replica as lines: the strategy
    that fits as a line, the ones that do not as hollow markers at what they would need (not
    crosses), and the chip's HBM per replica as a dashed line between them."""
    exp = tmp_path / "big.yaml"
    exp.write_text(EXPERIMENT.replace("name: llm_v6e", "name: big")
                   .replace("[tpu-v6e-64, tpu-v6e-256]", "[tpu-v6e-8, tpu-v6e-64, tpu-v6e-256]")
                   .replace("[1, 2]", "[1, 2, 3, 4, 5]"))
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), "--jobs", "1", "-q"]) == 0
    df = pd.read_csv(out / "results.csv")
    assert (out / "memory_peak.png").exists() and not (out / "memory.png").exists()
    plot = next(p for p in fit_default_plots(default_plots(load_experiment(exp)), df) if p.name == "memory_peak")
    fig = draw_figure(plot, df)
    ax = fig.axes[0]
    hollow = [line for line in ax.lines if line.get_gid() == "does-not-fit"]
    needs = df[df["status"] == "infeasible"]["mem_peak_bytes"] / 2**30
    drawn = sorted(v for line in hollow for v in line.get_ydata())
    assert drawn == pytest.approx(sorted(needs))  # every strategy that does not fit, at what it needs
    hbm = df["hbm_bytes"].iloc[0] / 2**30
    assert any(list(line.get_ydata()) == [hbm, hbm] for line in ax.lines)  # the capacity line
    assert min(drawn) > hbm  # nothing drawn hollow fits
    matplotlib.pyplot.close(fig)
