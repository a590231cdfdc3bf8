"""``report.html``: one self-contained page per run, the answer in one place.

A run leaves a dozen files (results.csv, columns.md, a PNG and an SVG per plot, ...); a reader
who wants the answer opened PNGs one by one beside a CSV. The page holds what they hold: the
experiment and its resolved configuration, the calibration its numbers rest on and the error
that calibration was checked to, every plot (its SVG, inline), the results as a table with
units, the rows that did not run (counted, and each named with why), and the command that
reproduces the run. It loads nothing: no script, no style sheet, font or image from anywhere
(the SVGs are part of the page, their ids made unique per figure so that one figure's glyphs
and clip paths never resolve to another's), so it opens offline, from an e-mail or an archive.
"""

import html
import re

__all__ = ["render_report", "write_report", "reproduce_command", "files_read", "REPORT_NAME", "TABLE_COLUMNS",
           "ENV_PREFIX"]

REPORT_NAME = "report.html"
"""The page's file name in the run folder."""

TABLE_COLUMNS = ("point_index", "workload", "topology", "replicas", "optimizer", "per_replica_batch",
                 "global_batch", "strategy", "status", "step_time_s", "speedup", "mem_peak_bytes")
"""Columns of the page's results table (beside every swept parameter); the rest are in results.csv."""

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px;
       padding: 0 1em; color: #222; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
figure { margin: 1.5em 0; } figure svg { display: block; max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; } td { white-space: nowrap; }
th { text-align: left; background: #f5f5f5; position: sticky; top: 0; } td.num { text-align: right; }
tr.not-ok td { color: #b03030; } pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.note { color: #555; }
"""


ENV_PREFIX = "WUS_SIM_"
"""Environment variables a run reads start so (the search paths: ``WUS_SIM_TOPOLOGY_PATH``,
``WUS_SIM_WORKLOAD_PATH``, ``WUS_SIM_OPTIMIZER_PATH``)."""


def reproduce_command(argv, environ):
    """The shell line that reproduces a run of ``argv`` (``["wus-sim", "run", ...]``): every
    ``WUS_SIM_*`` variable *environ* sets, in front, then the command, each word quoted for a
    POSIX shell. Without the variable a user topology's name is an unknown topology: the line
    left out WUS_SIM_TOPOLOGY_PATH and did not reproduce."""
    import shlex

    env = [f"{name}={shlex.quote(value)}" for name, value in sorted(environ.items())
           if name.startswith(ENV_PREFIX) and value]
    return " ".join(env + [shlex.quote(str(word)) for word in argv])


def files_read(experiment, *, reduced=False, limit=None):
    """The files outside the installed package a run of *experiment* reads: the experiment file,
    and the workload, topology, optimizer, calibration and chips files its points name or find on
    the search paths (:func:`~wus_sim.experiments.runner.user_files`, the files the results'
    model fingerprint hashes). The package's own files come with its version."""
    from pathlib import Path

    from ..experiments.runner import user_files
    from ..inputs.shipped import PACKAGE_DIR

    points = [{key: value} for key in ("workload", "topology", "optimizer", "calibration")
              for value in experiment.values_of(key, reduced=reduced, limit=limit) if isinstance(value, str)]
    found = [Path(experiment.file)] if getattr(experiment, "file", None) else []
    found += user_files(points)
    out = []
    for path in found:
        resolved = Path(path).resolve()
        if PACKAGE_DIR.resolve() in resolved.parents or resolved in out or not resolved.is_file():
            continue
        out.append(resolved)
    return out


def _digest(path):
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except OSError as exc:
        return f"unreadable now: {exc.strerror}"


def _e(text):
    return html.escape(str(text), quote=True)


def _inline_svg(text, prefix):
    """*text* (a matplotlib SVG file) as an element of a page: no XML prolog, doctype or
    metadata, every id prefixed by *prefix* and every reference to one rewritten to match."""
    start = text.find("<svg")
    svg = text[start:] if start >= 0 else text
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r'(href=")#([^"]+)"', lambda m: f'{m.group(1)}#{prefix}{m.group(2)}"' if m.group(2) in ids
                 else m.group(0), svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})" if m.group(1) in ids
                 else m.group(0), svg)
    return svg


