"""Results rows: every flat column of a simulated point is built here.

:func:`simulate_point` runs one experiment point (the keys of
:data:`wus_sim.training.parameters.params.POINT_KEYS`) through :func:`wus_sim.training.step.simulate_strategies` and
flattens the outcome into one row per strategy: the point's keys, the strategy's result,
the slice's facts (:func:`slice_columns`) and every value the model actually used
(:func:`used_values`). The columns, their units and meanings are documented in
:mod:`wus_sim.experiments.results`.
"""

import math

from ..model.calibration import load_calibration, matrix_efficiency
from ..inputs.errors import ConfigError, InfeasibleError, WusError, did_you_mean, listed
from ..inputs.memo import memos_on
from ..hardware.multislice import load_multislice
from ..training.parameters.params import POINT_KEYS, check_param, check_point_value, default_of
from ..model.memory import resolve_gather_prefetch
from ..training.update.planner import DEFAULT_BUCKET_BYTES
from ..model.validated_range import point_validated_range
from ..training.bands import point_bands
from ..training.cost import billed_chips, chip_price, cost_columns
from ..training.step import OPTION_POINT_KEYS, StepOptions, bidirectional_for, simulate_strategies, speedups, strategies_named
from ..training.step import fully_sharded_over_sharded, speedups_if_replicated_fit
from ..inputs.units import GB, MiB
from ..inputs.units import grad_dtype_of_bytes

__all__ = ["simulate_point", "used_values", "slice_columns"]


def slice_columns(topology):
    """The slice's columns of a results row."""
    return {"replicas": topology.num_replicas, "cores": topology.num_cores, "chips": topology.num_chips,
            "chip": topology.chip.name, "dims": topology.shape_str, "ndim": topology.ndim,
            "wrap": ",".join("T" if w else "F" for w in topology.wrap)}


def _check_keys(point):
    """Unknown and missing keys are errors: an API caller's typo (``per_replica_bach``) would
    otherwise run the default silently, and a missing workload was a bare KeyError.

    Every value goes through its entry of POINT_KEYS, as an experiment file's and the command
    line's do (``per_replica_batch=1.5``, ``link_GBps=True``, ``'8'``, ``inf``, ``10**400``: one
    ConfigError naming the key); a named input (workload, topology, optimizer, calibration) must
    be text, and is checked when it is loaded. Returns the point with whole numbers as ints."""
    if not isinstance(point, dict):
        raise ConfigError("must be a mapping of point parameters (workload, topology, ...)", key_path="point",
                          value=point)
    unknown = sorted((k for k in point if k not in POINT_KEYS), key=str)
    if unknown:
        raise ConfigError(f"is not a point parameter{did_you_mean(unknown[0], POINT_KEYS)}; known: "
                          f"{listed(POINT_KEYS, 450, cut=450)}", key_path=str(unknown[0]),
                          show_value=False)
    for name, param in POINT_KEYS.items():
        if param.required and point.get(name) is None:
            raise ConfigError("is required: a point names its workload and topology", key_path=name,
                              show_value=False)
    out = dict(point)
    last, last_out = _LAST_CHECKED if memos_on() else ({}, {})
    for name, value in point.items():
        if value.__class__ in _SCALARS and name in last:  # passed at the last point: the same out
            before = last[name]
            if before.__class__ is value.__class__ and before == value:
                out[name] = last_out[name]
                continue
        param = POINT_KEYS[name]
        if param.kind == "name" and name not in ("failed_links", "slow_links", "mesh", "dcn_mesh", "maxtext"):
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"must be {param.rule()}", key_path=name, value=value)
            continue
        checked = check_param(param, value, key_path=name)
        if (param.kind == "int" or name in ("mesh", "dcn_mesh", "maxtext")) and checked is not None:
            out[name] = checked  # a mesh mapping (a MaxText run's keys) as its text: the row's column
    if memos_on():
        _LAST_CHECKED[:] = (dict(point), out)
    return out


_LAST_CHECKED = [{}, {}]
"""The last point :func:`_check_keys` passed and what it returned: a sweep's next point differs
in one or two values, and a value equal to the last one's (same type) passed the same check."""

_SCALARS = (str, int, float, bool, type(None))


