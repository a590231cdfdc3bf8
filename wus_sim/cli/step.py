"""``wus-sim step WORKLOAD --topology T``: one training step, replicated, sharded and/or fully-sharded update.

Prints the steady-state step time, its breakdown (forward, backward, exposed
communication, update, optimizer reductions, idle) and per-replica memory.
With ``--strategy both`` (the default: replicated and sharded) also the speedup of
sharding; ``--strategy all`` adds ``fully-sharded`` and the speedup of each strategy
over replicated.

``--json`` has one shape whatever ``--strategy`` is, described by the JSON Schema
``wus_sim/schemas/step.v1.json`` (shipped in the package; ``schema_version`` names it):
the run's header (workload, topology, optimizer, replicas, batches, ...), ``strategies``
(one object per strategy run, keyed by its name: ``status``, ``error``, ``step_time_s``,
``breakdown``, ``memory_bytes``, ``collectives``), ``speedup`` (replicated over sharded step
time; null unless both ran), ``speedups`` (``{strategy: replicated over its step time}`` for
every strategy run but replicated; null when one strategy ran), ``calibration`` (its id) and
``parameters`` (every model value the step ran with, none left null).

Deprecated aliases, kept for one release (0.2 drops them): the top-level ``strategy``,
``status``, ``error``, ``step_time_s``, ``breakdown``, ``memory`` and ``collectives`` copy the
one strategy run, or under ``both`` the sharded one; ``memory`` inside a strategy object
copies its ``memory_bytes``. ``deprecated_aliases`` maps each top-level alias to what it copies.
``--trace FILE`` writes the simulated steps as Chrome trace-event JSON (Perfetto, chrome://tracing).
"""

import argparse
import math
import sys

from ..inputs.strict_json import dumps_strict
from ..training.parameters.params import SMALL_ALLREDUCE_ALGORITHMS, STRATEGY_CHOICES, default_of
from ..inputs.units import GRAD_DTYPE_SPELLINGS
from .options import (add_fault_options, add_flag, add_json_option, add_mesh_options, add_placement_options,
                      add_software_stack_option, fault_option_errors, fault_values, mesh_placement,
                      placement_option_errors, software_stack_value)

