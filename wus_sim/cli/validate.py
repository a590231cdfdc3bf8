"""``wus-sim validate``: measured vs simulated step time for every measured run.

Simulates every row of the measured tables (Google's MLPerf v0.6 and v0.7 TPU-v3 runs,
``wus_sim/data/validation``) with the shipped defaults, prints measured and
simulated step time and per-chip throughput with the error per row, calibration
rows marked apart from held-out ones and bound rows checked as bounds, then the
held-out median and worst |error|. Writes ``validation.csv`` and a parity plot
``validation.png`` to ``--out`` (default ``results/validation``). ``--json`` prints
the rows as a list (keys: :data:`wus_sim.validation.validate.COLUMNS`, among them
benchmark, topology, kind, role, measured_step_s, simulated_step_s, error).
``--choices`` instead prints the fit under each disputed network choice
(:mod:`wus_sim.validation.choices`), under the shipped calibration and refitted under
the choice (about 40 s).
"""

import argparse
import math

from ..inputs.strict_json import dumps_strict, nan_to_null
from .options import add_flag, add_json_option

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "validate", help="compare simulated with measured step times (MLPerf v0.6 and v0.7 TPU-v3 runs)",
        description="Simulate every measured run with the shipped defaults and report the error per row.")
    p.add_argument("--out", metavar="DIR", default="results/validation",
                   help="folder for validation.csv and validation.png (--tiering: tiering.csv and tiering.png; "
                        "default results/validation)")
    p.add_argument("--calibration", metavar="C",
                   help="'default' (shipped), 'none' (uncalibrated physics) or a calibration YAML path")
    p.add_argument("--measured", metavar="FILE",
                   help="a CSV of your own measured step times (the columns of the shipped table) to validate "
                        "against instead of Google's MLPerf v0.6 and v0.7 runs")
    add_json_option(p)
    add_flag(p, "--plots", default=True, help="draw validation.png (tiering.png; --no-plots: do not)")
    # the old spelling, kept for one release (0.2 drops it)
    p.add_argument("--no-plot", dest="plots", action="store_false", help=argparse.SUPPRESS)
    add_flag(p, "--tiering",
             help="instead, today's LLM runs: the measured rows of MaxText's tiering page (v5p, v6e), each "
                  "simulated from its recipe, written to tiering.csv with their errors (tiering.png draws "
                  "them); --json prints them as a list (keys: wus_sim.validation.tiering.TIERING_COLUMNS)")
    add_flag(p, "--choices",
                   help="instead, validate under each disputed network choice (link bandwidth, ring "
                        "direction, wraparound, hop latency, small all-reduces) and print the fit of each as a "
                        "table: under the shipped calibration, and refitted under the choice itself")
    return p


def run(args):
    from pathlib import Path

    from ..validation.report import text_report, write_outputs
    from ..validation.measured import table_identity
    from ..validation.validate import as_dicts, summary, validate

    if args.choices:
        import sys

        from ..model.calibration import load_calibration
        from ..inputs.errors import ConfigError
        from ..validation.choices import CHOICES, choices_table, compare_choices

        if args.measured:
            raise ConfigError("compares the network choices on the shipped table only", key_path="--choices",
                              value=args.measured)
        calibration = load_calibration(args.calibration)  # a bad one fails before the first choice runs
        results = []
        for i, choice in enumerate(CHOICES, 1):  # a few seconds each: the refit simulates the fit's rows
            print(f"  choice {i}/{len(CHOICES)}: {choice.label}", file=sys.stderr)
            results += compare_choices(calibration, choices=(choice,), refit=True)
        print(choices_table(results))
        return 0
    if args.tiering:
        return _tiering(args)
    from ..inputs.files import check_output_folder

    check_output_folder(args.out, named_by="--out")  # before the simulation: known now, not in 40 s
    rows = validate(args.calibration, measured=args.measured)
    out = Path(args.out)
    files = write_outputs(rows, out, plot=args.plots)
    if args.json:
        print(dumps_strict(nan_to_null(as_dicts(rows)), indent=1, default=_json_default))
    else:
        print(text_report(rows, summary(rows), table=table_identity(args.measured)["name"]))
        print("wrote " + ", ".join(str(f) for f in files))
    return 0