def simulate_point(point):
    """Simulate one experiment point; returns one flat record per strategy.

    *point* has the keys of :data:`wus_sim.training.parameters.params.POINT_KEYS` (missing ones
    take their defaults). A point that does not fit in HBM gives rows with
    ``status='infeasible'``; bad parameters raise (the runner records them as
    ``status='error'``).
    """
    custom_mesh = None  # MaxText's ring layout of the mesh: a MaxText run's custom_mesh sets it
    if isinstance(point, dict) and point.get("maxtext") is not None:
        from ..training.parameters.maxtext_point import point_with_maxtext

        point, custom_mesh = point_with_maxtext(point, POINT_KEYS)  # its point keys (workload, mesh, ...) from the run
    p = _check_keys(point)
    megacore = p.get("megacore")
    if megacore is None:  # the chip's default (chips.yaml megacore): a chip on v4 and v5p, as JAX counts devices
        from ..hardware.topology_files import chip_megacore

        megacore = p.get("cores_per_chip") is None and chip_megacore(load_multislice(p["topology"])[0])
    else:
        megacore = check_point_value("megacore", megacore)
    from ..hardware.mesh import Placement
    from ..hardware.mesh_spec import has_fill

    # an axis of size -1 (the rest) is filled by the mesh step, which knows the slice: the
    # placement checks the others (and takes the slices from a DCN mesh without one)
    placement = Placement(megacore=megacore, spatial_ways=p.get("spatial_ways"), slices=p.get("slices"),
                          mesh=None if has_fill(p.get("mesh")) else p.get("mesh"),
                          dcn_mesh=None if has_fill(p.get("dcn_mesh")) else p.get("dcn_mesh"))
    topology, multislice = load_multislice(
        p["topology"], slices=placement.slices, dcn_GBps=p.get("dcn_GBps"), dcn_latency_us=p.get("dcn_latency_us"),
        link_GBps=p.get("link_GBps"), hop_latency_us=p.get("hop_latency_us"),
        wraparound=p.get("wraparound"), cores_per_chip=p.get("cores_per_chip"), megacore=megacore,
        failed_links=p.get("failed_links"), slow_links=p.get("slow_links"), seed=p.get("seed"))
    calibration = load_calibration(p.get("calibration"))
    bucket_MiB = p.get("bucket_MiB")
    # a missing or null key takes the table's default (StepOptions' defaults are the same entries)
    given = {name: p[name] for name in OPTION_POINT_KEYS if p.get(name) is not None}
    options = StepOptions(
        **given,
        bucket_bytes=DEFAULT_BUCKET_BYTES if bucket_MiB is None else int(bucket_MiB * MiB),
        calibration=calibration, custom_mesh=custom_mesh,
        compute=calibration.compute_params(stack=p.get("software_stack"), mxu_efficiency=p.get("mxu_efficiency")),
    )
    strategies = strategies_named(p.get("strategy") or default_of("strategy"))

    def simulate(which):
        if p.get("mesh") is not None or p.get("dcn_mesh") is not None:
            from ..training.parallelism.mesh_step import simulate_mesh

            return simulate_mesh(p["workload"], multislice or topology, p.get("optimizer"), which, mesh=p.get("mesh"),
                                 dcn_mesh=p.get("dcn_mesh"), per_replica_batch=p.get("per_replica_batch"),
                                 global_batch=p.get("global_batch"), options=options)
        return simulate_strategies(p["workload"], multislice or topology, p.get("optimizer"), which,
                                   per_replica_batch=p.get("per_replica_batch"), global_batch=p.get("global_batch"),
                                   options=options, spatial_ways=p.get("spatial_ways"))

    failed = {}  # strategy -> (status, why) where it cannot run and the others can
    try:
        runs = [simulate(strategies)]
    except WusError:
        if len(strategies) == 1:
            raise
        # One strategy's error (recursive-doubling has no reduce-scatter, so only the
        # replicated update can use it) must not take the others' rows with it.
        runs = []
        for s in strategies:
            try:
                runs.append(simulate((s,)))
            except WusError as exc:
                failed[s] = ("infeasible" if isinstance(exc, InfeasibleError) else "error", str(exc))
        if not runs:
            raise
    run = runs[0]
    results = {s: r for one in runs for s, r in one.results.items()}
    if run.mesh is not None:  # a mesh without a data axis runs fully-sharded, whatever was asked
        strategies = tuple(dict.fromkeys(list(results) + list(failed)))
    up = speedups(results)
    if_fit = speedups_if_replicated_fit(results)
    price = chip_price(topology.chip, p.get("price_usd_per_chip_hour"))
    chips = billed_chips(topology, 1 if multislice is None else multislice.slices)
    checked = point_validated_range(calibration, topology, run, options)
    bands = point_bands(calibration, topology, run, options, results) or {"strategies": {}, "speedups": {}}
    records = []
    for s in strategies:
        if s in failed:
            status, why = failed[s]
            records.append({**p, "strategy": s, "status": status, "error": why})
            continue
        res = results[s]
        rec = dict(p)
        rec.update(res.to_record())
        if run.mesh is not None:
            rec.update({part: res.breakdown.get(part, math.nan) for part in ("tensor_comm_s", "expert_comm_s",
                                                                             "context_comm_s", "pipeline_bubble_s",
                                                                             "pipeline_comm_s", "fsdp_comm_s",
                                                                             "data_comm_s")})
        rec.update(slice_columns(topology))
        rec.update({
            "per_replica_batch": run.per_replica_batch, "global_batch": run.global_batch,
            # data-parallel replicas: fewer than the cores when the MLPerf run partitions spatially
            "optimizer": run.optimizer, "replicas": run.replicas, "spatial_ways": run.spatial_ways,
            "megacore": megacore,  # the value used: null asks for the chip's default
            "replicas_per_slice": run.replicas_per_slice,
            "params": run.params,
            "hbm_bytes": float(topology.hbm_bytes_per_replica),
            "speedup": up.get(s, math.nan),
            "speedup_if_replicated_fit": if_fit.get(s, math.nan),
            "speedup_over_sharded": fully_sharded_over_sharded(results) if s == "fully-sharded" else math.nan,
            "step_time_s_low": bands["strategies"].get(s, (math.nan, math.nan))[0],
            "step_time_s_high": bands["strategies"].get(s, (math.nan, math.nan))[1],
            "speedup_low": bands["speedups"].get(s, (math.nan, math.nan))[0],
            "speedup_high": bands["speedups"].get(s, (math.nan, math.nan))[1],
            "band_kind": bands.get("kind", ""),
            "band_why": "; ".join(bands.get("why", ())),
            **_throughput(next(one for one in runs if s in one.results), s, topology),
            **_cost(price, chips, res.step_time_s, run),
            "inside_validated_range": checked["inside"],
            "outside_validated_range": "; ".join(checked["outside"]),
        })
        rec.update(used_values(topology, options, run.plan, multislice))
        rec["price_usd_per_chip_hour"] = math.nan if price.usd_per_chip_hour is None else price.usd_per_chip_hour
        records.append(rec)
    return records