def _cell(column, value, scale):
    import pandas as pd

    from .labels import NAMED_KEYS, display_value

    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "", False
    if column in NAMED_KEYS and isinstance(value, str):
        return display_value(column, value), False
    if isinstance(value, bool):
        return str(value).lower(), False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value) * scale
        return (f"{v:.4g}" if not float(v).is_integer() or scale != 1.0 else f"{int(v)}"), True
    return str(value), False


def _table_columns(frame, swept):
    from ..experiments.results import column_label

    names = []
    for c in (*TABLE_COLUMNS[:1], *swept, *TABLE_COLUMNS[1:]):
        if c in frame.columns and c not in names:
            names.append(c)
    return [(c, *column_label(c)) for c in names]


MAX_TABLE_ROWS = 1000
"""Rows the page lists at most, in its results table and in its list of rows that did not run:
a sweep of 100,000 points has 200,000 rows, a page of hundreds of megabytes that no browser
shows; results.csv and results.parquet hold every row."""


def _not_ok(frame):
    """``(counts by status, [line per row])`` of the rows that did not run (the first
    :data:`MAX_TABLE_ROWS` written out)."""
    import pandas as pd

    from .labels import NAMED_KEYS, display_value

    if "status" not in frame.columns:
        return {}, []
    bad = frame[frame["status"] != "ok"]
    counts = bad["status"].value_counts().to_dict()
    lines = []
    for _, row in bad.head(MAX_TABLE_ROWS + 1).iterrows():
        what = ", ".join(display_value(k, row[k]) if k in NAMED_KEYS else str(row[k])
                         for k in ("workload", "topology", "optimizer", "strategy") if k in row and bool(pd.notna(row[k])))
        lines.append(f"point {row.get('point_index', '?')} ({what}): {row['status']}"
                     + (f": {row['error']}" if isinstance(row.get("error"), str) and row["error"] else ""))
    return counts, lines


