"""Update strategies: what a training step does after backward, as plain data.

``replicated`` (the MLPerf v0.6 baseline, a cross-shard optimizer): every
bucket's gradients are all-reduced; every replica then updates all P weights.

``sharded`` (weight-update sharding, Xu et al. 2020): sharded buckets are
reduce-scattered, each replica updates its 1/N shard (padded) plus the tiny
replicated tensors (whose buckets are all-reduced), the optimizer's extra
small all-reduces combine partial norms/statistics, and the updated weights
are all-gathered bucket by bucket. Slots stay sharded across steps.

``fully-sharded`` (ZeRO stage 3, Rajbhandari et al. 2020, arXiv 1910.02054; PyTorch
FSDP, Zhao et al. 2023, arXiv 2304.11277): weights stay sharded between uses too.
Each sharded bucket's weights are all-gathered just before its forward and again
before its backward (unless *keep_gathered_weights* keeps them from forward, trading
memory for the second gather), then released; gradients are reduce-scattered and
the update is the sharded one, so there is no all-gather after the update. The step
moves one more all-gather of every sharded bucket than ``sharded`` does (the same
bytes, with *keep_gathered_weights*), in exchange for holding only 1/N of the weights.

:func:`step_work` returns a :class:`StepWork` that the step simulator turns
into timed events: collectives carry ``nbytes`` in the collectives' size
convention (the full unsharded buffer per replica) and the bucket's layers, so
a gradient collective can start when backward has finished the bucket's
``first_layer`` and a weight all-gather can be waited for by the forward of
the bucket's layers.
"""

from dataclasses import dataclass, field, replace
import math

from ...inputs.errors import ConfigError, UnknownNameError
from ...inputs.memo import IdentityMemo
from ...model.memory import PAPER_PAIR, STRATEGY_NAMES
from ..parameters.params import STRATEGY_CHOICES
from .sharding_plan import Plan

__all__ = ["STRATEGIES", "BOTH", "Collective", "UpdateWork", "StepWork", "step_work", "update_work", "strategy_names"]

STRATEGIES = STRATEGY_NAMES
"""The update strategies, in the order reports list them (named once, in the lower-layer :mod:`memory`)."""
BOTH = PAPER_PAIR
"""The two strategies of the paper: what ``both`` means, and what runs when none is named."""


@dataclass(frozen=True)
class Collective:
    """One collective a step issues."""

    op: str
    """``'all-reduce'``, ``'reduce-scatter'`` or ``'all-gather'``."""
    nbytes: int
    """Full buffer per replica, bytes (RS: in; AG: out; AR: both)."""
    what: str
    """``'gradients'``, ``'weights'`` or the reduction (``'norm(w)'``)."""
    bucket: int = None
    """Plan bucket index (``None`` for an extra reduction)."""
    first_layer: int = None
    """Smallest layer of the bucket: its gradient is complete when backward finishes this layer."""
    layers: tuple = ()
    """Layers whose tensors the bucket holds (their forward needs the gathered weights)."""

    def to_dict(self):
        return {"op": self.op, "nbytes": self.nbytes, "what": self.what, "bucket": self.bucket,
                "first_layer": self.first_layer, "layers": list(self.layers)}


