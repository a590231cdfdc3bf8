"""Fit the few chip parameters no datasheet gives, on a declared subset of measured runs.

What is fitted (:data:`FIT_PARAMS`, at most four, all global: one value for every
workload and slice): the matrix-unit efficiency, the fixed cost per op and the
fixed cost per step (see :mod:`wus_sim.compute`). What it is fitted to
(:data:`CALIBRATION_ROWS`): at most two slices per benchmark, declared here before
the fit, training-only (``exact``) rows only; every other row of the measured table
is held out and only ever validated. The fit minimises the squared log ratio of
simulated to measured step time (relative error, symmetric in over and under)
with :func:`scipy.optimize.least_squares` inside physical bounds.

The result is a calibration file (:mod:`wus_sim.calibration`) with its provenance:
data repository and commit, rows used, per-row and summary fit error, date, method.
"""

from datetime import date
import math
import statistics

from ..calibration import NO_CALIBRATION, Calibration
from ..compute import ComputeParams
from ..errors import ConfigError
from ..topology import load_topology
from .measured import DATA_SOURCE, load_measured
from .simulate import simulate_run
from .validate import row_key

__all__ = ["FIT_PARAMS", "FITTABLE_PARAMS", "MAX_FITTED", "CALIBRATION_ROWS", "calibrate", "write_calibration"]

FITTABLE_PARAMS = {
    # name: (lower bound, upper bound, starting value), in the parameter's unit
    "mxu_efficiency": (0.05, 1.0, 0.5),
    "elementwise_fwd_bytes": (0.0, 24.0, 6.0),
    "elementwise_bwd_bytes": (0.0, 40.0, 10.0),
    "step_overhead_s": (0.0, 20e-3, 1e-3),
    "op_overhead_s": (0.0, 200e-6, 5e-6),
}
"""The ComputeParams fields a calibration may fit, with the bounds physics allows."""

FIT_PARAMS = {name: FITTABLE_PARAMS[name] for name in
              ("mxu_efficiency", "elementwise_fwd_bytes", "elementwise_bwd_bytes", "step_overhead_s")}
"""The fields the shipped calibration fits (``wus-sim calibrate --fit`` chooses others)."""

MAX_FITTED = 4
"""At most this many parameters are fitted: four calibration rows cannot support more."""

CALIBRATION_ROWS = (
    # Two slices per benchmark with training-only times, chosen inside the range of
    # slices (not its ends) so that the extremes test extrapolation: ResNet-50's fall in
    # per-chip throughput from v3-32 to v3-2048 is predicted, not fitted.
    "resnet/tpu-v3-128", "resnet/tpu-v3-1024",
    "ssd/tpu-v3-128", "ssd/tpu-v3-1024",
)
"""The declared calibration subset, ``benchmark/topology``."""


def _rows(runs):
    by_key = {row_key(r): r for r in runs}
    missing = [k for k in CALIBRATION_ROWS if k not in by_key]
    if missing:
        raise ValueError(f"calibration rows not in the measured table: {missing}")
    chosen = [by_key[k] for k in CALIBRATION_ROWS]
    not_exact = [row_key(r) for r in chosen if r.kind != "exact"]
    if not_exact:
        raise ValueError(f"calibration rows must be training-only (exact): {not_exact}")
    return chosen


def calibrate(*, runs=None, calibration_id=None, progress=None, network=None, topology_overrides=None,
              fit=None):
    """Fit :data:`FIT_PARAMS` (or the names *fit*, at most :data:`MAX_FITTED` of
    :data:`FITTABLE_PARAMS`) on :data:`CALIBRATION_ROWS`; returns a :class:`Calibration`.

    *network* and *topology_overrides* are those of
    :func:`~wus_sim.validation.validate.validate`: the fit under a disputed choice, which
    ``wus-sim validate --choices`` compares (the shipped calibration uses neither)."""
    import numpy as np
    from scipy.optimize import least_squares

    runs = load_measured() if runs is None else runs
    rows = _rows(runs)
    topologies = [load_topology(r.topology, **(topology_overrides or {})) for r in rows]
    names = _fit_names(fit)
    lower = np.array([FITTABLE_PARAMS[n][0] for n in names])
    upper = np.array([FITTABLE_PARAMS[n][1] for n in names])
    start = np.array([FITTABLE_PARAMS[n][2] for n in names])
    scale = np.where(upper > 0, upper, 1.0)

    def simulated(x):
        compute = ComputeParams(**dict(zip(names, (float(v) for v in x * scale))))
        return np.array([simulate_run(r, NO_CALIBRATION, compute=compute, network=network, topology=t).step_time_s
                         for r, t in zip(rows, topologies)])

    measured = np.array([r.measured_step_s for r in rows])

    def residuals(x):
        if progress:
            progress()
        return np.log(simulated(x) / measured)

    fit = least_squares(residuals, start / scale, bounds=(lower / scale, upper / scale), x_scale="jac",
                        diff_step=1e-3, xtol=1e-10, ftol=1e-10)
    params = {n: float(v) for n, v in zip(names, fit.x * scale)}
    sim = simulated(fit.x)
    errors = {row_key(r): float(s / m - 1) for r, s, m in zip(rows, sim, measured)}
    abs_err = sorted(abs(e) for e in errors.values())
    median_abs = statistics.median(abs_err)
    today = date.today().isoformat()
    provenance = {
        "data": DATA_SOURCE,
        "rows": list(CALIBRATION_ROWS),
        "fit_error": {"per_row": errors, "median_abs": median_abs,
                      "worst_abs": abs_err[-1], "rms_log": float(math.sqrt(np.mean(fit.fun ** 2)))},
        "fitted": list(names),
        "bounds": {n: [FITTABLE_PARAMS[n][0], FITTABLE_PARAMS[n][1]] for n in names},
        "method": "scipy.optimize.least_squares on log(simulated / measured step time), training-only rows; "
                  "network: the step defaults (2d, bidirectional rings on wrapped axes, folded rings on mesh axes; "
                  "small all-reduces by the fastest algorithm) unless overridden: "
                  f"{dict(network or {}, **(topology_overrides or {})) or 'none'}; strategy as the run used",
        "date": today,
    }
    return Calibration(id=calibration_id or f"mlperf-v06-tpu-v3-{today}", params=params, provenance=provenance)


def _fit_names(fit):
    """The fitted names: *fit* (names, or one comma-separated string) checked, else the shipped set."""
    if fit is None:
        return tuple(FIT_PARAMS)
    names = tuple(n.strip() for n in fit.split(",")) if isinstance(fit, str) else tuple(fit)
    unknown = [n for n in names if n not in FITTABLE_PARAMS]
    if unknown or not names:
        raise ConfigError(f"names fitted parameters, one or more of {', '.join(FITTABLE_PARAMS)}",
                          key_path="fit", value=",".join(unknown) or fit)
    if len(set(names)) != len(names) or len(names) > MAX_FITTED:
        raise ConfigError(f"names at most {MAX_FITTED} different parameters (four calibration rows support "
                          "no more)", key_path="fit", value=",".join(names))
    return names


def write_calibration(calibration, path):
    """Write *calibration* as a calibration YAML (the format :func:`load_calibration` reads)."""
    import yaml

    doc = {"id": calibration.id, "params": calibration.params, "provenance": calibration.provenance}
    header = ("# Calibrated chip parameters, written by `wus-sim calibrate`; edit by re-running it.\n"
              "# Fitted to the declared rows only (provenance.rows); every other measured row is held out.\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(header)
        yaml.safe_dump(doc, f, sort_keys=False, default_flow_style=False)
