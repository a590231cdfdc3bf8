"""Pictures people put in design docs (issue 47, item 4), checked on the drawn artists: each
strategy its own colour and marker in every plot, from one table; 95 % bands light, behind the
lines, inside the y range and named by their kind; titles that say what ran (workload,
optimizer, chip, slice); no Python repr in any text of a figure."""

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from wus_sim.experiments.runner import run_experiment  # noqa: E402
from wus_sim.experiments.spec import parse_experiment  # noqa: E402
from wus_sim.model.memory import STRATEGY_NAMES  # noqa: E402
from wus_sim.plotting import draw_figure, plot_breakdown, plot_lines, plot_speedup  # noqa: E402
from wus_sim.plotting.style import STRATEGY_STYLES  # noqa: E402

from test_experiments_fake import fake_point  # noqa: E402
from test_plotting import DOC, plot_specs  # noqa: E402


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    """Every strategy, with a 95 % band reaching well above each line (calibration on v3-32 and
    v3-128, extrapolated on the larger slices)."""
    exp = parse_experiment({**DOC, "strategies": "all"}, name="pictures")
    df = run_experiment(exp, tmp_path_factory.mktemp("pictures"), point_fn=fake_point, write=False).frame
    rep = df[df["strategy"] == "replicated"].set_index("point_index")["step_time_s"]
    df["speedup"] = df["point_index"].map(rep) / df["step_time_s"]
    df.loc[df["strategy"] == "replicated", "speedup"] = float("nan")
    df["step_time_s_low"] = df["step_time_s"] * 0.9
    df["step_time_s_high"] = df["step_time_s"] * 1.8
    small = df["replicas"] <= 128
    df["band_kind"] = "calibration"
    df["inside_validated_range"] = small
    return df


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def _one_series(df):
    return df[(df["workload"] == "transformer-big") & (df["optimizer"] == "adam") & (df["link_GBps"] == 100)]


def test_the_style_table_covers_every_strategy_with_its_own_colour_and_marker():
    assert set(STRATEGY_STYLES) == set(STRATEGY_NAMES)
    styles = list(STRATEGY_STYLES.values())
    assert len({s.marker for s in styles}) == len(styles) and len({s.colour for s in styles}) == len(styles)
    shades = [set(s.shades) for s in styles]
    assert all(not a & b for i, a in enumerate(shades) for b in shades[:i])  # no shade shared either


def _looks_by_strategy(lines):
    out = {}
    for line in lines:
        out.setdefault(line.strategy, set()).add((line.get_color(), line.get_marker()))
    return out


@pytest.mark.parametrize("hue", [None, ["workload", "optimizer"]])
def test_every_line_takes_its_strategys_colour_and_marker(frame, ax, hue):
    rows = frame[frame["link_GBps"] == 100] if hue else _one_series(frame)
    lines = plot_lines(ax, rows, x="replicas", hue=hue, logx=True)
    ax.figure.canvas.draw()
    looks = _looks_by_strategy(lines)
    assert set(looks) == set(STRATEGY_NAMES)
    for strategy, drawn in looks.items():
        style = STRATEGY_STYLES[strategy]
        assert {marker for _, marker in drawn} == {style.marker}
        assert {colour for colour, _ in drawn} <= set(style.shades)
    markers = [next(iter(drawn))[1] for drawn in looks.values()]
    colours = [{c for c, _ in drawn} for drawn in looks.values()]
    assert len(set(markers)) == 3 and all(not a & b for i, a in enumerate(colours) for b in colours[:i])
    legend = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    for strategy, style in STRATEGY_STYLES.items():  # and the legend says which is which
        assert legend[strategy].get_color() == style.colour and legend[strategy].get_marker() == style.marker


def test_what_if_markers_of_sharded_and_fully_sharded_differ(frame, ax):
    # the speedup plot drew both as the same hollow circle
    rows = _one_series(frame).copy()
    shown = rows["strategy"] != "replicated"
    rows.loc[shown, "speedup_if_replicated_fit"] = rows.loc[shown, "speedup"]
    rows.loc[shown, "speedup"] = float("nan")
    rows.loc[rows["strategy"] == "replicated", "status"] = "infeasible"
    plot_speedup(ax, rows)
    hollow = [line for line in ax.lines if line.get_gid() == "if-replicated-fit"]
    looks = {(line.get_marker(), line.get_markeredgecolor()) for line in hollow}
    assert looks == {(STRATEGY_STYLES[s].marker, STRATEGY_STYLES[s].colour) for s in ("sharded", "fully-sharded")}
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum(t.startswith("if replicated fit") for t in texts) == 2


