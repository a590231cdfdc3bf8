"""Bands on a simulated step: the range its calibration's uncertainty gives.

A calibration states how far each fitted value may move (``provenance.param_covariance``:
the fit's covariance, and ``provenance.param_ranges``: the 95 % range of each value) and the
range of each declared value it did not fit (``provenance.declared_ranges``, e.g. the host
loop). A step's band is their effect on its time, to first order, from the step's own parts
(no re-simulation): the step time's derivative with respect to each value is

* the matrix-unit efficiency and the elementwise bytes: the change of the forward and backward
  compute, from :func:`~wus_sim.model.compute.layer_times` at a nudged value (the collectives'
  exposure is held fixed, which widens the band slightly where compute hides communication);
  where only the forward bytes are fitted, the backward bytes move with them in proportion, as
  the fit moved them;
* ``op_overhead_s``: the ops the step runs (:func:`~wus_sim.training.step.op_counts`);
* ``step_overhead_s``: 1; ``host_loop_s``: ``1 / steps_per_loop``.

The fitted values move together (their covariance), so the half-width is
``1.96 * sqrt(g' C g)`` for a gradient ``g``; each declared value then moves the band to its
range's ends. A speedup's band is the same with the gradient of ``replicated / sharded``, so
what both steps share (most of the compute) cancels, as it does in the speedup itself.
"""

from dataclasses import replace
import math

import numpy as np

from ..model.compute import layer_times

__all__ = ["Z_95", "step_gradient", "band", "speedup_band", "has_bands", "band_names", "point_bands"]

Z_95 = 1.959963984540054
"""Half-width of a two-sided 95 % normal interval, in standard deviations."""

_NUDGED = ("mxu_efficiency", "elementwise_fwd_bytes", "elementwise_bwd_bytes")


def has_bands(calibration):
    """Whether *calibration* states the uncertainty a band needs."""
    cov = (getattr(calibration, "provenance", None) or {}).get("param_covariance")
    return isinstance(cov, dict) and bool(cov.get("names"))


def step_gradient(workload, topology, per_replica_batch, compute, *, spatial_ways=1, ops=0, steps_per_loop=1,
                  names=(), quantization="none"):
    """``{name: dT/dvalue}`` of one step for each compute value in *names* (seconds per unit).
    *ops*: the ops the step runs (forward, backward and update); *quantization*: the matmul
    precision the step ran at (int8 matrix time moves less with mxu_efficiency)."""
    out = {}
    base = None
    # a calibration that fits the forward elementwise bytes alone keeps backward at a fixed
    # multiple of it (wus_sim.validation.fit.ELEMENTWISE_BWD_PER_FWD): nudge both together
    tied = "elementwise_bwd_bytes" not in {n.split("@")[0] for n in names} and compute.elementwise_fwd_bytes > 0
    for name in names:
        key = name.split("@")[0]
        if key in _NUDGED:
            if base is None:
                lt = layer_times(workload, topology, per_replica_batch, compute, spatial_ways=spatial_ways,
                                 quantization=quantization)
                base = lt.forward_total_s + lt.backward_total_s
            value = getattr(compute, key)
            h = max(abs(value) * 1e-4, 1e-9)
            moved = {key: value + h if key != "mxu_efficiency" or value + h <= 1 else value - h}
            if key == "elementwise_fwd_bytes" and tied:
                moved["elementwise_bwd_bytes"] = compute.elementwise_bwd_bytes * moved[key] / value
            nudged = replace(compute, **moved)
            lt = layer_times(workload, topology, per_replica_batch, nudged, spatial_ways=spatial_ways,
                             quantization=quantization)
            delta = getattr(nudged, key) - value
            out[name] = (lt.forward_total_s + lt.backward_total_s - base) / delta
        elif key == "op_overhead_s":
            out[name] = float(ops)
        elif key == "step_overhead_s":
            out[name] = 1.0
        elif key == "host_loop_s":
            out[name] = 1.0 / steps_per_loop
        else:
            out[name] = 0.0
    return out


