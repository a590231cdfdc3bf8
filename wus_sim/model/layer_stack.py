"""A transformer workload as the stack of identical blocks MaxText scans: which layers form each
block, the widths of the activations a block names, and MaxText's remat policies over them.

MaxText runs its decoder layers as one ``jax.lax.scan`` over a stack of identical blocks
(``scan_layers: True``, github.com/AI-Hypercomputer/maxtext src/maxtext/configs/base.yml), each
block wrapped in ``nn.remat`` with a checkpoint policy (src/maxtext/layers/decoders.py,
``get_remat_policy``). Three parts of the step read that structure:

* :func:`stack_units`: the units whose gathered weights a fully-sharded step holds at once (a
  scanned block, or a layer outside the stack: the embedding, the head);
* :func:`block_widths` and :func:`matmul_shares`: the widths of a block's named activations and
  the FLOP share of the matmuls a tensor-parallel collective feeds or follows (collective matmul,
  :mod:`wus_sim.training.parallelism.mesh_step`);
* :data:`REMAT_POLICIES`: what each MaxText policy saves on the device, offloads to host memory or
  recomputes (:func:`policy_bytes_per_element`, :func:`recompute_fractions`,
  :func:`host_bytes_per_layer`), and :func:`policy_layer_times`, the layer times under one.

A workload is a stack when it has two or more attention layers, evenly spaced, and every block
(an attention layer up to the next one) holds the same parameters: the imported decoders (Llama,
GPT-3) and BERT; not the Transformer's encoder-decoder, nor GNMT.
"""

from dataclasses import dataclass

import numpy as np

from ..inputs.errors import ConfigError
from ..inputs.memo import IdentityMemo
from .ops.experts import expert_view
from .ops.remat_names import (ATTENTION_TENSORS as _ATTN, CUSTOM_TENSORS, MLP_TENSORS as _MLP,
                              POLICY_TENSORS, REMAT_POLICIES, canonical_policy, check_remat_policy, policy_tensors)

__all__ = ["LayerStack", "BlockWidths", "layer_stack", "stack_units", "block_widths", "matmul_shares",
           "REMAT_POLICIES", "POLICY_TENSORS", "CUSTOM_TENSORS", "policy_tensors", "canonical_policy",
           "policy_bytes_per_element", "recompute_fractions",
           "host_bytes_per_layer", "policy_layer_times", "PolicyLayerTimes", "host_Bps_per_replica",
           "layer_times_under", "host_offload_parts", "activation_bytes_under_policy", "check_remat_policy",
           "moe_device_view"]


@dataclass(frozen=True)
class BlockWidths:
    """Per-token widths of one block's activations, elements (the whole model's, never a
    tensor-parallel device's: :func:`wus_sim.training.parallelism.tensor_parallel.split_workload`
    keeps the unsplit stack on the split workload)."""

    d_model: int
    """Hidden width: the layer input, the attention output projection's and the MLP's output."""
    q_dim: int
    """Query heads x head width."""
    kv_dim: int
    """Key (and value) heads x head width."""
    mlp_dim: int
    """MLP hidden width (the active experts' for a mixture of experts)."""
    mlp_inputs: int
    """MLP input projections: 2 for a gated MLP (``mlpwi_0``, ``mlpwi_1``), 1 otherwise."""
    post_norm: bool = False
    """Whether a norm closes the block (BERT's post-norm) and so differentiates the sum the MLP's
    output enters: only then does backward read that output (``mlpwo``). In a pre-norm block (every
    decoder MaxText runs) it only enters the residual sum, the next block's input, which is saved
    as that block's own: no remat policy stores it, whatever it names. Read from the workload's
    ``selective`` count, which keeps the MLP's output exactly for a post-norm block."""


@dataclass(frozen=True)
class LayerStack:
    """The scanned blocks of a workload."""

    blocks: tuple
    """``(first layer, last layer)`` of each block, forward order."""
    attention_layers: tuple
    """The attention layer of each block (its first)."""
    widths: BlockWidths
    stack_term: int
    """Index of the activation term that spans the blocks (``layers`` = their number), or -1."""

    @property
    def span(self):
        return self.blocks[0][1] - self.blocks[0][0] + 1

    def block_of(self, layer):
        """Index of the block holding *layer*, or ``None``."""
        first = self.blocks[0][0]
        k = (layer - first) // self.span
        return k if layer >= first and k < len(self.blocks) else None


