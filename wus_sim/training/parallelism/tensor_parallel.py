"""Tensor parallelism: one device's share of a layer split T ways, and the activation
collectives the split costs, Megatron-LM's way (Shoeybi et al. 2019, "Megatron-LM: Training
Multi-Billion Parameter Language Models Using Model Parallelism", arXiv 1909.08053, sec. 3).

The split: attention by heads, the MLP by its hidden width, the embedding and the output head
by vocabulary; each matrix of a layer is cut along one dimension, so every device holds
``1/T`` of its elements and runs ``1/T`` of its FLOPs (attention scores included: its heads).
Vectors (norm scales, biases of the row-parallel matmuls) stay whole on every device, as in
Megatron-LM.

The collectives: a transformer block's attention and its MLP each end in a row-parallel
matmul whose partial outputs are summed over the T devices: one all-reduce of the layer output
(batch x sequence x hidden activations) in forward per sub-layer, two per block, and two more in
backward for the gradients of the column-parallel inputs (the ``f``/``g`` operators of sec. 3).
The embedding's vocabulary-parallel lookup adds one forward all-reduce, the vocabulary-parallel
head one backward all-reduce. With sequence parallelism (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", arXiv 2205.05198, sec. 4.2.2; what
MaxText does: a reduce-scatter after the row-parallel matmul, github.com/AI-Hypercomputer/
maxtext, docs sharding guide) each all-reduce is a reduce-scatter then an all-gather of the same
total bytes, and every activation between them is sharded T ways: activation memory per device
is then ``1/T`` of the layer's, which is what :func:`split_workload` charges.

Where a layer's collectives sit: they are on its critical path (the next matmul needs the summed
activations), so the step adds them to the layer's forward and backward time and counts them
apart (``tensor_comm_s``): whole (``collective_matmul: false``), or the part a collective matmul
leaves exposed (:func:`collective_matmul_exposed_s`, the default).
"""

from dataclasses import replace
import math

import numpy as np

from ...inputs.errors import ConfigError
from ...inputs.memo import IdentityMemo
from ...model.layer_stack import layer_stack, matmul_shares, recompute_fractions

__all__ = ["check_tensor_heads", "split_workload", "model_width", "tensor_collective_layers", "tensor_collective_nbytes",
           "collective_matmul_exposed_s", "forward_reruns", "tensor_times"]


def _split_shape(shape, ways):
    """*shape* with the dimension Megatron-LM cuts divided (rounded up): the largest one (the
    vocabulary of an embedding, the hidden width of an MLP matrix, the heads x head width of
    an attention matrix), the first of equal ones. Vectors stay whole."""
    if ways == 1 or len(shape) < 2:
        return tuple(shape)
    cut = int(np.argmax(shape))
    return tuple(math.ceil(d / ways) if i == cut else d for i, d in enumerate(shape))


def check_tensor_heads(workload, mesh, *, key_path="mesh"):
    """Refuse a *mesh* whose ``tensor`` axis is larger than the query heads of an attention layer
    of *workload* (one line naming the mesh, the heads and the rule): the split is by heads, and
    below one head a device would hold no whole head (the layer times go negative). Checked
    before anything runs. KV heads: a workload lists only query heads; MaxText shards KV heads
    over ``tensor`` too and replicates them when ``tensor`` exceeds them (grouped-query
    attention), which is allowed here, its K and V projections still charged ``1/T``."""
    heads = min((a.heads for a in workload.attention), default=None)
    if heads is not None and mesh.tensor > heads:
        raise ConfigError(f"splits attention {mesh.tensor} ways, but {workload.name} has {heads} query heads "
                          f"a layer; tensor must be at most the query heads", key_path=key_path, value=str(mesh))


def split_workload(workload, ways):
    """The part of *workload* one of *ways* tensor-parallel devices holds and runs: matrices
    cut ``1/ways`` (:func:`_split_shape`), FLOPs and attention heads ``/ ways``, activations
    ``/ ways`` (sequence parallelism). ``ways == 1`` returns *workload* itself. One object per
    workload and *ways* (memoized): what is memoized by a workload's identity (its plans, its
    layer times) serves every mesh with the same tensor axis."""
    if ways == 1:
        return workload
    return _SPLITS.get((workload,), ways, lambda: _split(workload, ways))


_SPLITS = IdentityMemo()


