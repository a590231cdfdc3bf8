"""Fit the few chip parameters no datasheet gives, to every measured run the simulator can express.

What is fitted (:data:`FIT_PARAMS`): the matrix-unit efficiency and the elementwise traffic per
layer-output element, the chip's, and the fixed cost per op of each software stack the rows ran
on (``name@stack``, :data:`STACK_PARAMS`); what is declared instead, each with its source and
range (:data:`DECLARED_PARAMS`, :data:`DECLARED_STACK_PARAMS`, :data:`DECLARED_RANGES`): the host
loop and the per-step cost no part of the model explains. What it is fitted to: every training-only
row of the shipped v0.6 and v0.7 tables, and every bound row as an inequality, except the rows
the calibration is not fitted to (:data:`~wus_sim.validation.simulate.NOT_FITTED`); at least
twice as many training-only rows as fitted values. The least-squares fit itself is
:mod:`wus_sim.validation.fit`.

The result is a calibration file (:mod:`wus_sim.model.calibration`) with its provenance:
data repositories and commits, rows used, per-row fit error, each value's range and the fit's
covariance, the leave-one-benchmark-out refits, date, method, the validation of the fitted
values against every row (``provenance.validation``, which ``step`` prints beside every result)
and the range of runs they were checked on (``provenance.validated_range``).

``rows=`` fits chosen training-only rows instead (``wus-sim calibrate --rows``): a diagnosis,
not the shipped calibration; the file records which rows it used. :func:`rule_rows` and
:data:`CALIBRATION_ROWS` are the v0.6 pair rule the calibration used before it fitted every row,
kept as a diagnosis (a test holds the rule to the table).
"""

from datetime import date
from pathlib import Path
import math
import statistics

from ..model.calibration import Calibration
from ..inputs.errors import ConfigError
from ..training.bands import Z_95
from .measured import load_measured, software_stack, table_identity
from .fit import BOUND_MARGIN, ELEMENTWISE_BWD_PER_FWD, Fitter, expand, stack_order, validated_range
from .fit_tiering import LLM_DECLARED_STACK, LLM_STACK, TIERING_SOURCE, llm_stage
from .report import model_error_line, validation_line  # re-exported: callers import them from here
from .simulate import NOT_EXPRESSIBLE, NOT_FITTED, run_topology
from .validate import row_key, summary, validate

__all__ = ["FIT_PARAMS", "SHAPE_FIT_PARAMS", "FITTABLE_PARAMS", "MAX_FITTED", "CALIBRATION_ROWS", "MAX_RUN_SPREAD", "rule_rows",
           "NOT_EXPRESSIBLE", "NOT_FITTED", "DECLARED_PARAMS", "DECLARED_RANGES", "ELEMENTWISE_BWD_PER_FWD", "validated_range",
           "calibrate", "write_calibration",
           "validation_line", "model_error_line"]

FITTABLE_PARAMS = {
    # name: (lower bound, upper bound, starting value), in the parameter's unit
    "mxu_efficiency": (0.05, 1.0, 0.5),
    # the physics' range: an unfused batch norm's 3 x 2 B forward and 5 x 2 B backward, down to half
    # of that for what XLA fuses into the matmul (wus_sim.model.compute.ComputeParams)
    "elementwise_fwd_bytes": (3.0, 6.0, 6.0),
    "elementwise_bwd_bytes": (5.0, 10.0, 10.0),
    "step_overhead_s": (0.0, 20e-3, 1e-3),
    "op_overhead_s": (0.0, 200e-6, 5e-6),
    # compute_model "shape" (wus_sim.model.ops.matmuls): a padded matmul's share of the peak, from a
    # third to all of it; the fixed cost of one matmul op, up to 50 us (a few thousand cycles of
    # MXU pipeline fill at ~1 GHz and an operand DMA's latency: far above either)
    "matmul_peak_fraction": (0.3, 1.0, 0.9),
    "op_fixed_s": (0.0, 50e-6, 1e-6),
    "activation_hbm_efficiency": (0.5, 1.0, 0.8),
    # an output block from one MXU tile (128) to a 4096 x 4096 block (32 MiB of fp32 partial sums,
    # the order of a TPU core's VMEM)
    "matmul_block": (128.0, 4096.0, 1024.0),
}
"""The ComputeParams fields a calibration may fit, with the bounds physics allows."""

