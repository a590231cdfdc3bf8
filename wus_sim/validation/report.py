"""Validation outputs: the text table, validation.csv and the parity plot."""

from dataclasses import asdict
import math
import os

from .validate import COLUMNS

__all__ = ["text_report", "markdown_table", "make_output_folder", "write_outputs", "plot_validation", "validation_line", "model_error_line"]


def _ms(t):
    return "-" if t is None or (isinstance(t, float) and math.isnan(t)) else f"{t * 1e3:.2f}"


def _lobo(r):
    e = r.error_leave_one_benchmark_out
    return "-" if e is None else f"{e:+.1%}"


def text_report(rows, stats, *, table="Google's MLPerf v0.6 and v0.7 TPU-v3 runs"):
    """The table ``wus-sim validate`` prints, then the headline figures; *table* names the
    measured table."""
    head = (f"{'round':<6}{'benchmark':<12}{'topology':<13}{'fw':<5}{'batch/rep':>9}{'kind':>7}{'role':>13}"
            f"{'measured ms':>13}{'simulated ms':>14}{'error':>9}{'LOBO':>8}{'ex/s/chip meas':>16}{'sim':>9}")
    lines = [f"validation: {len(rows)} measured runs ({table}), "
             f"calibration {stats['calibration_id']}", head, "-" * len(head)]
    for r in rows:
        verdict = "" if r.within_bound is None else ("  within bound" if r.within_bound else "  OVER BOUND")
        if r.not_expressible:
            verdict = "  not expressible (not counted): " + r.not_expressible.split(";")[0]
        fw = r.framework
        lines.append(
            f"{r.round or '-':<6}{r.benchmark:<12}{r.topology:<13}{fw:<5}{r.per_replica_batch:>9}{r.kind:>7}{r.role:>13}"
            f"{_ms(r.measured_step_s):>13}{_ms(r.simulated_step_s):>14}{r.error:>+9.1%}{_lobo(r):>8}"
            f"{r.measured_examples_per_s_per_chip:>16.1f}{r.simulated_examples_per_s_per_chip:>9.1f}{verdict}")
    h, c, b = stats["held_out"], stats["calibration"], stats["bounds"]
    lines.append("")
    for label, part in (("held-out training-only rows", h), ("calibration rows", c)):
        lines.append(f"{label}: {part['rows']}" + (f", median |error| {part['median_abs_error']:.1%}, "
                                                   f"worst {part['worst_abs_error']:.1%}" if part["rows"] else ""))
    lobo = stats.get("leave_one_benchmark_out") or {"rows": 0}
    if lobo["rows"]:
        lines.append(f"leave-one-benchmark-out (each benchmark predicted by a fit that never saw it): {lobo['rows']} "
                     f"rows, median |error| {lobo['median_abs_error']:.1%}, worst {lobo['worst_abs_error']:.1%}")
    lines.append(f"bound rows (eval inside the measured interval): {b['within']} of {b['rows']} within their bound"
                 + (f"; over: {', '.join(b['violations'])}" if b["violations"] else ""))
    return "\n".join(lines)


def markdown_table(rows):
    """The validation table of docs/validation.md: one line per measured run, both rounds."""
    out = ["| round | benchmark | slice | framework | batch / replica | kind | measured ms | simulated ms | error | "
           "leave-one-benchmark-out |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fw = r.framework or ("tf1" if r.round == "v0.6" else "-")
        if r.not_expressible:
            err = "not expressible"
        elif r.kind == "bound":
            err = f"{r.error:+.1%} ({'within bound' if r.within_bound else 'OVER BOUND'})"
        else:
            err = f"{r.error:+.1%}"
        out.append(f"| {r.round or '-'} | {r.benchmark} | {r.topology} | {fw} | {r.per_replica_batch} | {r.kind} | "
                   f"{_ms(r.measured_step_s)} | {_ms(r.simulated_step_s)} | {err} | {_lobo(r)} |")
    return "\n".join(out)


def make_output_folder(out_dir):
    """Create the folder *out_dir* (a :class:`~pathlib.Path`, ``--out``) and its parents, or say in
    one ConfigError why it cannot be."""
    from ..inputs.errors import ConfigError
    from ..inputs.files import check_output_folder

    check_output_folder(out_dir, named_by="--out")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the output folder ({exc.strerror})", key_path="--out",
                          value=str(out_dir)) from None


