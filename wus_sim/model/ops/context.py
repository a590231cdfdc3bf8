"""A sequence split C ways (context parallelism): the part of a workload one device of a context
group runs and keeps.

Each device holds ``1/C`` of every sequence's tokens (MaxText's ``activation_length`` ->
``context`` in src/maxtext/configs/base.yml's ``logical_axis_rules``), so every per-token cost is
``1/C``: the weight matmuls' FLOPs, the activations kept for backward, the layer outputs. Its
queries attend to the whole sequence's keys (the K/V all-gather, counted by the step:
:mod:`wus_sim.training.parallelism.context_parallel`), so an attention layer keeps its key tokens
and has ``1/C`` of the query tokens: its score and context FLOPs are ``1/C`` too.

Causal attention: a device with a contiguous ``1/C`` of the sequence would do unequal work (the
last chunk's queries see every key). MaxText's ``context_parallel_load_balance: true`` (the
default) reorders the sequence so that device ``i`` holds chunks ``i`` and ``2C - 1 - i`` of ``2C``
(``max_utils.reorder_sequence``, "dual chunk swap"): every device then does the same ``1/C`` of the
causal score work, which is what the halved causal work of ``query_tokens / C`` rows against all
keys gives. Without the load balance the busiest device (the last chunk) does ``(2C - 1) / C^2``
of it; that is not modelled (the MaxText input refuses it).

The weights are not split by the sequence (the tensors stay whole; the step shards them over
context as over fsdp, MaxText's ``embed`` rule).

May import: the layers below model (hardware, inputs), not model's top modules.
"""

from dataclasses import replace

from ...inputs.memo import IdentityMemo

__all__ = ["context_view"]


def context_view(workload, ways, *, stack=None):
    """The part of *workload* one device of a *ways*-way context group runs: ``units_per_example``,
    every layer's FLOPs, the activation terms and each attention layer's query tokens ``/ ways``;
    key tokens, tensors and per-token FLOPs unchanged. *stack*: the
    :class:`~wus_sim.model.layer_stack.LayerStack` the view keeps (the whole sequence's block
    widths; ``False``: none). *workload* itself for ``ways`` 1. Memoized per workload and *ways*.
    The caller checks that *ways* divides the sequence
    (:func:`~wus_sim.training.parallelism.context_parallel.check_context_mesh`)."""
    if ways == 1:
        return workload
    return _VIEWS.get((workload, stack), int(ways), lambda: _view(workload, int(ways), stack))


_VIEWS = IdentityMemo()


def _view(workload, ways, stack):
    terms = tuple(replace(t, elements=t.elements / ways) for t in workload.activation_terms)
    attention = tuple(replace(a, query_tokens=a.query_tokens // ways) for a in workload.attention)
    return replace(
        workload, units_per_example=workload.units_per_example // ways,
        fwd_flops_per_example=workload.fwd_flops_per_example / ways,
        layer_fwd_flops=tuple(f / ways for f in workload.layer_fwd_flops),
        activation_bytes_per_example=workload.activation_bytes_per_example / ways,
        activation_terms=terms, attention=attention, stack=stack)
