"""Mixture-of-experts layers of a workload: which tensors are routed experts, how many a layer has
and how many each token goes to, and the work one device of an expert group runs.

Which tensors: a routed expert's weights are named ``...experts.<j>....`` (Hugging Face's
names, which the importers keep: Mixtral's ``block_sparse_moe.experts.3.w1.weight``,
DeepSeek's ``mlp.experts.12.gate_proj.weight``), or the experts of a layer are stacked in one tensor
per weight, ``...experts.<name>...`` of ``[experts x rows, cols]``, as MaxText holds them (the
MaxText model library's workloads). A layer holding either is a MoE layer. The router (``gate``,
``router``) and shared experts (``shared_experts``) are dense weights of the same layer: every
token passes through them. How many experts a stacked tensor holds is the router's rows: its
``[experts, hidden]`` weight (``...gate.weight`` or ``...router.weight``) scores every expert.

How many experts a token goes to (top-k) is not a tensor: it is read from the layer's FLOPs,
which the importers count as ``2 x`` (dense weights + ``k`` routed experts) per token, so
``k = (FLOPs per token / 2 - dense elements) / one expert's elements``, which must come out a whole
number from 1 to the experts (:func:`moe_layers` refuses a workload whose FLOPs do not say it).

What one device runs (:func:`expert_view`): MaxText splits the routed experts of a MoE layer over
the ``expert`` mesh axis (the ``exp`` logical axis of the expert weights maps to ``expert``,
src/maxtext/configs/base.yml ``logical_axis_rules``), so a device of an ``E``-way group holds
``experts / E`` of them and runs every token the group routes to those. With even routing that is
``k`` experts' work per token of its own batch, as without the axis; what changes is the rows
each expert's matmuls see (``E`` times as many). Two things scale it (:func:`routed_work_factor`):

* MaxText's ``capacity_factor`` (base.yml: ``-1`` = no dropping, the default): above 0, each
  expert's token buffer is padded (or cut) to ``capacity_factor x`` its even share
  (``expert_capacity = tokens / experts x capacity_factor``, src/maxtext/layers/moe.py
  ``generate_masks``), and its matmuls run on the whole buffer;
* dropless with an expert axis, the busiest device sets the pace: ``expert_load_imbalance`` is the
  busiest expert's tokens over its even share, the other experts sharing the rest evenly
  (:func:`busiest_device_share`).
"""

from dataclasses import dataclass, replace
import math
import re

import numpy as np

from ...inputs.errors import ConfigError
from ...inputs.memo import IdentityMemo

__all__ = ["MoeLayers", "moe_layers", "expert_view", "busiest_device_share", "routed_work_factor",
           "routed_padded_elements", "is_routed_expert", "STACKED"]

_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)\.")
"""A routed expert's tensor name: a ``experts.<j>.`` segment (not ``shared_experts.``)."""

_STACKED = re.compile(r"(?:^|\.)experts\.[A-Za-z_]")
"""A tensor stacking every routed expert of its layer: a ``experts.<name>`` segment."""

_ROUTER = re.compile(r"(?:^|\.)(?:gate|router)\.weight$")
"""A MoE layer's router weight, ``[experts, hidden]``."""

STACKED = -2
""":attr:`MoeLayers.expert_of` of a tensor that stacks every routed expert of its layer."""


def is_routed_expert(name):
    """The routed expert *name* (a tensor name) belongs to, or ``None`` (a dense tensor)."""
    m = _EXPERT.search(name)
    return None if m is None else int(m[1])


@dataclass(frozen=True)
class MoeLayers:
    """The mixture-of-experts layers of a workload."""

    layers: tuple
    """Forward-order indices of the MoE layers."""
    experts: int
    """Routed experts in each MoE layer."""
    experts_per_token: int
    """Routed experts each token goes to (``num_experts_per_tok``, top-k)."""
    expert_of: tuple
    """Per tensor of the workload: the routed expert it belongs to, -1 (dense), or :data:`STACKED`
    (every routed expert of its layer, stacked along its first dimension)."""
    expert_elements: int
    """Elements of one routed expert of one layer (its weights of every rank)."""
    expert_share: tuple
    """Per MoE layer: the fraction of its forward FLOPs in its routed experts (the rest is the router
    and the shared experts)."""

    @property
    def expert_tensors(self):
        """Indices of the routed experts' tensors."""
        return tuple(i for i, j in enumerate(self.expert_of) if j >= 0 or j == STACKED)


