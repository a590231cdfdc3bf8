"""A file given by path is shown by its ``name`` (issue 28, item 2): in the step header, in
legends, subtitles and heatmap ticks; the whole path is never what the reader is shown."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from wus_sim.cli import main  # noqa: E402
from wus_sim.plotting import draw_figure  # noqa: E402

from test_plotting import frame, plot_specs  # noqa: E402,F401  (the fixture and its experiment)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own_workload(tmp_path):
    """resnet50's file under another name, in a folder of its own."""
    path = tmp_path / "deep" / "folder" / "own.yaml"
    path.parent.mkdir(parents=True)
    text = (ROOT / "wus_sim" / "data" / "workloads" / "resnet50.yaml").read_text()
    assert text.count("\nname: resnet50\n") == 1 or text.startswith("name: resnet50\n")
    path.write_text(text.replace("name: resnet50\n", "name: my-resnet\n", 1))
    return path


def test_step_header_names_the_workload_not_its_path(own_workload, capsys):
    assert main(["step", str(own_workload), "-t", "tpu-v3-32", "--steps", "2"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.startswith("step: my-resnet with ") and "deep" not in header


def _texts(fig):
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *(t.get_text() for t in ax.texts)]
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    for legend in fig.legends:
        out += [t.get_text() for t in legend.get_texts()]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return "\n".join(out)


@pytest.mark.parametrize("plot", [
    {"kind": "speedup", "where": {"optimizer": "adam", "link_GBps": 50}},           # legend
    {"kind": "speedup", "where": {"optimizer": "adam", "link_GBps": 50, "workload": "PATH"}},  # subtitle
    {"kind": "heatmap", "x": "workload", "y": "topology", "where": {"optimizer": "adam", "link_GBps": 50}},
])
def test_figures_name_a_workload_given_by_path(frame, own_workload, plot):  # noqa: F811
    df = frame.replace({"workload": {"resnet50": str(own_workload)}})
    if "workload" in plot.get("where", {}):
        plot = {**plot, "where": {**plot["where"], "workload": str(own_workload)}}
    (spec,) = plot_specs([plot])
    fig = draw_figure(spec, df)
    fig.canvas.draw()
    texts = _texts(fig)
    assert "my-resnet" in texts and "deep" not in texts and "own.yaml" not in texts
    plt.close(fig)


def test_run_summary_names_the_workload_not_its_path(frame, own_workload):  # noqa: F811
    from wus_sim.cli.run import summary_table

    text = summary_table(frame.replace({"workload": {"resnet50": str(own_workload)}}), ["workload", "topology"])
    assert "my-resnet" in text and "deep" not in text