FIT_PARAMS = {name: FITTABLE_PARAMS[name] for name in ("mxu_efficiency", "elementwise_fwd_bytes", "op_overhead_s")}
"""The fields the shipped calibration fits (``wus-sim calibrate --fit`` chooses others): the chip's
matrix-unit efficiency and its elementwise traffic per layer-output element (forward; backward
stays :data:`ELEMENTWISE_BWD_PER_FWD` times it), shared by every stack, and per software stack
its fixed cost per op. Until 2026-12-01 the elementwise traffic was declared: with BERT's and the
Transformer's attention scores not counted as elementwise work, the rows could not tell the
matrix unit's share from the memory's (SSD asked for 9.6 B per output element, ResNet-50 for 3 B),
and fitting it predicted ResNet-50 from the others 25-43 % slow. With the scores counted
(:class:`~wus_sim.model.workload.AttentionScores`: BERT-large's are 100 M elements per sequence,
next to 113 M layer outputs), BERT's row pins the memory side too, and each benchmark left out is
predicted within 20 % (docs/validation.md)."""

SHAPE_FIT_PARAMS = {name: FITTABLE_PARAMS[name] for name in ("matmul_peak_fraction", "elementwise_fwd_bytes",
                                                              "op_overhead_s")}
"""What ``compute_model="shape"`` fits unless told: the shipped set with the padded matmuls' peak
fraction in place of the FLOPs model's matrix-unit efficiency."""

MODEL_PARAMS = {"flops": ("mxu_efficiency",), "shape": ("matmul_peak_fraction", "op_fixed_s", "matmul_block")}
"""Fitted values that only one compute model reads: fitting them under the other is an error."""

MAX_FITTED = 8
"""At most this many values are fitted (a per-stack name counts once per stack)."""

DECLARED_PARAMS = {"host_loop_s": 1e-3}
"""Values a calibration declares rather than fits (:data:`DECLARED_SOURCES` says why each)."""

DECLARED_STACK_PARAMS = {"step_overhead_s": 0.0}
"""Per software stack, declared: what no part of the model explains, per step."""

DECLARED_RANGES = {
    "host_loop_s": (0.0, 10e-3),
    "step_overhead_s@tf1-tpuestimator-2019": (0.0, 4.3e-3),
    "step_overhead_s@tf-jax-2020": (0.0, 0.19e-3),
}
"""The range of each declared value, which every band includes (``name@stack``: that stack's)."""

DECLARED_SOURCES = {
    "step_overhead_s": "declared 0 for every stack: with the per-op cost fitted, no measured row asks for a per-step "
                       "cost the ops do not explain. Its range is what the data cannot rule out: fitted jointly with "
                       "the per-op cost, the elementwise bytes and the matrix-unit efficiency, the v0.6 stack takes "
                       "4.3 ms per step and the v0.7 stack 0.19 ms (ResNet-50 and SSD run 280-380 ops, so a per-op "
                       "and a per-step cost are nearly the same column of the fit)",
    "host_loop_s": "assumption: a host round trip per device loop (TF session.run or a JAX dispatch, with the "
                   "infeed/outfeed handshake) of about a millisecond, range 0-10 ms; at 100+ steps per loop it is "
                   "under 0.1 ms a step, below what the measured step times resolve",
}


