"""Update strategies: what a training step does after backward, as plain data.

``replicated`` (the MLPerf v0.6 baseline, a cross-shard optimizer): every
bucket's gradients are all-reduced; every replica then updates all P weights.

``sharded`` (weight-update sharding, Xu et al. 2020): sharded buckets are
reduce-scattered, each replica updates its 1/N shard (padded) plus the tiny
replicated tensors (whose buckets are all-reduced), the optimizer's extra
small all-reduces combine partial norms/statistics, and the updated weights
are all-gathered bucket by bucket. Slots stay sharded across steps.

:func:`step_work` returns a :class:`StepWork` that the step simulator turns
into timed events: collectives carry ``nbytes`` in the collectives' size
convention (the full unsharded buffer per replica) and the bucket's layers, so
a gradient collective can start when backward has finished the bucket's
``first_layer`` and a weight all-gather can be waited for by the forward of
the bucket's layers.
"""

from dataclasses import dataclass, field
import math

from .errors import UnknownNameError
from .memory import STRATEGY_NAMES
from .planner import Plan

__all__ = ["STRATEGIES", "Collective", "UpdateWork", "StepWork", "step_work", "update_work"]

STRATEGIES = STRATEGY_NAMES
"""The update strategies, in the order reports list them (named once, in the lower-layer :mod:`memory`)."""


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
    """One per sharded bucket (sharded only)."""
    notes: tuple = field(default=())

    @property
    def grad_nbytes(self):
        return sum(c.nbytes for c in self.grad_collectives)

    @property
    def gather_nbytes(self):
        return sum(c.nbytes for c in self.weight_allgathers)

    def to_dict(self):
        return {"strategy": self.strategy,
                "grad_collectives": [c.to_dict() for c in self.grad_collectives],
                "update": self.update.to_dict(),
                "extra_allreduces": [c.to_dict() for c in self.extra_allreduces],
                "weight_allgathers": [c.to_dict() for c in self.weight_allgathers],
                "notes": list(self.notes)}

    def summary(self):
        """Flat totals for reports."""
        return {"strategy": self.strategy, "grad_collectives": len(self.grad_collectives),
                "grad_nbytes": self.grad_nbytes, "update_elements": self.update.elements,
                "update_bytes": self.update.bytes_moved, "update_flops": self.update.flops,
                "extra_allreduces": len(self.extra_allreduces),
                "extra_nbytes": sum(c.nbytes for c in self.extra_allreduces),
                "weight_allgathers": len(self.weight_allgathers), "gather_nbytes": self.gather_nbytes}


def _check(strategy):
    if strategy not in STRATEGIES:
        raise UnknownNameError("strategy", strategy, STRATEGIES)


def update_work(plan: Plan, strategy):
    """:class:`UpdateWork` of one replica: all tensors (replicated) or the shards plus the
    replicated tensors (sharded), each costed exactly by the optimizer analysis of its case."""
    _check(strategy)
    a = plan.analysis
    elements = kernels = 0
    read = written = flops = 0.0
    for t in plan.tensors:
        case = a.case_for(t.shape)
        kernels += case.passes
        shape = t.shape if (strategy == "replicated" or t.replicated) else t.shard_shape
        elements += math.prod(shape)
        read += case.bytes_read(shape)
        written += case.bytes_written(shape)
        flops += case.flops(shape)
    return UpdateWork(elements=elements, bytes_read=float(read), bytes_written=float(written), flops=float(flops),
                      kernels=kernels)


def step_work(plan: Plan, strategy):
    """The :class:`StepWork` of *strategy* for *plan*."""
    _check(strategy)
    gb, ab = plan.grad_bytes, plan.gather_bytes
    grads, gathers, extra = [], [], []
    for b in plan.buckets:
        common = dict(bucket=b.index, first_layer=b.first_layer, layers=b.layers)
        if strategy == "replicated" or b.kind == "replicated":
            grads.append(Collective("all-reduce", int(b.elements * gb), "gradients", **common))
        else:
            grads.append(Collective("reduce-scatter", int(b.padded_elements * gb), "gradients", **common))
            gathers.append(Collective("all-gather", int(b.padded_elements * ab), "weights", **common))
    if strategy == "sharded":
        extra = [Collective("all-reduce", int(r.nbytes), r.what) for r in plan.extra_reductions]
    notes = ()
    if strategy == "sharded" and plan.replicated_tensors:
        notes = (f"{len(plan.replicated_tensors)} tensors stay replicated (under {plan.replicate_below_elements} "
                 "elements, or not worth cutting: see the plan's notes): all-reduced and updated whole on every "
                 "replica",)
    return StepWork(strategy=strategy, grad_collectives=tuple(grads), update=update_work(plan, strategy),
                    extra_allreduces=tuple(extra), weight_allgathers=tuple(gathers), notes=notes)

