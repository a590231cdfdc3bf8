"""Expert parallelism: the ``expert`` mesh axis of a step, as MaxText shards a mixture-of-experts model.

What MaxText does with the axis (github.com/AI-Hypercomputer/maxtext, src/maxtext/configs/base.yml
``logical_axis_rules`` at e591f30cbbf217ed67ef71263ec0538239f9c3b8; MaxText/configs/base.yml at
14b5876ea857c09cc3d8645385f984689376a331, the tiering recipes' commit, maps these names alike):

* ``['exp', 'expert']``: the routed experts' weights (``wi``/``wo`` kernels ``("exp", "embed_moe" or
  "embed_no_exp", "mlp_moe" or "mlp")``, src/maxtext/layers/moe.py) are split over ``expert`` by
  expert, their hidden dimension over ``fsdp`` only: a device of an ``E``-way group holds ``1/E`` of
  the experts, each sharded over fsdp (and data, fully sharded), and gathers only those;
* ``['embed', ['fsdp', ..., 'expert']]``: every other weight (attention, the router ``gate``, shared
  experts, the embedding and the head) is sharded over fsdp *and* expert: for them ``expert`` is one
  more fsdp axis;
* ``['activation_batch', ['data', 'fsdp', 'fsdp_transpose', 'expert']]`` (and ``activation_batch_moe``,
  ``activation_batch_attn``): the batch is split over ``expert`` as over data and fsdp, so the
  data-parallel groups are ``data x fsdp x expert``;
* a MoE layer's tokens go to the devices holding their experts and back: the dispatch resharding
  (batch over ``expert`` -> experts over ``expert``) and the combine are all-to-alls over the expert
  axis (``ragged_all_to_all`` in ``sparse_matmul``; in the ``dense_matmul`` path with a capacity
  factor, XLA's all-to-all between ``dispatch_axis`` and the input sharding), and backward runs
  their transposes, two more.

So the step (:mod:`.mesh_step`): the plan shards every tensor over ``fsdp x expert`` (``x data``
fully sharded), which is each routed expert's ``1/(E F)`` as MaxText holds it; each bucket's
gathers and reduce-scatters move its dense part over those axes and its routed part, ``1/E`` of
it, over the axes without ``expert`` (:func:`bucket_parts`); the layers compute
:func:`~wus_sim.model.layer_stack.moe_device_view`; memory counts ``1/E`` of the routed experts gathered
(:func:`~wus_sim.model.memory.memory_breakdown`, ``expert_ways``); and per MoE layer
:func:`a2a_counts` all-to-alls of :func:`a2a_nbytes`, each timed by the all-to-all collective
(its default algorithm on the group) over the expert groups, or over the DCN where the axis spans
slices.

Where the all-to-alls sit: on the layer's critical path, counted apart (``expert_comm_s``). The
expert matmuls need the dispatched tokens and the next layer the combined ones; MaxText overlaps
them only on request (``num_moe_token_chunks`` > 1 with ``use_ring_of_experts``, and a batch split
for DeepSeek's sparse layers; base.yml: "1 = disabled", the default), which is not modelled.
"""

import math

from ...inputs.errors import ConfigError
from ...model.ops.experts import moe_layers, routed_work_factor
from ...hardware.mesh import DCN_AXES
from .tensor_parallel import forward_reruns, tensor_collective_nbytes

__all__ = ["check_expert_mesh", "a2a_nbytes", "a2a_counts", "bucket_parts", "axes_size", "expert_times"]


