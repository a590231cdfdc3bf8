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
                   help="folder for validation.csv and validation.png (default results/validation)")
    p.add_argument("--calibration", metavar="C",
                   help="'default' (shipped), 'none' (uncalibrated physics) or a calibration YAML path")
    p.add_argument("--measured", metavar="FILE",
                   help="a CSV of your own measured step times (the columns of the shipped table) to validate "
                        "against instead of Google's MLPerf v0.6 and v0.7 runs")
    add_json_option(p)
    add_flag(p, "--plots", default=True, help="draw validation.png (--no-plots: do not)")
    # the old spelling, kept for one release (0.2 drops it)
    p.add_argument("--no-plot", dest="plots", action="store_false", help=argparse.SUPPRESS)
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


def _json_default(x):
    if isinstance(x, float) and math.isnan(x):
        return None
    if hasattr(x, "item"):  # a numpy scalar: bool_ stays a boolean (within_bound), float64 a number
        return x.item()
    return float(x)