def moe_layers(workload):
    """The :class:`MoeLayers` of *workload*, or ``None`` when it has no routed expert. One
    ConfigError naming the workload where its MoE layers differ in experts or expert size, or where
    a layer's FLOPs do not give a whole top-k."""
    return _MOE.get((workload,), (), lambda: (_moe_layers(workload),))[0]


_MOE = IdentityMemo()


def _expert_of(name):
    j = is_routed_expert(name)
    return j if j is not None else STACKED if _STACKED.search(name) else -1


def _moe_layers(workload):
    expert_of = tuple(_expert_of(t.name) for t in workload.tensors)
    if all(j == -1 for j in expert_of):
        return None
    per_layer = {}  # layer -> {expert: elements}
    dense = {}  # layer -> elements of its matrices that are no routed expert (router, shared experts)
    stacked = {}  # layer -> the tensors stacking its experts
    for t, j in zip(workload.tensors, expert_of):
        if j >= 0:
            per_layer.setdefault(t.layer, {}).setdefault(j, 0)
            per_layer[t.layer][j] += t.size
        elif j == STACKED:
            stacked.setdefault(t.layer, []).append(t)
        elif len(t.shape) >= 2:
            dense[t.layer] = dense.get(t.layer, 0) + t.size
    for layer, tensors in stacked.items():
        n = _stacked_experts(workload, layer, tensors)
        per_layer.setdefault(layer, {}).update({j: sum(t.size for t in tensors) // n for j in range(n)})
    layers = tuple(sorted(per_layer))
    counts = {len(per_layer[i]) for i in layers}
    sizes = {e for i in layers for e in per_layer[i].values()}
    if len(counts) != 1 or len(sizes) != 1:
        raise ConfigError(f"has mixture-of-experts layers of {sorted(counts)} routed experts of {sorted(sizes)} "
                          "elements; the expert model needs every MoE layer alike", key_path="workload",
                          value=workload.name)
    (experts,), (size,) = counts, sizes
    tokens = max(workload.units_per_example, 1)
    flops = np.asarray(workload.layer_fwd_flops, dtype=float) - workload.layer_attention_flops
    k_of, shares = set(), []
    for i in layers:
        d = dense.get(i, 0)
        k = (flops[i] / (2 * tokens) - d) / size
        whole = round(k)
        # a tensor-parallel share rounds its cut dimensions up: a small tolerance
        if not 1 <= whole <= experts or abs(k - whole) > 0.01 * whole:
            raise ConfigError(f"layer {workload.layer_names[i] if workload.layer_names else i} has FLOPs for "
                              f"{k:.4g} routed experts a token, not a whole number from 1 to its {experts}: the "
                              "expert model reads top-k from them (2 x (dense + k experts) per token)",
                              key_path="workload", value=workload.name)
        k_of.add(whole)
        shares.append(whole * size / (d + whole * size))
    if len(k_of) != 1:
        raise ConfigError(f"routes tokens to {sorted(k_of)} experts in different layers; the expert model needs one "
                          "top-k", key_path="workload", value=workload.name)
    return MoeLayers(layers=layers, experts=experts, experts_per_token=k_of.pop(), expert_of=expert_of,
                     expert_elements=size, expert_share=tuple(shares))


def _stacked_experts(workload, layer, tensors):
    """How many experts the *tensors* of *layer* stack: the rows of the layer's router, which each
    of them must be a whole multiple of; one ConfigError naming the workload otherwise."""
    routers = {t.shape[_out_axis(workload, t)] for t in workload.tensors
               if t.layer == layer and len(t.shape) == 2 and _ROUTER.search(t.name)}
    where = workload.layer_names[layer] if workload.layer_names else layer
    if len(routers) != 1:
        raise ConfigError(f"layer {where} stacks its routed experts (experts.<name> tensors) but has "
                          f"{'no' if not routers else 'more than one'} router weight ([experts, hidden], named "
                          "gate.weight or router.weight) to say how many", key_path="workload", value=workload.name)
    (n,) = routers
    uneven = [t for t in tensors if t.shape[_out_axis(workload, t)] % n]
    if uneven:
        raise ConfigError(f"layer {where}'s router scores {n} experts, but {uneven[0].name} "
                          f"{list(uneven[0].shape)} does not stack that many", key_path="workload", value=workload.name)
    return n


def _out_axis(workload, tensor):
    """The axis a stacked *tensor* stacks its experts along, its output features: the first of a
    ``out_in`` workload's weights (and of every bias), the last of an ``in_out`` one's."""
    return 0 if len(tensor.shape) == 1 or workload.dense_layout == "out_in" else len(tensor.shape) - 1


def _local_rows(workload, tensor, ways):
    """A stacked *tensor* with its first ``1/ways`` of experts (its output features split *ways* ways)."""
    axis = _out_axis(workload, tensor)
    shape = list(tensor.shape)
    shape[axis] //= ways
    return replace(tensor, shape=tuple(shape))


def busiest_device_share(experts, ways, load_imbalance=1.0):
    """Routed tokens of the busiest device of a *ways*-way expert group over its even share, when
    the busiest of the *experts* takes *load_imbalance* x its even share and the others share the
    rest evenly: ``(f + (l - 1) (n - f) / (n - 1)) / l`` with ``l = n / ways`` experts a device
    (tokens conserved: 1 at ``ways`` 1, where a device runs every expert on its own tokens;
    ``f`` at one expert a device)."""
    n, f = experts, float(load_imbalance)
    if not 1.0 <= f <= n:
        raise ConfigError(f"must be from 1 (even routing) to the {n} routed experts (one expert takes every "
                          "token)", key_path="expert_load_imbalance", value=load_imbalance)
    if ways == 1 or n == 1:
        return 1.0
    local = n // ways
    return (f + (local - 1) * (n - f) / (n - 1)) / local


def routed_work_factor(experts, ways, capacity_factor=-1.0, load_imbalance=1.0):
    """What a device's routed-expert matmuls (and the tokens it exchanges) are, over their even,
    dropless size: ``capacity_factor`` where it is above 0 (every expert's buffer padded to it,
    whatever the routing), else the busiest device's share (:func:`busiest_device_share`)."""
    if capacity_factor > 0:
        return float(capacity_factor)
    return busiest_device_share(experts, ways, load_imbalance)


def expert_view(workload, ways=1, capacity_factor=-1.0, load_imbalance=1.0, *, stack=None):
    """The part of *workload* one device of a *ways*-way expert group holds and runs: each MoE
    layer keeps ``experts / ways`` of its routed experts (its first ones; all are alike) and its
    dense weights, and its forward FLOPs per example are its dense part plus ``k x``
    :func:`routed_work_factor` ``x`` one expert's (the module doc); every other layer as it is.
    *stack*: the :class:`~wus_sim.model.layer_stack.LayerStack` the view keeps (``False``: none),
    the whole model's block widths, as a tensor split keeps them
    (:func:`~wus_sim.model.layer_stack.moe_device_view` passes it); ``None``: the view's own.
    *workload* itself where nothing changes (``ways`` 1 and no capacity factor, or no MoE layer).
    Memoized per workload and arguments, as a tensor split is."""
    if ways == 1 and capacity_factor <= 0:
        return workload
    moe = moe_layers(workload)
    if moe is None:
        return workload
    key = (int(ways), float(capacity_factor), float(load_imbalance))
    return _VIEWS.get((workload, stack), key, lambda: _view(workload, moe, *key, stack))


_VIEWS = IdentityMemo()


def _view(workload, moe, ways, capacity_factor, load_imbalance, stack):
    if moe.experts % ways:
        raise ConfigError(f"splits the {moe.experts} routed experts of {workload.name} {ways} ways; the expert axis "
                          "must divide them", key_path="mesh.expert", value=ways)
    local = moe.experts // ways
    factor = routed_work_factor(moe.experts, ways, capacity_factor, load_imbalance)
    # a stacked tensor keeps its first local experts' rows
    tensors = tuple(_local_rows(workload, t, ways) if j == STACKED else t
                    for t, j in zip(workload.tensors, moe.expert_of) if j < local)
    flops = list(workload.layer_fwd_flops)
    for layer, share in zip(moe.layers, moe.expert_share):
        flops[layer] = flops[layer] * (1 - share + share * factor)
    total = float(sum(flops))
    return replace(workload, tensors=tensors, params=int(sum(math.prod(t.shape) for t in tensors)),
                   layer_fwd_flops=tuple(flops), fwd_flops_per_example=total,
                   fwd_flops_per_unit=total / max(workload.units_per_example, 1), stack=stack)


def routed_padded_elements(plan):
    """``{bucket index: elements}`` of each bucket of *plan* (a
    :class:`~wus_sim.training.update.sharding_plan.Plan`) whose formatted buffer holds routed experts
    (their padded sizes); zeros without experts."""
    return _ROUTED.get((plan,), (), lambda: _routed(plan))


_ROUTED = IdentityMemo()


def _routed(plan):
    moe = moe_layers(plan.workload)
    if moe is None:
        return {b.index: 0 for b in plan.buckets}
    routed = set(moe.expert_tensors)
    return {b.index: sum(plan.tensors[i].padded_size for i in b.tensors if i in routed) for b in plan.buckets}
