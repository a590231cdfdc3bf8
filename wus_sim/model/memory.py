"""Per-replica HBM use of the update strategies, and the check that it fits.

For a :class:`~wus_sim.training.update.planner.Plan` and a per-replica batch, each strategy's
:class:`MemoryBreakdown` lists what one replica (core) allocates, in bytes:

==================  ===========================================  ==============================================
part                replicated                                   sharded
==================  ===========================================  ==============================================
weights             P x weight bytes                             formatted (padded) buffers x weight bytes: the
                                                                 all-gather leaves full weights on every replica
gradients           P x grad bytes (backward's output, all-      the reduce-scattered shards (padded/N x grad
                    reduced bucket by bucket; the update reads   bytes, kept for the update) + replicated
                    every element after the last bucket, so      tensors' whole gradients + the largest
                    the whole gradient stays)                    sharded bucket's full gradient, waiting for
                                                                 its reduce-scatter (ZeRO stage 2,
                                                                 Rajbhandari et al. 2020: each bucket is freed
                                                                 once reduce-scattered); every bucket with
                                                                 ``overlap_grad_reduce`` off
slots               every tensor's slots                         each sharded tensor's shard slots (1/N of the
                                                                 padded buffer, plus any vector the layout keeps
                                                                 whole) + replicated tensors' full slots
activations         per-replica batch x the workload's activation estimate, / spatial ways (a spatially
                    partitioned replica splits its activations over its cores; weights are whole on each),
                    x the busiest core's whole-row share (``compute.spatial_activation_share``)
collective buffers  output of the largest all-reduce in flight   output of the largest all-reduce in flight
                    (one bucket; XLA collectives are not in      (replicated-tensor buckets only: a
                    place) + nothing else                        reduce-scatter writes the gradient shard
                                                                 already counted, an all-gather writes into the
                                                                 weight buffer) + the extra reductions' values
==================  ===========================================  ==============================================

``fully-sharded`` (ZeRO-3 / FSDP style) keeps weights sharded too and gathers each
sharded bucket's full weights just before it is used (see :mod:`wus_sim.training.update.strategies`):

==================  ==============================================================================
part                fully-sharded
==================  ==============================================================================
weights             the 1/N shards (padded/N) + replicated tensors whole + the gathered buckets in
                    flight: the largest sum over ``k`` consecutive sharded buckets in forward order,
                    ``k = max(gather_prefetch + 1, most sharded buckets one layer needs)``; for a
                    stack of transformer blocks two consecutive units instead (the current block
                    and the next, as XLA schedules a scanned stack: :func:`stack_window`); with
                    ``keep_gathered_weights`` every sharded bucket (kept from forward to backward).
                    The gathered buffers are separate from the persistent shard (as PyTorch FSDP's
                    unsharded flat parameter is), so the shard is counted in both.
gradients           the reduce-scattered 1/N shards + replicated tensors' whole gradients + one
                    sharded bucket's full gradient (the largest), backward's output waiting for its
                    reduce-scatter (assumes the reduce-scatters keep up with backward)
slots               as sharded
collective buffers  as sharded
==================  ==============================================================================

The basis of each part (docs/model-error.md, "Memory"):

* weights, slots: elements from the plan (:mod:`wus_sim.training.update.planner`) x the workload file's
  dtypes (fp32 master weights and slots in Google's MLPerf TPU runs); the slots per element from
  the optimizer's analysis (:mod:`wus_sim.optimizers`);
* gradients: replicated, the whole gradient, since the update reads every element after the
  last bucket's all-reduce; sharded, ZeRO stage 2 (Rajbhandari et al. 2020, "ZeRO", arXiv
  1910.02054, sec. 5.2: each bucket's gradient is reduce-scattered and freed as backward
  produces it) on the weight-update sharding of Xu et al. 2020 (arXiv 2004.13336);
  fully-sharded, the same plus PyTorch FSDP's unsharded flat-parameter buffers for the gathered
  weights (Zhao et al. 2023, "PyTorch FSDP", arXiv 2304.11277, sec. 3);
* activations: what XLA keeps after fusion (:data:`wus_sim.model.activations.ACTIVATION_MODELS`,
  each term's ``compiled_why``), or Korthikanti et al. 2022's unfused count
  (``activation_model: unfused``);
* collective buffers: XLA's all-reduce writes a new output buffer (not in place), one bucket
  at a time in flight.

``padding`` is the part of weights, gradients and slots that is padding (it is
included in them, not added again). ``peak`` = weights + gradients + slots +
activations + collective buffers: a conservative upper bound that assumes every
part is live at the end of backward (activations freed progressively during
backward are not subtracted).
"""