def _out_in(workload, t):
    """``(output width, input width)`` of a rank-2 weight under the workload's layout."""
    if workload.dense_layout == "out_in":
        return t.shape[0], t.shape[1]
    return t.shape[-1], t.shape[0]


def layer_stack(workload):
    """The :class:`LayerStack` of *workload*, or ``None`` when it is not a stack (module doc).
    A split workload carries its unsplit model's (``workload.stack``)."""
    given = getattr(workload, "stack", None)
    if given is not None:
        return given or None
    return _STACKS.get((workload,), (), lambda: _layer_stack(workload))


_STACKS = IdentityMemo(maxsize=256)


def _layer_stack(workload):
    attn = sorted({a.layer for a in workload.attention})
    if len(attn) < 2:
        return None
    span = attn[1] - attn[0]
    if any(b - a != span for a, b in zip(attn, attn[1:])) or attn[-1] + span > workload.num_layers:
        return None
    params = workload.layer_params()
    blocks = tuple((a, a + span - 1) for a in attn)
    sums = {int(params[a:b + 1].sum()) for a, b in blocks}
    if len(sums) != 1:
        return None
    mats = [t for t in workload.tensors if len(t.shape) == 2]
    embeds = [t for t in mats if "embed" in t.name.lower()] or mats
    d = int(min(max(embeds, key=lambda t: t.size).shape))
    a0 = next(a for a in workload.attention if a.layer == attn[0])
    q = a0.heads * a0.head_dim
    attn_params = sum(t.size for t in mats if t.layer == attn[0])
    kv = max(0, round((attn_params - 2 * d * q) / (2 * d)))
    wi = wo = 0
    for t in mats:
        if attn[0] < t.layer <= blocks[0][1]:
            out, _ = _out_in(workload, t)
            if out == d:
                wo += 1
            else:
                wi += 1
    mlp_inputs = 2 if wo and round(wi / wo) >= 2 else 1
    mlp_flops = float(np.sum(workload.layer_fwd_flops[attn[0] + 1:blocks[0][1] + 1]))
    tokens = max(workload.units_per_example, 1)
    mlp = round(mlp_flops / tokens / (2 * d * (mlp_inputs + 1))) if d else 0
    term = next((i for i, t in enumerate(workload.activation_terms) if t.layers == len(blocks)), -1)
    post_norm = False
    if term >= 0 and workload.activation_terms[term].selective_bytes_per_element is not None and d:
        # selective keeps the input, Q, K, V, the output projection's output and the MLP's input
        # projections' outputs, and the MLP's output too where a norm closes the block
        b = workload.activation_bytes
        pre_norm = b * (2 * d + q + 2 * kv + mlp_inputs * mlp)
        post_norm = workload.activation_terms[term].selective_bytes_per_element * d - pre_norm >= 0.5 * b * d
    widths = BlockWidths(d_model=d, q_dim=q, kv_dim=kv, mlp_dim=mlp, mlp_inputs=mlp_inputs, post_norm=post_norm)
    return LayerStack(blocks=blocks, attention_layers=tuple(attn), widths=widths, stack_term=term)


def moe_device_view(workload, ways=1, capacity_factor=-1.0, load_imbalance=1.0):
    """:func:`~wus_sim.model.ops.experts.expert_view` of *workload* keeping its blocks' widths (the
    whole model's, never the padded or split expert widths the view's FLOPs would give)."""
    if ways == 1 and capacity_factor <= 0:
        return workload
    return expert_view(workload, ways, capacity_factor, load_imbalance, stack=layer_stack(workload) or False)


def stack_units(workload):
    """Forward-order units of a stack's layers, ``unit[layer]``: one per block, one per layer
    outside the stack (the embedding, the head), or ``None`` for a workload that is no stack."""
    stack = layer_stack(workload)
    if stack is None:
        return None
    units, k = [], -1
    for layer in range(workload.num_layers):
        b = stack.block_of(layer)
        if b is None or layer == stack.blocks[b][0]:
            k += 1
        units.append(k)
    return units


def block_widths(workload):
    """:class:`BlockWidths` of *workload*'s blocks, or ``None``."""
    stack = layer_stack(workload)
    return None if stack is None else stack.widths


