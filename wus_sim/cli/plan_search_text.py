"""``plan --search``'s report: the ranking, its ties and headroom marks as JSON-ready data
(:func:`build_report`, the shape of ``wus_sim/schemas/plan-search.v1.json``) and as text (:func:`text`)."""

from ..training.parallelism.mesh_search import rank_key
from .cost_lines import money, per_unit_key, price_line, price_report

__all__ = ["TIE_TOLERANCE", "build_report", "ties", "text"]

TIE_TOLERANCE = 0.005
"""Candidates whose step times are within this fraction of a group's fastest are one tie: the
model's own error is larger (docs/model-error.md), so the ranking inside a tie says nothing."""

_DIFFER = ("topology", "mesh", "dcn_mesh", "strategy", "remat")


def ties(cands, tolerance=TIE_TOLERANCE, key="step_time_s"):
    """Groups of ranked feasible candidates (dicts, best first by *key*: the step time, or the cost
    of a step) within *tolerance* of each group's best: ``[(first, last)]`` 0-based index ranges
    of the groups with two or more."""
    out, i = [], 0
    while i < len(cands):
        j = i
        limit = cands[i][key] * (1 + tolerance)
        while j + 1 < len(cands) and cands[j + 1][key] <= limit:
            j += 1
        if j > i:
            out.append((i, j))
        i = j + 1
    return out


def _order(searched, rank):
    """The sort key of a found ``(slice index, candidate)`` pair: :func:`rank_key` (fastest first,
    then the infeasible ones by need), or by the cost of a step in its place."""
    from ..training.cost import step_cost_usd

    def key(pair):
        k, c = pair
        if rank == "cost" and c.status == "ok":
            return (False, step_cost_usd(searched[k].chips, c.step_time_s, searched[k].price.usd_per_chip_hour))
        return rank_key(c)

    return key


def build_report(args, searched, found, headroom, stopped):
    """The report of the candidates *found* (``(slice index, candidate)`` pairs of the
    :class:`~wus_sim.cli.plan_search.Searched` *searched*; all of them unless *stopped*:
    ``'time-limit'`` or ``'interrupted'``)."""
    from ..training.cost import cost_columns

    rank = getattr(args, "rank", "time") or "time"
    first = searched[0]
    search, topology, ms = first.search, first.topology, first.ms
    batch = search.global_batch
    cands = []
    for k, c in sorted(found, key=_order(searched, rank)):
        one = searched[k]
        d = c.to_dict()
        d["topology"] = one.topology.name
        d.update(cost_columns(one.price, one.chips, d["step_time_s"], batch, one.search.workload))
        cands.append(d)
    counts = {}
    for c in cands:
        if c["status"] != "ok":
            counts[c["reason"]] = counts.get(c["reason"], 0) + 1
        c["near_limit"] = bool(c["status"] == "ok" and c["mem_peak_bytes"] > (1 - headroom) * c["mem_capacity_bytes"])
        c["tie"] = None
    ok = [c for c in cands if c["status"] == "ok"]
    groups = []
    for lo, hi in ties(ok, key="cost_usd_per_step" if rank == "cost" else "step_time_s"):
        members = ok[lo:hi + 1]
        for c in members:
            c["tie"] = lo + 1
        peaks = [c["mem_peak_bytes"] for c in members]
        costs = [c["cost_usd_per_step"] for c in members]
        groups.append({"ranks": [lo + 1, hi + 1],
                       "step_time_s": [min(c["step_time_s"] for c in members), max(c["step_time_s"] for c in members)],
                       "cost_usd_per_step": None if None in costs else [min(costs), max(costs)],
                       "differ": [k for k in _DIFFER if len({c[k] for c in members}) > 1],
                       "mem_peak_bytes": [min(peaks), max(peaks)]})
    o = search.options
    beyond = sorted({m.tensor for one in searched for _, m, _ in one.search.beyond_heads})
    return {"schema_version": 1, "workload": args.workload, "topology": topology.name,
            "slices": 1 if ms is None else ms.slices, "devices_per_slice": topology.num_replicas,
            "device": _device(topology),
            "global_batch": batch, "global_batch_source": search.batch_source,
            "calibration": o.calibration_id,
            "options": {"quantization": o.quantization, "activation_model": o.activation_model,
                        "software_stack": o.software_stack or o.calibration.default_stack,
                        "remat_policy": o.remat_policy, "collective_matmul": bool(o.collective_matmul),
                        "capacity_factor": o.capacity_factor, "expert_load_imbalance": o.expert_load_imbalance,
                        "pipeline_microbatches": o.pipeline_microbatches,
                        "pipeline_layers_per_stage": o.pipeline_layers_per_stage, "pipeline_schedule": o.pipeline_schedule,
                        "grad_dtype": o.grad_dtype, "bucket_bytes": o.bucket_bytes,
                        "remats": list(search.remats), "strategies": list(search.strategies),
                        "mesh": args.mesh, "dcn_mesh": args.dcn_mesh, "replicas": args.replicas},
            "skipped_remats": dict(search.skipped_remats),
            "beyond_heads": {"tensor": beyond, "heads": _heads(search.workload)} if beyond else None,
            "hbm_headroom": headroom, "ties": groups,
            "complete": stopped is None, "stopped": stopped,
            "meshes": sum(len(one.search.meshes) for one in searched),
            "meshes_searched": sum(one.search.meshes_done for one in searched),
            "rank": rank, "cost_key": per_unit_key(search.workload), "topologies": [_slice(one) for one in searched],
            "candidates": cands, "feasible": len(ok), "infeasible": counts}