from dataclasses import dataclass, field, fields

from .compute import spatial_activation_share
from .ops.experts import routed_padded_elements
from .layer_stack import stack_units
from ..inputs.errors import InfeasibleError, UnknownNameError
from ..inputs.memo import IdentityMemo
from ..inputs.units import format_bytes

__all__ = ["MemoryBreakdown", "memory_breakdown", "memory_both", "gathered_window", "layer_ahead_prefetch",
           "resolve_gather_prefetch", "STRATEGY_NAMES", "PAPER_PAIR",
           "PARTS"]

STRATEGY_NAMES = ("replicated", "sharded", "fully-sharded")
PAPER_PAIR = ("replicated", "sharded")
"""The two strategies of the paper: what ``both`` means, and what runs when none is named."""
PARTS = ("weights", "gradients", "slots", "activations", "collective_buffers")
"""Parts that add up to ``peak``."""


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes one replica (core) allocates under one strategy."""

    strategy: str
    weights: float
    gradients: float
    slots: float
    padding: float
    """Padding inside weights, gradients and slots (informational; already in them)."""
    activations: float
    collective_buffers: float
    peak: float
    capacity: float
    """HBM of one replica (core), bytes."""
    per_replica_batch: int = 0
    details: dict = field(default_factory=dict)
    """Finer parts: ``weight_padding``, ``grad_padding``, ``slot_padding``, ``grad_shards``,
    ``replicated_tensor_slots``, ``extra_reduction_buffers``; ``fully-sharded`` adds
    ``weight_shards``, ``gathered_weights`` and ``reducing_gradients``."""

    def __repr__(self):
        return (f"<MemoryBreakdown {self.strategy}: peak {format_bytes(self.peak)} of {format_bytes(self.capacity)} "
                f"per replica ({'fits' if self.peak <= self.capacity else 'does not fit'})>")

    @property
    def fits(self):
        return self.peak <= self.capacity

    @property
    def headroom(self):
        """Capacity minus peak (negative when it does not fit)."""
        return self.capacity - self.peak

    def to_dict(self):
        return {f.name: (dict(self.details) if f.name == "details" else getattr(self, f.name))
                for f in fields(self)} | {"fits": self.fits}


def layer_ahead_prefetch(plan):
    """Buckets of prefetch that keep fully-sharded gathers a layer ahead (``gather_prefetch`` null):
    while a layer computes from its first bucket, the rest of its buckets and every bucket of the
    next layer are issued, ``max over consecutive layers (buckets of one - 1 + buckets of the next)``.
    PyTorch FSDP prefetches the next wrapped module's all-gather (``forward_prefetch``,
    ``BackwardPrefetch.BACKWARD_PRE``; pytorch.org/docs/stable/fsdp.html); a layer that shares one
    bucket with its neighbours gives 1, the bucket-ahead prefetch."""
    # a function of the buckets alone, which a plan put on another slice keeps (asked at every point)
    return _PREFETCH.get((plan.buckets,), (), lambda: _layer_ahead_prefetch(plan.buckets))


_PREFETCH = IdentityMemo()


def _layer_ahead_prefetch(buckets):
    counts = {}
    for b in buckets:
        if b.kind == "sharded":
            for layer in b.layers:
                counts[layer] = counts.get(layer, 0) + 1
    layers = sorted(counts)
    pairs = [counts[a] - 1 + counts[b] for a, b in zip(layers, layers[1:])]
    return max(pairs, default=1) or 1


def resolve_gather_prefetch(plan, gather_prefetch):
    """*gather_prefetch* as given, or :func:`layer_ahead_prefetch` where it is None."""
    return layer_ahead_prefetch(plan) if gather_prefetch is None else gather_prefetch


def _gathered_elements(plan, expert_ways):
    """Per bucket of *plan*, the elements one replica gathers whole: its formatted buffer, less the
    routed experts other members of an *expert_ways*-way expert group hold (a device gathers only
    its own ``1/expert_ways`` of them: :mod:`wus_sim.model.ops.experts`); ``None`` for every bucket
    when *expert_ways* is 1."""
    if expert_ways == 1:
        return None
    routed = routed_padded_elements(plan)
    return {b.index: b.padded_elements - routed[b.index] * (1 - 1 / expert_ways) for b in plan.buckets}


def gathered_window(plan, gather_prefetch=1, keep_gathered_weights=False, expert_ways=1):
    """``(elements, padding elements)`` of the sharded buckets whose full weights one replica
    holds at once under ``fully-sharded`` (see the module doc): for a stack of transformer blocks
    (:func:`~wus_sim.model.layer_stack.stack_units`) the two consecutive units with the most
    (:func:`stack_window`), else the consecutive run of ``k`` sharded buckets in forward order with
    the most elements; all of them when kept. With an *expert_ways*-way expert axis a bucket's
    routed experts count ``1/expert_ways`` (:func:`_gathered_elements`)."""
    sharded = sorted((b for b in plan.buckets if b.kind == "sharded"), key=lambda b: (b.first_layer, b.index))
    if not sharded:
        return 0, 0
    own = _gathered_elements(plan, expert_ways)
    size = (lambda b: b.padded_elements) if own is None else (lambda b: own[b.index])
    if keep_gathered_weights:
        return sum(size(b) for b in sharded), sum(b.padded_elements - b.elements for b in sharded)
    units = stack_units(plan.workload)
    if units is not None:
        return stack_window(sharded, units, size)
    per_layer = {}
    for b in sharded:
        for layer in b.layers:
            per_layer[layer] = per_layer.get(layer, 0) + 1
    k = min(len(sharded), max(int(gather_prefetch) + 1, max(per_layer.values())))
    windows = [sharded[i:i + k] for i in range(len(sharded) - k + 1)]
    best = max(windows, key=lambda w: sum(size(b) for b in w))
    return sum(size(b) for b in best), sum(b.padded_elements - b.elements for b in best)


def stack_window(sharded, units, size=None):
    """``(elements, padding elements)`` of the gathered weights a scanned layer stack holds at once:
    the largest sum over two consecutive units (a block, or a layer outside the stack such as the
    embedding or the head) of their sharded buckets, each bucket in the unit of its first layer.

    Why two, whatever ``gather_prefetch`` says: MaxText scans the blocks (``scan_layers``), and XLA
    runs the scan's weight all-gather for the next iteration while the current one computes, one
    iteration ahead (the latency-hiding scheduler pipelines collectives across the loop's
    iterations, ``--xla_tpu_enable_ag_backward_pipelining`` among MaxText's flags,
    benchmarks/xla_flags_library.py); the gathered buffers of a finished iteration are freed. So
    the current block's full weights and the next one's are live, in forward and in backward, not
    a prefetch depth of buckets: that depth stays the timeline's (how early gathers may start)."""
    per_unit, pad_unit = {}, {}
    for b in sharded:
        u = units[b.first_layer]
        per_unit[u] = per_unit.get(u, 0) + (b.padded_elements if size is None else size(b))
        pad_unit[u] = pad_unit.get(u, 0) + b.padded_elements - b.elements
    order = sorted(per_unit)
    pairs = [(a,) for a in order] if len(order) == 1 else list(zip(order, order[1:]))
    best = max(pairs, key=lambda p: sum(per_unit[u] for u in p))
    return sum(per_unit[u] for u in best), sum(pad_unit[u] for u in best)


