"""``wus-sim run EXPERIMENT.yaml``: run an experiment's sweep, write results, plots and a summary.

Writes into ``--out`` (default ``results/<experiment stem>``): results.csv and
results.parquet (one row per point and strategy), columns.md/.json (every
column, unit and meaning), config.resolved.yaml, points.jsonl (the resume
journal), each plot the experiment names as PNG and SVG, and report.html: the run on one
self-contained page (:mod:`wus_sim.plotting.report`).
"""

import os
from pathlib import Path
import sys

from .options import add_flag

__all__ = ["add_parser", "run", "summary_table"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "run", help="run an experiment YAML (sweep, results table, plots)",
        description="Run every point of an experiment (experiments/*.yaml) and write results.csv, "
                    "results.parquet, columns.md, config.resolved.yaml and the experiment's plots.")
    p.add_argument("experiment", metavar="EXPERIMENT.yaml",
                   help="experiment file, or a shipped experiment's name (wus-sim list experiments)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: results/<experiment stem>)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="worker processes (default: the number of CPUs; 1 = in this process)")
    add_flag(p, "--resume",
                   help="skip the points already finished in DIR/points.jsonl (after a kill or crash)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the points on a Dask cluster at ADDRESS (needs the 'dask' extra)")
    p.add_argument("--scheduler-timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for the --scheduler to answer (default 5)")
    p.add_argument("--limit", type=int, metavar="N", help="run only the first N points of the sweep")
    add_flag(p, "--reduced",
                   help="run the experiment's reduced form (its 'reduce' filter): a few points")
    add_flag(p, "--overwrite",
                   help="replace the results of another experiment held in DIR (refused otherwise)")
    add_flag(p, "--plots", default=True,
             help="draw the experiment's plots (--no-plots: do not; their options are still checked)")
    add_flag(p, "--quiet", "-q", help="no progress bar and no summary table")
    return p


def run(args):
    from ..inputs.errors import ConfigError
    from ..experiments.spec import load_experiment

    if args.resume and args.overwrite:
        # --resume keeps the journal, --overwrite starts over: together one was silently dropped.
        raise ConfigError("cannot be given with --resume: --resume continues the run in DIR, --overwrite "
                          "starts over; give one of them", key_path="--overwrite")
    experiment = load_experiment(args.experiment)
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)  # run_experiment checks it and --limit
    from ..plotting import check_plots, default_plots

    plots = experiment.plots or default_plots(experiment)  # no `plots:`: the defaults, never nothing
    check_plots(plots, experiment)  # before the run, also under --no-plots: a typo must not cost a sweep
    out_dir = Path(args.out) if args.out else Path("results") / Path(args.experiment).stem

    from ..experiments.dask_points import SchedulerLost
    from ..experiments.runner import run_experiment

    written = []

    def draw(result):  # while the folder is still locked: plots belong to this run's results
        skips = []
        nonlocal plots
        if not experiment.plots:  # the defaults show what the results have values for (never an empty panel)
            from ..plotting.defaults import fit_default_plots

            plots = fit_default_plots(plots, result.frame)
        if plots and args.plots:
            from ..inputs.text import excerpt, short_repr
            from ..plotting import save_plots

            written.extend(save_plots(plots, result.frame, out_dir, on_skip=lambda plot, why: skips.append((plot, why)),
                                      chosen=set(experiment.base)))
            # one line per skipped plot while they are few; one summary line beyond that (a
            # --limit run of a many-plot experiment would otherwise flood the console)
            if len(skips) <= 2:
                for plot, why in skips:
                    print(f"wus-sim run: warning: plot {short_repr(plot.name)} skipped: {excerpt(why, 300)}",
                          file=sys.stderr)
            else:
                names = ", ".join(short_repr(plot.name) for plot, _ in skips)
                print(f"wus-sim run: warning: {len(skips)} plots skipped ({excerpt(names, 200)}); first: "
                      f"{excerpt(skips[0][1], 200)}", file=sys.stderr)
        written.append(_write_report(args, experiment, plots, result, out_dir, written, skips))
        return written

    try:
        # (the summary too: a signal while it prints is the same one line, not a kill by SIGTERM)
        with _sigterm_as_interrupt():
            timeout = {} if args.scheduler_timeout is None else {"scheduler_timeout": args.scheduler_timeout}
            result = run_experiment(experiment, out_dir, jobs=jobs, resume=args.resume, scheduler=args.scheduler,
                                    **timeout, reduced=args.reduced, limit=args.limit, overwrite=args.overwrite,
                                    progress=False if args.quiet else None, on_results=draw)
            if not args.quiet:
                _print_summary(experiment, result, args, out_dir, written)
    except (KeyboardInterrupt, SchedulerLost) as exc:
        # (a lost --scheduler is an interruption too: the finished points are journaled, the
        # others run again on --resume, here or on another cluster)
        # the run is stopping: a further SIGINT must not raise again. One arriving after this line
        # and before main ignores SIGINT escaped main and killed the interpreter (exit -2 after the
        # resume hint: tests/cli/test_signals.py, about 1 run in 10 under load; where the second
        # signal comes from is not found). main's own handler does the same while it prints.
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # --overwrite cannot go with --resume (and its work is done: the folder is this run's now)
        again = [a for a in sys.argv[1:] if a not in ("--resume", "--overwrite")] if sys.argv[1:2] == ["run"] \
            else None
        where = ""
        if isinstance(exc, SchedulerLost):  # that address answers no more: here, or on a cluster that runs
            again = _without_scheduler(again) if again else again
            where = " (here, or on a running cluster with --scheduler ADDRESS)"
        hint = ("wus-sim " + " ".join(_quote(a) for a in again) + " --resume") if again else \
            f"wus-sim run {_quote(args.experiment)} --out {_quote(str(out_dir))} --resume"
        why = f" ({exc})" if isinstance(exc, SchedulerLost) else ""
        print(f"wus-sim run: interrupted{why}; finished points are kept in {out_dir}/points.jsonl. "
              f"Resume with: {hint}{where}", file=sys.stderr)
        return 130
    if result.num_errors:
        from ..inputs.text import excerpt

        first = result.frame.loc[result.frame["status"] == "error", "error"].iloc[0]
        n = result.num_errors
        print(f"wus-sim run: {n} row{'s' if n != 1 else ''} failed; first: {excerpt(first, 300)}", file=sys.stderr)
        return 1
    return 0


