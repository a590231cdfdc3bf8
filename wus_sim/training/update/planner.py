"""Sharding planner: how each tensor is cut over N replicas, fused into buckets, and owned.

For a workload, an optimizer (its static analysis) and N data-parallel replicas
on a topology, :func:`plan` decides, per tensor:

* **replicated** if it has fewer than ``replicate_below_elements`` elements
  (default: fewer elements than replicas, where a shard would be mostly
  padding), or if its cheapest allowed cut pads it by more than
  ``max_padding_ratio`` x its size (see :data:`DEFAULT_MAX_PADDING_RATIO`). Its gradient is all-reduced and every replica updates all of it,
  as in the replicated strategy.
* otherwise a **format** (the paper's "data formatting"), cheapest first:
  ``split`` along a dimension that N divides (no padding; preferred, lowest
  dimension first), ``flat`` (flattened and padded to a multiple of N),
  ``padded-rows`` / ``padded-cols`` (the matrix view padded to whole rows or
  columns; only when the optimizer forbids a flat cut, i.e. Adafactor's
  factored statistics). The optimizer's shard constraints decide which
  layouts are allowed, and ties go to the layout needing the smaller extra
  all-reduce (:meth:`OptimizerAnalysis.choose_layout` uses the same order).

Each sharded tensor's formatted buffer (length ``padded_size``, a multiple of
N) is cut into N equal shards; shard ``j`` goes to the replica the 2-D
reduce-scatter leaves it on (:func:`shard_index`).

Tensors are fused into **buckets** for the collectives, walking the model in
backward order (the order gradients appear): a bucket is closed once it holds
``bucket_bytes`` of gradients; a tensor that big on its own gets its own bucket.
Sharded and replicated tensors go to separate buckets (reduce-scatter vs
all-reduce). A fused bucket is laid out shard-major (shard ``j`` of every
tensor, then shard ``j+1`` ...), so its reduce-scatter hands every replica its
own shard of every tensor in the bucket.

The optimizer's non-elementwise ops add **extra reductions** under sharding
(partial results on each shard, then a small all-reduce): one all-reduce per
reduction the analyser reports, fusing the values of every sharded tensor
(LAMB ``norm(w)``: one fp32 value per tensor; global-norm clipping: one value).

Per-tensor cut, padding, bucket fusion and shard ownership are decided together (a tensor's
format decides its padding, which decides its bucket bytes, which decide ownership), so the
decisions live in one module; the plan they produce, as data, is :mod:`wus_sim.training.update.sharding_plan`.
"""

from dataclasses import replace

from ...inputs.errors import ConfigError
from ...inputs.memo import IdentityMemo
from ...inputs.units import MiB
from .sharding_plan import Bucket, ExtraReduction, FORMATS, Plan, TensorPlan

__all__ = ["DEFAULT_BUCKET_BYTES", "DEFAULT_MAX_PADDING_RATIO", "plan", "resolve_analysis"]


DEFAULT_BUCKET_BYTES = 25 * MiB
"""Gradient bytes at which a fused bucket is closed. 25 MiB is PyTorch DDP's default
``bucket_cap_mb`` (Horovod's fusion buffer defaults to 64 MiB); XLA's TPU combiner
threshold is not public. Large enough that a bucket's collective is bandwidth-bound
on a v3 pod, small enough to overlap reduction with backward. Settable
(``--bucket-MiB``)."""

DEFAULT_MAX_PADDING_RATIO = 1.0
"""A tensor whose cheapest allowed cut would more than double it (padding > 1 x size) stays
replicated: its collectives would carry more padding than data. Only factored optimizers hit
this (a flat cut pads fewer than N elements): Adafactor's row/column cut of a 1024 x 1024
matrix over 4096 replicas pads it 4x. Settable."""

_FORMAT_RANK = {f: i for i, f in enumerate(FORMATS)}


# ========================================================================== planning
def resolve_analysis(optimizer, *, weight_bytes=4, grad_bytes=4, slot_bytes=4):
    """An optimizer analysis from an analysis, an Optimizer program, or a name/path."""
    from ...optimizers import OptimizerAnalysis, analyse, load_optimizer  # imported here so workloads-only users skip it

    if isinstance(optimizer, OptimizerAnalysis):
        if (optimizer.weight_bytes, optimizer.grad_bytes, optimizer.slot_bytes) == (weight_bytes, grad_bytes,
                                                                                     slot_bytes):
            return optimizer
        optimizer = optimizer.name  # re-derive with this workload's dtypes
    # the same program (load_optimizer keeps it while its file is unchanged) and sizes: the same analysis
    program = load_optimizer(optimizer)
    return _ANALYSED.get((program,), (weight_bytes, grad_bytes, slot_bytes), lambda: analyse(
        program, weight_bytes=weight_bytes, grad_bytes=grad_bytes, slot_bytes=slot_bytes))