def matmul_shares(workload):
    """Per layer ``(share in, share out)``: the fractions of the layer's forward FLOPs in the
    matmuls a tensor-parallel all-gather feeds (the column-parallel ones: Q, K, V; the MLP's input
    projections) and a reduce-scatter follows (the row-parallel ones: the attention output
    projection, the MLP's output projection), by the block's widths (2 x d x width FLOPs per token
    each). A layer outside a stack, or one holding both kinds, is split by the same widths over its
    weight FLOPs; one without weight FLOPs gets ``(0, 0)`` (its collectives have nothing to hide under);
    a workload that is no stack gives each layer's weight FLOPs half and half."""
    flops = np.asarray(workload.layer_fwd_flops, dtype=float)
    weight = np.maximum(flops - workload.layer_attention_flops, 0.0)
    frac = np.divide(weight, flops, out=np.zeros_like(flops), where=flops > 0)
    shares_in, shares_out = frac / 2, frac / 2
    stack = layer_stack(workload)
    if stack is not None:
        w = stack.widths
        attn_in = (w.q_dim + 2 * w.kv_dim) / (2 * w.q_dim + 2 * w.kv_dim)
        mlp_in = w.mlp_inputs / (w.mlp_inputs + 1)
        for first, last in stack.blocks:
            shares_in[first], shares_out[first] = frac[first] * attn_in, frac[first] * (1 - attn_in)
            for layer in range(first + 1, last + 1):
                shares_in[layer], shares_out[layer] = frac[layer] * mlp_in, frac[layer] * (1 - mlp_in)
    return shares_in, shares_out


# ----------------------------------------------------------------------------- remat policies
def _check_policy(policy):
    policy_tensors(policy)


def _named_widths(w):
    """Elements per token of each named tensor of a block that backward reads, so that a policy
    naming it stores it: ``mlpwo`` only in a post-norm block (:attr:`BlockWidths.post_norm`; JAX
    saves a named value only where it is a residual of the backward pass)."""
    return {"query_proj": w.q_dim, "key_proj": w.kv_dim, "value_proj": w.kv_dim, "out_proj": w.d_model,
            "mlpwi_0": w.mlp_dim, "mlpwi_1": w.mlp_dim if w.mlp_inputs == 2 else 0,
            "mlpwo": w.d_model if w.post_norm else 0}


def _stack_or_error(workload, policy):
    stack = layer_stack(workload)
    if stack is None or stack.stack_term < 0:
        raise ConfigError(f"needs a stack of identical transformer blocks, and workload {workload.name} is none "
                          "(remat_policy names MaxText's checkpointed tensors of a decoder block)",
                          key_path="remat_policy", value=policy)
    return stack


def policy_bytes_per_element(workload, policy):
    """``(device, host)`` bytes per element of the stack's activation term (one element = one
    token x ``d_model`` of one block) that *policy* keeps: the block input (device, every policy)
    plus the saved tensors' widths, and the offloaded tensors' widths, x the activation dtype."""
    _check_policy(policy)
    stack = _stack_or_error(workload, policy)
    w = stack.widths
    named = _named_widths(w)
    saved, offloaded, input_offloaded = policy_tensors(policy)
    b = workload.activation_bytes
    block_input = 0 if input_offloaded else w.d_model
    device = b * (block_input + sum(named[n] for n in saved)) / w.d_model
    host = b * (w.d_model - block_input + sum(named[n] for n in offloaded)) / w.d_model
    return device, host


