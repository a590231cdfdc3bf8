"""``wus-sim run EXPERIMENT.yaml``: run an experiment's sweep, write results, plots and a summary.

Writes into ``--out`` (default ``results/<experiment stem>``): results.csv and
results.parquet (one row per point and strategy), columns.md/.json (every
column, unit and meaning), config.resolved.yaml, points.jsonl (the resume
journal) and each plot the experiment names as PNG and SVG.
"""

import os
from pathlib import Path
import sys

__all__ = ["add_parser", "run", "summary_table"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "run", help="run an experiment YAML (sweep, results table, plots)",
        description="Run every point of an experiment (experiments/*.yaml) and write results.csv, "
                    "results.parquet, columns.md, config.resolved.yaml and the experiment's plots.")
    p.add_argument("experiment", metavar="EXPERIMENT.yaml", help="experiment file")
    p.add_argument("--out", metavar="DIR", help="output directory (default: results/<experiment stem>)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="worker processes (default: the number of CPUs; 1 = in this process)")
    p.add_argument("--resume", action="store_true",
                   help="skip the points already finished in DIR/points.jsonl (after a kill or crash)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the points on a Dask cluster at ADDRESS (needs the 'dask' extra)")
    p.add_argument("--limit", type=int, metavar="N", help="run only the first N points of the sweep")
    p.add_argument("--reduced", action="store_true",
                   help="run the experiment's reduced form (its 'reduce' filter): a few points")
    p.add_argument("--no-plots", action="store_true", help="do not draw the plots")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary table")
    return p


def run(args):
    from ..experiments.spec import load_experiment

    experiment = load_experiment(args.experiment)
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)  # run_experiment checks it and --limit
    if experiment.plots and not args.no_plots:
        from ..plotting import check_plots

        check_plots(experiment.plots)  # before the run: a typo in a plot must not cost a sweep
    out_dir = Path(args.out) if args.out else Path("results") / Path(args.experiment).stem

    from ..experiments.runner import run_experiment

    result = run_experiment(experiment, out_dir, jobs=jobs, resume=args.resume, scheduler=args.scheduler,
                            reduced=args.reduced, limit=args.limit,
                            progress=False if args.quiet else None)
    written = []
    if experiment.plots and not args.no_plots:
        from ..plotting import save_plots

        written = save_plots(experiment.plots, result.frame, out_dir)
    if not args.quiet:
        print(summary_table(result.frame, experiment.swept_keys()))
        print()
        print(f"{result.num_points} points ({result.num_run} simulated, {result.num_resumed} from the journal) "
              f"in {result.wall_s:.1f} s -> {out_dir}/")
        if result.num_stale:
            print(f"  {result.num_stale} journal entries were made by another version of the model and ran again")
        print("  " + ", ".join([p.name for p in result.files.values()] + sorted({p.name for p in written})))
    if result.num_errors:
        first = result.frame.loc[result.frame["status"] == "error", "error"].iloc[0]
        print(f"wus-sim run: {result.num_errors} rows failed; first: {first}", file=sys.stderr)
        return 1
    return 0


def summary_table(frame, swept_keys, *, max_rows=40):
    """Text table: one line per point with its swept parameters, both step times and the speedup."""
    import pandas as pd

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
    lines = []
    for _, group in frame.groupby("point_index", sort=True):
        row = {k: group[k].iloc[0] for k in keys}
        for strategy in ("replicated", "sharded"):
            srow = group[group["strategy"] == strategy]
            if srow.empty:
                continue
            srow = srow.iloc[0]
            ok = srow["status"] == "ok" and pd.notna(srow.get("step_time_s"))
            row[f"{strategy} [ms]"] = f"{srow['step_time_s'] * 1e3:.3f}" if ok else srow["status"]
        speed = group.loc[group["strategy"] == "sharded", "speedup"] if "speedup" in group else None
        row["speedup"] = (f"{float(speed.iloc[0]):.3f}" if speed is not None and len(speed)
                          and pd.notna(speed.iloc[0]) else "-")
        lines.append(row)
    table = pd.DataFrame(lines)
    for k in keys:
        table[k] = table[k].map(_cell)
    text = table.head(max_rows).to_string(index=False)
    if len(table) > max_rows:
        text += f"\n... {len(table) - max_rows} more points in results.csv"
    return text


def _cell(value):
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return value