def _reducing_buckets(plan, overlap_grad_reduce):
    """``(elements, padding elements)`` of the sharded buckets' full gradients held at once: the
    largest one when backward hands each bucket to its reduce-scatter (assumes the reduce-scatters
    keep up with backward), every one when they wait for the end of backward."""
    sharded = [b for b in plan.buckets if b.kind == "sharded"]
    if not sharded:
        return 0, 0
    if not overlap_grad_reduce:
        return sum(b.padded_elements for b in sharded), sum(b.padded_elements - b.elements for b in sharded)
    biggest = max(sharded, key=lambda b: b.padded_elements)
    return biggest.padded_elements, biggest.padded_elements - biggest.elements


def memory_breakdown(plan, strategy, per_replica_batch, *, activation_scale=1.0, check=False,
                     gather_prefetch=None, keep_gathered_weights=False, remat="none", overlap_grad_reduce=True,
                     activation_model="xla", remat_policy=None, expert_ways=1):
    """:class:`MemoryBreakdown` of *strategy* for *plan* at *per_replica_batch* examples.

    *activation_scale* multiplies the workload's activation estimate (a what-if knob
    for its documented factors). With *check*, a peak above the replica's HBM raises
    :class:`InfeasibleError` naming the parts and the excess. *gather_prefetch* (buckets
    gathered ahead of the compute) and *keep_gathered_weights* matter to ``fully-sharded`` only.
    *remat* is the rematerialisation policy (:data:`wus_sim.model.workload.REMAT_MODES`): what
    activations backward keeps. *overlap_grad_reduce*: backward hands each bucket to its collective
    (``sharded`` then holds the buckets in flight, not the whole gradient). *activation_model*:
    :data:`wus_sim.model.activations.ACTIVATION_MODELS`. *remat_policy*: MaxText's remat policy by
    name instead of *remat* (:data:`wus_sim.model.layer_stack.REMAT_POLICIES`); what it offloads is
    in host memory, ``details['host_activations']``, not in ``peak``. *expert_ways*: the devices of an
    expert group (``fully-sharded`` over a plan whose shards span them): each gathers, and holds a
    whole gradient of, only its ``1/expert_ways`` of the routed experts
    (:mod:`wus_sim.training.parallelism.expert_parallel`); the persistent shards are the plan's.
    """
    if strategy not in STRATEGY_NAMES:
        raise UnknownNameError("strategy", strategy, STRATEGY_NAMES)
    from ..inputs.api_args import check_bool, check_int, check_number

    gather_prefetch = check_int(resolve_gather_prefetch(plan, gather_prefetch), "gather_prefetch", minimum=0, maximum=2**20)
    # the point table's range of a batch (2^24 examples per replica): 10^30 is not a batch
    per_replica_batch = check_number(per_replica_batch, "per_replica_batch", positive=True, maximum=2**24)
    activation_scale = check_number(activation_scale, "activation_scale", positive=True, maximum=1e6)
    check = check_bool(check, "check")
    keep_gathered_weights = check_bool(keep_gathered_weights, "keep_gathered_weights")
    expert_ways = check_int(expert_ways, "expert_ways", minimum=1, maximum=2**17)
    w = plan.workload
    # a spatially partitioned replica's busiest core holds whole rows of each map (see
    # wus_sim.model.compute.spatial_row_share), so a little more than an even share
    activations = (per_replica_batch * w.activation_bytes_kept(remat, activation_model, remat_policy)
                   * activation_scale
                   / plan.spatial_ways
                   * spatial_activation_share(w, plan.spatial_ways))
    weights, gradients, slots, padding, collective, details = _STATIC.get(
        (plan,), (strategy, gather_prefetch, keep_gathered_weights, overlap_grad_reduce, expert_ways),
        lambda: _batch_free_parts(plan, strategy, gather_prefetch, keep_gathered_weights, overlap_grad_reduce,
                                  expert_ways))
    peak = weights + gradients + slots + activations + collective
    out = MemoryBreakdown(strategy=strategy, weights=float(weights), gradients=float(gradients),
                          slots=float(slots), padding=float(padding), activations=float(activations),
                          collective_buffers=float(collective), peak=float(peak),
                          capacity=float(plan.topology.hbm_bytes_per_replica),
                          per_replica_batch=int(per_replica_batch),
                          details=dict(details))
    if remat_policy is not None:
        out.details["host_activations"] = float(per_replica_batch * w.activation_bytes_offloaded(remat_policy)
                                                * activation_scale / plan.spatial_ways)
    if check and not out.fits:
        raise _infeasible(plan, out)
    return out


