"""``report.html`` (issue 28, item 5): one self-contained page per run. One test parses the page
of a real run and finds every plot and every results row in it; one renders it in headless
Chromium and checks the screenshot is not blank and that every figure has its size on the page
(skipped, saying why, only where no Chromium is installed: .ci/run installs Debian's)."""

import html
from html.parser import HTMLParser
import json
from pathlib import Path
import re
import shutil
import subprocess

import pandas as pd
import pytest

from wus_sim.cli import main

ROOT = Path(__file__).resolve().parents[2]


class _Page(HTMLParser):
    """What a test needs of the page: figures (data-plot, whether an svg is inside, its size
    attributes), table body rows (cell texts), every tag and attribute."""

    def __init__(self):
        super().__init__()
        self.figures, self.rows, self.tags, self.attrs = {}, [], [], []
        self._figure = None
        self._row = None
        self._in_tbody = False
        self._cell = None
        self.ids = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "figure":
            self._figure = a.get("data-plot")
            self.figures[self._figure] = None
        elif tag == "svg" and self._figure is not None and self.figures[self._figure] is None:
            self.figures[self._figure] = (a.get("width"), a.get("height"), a.get("viewbox"))
        elif tag == "tbody":
            self._in_tbody = True
        elif tag == "tr" and self._in_tbody:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "figure":
            self._figure = None
        elif tag == "tbody":
            self._in_tbody = False
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "td" and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart")
    assert main(["run", "quickstart", "--out", str(out), "--jobs", "2", "-q"]) == 0
    return out


def _parse(path):
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_run_writes_one_page_with_every_plot_and_row(run_dir):
    page = _parse(run_dir / "report.html")
    plots = sorted(p.stem for p in run_dir.glob("*.svg"))
    assert plots == ["breakdown", "memory", "speedup"]
    assert sorted(page.figures) == plots
    for name, size in page.figures.items():  # each figure holds its SVG, with a size
        assert size is not None and size[0].endswith("pt") and size[1].endswith("pt") and size[2], name
    frame = pd.read_csv(run_dir / "results.csv")
    assert len(page.rows) == len(frame)
    for cells, (_, row) in zip(page.rows, frame.iterrows()):
        assert cells[0] == str(row["point_index"])
        assert row["strategy"] in cells and row["status"] in cells and row["workload"] in cells
    assert "report.html" in json.loads((run_dir / "run.json").read_text())["files"]
    text = (run_dir / "report.html").read_text()
    assert "mlperf-v06" in text and "model error" in text  # the calibration and its checked error
    assert "wus-sim run quickstart --out" in text  # how to reproduce
    assert "per_replica_batch" in text  # the resolved configuration
    assert len(page.ids) == len(set(page.ids))  # one figure's glyphs never resolve to another's


def test_the_page_loads_nothing_from_anywhere(run_dir):
    page = _parse(run_dir / "report.html")
    assert "script" not in page.tags and "link" not in page.tags and "img" not in page.tags
    for tag, key, value in page.attrs:
        if key in ("src", "href", "xlink:href", "data"):
            assert value.startswith("#"), (tag, key, value)
    assert not re.search(r"url\((?!#)", (run_dir / "report.html").read_text())


def test_rows_that_did_not_run_are_counted_and_named(tmp_path):
    from wus_sim.experiments.spec import parse_experiment
    from wus_sim.plotting.report import render_report

    from test_plotting import DOC, frame as _frame  # noqa: F401

    exp = parse_experiment(DOC, name="x")
    df = pd.DataFrame([
        {"point_index": 0, "workload": "resnet50", "topology": "tpu-v3-32", "strategy": "replicated",
         "status": "ok", "error": "", "step_time_s": 0.1},
        {"point_index": 1, "workload": "transformer-big", "topology": "tpu-v3-32", "strategy": "replicated",
         "status": "infeasible", "error": "needs 20 GiB of HBM, has 16 GiB", "step_time_s": float("nan")},
        {"point_index": 2, "workload": "bert-large", "topology": "tpu-v3-32", "strategy": "sharded",
         "status": "error", "error": "bad bucket", "step_time_s": float("nan")},
    ])
    df["optimizer"] = pd.array([pd.NA] * len(df), dtype="string")  # as results read back hold a missing name
    text = render_report(exp, df)
    section = text[text.index('id="not-ok"'):text.index('id="results"')]
    assert "2 of 3 rows: 1 infeasible, 1 error" in section
    assert "point 1 (transformer-big, tpu-v3-32, replicated): infeasible: needs 20 GiB of HBM, has 16 GiB" in section
    assert "point 2 (bert-large, tpu-v3-32, sharded): error: bad bucket" in section
    assert "step time [ms]" in text and "<td class=\"num\">100</td>" in text  # a unit, and values in it


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


_MEASURE = """<pre id="measured"></pre><script>
document.getElementById("measured").textContent = JSON.stringify(
  Array.from(document.querySelectorAll("figure")).map(f => {
    const r = f.querySelector("svg").getBoundingClientRect();
    return {plot: f.dataset.plot, width: r.width, height: r.height, viewBox: f.querySelector("svg").getAttribute("viewBox")};
  }));
</script></body>"""


