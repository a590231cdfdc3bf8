"""``plan --search``'s report: the ranking, its ties and headroom marks as JSON-ready data
(:func:`build_report`, the shape of ``wus_sim/schemas/plan-search.v1.json``) and as text (:func:`text`)."""

from ..training.parallelism.mesh_search import rank_key

__all__ = ["TIE_TOLERANCE", "build_report", "ties", "text"]

TIE_TOLERANCE = 0.005
"""Candidates whose step times are within this fraction of a group's fastest are one tie: the
model's own error is larger (docs/model-error.md), so the ranking inside a tie says nothing."""

_DIFFER = ("mesh", "dcn_mesh", "strategy", "remat")


def ties(cands, tolerance=TIE_TOLERANCE):
    """Groups of ranked feasible candidates (dicts, fastest first) within *tolerance* of each
    group's fastest: ``[(first, last)]`` 0-based index ranges of the groups with two or more."""
    out, i = [], 0
    while i < len(cands):
        j = i
        limit = cands[i]["step_time_s"] * (1 + tolerance)
        while j + 1 < len(cands) and cands[j + 1]["step_time_s"] <= limit:
            j += 1
        if j > i:
            out.append((i, j))
        i = j + 1
    return out


def build_report(args, search, topology, ms, found, headroom, stopped):
    """The report of the candidates *found* (all of them unless *stopped*: ``'time-limit'`` or
    ``'interrupted'``)."""
    ranked = sorted(found, key=rank_key)
    cands = [c.to_dict() for c in ranked]
    counts = {}
    for c in cands:
        if c["status"] != "ok":
            counts[c["reason"]] = counts.get(c["reason"], 0) + 1
        c["near_limit"] = bool(c["status"] == "ok" and c["mem_peak_bytes"] > (1 - headroom) * c["mem_capacity_bytes"])
        c["tie"] = None
    ok = [c for c in cands if c["status"] == "ok"]
    groups = []
    for first, last in ties(ok):
        members = ok[first:last + 1]
        for c in members:
            c["tie"] = first + 1
        peaks = [c["mem_peak_bytes"] for c in members]
        groups.append({"ranks": [first + 1, last + 1],
                       "step_time_s": [members[0]["step_time_s"], members[-1]["step_time_s"]],
                       "differ": [k for k in _DIFFER if len({c[k] for c in members}) > 1],
                       "mem_peak_bytes": [min(peaks), max(peaks)]})
    o = search.options
    beyond = sorted({m.tensor for _, m, _ in search.beyond_heads})
    return {"schema_version": 1, "workload": args.workload, "topology": topology.name,
            "slices": 1 if ms is None else ms.slices, "devices_per_slice": topology.num_replicas,
            "device": "TensorCore" if topology.cores_per_chip > 1 else "chip",
            "global_batch": search.global_batch, "global_batch_source": search.batch_source,
            "calibration": o.calibration_id,
            "options": {"quantization": o.quantization, "activation_model": o.activation_model,
                        "software_stack": o.software_stack or o.calibration.default_stack,
                        "remat_policy": o.remat_policy, "collective_matmul": bool(o.collective_matmul),
                        "grad_dtype": o.grad_dtype, "bucket_bytes": o.bucket_bytes,
                        "remats": list(search.remats), "strategies": list(search.strategies),
                        "mesh": args.mesh, "dcn_mesh": args.dcn_mesh, "replicas": args.replicas},
            "skipped_remats": dict(search.skipped_remats),
            "beyond_heads": {"tensor": beyond, "heads": _heads(search.workload)} if beyond else None,
            "hbm_headroom": headroom, "ties": groups,
            "complete": stopped is None, "stopped": stopped,
            "meshes": len(search.meshes), "meshes_searched": search.meshes_done,
            "candidates": cands, "feasible": len(ok), "infeasible": counts}


def _heads(workload):
    return min((a.heads for a in workload.attention), default=None)