CALIBRATION_ROWS = (
    # What rule_rows picks from the shipped table (a test checks it): per benchmark, of its
    # training-only rows whose runs agree (MAX_RUN_SPREAD), the two whose examples per core
    # lie furthest apart. ResNet-50's runs at v3-256, v3-512 and v3-1024 spread 7-17 %
    # between runs (input-pipeline stalls the simulator, a model of the device, does not
    # have), so its steady slices are v3-32, v3-128 (both 128 images per core) and v3-2048
    # (16); SSD's are v3-128 to v3-1024 (8 to 2 images per core). Until 2026-12-01 the
    # declared ResNet-50 pair was v3-128 and v3-1024, chosen as the slices inside the range.
    "resnet/tpu-v3-128", "resnet/tpu-v3-2048",
    "ssd/tpu-v3-128", "ssd/tpu-v3-1024",
)
"""The declared calibration subset, ``benchmark/topology``."""

MAX_RUN_SPREAD = 0.02
"""A row is steady, fit to be a calibration row, when its slowest run is at most 2 % slower
than its fastest (``step_s_max / step_s_min - 1``). In the shipped table the steady rows
spread 0.01-0.9 %, the others 3-17 % (SSD v3-32, ResNet-50 v3-256 to v3-1024): runs
that disagree measured something besides the device, most likely the host's input
pipeline, and a fit to them would put that time into the chip parameters."""


def rule_rows(runs, max_spread=MAX_RUN_SPREAD):
    """The calibration rows the declaration rule picks from *runs*, ``benchmark/topology``.

    Per benchmark, of its training-only rows whose runs agree within *max_spread*, the pair
    whose examples per core (per-replica batch / spatial ways) lie furthest apart (the
    largest ratio), so that the fit sees how the step time grows with the work per core; of
    pairs that tie, the one with fewer of the benchmark's end slices (its smallest and
    largest, bound rows included), so that an end stays to test extrapolation, then the
    smaller slices. A benchmark with fewer than two such rows contributes none. The rule
    reads the measured table only, not any simulation.
    """
    by_benchmark = {}
    for r in runs:
        by_benchmark.setdefault(r.benchmark, []).append(r)
    picked = []
    for rows in by_benchmark.values():
        ends = {min(r.cores for r in rows), max(r.cores for r in rows)}
        steady = [r for r in rows if r.kind == "exact" and r.step_s_max <= r.step_s_min * (1 + max_spread)]
        pairs = [(a, b) for i, a in enumerate(steady) for b in steady[i + 1:]]
        if not pairs:
            continue

        def rank(pair):
            a, b = pair
            lo, hi = sorted(r.per_replica_batch / r.spatial_ways for r in pair)  # examples per core
            return (-hi / lo, (a.cores in ends) + (b.cores in ends), a.cores + b.cores)

        best = min(pairs, key=rank)
        picked += sorted(best, key=lambda r: r.cores)
    return tuple(row_key(r) for r in picked)


def _rows(runs, keys, n_fitted, *, allow_bounds=False):
    """The runs named *keys* (``benchmark/topology``), checked: known, distinct, training-only,
    and at least as many as the fitted parameters (fewer rows leave the fit undetermined)."""
    by_key = {row_key(r): r for r in runs}
    keys = tuple(k.strip() for k in keys.split(",")) if isinstance(keys, str) else tuple(keys)
    unknown = [k for k in keys if k not in by_key]
    if unknown or not keys:
        example = next(iter(by_key), "ssd/tpu-v3-128")
        raise ConfigError(f"{'is not a row' if len(unknown) == 1 else 'are not rows'} of the measured table; "
                          f"name rows as benchmark/topology, e.g. {example} (wus-sim validate lists them)"
                          if unknown else f"names no row; name rows as benchmark/topology, e.g. {example}",
                          key_path="rows", value=",".join(unknown) or ",".join(keys))
    if len(set(keys)) != len(keys):
        raise ConfigError("names each row once", key_path="rows", value=",".join(keys))
    bounds = [k for k in keys if by_key[k].kind != "exact"]
    if bounds and not allow_bounds:
        raise ConfigError("must be training-only (exact) rows: a bound row's time includes eval",
                          key_path="rows", value=",".join(bounds))
    if len(keys) < n_fitted:
        raise ConfigError(f"names {len(keys)} rows for {n_fitted} fitted parameters: a fit needs at least as "
                          "many rows as parameters", key_path="rows", value=",".join(keys))
    return [by_key[k] for k in keys]