def _split(workload, ways):
    tensors = tuple(replace(t, shape=_split_shape(t.shape, ways)) for t in workload.tensors)
    attention = tuple(replace(a, heads=math.ceil(a.heads / ways)) for a in workload.attention)
    terms = tuple(replace(t, elements=t.elements / ways) for t in workload.activation_terms)
    return replace(
        workload, tensors=tensors,
        params=int(sum(math.prod(t.shape) for t in tensors)),
        fwd_flops_per_example=workload.fwd_flops_per_example / ways,
        fwd_flops_per_unit=workload.fwd_flops_per_unit / ways,
        layer_fwd_flops=tuple(f / ways for f in workload.layer_fwd_flops),
        activation_bytes_per_example=workload.activation_bytes_per_example / ways,
        activation_terms=terms, attention=attention,
        stack=layer_stack(workload) or False)  # the whole block's widths (split heads would hide them)


def model_width(workload):
    """The hidden width ``h`` of a transformer workload: the smaller dimension of its token
    embedding (the largest matrix with "embed" in its name), else of its largest matrix."""
    mats = [t for t in workload.tensors if len(t.shape) == 2]
    if not mats:
        return 0
    embeds = [t for t in mats if "embed" in t.name.lower()] or mats
    return int(min(max(embeds, key=lambda t: math.prod(t.shape)).shape))


def tensor_collective_layers(workload):
    """Per layer, ``(forward, backward)`` all-reduces (or reduce-scatter + all-gather pairs) of
    the layer output that a T-way split costs: one each way for a layer of matrices, forward only
    for the vocabulary-parallel embedding lookup (no FLOPs: a gather), backward only for the
    vocabulary-parallel head (the layer whose matrix has the embedding's vocabulary)."""
    vocab = max((max(t.shape) for t in workload.tensors if len(t.shape) == 2 and "embed" in t.name.lower()),
                default=None)
    has_matrix = np.zeros(workload.num_layers, dtype=bool)
    is_vocab = np.zeros(workload.num_layers, dtype=bool)
    for t in workload.tensors:
        if len(t.shape) >= 2:
            has_matrix[t.layer] = True
            if vocab is not None and max(t.shape) == vocab:
                is_vocab[t.layer] = True
    flops = np.asarray(workload.layer_fwd_flops, dtype=float)
    fwd = has_matrix & ~(is_vocab & (flops > 0))  # the head's logits stay split: no forward sum
    bwd = has_matrix & ~(is_vocab & (flops <= 0))  # a lookup has no input gradient to sum
    return [(int(f), int(b)) for f, b in zip(fwd, bwd)]


def tensor_collective_nbytes(workload, per_device_batch):
    """Bytes of one tensor-parallel collective (the full buffer per device, the collectives'
    size convention): the layer output, batch x tokens x hidden x activation bytes."""
    return per_device_batch * workload.units_per_example * model_width(workload) * workload.activation_bytes


def collective_matmul_exposed_s(collective_s, matmul_s, ways):
    """Seconds a collective matmul leaves exposed: a *ways*-way all-gather feeding a matmul of
    *matmul_s* (or a reduce-scatter after one), decomposed as XLA decomposes it (Wang et al. 2023,
    "Overlap Communication with Dependent Computation via Decomposition in Large Deep Learning
    Models", ASPLOS '23): ``ways - 1`` collective-permute steps, each moving ``1/ways`` of the data
    (``step = collective_s / (ways - 1)``: one step of the ring), beside ``ways`` slices of the matmul.

    Exposed ``= min(collective_s, step + max(0, collective_s - matmul_s))``: the one step at the end of
    the chain that has nothing beside it (the reduce-scatter's last permute carries the sums of the
    slice just computed; the all-gather is charged the same one step, a choice: see the note), plus
    whatever the collective outlasts the matmul by; never more than the collective whole (a layer
    without matmuls, the embedding lookup, waits on all of it). *ways* 1: no collective, 0.

    Note: an ideal pipeline of ``ways - 1`` permutes and ``ways`` slices, each slice starting once its
    chunk is there, exposes ``max(0, collective_s + matmul_s / ways - matmul_s)``: the same when the
    collective outlasts the matmul (its excess + one slice), less, down to 0, when the matmul is
    long. The one step is kept there as the decomposition's cost that this model does not resolve
    (each permute's start and synchronisation, the smaller matmul slices): an upper bound."""
    if ways <= 1 or collective_s <= 0:
        return 0.0
    step = collective_s / (ways - 1)
    return min(collective_s, step + max(0.0, collective_s - matmul_s))