def write_outputs(rows, out_dir, *, plot=True):
    """Write ``validation.csv`` (and ``validation.png``) to *out_dir*; return the paths."""
    import pandas as pd

    make_output_folder(out_dir)
    frame = pd.DataFrame([asdict(r) for r in rows], columns=list(COLUMNS))
    csv = out_dir / "validation.csv"
    from ..inputs.writes import write_atomic

    write_atomic(csv, frame.to_csv(index=False), what="validation table", named_by="--out")
    files = [csv]
    if plot:
        png = out_dir / "validation.png"
        plot_validation(rows, png)
        files.append(png)
    return files


_MARKERS = {"resnet": "o", "ssd": "s", "mask": "D", "transformer": "^", "gnmt": "P"}  # "v" marks a bound row


def plot_validation(rows, path):
    """Parity plot (simulated vs measured step time, log-log, +-10 % and +-25 % bands) and
    per-chip throughput vs slice size, measured and simulated, per benchmark.

    *rows* are the rows :func:`~wus_sim.validation.validate.validate` returns (at least one that
    was simulated); *path* the image file to write. Anything else is one ConfigError."""
    from ..inputs.errors import ConfigError
    from ..inputs.files import check_writable_file
    from .validate import ValidationRow

    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, ValidationRow) for r in rows):
        raise ConfigError("must be the list of rows wus_sim.validate() returns", key_path="rows", value=rows)
    if not any(_positive(r.measured_step_s) and _positive(r.simulated_step_s) for r in rows):
        raise ConfigError("holds no row with a simulated and a measured step time to plot", key_path="rows",
                          show_value=False)
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError("must be the image file to write", key_path="path", value=path)
    check_writable_file(path, what="figure", named_by="path")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    benches = sorted({r.benchmark for r in rows})
    color = {b: colors[i % len(colors)] for i, b in enumerate(benches)}
    vals = [v for r in rows for v in (r.measured_step_s, r.simulated_step_s) if _positive(v)]
    lo, hi = min(vals) / 1.5, max(vals) * 1.5
    grid = [lo, hi]
    ax.plot(grid, grid, color="black", lw=1)
    for band, alpha in ((0.10, 0.18), (0.25, 0.08)):
        ax.fill_between(grid, [g * (1 - band) for g in grid], [g * (1 + band) for g in grid], color="gray",
                        alpha=alpha, lw=0, label=f"±{band:.0%}")
    for r in rows:
        marker = "v" if r.kind == "bound" else _MARKERS.get(r.benchmark, "o")
        face = color[r.benchmark] if r.role == "calibration" else "white"
        ax.scatter(r.measured_step_s, r.simulated_step_s, marker=marker, s=46, facecolors=face,
                   edgecolors=color[r.benchmark], linewidths=1.5, zorder=3)
    for b in benches:
        ax.scatter([], [], marker=_MARKERS.get(b, "o"), facecolors="white", edgecolors=color[b], label=b)
    ax.scatter([], [], marker="o", color="gray", label="filled: calibration row")
    ax.scatter([], [], marker="v", facecolors="white", edgecolors="gray", label="bound (eval inside): sim ≤ meas")
    ax.set(xscale="log", yscale="log", xlim=grid, ylim=grid, xlabel="measured step time [s]",
           ylabel="simulated step time [s]", title="Step time, simulated vs measured")
    ax.legend(fontsize=8, loc="upper left", frameon=False)

    for b in benches:
        sel = sorted((r for r in rows if r.benchmark == b), key=lambda r: r.cores)
        cores = [r.cores for r in sel]
        bx.plot(cores, [r.measured_examples_per_s_per_chip for r in sel], marker=_MARKERS.get(b, "o"),
                color=color[b], label=f"{b} measured")
        bx.plot(cores, [r.simulated_examples_per_s_per_chip for r in sel], marker=_MARKERS.get(b, "o"),
                color=color[b], ls="--", mfc="white", label=f"{b} simulated")
    bx.set(xscale="log", yscale="log", xlabel="cores in the slice", ylabel="examples / s / chip",
           title="Per-chip throughput (solid measured, dashed simulated)")
    # the slices themselves as ticks (32 ... 2048 cores), not decades
    from matplotlib.ticker import FixedLocator, NullLocator

    slices = sorted({r.cores for r in rows})
    if slices:
        bx.set_xscale("log", base=2)
        bx.xaxis.set_major_locator(FixedLocator(slices))
        bx.xaxis.set_minor_locator(NullLocator())
        bx.set_xticklabels([str(c) for c in slices])
        bx.set_xlim(slices[0] / 1.3, slices[-1] * 1.3)
    bx.legend(fontsize=7, ncol=2, frameon=False)
    calib = rows[0].calibration if rows else ""
    rounds = sorted({r.round for r in rows if r.round})
    runs = f"Google's MLPerf {' and '.join(rounds)} TPU-v3 runs" if rounds else "the measured runs"
    fig.suptitle(f"wus-sim vs {runs} (calibration {calib})", fontsize=11)
    fig.tight_layout()
    from ..inputs.writes import write_atomic

    try:
        write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=110), what="plot", named_by="--out")
    finally:
        plt.close(fig)


