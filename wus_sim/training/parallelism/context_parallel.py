"""Context parallelism: the ``context`` mesh axis of a step, as MaxText splits a long sequence.

What MaxText does with the axis (github.com/AI-Hypercomputer/maxtext at
e591f30cbbf217ed67ef71263ec0538239f9c3b8):

* src/maxtext/configs/base.yml, ``logical_axis_rules``: ``['activation_length', ['context', ...]]``
  (and ``activation_q_length``, ``activation_length_attn``): each sequence's tokens are split over
  ``context``; ``['activation_batch', ['data', 'fsdp', 'fsdp_transpose', 'expert']]``: the batch is
  *not*, so a data-parallel group's examples are shared by its ``C`` context devices, each with
  ``1/C`` of every sequence; ``['embed', ['fsdp', 'fsdp_transpose', 'context', ..., 'expert']]``
  (and ``embed_moe``, ``embed_vocab``, ``q_lora``, ``kv_lora``): every weight is sharded over
  ``context`` as over fsdp, gathered before use and its gradient reduce-scattered over it.
  ``['activation_kv_length', []]``: keys and values are not split by the sequence inside attention.
* src/maxtext/layers/attention_op.py, ``AttentionOp.tpu_flash_attention``: with
  ``context_parallel_strategy: "all_gather"`` (base.yml's default; "ring", "ulysses" and "usp" are
  opt-in kernels) the splash kernel runs in a ``shard_map`` whose query is sequence-sharded and
  whose K and V are replicated over ``context`` ("For the all-gather path Q is sequence-sharded and
  K/V are replicated"): XLA all-gathers K and V over the context axis before every attention
  layer, and backward reduce-scatters their gradients (the all-gather's transpose). With
  ``context_parallel_load_balance: true`` (default) the sequence is reordered so each device holds
  chunks ``i`` and ``2C - 1 - i`` (``max_utils.reorder_sequence``; K/V are put back in order
  inside the kernel): the causal work is even (:mod:`wus_sim.model.ops.context`).

So the step (:mod:`.mesh_step`): the layers run :func:`~wus_sim.model.ops.context.context_view`
(``1/C`` of the tokens: FLOPs and activations ``/ C``); the plan shards every tensor over
:data:`WEIGHT_SHARD_AXES` (``fsdp x context x expert``, ``x data`` fully sharded); and per attention
layer :func:`kv_gather_nbytes` is all-gathered over the context rings in forward and, in backward,
all-gathered again (the flash backward kernel reads the whole K and V; a device keeps only its
``1/C`` of them, as MaxText's default ``remat_policy: full`` recomputes the layer, gather included)
and its gradient reduce-scattered: one forward, two backward collectives a layer
(:func:`context_times`). Memory counts one layer's gathered K and V and their whole gradients
(:func:`with_kv_buffers`).

Where they sit: on the attention layer's critical path (the kernel needs the whole K and V; its
gradients are the next backward matmuls' inputs), counted apart (``context_comm_s``). MaxText's
all-gather path does not overlap them; ring attention (``context_parallel_strategy: "ring"``), which
would, is not modelled. Across slices (``dcn_context_parallelism``) is not modelled: DCN meshes
have no context axis.
"""

import math

from ...inputs.errors import ConfigError
from ...model.layer_stack import block_widths

__all__ = ["WEIGHT_SHARD_AXES", "SEARCH_MIN_TOKENS", "SEARCH_SIZES", "check_context_mesh", "kv_gather_nbytes",
           "context_times", "with_kv_buffers", "with_context_meshes"]

WEIGHT_SHARD_AXES = ("fsdp", "context", "expert")
"""The axes that shard the weights where data replicates them (MaxText's ``embed`` rule: fsdp,
context, expert), in mesh order."""
SEARCH_MIN_TOKENS = 32768
"""Tokens per sequence from which a search tries context sizes (our rule, a choice: a long context is
what the axis is for, at 32k tokens Llama-3-8B's layer inputs alone are 8 GiB a sequence; shorter
sequences keep the candidates they had, and a ``--mesh context=C`` fixes a size at any length)."""
SEARCH_SIZES = (2, 4, 8)
"""Context sizes a search tries (each must divide the sequence and an fsdp size it takes them
from): at most three more meshes per fsdp mesh."""