def _chromium(browser, *args, timeout=120):
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=1200,2000", *args], capture_output=True, text=True, timeout=timeout)


def screenshot_drawn(page, tmp_path):
    """Headless Chromium's screenshot of *page* is not blank (text and figures on a white page,
    colours drawn); returns the browser (skips, saying why, where none is installed)."""
    browser = _browser()
    if browser is None:
        pytest.skip("no headless Chromium on this machine (.ci/run installs Debian's 'chromium')")
    shot = tmp_path / "page.png"
    _chromium(browser, f"--screenshot={shot}", page.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    ink = (pixels < 0.9).any(axis=-1).mean()
    assert 0.02 < ink < 0.9, ink  # text and figures on a white page
    assert len({tuple(p) for p in (pixels[::7, ::7] * 255).astype(int).reshape(-1, 3)}) > 50  # colours drawn
    return browser


def test_the_page_renders_in_chromium_with_every_figure_sized(run_dir, tmp_path):
    browser = screenshot_drawn(run_dir / "report.html", tmp_path)  # the page as shipped
    # a copy with a measuring script (the page itself has none): each figure's size as laid out
    probe = tmp_path / "probe.html"
    probe.write_text((run_dir / "report.html").read_text().replace("</body>", _MEASURE))
    dom = _chromium(browser, "--dump-dom", probe.as_uri()).stdout
    measured = json.loads(re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    assert sorted(m["plot"] for m in measured) == ["breakdown", "memory", "speedup"]
    for m in measured:
        _, _, w, h = map(float, m["viewBox"].split())
        assert m["width"] > 300 and m["height"] > 150, m
        assert abs(m["width"] / m["height"] - w / h) < 0.02 * (w / h), m  # its own proportions


def test_a_large_sweep_lists_its_first_rows_and_says_where_the_rest_are():
    """200,000 rows would make a page no browser shows: the table and the list of rows that
    did not run stop at MAX_TABLE_ROWS, and the page says how many there are and where."""
    from wus_sim.experiments.spec import parse_experiment
    from wus_sim.plotting.report import MAX_TABLE_ROWS, render_report
    from test_plotting import DOC

    exp = parse_experiment(DOC, name="x")
    n = 2 * MAX_TABLE_ROWS + 500
    df = pd.DataFrame({"point_index": range(n), "workload": "resnet50", "topology": "tpu-v3-32",
                       "strategy": "replicated", "status": ["ok" if i % 2 else "error" for i in range(n)],
                       "error": ["" if i % 2 else f"bad {i}" for i in range(n)], "step_time_s": 0.1})
    page = _Page()
    text = render_report(exp, df)
    page.feed(text)
    assert len(page.rows) == MAX_TABLE_ROWS
    assert f"The first {MAX_TABLE_ROWS:,} of {n:,} rows" in text
    section = text[text.index('id="not-ok"'):text.index('id="results"')]
    assert f"{n // 2} of {n} rows: {n // 2} error" in section
    assert section.count("<li>") == MAX_TABLE_ROWS and "the first 1,000 listed" in section
    small = render_report(exp, df.head(10))
    assert "The first" not in small and "listed" not in small


def _reproduce(path):
    text = path.read_text(encoding="utf-8")
    command = html.unescape(re.search(r'<pre id="reproduce-command">(.*?)</pre>', text, re.S).group(1))
    files = re.search(r'id="files-read">(.*?)</(ul|p)>', text, re.S).group(1)
    return command, html.unescape(files)


def test_the_reproduce_line_carries_the_search_path_and_the_files_a_user_topology_needs(tmp_path, monkeypatch):
    # issue 47: the line left out WUS_SIM_TOPOLOGY_PATH, and without it the slice is an unknown name
    import shlex

    from wus_sim.docs import EXAMPLES

    mine = tmp_path / "my topologies"
    mine.mkdir()
    (mine / "my-v3-8x16.yaml").write_text(EXAMPLES["topology"])
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(mine))
    exp = tmp_path / "mine.yaml"
    exp.write_text("name: mine\nworkloads: [resnet50]\ntopologies: [my-v3-8x16]\noptimizers: [sgd]\n")
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), "-j", "1", "-q", "--no-plots"]) == 0
    command, files = _reproduce(out / "report.html")
    words = shlex.split(command)
    assert words[0] == f"WUS_SIM_TOPOLOGY_PATH={mine}"  # quoted: the folder has a space in its name
    assert words[1:5] == ["wus-sim", "run", str(exp), "--out"]
    assert str(mine / "my-v3-8x16.yaml") in files and str(exp) in files


def test_the_reproduce_line_names_only_the_variables_set():
    from wus_sim.plotting.report import reproduce_command

    env = {"WUS_SIM_WORKLOAD_PATH": "/a:/b c", "WUS_SIM_OPTIMIZER_PATH": "", "HOME": "/root"}
    assert reproduce_command(["wus-sim", "run", "x.yaml"], env) == "WUS_SIM_WORKLOAD_PATH='/a:/b c' wus-sim run x.yaml"
