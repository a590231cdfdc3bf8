"""A readable report of an optimizer analysis, for ``wus-sim describe optimizer NAME``."""

import textwrap

__all__ = ["describe_text"]


def _num(x):
    return f"{x:g}"


def _bytes_per(value_bytes):
    return {4: "fp32", 2: "bf16/fp16", 8: "fp64", 1: "int8"}.get(value_bytes, f"{value_bytes} B")


def describe_text(analysis):
    """The analysis as plain text: program, slots, bytes and flops per element, what sharding needs."""
    a = analysis
    out = [f"optimizer {a.name}"]
    if a.description:
        out += textwrap.wrap(a.description, 88, initial_indent="  ", subsequent_indent="  ")
    if a.hyper:
        out.append("  hyper-parameters: " + ", ".join(f"{k}={_num(v)}" for k, v in a.hyper.items()))
    out.append(f"  value sizes: weight {a.weight_bytes} B, gradient {a.grad_bytes} B, slot {a.slot_bytes} B, "
               f"all-reduced partial sums {a.reduction_bytes} B")
    for case in a.cases:
        primary = " (primary case: the per-element figures in --json are this case's)" if case is a.primary and len(a.cases) > 1 else ""
        out.append("")
        out.append(f"  tensors of {case.label}{primary}:")
        out.append("    program:")
        out += [f"      {s}" for s in case.program]
        out += _case_lines(case)
    out.append("")
    out.append("  assumptions: one fused kernel per tensor (w, g, slots read once; w, slots written once;")
    out.append("  temporaries on chip); 1 flop per arithmetic op, sqrt and divide included; a norm costs")
    out.append("  2 flops per value reduced. See wus_sim.optimizers.analysis.")
    if a.sources:
        out.append("  sources:")
        out += [f"    {k}: {v}" for k, v in a.sources.items()]
    return "\n".join(out)


def _case_lines(c):
    kinds = ", ".join(f"{n} [{k}]" for n, k in c.slot_kinds.items()) or "none"
    lines = [f"    slots: {c.slots} per element; state kept across steps: {kinds}"]
    reads = [x for x, on in (("w", c.reads_w), ("g", c.reads_g)) if on] + \
        [n for n, k in c.slot_kinds.items() if k == "full"]
    writes = ["w"] + [n for n, k in c.slot_kinds.items() if k == "full"]
    lines.append(f"    HBM bytes per element: read {_num(c.bytes_read_per_element)} ({', '.join(reads)}), "
                 f"write {_num(c.bytes_written_per_element)} ({', '.join(writes)})")
    if c.factored_slots:
        lines.append(f"      plus the small slots ({', '.join(c.factored_slots)}) read and written once per tensor")
    extra = []
    if c.flops_per_row:
        extra.append(f"{_num(c.flops_per_row)} per row")
    if c.flops_per_col:
        extra.append(f"{_num(c.flops_per_col)} per column")
    if c.flops_per_tensor:
        extra.append(f"{_num(c.flops_per_tensor)} per tensor")
    lines.append(f"    flops per element: {_num(c.flops_per_element)}"
                 + (f" (plus {', '.join(extra)})" if extra else "")
                 + f"; passes over the tensor: {c.passes}")
    if c.unused:
        lines.append(f"    unused temporaries (still counted): {', '.join(c.unused)}")
    if not c.non_elementwise:
        lines.append("    non-elementwise operations: none; a shard updates itself with no communication")
    else:
        lines.append("    non-elementwise operations:")
        lines += [f"      {d}" for d in c.non_elementwise]
    red = c.cross_replica_reductions
    lines.append(f"    a sharded update (layout {c.preferred_layout}) adds "
                 + ("no collective" if not red else f"{len(red)} cross-replica all-reduce(s) of partial sums:"))
    for r in red:
        if r.scope == "global":
            size = f"{r.values_total} value per step in total"
        elif r.vector:
            size = f"a [{r.vector}] vector per tensor"
        else:
            size = f"{r.values_per_tensor} value per tensor"
        lines.append(f"      {r.what}: {size}, {_bytes_per(r.dtype_bytes)}")
    if c.shard_constraints:
        lines.append("    sharding layouts:")
        for o in c.shard_constraints:
            status = "allowed" if o.allowed else "NOT allowed"
            lines.append(f"      {o.layout}: {status}: {o.reason}")
    return lines