from .step_lines import _REMAT_LINES, _checked, _checked_line, _dcn_line, if_fit_report, throughput_columns
from .cost_lines import add_price_option, add_step_costs, step_cost_lines
from .maxtext_options import add_maxtext_options, apply_maxtext, report_maxtext, with_maxtext_lines

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "step", help="simulate a training step with a replicated, sharded and/or fully-sharded weight update",
        description="Simulate consecutive training steps of WORKLOAD on a TPU slice and report the "
                    "steady-state step time, its breakdown and memory per replica.")
    p.add_argument("workload", metavar="WORKLOAD", nargs="?", default=None,
                   help="workload name or YAML path (or --maxtext's model_name)")
    p.add_argument("--topology", "-t", required=True, metavar="T",
                   help="topology name (tpu-v3-2048), YAML path or inline spec (torus:32x32)")
    p.add_argument("--optimizer", "-o", metavar="O", help="optimizer (default: the workload's)")
    add_maxtext_options(p)
    p.add_argument("--strategy", "-s", choices=STRATEGY_CHOICES, default=default_of("strategy"),
                   help=f"update strategy: one, both (replicated and sharded) or all (default {default_of('strategy')})")
    p.add_argument("--per-replica-batch", type=int, metavar="B",
                   help="examples per replica (default: the MLPerf v0.6 run on this slice, else the workload's)")
    p.add_argument("--global-batch", type=int, metavar="G", help="examples per step over all replicas")
    p.add_argument("--algorithm", default=default_of("algorithm"), metavar="A",
                   help="collective algorithm: ring, bidir-ring, 2d, 2d-split, halving-doubling, "
                        "recursive-doubling (all-reduce only: --strategy replicated) "
                        f"(default {default_of('algorithm')})")
    p.add_argument("--bidirectional", action=argparse.BooleanOptionalAction, default=default_of("bidirectional"),
                   help="ring phases in both directions at once (default for ring algorithms; a mesh axis keeps "
                        "its folded ring, which already uses both link directions; --no-bidirectional: one direction)")
    p.add_argument("--routing", default=default_of("routing"), metavar="R",
                   help=f"network routing: cut-through or store-and-forward (default {default_of('routing')})")
    p.add_argument("--grad-dtype", choices=GRAD_DTYPE_SPELLINGS, help="gradient dtype on the wire")
    p.add_argument("--bucket-MiB", type=float, dest="bucket_MiB", metavar="F", help="fusion bucket size, MiB")
    p.add_argument("--overlap-grad-reduce", action=argparse.BooleanOptionalAction,
                   default=default_of("overlap_grad_reduce"),
                   help="reduce each bucket's gradients as soon as backward has produced them "
                        "(--no-overlap-grad-reduce: only after backward has finished)")
    p.add_argument("--overlap-all-gather", action=argparse.BooleanOptionalAction,
                   default=default_of("overlap_all_gather"),
                   help="sharded: all-gather weights during the next forward (--no-overlap-all-gather: at "
                        "the end of the step)")
    p.add_argument("--gather-prefetch", type=int, default=default_of("gather_prefetch"), dest="gather_prefetch",
                   metavar="K",
                   help="fully-sharded: buckets whose weight all-gather may run ahead of the compute (default: a "
                        "layer ahead, the buckets that issue the next layer's gathers when a layer starts)")
    add_flag(p, "--keep-gathered-weights",
                   help="fully-sharded: keep forward's gathered weights for backward (one gather per bucket, "
                        "more memory)")
    add_placement_options(p)
    add_mesh_options(p)
    p.add_argument("--link-GBps", type=float, dest="link_GBps", metavar="F", help="ICI link bandwidth, GB/s")
    p.add_argument("--hop-latency-us", type=float, dest="hop_latency_us", metavar="F", help="per-hop latency, us")
    p.add_argument("--slices", type=int, metavar="N",
                   help="multislice: N identical slices of T joined by the data-center network (default: the "
                        "topology file's multislice section, else 1)")
    p.add_argument("--dcn-GBps", type=float, dest="dcn_GBps", metavar="F",
                   help="multislice: DCN bandwidth per chip, one direction, GB/s (default: the chip's)")
    p.add_argument("--dcn-latency-us", type=float, dest="dcn_latency_us", metavar="F",
                   help="multislice: latency of one DCN exchange, us (default 10, an assumption)")
    p.add_argument("--shard-across-slices", action=argparse.BooleanOptionalAction,
                   default=default_of("shard_across_slices"),
                   help="multislice, sharded update: shard over every replica of every slice (default); "
                        "--no-shard-across-slices: within each slice only, all-reducing the shard over the DCN")
    add_fault_options(p)
    p.add_argument("--mxu-efficiency", type=float, metavar="F",
                   help="fraction of matrix-unit peak reached (default: the calibration's)")
    p.add_argument("--calibration", metavar="C",
                   help="calibrated chip parameters: 'default' (shipped), 'none' (uncalibrated physics) or a YAML path")
    add_software_stack_option(p)
    add_price_option(p)
    p.add_argument("--bn-group-replicas", type=int, default=default_of("bn_group_replicas"), metavar="K",
                   help="cross-replica batch norm over groups of K replicas (default 1: local)")
    p.add_argument("--small-allreduce-algorithm", default=default_of("small_allreduce_algorithm"), metavar="A",
                   choices=SMALL_ALLREDUCE_ALGORITHMS, help="algorithm of the latency-bound all-reduces (batch-norm "
                   "statistics, LARS/LAMB norms): auto (default: the fastest as simulated), ring, halving-doubling, "
                   "recursive-doubling")
    p.add_argument("--steps", type=int, default=default_of("steps"), metavar="K",
                   help=f"consecutive steps simulated (>= 2; default {default_of('steps')})")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome trace-event JSON of the simulated steps")
    add_json_option(p)
    return p


