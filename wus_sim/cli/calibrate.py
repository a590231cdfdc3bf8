"""``wus-sim calibrate [--out FILE]``: fit the calibrated chip parameters.

Fits :data:`wus_sim.validation.calibrate.FIT_PARAMS` (or ``--fit`` names others of
``FITTABLE_PARAMS``; a software stack's own values once per stack) to every training-only row
of the shipped tables the simulator can express, with the bound rows as upper bounds, and
writes a calibration file with its provenance (ranges, covariance, the leave-one-benchmark-out
refits). ``--out`` defaults to ``calibration.yaml`` in the working directory; the shipped
defaults are ``wus_sim/data/calibration/default.yaml``, made by this command. ``--rows`` fits
chosen training-only rows instead (a diagnosis, e.g. one benchmark alone); the file says so.
After the fit, the fitted values are validated against every row and the result is printed and
stored in the file (``provenance.validation``). Use a file with ``--calibration FILE`` on
``step``, ``validate`` or as the ``calibration`` key of an experiment point.
"""

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "calibrate", help="fit the calibrated chip parameters to the measured runs",
        description="Fit the matrix-unit efficiency, the elementwise bytes per layer-output element and each "
                    "software stack's fixed cost per op to every "
                    "training-only row of the shipped MLPerf v0.6 and v0.7 tables (bound rows as upper "
                    "bounds); write a calibration file with provenance, ranges and the "
                    "leave-one-benchmark-out error.")
    p.add_argument("--out", metavar="FILE", default="calibration.yaml",
                   help="calibration file to write (default calibration.yaml)")
    p.add_argument("--id", metavar="ID",
                   help="calibration id (default mlperf-v06-v07-tpu-v3-DATE-HASH, or the --measured file's STEM-DATE-HASH: "
                        "HASH, 6 hex digits, names the rows and the fitted values)")
    p.add_argument("--fit", metavar="NAMES",
                   help="comma-separated parameters to fit, of mxu_efficiency, elementwise_fwd_bytes, "
                        "elementwise_bwd_bytes, step_overhead_s, op_overhead_s, and under --compute-model shape "
                        "matmul_peak_fraction, op_fixed_s, activation_hbm_efficiency (default "
                        "mxu_efficiency,elementwise_fwd_bytes,op_overhead_s, "
                        "as shipped; op_overhead_s and step_overhead_s once per software stack)")
    p.add_argument("--compute-model", choices=("flops", "shape"),
                   help="the compute model the fit runs and the file declares: shape (the default, as shipped: "
                        "each matmul padded to the MXU tile; fits matmul_peak_fraction,elementwise_fwd_bytes,"
                        "op_overhead_s unless --fit names others, of those and op_fixed_s, "
                        "activation_hbm_efficiency) or flops (one mxu_efficiency for every matmul's FLOPs)")
    p.add_argument("--measured", metavar="FILE",
                   help="a CSV of your own measured step times (the columns of the shipped table; "
                        "wus_sim/data/validation/README.md) to fit instead of Google's MLPerf v0.6 and v0.7 runs; "
                        "the fit is to its training-only rows (or --rows)")
    p.add_argument("--rows", metavar="KEYS",
                   help="comma-separated rows of the measured tables to fit instead of every one (training-only "
                        "rows, at least as many as fitted parameters), e.g. "
                        "resnet/tpu-v3-128,resnet/tpu-v3-1024")
    return p


def _check_out(path):
    """Refuse an --out the file cannot be written to before the fit runs (it takes seconds)."""
    from ..inputs.files import check_writable_file

    check_writable_file(path, what="calibration file", named_by="--out")


def run(args):
    import sys

    from ..inputs.errors import ConfigError
    from ..validation.calibrate import calibrate, validation_line, write_calibration

    _check_out(args.out)

    calls = [0]

    def progress():
        calls[0] += 1
        if calls[0] % 10 == 0:
            print(f"  {calls[0]} evaluations", file=sys.stderr)

    try:
        cal = calibrate(calibration_id=args.id, progress=progress, fit=args.fit, rows=args.rows,
                        measured=args.measured, compute_model=args.compute_model)
    except ConfigError as exc:
        if exc.file is None and exc.key_path in ("fit", "rows"):
            raise exc.at(f"--{exc.key_path}") from None  # the option the user typed
        raise
    write_calibration(cal, args.out, named_by="--out")  # atomic: a failed write keeps the old file
    prov = cal.provenance
    fit, checked = prov["fit_error"], prov["validation"]
    print(f"calibration {cal.id}: " + ", ".join(f"{k}={v:.4g}" if not isinstance(v, str) else f"{k}={v}" for k, v in cal.params.items()))
    for stack, values in cal.stacks.items():
        print(f"  stack {stack}: " + ", ".join(f"{k}={v:.4g}" for k, v in values.items())
              + (" (default)" if stack == cal.default_stack else ""))
    which = "declared" if prov["rows_declared"] else ("chosen" if args.rows else "training-only")
    exact, bounds = len(fit["per_row"]), len(fit.get("bound_rows") or {})
    print(f"  fit to {exact} {which} rows" + (f" and {bounds} upper bounds" if bounds else "")
          + f" ({', '.join(prov['rows'])}): median |error| {fit['median_abs']:.1%}, worst {fit['worst_abs']:.1%}")
    print("  " + validation_line(checked))
    print(f"wrote {args.out}")
    return 0