def check_expert_mesh(workload, mesh, dcn=None, *, key_path="mesh"):
    """Refuse, in one line, an expert axis (in the slice and across slices, *dcn*) on a *workload*
    without MoE layers, or one that does not divide its routed experts (a larger one cannot: each
    device holds whole experts). Checked before anything runs."""
    ways = mesh.expert * (dcn.expert if dcn is not None else 1)
    if ways == 1:
        return
    if mesh.expert == 1:  # across slices only: the DCN mesh says it
        key_path, where = "dcn_mesh", str(dcn)
    else:
        where = str(mesh) if dcn is None or dcn.expert == 1 else f"{mesh} across slices {dcn}"
    moe = moe_layers(workload)
    if moe is None:
        raise ConfigError(f"splits experts {ways} ways, but {workload.name} has no mixture-of-experts layer "
                          "(no routed expert tensors: experts.<j>. each, or stacked as experts.<name>)",
                          key_path=key_path, value=where)
    if moe.experts % ways:
        raise ConfigError(f"splits experts {ways} ways, but {workload.name} has {moe.experts} routed experts a "
                          f"layer; the expert axis (x the DCN's) must divide them", key_path=key_path, value=where)


def a2a_nbytes(workload, moe, per_group_batch, tensor, ways, capacity_factor=-1.0, load_imbalance=1.0):
    """Bytes of one dispatch or combine all-to-all (each device's whole buffer, the collectives'
    size convention): its tokens (*per_group_batch* examples x tokens), each to ``k`` experts,
    ``hidden / tensor`` wide (MaxText shards the tokens' embedding over ``tensor``,
    ``activation_embed_moe``), at the activation dtype, x the capacity factor (padded buffers) or,
    dropless, the busiest device's share (:func:`~wus_sim.model.ops.experts.routed_work_factor`: every
    block taken at the busiest device's size, an upper bound of the ragged exchange it paces)."""
    factor = routed_work_factor(moe.experts, ways, capacity_factor, load_imbalance)
    return tensor_collective_nbytes(workload, per_group_batch) / tensor * moe.experts_per_token * factor


def a2a_counts(moe, num_layers, reruns):
    """Per layer ``(forward, backward)`` all-to-alls: a MoE layer's dispatch and combine in forward,
    their transposes in backward, and, where backward reruns the layer's forward (*reruns*: remat),
    the dispatch again (its tokens feed the recomputed expert matmuls; the combine's output feeds no
    gradient and XLA drops it, as it drops a pre-norm block's unread MLP output)."""
    moe_set = set(moe.layers)
    return [(2, 2 + (1 if r else 0)) if i in moe_set else (0, 0) for i, r in zip(range(num_layers), reruns)]


def bucket_parts(nbytes, routed_fraction, ways):
    """``(dense bytes, routed bytes per device)`` of a bucket's collective of *nbytes* whose
    buffer is *routed_fraction* routed experts: the dense part goes over the sharding axes with
    ``expert``, the routed part, ``1/ways`` of it (a device's own experts), over them without."""
    routed = nbytes * routed_fraction
    return nbytes - routed, routed / ways


def axes_size(mesh, dcn, axes):
    """Devices a collective over the mesh axes *axes* spans, in the slice and across slices."""
    return math.prod(getattr(mesh, a) * (getattr(dcn, a) if a in DCN_AXES else 1) for a in axes)


def expert_times(workload, split, options, mesh, ways, batch, coll_s):
    """Per layer ``(forward_s, backward_s)`` the MoE layers wait on their all-to-alls, their count
    and bytes per step, their busy seconds, and the cross-slice phases of one
    (``(op, nbytes, seconds)``, an expert axis across slices), for a *ways*-way expert axis (in the
    slice and across): *split* is a device's share of *workload* under the *mesh*'s tensor axis,
    *batch* a data-parallel group's, *coll_s* the step's ``coll_s(op, nbytes, axes, dcn)``."""
    n = len(workload.layer_fwd_flops)
    if ways == 1:
        return [0.0] * n, [0.0] * n, 0, 0.0, 0.0, ()
    moe = moe_layers(workload)
    nbytes = a2a_nbytes(workload, moe, batch, mesh.tensor, ways, options.capacity_factor,
                        options.expert_load_imbalance)
    phases = []
    one = coll_s("all-to-all", nbytes, ("expert",), phases)
    counts = a2a_counts(moe, n, forward_reruns(split, options))
    fwd = [f * one for f, _ in counts]
    bwd = [b * one for _, b in counts]
    count = sum(f + b for f, b in counts)
    return fwd, bwd, count, count * nbytes, float(count * one), tuple(phases)