def calibrate(*, runs=None, calibration_id=None, progress=None, network=None, topology_overrides=None,
              fit=None, rows=None, measured=None, leave_one_out=None, uncertainty=True, compute_model=None):
    """Fit :data:`FIT_PARAMS` (or the names *fit*, of :data:`FITTABLE_PARAMS`) to every
    training-only row the simulator can express of the shipped tables (both rounds), with every
    bound row as an inequality (simulated <= measured), or to the keys *rows*; returns a
    :class:`Calibration` whose provenance holds the fit error, each value's 95 % range and the
    fit's covariance (``param_ranges``, ``param_covariance``), the leave-one-benchmark-out error
    (each benchmark predicted by a fit that never saw it; by default only without *rows*, where
    there are benchmarks to spare; *leave_one_out* False skips it; *uncertainty* False skips
    narrowing the ranges by the bound rows, a refit that only compares its errors), the
    validation of the fitted values against every row, and the range they were checked on.

    The per-op and per-step fixed costs (:data:`~wus_sim.model.calibration.STACK_PARAMS`) are
    fitted once per software stack of the rows (:func:`~wus_sim.validation.measured.software_stack`);
    the other values are the chip's, shared by every stack. ``elementwise_bwd_bytes``, unless
    fitted itself, stays :data:`ELEMENTWISE_BWD_PER_FWD` x the forward bytes: the two enter the
    model only as one sum per layer output, so no step time can tell them apart.

    *measured* is a table of your own (:func:`~wus_sim.validation.measured.load_measured`): the
    fit is then to its rows (*rows*, default every training-only row), and the calibration
    records the file's SHA-256 so that ``validate`` marks those rows.

    *network* and *topology_overrides* are those of
    :func:`~wus_sim.validation.validate.validate`: the fit under a disputed choice, which
    ``wus-sim validate --choices`` compares (the shipped calibration uses neither).

    *compute_model* (``"shape"``, the default and the shipped one, or ``"flops"``) is written into the calibration's
    values and every simulation of the fit runs under it; under ``shape`` the default fitted set is
    :data:`SHAPE_FIT_PARAMS`."""
    import numpy as np

    shipped = measured is None
    table = "shipped" if shipped else measured
    runs_given = runs
    runs = load_measured(table) if runs is None else runs
    model = _compute_model(compute_model)
    names = _fit_names(fit, model)
    data = table_identity(table)
    declared = rows is None and shipped
    if rows is None:
        keys = [row_key(r) for r in runs if row_key(r) not in NOT_FITTED]
        used = _rows(runs, keys, 0, allow_bounds=True)
    else:
        used = _rows(runs, rows, 0)
    # today's LLM runs beside the TPU-v3 ones (the shipped fit): a second stage fits the 2025 stack's
    # matmul peak fraction and the matmuls' output block to them (wus_sim.validation.fit_tiering)
    llm_stage = declared and runs_given is None and fit is None and bool(model)
    stacks = sorted({software_stack(r) for r in used}, key=stack_order)
    free = expand(names, stacks)
    exact = [r for r in used if r.kind == "exact"]
    need = 2 * len(free) if declared else len(free)
    if len(exact) < need:
        raise ConfigError(f"names {len(exact)} rows for {len(free)} fitted parameters: a fit needs at least "
                          f"{'twice ' if declared else ''}as many training-only rows as parameters", key_path="rows",
                          value=",".join(row_key(r) for r in exact))
    topologies = {row_key(r): run_topology(r, topology_overrides) for r in used}
    fitter = Fitter(used, topologies, free, network, bounds=FITTABLE_PARAMS,
                    declared={**DECLARED_PARAMS, **DECLARED_STACK_PARAMS, **model})
    # a row the simulator cannot run (e.g. a model that does not fit the slice's HBM) has no
    # step time to fit: named here, before the fit, never a NaN that the solver chokes on
    start = fitter.simulated(np.asarray(fitter.start, dtype=float) / fitter.scale, used)
    broken = [row_key(r) for r, t in zip(used, start) if not (np.isfinite(t) and t > 0)]
    if broken:
        raise ConfigError("names rows the simulator cannot run (no finite step time: infeasible on the slice); "
                          "leave them out with --rows", key_path="rows", value=",".join(broken))
    result = fitter.fit(progress=progress)
    llm = None
    for _ in range(2 if llm_stage else 0):  # the two stages in turn, twice (fit_tiering's docstring)
        llm = _llm_stage(fitter.values(result.x), fitter.declared, network, progress, llm)
        fitter.declared = {**fitter.declared, "matmul_block": llm[0].values(llm[1].x)["matmul_block"]}
        result = fitter.fit(start=result.x, progress=progress)
    x = result.x
    values = fitter.values(x)
    sim = fitter.simulated(x, used)
    measured_s = np.array([r.measured_step_s for r in used])
    cov = fitter.covariance(result)
    if llm:  # the second stage's rows, values and covariance (block-diagonal: fitted with the first's held)
        from scipy.linalg import block_diag

        llm_fitter, llm_result = llm
        used, free = used + llm_fitter.rows, free + llm_fitter.free
        values.update(llm_fitter.values(llm_result.x))
        sim = np.concatenate([sim, llm_fitter.simulated(llm_result.x, llm_fitter.rows)])
        measured_s = np.array([r.measured_step_s for r in used])
        cov = block_diag(cov, llm_fitter.covariance(llm_result))
    errors = {row_key(r): float(t / m - 1) for r, t, m in zip(used, sim, measured_s) if r.kind == "exact"}
    bound_errors = {row_key(r): float(t / m - 1) for r, t, m in zip(used, sim, measured_s) if r.kind == "bound"}
    abs_err = sorted(abs(e) for e in errors.values())
    ranges = {n: [max(FITTABLE_PARAMS[n.split("@")[0]][0], float(values[n] - Z_95 * math.sqrt(max(cov[i, i], 0.0)))),
                  min(FITTABLE_PARAMS[n.split("@")[0]][1], float(values[n] + Z_95 * math.sqrt(max(cov[i, i], 0.0))))]
              for i, n in enumerate(free)}
    # the bound rows narrow what the covariance allows; the covariance shrinks with them (each
    # value's standard deviation to its range's wider half / 1.96, correlations kept)
    if uncertainty:
        first = {n: ranges[n] for n in fitter.free}
        ranges.update({n: [float(v) for v in r] for n, r in fitter.bound_limits(x, first).items()})
    shrink = np.ones(len(free))
    for i, n in enumerate(free):
        sd = math.sqrt(max(cov[i, i], 0.0))
        if sd > 0:
            half = max(values[n] - ranges[n][0], ranges[n][1] - values[n])
            shrink[i] = min(1.0, half / (Z_95 * sd))
    cov = cov * np.outer(shrink, shrink)
    today = date.today().isoformat()
    params = {n: v for n, v in values.items() if "@" not in n}
    if "elementwise_fwd_bytes" in params and "elementwise_bwd_bytes" not in params:
        params["elementwise_bwd_bytes"] = params["elementwise_fwd_bytes"] * ELEMENTWISE_BWD_PER_FWD
    params = {**DECLARED_PARAMS, **model, **params}
    stack_values = {s: {**DECLARED_STACK_PARAMS, **{n.split("@")[0]: v for n, v in values.items()
                                                    if n.endswith("@" + s)}} for s in stacks}
    stack_values = {s: v for s, v in stack_values.items() if v}
    if llm:
        stack_values[LLM_STACK] = {**LLM_DECLARED_STACK, **{n.split("@")[0]: v for n, v in values.items()
                                                            if n.endswith("@" + LLM_STACK)}}
        stacks = stacks + [LLM_STACK]
    if llm:
        data = {**data, "tiering": TIERING_SOURCE}
    provenance = {
        "data": data,
        "rows": [row_key(r) for r in used],
        "rows_declared": declared,
        "fit_error": {"per_row": errors, "median_abs": statistics.median(abs_err),
                      "worst_abs": abs_err[-1], "rms_log": float(math.sqrt(np.mean(np.log(sim / measured_s)[
                          [r.kind == "exact" for r in used]] ** 2))),
                      "bound_rows": bound_errors},
        "fitted": list(free),
        "bounds": {n: list(FITTABLE_PARAMS[n.split("@")[0]][:2]) for n in free},
        "param_ranges": ranges,
        "param_covariance": {"names": list(free), "matrix": [[float(v) for v in row] for row in cov],
                             "method": "the fit's covariance: s^2 (J'J)^-1 over the training-only rows' log "
                                       "residuals, s^2 = sum of squares / (rows - values); ranges are +-1.96 "
                                       "standard deviations, clipped to the bounds, then narrowed to what keeps "
                                       "every bound row the fit keeps (each value alone, by bisection); each "
                                       "value's standard deviation shrinks with its range"},
        "declared": {n: DECLARED_SOURCES[n] for n in [*DECLARED_PARAMS, *DECLARED_STACK_PARAMS]},
        "declared_ranges": {n: list(r) for n, r in DECLARED_RANGES.items()},
        "method": "least squares of log(simulated / measured step time) over the training-only rows, with every "
                  f"bound row held as a constraint, log(simulated / measured) <= -{BOUND_MARGIN:g} "
                  "(scipy.optimize.minimize, SLSQP, derivatives by forward differences); "
                  "network: the step defaults (2d, bidirectional rings on wrapped axes, folded rings on mesh axes; "
                  "small all-reduces by the fastest algorithm) unless overridden: "
                  f"{dict(network or {}, **(topology_overrides or {})) or 'none'}; strategy as the run used; "
                  f"fixed costs per software stack: {', '.join(stacks)}",
        "date": today,
    }
    import hashlib

    chosen = ",".join(row_key(r) for r in used) + "|" + ",".join(f"{n}={values[n]!r}" for n in free)
    default_id = (f"mlperf-v06-v07-tpu-v3{'-maxtext-tiering' if llm else ''}-{today}" if shipped
                  else f"{Path(measured).stem}-{today}") \
        + "-" + hashlib.sha256(chosen.encode()).hexdigest()[:6]
    cal = Calibration(id=calibration_id or default_id, params=params, provenance=provenance,
                      stacks=stack_values, default_stack=stacks[-1] if stack_values else None)
    if leave_one_out is None:  # a diagnosis on chosen rows has no benchmark to spare
        leave_one_out = rows is None and len({r.workload for r in exact}) > 1
    if leave_one_out:
        provenance["leave_one_benchmark_out"] = fitter.leave_one_benchmark_out(x, progress=progress)
        if llm:
            lomo = llm_fitter.leave_one_benchmark_out(llm_result.x, progress=progress)
            lomo["method"] = ("per model of the tiering rows: refit the second stage's values without that model's "
                              "rows (Llama 2 70B: its v5p and v6e rows), started from the full fit, then simulate them")
            provenance["leave_one_model_out"] = lomo
    checked = summary(validate(cal, runs=runs, measured=table if not shipped else "shipped", network=network,
                               topology_overrides=topology_overrides))
    provenance["validation"] = {
        "measured": provenance["data"].get("name", provenance["data"].get("table", "")),
        "held_out_rows": checked["held_out"]["rows"],
        "held_out_median_abs": float(checked["held_out"]["median_abs_error"]) if checked["held_out"]["rows"] else None,
        "held_out_worst_abs": float(checked["held_out"]["worst_abs_error"]) if checked["held_out"]["rows"] else None,
        "bound_rows": checked["bounds"]["rows"],
        "bound_rows_within": checked["bounds"]["within"],
        "over_bound": checked["bounds"]["violations"],
    }
    lobo = provenance.get("leave_one_benchmark_out")
    if lobo and lobo.get("rows"):
        provenance["validation"].update(
            leave_one_benchmark_out_rows=lobo["rows"], leave_one_benchmark_out_median_abs=lobo["median_abs"],
            leave_one_benchmark_out_worst_abs=lobo["worst_abs"])
    lomo = provenance.get("leave_one_model_out")
    if lomo and lomo.get("rows"):
        provenance["validation"].update(
            leave_one_model_out_rows=lomo["rows"], leave_one_model_out_median_abs=lomo["median_abs"],
            leave_one_model_out_worst_abs=lomo["worst_abs"])
    provenance["validated_range"] = validated_range([r for r in runs if row_key(r) not in NOT_FITTED]
                                                    + (llm_fitter.rows if llm else []))
    return cal