def _positive(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def validation_line(checked):
    """One line of a calibration's ``provenance.validation``: what its numbers were checked to."""
    over = checked["over_bound"]
    if checked.get("leave_one_benchmark_out_rows"):
        held = (f"each benchmark predicted by a fit that never saw it, over {checked['leave_one_benchmark_out_rows']} "
                f"measured step times: median |error| {checked['leave_one_benchmark_out_median_abs']:.1%}, worst "
                f"{checked['leave_one_benchmark_out_worst_abs']:.1%}")
    elif checked["held_out_rows"]:
        held = (f"checked against {checked['held_out_rows']} held-out measured step times: median |error| "
                f"{checked['held_out_median_abs']:.1%}, worst {checked['held_out_worst_abs']:.1%}")
    else:
        held = "no held-out measured step time: its error on runs it was not fitted to is unknown"
    bounds = (f"; {checked['bound_rows_within']} of {checked['bound_rows']} upper bounds kept"
              + (f" (over: {', '.join(over)})" if over else "")) if checked["bound_rows"] else ""
    llm = (f"; today's LLM runs (MaxText's tiering page, TPU v5p and v6e), each model predicted by a fit that "
           f"never saw it, over {checked['leave_one_model_out_rows']} measured step times: median |error| "
           f"{checked['leave_one_model_out_median_abs']:.1%}, worst {checked['leave_one_model_out_worst_abs']:.1%}"
           if checked.get("leave_one_model_out_rows") else "")
    return held + bounds + llm


def model_error_line(checked, calibration_id, *, name_calibration=False):
    """The line ``step`` and ``run`` print under their numbers: the error of the calibration
    *calibration_id* (its *checked* record, or ``None``: none to state). *name_calibration*:
    say which calibration (``run`` lists one line per calibration its points used)."""
    if checked:
        measured = checked.get("measured") or "measured runs"
        head = (f"model error (calibration {calibration_id}, against {measured}; wus-sim validate shows each)"
                if name_calibration else f"model error against {measured} (wus-sim validate shows each)")
        return head + ": " + validation_line(checked)
    why = ("uncalibrated physics; wus-sim validate --calibration none gives its error" if calibration_id == "none"
           else "a fitted value is overridden, or the calibration file has no validation record")
    return f"model error (calibration {calibration_id}): none stated ({why})" if name_calibration else \
        f"model error: none stated ({why})"

