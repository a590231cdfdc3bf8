"""Bands on a simulated step: the range its calibration's uncertainty gives, and, off what the
calibration measured, the range of what it did not fit.

Two kinds (:func:`band_kind`):

* ``calibration`` (the point's chip was measured, its software stack fitted): the fit's
  uncertainty, as below;
* ``extrapolated`` (a chip never measured, or a stack with no fitted fixed costs): every value
  fitted on another chip or stack is moved over its declared range (:func:`extrapolated_ranges`):
  the matrix-unit efficiency and the elementwise bytes (fitted per chip generation) when the chip
  was not measured, the per-op and per-step fixed costs (fitted per stack, on one chip) when the
  chip or the stack was not measured. The step is re-timed at every corner of those ranges (its
  forward and backward from :func:`~wus_sim.model.compute.layer_times` at the corner's values,
  the fixed costs exactly), and the band spans the corners, widened by what the remaining fitted
  values' covariance and the declared values' ranges give.

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

from ..inputs.memo import IdentityMemo
from ..model.compute import compute_view, layer_times
from ..model.layer_stack import moe_device_view

__all__ = ["Z_95", "step_gradient", "band", "speedup_band", "has_bands", "band_names", "point_bands", "band_kind",
           "extrapolated_ranges", "UNMEASURED_CHIP_MXU_EFFICIENCY", "ELEMENTWISE_BYTES_RANGE"]

Z_95 = 1.959963984540054
"""Half-width of a two-sided 95 % normal interval, in standard deviations."""

UNMEASURED_CHIP_MXU_EFFICIENCY = (0.3, 1.0)
"""Declared range of the matrix-unit efficiency on a chip generation the calibration never measured.
The high end is the peak itself. The low end lies below the whole-step model-FLOPs utilisation
reported for large TPU training runs outside MLPerf (Gopher on TPU v3: 32.5 %; PaLM on TPU v4:
46.2 %; Chowdhery et al. 2022, "PaLM", arXiv 2204.02311, Table 3): a whole step's utilisation
counts its non-matmul work too, so the matmuls alone run at least that fast on such runs; 0.3
leaves room for smaller models that do worse. Not fitted, not read from any MLPerf result."""

ELEMENTWISE_BYTES_RANGE = (3.0, 6.0)
"""Declared range of the forward elementwise HBM bytes per layer-output element on an unmeasured
chip (backward moves with it in proportion): 6 is the unfused count of
:attr:`~wus_sim.model.compute.ComputeParams.elementwise_fwd_bytes` (read twice, write once, bf16),
3 a fused read and write with the statistics pass kept in registers. Used where the calibration
states no bounds of its own (``provenance.bounds``)."""

_NUDGED = ("mxu_efficiency", "elementwise_fwd_bytes", "elementwise_bwd_bytes",
           # the shape compute model's (wus_sim.model.ops.matmuls): a shape calibration's covariance names them
           "matmul_peak_fraction", "activation_hbm_efficiency", "op_fixed_s")
_FRACTIONS = ("mxu_efficiency", "matmul_peak_fraction", "activation_hbm_efficiency")
"""Nudged values that may not pass 1: a derivative at 1 is taken below it."""


def has_bands(calibration):
    """Whether *calibration* states the uncertainty a band needs."""
    cov = (getattr(calibration, "provenance", None) or {}).get("param_covariance")
    return isinstance(cov, dict) and bool(cov.get("names"))


def step_gradient(workload, topology, per_replica_batch, compute, *, spatial_ways=1, ops=0, steps_per_loop=1,
                  names=(), quantization="none"):
    """``{name: dT/dvalue}`` of one step for each compute value in *names* (seconds per unit).
    *ops*: the ops the step runs (forward, backward and update); *quantization*: the matmul
    precision the step ran at (int8 matrix time moves less with mxu_efficiency)."""
    # the layers' part is the same for every strategy of a point: computed once
    layers = _LAYER_GRADIENTS.get((workload, topology.chip, compute),
                                  (per_replica_batch, spatial_ways, quantization, tuple(names),
                                   *compute_view(topology, spatial_ways)),
                                  lambda: _layer_gradient(workload, topology, per_replica_batch, compute,
                                                          spatial_ways, quantization, names))
    out = {}
    for name in names:
        key = name.split("@")[0]
        if key in _NUDGED:
            out[name] = layers[name]
        elif key == "op_overhead_s":
            out[name] = float(ops)
        elif key == "step_overhead_s":
            out[name] = 1.0
        elif key == "host_loop_s":
            out[name] = 1.0 / steps_per_loop
        else:
            out[name] = 0.0
    return out


_LAYER_GRADIENTS = IdentityMemo()


def _layer_gradient(workload, topology, per_replica_batch, compute, spatial_ways, quantization, names):
    """``{name: d(forward + backward time)/dvalue}`` for the names of :data:`_NUDGED` in *names*."""
    out = {}
    base = None
    # a calibration that fits the forward elementwise bytes alone keeps backward at a fixed
    # multiple of it (wus_sim.validation.fit.ELEMENTWISE_BWD_PER_FWD): nudge both together
    tied = "elementwise_bwd_bytes" not in {n.split("@")[0] for n in names} and compute.elementwise_fwd_bytes > 0
    for name in names:
        key = name.split("@")[0]
        if key not in _NUDGED:
            continue
        if base is None:
            lt = layer_times(workload, topology, per_replica_batch, compute, spatial_ways=spatial_ways,
                             quantization=quantization)
            base = lt.forward_total_s + lt.backward_total_s
        value = getattr(compute, key)
        h = max(abs(value) * 1e-4, 1e-9)
        moved = {key: value + h if key not in _FRACTIONS or value + h <= 1 else value - h}
        if key == "elementwise_fwd_bytes" and tied:
            moved["elementwise_bwd_bytes"] = compute.elementwise_bwd_bytes * moved[key] / value
        nudged = replace(compute, **moved)
        lt = layer_times(workload, topology, per_replica_batch, nudged, spatial_ways=spatial_ways,
                         quantization=quantization)
        delta = getattr(nudged, key) - value
        out[name] = (lt.forward_total_s + lt.backward_total_s - base) / delta
    return out


def _spread(gradient, calibration, stack, exclude=()):
    """``(half-width from the fitted values, low shift, high shift)`` for *gradient* (keys are
    calibration parameter names; a stack's own values are ``name@stack``); names in *exclude*
    (moved over their extrapolated range instead) take no part."""
    gradient = {k: v for k, v in gradient.items() if k not in exclude}
    matrix, keys, declared = _covariance(calibration, stack)
    g = np.array([0.0 if k is None else gradient.get(k, 0.0) for k in keys])
    half = Z_95 * math.sqrt(max(float(g @ matrix @ g), 0.0))
    lo = hi = 0.0
    for base, low, high, value in declared:
        if base in exclude:
            continue
        d = gradient.get(base, 0.0)
        shifts = (d * (low - value), d * (high - value))
        lo += min(shifts)
        hi += max(shifts)
    return half, lo, hi


def _covariance(calibration, stack):
    """What :func:`_spread` reads of *calibration* for *stack*, once per calibration and stack (a
    sweep asks at every point): the fitted values' covariance matrix, the gradient key of each of
    its names (``None`` where the name is another stack's), and ``(gradient key, low, high, value)``
    of each declared range that applies."""
    def compute():
        prov = calibration.provenance or {}
        cov = prov["param_covariance"]
        keys = [_local(n, stack) if _applies(n, stack) else None for n in cov["names"]]
        declared = []
        for name, (low, high) in (prov.get("declared_ranges") or {}).items():
            if not _applies(name, stack):
                continue
            base = _local(name, stack)
            value = (calibration.stacks.get(stack) or {}).get(base, calibration.params.get(base, 0.0)) \
                if "@" in name else calibration.params.get(name, 0.0)
            declared.append((base, low, high, value))
        return np.asarray(cov["matrix"], dtype=float), keys, declared

    return _COVARIANCES.get((calibration,), stack, compute)


_COVARIANCES = IdentityMemo(maxsize=64)
""":func:`_covariance`'s tables, per calibration (by identity) and stack."""


def _applies(name, stack):
    return "@" not in name or name.split("@", 1)[1] == stack


def _local(name, stack):
    return name.split("@", 1)[0] if "@" in name else name


def band_names(calibration):
    """The names a band needs gradients for: the fitted ones (``name`` or ``name@stack``) and the declared ones."""
    prov = calibration.provenance or {}
    names = {n.split("@")[0] for n in prov["param_covariance"]["names"]}
    return sorted(names | {n.split("@")[0] for n in prov.get("declared_ranges") or {}})


def band(step_time_s, gradient, calibration, stack, exclude=()):
    """``(low, high)`` of a step time whose *gradient* is :func:`step_gradient`'s (*exclude*: as
    :func:`_spread`)."""
    if not math.isfinite(step_time_s):
        return (math.nan, math.nan)
    half, lo, hi = _spread(gradient, calibration, stack, exclude)
    return (max(step_time_s - half + lo, 0.0), step_time_s + half + hi)


def speedup_band(replicated_s, sharded_s, g_replicated, g_sharded, calibration, stack, exclude=()):
    """``(low, high)`` of ``replicated_s / sharded_s``: the gradient of the ratio, so that what
    both steps share cancels."""
    if not (math.isfinite(replicated_s) and math.isfinite(sharded_s)) or sharded_s <= 0:
        return (math.nan, math.nan)
    s = replicated_s / sharded_s
    keys = set(g_replicated) | set(g_sharded)
    g = {k: (g_replicated.get(k, 0.0) * sharded_s - replicated_s * g_sharded.get(k, 0.0)) / sharded_s ** 2
         for k in keys}
    half, lo, hi = _spread(g, calibration, stack, exclude)
    return (s - half + lo, s + half + hi)


def band_kind(calibration, chip, stack):
    """``(kind, why)``: ``'calibration'`` and no reasons where *chip* was measured and *stack*
    (``None``: the default) has fitted costs; else ``'extrapolated'`` and why."""
    record = (calibration.provenance or {}).get("validated_range") or {}
    chips = record.get("chips") or []
    why = []
    if chip not in chips:
        why.append(f"chip {chip} never measured (fitted on {', '.join(chips) or 'none'})")
    if not calibration.has_stack(stack):
        why.append(f"software stack {stack} has no fitted fixed costs")
    return ("extrapolated" if why else "calibration"), why


def extrapolated_ranges(calibration, chip, stack):
    """``{name: (low, high)}``: the values fitted on another chip or stack that a point on
    *chip* and *stack* moves over their declared range (empty inside what was measured)."""
    record = (calibration.provenance or {}).get("validated_range") or {}
    out = {}
    if chip not in (record.get("chips") or []):
        # the matrix units' fraction of their peak, as the calibration's compute model reads it
        shape = (calibration.params or {}).get("compute_model") == "shape"
        out["matmul_peak_fraction" if shape else "mxu_efficiency"] = UNMEASURED_CHIP_MXU_EFFICIENCY
        bounds = (calibration.provenance or {}).get("bounds") or {}
        out["elementwise_fwd_bytes"] = tuple(bounds.get("elementwise_fwd_bytes") or ELEMENTWISE_BYTES_RANGE)
    if out or not calibration.has_stack(stack):
        out.update(calibration.stack_cost_ranges())
    return out


def _corner_times(workload, topology, batch, compute, ranges, *, spatial_ways, remat):
    """``[(d compute s, {fixed cost: value})]`` at every corner of *ranges* (forward + backward
    change from :func:`layer_times`; the fixed costs' values, applied per strategy)."""
    import itertools

    def compute_s(c):
        lt = layer_times(workload, topology, batch, c, spatial_ways=spatial_ways, remat=remat)
        return lt.forward_total_s + lt.backward_total_s

    base = compute_s(compute)
    axes = []
    for name in ("mxu_efficiency", "matmul_peak_fraction"):
        if name in ranges:
            axes.append([{name: v} for v in ranges[name]])
    if "elementwise_fwd_bytes" in ranges:
        per_fwd = compute.elementwise_bwd_bytes / compute.elementwise_fwd_bytes if compute.elementwise_fwd_bytes else 0
        axes.append([{"elementwise_fwd_bytes": v, "elementwise_bwd_bytes": v * per_fwd}
                     for v in ranges["elementwise_fwd_bytes"]])
    fixed = [n for n in ("op_overhead_s", "step_overhead_s") if n in ranges]
    if fixed:  # both ends together: one stack's costs, both low or both high
        axes.append([{n: ranges[n][i] for n in fixed} for i in (0, 1)])
    out = []
    for combo in itertools.product(*axes):
        values = {k: v for part in combo for k, v in part.items()}
        moved = {k: v for k, v in values.items() if k not in fixed}
        d = compute_s(replace(compute, **moved)) - base if moved else 0.0
        out.append((d, {k: values[k] for k in fixed}))
    return out


def _at_corner(step_s, ops, compute, corner):
    d, fixed = corner
    return (step_s + d + ops * (fixed.get("op_overhead_s", compute.op_overhead_s) - compute.op_overhead_s)
            + fixed.get("step_overhead_s", compute.step_overhead_s) - compute.step_overhead_s)


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
    kind, why = band_kind(calibration, topology.chip.name, options.software_stack)
    ranges = extrapolated_ranges(calibration, topology.chip.name, options.software_stack)
    # what a device computes: an expert group's share of a mixture of experts, padded by the capacity factor
    mesh = meta.get("mesh")
    ways = 1 if mesh is None else mesh.mesh.expert * (mesh.dcn_mesh.expert if mesh.dcn_mesh is not None else 1)
    computed = moe_device_view(plan.workload, ways, options.capacity_factor, options.expert_load_imbalance)
    corners = _corner_times(computed, topology, meta["per_replica_batch"], options.compute, ranges,
                            spatial_ways=meta["spatial_ways"], remat=options.remat) if ranges else []
    grads, ops, out = {}, {}, {"strategies": {}, "speedups": {}, "kind": kind, "why": why}
    for s, r in results.items():
        if r.status != "ok":
            out["strategies"][s] = (math.nan, math.nan)
            continue
        ops[s] = sum(op_counts(plan.workload, r.work, options.compute))
        grads[s] = step_gradient(computed, topology, meta["per_replica_batch"], options.compute,
                                 spatial_ways=meta["spatial_ways"], ops=ops[s],
                                 steps_per_loop=options.steps_per_loop, names=names,
                                 quantization=options.quantization)
        low, high = band(r.step_time_s, grads[s], calibration, stack, exclude=ranges)
        if corners:
            at = [_at_corner(r.step_time_s, ops[s], options.compute, c) for c in corners]
            low, high = max(low + min(at) - r.step_time_s, 0.0), high + max(at) - r.step_time_s
        out["strategies"][s] = (low, high)
    rep = results.get("replicated")
    for s, r in results.items():
        if s == "replicated" or rep is None:
            continue
        if s in grads and "replicated" in grads:
            low, high = speedup_band(rep.step_time_s, r.step_time_s, grads["replicated"], grads[s],
                                     calibration, stack, exclude=ranges)
            if corners:
                up = rep.step_time_s / r.step_time_s
                at = [_at_corner(rep.step_time_s, ops["replicated"], options.compute, c)
                      / _at_corner(r.step_time_s, ops[s], options.compute, c) for c in corners]
                low, high = low + min(at) - up, high + max(at) - up
            out["speedups"][s] = (low, high)
        else:
            out["speedups"][s] = (math.nan, math.nan)
    return out