def _tiering(args):
    from ..validation.tiering import as_dicts, simulate_tiering, tiering_summary, TIERING_COLUMNS

    if args.measured:
        from ..inputs.errors import ConfigError

        raise ConfigError("the tiering table is shipped; --measured takes a table of MLPerf-like rows",
                          key_path="--tiering", value=args.measured)
    from pathlib import Path

    from ..inputs.files import check_output_folder
    from ..model.calibration import load_calibration
    from ..validation.tiering_report import write_tiering_outputs

    check_output_folder(args.out, named_by="--out")  # before the simulation
    results = simulate_tiering(args.calibration)
    files = write_tiering_outputs(results, Path(args.out), plot=args.plots,
                                  calibration_id=load_calibration(args.calibration).id)
    if args.json:
        rows = [{k: r[k] for k in TIERING_COLUMNS} for r in as_dicts(results)]
        print(dumps_strict(nan_to_null(rows), indent=1, default=_json_default))
        return 0
    print(tiering_text(results, tiering_summary(results)))
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def tiering_text(results, summary):
    """The tiering rows as a table: measured and simulated tokens/s/device and MFU, the error."""
    def f(x, fmt):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)

    fitted = sum(r.role == "calibration" for r in results)
    lines = ["Today's LLM runs: MaxText's tiering page (AI-Hypercomputer/maxtext, docs/reference/models/tiering.md), "
             "each row simulated from its recipe; "
             + (f"the calibration was fitted to {fitted} of them (role calibration), and LOMO is each row's error "
                "under a fit that never saw its model" if fitted else "none of them in the calibration's fit (held out)"),
             f"{'row':>3}  {'model':<15} {'slice':<15} {'mesh':<18} {'batch':>5} {'remat run':<34} "
             f"{'tok/s/dev meas':>14} {'sim':>7} {'error':>7} {'LOMO':>7} {'MFU meas':>8} {'sim':>6} {'band s':>13} "
             f"{'vs band':>7} {'LOMO':>7}  role         status"]
    for r in results:
        where = r.topology + (f" x{r.slices}" if r.slices > 1 else "")
        mesh = r.mesh + (f" dcn {r.dcn_mesh}" if r.dcn_mesh else "")
        lines.append(f"{r.row:>3}  {r.model:<15} {where:<15} {mesh:<18} {r.per_device_batch:>5} {r.remat_run[:34]:<34} "
                     f"{f(r.measured_tokens_per_s_per_device, ',.0f'):>14} {f(r.simulated_tokens_per_s_per_device, ',.0f'):>7} "
                     f"{f(100 * r.error, '+.1f') + ' %' if not math.isnan(r.error) else '-':>7} "
                     f"{f(100 * r.lomo_error, '+.1f') + ' %' if not math.isnan(r.lomo_error) else '-':>7} "
                     f"{f(100 * r.measured_mfu, '.1f'):>8} {f(100 * r.simulated_mfu, '.1f'):>6} "
                     f"{_band(r):>13} {_pct(r.band_error):>7} {_pct(r.lomo_band_error):>7}  {r.role:<12} {r.status}")
    for r in results:
        if r.status != "ok" and r.why:
            lines.append(f"  row {r.row}: {r.status}: {r.why}")
    if summary.get("rows"):
        lines.append(f"over the {summary['rows']} rows simulated to a time: median |error| "
                     f"{100 * summary['median_abs_error']:.1f} %, worst {100 * summary['worst_abs_error']:.1f} %, "
                     f"{summary['within_10pct']} within 10 %; said not to fit: {summary['infeasible']} (every one ran); "
                     f"not expressible yet: {summary['not_expressible']}")
        lines.append("per chip generation: " + _per_chip(summary["by_chip"]))
    lomo = summary.get("leave_one_model_out")
    if lomo:
        lines.append(f"leave-one-model-out (each model predicted by a fit that never saw it): {lomo['rows']} rows, "
                     f"median |error| {100 * lomo['median_abs_error']:.1f} %, worst {100 * lomo['worst_abs_error']:.1f} %, "
                     f"{lomo['within_10pct']} within 10 %, {lomo['rows'] - lomo['within_20pct']} over 20 %; "
                     "per chip generation: " + _per_chip(lomo["by_chip"]))
    band, lomo_band = summary.get("against_band"), (lomo or {}).get("against_band")
    if band:
        lines.append(f"against each row's measured band: median |error| {100 * band['median_abs_error']:.1f} %, worst "
                     f"{100 * band['worst_abs_error']:.1f} %"
                     + (f"; leave-one-model-out: median {100 * lomo_band['median_abs_error']:.1f} %, worst "
                        f"{100 * lomo_band['worst_abs_error']:.1f} %, {lomo_band['rows'] - lomo_band['within_20pct']} "
                        "over 20 %" if lomo_band else ""))
    lines.append("error: simulated step time over measured, from tokens/s/device; the page's MFU counts attention "
                 "unhalved on most rows (before MaxText PR #1988), the simulated MFU halves it for causal masks")
    lines.append("band s: the step times the page's tokens/s and its MFU give (MaxText's FLOP count under the "
                 "convention nearer the tokens/s); vs band: the error against that interval, 0 inside it")
    wide = [r for r in results if r.band_width > 0.02]
    for r in wide:
        lines.append(f"  row {r.row}: the page's two figures are {100 * r.band_width:.1f} % apart "
                     f"(MFU under {r.mfu_convention}): its step is known only to that band")
    return "\n".join(lines)


def _pct(x):
    return "-" if x is None or math.isnan(x) else f"{100 * x:+.1f} %"


def _band(r):
    lo, hi = r.measured_band_s
    return f"{lo:.3g}-{hi:.3g}" if not math.isnan(lo) else "-"


def _per_chip(by_chip):
    return "; ".join(f"{chip}: {c['rows']} rows, median {100 * c['median_abs_error']:.1f} %, worst "
                     f"{100 * c['worst_abs_error']:.1f} %" for chip, c in by_chip.items())


def _json_default(x):
    if isinstance(x, float) and math.isnan(x):
        return None
    if hasattr(x, "item"):  # a numpy scalar: bool_ stays a boolean (within_bound), float64 a number
        return x.item()
    return float(x)