def _print_summary(experiment, result, args, out_dir, written):
    """What a run prints when it ends: its first points, the count, the model's error, the files."""
    print(summary_table(result.frame, experiment.swept_keys()))
    print()
    print(f"{result.num_points} points ({result.num_run} simulated, {result.num_resumed} from the journal) "
          f"in {result.wall_s:.1f} s -> {out_dir}/")
    for line in _model_error_lines(experiment, result.frame, reduced=args.reduced, limit=args.limit):
        print(line)
    if result.num_stale:
        print(f"  {result.num_stale} journal entries were made by another version of the model and ran again")
    print("  " + ", ".join([p.name for p in result.files.values()] + sorted({p.name for p in written})))


def _write_report(args, experiment, plots, result, out_dir, written, skips):
    """``DIR/report.html``: the run on one page (:mod:`wus_sim.plotting.report`)."""
    import wus_sim
    from ..plotting.report import REPORT_NAME, files_read, reproduce_command, write_report

    drawn = {p.name for p in written if p.suffix == ".svg"}
    figures = [(plot.name, plot.kind, (out_dir / f"{plot.name}.svg").read_text(encoding="utf-8"))
               for plot in plots if f"{plot.name}.svg" in drawn]
    resolved = out_dir / "config.resolved.yaml"
    command = reproduce_command(["wus-sim", "run", args.experiment, "--out", str(out_dir)]
                                + (["--reduced"] if args.reduced else []) + (["--limit", args.limit] if args.limit else []),
                                os.environ)
    summary = (f"{result.num_points} points ({result.num_run} simulated, {result.num_resumed} from the journal) "
               f"in {result.wall_s:.1f} s")
    return write_report(out_dir / REPORT_NAME, experiment, result.frame, figures=figures,
                        skipped=[(plot.name, why) for plot, why in skips],
                        resolved=resolved.read_text(encoding="utf-8") if resolved.is_file() else None,
                        calibration_lines=_model_error_lines(experiment, result.frame, reduced=args.reduced,
                                                             limit=args.limit),
                        command=command, summary=summary, version=wus_sim.__version__,
                        files=files_read(experiment, reduced=args.reduced, limit=args.limit))


def _model_error_lines(experiment, frame, *, reduced, limit):
    """One line per calibration the points ran with: the error its numbers were checked to, stated
    only for the rows inside its validated range (the error was measured there and nowhere else);
    where no row is inside, why instead. Read from the results' columns and the experiment's axes
    (a 100,000-point run is not expanded or turned into dicts again)."""
    from ..model.calibration import load_calibration
    from ..validation.calibrate import model_error_line

    lines = []
    for name in sorted(experiment.values_of("calibration", reduced=reduced, limit=limit), key=str):
        cal = load_calibration(name)
        checked = cal.provenance.get("validation") if cal.provenance else None
        line = model_error_line(checked if isinstance(checked, dict) else None, cal.id, name_calibration=True)
        ok = _rows_of(frame, cal.id)
        inside = int(ok["inside_validated_range"].map(lambda v: v is True).sum()) if len(ok) else 0
        if isinstance(checked, dict) and len(ok) and not inside:
            reasons = sorted({why for text in ok["outside_validated_range"].unique()
                              for why in str(text if isinstance(text, str) else "").split("; ") if why})
            line = (f"model error (calibration {cal.id}): none stated: none of the {len(ok)} rows lies inside "
                    f"the range it was checked on ({'; '.join(reasons[:3])}"
                    + (f"; {len(reasons) - 3} more reasons" if len(reasons) > 3 else "") + ")")
        elif isinstance(checked, dict) and inside < len(ok):
            line += (f" -- applies to the {inside} of {len(ok)} rows inside the range it was checked on "
                     "(inside_validated_range); the others are outside it (outside_validated_range says why)")
        lines.append("  " + line)
    if experiment.values_of("mxu_efficiency", reduced=reduced, limit=limit) - {None}:
        lines.append("  points that set mxu_efficiency override a fitted value: the error above does not apply to them")
    return lines


