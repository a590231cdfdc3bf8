"""Every shipped experiment (experiments/*.yaml) loads, and runs end to end with the real simulator:
its reduced form in the normal suite, the full sweep marked slow (`pytest -m slow`)."""

from pathlib import Path

import pytest

from wus_sim.cli import main
from wus_sim.experiments.results import columns, read_results
from wus_sim.experiments.spec import load_experiment
from wus_sim.plotting import check_plots

EXPERIMENTS = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.yaml"))
SHIPPED = {"quickstart", "paper_speedup", "mlperf_v06", "adam_vs_sgd", "whatif_link_bw",
           "whatif_wraparound", "whatif_v4_3d", "whatif_batch", "whatif_mxu_efficiency"}
ids = [p.stem for p in EXPERIMENTS]


def test_the_shipped_set():
    assert SHIPPED <= set(ids)


@pytest.mark.parametrize("path", EXPERIMENTS, ids=ids)
def test_loads_with_plots_and_a_small_reduced_form(path):
    exp = load_experiment(path)
    check_plots(exp.plots)
    assert exp.name == path.stem and exp.description and exp.plots
    reduced = exp.points(reduced=True)
    assert 1 <= len(reduced) <= 4 < exp.num_points or exp.num_points <= 4


def run(path, out, *args):
    assert main(["run", str(path), "--out", str(out), "-q", "--jobs", "2", *args]) == 0
    return read_results(out)


def check_run(exp, df, out, reduced, stderr=""):
    points = exp.points(reduced=reduced)
    assert df["point_hash"].nunique() == len(points)
    assert df.groupby(["point_hash", "strategy"]).size().eq(1).all()
    assert set(df["status"]) <= {"ok", "infeasible"}, df.loc[df["status"] == "error", "error"].iloc[0]
    # every column the simulator reports is documented
    assert set(df.columns) <= {c.name for c in columns()}, set(df.columns) - {c.name for c in columns()}
    ok = df[df["status"] == "ok"]
    sharded = ok[ok["strategy"] == "sharded"].set_index("point_hash")
    replicated = ok[ok["strategy"] == "replicated"].set_index("point_hash")
    both = sharded.index.intersection(replicated.index)
    ratio = replicated.loc[both, "step_time_s"] / sharded.loc[both, "step_time_s"]
    assert ((sharded.loc[both, "speedup"] - ratio).abs() <= 1e-9 * ratio).all()
    for plot in exp.plots:
        if reduced and not (out / f"{plot.name}.png").exists():
            # a plot of slices the reduced form leaves out is not drawn blank: it is named, with why
            assert f"plot '{plot.name}' skipped: no rows to plot" in stderr
            continue
        for ext in ("png", "svg"):
            assert (out / f"{plot.name}.{ext}").stat().st_size > 0


@pytest.mark.parametrize("path", EXPERIMENTS, ids=ids)
def test_reduced_run(path, tmp_path, capsys):
    exp = load_experiment(path)
    df = run(path, tmp_path, "--reduced")
    check_run(exp, df, tmp_path, reduced=True, stderr=capsys.readouterr().err)


@pytest.mark.slow
@pytest.mark.parametrize("path", EXPERIMENTS, ids=ids)
def test_full_run(path, tmp_path):
    exp = load_experiment(path)
    df = run(path, tmp_path)
    check_run(exp, df, tmp_path, reduced=False)


def test_many_skipped_plots_are_one_warning_line(tmp_path, capsys):
    """A --limit run of an experiment with many plots skips most of them: they are summed up in
    one line naming each, not one line apiece (the console stays a few lines)."""
    path = EXPERIMENTS[0].parent / "whatif_fully_sharded.yaml"
    code = main(["run", str(path), "--limit", "1", "--out", str(tmp_path / "o"),
                 "-q", "--jobs", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 0 and len(err) == 1
    assert "plots skipped" in err[0] and "'step_time'" in err[0] and "first: no rows to plot" in err[0]


def test_the_readme_headline_speedups_are_what_the_paper_experiment_gives():
    """README, "What it says": each speedup quoted (2 decimals) is the paper_speedup point's
    replicated / sharded step time, simulated here one point at a time (the experiment's own
    global batches; its YAML says which)."""
    import re

    from wus_sim.experiments.records import simulate_point

    from regenerate_docs_numbers import plain

    readme = plain((Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8"))
    section = readme[readme.index("## What it says"):readme.index("## Today's question")]

    def speedup(workload, topology, global_batch):
        rows = simulate_point({"workload": workload, "topology": topology, "global_batch": global_batch,
                               "strategy": "all"})
        t = {r["strategy"]: r["step_time_s"] for r in rows}
        return f"{t['replicated'] / t['sharded']:.2f}x"

    quoted = {  # README phrase (with the number as a group) -> the point it is about
        r"\*\*1 sequence per\s+core\*\* steps \*\*([\d.]+x)\*\*": ("transformer-big", "tpu-v3-2048", 2048),
        r"\(([\d.]+x) at 16 per core on v3-128\)": ("transformer-big", "tpu-v3-128", 2048),
        r"BERT-large with LAMB at 1\s+sequence per core ([\d.]+x)": ("bert-large", "tpu-v3-2048", 2048),
        r"at 2 images per core ([\d.]+x)": ("resnet50", "tpu-v3-2048", 4096),
        r"\(([\d.]+x) at 4 per\s+core on v3-1024": ("resnet50", "tpu-v3-1024", 4096),
        r"; ([\d.]+x) at 128 per core on v3-32\)": ("resnet50", "tpu-v3-32", 4096),
    }
    for pattern, point in quoted.items():
        m = re.search(pattern, section)
        assert m, pattern
        assert m.group(1) == speedup(*point), (pattern, point)


def test_a_run_whose_every_row_failed_still_has_every_documented_column(tmp_path, capsys):
    # results.v1.json: "Every documented column is present; a value may be missing". With no
    # row that reached the simulator, columns only it reports (params, spatial_ways, ...) went missing.
    exp = tmp_path / "bad_batch.yaml"
    exp.write_text("workloads: resnet50\ntopologies: tpu-v3-32\nbase: {global_batch: 1000}\n")
    out = tmp_path / "o"
    assert main(["run", str(exp), "--out", str(out), "-q", "--jobs", "1", "--no-plots"]) == 1
    documented = [c.name for c in columns()]
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert header[:len(documented)] == documented
    md = (out / "columns.md").read_text()
    assert all(f"| `{name}` |" in md for name in documented)