def recompute_fractions(workload, policy):
    """Per layer, the fraction of its forward that *policy* reruns in backward: the matmuls whose
    outputs are neither saved nor offloaded, approximated by their FLOP share of the layer's
    forward (2 x d x width per token each; the rest of the layer's forward time, its norms and
    elementwise work, is counted in that share too, not apart), plus the attention kernel (its
    score and context matmuls: no policy saves ``context``); a pre-norm block's MLP output
    projection never (no gradient reads its output). ``full`` reruns every block's whole forward
    (1, as ``remat: layer``). Layers outside the blocks: 0."""
    _check_policy(policy)
    stack = _stack_or_error(workload, policy)
    w = stack.widths
    saved, offloaded, _ = policy_tensors(policy)
    kept = set(saved) | set(offloaded)
    flops = np.asarray(workload.layer_fwd_flops, dtype=float)
    attention = workload.layer_attention_flops
    out = np.zeros(workload.num_layers)
    attn_w = {"query_proj": w.q_dim, "key_proj": w.kv_dim, "value_proj": w.kv_dim, "out_proj": w.q_dim}
    mlp_w = {"mlpwi_0": 1, "mlpwi_1": 1 if w.mlp_inputs == 2 else 0, "mlpwo": 1}
    attn_unsaved = sum(v for n, v in attn_w.items() if n not in kept) / sum(attn_w.values())
    # backward reads no output of a pre-norm block's last matmul (BlockWidths.post_norm): unsaved, it is
    # not rerun either (XLA drops what no gradient reads)
    rerun = {n for n in mlp_w if n not in kept and (n != "mlpwo" or w.post_norm)}
    mlp_unsaved = sum(mlp_w[n] for n in rerun) / sum(mlp_w.values())
    for first, last in stack.blocks:
        for layer in range(first, last + 1):
            if policy == "full":
                out[layer] = 1.0
            elif flops[layer] > 0:
                if layer == first:
                    weight = flops[layer] - attention[layer]
                    out[layer] = (attention[layer] + weight * attn_unsaved) / flops[layer]
                else:
                    out[layer] = mlp_unsaved
    return out


def host_bytes_per_layer(workload, policy):
    """Per layer, activation bytes per example *policy* offloads to host memory in forward (and
    brings back in backward): the attention tensors' (query_proj, key_proj, value_proj, out_proj)
    with the block's attention layer, the MLP's over its other layers by their FLOPs."""
    _check_policy(policy)
    stack = _stack_or_error(workload, policy)
    w = stack.widths
    named = _named_widths(w)
    _, offloaded, input_offloaded = policy_tensors(policy)
    out = np.zeros(workload.num_layers)
    if not offloaded and not input_offloaded:
        return out
    term = workload.activation_terms[stack.stack_term]
    tokens_x_d = term.elements / term.layers  # one block's elements per example (split: / T already)
    b = workload.activation_bytes
    # the block's input leaves with the attention layer, which reads it first
    attn_bytes = tokens_x_d * b * (sum(named[n] for n in offloaded if n in _ATTN)
                                   + (w.d_model if input_offloaded else 0)) / w.d_model
    mlp_bytes = tokens_x_d * b * sum(named[n] for n in offloaded if n in _MLP) / w.d_model
    flops = np.asarray(workload.layer_fwd_flops, dtype=float)
    for first, last in stack.blocks:
        out[first] = attn_bytes
        rest = flops[first + 1:last + 1]
        if rest.sum() > 0:
            out[first + 1:last + 1] = mlp_bytes * rest / rest.sum()
    return out


def host_Bps_per_replica(topology, policy):
    """The host link's bandwidth one replica (core) has, one direction: the chip's ``host_Bps`` over
    its cores; a chip without one refuses an offloading *policy*."""
    host = topology.chip.host_Bps
    if host is None:
        raise ConfigError(f"offloads activations to host memory, and chip {topology.chip.name} has no host "
                          "link bandwidth (chips.yaml host_GBps)", key_path="remat_policy", value=policy)
    return host / topology.cores_per_chip


@dataclass(frozen=True)
class PolicyLayerTimes:
    """Per-layer times under a remat policy: :class:`~wus_sim.model.compute.LayerTimes`' arrays
    with the recompute and the exposed host transfers in them, and those transfers apart."""

    forward_s: np.ndarray
    backward_s: np.ndarray
    host_fwd_s: np.ndarray
    """Exposed device->host seconds of each layer's offloaded activations (in ``forward_s``)."""
    host_bwd_s: np.ndarray
    """Exposed host->device seconds of each layer's offloaded activations (in ``backward_s``)."""
    recompute: np.ndarray
    """:func:`recompute_fractions` (ones on the blocks for ``full``)."""