def render_report(experiment, frame, *, figures=(), skipped=(), resolved=None, calibration_lines=(),
                  command="", summary="", version="", files=()):
    """The page as a string.

    *figures*: ``[(plot name, kind, SVG text)]``; *skipped*: ``[(plot name, why)]``; *resolved*:
    the run's resolved configuration (YAML text); *calibration_lines*: the model-error lines of
    each calibration the points used; *command*: what reproduces the run (:func:`reproduce_command`);
    *files*: the files outside the package it read (:func:`files_read`), listed with a digest of
    each; *summary*: one line of counts and time.
    """
    swept = [k for k in experiment.swept_keys() if k != "strategy"]
    title = f"wus-sim: {experiment.name}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{_e(experiment.name)}</h1>"]
    if experiment.description:
        out.append(f"<p>{_e(experiment.description)}</p>")
    counts, bad_lines = _not_ok(frame)
    points = frame["point_index"].nunique() if "point_index" in frame.columns else len(frame)
    out.append('<section id="summary"><h2>Summary</h2><ul>')
    if summary:
        out.append(f"<li>{_e(summary)}</li>")
    out.append(f"<li>{points} points, {len(frame)} rows (one per point and strategy)"
               + (f"; swept: {_e(', '.join(swept))}" if swept else "") + "</li>")
    ok = int((frame["status"] == "ok").sum()) if "status" in frame.columns else len(frame)
    out.append(f'<li id="row-counts">{ok} rows ok' + "".join(f", {n} {_e(s)}" for s, n in counts.items())
               + "</li>")
    if version:
        out.append(f"<li>wus-sim {_e(version)}</li>")
    out.append("</ul></section>")
    out.append('<section id="calibration"><h2>Calibration and model error</h2><ul>')
    out.extend(f"<li>{_e(line.strip())}</li>" for line in calibration_lines)
    out.append("</ul></section>")

    out.append('<section id="plots"><h2>Plots</h2>')
    if not figures and not skipped:
        out.append('<p class="note">No plots were drawn (--no-plots).</p>')
    for i, (name, kind, svg) in enumerate(figures):
        out.append(f'<figure id="plot-{_e(name)}" data-plot="{_e(name)}">{_inline_svg(svg, f"f{i}-")}'
                   f"<figcaption>{_e(name)} ({_e(kind)}); also {_e(name)}.png and {_e(name)}.svg</figcaption>"
                   "</figure>")
    for name, why in skipped:
        out.append(f'<p class="note skipped" data-plot="{_e(name)}">plot {_e(name)} not drawn: {_e(why)}</p>')
    out.append("</section>")

    out.append('<section id="not-ok"><h2>Rows that did not run</h2>')
    if bad_lines:
        out.append(f"<p>{sum(counts.values())} of {len(frame)} rows: "
                   + ", ".join(f"{n} {_e(s)}" for s, n in counts.items())
                   + (f" (the first {MAX_TABLE_ROWS:,} listed; the status and error columns of results.csv "
                      "have them all)" if len(bad_lines) > MAX_TABLE_ROWS else "") + "</p><ul>")
        out.extend(f"<li>{_e(line)}</li>" for line in bad_lines[:MAX_TABLE_ROWS])
        out.append("</ul>")
    else:
        out.append("<p>None: every row ran.</p>")
    out.append("</section>")

    cols = _table_columns(frame, swept)
    out.append('<section id="results"><h2>Results</h2><p class="note">One row per point and strategy; every '
               "column, with its unit and meaning, is in results.csv and columns.md.</p>")
    if len(frame) > MAX_TABLE_ROWS:
        out.append(f'<p class="note" id="rows-shown">The first {MAX_TABLE_ROWS:,} of {len(frame):,} rows; '
                   "results.csv and results.parquet hold them all.</p>")
    out.append('<table id="results-table"><thead><tr>' + "".join(f"<th>{_e(label)}</th>" for _, label, _ in cols)
               + "</tr></thead><tbody>")
    for _, row in frame.head(MAX_TABLE_ROWS).iterrows():
        klass = "" if row.get("status", "ok") == "ok" else ' class="not-ok"'
        cells = []
        for c, _, scale in cols:
            text, numeric = _cell(c, row[c], scale)
            cells.append(f'<td class="num">{_e(text)}</td>' if numeric else f"<td>{_e(text)}</td>")
        out.append(f"<tr{klass}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></section>")

    out.append('<section id="reproduce"><h2>How to reproduce</h2>')
    out.append(f'<pre id="reproduce-command">{_e(command)}</pre><p class="note">The same wus-sim version and '
               "calibration give the same numbers; config.resolved.yaml (below) spells out every default the "
               "points ran with.</p>")
    if files:
        out.append('<p>The files it read besides the package\'s own (sha256, first 12 digits; the same files give '
                   'the same numbers):</p><ul id="files-read">')
        out.extend(f"<li><code>{_e(path)}</code> ({_e(_digest(path))})</li>" for path in files)
        out.append("</ul>")
    else:
        out.append('<p class="note" id="files-read">It read no file besides the package\'s own.</p>')
    out.append("</section>")
    if resolved:
        out.append(f'<section id="config"><h2>Resolved configuration</h2><pre>{_e(resolved)}</pre></section>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(path, experiment, frame, **kwargs):
    """Write :func:`render_report` to *path* through a rename (a kill never leaves half a page)."""
    from ..inputs.writes import write_atomic

    return write_atomic(path, render_report(experiment, frame, **kwargs), what="report")