def test_bars_name_each_strategy_in_its_colour(frame, ax):
    rows = frame[(frame["topology"] == "tpu-v3-32") & (frame["link_GBps"] == 100)]
    plot_breakdown(ax, rows)
    ax.figure.canvas.draw()
    labels = ax.get_xticklabels(minor=True)
    by_text = {t.get_text(): t.get_color() for t in labels}
    assert by_text == {s.short: s.colour for s in STRATEGY_STYLES.values()}


def _bands(ax):
    return [c for c in ax.collections if getattr(c, "band_kind", None)]


def test_bands_lie_behind_the_lines_and_inside_the_y_range(frame, ax):
    rows = _one_series(frame)
    lines = plot_lines(ax, rows, x="replicas", logx=True)
    bands = _bands(ax)
    assert bands and lines
    assert max(b.get_zorder() for b in bands) < min(line.get_zorder() for line in lines)
    assert max(b.get_alpha() for b in bands) <= 0.3  # light: a line behind a band stays visible
    lo, hi = ax.get_ylim()
    tops = [v for b in bands for path in b.get_paths() for v in path.vertices[:, 1]]
    assert lo <= min(tops) and max(tops) <= hi  # never clipped
    assert max(tops) == pytest.approx(rows["step_time_s_high"].max() * 1e3)


def _legend_texts(ax_or_fig):
    legends = ax_or_fig.legends if hasattr(ax_or_fig, "legends") and ax_or_fig.legends else [ax_or_fig.get_legend()]
    return [t.get_text() for legend in legends if legend for t in legend.get_texts()]


def test_a_band_is_named_by_its_kind(frame, ax):
    rows = _one_series(frame)
    plot_lines(ax, rows[rows["replicas"] <= 128], x="replicas", strategies=["sharded"], logx=True)
    assert [t for t in _legend_texts(ax) if "band" in t] == ["95 % band (calibration)"]
    ax.clear()
    plot_lines(ax, rows[rows["replicas"] >= 512], x="replicas", strategies=["sharded"], logx=True)
    assert [t for t in _legend_texts(ax) if "band" in t] == ["95 % band (extrapolated)"]
    ax.clear()
    # the calibration's own word, on a point inside its range, wins too
    chip = rows[rows["replicas"] <= 128].assign(band_kind="extrapolated")
    plot_lines(ax, chip, x="replicas", strategies=["sharded"], logx=True)
    assert [t for t in _legend_texts(ax) if "band" in t] == ["95 % band (extrapolated)"]
    # drawn in its strategy's colour in the legend, not grey
    handle = dict(zip(_legend_texts(ax), ax.get_legend().legend_handles))["95 % band (extrapolated)"]
    assert matplotlib.colors.to_hex(handle.get_facecolor()) == STRATEGY_STYLES["sharded"].colour


KINDS = [
    {"kind": "speedup"},
    {"kind": "lines", "x": "replicas"},
    {"kind": "lines", "x": "replicas", "facet": "workload"},
    {"kind": "heatmap", "x": "link_GBps", "y": "replicas", "where": {"workload": "resnet50"}, "facet": "optimizer"},
    {"kind": "heatmap", "x": "link_GBps", "y": "replicas", "where": {"workload": "resnet50", "optimizer": "adam"}},
    {"kind": "breakdown", "where": {"topology": "tpu-v3-32", "link_GBps": 100}},
    {"kind": "memory", "where": {"topology": "tpu-v3-32", "link_GBps": 100}},
]


def _heading(fig):
    axes = [ax for ax in fig.axes if ax.axison and ax.get_label() != "<colorbar>"]
    return (fig._suptitle.get_text() if fig._suptitle else "") + "\n" + "\n".join(ax.get_title() for ax in axes)


@pytest.mark.parametrize("options", KINDS, ids=lambda o: o["kind"] + ("-facet" if "facet" in o else ""))
def test_titles_name_the_workload_optimizer_chip_and_slice(frame, options):
    (spec,) = plot_specs([options])
    fig = draw_figure(spec, frame)
    heading = _heading(fig)
    rows = frame
    for col, value in (options.get("where") or {}).items():
        rows = rows[rows[col] == value]
    for workload in rows["workload"].unique():
        assert workload in heading, heading
    for optimizer in rows["optimizer"].unique():
        assert optimizer in heading, heading
    assert "chip tpu-v3" in heading, heading
    assert "slice" in heading and "tpu-v3-32" in heading, heading
    plt.close(fig)