def run(args):
    from ..model.calibration import load_calibration
    from ..training.step import bidirectional_for, simulate_strategies, speedup, speedups, strategies_named
    from ..hardware.multislice import load_multislice

    apply_maxtext(args)
    placement = mesh_placement(args)
    with fault_option_errors(), placement_option_errors():
        topology, multislice = load_multislice(
            args.topology, slices=placement.slices, dcn_GBps=args.dcn_GBps, dcn_latency_us=args.dcn_latency_us,
            link_GBps=args.link_GBps, hop_latency_us=args.hop_latency_us, megacore=args.megacore, **fault_values(args))
    calibration = load_calibration(args.calibration)
    stack = software_stack_value(args)
    if args.trace:  # before the simulation: a trace file that cannot be written is known now
        from ..inputs.files import check_writable_file

        check_writable_file(args.trace, what="trace file", named_by="--trace")
    with placement_option_errors():
        options = _step_options(args, calibration, stack)
    strategies = strategies_named(args.strategy)
    with placement_option_errors():
        if placement.mesh is not None or placement.dcn_mesh is not None:
            from ..training.parallelism.mesh_step import simulate_mesh
            from .step_mesh import mesh_option_errors

            with mesh_option_errors():
                run_ = simulate_mesh(args.workload, multislice or topology, args.optimizer, strategies,
                                              mesh=placement.mesh, dcn_mesh=placement.dcn_mesh,
                                              per_replica_batch=args.per_replica_batch,
                                              global_batch=args.global_batch, options=options)
        else:
            run_ = simulate_strategies(args.workload, multislice or topology, args.optimizer, strategies,
                                                per_replica_batch=args.per_replica_batch,
                                                global_batch=args.global_batch, options=options,
                                                spatial_ways=args.spatial_ways)
    results, meta = run_
    if args.trace:
        from ..training.timeline.trace import write_trace

        from functools import lru_cache

        from ..collectives import phase_times

        @lru_cache(maxsize=None)  # every step repeats the same bucket sizes
        def ici_phases(op, nbytes):
            return phase_times(topology, op, args.algorithm, nbytes, bidirectional=bidirectional_for(options),
                               routing=args.routing)

        def phases(op, nbytes):
            if multislice is None:
                return ici_phases(op, nbytes)
            return _multislice_phases(multislice, op, nbytes, ici_phases, options.shard_across_slices)

        write_trace(args.trace, {f"{s} update": r.timeline for s, r in results.items() if r.timeline}, phases,
                    network="ICI" if multislice is None else "ICI + DCN")
        # stderr: stdout may be the --json document
        print(f"wus-sim step: trace written to {args.trace} (open it in https://ui.perfetto.dev)", file=sys.stderr)
    report = _report(args, multislice or topology, results, meta, speedup(results), speedups(results))
    report["calibration"] = options.calibration_id
    for s, per in report["strategies"].items():
        per.update(throughput_columns(run_, s, topology))
    add_step_costs(report, args, run_, topology, multislice)
    if meta.get("mesh") is not None:
        report["mesh"] = meta["mesh"].to_dict(topology)
    report["checked"] = _checked(calibration, overridden=args.mxu_efficiency is not None)
    from ..model.validated_range import point_validated_range
    from ..training.bands import point_bands

    report["validated_range"] = point_validated_range(calibration, topology, meta, options)
    _add_bands(report, point_bands(calibration, topology, meta, options, results))
    from ..experiments.records import used_values

    report["parameters"] = used_values(topology, options, meta["plan"], multislice)
    from ..model.calibration import matrix_efficiency
    from ..model.ops.precision import precision_line

    report["quantization_note"] = None if options.quantization == "none" else precision_line(
        topology, options.quantization, matrix_efficiency(options.compute), options.calibration_id)
    report.update(if_fit_report(results))
    from ..training.small_allreduce import small_allreduce_report

    report["small_allreduces"] = small = small_allreduce_report(meta["plan"], topology, options,
                                                                bidirectional=bidirectional_for(options))
    if multislice is not None:
        # the sharded update's norms span every slice: time them as the step does, DCN phase
        # included (batch-norm groups stay within a slice)
        from ..training.step import small_allreduce_s

        for x in small:
            if x["what"].startswith("sharded update"):
                x["group_cores"] *= multislice.slices
                x["time_s"] = small_allreduce_s(topology, x["nbytes"], options, multislice)
    if args.json:
        print(dumps_strict(report_maxtext(report, args), indent=1, default=_json_default))
    else:
        # the workload's name, not the path it was given by (--json keeps what was given)
        from ..hardware.topology_files import megacore_hint

        # the whole model (a mesh step's plan holds a device's share: 1/T of a layer, 1/C of a sequence)
        w = getattr(meta.get("mesh"), "workload", None) or meta["plan"].workload
        print(with_maxtext_lines(_text({**report, "workload": w.name, "megacore_hint": megacore_hint(topology),
                                        "cost_of": w, "flops_unit": w.flops_unit or w.example_unit,
                                        "per_example": f"{w.units_per_example:,} {w.flops_unit}s per "
                                        f"{w.example_unit}" if w.units_per_example > 1 else None}, multislice), args))
    return 0