def check_context_mesh(workload, mesh, *, key_path="mesh"):
    """Refuse, in one line, a context axis that does not divide *workload*'s tokens per sequence
    (each device holds ``1/C`` of them) or an attention layer's query tokens. Checked before
    anything runs."""
    c = mesh.context
    if c == 1:
        return
    tokens = [workload.units_per_example] + [a.query_tokens for a in workload.attention]
    if workload.flops_unit != "token" or any(t % c for t in tokens):
        raise ConfigError(f"splits each sequence {c} ways, but {workload.name} has {workload.units_per_example:,} "
                          f"{workload.flops_unit or 'unit'}s per {workload.example_unit}; context must divide the "
                          "tokens per sequence", key_path=key_path, value=str(mesh))


def kv_gather_nbytes(workload, attention, per_group_batch, tensor):
    """Bytes of one attention layer's K and V all-gather over the context axis (each device's
    whole buffer after the gather, the collectives' size convention): ``2 x batch x key tokens x
    kv heads / T x head_dim`` at the activation dtype. KV heads are sharded over ``tensor``
    (``activation_kv_heads``), whole heads, replicated when T exceeds them; a block without separate
    KV widths (no stack) has as many KV heads as query heads."""
    widths = block_widths(workload)
    kv_heads = attention.heads if widths is None else max(1, round(widths.kv_dim / attention.head_dim))
    per_device = math.ceil(kv_heads / tensor) * attention.head_dim
    return 2 * per_group_batch * attention.key_tokens * per_device * workload.activation_bytes


def context_times(workload, mesh, batch, coll_s):
    """Per layer ``(forward_s, backward_s)`` the attention layers wait on their K/V collectives, their
    count and bytes per step and their busy seconds, for the *mesh*'s context axis: *workload* is the
    whole model, *batch* a data-parallel group's examples, *coll_s* the step's
    ``coll_s(op, nbytes, axes)``. Forward: an all-gather; backward: the all-gather again and the
    gradients' reduce-scatter (module doc)."""
    n = len(workload.layer_fwd_flops)
    fwd, bwd = [0.0] * n, [0.0] * n
    if mesh.context == 1:
        return fwd, bwd, 0, 0.0, 0.0
    count, nbytes = 0, 0.0
    for a in workload.attention:
        size = kv_gather_nbytes(workload, a, batch, mesh.tensor)
        ag = coll_s("all-gather", size, ("context",))
        rs = coll_s("reduce-scatter", size, ("context",))
        fwd[a.layer] += ag
        bwd[a.layer] += ag + rs
        count += 3
        nbytes += 3 * size
    return fwd, bwd, count, nbytes, float(sum(fwd) + sum(bwd))


def with_kv_buffers(memory, workload, mesh, batch):
    """*memory* (a :class:`~wus_sim.model.memory.MemoryBreakdown`) with one attention layer's gathered K
    and V and, in its backward, their whole gradients before the reduce-scatter: ``2 x``
    :func:`kv_gather_nbytes` of the largest layer in ``collective_buffers`` and the peak (transient,
    one layer at a time, beside the kept activations at backward's start). *memory* itself without a
    context axis."""
    if mesh.context == 1 or not workload.attention:
        return memory
    from dataclasses import replace

    nbytes = 2 * max(kv_gather_nbytes(workload, a, batch, mesh.tensor) for a in workload.attention)
    return replace(memory, collective_buffers=memory.collective_buffers + nbytes, peak=memory.peak + nbytes,
                   details={**memory.details, "kv_gather_buffers": nbytes})


def with_context_meshes(workload, meshes, fixed=None):
    """*meshes* (a list) with, for a long sequence (at least :data:`SEARCH_MIN_TOKENS` tokens), each
    followed by itself with ``C`` of its fsdp moved to context, for ``C`` in :data:`SEARCH_SIZES`
    dividing its fsdp size and the sequence (the weights stay sharded alike; the sequence is split
    instead of the batch): at most 4 x as many, in the same order otherwise. *meshes* itself below
    that length, or for a model that is not a token sequence. *fixed*: a context size the caller
    fixed, tried alone at any length (the search keeps only the meshes with it)."""
    sizes = (fixed,) if fixed is not None and fixed > 1 else SEARCH_SIZES
    if workload.flops_unit != "token" or (sizes == SEARCH_SIZES and workload.units_per_example < SEARCH_MIN_TOKENS):
        return meshes
    from dataclasses import replace

    out = []
    for m in meshes:
        out.append(m)
        for c in sizes:
            if m.context == 1 and m.fsdp % c == 0 and workload.units_per_example % c == 0 and all(
                    a.query_tokens % c == 0 for a in workload.attention):
                out.append(replace(m, fsdp=m.fsdp // c, context=c))
    return out