def forward_reruns(split, options):
    """Per layer of *split* (a device's share of the workload), whether backward reruns its forward
    (and so the collectives that forward waits on): ``remat`` layer or full, or a ``remat_policy``
    that recomputes one of the layer's weight matmuls (their inputs and outputs are what the
    collectives make)."""
    n = len(split.layer_fwd_flops)
    policy = options.remat_policy
    if policy is None:
        remat = options.remat in ("layer", "full") and split.rematerialises(options.remat)
        return [remat] * n
    if policy == "full":
        return [bool(f > 0) for f in recompute_fractions(split, policy)]
    flops = split.layer_fwd_flops
    attention = split.layer_attention_flops
    frac = recompute_fractions(split, policy)
    # what the fraction holds beyond the attention kernel (rerun under every policy) is weight matmuls
    return [bool(f > 0 and fl > 0 and f * fl - a > 1e-9 * fl) for f, fl, a in zip(frac, flops, attention)]


def tensor_times(workload, split, options, tensor, batch, layers, coll_s):
    """Per layer ``(forward_s, backward_s)`` the layers wait on their tensor-parallel collectives
    (exposed), their totals ``(count, nbytes)`` per step, and their busy seconds (whole), for a
    *tensor*-way axis: *split* is a device's share of *workload*, *batch* a data-parallel group's,
    *layers* the split's layer times (:func:`~wus_sim.training.step.step_layer_times`), *coll_s* the
    step's ``coll_s(op, nbytes, axes)``."""
    n = len(workload.layer_fwd_flops)
    if tensor == 1:
        return [0.0] * n, [0.0] * n, 0, 0.0, 0.0
    nbytes = tensor_collective_nbytes(workload, batch)
    per_layer = tensor_collective_layers(workload)
    rerun = forward_reruns(split, options)
    if not options.collective_matmul:
        one = coll_s("reduce-scatter", nbytes, ("tensor",)) + coll_s("all-gather", nbytes, ("tensor",))
        # backward runs the forward's again (selective keeps the matmul outputs the collectives make)
        fwd = [f * one for f, _ in per_layer]
        bwd = [(b + (f if r else 0)) * one for (f, b), r in zip(per_layer, rerun)]
        count = 2 * sum(f + b + (f if r else 0) for (f, b), r in zip(per_layer, rerun))
        return fwd, bwd, count, count / 2 * 2 * nbytes, float(sum(fwd) + sum(bwd))
    return _collective_matmul_times(split, options, tensor, nbytes, per_layer, layers, rerun, coll_s)


def _collective_matmul_times(split, options, t, nbytes, per_layer, layers, rerun, coll_s):
    """:func:`tensor_times` with collective matmuls (Wang et al. 2023, "Overlap Communication with
    Dependent Computation via Decomposition in Large Deep Learning Models", ASPLOS '23; XLA's
    windowed einsum on TPU).

    A T-way all-gather that feeds a matmul runs as T-1 collective-permute steps, each moving
    1/T of the data, while the matmul runs in T slices, each on the chunk already there; a
    reduce-scatter after a matmul likewise, each step carrying the partial sums of the slice just
    computed. One end of the chain has nothing to overlap it, and where the collective outlasts the
    matmul its excess waits too (:func:`collective_matmul_exposed_s`).

    Which matmul: in forward, the all-gather feeds the column-parallel ones (Q, K, V; the MLP's
    input projections) and the reduce-scatter follows the row-parallel one (the attention output
    projection, the MLP's output), their time the layer's forward time x their FLOP share
    (:func:`~wus_sim.model.layer_stack.matmul_shares`); in backward the transposes: the gradient's
    all-gather feeds the row-parallel matmul's backward, the reduce-scatter follows the
    column-parallel one's, each ``backward_flops_ratio`` x its forward. A rerun forward
    (rematerialisation) overlaps its collectives as forward does. ``busy_s`` stays the collectives
    whole."""
    ag = coll_s("all-gather", nbytes, ("tensor",))
    rs = coll_s("reduce-scatter", nbytes, ("tensor",))

    def exposed(c, m):
        return collective_matmul_exposed_s(c, m, t)

    share_in, share_out = matmul_shares(split)
    ratio = options.compute.backward_flops_ratio
    fwd_base = np.asarray(layers.forward_s, dtype=float) - getattr(layers, "host_fwd_s", 0.0)
    fwd, bwd, count = [], [], 0
    for i, ((f, b), r) in enumerate(zip(per_layer, rerun)):
        m_in, m_out = fwd_base[i] * share_in[i], fwd_base[i] * share_out[i]
        forward = exposed(ag, m_in) + exposed(rs, m_out)
        backward = exposed(ag, ratio * m_out) + exposed(rs, ratio * m_in)
        fwd.append(f * forward)
        bwd.append(b * backward + (f * forward if r else 0.0))
        count += 2 * (f + b + (f if r else 0))
    busy = count / 2 * (ag + rs)
    return fwd, bwd, count, count / 2 * 2 * nbytes, float(busy)