def _multislice_phases(multislice, op, nbytes, ici_phases, shard_across_slices):
    """The phases of a hierarchical collective for the trace: each in-slice part's own
    phases (``slice ...``; the part whole where it has none to draw), the DCN part as one."""
    from ..hardware.multislice import dcn_time_s, hierarchical_phases

    out = []
    for network, phase_op, n in hierarchical_phases(op, nbytes, shard_across_slices=shard_across_slices):
        if network == "dcn":
            out.append((f"DCN {phase_op}", dcn_time_s(multislice, phase_op, n)))
            continue
        parts = ici_phases(phase_op, n)
        if parts is None:
            return None  # an in-slice part without exact phases: draw none (as for one slice)
        out.extend((f"slice {label}", t) for label, t in parts)
    return out


def _json_default(x):
    return float(x)


STEP_JSON_SCHEMA_VERSION = 1
"""Version of ``step --json``'s shape; its schema is ``wus_sim/schemas/step.v{N}.json``."""

_ALIASES = ("strategy", "status", "error", "step_time_s", "breakdown", "memory", "collectives")
"""Top-level keys of the old shape, kept as copies of one strategy's values for one release."""


def _strategy_report(res):
    m = res.memory
    memory_bytes = {part: float(getattr(m, part)) for part in
                    ("weights", "gradients", "slots", "padding", "activations", "collective_buffers", "peak")}
    return {
        "status": res.status,
        "error": res.error or None,
        "step_time_s": None if math.isnan(res.step_time_s) else res.step_time_s,
        "breakdown": {k: (None if math.isnan(v) else v) for k, v in res.breakdown.items()},
        "memory_bytes": memory_bytes,
        "memory": dict(memory_bytes),  # deprecated alias of memory_bytes
        "collectives": res.work.summary(),
    }


def _report(args, topology, results, meta, up, ups):
    per = {s: _strategy_report(r) for s, r in results.items()}
    head = {
        "schema_version": STEP_JSON_SCHEMA_VERSION,
        "workload": args.workload, "topology": topology.name, "optimizer": meta["optimizer"],
        "replicas": meta["replicas"], "spatial_ways": meta["spatial_ways"],
        "per_replica_batch": meta["per_replica_batch"], "global_batch": meta["global_batch"],
        "params": meta["params"], "algorithm": args.algorithm, "routing": args.routing,
    }
    several = len(per) > 1
    speedup = None if math.isnan(up) else up
    speedups = {s: (None if math.isnan(v) else v) for s, v in ups.items()} if several else None
    # The old shape's top level: the one strategy run, or (ambiguously) the sharded one of several.
    source = "sharded" if several else next(iter(per))
    aliases = {"strategy": args.strategy,
               **{k: per[source][k] for k in _ALIASES if k != "strategy"}}
    where = {k: f"strategies.{source}.{k}" for k in _ALIASES if k != "strategy"}
    where.update(strategy="--strategy", memory=f"strategies.{source}.memory_bytes")
    return {**head, "strategies": per, "speedup": speedup, "speedups": speedups, **aliases,
            "deprecated_aliases": where}


def _add_bands(report, bands):
    """``step_time_s_low``/``_high`` per strategy, ``speedup_low``/``_high`` (null where the
    calibration states no uncertainty or where ``speedup`` is null)."""
    def num(x):
        return None if x is None or not math.isfinite(x) else float(x)

    if bands:
        report["band"] = {"kind": bands["kind"], "why": list(bands["why"])}
    for s, per in report["strategies"].items():
        low, high = (bands or {}).get("strategies", {}).get(s, (None, None))
        per["step_time_s_low"], per["step_time_s_high"] = num(low), num(high)
    low, high = (bands or {}).get("speedups", {}).get("sharded", (None, None))
    if report.get("speedup") is None:
        low = high = None
    report["speedup_low"], report["speedup_high"] = num(low), num(high)


def _fmt_t(t):
    from ..inputs.units import format_time

    return "-" if t is None else format_time(t)