def policy_layer_times(workload, topology, per_replica_batch, params=None, *, spatial_ways=1, policy,
                       quantization="none"):
    """:class:`PolicyLayerTimes` of *workload* under MaxText remat *policy*.

    ``full`` is :func:`~wus_sim.model.compute.layer_times` with ``remat: layer``, exactly. Any other
    policy: each block layer's backward += its forward x :func:`recompute_fractions`; an
    offloading policy moves :func:`host_bytes_per_layer` x batch over the host link
    (:func:`host_Bps_per_replica`) device->host while the layer's forward runs and host->device
    while its backward runs, each exposed only where it outlasts that compute (XLA runs the
    transfers asynchronously, MaxText's HOST_OFFLOAD_FLAGS in benchmarks/xla_flags_library.py)."""
    from .compute import layer_times

    _check_policy(policy)
    zeros = np.zeros(workload.num_layers)
    if policy == "full":
        t = layer_times(workload, topology, per_replica_batch, params, spatial_ways=spatial_ways, remat="layer",
                        quantization=quantization)
        return PolicyLayerTimes(t.forward_s, t.backward_s, zeros, zeros, recompute_fractions(workload, policy))
    frac = recompute_fractions(workload, policy)
    base = layer_times(workload, topology, per_replica_batch, params, spatial_ways=spatial_ways, remat="none",
                       quantization=quantization)
    fwd = np.asarray(base.forward_s, dtype=float)
    bwd = np.asarray(base.backward_s, dtype=float) + fwd * frac
    host = host_bytes_per_layer(workload, policy) * per_replica_batch
    host_f = host_b = zeros
    if host.any():
        transfer = host / host_Bps_per_replica(topology, policy)
        host_f, host_b = _exposed_per_block(layer_stack(workload).blocks, transfer, fwd, bwd)
    return PolicyLayerTimes(fwd + host_f, bwd + host_b, host_f, host_b, frac)


def _exposed_per_block(blocks, transfer, fwd, bwd):
    """``(forward, backward)`` exposed seconds of each layer's host *transfer*: a block's copies run
    asynchronously beside the whole block's compute (XLA schedules them inside the scanned loop body,
    not layer by layer), so each direction is exposed only where the block's transfers outlast its
    compute in that direction; the excess sits on the block's last layer in forward (the copies
    finish before the next block) and on its first in backward (they arrive before its backward)."""
    host_f, host_b = np.zeros(len(transfer)), np.zeros(len(transfer))
    for first, last in blocks:
        block = slice(first, last + 1)
        moved = float(transfer[block].sum())
        host_f[last] = max(moved - float(fwd[block].sum()), 0.0)
        host_b[first] = max(moved - float(bwd[block].sum()), 0.0)
    return host_f, host_b


def layer_times_under(workload, topology, per_replica_batch, params=None, *, spatial_ways=1, remat="none",
                      remat_policy=None, quantization="none"):
    """:func:`~wus_sim.model.compute.layer_times` under *remat*, or, with a *remat_policy*,
    :func:`policy_layer_times` (its ``host_fwd_s``/``host_bwd_s``: the exposed host transfers inside
    the times)."""
    from .compute import layer_times

    if remat_policy is None:
        return layer_times(workload, topology, per_replica_batch, params, spatial_ways=spatial_ways, remat=remat,
                           quantization=quantization)
    return policy_layer_times(workload, topology, per_replica_batch, params, spatial_ways=spatial_ways,
                              policy=remat_policy, quantization=quantization)


def host_offload_parts(layers):
    """``(forward, backward)`` seconds of exposed host transfers in *layers* (0 for plain
    :class:`~wus_sim.model.compute.LayerTimes`)."""
    return (float(np.sum(getattr(layers, "host_fwd_s", 0.0))), float(np.sum(getattr(layers, "host_bwd_s", 0.0))))


def activation_bytes_under_policy(workload, policy, model="xla"):
    """Activation bytes per example kept in HBM under remat *policy*: the stack's term keeps
    :func:`policy_bytes_per_element` on the device per element (its offloaded bytes are in host
    memory), plus the larger of one block's whole activations while its backward recomputes them
    and the output head's terms (:attr:`~wus_sim.model.activations.ActivationTerm.head`, freed
    before backward reaches the blocks); other terms whole; ``full`` is ``remat: layer``."""
    if policy == "full":
        return workload.activation_bytes_kept("layer", model)
    device, _ = policy_bytes_per_element(workload, policy)
    term = layer_stack(workload).stack_term
    kept, working, head = 0.0, 0.0, 0.0
    for i, t in enumerate(workload.activation_terms):
        if t.head:  # freed before backward reaches the blocks (ActivationTerm.head)
            head += t.elements * t.bytes_per_element_under(model)
        elif i != term:
            kept += t.elements * t.bytes_per_element_under(model)
        else:
            kept += t.elements * device
            working = t.elements / t.layers * max(t.bytes_per_element_under(model) - device, 0.0)
    return float(kept + max(working, head))