def _batch_free_parts(plan, strategy, gather_prefetch, keep_gathered_weights, overlap_grad_reduce, expert_ways=1):
    """``(weights, gradients, slots, padding, collective buffers, details)`` of
    :func:`memory_breakdown`: every part but the activations, which alone move with the batch (a
    sweep's points at other batches share these, :data:`_STATIC`)."""
    wb, gb, sb = plan.weight_bytes, plan.grad_bytes, plan.slot_bytes
    largest_ar = lambda kinds: max((b.elements * gb for b in plan.buckets if b.kind in kinds), default=0)

    if strategy == "replicated":
        p = plan.params
        weights, gradients = p * wb, p * gb
        slots = plan.total("slot_elements") * sb
        padding = 0.0
        # the largest of the replicated update's own all-reduce buckets (see Plan.allreduce_buckets)
        collective = max((b.elements * gb for b in plan.allreduce_buckets), default=0)
        details = {"weight_padding": 0, "grad_padding": 0, "slot_padding": 0, "grad_shards": 0,
                   "replicated_tensor_slots": slots, "extra_reduction_buffers": 0}
    elif strategy == "fully-sharded":
        n = plan.replicas
        sharded_padded = plan.total("padded_size", "sharded")
        pad = plan.padding_elements
        repl = plan.replicated_elements
        window, window_pad = gathered_window(plan, gather_prefetch, keep_gathered_weights, expert_ways)
        own = _gathered_elements(plan, expert_ways)  # a device's whole gradient: its own experts' too
        size = (lambda b: b.padded_elements) if own is None else (lambda b: own[b.index])
        biggest = max((b for b in plan.buckets if b.kind == "sharded"), key=size, default=None)
        reducing = size(biggest) if biggest else 0
        reducing_pad = biggest.padded_elements - biggest.elements if biggest else 0
        shards = sharded_padded / n * gb
        ab = plan.layer_gather_bytes  # the gathered buffers hold weights in the all-gather's dtype
        weights = (sharded_padded / n + repl) * wb + window * ab
        gradients = shards + repl * gb + reducing * gb
        repl_slots = plan.total("slot_elements", "replicated") * sb
        slots = plan.total("shard_slot_elements", "sharded") * sb + repl_slots
        slot_pad = plan.total("slot_padding_elements", "sharded") * sb
        extra = sum(r.nbytes for r in plan.extra_reductions)
        collective = largest_ar(("replicated",)) + extra
        details = {"weight_padding": pad / n * wb + window_pad * ab, "grad_padding": (pad / n + reducing_pad) * gb,
                   "slot_padding": slot_pad, "grad_shards": shards,
                   "replicated_tensor_slots": repl_slots, "extra_reduction_buffers": extra,
                   "weight_shards": sharded_padded / n * wb, "gathered_weights": window * ab,
                   "reducing_gradients": reducing * gb}
        padding = details["weight_padding"] + details["grad_padding"] + slot_pad
    else:
        n = plan.replicas
        padded = plan.padded_params
        sharded_padded = plan.total("padded_size", "sharded")
        pad = plan.padding_elements
        shards = sharded_padded / n * gb
        weights = padded * wb
        # ZeRO stage 2 (Rajbhandari et al. 2020, arXiv 1910.02054, sec. 5.2): each bucket's full
        # gradient is freed once its reduce-scatter has consumed it, so what stays is the shards,
        # the replicated tensors' whole (all-reduced) gradients and the buckets in flight; without
        # the overlap every bucket waits for the end of backward, whole
        reducing, reducing_pad = _reducing_buckets(plan, overlap_grad_reduce)
        gradients = shards + plan.replicated_elements * gb + reducing * gb
        repl_slots = plan.total("slot_elements", "replicated") * sb
        slots = plan.total("shard_slot_elements", "sharded") * sb + repl_slots
        slot_pad = plan.total("slot_padding_elements", "sharded") * sb
        extra = sum(r.nbytes for r in plan.extra_reductions)
        collective = largest_ar(("replicated",)) + extra
        details = {"weight_padding": pad * wb, "grad_padding": (reducing_pad + pad / n) * gb,
                   "slot_padding": slot_pad, "grad_shards": shards,
                   "replicated_tensor_slots": repl_slots, "extra_reduction_buffers": extra,
                   "reducing_gradients": reducing * gb}
        padding = details["weight_padding"] + details["grad_padding"] + slot_pad

    return weights, gradients, slots, padding, collective, {k: float(v) for k, v in details.items()}