@dataclass(frozen=True)
class UpdateWork:
    """The optimizer step one replica runs (vector unit, memory-bound)."""

    elements: int
    """Weight elements updated on this replica (padding included)."""
    bytes_read: float
    bytes_written: float
    flops: float
    kernels: int = 0
    """Update kernels run on this replica: one per pass over each tensor (or shard) it
    updates (LARS and LAMB pass twice: the norms, then the step); each costs the
    compute model's fixed cost per op."""

    @property
    def bytes_moved(self):
        return self.bytes_read + self.bytes_written

    def to_dict(self):
        return {"elements": self.elements, "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                "bytes_moved": self.bytes_moved, "flops": self.flops}


@dataclass(frozen=True)
class StepWork:
    """Everything a step does after backward under one strategy."""

    strategy: str
    grad_collectives: tuple
    """One per bucket, in the order backward completes the buckets."""
    update: UpdateWork
    extra_allreduces: tuple = ()
    """Small all-reduces of partial results (sharded only; replicated replicas hold whole tensors)."""
    weight_allgathers: tuple = ()
    """One per sharded bucket after the update (sharded only)."""
    forward_allgathers: tuple = ()
    """One per sharded bucket before its forward (fully-sharded only)."""
    backward_allgathers: tuple = ()
    """One per sharded bucket before its backward (fully-sharded, unless weights are kept from forward)."""
    notes: tuple = field(default=())

    def __repr__(self):
        return (f"<StepWork {self.strategy}: {len(self.grad_collectives)} gradient collectives "
                f"({self.grad_nbytes / 2**30:.3g} GiB), {len(self.all_gathers)} weight all-gathers, update of "
                f"{self.update.elements:,} elements>")

    @property
    def grad_nbytes(self):
        return sum(c.nbytes for c in self.grad_collectives)

    @property
    def all_gathers(self):
        """Every weight all-gather of the step."""
        return self.weight_allgathers + self.forward_allgathers + self.backward_allgathers

    @property
    def gather_nbytes(self):
        return sum(c.nbytes for c in self.all_gathers)

    def to_dict(self):
        return {"strategy": self.strategy,
                "grad_collectives": [c.to_dict() for c in self.grad_collectives],
                "update": self.update.to_dict(),
                "extra_allreduces": [c.to_dict() for c in self.extra_allreduces],
                "weight_allgathers": [c.to_dict() for c in self.weight_allgathers],
                "forward_allgathers": [c.to_dict() for c in self.forward_allgathers],
                "backward_allgathers": [c.to_dict() for c in self.backward_allgathers],
                "notes": list(self.notes)}

    def summary(self):
        """Flat totals for reports."""
        return {"strategy": self.strategy, "grad_collectives": len(self.grad_collectives),
                "grad_nbytes": self.grad_nbytes, "update_elements": self.update.elements,
                "update_bytes": self.update.bytes_moved, "update_flops": self.update.flops,
                "extra_allreduces": len(self.extra_allreduces),
                "extra_nbytes": sum(c.nbytes for c in self.extra_allreduces),
                "weight_allgathers": len(self.all_gathers), "gather_nbytes": self.gather_nbytes}


def _check(strategy):
    if strategy not in STRATEGIES:
        raise UnknownNameError("strategy", strategy, STRATEGIES)


def update_work(plan: Plan, strategy):
    """:class:`UpdateWork` of one replica: all tensors (replicated) or the shards plus the
    replicated tensors (sharded and fully-sharded), each costed exactly by the optimizer
    analysis of its case."""
    _check(strategy)
    # of the plan only its tensors and analysis count: plans shared by a sweep's points share it
    return _UPDATE_WORK.get((plan.tensors, plan.analysis), strategy, lambda: _update_work(plan, strategy))


_UPDATE_WORK = IdentityMemo()


def _update_work(plan, strategy):
    a = plan.analysis
    elements = kernels = 0
    read = written = flops = 0.0
    per_shape = {}  # (shape, updated shape) -> its terms: a model repeats its layers' shapes
    for t in plan.tensors:
        shape = t.shape if (strategy == "replicated" or t.replicated) else t.shard_shape
        terms = per_shape.get((t.shape, shape))
        if terms is None:
            case = a.case_for(t.shape)
            terms = per_shape[(t.shape, shape)] = (case.passes, math.prod(shape), case.bytes_read(shape),
                                                   case.bytes_written(shape), case.flops(shape))
        kernels += terms[0]
        elements += terms[1]
        read += terms[2]  # summed tensor by tensor in plan order, as before: the same bits
        written += terms[3]
        flops += terms[4]
    return UpdateWork(elements=elements, bytes_read=float(read), bytes_written=float(written), flops=float(flops),
                      kernels=kernels)


_STEP_WORK = IdentityMemo()


def strategy_names(strategies):
    """*strategies* (a non-empty list of strategy names; a str is not split into letters) as a tuple."""
    names = () if isinstance(strategies, (str, bytes)) or not hasattr(strategies, "__iter__") else tuple(strategies)
    if not names or not all(isinstance(s, str) for s in names):
        raise ConfigError("must be a non-empty list of strategy names", key_path="strategies", value=strategies)
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown:
        raise UnknownNameError("strategy", unknown[0], STRATEGY_CHOICES)
    return names


def step_work(plan: Plan, strategy, *, keep_gathered_weights=False):
    """The :class:`StepWork` of *strategy* for *plan*; *keep_gathered_weights* (fully-sharded
    only) keeps each bucket's weights from its forward to its backward instead of gathering twice.
    One object per plan and arguments (the points of a sweep on one plan share it; it is frozen)."""
    _check(strategy)
    return _STEP_WORK.get((plan,), (strategy, bool(keep_gathered_weights)),
                          lambda: _step_work(plan, strategy, keep_gathered_weights))


def _step_work(plan, strategy, keep_gathered_weights):
    gb, ab = plan.grad_bytes, plan.gather_bytes
    grads, gathers, extra = [], [], []
    # the replicated update all-reduces every gradient: its own buckets, whatever the shard format
    buckets = plan.allreduce_buckets if strategy == "replicated" else plan.buckets
    for b in buckets:
        common = dict(bucket=b.index, first_layer=b.first_layer, layers=b.layers)
        if strategy == "replicated" or b.kind == "replicated":
            grads.append(Collective("all-reduce", int(b.elements * gb), "gradients", **common))
        else:
            grads.append(Collective("reduce-scatter", int(b.padded_elements * gb), "gradients", **common))
            # fully-sharded gathers each layer's weights in the compute dtype (Plan.layer_gather_bytes)
            width = plan.layer_gather_bytes if strategy == "fully-sharded" else ab
            gathers.append(Collective("all-gather", int(b.padded_elements * width), "weights", **common))
    if strategy != "replicated":
        extra = [Collective("all-reduce", int(r.nbytes), r.what) for r in plan.extra_reductions]
    notes = ()
    if strategy != "replicated" and plan.replicated_tensors:
        notes = (f"{len(plan.replicated_tensors)} tensors stay replicated (under {plan.replicate_below_elements} "
                 "elements, or not worth cutting: see the plan's notes): all-reduced and updated whole on every "
                 "replica",)
    sharded_gathers, forward, backward = tuple(gathers), (), ()
    if strategy == "fully-sharded":
        sharded_gathers = ()
        forward = tuple(replace(c, what="weights for forward") for c in gathers)
        if not keep_gathered_weights:
            backward = tuple(replace(c, what="weights for backward") for c in gathers)
    return StepWork(strategy=strategy, grad_collectives=tuple(grads), update=update_work(plan, strategy),
                    extra_allreduces=tuple(extra), weight_allgathers=sharded_gathers,
                    forward_allgathers=forward, backward_allgathers=backward, notes=notes)