def _llm_stage(first, declared, network, progress, previous):
    """The second stage (:func:`~wus_sim.validation.fit_tiering.llm_stage`), started where the last one ended."""
    start = previous[1].x if previous else None
    return llm_stage(first, declared, network, FITTABLE_PARAMS, start=start, progress=progress)


def _compute_model(compute_model):
    """``{"compute_model": ...}`` to declare in the calibration (``None``: shape, the shipped model), or
    ``{}`` for flops (ComputeParams' own default)."""
    from ..model.compute import COMPUTE_MODELS

    if compute_model is None:
        compute_model = "shape"
    if compute_model not in COMPUTE_MODELS:
        raise ConfigError(f"must be one of {', '.join(COMPUTE_MODELS)}", key_path="compute_model",
                          value=compute_model)
    return {} if compute_model == "flops" else {"compute_model": compute_model}


def _fit_names(fit, model=None):
    """The fitted names: *fit* (names, or one comma-separated string) checked, else the shipped set
    (of the compute model in *model*, :func:`_compute_model`)."""
    which = (model or {}).get("compute_model", "flops")
    if fit is None:
        return tuple(SHAPE_FIT_PARAMS if which == "shape" else FIT_PARAMS)
    names = tuple(n.strip() for n in fit.split(",")) if isinstance(fit, str) else tuple(fit)
    unknown = [n for n in names if n not in FITTABLE_PARAMS]
    if unknown or not names:
        raise ConfigError(f"is not a fitted parameter; name one or more of {', '.join(FITTABLE_PARAMS)}",
                          key_path="fit", value=",".join(unknown) or fit)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # said as such: 'names at most N different parameters' read wrong for two names
        raise ConfigError("names a parameter twice; name each at most once", key_path="fit", value=twice[0])
    idle = [n for n in names for other, own in MODEL_PARAMS.items() if other != which and n in own]
    if idle:
        raise ConfigError(f"is read only by another compute model than {which} (compute_model): fitting it "
                          "would move nothing", key_path="fit", value=",".join(idle))
    if len(names) > MAX_FITTED:
        raise ConfigError(f"names {len(names)} parameters; name at most {MAX_FITTED} different ones",
                          key_path="fit", value=",".join(names))
    return names


def write_calibration(calibration, path, *, named_by=None):
    """Write *calibration* as a calibration YAML (the format :func:`load_calibration` reads),
    atomically (:func:`wus_sim.inputs.writes.write_atomic`; *named_by*: the option that named it)."""
    import yaml

    doc = {"id": calibration.id, "params": calibration.params}
    if calibration.stacks:
        doc.update(stacks=calibration.stacks, default_stack=calibration.default_stack)
    doc["provenance"] = calibration.provenance
    prov = calibration.provenance
    if prov.get("rows_declared", True):
        which = "every training-only row of the shipped tables, bound rows as upper bounds"
    elif "sha256" in (prov.get("data") or {}):
        which = f"rows of {prov['data'].get('name', 'a table of measured runs')}"
    else:
        which = "rows chosen with --rows, not the declared ones"
    header = ("# Calibrated chip parameters, written by `wus-sim calibrate`; edit by re-running it.\n"
              f"# Fitted to {which} (provenance.rows); every other measured row is held out.\n"
              "# stacks: the fixed costs fitted per software stack (a point's software_stack picks one).\n")
    from ..inputs.writes import write_atomic

    text = header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    write_atomic(path, text, what="calibration file", named_by=named_by)