def _device(topology):
    return "TensorCore" if topology.cores_per_chip > 1 else "chip"


def _slice(one):
    """One ``-t`` of the report: the slice, its chips and devices, its price, its meshes."""
    return {"topology": one.topology.name, "chip": one.topology.chip.name,
            "slices": 1 if one.ms is None else one.ms.slices, "chips": one.chips,
            "devices_per_slice": one.topology.num_replicas, "device": _device(one.topology),
            "price": price_report(one.price, one.chips),
            "meshes": len(one.search.meshes), "meshes_searched": one.search.meshes_done}


def _heads(workload):
    return min((a.heads for a in workload.attention), default=None)


def text(r):
    from ..inputs.units import format_bytes, format_time

    n = len(r["candidates"])
    several = len(r["topologies"]) > 1
    by_cost = r["rank"] == "cost"
    where = f" x {r['slices']} slices" if r["slices"] > 1 else ""
    default = (f"the workload's default on {r['topology']}, the first -t, as step runs it there" if several else
               "the workload's default on this slice, as step runs it")
    source = {"default": default + "; --global-batch to change",
              "global_batch": "--global-batch", "per_replica_batch": "--per-replica-batch x every device",
              "maxtext": "the MaxText run's per_device_batch_size x every device"}
    order = ("cheapest first (cost of a step: with one global batch, the order of the cost per unit of work)"
             if by_cost else "fastest first")
    o = r["options"]
    if several:
        names = ", ".join(t["topology"] for t in r["topologies"])
        lines = [f"plan --search: {r['workload']} on {len(r['topologies'])} slices ({names}): global batch "
                 f"{r['global_batch']:,} for every candidate on every slice ({source[r['global_batch_source']]}); "
                 f"{n} candidates (slice x mesh x strategy x remat), {r['feasible']} fit, {order} "
                 f"(calibration {r['calibration']})"]
        for t in r["topologies"]:
            lines.append(price_line(t["price"], lead=f"{t['topology']} ({t['devices_per_slice']:,} {t['device']}s a "
                                                     f"slice{'' if t['slices'] == 1 else ' x ' + str(t['slices'])}): "))
    else:
        lines = [f"plan --search: {r['workload']} on {r['topology']}{where}: {r['devices_per_slice']} {r['device']}s a "
                 f"slice, global batch {r['global_batch']:,} for every candidate ({source[r['global_batch_source']]}); "
                 f"{n} candidates (mesh x strategy x remat), {r['feasible']} fit, {order} "
                 f"(calibration {r['calibration']})",
                 price_line(r["topologies"][0]["price"])]
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
    width = max(len(t["topology"]) for t in r["topologies"])
    slice_of = (lambda c: f"{c['topology']:<{width}} ") if several else (lambda c: "")  # noqa: E731
    per = "$/M tok" if r["cost_key"] == "cost_usd_per_million_tokens" else "$/1k ex"
    # an expert column where a candidate has an expert axis (a model with experts)
    experts = any("expert=" in c["mesh"] for c in r["candidates"])
    contexts = any("context=" in c["mesh"] for c in r["candidates"])  # likewise a long sequence's context axis
    # a pipeline column (its bubble + its permutes) where a candidate has stages
    stages = any("pipeline=" in c["mesh"] + (c["dcn_mesh"] or "") for c in r["candidates"])
    lines.append(f"  {'#':>4} {slice_of({'topology': 'slice'})}{'mesh':<24} {'dcn':<14} {'strategy':<14} "
                 f"{'remat':<9} {'step':>10} {'$/step':>10} {per:>10} {'compute':>10} {'tensor':>10} "
                 + (f"{'expert':>10} " if experts else "") + (f"{'context':>10} " if contexts else "")
                 + (f"{'pipeline':>10} " if stages else "")
                 + f"{'fsdp':>10} {'data':>10} {'peak/device':>12}")
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
        lines.append(f"  {rank:>4} {slice_of(c)}{c['mesh']:<24} {c['dcn_mesh'] or '-':<14} {c['strategy']:<14} "
                     f"{c['remat']:<9} {format_time(c['step_time_s']):>10} {money(c['cost_usd_per_step']):>10} "
                     f"{money(c[r['cost_key']]):>10} {format_time(compute):>10} {t('tensor_comm_s'):>10} "
                     + (f"{t('expert_comm_s'):>10} " if experts else "")
                     + (f"{t('context_comm_s'):>10} " if contexts else "")
                     + (f"{format_time((b.get('pipeline_bubble_s') or 0) + (b.get('pipeline_comm_s') or 0)):>10} "
                        if stages else "")
                     + f"{t('fsdp_comm_s'):>10} {t('data_comm_s'):>10} {format_bytes(c['mem_peak_bytes']):>12}{mark}")
        g = groups.get(rank)
        if g:
            lo, hi = g["mem_peak_bytes"]
            best = (f"{money(g['cost_usd_per_step'][0])} a step" if by_cost else format_time(g["step_time_s"][0]))
            lines.append(f"       ties #{g['ranks'][0]}-#{rank}: within {100 * TIE_TOLERANCE:g} % of "
                         f"{best}; they differ in {', '.join(g['differ']) or 'nothing'} "
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
                lines.append(f"       {slice_of(c)}{c['mesh']:<24} {c['dcn_mesh'] or '-':<14} {c['strategy']:<14} "
                             f"{c['remat']:<9} {c['reason']}: needs {need}")
    lines.append("  step = compute (forward + backward) + tensor-parallel comm + " + ("expert all-to-alls + " if experts else "")
                 + ("context K/V comm + " if contexts else "")
                 + ("pipeline bubble and permutes + " if stages else "")
                 + "exposed fsdp and data comm + update and fixed costs; tensor/" + ("expert/" if experts else "")
                 + ("context/" if contexts else "")
                 + "fsdp/data as in `step --mesh` (docs/mesh.md); $/step = chips x step x price per chip-hour / 3600; "
                 + f"{per} = $/step x " + ("10^6 / the step's tokens" if per == "$/M tok" else "1,000 / the step's examples"))
    return "\n".join(lines)