_ANALYSED = IdentityMemo()


def _value_bytes(value, default, key):
    """Bytes per value of a 16- or 32-bit dtype option (*default* if *value* is None)."""
    nbytes = default if value is None else int(value)
    if nbytes not in (2, 4):
        raise ConfigError("must be 2 (bfloat16) or 4 (float32)", key_path=key, value=value)
    return nbytes


def _candidates(shape, size, n):
    """``(format, layout, split_dim, padded_size, shard_shape)`` for every way to cut *shape*."""
    rank = len(shape)
    out = []
    for d, extent in enumerate(shape):
        if extent % n == 0:
            layout = "flat" if rank < 2 else ("cols" if d == rank - 1 else "rows")
            shard = tuple(e // n if i == d else e for i, e in enumerate(shape))
            out.append(("split", layout, d, size, shard))
    padded = size + (-size % n)
    out.append(("flat", "flat", None, padded, (padded // n,)))
    if rank >= 2:
        rows, cols = size // shape[-1], shape[-1]
        prow = rows + (-rows % n)
        out.append(("padded-rows", "rows", None, prow * cols, (prow // n, cols)))
        pcol = cols + (-cols % n)
        out.append(("padded-cols", "cols", None, rows * pcol, (rows, pcol // n)))
    return out


def _choose(analysis, shape, size, n):
    case = analysis.case_for(shape)
    allowed = {o.layout: o.allowed for o in case.layouts}
    # a case that lists only 'flat' (a rank-agnostic program) has no row/column statistics:
    # cutting whole rows or columns is then the same as a flat cut (the analyser maps it so too)
    flat_ok = allowed.get("flat", True)

    def per_tensor_values(layout):
        return sum(v for r, v in analysis.reductions_for(shape, layout) if r.scope == "per_tensor")

    options = []
    for fmt, layout, dim, padded, shard in _candidates(shape, size, n):
        if not allowed.get(layout, flat_ok):
            continue
        cost = (padded - size, per_tensor_values(layout), _FORMAT_RANK[fmt], -1 if dim is None else dim)
        options.append((cost, fmt, layout, dim, padded, shard))
    return min(options)[1:] if options else None


def _slot_padding(case, fmt, shape, size, padded, n):
    """Average padding slot values per replica for one formatted tensor."""
    kinds = list(case.slot_kinds.values())
    full = kinds.count("full")
    if fmt == "flat":
        return full * (padded - size) / n
    if fmt == "padded-rows":
        cols = shape[-1]
        pad_rows = (padded - size) // cols
        return (full * pad_rows * cols + kinds.count("rows") * pad_rows) / n
    if fmt == "padded-cols":
        rows = size // shape[-1]
        pad_cols = (padded - size) // rows
        return (full * pad_cols * rows + kinds.count("cols") * pad_cols) / n
    return 0.0


def plan(workload, topology, optimizer, *, replicas=None, bucket_bytes=DEFAULT_BUCKET_BYTES,
         replicate_below_elements=None, max_padding_ratio=DEFAULT_MAX_PADDING_RATIO, grad_bytes=None,
         gather_bytes=None):
    """Plan the sharded layout of *workload* over *replicas* data-parallel replicas.

    *optimizer*: a name (``'adam'``), an Optimizer program or its analysis.
    *replicas*: default every core of *topology*; fewer means each replica spans
    ``cores / replicas`` cores (spatial partitioning). *bucket_bytes*: fusion
    threshold (gradient bytes). *replicate_below_elements*: tensors with fewer
    elements stay replicated (default: the number of replicas). *max_padding_ratio*: a
    tensor whose cheapest allowed cut pads more than this times its size stays replicated
    too (and one with no allowed cut at all). *grad_bytes*: 4 or 2
    (bf16 gradients; default the workload's). *gather_bytes*: bytes per weight
    element in the all-gather (default the weights' dtype).
    """
    from ...inputs.api_args import check_int, check_number
    from ...inputs.limits import MAX_REPLICAS

    replicas = check_int(replicas, "replicas", minimum=1, maximum=MAX_REPLICAS, nullable=True)
    bucket_bytes = check_int(bucket_bytes, "bucket_bytes", minimum=1, maximum=2**60)
    replicate_below_elements = check_int(replicate_below_elements, "replicate_below_elements", minimum=0,
                                         maximum=2**53, nullable=True)
    max_padding_ratio = check_number(max_padding_ratio, "max_padding_ratio", minimum=0, maximum=1e6)
    cores = topology.num_replicas
    n = cores if replicas is None else int(replicas)
    if n < 1 or cores % n:
        raise ConfigError(f"must divide the {cores} cores of {topology.name}", key_path="replicas",
                          value=replicas)
    bucket_bytes = int(bucket_bytes)
    if bucket_bytes < 1:
        raise ConfigError("must be > 0 bytes", key_path="bucket_bytes", value=bucket_bytes)
    below = n if replicate_below_elements is None else int(replicate_below_elements)
    if below < 0:
        raise ConfigError("must be >= 0", key_path="replicate_below_elements", value=replicate_below_elements)
    if not max_padding_ratio >= 0:
        raise ConfigError("must be >= 0", key_path="max_padding_ratio", value=max_padding_ratio)
    gb = _value_bytes(grad_bytes, workload.grad_bytes, "grad_bytes")
    wb, sb = workload.weight_bytes, workload.slot_bytes
    ab = _value_bytes(gather_bytes, wb, "gather_bytes")
    analysis = resolve_analysis(optimizer, weight_bytes=wb, grad_bytes=gb, slot_bytes=sb)
    # The plan reads of the slice only its replica count: points that differ in link figures
    # (or anything else of the slice) share it, with their own topology put in.
    shared = _PLANNED.get((workload, analysis), (cores, n, bucket_bytes, below, float(max_padding_ratio), gb, ab),
                          lambda: _plan(workload, topology, analysis, n, bucket_bytes, below, max_padding_ratio,
                                        gb, ab))
    if shared.topology is topology:
        return shared
    # one object per slice too, so what is memoized by a plan's identity (its totals, the step
    # work) serves every point on that slice
    return _ON_SLICE.get((shared, topology), (), lambda: replace(shared, topology=topology))


_PLANNED = IdentityMemo()
_ON_SLICE = IdentityMemo()


def _plan(workload, topology, analysis, n, bucket_bytes, below, max_padding_ratio, gb, ab):
    """:func:`plan` once its arguments are checked."""
    cores = topology.num_replicas

    tensor_plans = []
    sharded_reductions = []      # [(Reduction, values)] of each sharded tensor
    why = {"small": 0, "padding": 0, "no allowed cut": 0}
    per_shape = {}  # shape -> what the plan derives of it (a model repeats its layers' shapes)

    def of_shape(shape, size):
        case = analysis.case_for(shape)
        full_slots = case.slot_elements(shape)
        choice = None if size < below else _choose(analysis, shape, size, n)
        reason = ("small" if size < below else "no allowed cut" if choice is None
                  else "padding" if choice[3] - size > max_padding_ratio * size else "")
        if reason:
            return full_slots, reason, None, None, None, None
        fmt, layout, dim, padded, shard = choice
        raw = analysis.reductions_for(shape, layout)
        return (full_slots, reason, choice, raw, tuple((r.what, int(v)) for r, v in raw),
                (case.slot_elements(shard), _slot_padding(case, fmt, shape, size, padded, n)))

    for i, t in enumerate(workload.tensors):
        derived = per_shape.get(t.shape)
        if derived is None:
            derived = per_shape[t.shape] = of_shape(t.shape, t.size)
        full_slots, reason, choice, raw, reductions, shard_slots = derived
        if reason:
            why[reason] += 1
            tensor_plans.append(TensorPlan(
                index=i, name=t.name, shape=t.shape, layer=t.layer, size=t.size, format="replicated",
                layout=None, split_dim=None, padded_size=t.size, shard_shape=t.shape,
                slot_elements=full_slots, shard_slot_elements=full_slots, slot_padding_elements=0.0,
                replicated_because=reason))
            continue
        fmt, layout, dim, padded, shard = choice
        sharded_reductions.append(raw)
        tensor_plans.append(TensorPlan(
            index=i, name=t.name, shape=t.shape, layer=t.layer, size=t.size, format=fmt, layout=layout,
            split_dim=dim, padded_size=padded, shard_shape=shard, slot_elements=full_slots,
            shard_slot_elements=shard_slots[0], slot_padding_elements=shard_slots[1], reductions=reductions))

    buckets, owner = _fuse(tensor_plans, bucket_bytes, gb)
    allreduce_buckets, _ = _fuse(tensor_plans, bucket_bytes, gb, by_kind=False)
    tensor_plans = [_in_bucket(tp, owner[tp.index]) for tp in tensor_plans]
    extra = _extra_reductions(sharded_reductions)

    notes = []
    if why["padding"]:
        notes.append(f"{why['padding']} tensors stay replicated: their cheapest allowed cut would pad them by "
                     f"more than {max_padding_ratio:g}x their size")
    if why["no allowed cut"]:
        notes.append(f"{why['no allowed cut']} tensors stay replicated: {analysis.name} allows no cut of them")
    if n != cores:
        notes.append(f"each replica spans {cores // n} cores (spatial partitioning); shards are cut flat "
                     "over replica ids")
    return Plan(workload=workload, topology=topology, analysis=analysis, replicas=n,
                bucket_bytes=bucket_bytes, replicate_below_elements=below,
                max_padding_ratio=float(max_padding_ratio), gather_bytes=ab,
                tensors=tuple(tensor_plans), buckets=tuple(buckets), allreduce_buckets=tuple(allreduce_buckets),
                extra_reductions=tuple(extra), notes=tuple(notes))


def _in_bucket(tensor_plan, bucket):
    """``replace(tensor_plan, bucket=bucket)``, the fields copied as they are: a plan has a thousand
    tensors (GPT-3) and a search plans it per shard count, where ``replace``'s call of ``__init__``
    with every field was a third of planning (TensorPlan has no ``__post_init__`` to run)."""
    out = object.__new__(TensorPlan)
    out.__dict__.update(tensor_plan.__dict__)
    out.__dict__["bucket"] = bucket
    return out


def _fuse(tensor_plans, bucket_bytes, grad_bytes, *, by_kind=True):
    """Greedy fusion in backward order; returns (buckets sorted by readiness, tensor -> bucket).
    *by_kind*: sharded and replicated tensors apart, at their formatted (padded) size; else
    every tensor in one kind of bucket at its own size (the replicated update's all-reduces)."""
    order = sorted(tensor_plans, key=lambda tp: (-tp.layer, -tp.index))
    groups = []                                  # (kind, [tensor plans])
    open_ = {"sharded": [], "replicated": []}
    filled = {"sharded": 0, "replicated": 0}
    for tp in order:
        kind = "replicated" if (tp.replicated or not by_kind) else "sharded"
        nbytes = (tp.padded_size if by_kind else tp.size) * grad_bytes
        if nbytes >= bucket_bytes:
            groups.append((kind, [tp]))
            continue
        open_[kind].append(tp)
        filled[kind] += nbytes
        if filled[kind] >= bucket_bytes:
            groups.append((kind, open_[kind]))
            open_[kind], filled[kind] = [], 0
    for kind in ("sharded", "replicated"):
        if open_[kind]:
            groups.append((kind, open_[kind]))
    # number buckets in the order backward completes them: the highest first layer first
    groups.sort(key=lambda g: (-min(tp.layer for tp in g[1]), -min(tp.index for tp in g[1])))
    buckets, owner = [], {}
    for k, (kind, members) in enumerate(groups):
        for tp in members:
            owner[tp.index] = k
        buckets.append(Bucket(
            index=k, kind=kind, tensors=tuple(tp.index for tp in members),
            layers=tuple(sorted({tp.layer for tp in members})),
            elements=sum(tp.size for tp in members),
            padded_elements=sum((tp.padded_size if by_kind else tp.size) for tp in members)))
    return buckets, owner


def _extra_reductions(sharded_reductions):
    """One all-reduce per reduction the analyser reports, fusing every sharded tensor's values.

    Replicated tensors add nothing: whole on every replica, their reductions are local.
    """
    fused = {}
    for reductions in sharded_reductions:
        for red, values in reductions:
            key = (red.what, red.scope)
            entry = fused.setdefault(key, {"values": 0, "tensors": 0, "dtype": red.dtype_bytes})
            if red.scope == "global":
                entry["values"] = max(entry["values"], int(values))
            else:
                entry["values"] += int(values)
                entry["tensors"] += 1
    return [ExtraReduction(what=w, scope=s, values=e["values"], dtype_bytes=e["dtype"], tensors=e["tensors"])
            for (w, s), e in fused.items()]