def text(r):
    from ..inputs.units import format_bytes, format_time

    n = len(r["candidates"])
    where = f" x {r['slices']} slices" if r["slices"] > 1 else ""
    source = {"default": "the workload's default on this slice, as step runs it; --global-batch to change",
              "global_batch": "--global-batch", "per_replica_batch": "--per-replica-batch x every device",
              "maxtext": "the MaxText run's per_device_batch_size x every device"}
    o = r["options"]
    lines = [f"plan --search: {r['workload']} on {r['topology']}{where}: {r['devices_per_slice']} {r['device']}s a "
             f"slice, global batch {r['global_batch']:,} for every candidate ({source[r['global_batch_source']]}); "
             f"{n} candidates (mesh x strategy x remat), {r['feasible']} fit, fastest first "
             f"(calibration {r['calibration']})"]
    said = [f"{k.replace('_', ' ')} {o[k]}" for k in ("quantization", "activation_model", "remat_policy")
            if o[k] not in (None, "none", "xla")]
    said += [f"fixed {k.replace('_', '-')} {o[k]}" for k in ("mesh", "dcn_mesh", "replicas") if o[k] is not None]
    if not o["collective_matmul"]:
        said.append("no collective matmul")
    if said:
        lines.append("  with " + ", ".join(said))
    for remat, why in r["skipped_remats"].items():
        lines.append(f"  remat {remat} not searched: {why}")
    if r["beyond_heads"]:
        b = r["beyond_heads"]
        lines.append(f"  tensor {', '.join(map(str, b['tensor']))} not searched: more than the {b['heads']} query "
                     f"heads a layer of {r['workload']} has ({r['infeasible'].get('heads', 0)} candidates, "
                     "counted as heads)")
    if not r["complete"]:
        lines.append(f"  STOPPED ({r['stopped']}): {r['meshes_searched']} of {r['meshes']} meshes searched; the "
                     "ranking is the best so far")
    lines.append(f"  {'#':>4} {'mesh':<24} {'dcn':<14} {'strategy':<14} {'remat':<9} {'step':>10} {'compute':>10} "
                 f"{'tensor':>10} {'fsdp':>10} {'data':>10} {'peak/device':>12}")
    groups = {g["ranks"][1]: g for g in r["ties"]}
    rank = 0
    for c in r["candidates"]:
        if c["status"] != "ok":
            continue
        rank += 1
        b = c["breakdown"]
        t = lambda k: format_time(b.get(k) or 0.0)  # noqa: E731
        compute = (b.get("fwd_s") or 0) + (b.get("bwd_s") or 0)
        mark = (" !" if c["near_limit"] else "") + (f" = #{c['tie']}" if c["tie"] and c["tie"] != rank else "")
        lines.append(f"  {rank:>4} {c['mesh']:<24} {c['dcn_mesh'] or '-':<14} {c['strategy']:<14} {c['remat']:<9} "
                     f"{format_time(c['step_time_s']):>10} {format_time(compute):>10} {t('tensor_comm_s'):>10} "
                     f"{t('fsdp_comm_s'):>10} {t('data_comm_s'):>10} {format_bytes(c['mem_peak_bytes']):>12}{mark}")
        g = groups.get(rank)
        if g:
            lo, hi = g["mem_peak_bytes"]
            lines.append(f"       ties #{g['ranks'][0]}-#{rank}: within {100 * TIE_TOLERANCE:g} % of "
                         f"{format_time(g['step_time_s'][0])}; they differ in {', '.join(g['differ']) or 'nothing'} "
                         f"and peak memory ({format_bytes(lo)} to {format_bytes(hi)})")
    if any(c.get("near_limit") for c in r["candidates"]):
        lines.append(f"  ! peak within the HBM headroom: above {100 * (1 - r['hbm_headroom']):g} % of a device's HBM "
                     "(--hbm-headroom; XLA and the allocator hold some HBM beside the program)")
    shown = {k: v for k, v in r["infeasible"].items() if k != "heads"}
    if shown:
        lines.append("  infeasible: " + ", ".join(f"{k} {v}" for k, v in shown.items())
                     + " (memory: needs more HBM than a device has; batch: the global batch does not divide over "
                       "the data-parallel groups)")
        for c in r["candidates"]:
            if c["status"] != "ok" and c["reason"] != "heads":
                need = format_bytes(c["mem_peak_bytes"]) if c["reason"] == "memory" else "-"
                lines.append(f"       {c['mesh']:<24} {c['dcn_mesh'] or '-':<14} {c['strategy']:<14} "
                             f"{c['remat']:<9} {c['reason']}: needs {need}")
    lines.append("  step = compute (forward + backward) + tensor-parallel comm + exposed fsdp and data comm + "
                 "update and fixed costs; tensor/fsdp/data as in `step --mesh` (docs/mesh.md)")
    return "\n".join(lines)
