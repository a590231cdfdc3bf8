"""``wus-sim plan WORKLOAD -t SLICE --search``: every mesh x strategy x remat, fastest first.

Text: one line per candidate that fits (rank, mesh, mesh across slices, strategy, remat, step
time, its parts, peak memory per device), then the infeasible ones counted by reason with each
one's need. ``--json``: one document in the shape of ``wus_sim/schemas/plan-search.v1.json``,
``candidates`` holding one object per candidate, in the same order.
"""

import sys

from ..inputs.strict_json import dumps_strict

__all__ = ["run_search", "PLAN_SEARCH_SCHEMA_VERSION"]

PLAN_SEARCH_SCHEMA_VERSION = 1
"""Version of ``plan --search --json``'s shape (``wus_sim/schemas/plan-search.v{N}.json``)."""


def run_search(args, placement):
    from ..hardware.multislice import load_multislice
    from ..model.calibration import load_calibration
    from ..training.parallelism.mesh_search import search_meshes
    from ..training.step import StepOptions
    from ..inputs.errors import ConfigError
    from .options import placement_option_errors

    with placement_option_errors():
        topology, ms = load_multislice(args.topology, slices=placement.slices, megacore=args.megacore)
    calibration = load_calibration(args.calibration)
    if args.remat_policy is not None:  # the search ranks every --remat value itself
        raise ConfigError("is not searched: plan --search ranks every --remat value", key_path="--remat-policy",
                          value=args.remat_policy)
    options = StepOptions(calibration=calibration, compute=calibration.compute_params(),
                          collective_matmul=args.collective_matmul)
    candidates = search_meshes(args.workload, ms or topology, args.optimizer, global_batch=args.global_batch,
                               per_replica_batch=args.per_replica_batch, options=options)
    counts = {}
    for c in candidates:
        if c.status != "ok":
            counts[c.reason] = counts.get(c.reason, 0) + 1
    report = {"schema_version": PLAN_SEARCH_SCHEMA_VERSION, "workload": args.workload, "topology": topology.name,
              "slices": 1 if ms is None else ms.slices, "devices_per_slice": topology.num_replicas,
              "device": "TensorCore" if topology.cores_per_chip > 1 else "chip",
              "global_batch": args.global_batch, "calibration": options.calibration_id,
              "candidates": [c.to_dict() for c in candidates],
              "feasible": sum(c.status == "ok" for c in candidates), "infeasible": counts}
    if args.json:
        print(dumps_strict(report, indent=1))
    else:
        print(_text(report))
    if not report["feasible"]:
        print("wus-sim plan: no candidate fits", file=sys.stderr)
    return 0


def _text(r):
    from ..inputs.units import format_bytes, format_time

    n = len(r["candidates"])
    where = f" x {r['slices']} slices" if r["slices"] > 1 else ""
    lines = [f"plan --search: {r['workload']} on {r['topology']}{where}: {r['devices_per_slice']} {r['device']}s a "
             f"slice, global batch {r['global_batch'] or 'default'}; {n} candidates (mesh x strategy x remat), "
             f"{r['feasible']} fit, fastest first (calibration {r['calibration']})",
             f"  {'#':>4} {'mesh':<24} {'dcn':<14} {'strategy':<14} {'remat':<9} {'step':>10} {'compute':>10} "
             f"{'tensor':>10} {'fsdp':>10} {'data':>10} {'peak/device':>12}"]
    rank = 0
    for c in r["candidates"]:
        if c["status"] != "ok":
            continue
        rank += 1
        b = c["breakdown"]
        t = lambda k: format_time(b.get(k) or 0.0)  # noqa: E731
        compute = (b.get("fwd_s") or 0) + (b.get("bwd_s") or 0)
        lines.append(f"  {rank:>4} {c['mesh']:<24} {c['dcn_mesh'] or '-':<14} {c['strategy']:<14} {c['remat']:<9} "
                     f"{format_time(c['step_time_s']):>10} {format_time(compute):>10} {t('tensor_comm_s'):>10} "
                     f"{t('fsdp_comm_s'):>10} {t('data_comm_s'):>10} {format_bytes(c['mem_peak_bytes']):>12}")
    if r["infeasible"]:
        lines.append("  infeasible: " + ", ".join(f"{k} {v}" for k, v in r["infeasible"].items())
                     + " (memory: needs more HBM than a device has; batch: the global batch does not divide over "
                       "the data-parallel groups; heads: tensor is larger than the attention's query heads)")
        for c in r["candidates"]:
            if c["status"] != "ok":
                need = format_bytes(c["mem_peak_bytes"]) if c["reason"] == "memory" else "-"
                lines.append(f"       {c['mesh']:<24} {c['dcn_mesh'] or '-':<14} {c['strategy']:<14} "
                             f"{c['remat']:<9} {c['reason']}: needs {need}")
    lines.append("  step = compute (forward + backward) + tensor-parallel comm + exposed fsdp and data comm + "
                 "update and fixed costs; tensor/fsdp/data as in `step --mesh` (docs/mesh.md)")
    return "\n".join(lines)
