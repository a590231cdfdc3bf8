"""Plots that say what they show (issue 28, item 1), measured on the drawn figure: no heatmap
cell averages a swept axis unasked; an empty heatmap says so in one line; an x axis that
also moves another parameter says so; no text covers a marker or leaves the figure; series
drawn on top of each other are named in the legend."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from wus_sim.cli import main  # noqa: E402
from wus_sim.inputs.errors import ConfigError  # noqa: E402
from wus_sim.experiments.spec import parse_experiment  # noqa: E402
from wus_sim.plotting import check_plots, draw_figure, save_plots  # noqa: E402
from wus_sim.plotting.plots import AveragedCells  # noqa: E402

from test_plotting import DOC, frame, plot_specs  # noqa: E402,F401

BUCKETS = {**DOC, "sweep": {"link_GBps": [50, 100], "bucket_MiB": [25, 100]}}


def _experiment(plot):
    return parse_experiment({**BUCKETS, "plots": [plot]}, file="exp.yaml")


def test_a_heatmap_that_would_average_a_swept_axis_is_an_error_naming_it():
    exp = _experiment({"kind": "heatmap", "name": "h", "x": "link_GBps", "y": "replicas", "facet": "workload",
                       "where": {"optimizer": "adam"}})
    with pytest.raises(ConfigError) as err:
        check_plots(exp.plots, exp)
    text = str(err.value)
    assert text.startswith("exp.yaml: plots[0]") and "bucket_MiB (25, 100)" in text
    assert "facet: bucket_MiB" in text and "where: {bucket_MiB: 25}" in text and "aggregate: mean" in text


@pytest.mark.parametrize("placed", [
    {"facet": "bucket_MiB", "where": {"optimizer": "adam", "workload": "resnet50"}},
    {"facet": "workload", "where": {"optimizer": "adam", "bucket_MiB": 25}},
    {"facet": "workload", "where": {"optimizer": "adam"}, "aggregate": "mean"},
    {"x": "bucket_MiB", "facet": "workload", "where": {"optimizer": "adam", "link_GBps": 100}},
])
def test_a_heatmap_with_every_swept_axis_placed_passes(placed):
    exp = _experiment({"kind": "heatmap", "name": "h", "x": "link_GBps", "y": "replicas", **placed})
    check_plots(exp.plots, exp)


def test_run_refuses_the_averaging_heatmap_before_the_sweep(tmp_path, capsys):
    f = tmp_path / "x.yaml"
    f.write_text("name: x\nworkloads: [resnet50]\ntopologies: [tpu-v3-32, tpu-v3-128]\n"
                 "sweep:\n  link_GBps: [50, 100]\n  bucket_MiB: [25, 100]\n"
                 "plots:\n  - {kind: heatmap, name: h, x: link_GBps, y: replicas}\n")
    assert main(["run", str(f), "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "bucket_MiB" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "results.csv").exists()


@pytest.fixture
def bucket_frame(frame):  # noqa: F811
    """The plots' frame with a second bucket size whose speedups differ from the first's."""
    import pandas as pd

    other = frame.copy()
    other["bucket_MiB"] = 100
    other["speedup"] = other["speedup"] * 1.1
    base = frame.copy()
    base["bucket_MiB"] = 25
    return pd.concat([base, other], ignore_index=True)


def test_drawing_refuses_to_average_and_averages_when_asked(bucket_frame):
    rows = bucket_frame[(bucket_frame["optimizer"] == "adam") & (bucket_frame["workload"] == "resnet50")]
    (spec,) = plot_specs([{"kind": "heatmap", "x": "link_GBps", "y": "replicas", "where": {"optimizer": "adam",
                                                                                          "workload": "resnet50"}}])
    with pytest.raises(AveragedCells, match="bucket_MiB"):
        draw_figure(spec, rows)
    (spec,) = plot_specs([{"kind": "heatmap", "x": "link_GBps", "y": "replicas", "aggregate": "mean",
                           "where": {"optimizer": "adam", "workload": "resnet50"}}])
    fig = draw_figure(spec, rows)
    (ax,) = [a for a in fig.axes if a.images]
    grid = ax.images[0].get_array()
    sharded = rows[rows["strategy"] == "sharded"]
    want = sharded.groupby(["replicas", "link_GBps"])["speedup"].mean().unstack().to_numpy()
    assert np.allclose(np.ma.filled(grid, np.nan), want)
    texts = [t.get_text() for t in ax.texts]
    assert any("each cell the mean over fusion bucket 25, 100" in t for t in texts), texts
    plt.close(fig)


def test_an_empty_heatmap_says_so_in_one_line_instead_of_a_colour_scale(frame):  # noqa: F811
    rows = frame[(frame["optimizer"] == "adam") & (frame["workload"] == "resnet50")].copy()
    rows.loc[rows["strategy"] == "sharded", "status"] = "infeasible"
    (spec,) = plot_specs([{"kind": "heatmap", "x": "link_GBps", "y": "replicas"}])
    fig = draw_figure(spec, rows)
    fig.canvas.draw()
    assert not [a for a in fig.axes if a.images]
    assert not [a for a in fig.axes if a.get_label() == "<colorbar>"]
    (ax,) = [a for a in fig.axes if a.axison]
    cells = rows[rows["strategy"] == "sharded"].groupby(["replicas", "link_GBps"]).ngroups
    (note,) = [t for t in ax.texts if t.get_text().startswith("no cell has a value")]
    assert note.get_text() == f"no cell has a value: of {cells} cells, {cells} do not fit"
    _inside_figure(fig, [note])
    plt.close(fig)


def _batches_follow_the_slice(frame):  # noqa: F811
    rows = frame[(frame["optimizer"] == "adam") & (frame["link_GBps"] == 100)].copy()
    batch = {("transformer-big", 32): 16, ("transformer-big", 128): 4, ("transformer-big", 512): 4,
             ("transformer-big", 2048): 1}
    rows["per_replica_batch"] = [batch.get((w, r), 128) for w, r in zip(rows["workload"], rows["replicas"])]
    return rows


def test_an_x_axis_that_moves_the_batch_says_so(frame):  # noqa: F811
    rows = _batches_follow_the_slice(frame)
    (spec,) = plot_specs([{"kind": "speedup"}])
    fig = draw_figure(spec, rows)
    fig.canvas.draw()
    (ax,) = [a for a in fig.axes if a.axison]
    said = " ".join(t.get_text().replace("\n", " ") for t in ax.texts)
    assert "x also changes the per-replica batch" in said
    assert "transformer-big 16, 4, 4, 1" in said and "(at 32, 128, 512, 2048" in said
    assert "resnet50" not in said  # its batch stays 128: nothing to say of it
    _inside_figure(fig, ax.texts)
    plt.close(fig)
    rows["per_replica_batch"] = 8  # the same batch everywhere: nothing moves with x
    fig = draw_figure(spec, rows)
    assert not any("also changes" in t.get_text() for a in fig.axes for t in a.texts)
    plt.close(fig)


def _marker_boxes(ax, renderer):
    boxes = []
    for line in ax.lines:
        if line.get_marker() in (None, "None", "none", "") or not len(line.get_xdata()):
            continue
        xs = [ax.convert_xunits(v) for v in line.get_xdata()]
        pts = line.get_transform().transform(np.column_stack([xs, np.asarray(line.get_ydata(), float)]))
        half = line.get_markersize() * ax.figure.dpi / 72 / 2
        boxes += [(px - half, py - half, px + half, py + half) for px, py in pts]
    return boxes


def _inside_figure(fig, texts):
    renderer = fig.canvas.get_renderer()
    for t in texts:
        b = t.get_window_extent(renderer)
        assert fig.bbox.x0 - 0.5 <= b.x0 and b.x1 <= fig.bbox.x1 + 0.5, t.get_text()
        assert fig.bbox.y0 - 0.5 <= b.y0 and b.y1 <= fig.bbox.y1 + 0.5, t.get_text()


@pytest.mark.parametrize("case", ["every x", "all but the last", "a middle gap", "many series"])
def test_no_text_covers_a_marker_or_leaves_the_figure(frame, case):  # noqa: F811
    rows = frame.copy()
    hue, where = ["workload", "optimizer"], {"link_GBps": 100}
    if case == "every x":  # crosses at every x: no gap holds the long names
        rows.loc[(rows["strategy"] == "replicated") & (rows["workload"] == "transformer-big"), "status"] = "infeasible"
    elif case == "all but the last":
        rows.loc[(rows["strategy"] == "replicated") & (rows["replicas"] < 2048), "status"] = "infeasible"
    elif case == "a middle gap":
        rows.loc[rows["replicas"].isin([128, 512]) & (rows["workload"] == "resnet50"), "status"] = "infeasible"
    else:
        rows.loc[rows["replicas"] >= 512, "status"] = "infeasible"
        hue, where = ["workload", "optimizer", "link_GBps"], {}
    (spec,) = plot_specs([{"kind": "lines", "x": "replicas", "hue": hue, "where": where}])
    fig = draw_figure(spec, rows)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in [a for a in fig.axes if a.axison]:
        texts = [t for t in ax.texts if t.get_text()] + [ax.title]
        assert [t for t in ax.texts if t.get_text().startswith("does not fit")]
        marks = _marker_boxes(ax, renderer)
        for t in texts:
            b = t.get_window_extent(renderer)
            covered = [m for m in marks if b.x0 < m[2] and m[0] < b.x1 and b.y0 < m[3] and m[1] < b.y1]
            assert not covered, t.get_text()
        _inside_figure(fig, texts)
        # every cross still inside the axes: growing the x view kept the data in it
        box = ax.get_window_extent(renderer)
        assert all(box.x0 <= (m[0] + m[2]) / 2 <= box.x1 for m in marks)
    plt.close(fig)


def test_series_drawn_on_each_other_are_named_in_the_legend(frame):  # noqa: F811
    import pandas as pd

    rows = frame[(frame["optimizer"] == "adam") & (frame["link_GBps"] == 100)]
    twin = rows[rows["workload"] == "resnet50"].assign(workload="resnet50-copy")  # the same values
    rows = pd.concat([rows, twin], ignore_index=True)
    (spec,) = plot_specs([{"kind": "lines", "x": "replicas", "hue": "workload"}])
    fig = draw_figure(spec, rows)
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert "resnet50-copy (on resnet50)" in labels
    assert "resnet50" in labels and "transformer-big" in labels  # apart from the others: no note
    plt.close(fig)


def test_save_plots_names_the_averaging_plot_it_skips(bucket_frame, tmp_path):
    (spec,) = plot_specs([{"kind": "heatmap", "name": "avg", "x": "link_GBps", "y": "replicas",
                           "where": {"optimizer": "adam", "workload": "resnet50"}}])
    skipped = []
    assert save_plots([spec], bucket_frame, tmp_path, on_skip=lambda p, why: skipped.append(why)) == []
    assert len(skipped) == 1 and skipped[0].startswith("each cell would average") and "bucket_MiB" in skipped[0]


@pytest.mark.parametrize("doc", [DOC, BUCKETS], ids=["optimizers beside the facet", "two buckets too"])
def test_default_heatmaps_place_every_swept_axis(doc, frame):  # noqa: F811
    from wus_sim.plotting import default_plots

    exp = parse_experiment(doc, name="d")
    specs = default_plots(exp)
    check_plots(specs, exp)  # the default heatmap averaged over the optimizers (DOC) unasked
    (heat,) = [s for s in specs if s.kind == "heatmap"]
    assert heat.options["where"]["optimizer"] == "adam"