def _text(rep, multislice=None):
    from ..inputs.units import format_bytes

    per = rep["strategies"]
    names = list(per)
    lines = [f"step: {rep['workload']} with {rep['optimizer']} on {rep['topology']}: {rep['replicas']} replicas, "
             f"per-replica batch {rep['per_replica_batch']} (global {rep['global_batch']}), "
             + (f"{rep['per_example']}, " if rep.get("per_example") else "")
             + f"{rep['params']:,} parameters, {rep['algorithm']} collectives, calibration {rep['calibration']}",
             _checked_line(rep)]
    if multislice is not None:
        lines.append(_dcn_line(multislice))
    p = rep.get("parameters") or {}
    if p.get("remat", "none") != "none":
        lines.append(f"  remat {p['remat']}: {_REMAT_LINES.get(p['remat'], '')}")
    if p.get("remat_policy"):
        lines.append(f"  remat policy {p['remat_policy']} (MaxText's): each transformer block keeps its input (in host "
                     "memory if offloaded) and the tensors the policy names, offloaded ones in host memory, and "
                     "recomputes the rest in backward (docs/precision-and-remat.md)")
    if rep.get("quantization_note"):
        lines.append("  " + rep["quantization_note"])
    if rep.get("megacore_hint"):
        lines.append(f"  note: {rep['megacore_hint']}")
    if rep.get("mesh"):
        from .step_mesh import mesh_lines

        lines += mesh_lines(rep["mesh"])
    w = 26
    if "fully-sharded" in per:
        p = rep["parameters"]
        lines.append(f"  fully-sharded: gather prefetch {p['gather_prefetch']} bucket(s)"
                     + (", weights kept from forward to backward" if p["keep_gathered_weights"] else ""))
    lines.append("  " + "".ljust(w) + "".join(n.rjust(16) for n in names))
    lines.append("  " + "step time".ljust(w) + "".join(_fmt_t(per[n]["step_time_s"]).rjust(16) for n in names))
    if any(per[n].get("step_time_s_low") is not None for n in names):
        def rng(p):
            if p.get("step_time_s_low") is None:
                return "-"
            lo, hi = p["step_time_s_low"], p["step_time_s_high"]
            scale, unit = (1, "s") if hi >= 1 else (1e3, "ms") if hi >= 1e-3 else (1e6, "us")
            return f"{lo * scale:.3g}-{hi * scale:.3g} {unit}"   # one unit: fits the 16-wide column
        kind = (rep.get("band") or {}).get("kind", "calibration")
        lines.append("  " + f"  95% band ({kind})".ljust(w) + "".join(rng(per[n]).rjust(16) for n in names))
        if kind == "extrapolated":
            lines.append("    extrapolated: " + "; ".join(rep["band"]["why"]) + " (values fitted elsewhere moved "
                         "over their declared ranges; docs/model-error.md)")
    if any(per[n].get("mfu") is not None for n in names):
        def pct(x):
            return "-" if x is None else f"{100 * x:.1f} %"

        def num(x, fmt):
            return "-" if x is None else format(x, fmt)

        unit = rep.get("flops_unit") or "token"
        lines.append("  " + "  MFU (MaxText's)".ljust(w) + "".join(pct(per[n].get("mfu")).rjust(16) for n in names))
        lines.append("  " + "  TFLOP/s per device".ljust(w)
                     + "".join(num(per[n].get("tflops_per_s_per_device"), ".1f").rjust(16) for n in names))
        lines.append("  " + f"  {unit}s/s per device".ljust(w)
                     + "".join(num(per[n].get("tokens_per_s_per_device"), ",.0f").rjust(16) for n in names))
    labels = {"fwd_s": "forward", "bwd_s": "backward", "batch_norm_s": "batch-norm all-reduces",
              "exposed_comm_s": "exposed comm", "update_s": "update", "extra_reduction_s": "optimizer reductions",
              "idle_s": "idle", "op_launch_s": "op fixed costs", "host_loop_s": "host loop share",
              "overhead_s": "step overhead"}
    if rep.get("mesh"):
        m = rep["mesh"]
        experts, stages = (m["mesh"].get(a, 1) * ((m.get("dcn_mesh") or {}).get(a, 1)) > 1 for a in ("expert", "pipeline"))
        labels.update({"tensor_comm_s": "tensor-parallel comm",
                       **({"expert_comm_s": "expert all-to-alls"} if experts else {}),
                       **({"context_comm_s": "context K/V comm"} if m["mesh"].get("context", 1) > 1 else {}),
                       **({"pipeline_bubble_s": "pipeline bubble", "pipeline_comm_s": "pipeline comm"} if stages else {}),
                       "fsdp_comm_s": "  of exposed: fsdp", "data_comm_s": "  of exposed: data"})
    if (rep.get("parameters") or {}).get("remat_policy"):
        labels["host_offload_s"] = "host offload"
    for key, label in labels.items():
        lines.append("  " + f"  {label}".ljust(w) + "".join(_fmt_t(per[n]["breakdown"][key]).rjust(16)
                                                        for n in names))
    # the parts that add up to the peak (memory.PARTS), then the peak
    for part in ("weights", "gradients", "slots", "activations", "collective_buffers", "peak"):
        label = "memory peak" if part == "peak" else f"  mem {part.replace('_', ' ')}"
        lines.append("  " + label.ljust(w) + "".join(format_bytes(per[n]["memory_bytes"][part]).rjust(16)
                                                    for n in names))
    lines += step_cost_lines(rep, names, w, rep["cost_of"]) if rep.get("cost_of") else []
    small = rep.get("small_allreduces") or []
    if not any(n in ("sharded", "fully-sharded") for n in names):  # no sharded update ran: no norms
        small = [x for x in small if not x["what"].startswith("sharded update")]
    if small:
        slices = (rep.get("parameters") or {}).get("slices") or 1
        where = "within the slice"
        if slices > 1:
            parts = (["batch-norm groups within a slice"] if any(x["what"].startswith("batch-norm") for x in small)
                     else []) + ([f"the update's norms across the {slices} slices, the DCN phase included (the "
                                  "algorithm named is their in-slice part)"]
                                 if any(x["what"].startswith("sharded update") for x in small) else [])
            where = ", ".join(parts)
        lines.append(f"  small all-reduces ({where}; auto: the fastest algorithm for its size):")
    for x in small:
        lines.append(f"    {x['what']}: {format_bytes(x['nbytes'])} over {x['group_cores']} cores, "
                     f"{x['per_step']} per step: {x['algorithm']}, {_fmt_t(x['time_s']).strip()} each")
    for n in names:
        if per[n]["status"] != "ok":
            lines.append(f"  {n}: {per[n]['status']}: {per[n]['error']}")
    for s, up in (rep.get("speedups") or {}).items():
        if up is not None:
            kind = "" if (rep.get("band") or {}).get("kind") != "extrapolated" else ", extrapolated"
            band = (f" (95% band{kind} {rep['speedup_low']:.3f}-{rep['speedup_high']:.3f}x)"
                    if s == "sharded" and rep.get("speedup_low") is not None else "")
            lines.append(f"  speedup of the {s} update over replicated: {up:.3f}x{band}")
    for s, up in (rep.get("speedup_if_replicated_fit") or {}).items():
        if up is not None:
            lines.append(f"  speedup of the {s} update: replicated does not fit in HBM; if it did: {up:.2f}x")
    if rep.get("fully_sharded_over_sharded") is not None:
        lines.append(f"  fully-sharded over sharded: {rep['fully_sharded_over_sharded']:.3f}x")
    return "\n".join(lines)