def _cost(price, chips, step_time_s, run):
    """The row's cost columns (NaN where there is no price or no step time)."""
    whole = getattr(run.mesh, "workload", None) or run.plan.workload
    cols = cost_columns(price, chips, step_time_s, run.global_batch, whole)
    return {k: math.nan if v is None else v for k, v in cols.items()}


def _throughput(run, strategy, topology):
    """The row's MFU, TFLOP/s and tokens/s per device (MaxText's units; NaN where it has no time)."""
    mf = run.throughput(strategy, topology)
    keys = ("mfu", "tflops_per_s_per_device", "tokens_per_s_per_device")
    return dict.fromkeys(keys, math.nan) if mf is None else {k: mf.to_dict()[k] for k in keys}


def used_values(topology, options, plan, multislice=None):
    """Every parameter value the point actually ran with: point keys left null get the
    value the model chose, plus the calibrated and datasheet figures behind the times.
    The DCN figures only with a *multislice* (one slice uses none)."""
    slices = {"slices": 1, "shard_across_slices": options.shard_across_slices}
    if multislice is not None:
        slices.update(slices=multislice.slices, dcn_GBps=multislice.dcn_Bps / GB,
                      dcn_latency_us=multislice.dcn_latency_s * 1e6)

    if topology.chip.peak_int8_ops is not None:  # a chip without one leaves the column empty
        slices["peak_int8_TOPs"] = topology.chip.peak_int8_ops / 1e12
    links = sorted(set(topology.axis_link_Bps))
    c = options.compute
    return {
        "link_GBps": links[0] / GB if len(links) == 1 else min(links) / GB,
        "hop_latency_us": topology.hop_latency_s * 1e6,
        "wraparound": all(topology.wrap) if len(set(topology.wrap)) == 1 else ",".join(
            "true" if w else "false" for w in topology.wrap),  # per axis also in the `wrap` column
        "cores_per_chip": topology.cores_per_chip, "remat": options.remat, "quantization": options.quantization,
        "remat_policy": options.remat_policy, "collective_matmul": options.collective_matmul,
        "activation_model": options.activation_model,
        "algorithm": options.algorithm, "bidirectional": bidirectional_for(options),
        "routing": options.routing,
        "grad_dtype": grad_dtype_of_bytes(plan.workload.grad_bytes),
        "bucket_MiB": options.bucket_bytes / MiB,
        "mxu_efficiency": matrix_efficiency(c),
        "bn_group_replicas": options.bn_group_replicas, "small_allreduce_algorithm": options.small_allreduce_algorithm,
        "gather_prefetch": resolve_gather_prefetch(plan, options.gather_prefetch), "keep_gathered_weights": options.keep_gathered_weights,
        "calibration": options.calibration_id,
        "op_overhead_s": c.op_overhead_s, "step_overhead_s": c.step_overhead_s,
        "elementwise_fwd_bytes": c.elementwise_fwd_bytes, "elementwise_bwd_bytes": c.elementwise_bwd_bytes,
        "activation_hbm_efficiency": c.activation_hbm_efficiency, "update_hbm_efficiency": c.update_hbm_efficiency,
        "spatial_efficiency": c.spatial_efficiency, "backward_flops_ratio": c.backward_flops_ratio,
        "peak_TFLOPs": topology.chip.peak_flops / 1e12, "hbm_GBps": topology.chip.hbm_Bps / GB,
        "onchip_GBps": topology.onchip_Bps / GB,
        **slices,
    }
