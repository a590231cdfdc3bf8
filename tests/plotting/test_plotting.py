"""Plots: each function draws exactly the data it is given (checked on what it returns)."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from wus_sim.inputs.errors import ConfigError  # noqa: E402
from wus_sim.experiments.runner import run_experiment  # noqa: E402
from wus_sim.experiments.spec import parse_experiment  # noqa: E402
from wus_sim.plotting import (  # noqa: E402
    BREAKDOWN_PARTS, MEMORY_PARTS, PLOT_KINDS, check_plots, draw_figure, plot_breakdown, plot_heatmap,
    plot_lines, plot_memory, plot_speedup, save_plots,
)

from test_experiments_fake import fake_point  # noqa: E402

DOC = {
    "workloads": ["resnet50", "transformer-big"],
    "topologies": ["tpu-v3-32", "tpu-v3-128", "tpu-v3-512", "tpu-v3-2048"],
    "optimizers": ["adam", "sgd"],
    "sweep": {"link_GBps": [50, 100]},
}


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    exp = parse_experiment(DOC, name="plots")
    return run_experiment(exp, tmp_path_factory.mktemp("plots"), point_fn=fake_point, write=False).frame


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_speedup_draws_one_line_per_series_with_the_sharded_speedups(frame, ax):
    lines = plot_speedup(ax, frame)
    sharded = frame[(frame["strategy"] == "sharded") & (frame["status"] == "ok")]
    # workload is the hue; optimizer and link bandwidth also vary, so they join the label
    series = sharded.groupby(["workload", "optimizer", "link_GBps"])
    assert len(lines) == series.ngroups
    drawn = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in lines}
    for (workload, optimizer, bw), group in series:
        xs, ys = drawn[f"{workload}, {optimizer}, {bw:g} GB/s"]
        group = group.sort_values("replicas")
        assert xs == list(group["replicas"].astype(float))
        assert np.allclose(ys, group["speedup"])
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert list(ax.get_xticks()) == [32, 128, 512, 2048]
    assert "replicas" in ax.get_xlabel() and "speedup" in ax.get_ylabel()
    assert ax.get_legend() is not None


def test_breakdown_bars_add_up_to_the_step_time(frame, ax):
    rows = frame[(frame["topology"] == "tpu-v3-32") & (frame["link_GBps"] == 100) & (frame["status"] == "ok")]
    containers = plot_breakdown(ax, rows)
    nonzero = [p for p in BREAKDOWN_PARTS if rows[p].abs().sum() > 0]
    assert len(containers) == len(nonzero)
    tops = np.zeros(len(rows))
    for c in containers:
        tops += np.array([patch.get_height() for patch in c.patches])
    # bars come in group order, replicated then sharded
    expected = []
    for _, group in rows.groupby(["workload", "optimizer"], sort=False):
        expected += [float(group.loc[group["strategy"] == s, "step_time_s"].iloc[0]) * 1e3
                     for s in ("replicated", "sharded")]
    assert np.allclose(tops, expected)
    assert ax.get_ylabel() == "step time [ms]"
    assert ax.get_ylim()[1] >= max(expected)


def test_memory_bars_are_the_memory_parts_in_GiB(frame, ax):
    rows = frame[(frame["topology"] == "tpu-v3-512") & (frame["link_GBps"] == 100)
                 & (frame["workload"] == "transformer-big")]
    containers = plot_memory(ax, rows, by=["optimizer"])
    parts = [p for p in MEMORY_PARTS if p in rows and rows[p].fillna(0).sum() > 0]
    assert [c.get_label() for c in containers] == [p.replace("mem_", "").replace("_bytes", "").replace("_", " ")
                                                    for p in parts]
    heights = sum(np.array([patch.get_height() for patch in c.patches]) for c in containers)
    assert np.allclose(heights, rows[parts].sum(axis=1).to_numpy() / 2**30)
    # with sharding, Adam's slots shrink by the replica count
    slots = dict(zip(zip(rows["optimizer"], rows["strategy"]), rows["mem_slots_bytes"]))
    assert slots[("adam", "sharded")] * 512 == pytest.approx(slots[("adam", "replicated")])
    assert "GiB" in ax.get_ylabel()


def test_heatmap_cells_are_the_pivot_of_speedups(frame, ax):
    rows = frame[(frame["workload"] == "transformer-big") & (frame["optimizer"] == "adam")]
    image = plot_heatmap(ax, rows, x="link_GBps", y="replicas")
    sharded = rows[rows["strategy"] == "sharded"]
    pivot = sharded.pivot_table(index="replicas", columns="link_GBps", values="speedup").sort_index()
    assert np.allclose(np.asarray(image.get_array()), pivot.to_numpy())
    texts = [t.get_text() for t in ax.texts]
    assert f"{pivot.iloc[0, 0]:.2f}" in texts
    assert image.norm(1.0) == pytest.approx(0.5)  # the colour scale is centred on "no gain"


def test_heatmap_marks_infeasible_and_missing_cells(frame, ax):
    rows = frame[(frame["workload"] == "resnet50") & (frame["optimizer"] == "sgd")].copy()
    rows.loc[rows["replicas"] == 32, "status"] = "infeasible"
    rows = rows[~((rows["replicas"] == 2048) & (rows["link_GBps"] == 50))]  # a cell with no rows at all
    image = plot_heatmap(ax, rows)
    mask = np.ma.getmaskarray(image.get_array())
    assert mask[0].all() and mask[-1, 0] and mask.sum() == 3
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("infeasible") == 2 and texts.count("n/a") == 1


def test_lines_one_per_group_and_strategy(frame, ax):
    rows = frame[(frame["link_GBps"] == 100) & (frame["optimizer"] == "adam")]
    lines = plot_lines(ax, rows, x="replicas", y="step_time_s", hue="workload", logx=True)
    assert len(lines) == 2 * 2
    assert {line.get_linestyle() for line in lines} == {"-", "--"}
    assert ax.get_ylabel() == "step time [ms]"


def _in_axes(ax, x, y, *, y_is_data=True):
    """(x, y) in axes fractions."""
    point = ax.transData.transform((x, y)) if y_is_data else ax.get_xaxis_transform().transform((x, y))
    return ax.transAxes.inverted().transform(point)


def test_infeasible_points_are_marked_not_dropped(frame, ax):
    rows = frame.copy()
    rows.loc[(rows["workload"] == "resnet50") & (rows["replicas"] >= 512), "status"] = "infeasible"
    lines = plot_speedup(ax, rows)
    marks = [line for line in ax.lines if line.get_gid() == "no-value"]
    resnet = {line.get_color() for line in lines if line.get_label().startswith("resnet50")}
    # every resnet50 series keeps its line (its feasible points) and crosses where it could not run
    assert len(resnet) == 4 and {m.get_color() for m in marks} == resnet
    assert all(sorted(m.get_xdata()) == [512.0, 2048.0] for m in marks)
    assert all(sorted(line.get_xdata()) == [32.0, 128.0] for line in lines if line.get_label().startswith("resnet50"))
    # each series' crosses have a row of their own, named in its colour
    assert len({m.get_ydata()[0] for m in marks}) == len(marks)
    named = {(t.get_text(), t.get_color()) for t in ax.texts}
    for line in lines:
        if line.get_label().startswith("resnet50"):
            assert (f"does not fit: {line.get_label()}", line.get_color()) in named
    assert any(t.get_text().startswith("no value") for t in ax.get_legend().get_texts())


def test_points_without_a_value_stay_off_the_value_range(frame, ax):
    # a cross at a made-up height read as a value (paper_speedup: a speedup of 1.05)
    rows = frame.copy()
    rows.loc[(rows["workload"] == "resnet50") & (rows["replicas"] >= 512), "status"] = "infeasible"
    lines = plot_speedup(ax, rows)
    (band,) = [p for p in ax.patches if p.get_gid() == "no-value"]
    top_of_band = band.get_height()
    for mark in [line for line in ax.lines if line.get_gid() == "no-value"]:
        for x, y in zip(mark.get_xdata(), mark.get_ydata()):
            assert 0 < _in_axes(ax, x, y, y_is_data=False)[1] < top_of_band
    values = [_in_axes(ax, x, y)[1] for line in lines for x, y in zip(line.get_xdata(), line.get_ydata())]
    values.append(_in_axes(ax, 1, 1.0)[1])  # the no-gain line
    assert min(values) > top_of_band and max(values) < 1
    # and no y tick stands beside the band, where it would give the crosses a value
    ax.figure.canvas.draw()
    ticks = list(ax.yaxis.get_majorticklocs()) + list(ax.yaxis.get_minorticklocs())
    assert ticks and all(_in_axes(ax, 1, t)[1] >= top_of_band for t in ticks)


def test_a_strategy_without_values_is_named(frame):
    rows = frame[(frame["workload"] == "transformer-big") & (frame["optimizer"] == "adam")
                 & (frame["link_GBps"] == 100)].copy()
    rows.loc[(rows["strategy"] == "replicated") & (rows["replicas"] >= 512), "status"] = "infeasible"
    rows.loc[rows["replicas"] >= 512, "speedup"] = float("nan")  # as the runner leaves it
    fig, (left, right) = plt.subplots(1, 2)
    plot_lines(left, rows, x="replicas", logx=True)
    assert {t.get_text() for t in left.texts} == {"does not fit: replicated"}
    # the speedup of a point whose replicated row does not fit says why it has none
    plot_speedup(right, rows)
    assert {t.get_text() for t in right.texts} == {"replicated does not fit: transformer-big"}
    plt.close(fig)


def test_lines_keep_clear_of_the_frame_in_every_panel(frame):
    # panels share one y range; whatif_failed_links' ResNet-50 lines sat on the top edge of it
    rows = frame[(frame["optimizer"] == "adam") & (frame["link_GBps"] == 100)]
    (spec,) = plot_specs([{"kind": "lines", "x": "replicas", "facet": "workload"}])
    fig = draw_figure(spec, rows)
    axes = _visible_axes(fig)
    assert len(axes) == 2 and len({ax.get_ylim() for ax in axes}) == 1
    for ax in axes:
        ys = [_in_axes(ax, x, y)[1] for line in ax.get_lines() for x, y in zip(line.get_xdata(), line.get_ydata())]
        assert 0.04 < min(ys) and max(ys) < 0.96
    plt.close(fig)


def test_series_of_a_strategy_look_distinct_up_to_twenty():
    from wus_sim.plotting.style import STRATEGY_STYLES, series_look

    for strategy in STRATEGY_STYLES:
        looks = [(look["color"], str(look["linestyle"])) for look in (series_look(strategy, i) for i in range(20))]
        assert len(set(looks)) == 20
        assert len({c for c, _ in looks[:4]}) == 4 and len({d for _, d in looks[:4]}) == 4


@pytest.mark.parametrize("values, log", [
    ([50, 100, 200], True), ([32, 128, 256, 512, 1024, 2048], True), ([1, 2, 3, 4, 5, 6, 7, 8], False),
    ([100, 200], False), ([0, 4, 16], False),
])
def test_log_axes_where_values_span_octaves(values, log):
    from wus_sim.plotting.style import spans_octaves

    assert spans_octaves(values) is log


def test_link_bandwidth_axis_is_log2(frame, ax):
    rows = frame[(frame["workload"] == "resnet50") & (frame["topology"] == "tpu-v3-32")].copy()
    rows = __import__("pandas").concat([rows, rows.assign(link_GBps=200.0)])
    plot_lines(ax, rows, x="link_GBps", hue="optimizer")
    assert ax.get_xscale() == "log" and list(ax.get_xticks()) == [50, 100, 200]


def plot_specs(plots):
    return parse_experiment({**DOC, "plots": plots}, file="exp.yaml").plots


@pytest.mark.parametrize("plots, where, rule", [
    ([{"kind": "pie"}], "plots[0].kind", "must be one of speedup"),
    ([{"kind": "speedup", "colour": "red"}], "plots[0].colour", "is not a known key here"),
    ([{"kind": "speedup", "x": "replica"}], "plots[0].x", "is not a results column"),
    ([{"kind": "lines", "x": "replicas", "hue": ["workload", "nope"]}], "plots[0].hue[1]", "is not a results column"),
    ([{"kind": "heatmap", "figsize": [4]}], "plots[0].figsize", "[width, height]"),
    ([{"kind": "memory", "where": {"optimiser": "adam"}}], "plots[0].where.optimiser", "is not a results column"),
    ([{"kind": "speedup"}, {"kind": "breakdown", "annotate": "yes"}], "plots[1].annotate", "true or false"),
    ([{"kind": "lines", "y": "speedup"}], "plots[0]", "missing required key 'x'"),
    # Heatmap options that only fail when drawn, after the sweep, are checked up front too.
    ([{"kind": "heatmap", "fmt": "{bad"}], "plots[0].fmt", "format"),
    ([{"kind": "heatmap", "fmt": "d"}], "plots[0].fmt", "format"),
    ([{"kind": "heatmap", "cmap": "notacmap"}], "plots[0].cmap", "colour map"),
    ([{"kind": "heatmap", "strategy": "shardd"}], "plots[0].strategy", "must be one of replicated, sharded"),
])
def test_bad_plot_specs_name_file_key_path_and_rule(plots, where, rule):
    with pytest.raises(ConfigError) as info:
        check_plots(plot_specs(plots))
    message = str(info.value)
    assert message.startswith(f"exp.yaml: {where}") and rule in message


def test_plot_kind_options_are_keywords_of_the_function():
    import inspect

    for name, kind in PLOT_KINDS.items():
        keywords = {k for k, p in inspect.signature(kind.function).parameters.items() if p.kind is p.KEYWORD_ONLY}
        # every YAML option reaches the function, and every option it needs can be given
        assert set(kind.options) <= keywords - {"title"}, name
        assert set(kind.required()) <= set(kind.options), name


def test_save_plots_writes_png_and_svg_for_every_kind(frame, tmp_path):
    specs = plot_specs([
        {"kind": "speedup", "name": "s", "where": {"link_GBps": 100}},
        {"kind": "breakdown", "name": "b", "where": {"topology": "tpu-v3-32", "link_GBps": 100}},
        {"kind": "memory", "name": "m", "facet": "workload", "where": {"topology": "tpu-v3-32", "link_GBps": 100}},
        {"kind": "heatmap", "name": "h", "where": {"workload": "resnet50", "optimizer": "adam"}},
        {"kind": "lines", "name": "l", "x": "replicas", "logx": True, "where": {"optimizer": "adam"}},
    ])
    assert {s.kind for s in specs} == set(PLOT_KINDS)
    check_plots(specs)
    written = save_plots(specs, frame, tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{n}.{e}" for n in "sbmhl" for e in ("png", "svg"))
    for path in written:
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG") if path.suffix == ".png" else b"<svg" in data[:2000]


def test_facets_make_one_panel_each_with_one_legend(frame):
    (spec,) = plot_specs([{"kind": "speedup", "facet": "optimizer"}])
    fig = draw_figure(spec, frame)
    visible = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in visible] == ["adam", "sgd"]
    assert all(ax.get_legend() is None for ax in visible) and len(fig.legends) == 1
    plt.close(fig)


def test_importing_plotting_does_not_import_matplotlib():
    code = "import sys, wus_sim.plotting; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_facets_share_y_and_colour_scales(frame):
    (bars, heat) = plot_specs([
        {"kind": "breakdown", "name": "b", "facet": "workload", "where": {"topology": "tpu-v3-32", "link_GBps": 100}},
        {"kind": "heatmap", "name": "h", "facet": "workload", "where": {"optimizer": "adam"}},
    ])
    fig = draw_figure(bars, frame)
    limits = {ax.get_ylim() for ax in fig.axes if ax.axison}
    tallest = frame[(frame["topology"] == "tpu-v3-32") & (frame["link_GBps"] == 100)]["step_time_s"].max() * 1e3
    assert len(limits) == 1 and limits.pop()[1] >= tallest
    plt.close(fig)
    fig = draw_figure(heat, frame)
    images = [im for ax in fig.axes for im in ax.images]
    assert len(images) == 2 and len({(im.norm.vmin, im.norm.vmax) for im in images}) == 1
    speedups = frame[(frame["optimizer"] == "adam") & (frame["strategy"] == "sharded")]["speedup"]
    # one scale spans both workloads' speedups, and one colour bar says what it means
    assert images[0].norm.vmax >= speedups.max() - 1e-9
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 1
    plt.close(fig)


def test_subtitle_names_what_the_figure_holds_fixed(frame):
    (spec,) = plot_specs([{"kind": "speedup", "where": {"optimizer": "adam", "link_GBps": 50}}])
    fig = draw_figure(spec, frame, chosen={"link_GBps"})
    (ax,) = [ax for ax in fig.axes if ax.axison]
    subtitle = [t.get_text() for t in ax.texts if t.get_text().startswith("fixed:")]
    assert subtitle == ["fixed: 50 GB/s"]  # adam: the title names it (what ran)
    assert "with adam" in ax.get_title()
    plt.close(fig)


def test_plots_that_cannot_be_drawn_are_named_and_skipped(frame, tmp_path):
    specs = plot_specs([
        {"kind": "speedup", "name": "none", "where": {"workload": "gnmt"}},
        {"kind": "heatmap", "name": "replicated", "strategy": "replicated", "value": "speedup"},
        {"kind": "speedup", "name": "fine"},
    ])
    skipped = []
    written = save_plots(specs, frame, tmp_path, on_skip=lambda plot, reason: skipped.append((plot.name, reason)))
    assert sorted(p.name for p in written) == ["fine.png", "fine.svg"]
    assert [name for name, _ in skipped] == ["none", "replicated"]
    assert "no rows to plot" in skipped[0][1] and "nothing to draw" in skipped[1][1]


def test_figures_stay_readable_in_size():
    from wus_sim.plotting.figure import FIGURE_MAX_IN, panel_grid

    for panels in range(1, 13):
        rows, cols, (w, h) = panel_grid(panels, (6.4, 4.0))
        assert rows * cols >= panels and cols <= 3
        assert w <= FIGURE_MAX_IN[0] and h <= FIGURE_MAX_IN[1]


def test_memory_stack_is_the_peak():
    # the stacked parts are those that add up to the peak (wus_sim.model.memory's docstring):
    # padding is inside weights, gradients and slots and must not be stacked again
    from wus_sim.model.memory import PARTS

    assert MEMORY_PARTS == tuple(f"mem_{p}_bytes" for p in PARTS) and "mem_padding_bytes" not in MEMORY_PARTS


def test_experiment_without_plots_gets_default_plots_that_draw(frame, tmp_path):
    from wus_sim.plotting import default_plots

    exp = parse_experiment(DOC, name="plots")
    specs = default_plots(exp)
    check_plots(specs)
    # DOC sweeps slices and link bandwidth over two workloads and optimizers: a speedup and a
    # step time vs replicas, and a speedup heatmap over bandwidth x replicas per workload; too
    # many points for memory bars, so the peak memory per replica as lines
    assert {s.name: s.kind for s in specs} == {"speedup": "speedup", "step_time": "lines", "heatmap": "heatmap",
                                               "memory_peak": "lines"}
    skipped = []
    written = save_plots(specs, frame, tmp_path, on_skip=lambda plot, reason: skipped.append(reason))
    assert not skipped and len(written) == 2 * len(specs)


@pytest.mark.parametrize("path", sorted((__import__("pathlib").Path(__file__).resolve().parents[2] / "experiments").glob("*.yaml")))
def test_default_plots_of_every_shipped_sweep_are_valid(path):
    import yaml

    from wus_sim.plotting import default_plots

    doc = yaml.safe_load(path.read_text())
    doc.pop("plots", None)
    specs = default_plots(parse_experiment(doc, name=path.stem))
    assert specs  # never nothing
    check_plots(specs)


def test_cli_run_without_plots_draws_the_defaults(tmp_path, capsys):
    from wus_sim.cli import main

    exp = tmp_path / "mine.yaml"
    exp.write_text("workloads: [resnet50]\ntopologies: [tpu-v3-8, tpu-v3-32]\n")
    assert main(["run", str(exp), "--out", str(tmp_path / "out"), "-q", "-j", "1"]) == 0
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert pngs == ["breakdown.png", "memory.png", "speedup.png", "step_time.png"]


def test_axis_labels_say_their_unit_once():
    # "dcn GBps [GB/s]" and "steps [steps]" said the unit twice
    from wus_sim.experiments.results import columns
    from wus_sim.plotting.labels import _UNIT_WORDS, _axis_label

    units = {u.lower() for u in _UNIT_WORDS}
    for col in columns():
        label = _axis_label(col.name)
        text, _, unit = label.partition(" [")
        words = {w.lower() for w in text.split(" ")}  # "cost usd per step [USD]" said it twice too
        assert not words & units, label
        assert not unit or unit.rstrip("]").lower() not in words, label


def test_cost_columns_read_as_money_with_their_unit():
    """A cost axis says what the money buys and that it is US dollars, once."""
    from wus_sim.plotting.labels import _axis_label

    assert _axis_label("cost_usd_per_step") == "cost of a step [USD]"
    assert _axis_label("cost_usd_per_million_tokens") == "cost per million tokens [USD]"
    assert _axis_label("cost_usd_per_thousand_examples") == "cost per 1,000 examples [USD]"
    assert _axis_label("price_usd_per_chip_hour") == "price of a chip-hour [USD]"
    assert _axis_label("cost_usd_per_step", unit=False) == "cost of a step"


def test_subtitle_leaves_out_what_the_title_says(frame):
    (spec,) = plot_specs([{"kind": "breakdown", "title": "Step time on TPU-v3-32",
                           "where": {"topology": "tpu-v3-32", "link_GBps": 100, "optimizer": "adam"}}])
    fig = draw_figure(spec, frame, chosen={"link_GBps"})
    (ax,) = [ax for ax in fig.axes if ax.axison]
    subtitle = [t.get_text() for t in ax.texts if t.get_text().startswith("fixed:")]
    assert subtitle == ["fixed: 100 GB/s"]  # not tpu-v3-32 nor adam again: the title names them
    plt.close(fig)


def _visible_axes(fig):
    return [ax for ax in fig.axes if ax.axison and ax.get_label() != "<colorbar>"]


def test_x_tick_labels_never_collide(frame):
    # 16 groups of bars under one panel, and 12 bandwidths an octave apart on a narrow one:
    # drawn as first laid out, neighbouring labels ran into each other
    import pandas as pd

    from wus_sim.plotting.layout import collisions

    one = frame[(frame["workload"] == "resnet50") & (frame["optimizer"] == "adam") & (frame["link_GBps"] == 50)]
    octaves = pd.concat([one.assign(link_GBps=0.05 * 2**k) for k in range(12)])
    crowded, narrow = plot_specs([
        {"kind": "breakdown", "name": "crowded", "by": ["workload", "optimizer", "topology"],
         "where": {"link_GBps": 100}},
        {"kind": "lines", "name": "narrow", "x": "link_GBps", "figsize": [2.5, 3]},
    ])
    for spec, df in ((crowded, frame), (narrow, octaves)):
        fig = draw_figure(spec, df)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in _visible_axes(fig):
            assert not collisions(ax, renderer), spec.name
        texts = [t.get_text() for t in _visible_axes(fig)[0].get_xticklabels()]
        if spec.name == "crowded":
            # every group keeps its whole name (wrapped, not cut)
            words = [" ".join(t.replace("-\n", "-").replace(",", " ").split()) for t in texts]
            assert len(words) == 16 and words[0] == "resnet50 adam tpu-v3-32", words
        else:
            kept = [t for t in texts if t]
            assert kept[0] == "0.05" and 2 <= len(kept) < 12
        plt.close(fig)


def test_legend_takes_room_of_its_own_not_the_panels(frame):
    # a long legend right of one panel left the axes a narrow strip (whatif_multislice)
    specs = plot_specs([
        {"kind": "lines", "name": "long", "x": "link_GBps", "hue": ["workload", "optimizer", "topology"]},
        {"kind": "speedup", "name": "short", "where": {"link_GBps": 100, "optimizer": "adam"}},
        {"kind": "memory", "name": "facets", "facet": "workload", "where": {"topology": "tpu-v3-32"}},
    ])
    for spec in specs:
        fig = draw_figure(spec, frame)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        (legend,) = fig.legends
        box = legend.get_window_extent(renderer)
        panel_w, panel_h = spec.options.get("figsize", PLOT_KINDS[spec.kind].size)
        for ax in _visible_axes(fig):
            assert not box.overlaps(ax.get_window_extent(renderer)), spec.name
            w, h = ax.get_position().width * fig.get_figwidth(), ax.get_position().height * fig.get_figheight()
            assert w >= 0.6 * panel_w and h >= 0.5 * panel_h, (spec.name, w, h)
        if box.width / fig.dpi > 0.45 * panel_w * len(_visible_axes(fig)):
            assert box.y1 < min(ax.get_window_extent(renderer).y0 for ax in _visible_axes(fig))  # below
        plt.close(fig)


def test_strategies_are_line_styles_named_once(frame, ax):
    # hue: [..., strategy] labelled every series "..., replicated (adam, 2048), rep"
    rows = frame[(frame["link_GBps"] == 100)]
    lines = plot_lines(ax, rows, x="replicas", hue=["workload", "strategy"], logx=True)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts.count("replicated") == 1 and texts.count("sharded") == 1
    series = [t for t in texts if t not in ("replicated", "sharded")]
    assert not any(word in t for t in series for word in ("replicated", "sharded", "rep", "shd")), texts
    # a series' strategies share its line style and differ in colour and marker (the strategy's)
    by_style = {}
    for line in lines:
        by_style.setdefault(str(line._unscaled_dash_pattern), set()).add((line.get_color(), line.get_marker()))
    assert len(by_style) == len(series) and all(len(looks) == 2 for looks in by_style.values())


def test_series_are_not_drawn_alike(frame, ax):
    # 16 series (workload x topology x optimizer): cycling ten colours gave two series one colour
    rows = frame[frame["strategy"] == "sharded"]
    keys = ["workload", "topology", "optimizer"]
    lines = plot_speedup(ax, frame, x="link_GBps", hue=keys)
    series = [values for values, _ in rows.groupby(keys, sort=False)]
    assert len(lines) == len(series) == 16
    looks = [(line.get_color(), str(line._unscaled_dash_pattern), line.get_marker()) for line in lines]
    assert len(set(looks)) == 16
    assert {m for _, _, m in looks} == {"s"}  # one strategy, one marker: sharded's


def test_a_series_keeps_its_colour_in_every_panel(frame):
    rows = frame[~((frame["workload"] == "resnet50") & (frame["optimizer"] == "adam"))]
    (spec,) = plot_specs([{"kind": "speedup", "facet": "optimizer", "where": {"link_GBps": 100}}])
    fig = draw_figure(spec, rows)
    colours = {}
    for ax in _visible_axes(fig):
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                colours.setdefault(line.get_label(), set()).add(line.get_color())
    assert {"transformer-big", "resnet50"} <= set(colours)
    assert all(len(c) == 1 for c in colours.values()), colours
    plt.close(fig)


def test_log_y_ticks_are_plain_numbers(frame):
    (spec,) = plot_specs([{"kind": "lines", "x": "replicas", "logy": True,
                           "where": {"optimizer": "adam", "link_GBps": 100, "workload": "transformer-big"}}])
    fig = draw_figure(spec, frame)
    fig.canvas.draw()
    (ax,) = _visible_axes(fig)
    texts = [t.get_text() for t in ax.get_yticklabels() + ax.yaxis.get_minorticklabels() if t.get_text()]
    assert texts and all(float(t) > 0 for t in texts), texts  # "6x10^1" would not parse
    plt.close(fig)


def test_no_gain_is_a_legend_entry_not_text_on_the_data(frame, ax):
    plot_speedup(ax, frame)
    assert not [t for t in ax.texts if "no gain" in t.get_text()]
    assert "no gain (speedup 1)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_memory_bars_that_do_not_fit_are_hatched_not_written_over(frame, ax):
    # "does not fit" written above a bar ran over its neighbour (whatif_fully_sharded memory)
    rows = frame[(frame["topology"] == "tpu-v3-512") & (frame["link_GBps"] == 100)
                 & (frame["workload"] == "transformer-big")].copy()
    rows.loc[(rows["optimizer"] == "adam") & (rows["strategy"] == "replicated"), "status"] = "infeasible"
    plot_memory(ax, rows, by=["optimizer"])
    assert not ax.texts
    hatched = [p for p in ax.patches if p.get_hatch()]
    peak = float(rows.loc[rows["status"] == "infeasible", "mem_peak_bytes"].iloc[0]) / 2**30
    assert len(hatched) == 1 and hatched[0].get_height() == pytest.approx(peak)
    assert "does not fit in HBM" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_hbm_line_shows_in_every_panel_whose_range_reaches_it(frame):
    # a panel whose own bars stay far below HBM left the line out, though it shared the y range
    rows = frame[(frame["topology"] == "tpu-v3-32") & (frame["link_GBps"] == 100)].assign(hbm_bytes=5 * 2**30)
    (spec,) = plot_specs([{"kind": "memory", "facet": "workload"}])
    fig = draw_figure(spec, rows)
    for ax in _visible_axes(fig):
        lo, hi = ax.get_ylim()
        assert lo <= 5 <= hi
        assert [line for line in ax.get_lines() if list(line.get_ydata()) == [5.0, 5.0]], ax.get_title()
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "HBM per replica (5 GiB)" in texts and not [t for t in texts if "off scale" in t]
    plt.close(fig)


def test_a_speedup_over_lines_leaves_replicated_out(frame, ax):
    # replicated rows have no speedup by definition: they were crosses named "ok: ..., replicated"
    rows = frame[frame["link_GBps"] == 100]
    lines = plot_lines(ax, rows, x="replicas", y="speedup", hue="workload", logx=True)
    assert not ax.texts and not [p for p in ax.patches if p.get_gid() == "no-value"]
    assert len(lines) == rows[rows["strategy"] == "sharded"].groupby(["workload", "optimizer"]).ngroups
    assert "replicated" not in [t.get_text() for t in ax.get_legend().get_texts()]


def test_speedup_labels_clear_the_bars_beside_them(frame):
    # "x1.12", wider than a bar, was written into the taller replicated bar next to it
    (spec,) = plot_specs([{"kind": "breakdown", "by": ["workload", "optimizer", "topology"],
                           "where": {"link_GBps": 100}}])
    fig = draw_figure(spec, frame)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = _visible_axes(fig)
    labels = [t for t in ax.texts if t.get_text().startswith("x")]
    bars = [p.get_window_extent(renderer) for c in ax.containers for p in c.patches if p.get_height() > 0]
    assert len(labels) == 16
    for label in labels:
        box = label.get_window_extent(renderer)
        assert not [b for b in bars if box.overlaps(b)], label.get_text()
    plt.close(fig)


def test_many_series_without_values_share_rows_that_stay_legible(frame, ax):
    # 16 series and strategies without values in 4 rows wrote their names over each other
    from wus_sim.plotting.series import MAX_BAND_ROWS

    rows = frame.copy()
    rows.loc[rows["replicas"] >= 512, "status"] = "infeasible"
    plot_lines(ax, rows, x="replicas", hue=["workload", "optimizer", "link_GBps"], logx=True)
    marks = [line for line in ax.lines if line.get_gid() == "no-value"]
    assert len({m.get_ydata()[0] for m in marks}) <= MAX_BAND_ROWS
    assert sorted(t.get_text() for t in ax.texts) == ["does not fit: replicated, 8 series",
                                                      "does not fit: sharded, 8 series"]
    ax.figure.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts]
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[:i] if a.overlaps(b)]


def test_group_names_are_not_broken_where_they_fit(frame):
    # a guess before layout broke "transformer-\nbig" under four groups that had room for it
    (spec,) = plot_specs([{"kind": "breakdown", "by": ["workload", "optimizer"],
                           "where": {"topology": "tpu-v3-512", "link_GBps": 100}}])
    fig = draw_figure(spec, frame)
    (ax,) = _visible_axes(fig)
    texts = [t.get_text() for t in ax.get_xticklabels()]
    assert texts == ["resnet50\nadam", "resnet50\nsgd", "transformer-big\nadam", "transformer-big\nsgd"]
    plt.close(fig)


def test_column_labels_say_their_unit_once():
    from wus_sim.experiments.results import column_label

    assert column_label("dcn_GBps") == ("dcn [GB/s]", 1.0)
    assert column_label("hop_latency_us") == ("hop latency [us]", 1.0)
    assert column_label("step_time_s") == ("step time [ms]", 1000.0)