def _step_options(args, calibration, stack):
    """The :class:`StepOptions` of ``step``'s command line."""
    from ..inputs.units import MiB, grad_dtype_short
    from ..training.step import StepOptions
    from ..training.update.planner import DEFAULT_BUCKET_BYTES

    return StepOptions(
        algorithm=args.algorithm, bidirectional=args.bidirectional, routing=args.routing,
        overlap_grad_reduce=args.overlap_grad_reduce, overlap_all_gather=args.overlap_all_gather,
        grad_dtype=grad_dtype_short(args.grad_dtype) if args.grad_dtype else None,
        bucket_bytes=DEFAULT_BUCKET_BYTES if args.bucket_MiB is None else int(args.bucket_MiB * MiB),
        steps=args.steps, bn_group_replicas=args.bn_group_replicas,
        small_allreduce_algorithm=args.small_allreduce_algorithm, gather_prefetch=args.gather_prefetch,
        keep_gathered_weights=args.keep_gathered_weights, shard_across_slices=args.shard_across_slices,
        remat=args.remat, quantization=args.quantization, remat_policy=args.remat_policy,
        collective_matmul=args.collective_matmul, activation_model=args.activation_model,
        capacity_factor=args.capacity_factor, expert_load_imbalance=args.expert_load_imbalance,
        **{k: getattr(args, k) for k in ("pipeline_microbatches", "pipeline_layers_per_stage", "pipeline_schedule")},
        calibration=calibration, software_stack=stack, custom_mesh=getattr(args, "custom_mesh", None),
        compute=calibration.compute_params(stack=stack, mxu_efficiency=args.mxu_efficiency),
    )