_STATIC = IdentityMemo()
""":func:`_batch_free_parts` per plan and the arguments it reads."""


def memory_both(plan, per_replica_batch, *, activation_scale=1.0, check=False, strategies=("replicated", "sharded"),
                **gather):
    """``{'replicated': MemoryBreakdown, 'sharded': MemoryBreakdown}`` (the two of the paper;
    *strategies* names others, e.g. :data:`STRATEGY_NAMES`; *gather* as :func:`memory_breakdown`)."""
    return {s: memory_breakdown(plan, s, per_replica_batch, activation_scale=activation_scale, check=check, **gather)
            for s in strategies}


def _infeasible(plan, m):
    over = m.peak - m.capacity
    parts = sorted(PARTS, key=lambda p: -getattr(m, p))
    listed = ", ".join(f"{p.replace('_', ' ')} {format_bytes(getattr(m, p))}" for p in parts)
    return InfeasibleError(
        f"{plan.workload.name} with {plan.analysis.name}, {m.strategy} update, per-replica batch "
        f"{m.per_replica_batch} on {plan.topology.name}: needs {format_bytes(m.peak)} of HBM per replica "
        f"({listed}) but a replica has {format_bytes(m.capacity)}; over by {format_bytes(over)} "
        f"(largest part: {parts[0].replace('_', ' ')})",
        what="hbm", need=m.peak, have=m.capacity)