def _all_text(fig):
    fig.canvas.draw()
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return [t for t in texts if t]


REPR = re.compile(r"""\b(true|false|none|nan)\b|\[[^\]]*,[^\]]*\]|\[['"]|\(['"]|,\)""", re.I)
"""What only a Python repr writes: a truth value, None, nan, a list (brackets around commas; a
unit's ``[ms]`` is no list), a quoted item, a one-tuple's comma."""


@pytest.mark.parametrize("options", [
    {"kind": "lines", "x": "replicas", "hue": ["wraparound"]},
    {"kind": "speedup", "hue": ["wraparound", "overlap_grad_reduce"]},
    {"kind": "heatmap", "x": "link_GBps", "y": "replicas", "where": {"workload": "resnet50", "optimizer": "adam"}},
    {"kind": "breakdown", "by": ["wraparound"], "where": {"topology": "tpu-v3-32", "link_GBps": 100}},
], ids=lambda o: o["kind"])
def test_no_text_of_a_figure_is_a_python_repr(frame, options):
    # the heatmap's subtitle read "... wraparound: False, False, False, True"
    rows = frame[(frame["optimizer"] == "adam") | (options["kind"] != "lines")].copy()
    # as results.csv holds them: a per-axis wraparound is the text of its list
    wraps = {32: "[False, False]", 128: "[False, True]", 512: "false,true", 2048: "True"}
    rows["wraparound"] = rows["replicas"].map(wraps).astype("string")
    rows["overlap_grad_reduce"] = rows["link_GBps"] == 100
    rows["megacore"] = False  # a fixed truth value, named in the subtitle
    (spec,) = plot_specs([options])
    fig = draw_figure(spec, rows, chosen={"megacore"})
    texts = _all_text(fig)
    bad = [t for t in texts if REPR.search(t)]
    assert not bad, bad
    assert any("megacore no" in t for t in texts), texts
    if options["kind"] == "lines":
        assert any(t.startswith("wraparound x, y: no, yes") for t in texts), texts
    plt.close(fig)


def test_wraparound_reads_as_the_docs_spell_a_slice():
    from wus_sim.plotting.labels import display_value, follows_x

    assert display_value("wraparound", True) == "torus" and display_value("wraparound", [False, False]) == "mesh"
    assert display_value("wraparound", [False, False, False, True]) == "wraparound x, y, z, w: no, no, no, yes"
    assert display_value("wraparound", "[False, True]") == "wraparound x, y: no, yes"  # read back from a CSV
    assert display_value("wraparound", "false,true") == "wraparound x, y: no, yes"  # as a notebook's frame held it
    import pandas as pd

    rows = pd.DataFrame({"replicas": [32, 128, 512, 2048], "workload": ["w"] * 4,
                         "wraparound": [False, False, False, True]})
    said = follows_x(rows, "replicas")
    assert "mesh, mesh, mesh, torus" in said and "False" not in said


def test_a_language_models_sweep_gets_mfu_and_tokens_per_second(frame):
    from wus_sim.plotting.defaults import default_plots, fit_default_plots

    llm = parse_experiment({"workloads": ["llama3-8b"], "topologies": ["tpu-v5p-128", "tpu-v5p-512"],
                            "optimizers": ["adamw"]}, name="llm")
    specs = {p.name: p for p in default_plots(llm)}
    assert specs["mfu"].options["y"] == "mfu" and specs["tokens_per_s"].options["y"] == "tokens_per_s_per_device"
    cnn = parse_experiment({**DOC, "workloads": ["resnet50"]}, name="cnn")
    assert not {"mfu", "tokens_per_s"} & {p.name for p in default_plots(cnn)}
    # drawn when the rows have the values, left out when they have none
    rows = frame.assign(mfu=frame["step_time_s"].rdiv(0.01), tokens_per_s_per_device=frame["step_time_s"].rdiv(1e3))
    kept = {p.name: p for p in fit_default_plots(tuple(specs.values()), rows)}
    assert {"mfu", "tokens_per_s"} <= set(kept)
    fig = draw_figure(kept["mfu"], rows)
    assert any("MFU" in t for t in _all_text(fig))
    plt.close(fig)
    empty = frame.assign(mfu=float("nan"), tokens_per_s_per_device=float("nan"))
    assert not {"mfu", "tokens_per_s"} & {p.name for p in fit_default_plots(tuple(specs.values()), empty)}
