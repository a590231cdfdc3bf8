"""``wus-sim calibrate [--out FILE]``: fit the calibrated chip parameters.

Fits at most four global chip parameters (:data:`wus_sim.validation.calibrate.FIT_PARAMS`,
or ``--fit`` names others of ``FITTABLE_PARAMS``)
on the declared calibration rows (:data:`wus_sim.validation.calibrate.CALIBRATION_ROWS`,
at most two slices per benchmark, picked by :func:`~wus_sim.validation.calibrate.rule_rows`)
of the measured table and writes a calibration
file with its provenance. ``--out`` defaults to ``calibration.yaml`` in the working
directory; the shipped defaults are ``wus_sim/data/calibration/default.yaml``, made
by this command. ``--rows`` fits other training-only rows of the table instead of the
declared ones (a diagnosis, e.g. one benchmark alone); the file says so. After the fit,
the fitted values are validated against every row and the result is printed and stored
in the file (``provenance.validation``). Use a file with ``--calibration FILE`` on ``step``, ``validate``
or as the ``calibration`` key of an experiment point.
"""

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "calibrate", help="fit the calibrated chip parameters to the declared measured runs",
        description="Fit matrix-unit efficiency, elementwise HBM traffic (forward, backward) and the "
                    "per-step fixed cost to the declared calibration rows; write a calibration file "
                    "with provenance.")
    p.add_argument("--out", metavar="FILE", default="calibration.yaml",
                   help="calibration file to write (default calibration.yaml)")
    p.add_argument("--id", metavar="ID",
                   help="calibration id (default mlperf-v06-tpu-v3-DATE-HASH, or the --measured file's STEM-DATE-HASH: "
                        "HASH, 6 hex digits, names the rows and the fitted values)")
    p.add_argument("--fit", metavar="NAMES",
                   help="comma-separated parameters to fit, at most 4 of mxu_efficiency, elementwise_fwd_bytes, "
                        "elementwise_bwd_bytes, step_overhead_s, op_overhead_s (default: the first four, as shipped)")
    p.add_argument("--measured", metavar="FILE",
                   help="a CSV of your own measured step times (the columns of the shipped table; "
                        "wus_sim/data/validation/README.md) to fit instead of Google's MLPerf v0.6 runs; "
                        "the fit is to its training-only rows (or --rows)")
    p.add_argument("--rows", metavar="KEYS",
                   help="comma-separated benchmark/topology rows of the measured table to fit instead of the "
                        "declared ones (training-only rows, at least as many as fitted parameters), e.g. "
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
                        measured=args.measured)
    except ConfigError as exc:
        if exc.file is None and exc.key_path in ("fit", "rows"):
            raise exc.at(f"--{exc.key_path}") from None  # the option the user typed
        raise
    try:
        write_calibration(cal, args.out)
    except OSError as exc:  # the folder went away, or a disk filled, during the fit
        raise ConfigError(f"cannot be written: {exc.strerror or exc}", file=args.out, key_path="--out") from None
    prov = cal.provenance
    fit, checked = prov["fit_error"], prov["validation"]
    print(f"calibration {cal.id}: " + ", ".join(f"{k}={v:.4g}" for k, v in cal.params.items()))
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