def _rows_of(frame, calibration_id):
    """The simulated rows (status ok) of *frame* that ran with *calibration_id* (a frame; empty
    when there are none)."""
    import pandas as pd

    if frame is None or frame.empty or "calibration" not in frame.columns:
        return pd.DataFrame({"inside_validated_range": [], "outside_validated_range": []})
    return frame[(frame["calibration"] == calibration_id) & (frame["status"] == "ok")]


def _without_scheduler(argv):
    """*argv* without its ``--scheduler ADDRESS`` and ``--scheduler-timeout S`` (either as one
    ``--option=value`` word or two words)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--scheduler", "--scheduler-timeout"):
            skip = True
        elif not word.startswith(("--scheduler=", "--scheduler-timeout=")):
            out.append(word)
    return out


def _quote(text):
    import shlex

    return shlex.quote(text)


class _sigterm_as_interrupt:
    """SIGTERM handled like Ctrl-C while the sweep runs: workers stopped, resume hint printed."""

    def __enter__(self):
        import signal

        def handler(signum, frame):
            raise KeyboardInterrupt

        try:
            self._old = signal.signal(signal.SIGTERM, handler)
        except ValueError:  # not the main thread (e.g. called from a test's thread)
            self._old = None
        return self

    def __exit__(self, *exc):
        import signal

        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        return False


def summary_table(frame, swept_keys, *, max_rows=40):
    """Text table: one line per point with its swept parameters, each strategy's step time and
    the speedup (sharded over replicated; with fully-sharded rows, its speedup too); the first
    *max_rows* points, then how many more there are."""
    import numpy as np
    import pandas as pd

    from ..training.update.strategies import STRATEGIES

    if frame.empty:
        return "(no points)"
    keys = [k for k in swept_keys if k in frame.columns and k != "strategy"]
    if not keys:
        keys = [k for k in ("workload", "topology") if k in frame.columns]
    if "topology" in keys and "replicas" in frame.columns:
        keys.insert(keys.index("topology") + 1, "replicas")
    # Batches the simulator resolved (MLPerf run's, or global / replicas) say what ran.
    for k in ("per_replica_batch", "global_batch"):
        if k in frame.columns and k not in keys and frame[k].nunique(dropna=True) > 1:
            keys.append(k)
    # only the points shown are tabulated: a sweep of 100,000 points grouped row by row took minutes
    points = np.sort(frame["point_index"].unique())
    more = len(points) - max_rows
    if more > 0:
        frame = frame[frame["point_index"].isin(points[:max_rows])]
    lines = []
    for _, group in frame.groupby("point_index", sort=True):
        row = {k: group[k].iloc[0] for k in keys}
        for strategy in STRATEGIES:
            srow = group[group["strategy"] == strategy]
            if srow.empty:
                continue
            srow = srow.iloc[0]
            ok = srow["status"] == "ok" and pd.notna(srow.get("step_time_s"))
            row[f"{strategy} [ms]"] = f"{srow['step_time_s'] * 1e3:.3f}" if ok else srow["status"]
        for strategy, column in (("sharded", "speedup"), ("fully-sharded", "fully-sharded speedup")):
            if strategy == "fully-sharded" and not (group["strategy"] == strategy).any():
                continue
            row[column] = _speedup_cell(group[group["strategy"] == strategy])
        if "speedup_over_sharded" in group and group["speedup_over_sharded"].notna().any():
            row["fully-sharded over sharded"] = f"{float(group['speedup_over_sharded'].dropna().iloc[0]):.3f}"
        lines.append(row)
    table = pd.DataFrame(lines)
    from ..experiments.display import NAMED_KEYS, display_value

    for k in keys:
        # a file given by path is shown by its name, as in the figures
        table[k] = table[k].map(lambda v, k=k: display_value(k, v) if k in NAMED_KEYS and isinstance(v, str)
                                else _cell(v))
    text = table.to_string(index=False)
    if more > 0:
        text += f"\n... {more} more points in results.csv"
    if any(str(v).endswith("*") for column in table.columns if "speedup" in column for v in table[column]):
        text += "\n* replicated does not fit in HBM: the speedup if it did (capacity ignored), as step prints it"
    return text


def _speedup_cell(rows):
    """The speedup column of one strategy's row: the speedup, else the speedup if replicated fit
    in HBM, marked ``*`` (as ``step`` prints it), else ``-``."""
    import pandas as pd

    if rows.empty:
        return "-"
    row = rows.iloc[0]
    if pd.notna(row.get("speedup")):
        return f"{float(row['speedup']):.3f}"
    if row.get("status") == "ok" and pd.notna(row.get("speedup_if_replicated_fit")):
        return f"{float(row['speedup_if_replicated_fit']):.3f}*"
    return "-"


def _cell(value):
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return value