def _spread(gradient, calibration, stack):
    """``(half-width from the fitted values, low shift, high shift)`` for *gradient* (keys are
    calibration parameter names; a stack's own values are ``name@stack``)."""
    prov = calibration.provenance or {}
    cov = prov["param_covariance"]
    names = cov["names"]
    matrix = np.asarray(cov["matrix"], dtype=float)
    g = np.array([gradient.get(_local(n, stack), 0.0) if _applies(n, stack) else 0.0 for n in names])
    half = Z_95 * math.sqrt(max(float(g @ matrix @ g), 0.0))
    lo = hi = 0.0
    for name, (low, high) in (prov.get("declared_ranges") or {}).items():
        if not _applies(name, stack):
            continue
        base = _local(name, stack)
        d = gradient.get(base, 0.0)
        value = (calibration.stacks.get(stack) or {}).get(base, calibration.params.get(base, 0.0)) \
            if "@" in name else calibration.params.get(name, 0.0)
        shifts = (d * (low - value), d * (high - value))
        lo += min(shifts)
        hi += max(shifts)
    return half, lo, hi


def _applies(name, stack):
    return "@" not in name or name.split("@", 1)[1] == stack


def _local(name, stack):
    return name.split("@", 1)[0] if "@" in name else name


def band_names(calibration):
    """The names a band needs gradients for: the fitted ones (``name`` or ``name@stack``) and the declared ones."""
    prov = calibration.provenance or {}
    names = {n.split("@")[0] for n in prov["param_covariance"]["names"]}
    return sorted(names | {n.split("@")[0] for n in prov.get("declared_ranges") or {}})


def band(step_time_s, gradient, calibration, stack):
    """``(low, high)`` of a step time whose *gradient* is :func:`step_gradient`'s."""
    if not math.isfinite(step_time_s):
        return (math.nan, math.nan)
    half, lo, hi = _spread(gradient, calibration, stack)
    return (max(step_time_s - half + lo, 0.0), step_time_s + half + hi)


def speedup_band(replicated_s, sharded_s, g_replicated, g_sharded, calibration, stack):
    """``(low, high)`` of ``replicated_s / sharded_s``: the gradient of the ratio, so that what
    both steps share cancels."""
    if not (math.isfinite(replicated_s) and math.isfinite(sharded_s)) or sharded_s <= 0:
        return (math.nan, math.nan)
    s = replicated_s / sharded_s
    keys = set(g_replicated) | set(g_sharded)
    g = {k: (g_replicated.get(k, 0.0) * sharded_s - replicated_s * g_sharded.get(k, 0.0)) / sharded_s ** 2
         for k in keys}
    half, lo, hi = _spread(g, calibration, stack)
    return (s - half + lo, s + half + hi)


def point_bands(calibration, topology, run, options, results=None):
    """Bands of a simulated point (:mod:`wus_sim.training.bands`): ``{"strategies": {s: (low,
    high)}, "speedups": {s: (low, high)}}``, each strategy's step time and each speedup over
    replicated; ``None`` where the calibration states no uncertainty (or compute parameters
    were given explicitly, or a fitted value was overridden)."""
    from .step import op_counts

    if not has_bands(calibration) or options.calibration_id == "explicit":
        return None
    if options.compute != calibration.compute_params(stack=options.software_stack):
        return None  # a fitted value overridden: its uncertainty is not the calibration's
    meta = run if isinstance(run, dict) else run.meta()
    results = results if results is not None else run.results
    stack = options.software_stack or calibration.default_stack
    plan = meta["plan"]
    names = band_names(calibration)
    grads, out = {}, {"strategies": {}, "speedups": {}}
    for s, r in results.items():
        if r.status != "ok":
            out["strategies"][s] = (math.nan, math.nan)
            continue
        grads[s] = step_gradient(plan.workload, topology, meta["per_replica_batch"], options.compute,
                                 spatial_ways=meta["spatial_ways"], ops=sum(op_counts(plan.workload, r.work, options.compute)),
                                 steps_per_loop=options.steps_per_loop, names=names,
                                 quantization=options.quantization)
        out["strategies"][s] = band(r.step_time_s, grads[s], calibration, stack)
    rep = results.get("replicated")
    for s, r in results.items():
        if s == "replicated" or rep is None:
            continue
        if s in grads and "replicated" in grads:
            out["speedups"][s] = speedup_band(rep.step_time_s, r.step_time_s, grads["replicated"], grads[s],
                                              calibration, stack)
        else:
            out["speedups"][s] = (math.nan, math.nan)
    return out
