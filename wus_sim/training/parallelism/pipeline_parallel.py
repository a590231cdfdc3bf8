"""Pipeline parallelism: the ``pipeline`` mesh axis of a step (MaxText's ``stage``).

What MaxText does with the axis (github.com/AI-Hypercomputer/maxtext at
e591f30cbbf217ed67ef71263ec0538239f9c3b8: src/maxtext/configs/base.yml, src/maxtext/configs/types.py,
src/maxtext/layers/pipeline.py):

* ``['layers', 'stage']`` (base.yml ``logical_axis_rules``): the decoder blocks' weights are split over
  ``stage``; every other weight (embedding, head) is not, it is sharded over fsdp as without the axis;
  ``activation_batch`` does not name ``stage`` (each stage runs the whole batch of its data-parallel
  group), ``activation_embed_and_logits_batch`` does (the embedding and the logits split the batch over
  the stages);
* ``num_stages = ici_pipeline_parallelism x dcn_pipeline_parallelism``; ``num_pipeline_repeats =
  blocks / (num_stages x num_layers_per_pipeline_stage)`` (types.py: refused unless whole), with
  ``num_layers_per_pipeline_stage`` 1 by default (base.yml), so MaxText's default pipeline is circular:
  each stage holds ``repeats`` chunks of one block and a microbatch passes round the stages ``repeats``
  times; ``num_pipeline_microbatches`` defaults to the stages and must be a multiple of them, dividing
  the batch (types.py);
* the schedule (pipeline.py, ``__call__``): one scan of ``microbatches x repeats + stages - 1``
  iterations, each running every stage on its current microbatch (vmapped over ``stage``) and ending in
  a ``jax.lax.ppermute`` of the stage outputs to the next stage (``_shift_right`` / ``_rotate_right``:
  a collective-permute, one hop of the stage ring); the ``stages - 1`` extra iterations are the bubble
  (base.yml: "(num_stages - 1) / (num_pipeline_repeats * num_pipeline_microbatches + num_stages - 1)"
  of the loop). Backward is that scan's autodiff: every microbatch's forward, then every backward,
  the same loop reversed: GPipe's order (Huang et al. 2019, "GPipe", arXiv 1811.06965) with the
  circular repeats of Narayanan et al. 2021's interleaved schedule ("Efficient Large-Scale Language Model
  Training on GPU Clusters Using Megatron-LM", arXiv 2104.04473, sec. 2.2.2).

So the step (:mod:`.mesh_step`), with ``P`` stages, ``M`` microbatches and ``R`` repeats:

* each device runs ``1/P`` of the step's layer work (its stage's ``blocks/P`` blocks on the group's
  whole batch, and ``1/P`` of the batch through the embedding and head): every layer's time, less its
  ops' fixed costs, and its tensor and expert collectives ``/ P`` (:meth:`PipelineStep.device_share`);
* the bubble (:func:`bubble_fraction`): the loop's ``P - 1`` extra iterations are ``(P-1)/(M R)`` of
  the busy ones, forward and backward: each block's time grows by that share (``pipeline_bubble_s``).
  GPipe (``R = 1``) and 1F1B (Narayanan et al. 2021 sec. 2.2.1, PipeDream-Flush: one forward, one
  backward in the steady state) have the same bubble ``(P-1)/M``; they differ in memory;
* per iteration one collective-permute of a microbatch's stage output (``batch/M x tokens x hidden /
  tensor`` at the activation dtype) over one hop of the pipeline ring, or over the DCN where the axis
  spans slices: ``2 (M R + P - 1)`` a step (forward and their transposes in backward), on the critical
  path (the next iteration reads it; MaxText's ``pipeline_delay_activation_forwarding``, off by
  default, would hide it at twice the bubble), plus one all-reduce of the embedding and head
  gradients (the device's shard of them) over the stages, whose batch they split
  (``pipeline_comm_s``);
* weights, gradients and optimizer state: the device's stage's blocks (``1/P`` of them: its plan is
  :func:`stage_view`), the embedding and head whole (then sharded as the mesh says); gradients are
  reduced per stage, over the data and fsdp axes, each stage's weights only;
* activations: a stage holds its ``1/P`` of the blocks' activations for the microbatches in flight:
  all ``M`` with GPipe and the circular schedule (forward first), ``min(P, M)`` with 1F1B:
  :func:`activation_factor` of the group's batch.

Not modelled: MaxText's ``pipeline_parallel_layers`` (DeepSeek's dense layers outside the pipeline),
``pipeline_delay_activation_forwarding``, ``pipeline_fsdp_ag_once`` and per-repeat weight prefetching;
interleaved 1F1B (1F1B with repeats); the smaller matmuls of a microbatch (the layer times are the
group's batch at once); the fixed costs of each iteration's ops (each layer's ops are counted once).
"""

from dataclasses import dataclass, replace
import math

import numpy as np

from ...inputs.errors import ConfigError
from ...inputs.memo import IdentityMemo
from ...model.layer_stack import layer_stack
from .tensor_parallel import _split_shape, tensor_collective_nbytes

__all__ = ["SCHEDULES", "PipelineShape", "pipeline_shape", "check_pipeline_mesh", "bubble_fraction",
           "loop_iterations", "in_flight_microbatches", "activation_factor", "permute_nbytes", "ici_hop_s",
           "dcn_hop_s", "stage_view", "PipelineStep", "pipeline_step", "pipeline_report", "pipeline_sizes"]

SCHEDULES = ("circular", "gpipe", "1f1b")
"""Pipeline schedules: MaxText's circular one (the default), GPipe and 1F1B (PipeDream-Flush)."""


@dataclass(frozen=True)
class PipelineShape:
    """A pipeline's sizes: ``stages`` P, ``microbatches`` M, ``repeats`` R (the circular schedule's
    passes round the stages; 1 for GPipe and 1F1B), ``layers_per_stage`` (blocks a stage runs per
    pass), ``schedule`` and the model's ``blocks``."""

    stages: int
    microbatches: int
    repeats: int
    layers_per_stage: int
    schedule: str
    blocks: int


def _blocks(workload):
    stack = layer_stack(workload)
    return None if not stack else stack.blocks


def pipeline_shape(workload, stages, options, *, key_path="mesh", value=None):
    """The :class:`PipelineShape` of *stages* pipeline stages on *workload* under *options*
    (``pipeline_microbatches``, ``pipeline_layers_per_stage``, ``pipeline_schedule``), each rule
    MaxText's (types.py) refused in one line: the stages must divide the transformer blocks, the
    circular schedule's stages x layers per stage too, the microbatches must be a multiple of the stages."""
    blocks = _blocks(workload)
    value = value if value is not None else stages
    if blocks is None:
        raise ConfigError(f"splits the model into {stages} pipeline stages, but {workload.name} is not a stack of "
                          "transformer blocks (a pipeline stage holds whole blocks)", key_path=key_path, value=value)
    n = len(blocks)
    if n % stages:
        raise ConfigError(f"splits {workload.name}'s {n} transformer blocks into {stages} pipeline stages; the "
                          "pipeline axis (x the DCN's) must divide the blocks", key_path=key_path, value=value)
    schedule = options.pipeline_schedule
    if schedule == "circular":
        per = options.pipeline_layers_per_stage
        if n % (stages * per):
            raise ConfigError(f"gives each of {stages} stages {per} blocks a pass, but {workload.name} has {n} "
                              "blocks; stages x pipeline_layers_per_stage must divide them (MaxText's "
                              "num_layers_per_pipeline_stage)", key_path="pipeline_layers_per_stage", value=per)
    else:
        per = n // stages
    micro = options.pipeline_microbatches or stages
    if micro % stages:
        raise ConfigError(f"must be a multiple of the {stages} pipeline stages (MaxText's num_pipeline_microbatches)",
                          key_path="pipeline_microbatches", value=micro)
    return PipelineShape(stages, micro, n // (stages * per), per, schedule, n)


def check_pipeline_mesh(workload, mesh, dcn, options, *, key_path="mesh"):
    """Refuse, in one line, a pipeline axis (in the slice and across slices) *workload* cannot take
    (:func:`pipeline_shape`); checked before anything runs. ``None`` without the axis."""
    stages = mesh.pipeline * (dcn.pipeline if dcn is not None else 1)
    if stages == 1:
        return None
    if mesh.pipeline == 1:
        key_path, where = "dcn_mesh", str(dcn)
    else:
        where = str(mesh) if dcn is None or dcn.pipeline == 1 else f"{mesh} across slices {dcn}"
    return pipeline_shape(workload, stages, options, key_path=key_path, value=where)


def bubble_fraction(shape):
    """The bubble over the busy time: ``(P - 1) / (M R)``. MaxText's loop runs ``M R + P - 1``
    iterations of which ``M R`` carry a microbatch (base.yml gives ``(P-1)/(R M + P-1)``, the same
    bubble as a share of the whole loop); GPipe's and 1F1B's ``(P-1)/M`` is the case ``R = 1``."""
    return (shape.stages - 1) / (shape.microbatches * shape.repeats)


def loop_iterations(shape):
    """Iterations of the pipeline loop in each direction, each ending in one collective-permute."""
    return shape.microbatches * shape.repeats + shape.stages - 1


def in_flight_microbatches(shape):
    """Microbatches whose activations a stage holds at its peak: every one when all forwards run
    first (GPipe, MaxText's circular loop), at most ``P`` with 1F1B (the first stage's warm-up)."""
    return min(shape.stages, shape.microbatches) if shape.schedule == "1f1b" else shape.microbatches


def activation_factor(shape):
    """A device's activations over the group's whole model at its whole batch: ``1/P`` of the blocks,
    for the microbatches in flight, each ``1/M`` of the batch."""
    return in_flight_microbatches(shape) / (shape.microbatches * shape.stages)


def permute_nbytes(workload, per_group_batch, shape, tensor):
    """Bytes one device sends in one collective-permute: a microbatch's stage output (``batch/M``
    examples x tokens x hidden at the activation dtype), ``1/tensor`` of it (``activation_embed`` is
    sharded over ``tensor``, base.yml)."""
    return tensor_collective_nbytes(workload, per_group_batch) / shape.microbatches / tensor


def ici_hop_s(topology, lay, nbytes):
    """One collective-permute on the pipeline rings of layout *lay*: every device sends *nbytes* to
    the next stage at once, a shift along the ring that loads each link once (uncontended); it takes
    the slowest edge's hops' latency plus the bytes at the slowest link's rate. A part of the cores of a
    chip moves at the on-chip rate."""
    parts = lay.parts.get("pipeline", ())
    if not parts or nbytes <= 0:
        return 0.0
    hops, rate = 0, math.inf
    for axis, stride, length in parts:
        if axis == -1:
            rate = min(rate, topology.onchip_Bps or topology.axis_link_Bps[0])
            continue
        hops += lay.edge_hops(axis, stride, length)[1]
        rate = min(rate, topology.axis_link_Bps[axis])
    return hops * (topology.hop_latency_s or 0.0) + nbytes / rate


def dcn_hop_s(ms, chip_nbytes):
    """One collective-permute across slices: each chip sends its devices' *chip_nbytes* to its peer
    in the next slice, ``alpha + c / B`` on its DCN share."""
    return 0.0 if chip_nbytes <= 0 else ms.dcn_latency_s + chip_nbytes / ms.dcn_Bps


def _pipelined_layers(workload):
    return sorted({i for block in _blocks(workload) for i in block})


def stage_view(workload, stages):
    """What one device of a *stages*-way pipeline holds: the blocks' weights ``1/stages`` (its stage's
    blocks: the blocks are alike, so a stage's ``blocks/P`` of them hold ``1/P`` of every one's
    elements), FLOPs ``/ stages``; the embedding and head whole. For the plan, gradient reductions and
    memory; the layer times come from the whole model (:meth:`PipelineStep.device_share`). One object
    per workload and stage count (memoized, as :func:`~.tensor_parallel.split_workload`)."""
    if stages == 1:
        return workload
    return _VIEWS.get((workload,), stages, lambda: _view(workload, stages))


_VIEWS = IdentityMemo()


def _view(workload, stages):
    piped = set(_pipelined_layers(workload))
    tensors = tuple(replace(t, shape=_cut(t.shape, stages)) if t.layer in piped else t for t in workload.tensors)
    return replace(workload, tensors=tensors, params=int(sum(math.prod(t.shape) for t in tensors)),
                   fwd_flops_per_example=workload.fwd_flops_per_example / stages,
                   fwd_flops_per_unit=workload.fwd_flops_per_unit / stages,
                   layer_fwd_flops=tuple(f / stages for f in workload.layer_fwd_flops),
                   stack=layer_stack(workload) or False)


def _cut(shape, ways):
    """*shape* with its largest dimension ``/ ways`` (vectors too: a stage holds 1/P of the blocks' norms)."""
    if len(shape) < 2:
        return (math.ceil(shape[0] / ways),) if shape else tuple(shape)
    return _split_shape(shape, ways)


@dataclass(frozen=True)
class PipelineStep:
    """The pipeline's part of one mesh step: its shape and what it adds per layer."""

    shape: PipelineShape
    piped: tuple
    """Layer indices of the transformer blocks (the pipelined layers)."""
    hop_s: float
    """One collective-permute's seconds."""
    nbytes: float
    """Bytes a device sends in one collective-permute."""
    outside_s: float
    """The embedding and head gradients' all-reduce over the stages."""
    dcn_phases: tuple = ()
    """Cross-slice phases of one permute ``(op, nbytes per device, seconds)``."""
    outside_phases: tuple = ()
    """Cross-slice phases of the embedding and head gradients' all-reduce."""

    def device_share(self, layers, compute, *collectives):
        """*layers* (:func:`~wus_sim.training.step.step_layer_times`) and the *collectives* a layer waits
        on (the tensor, expert and context times, each ``(forward, backward, count, nbytes, busy, ...)``)
        of the whole model as one device of the pipeline runs them: each layer's time less its ops'
        fixed costs ``/ P`` (the fixed costs stay: every layer's ops run), its collectives ``/ P``."""
        p = self.shape.stages
        c = compute.op_overhead_s
        r = compute.backward_flops_ratio
        changes = {"forward_s": (np.asarray(layers.forward_s, dtype=float) - c) / p + c,
                   "backward_s": (np.asarray(layers.backward_s, dtype=float) - r * c) / p + r * c}
        for name in ("host_fwd_s", "host_bwd_s"):
            if hasattr(layers, name):
                changes[name] = np.asarray(getattr(layers, name), dtype=float) / p
        layers = replace(layers, **changes)

        def share(times):
            lists = tuple([x / p for x in times[i]] for i in (0, 1))
            rest = (math.ceil(times[2] / p), times[3] / p, times[4] / p) + tuple(times[5:])
            return lists + rest

        return (layers, *(share(c) for c in collectives))

    def add(self, fwd_s, bwd_s):
        """*fwd_s* and *bwd_s* (a device's layer times) with the bubble and the permutes on the blocks'
        layers and the outside gradients' all-reduce on the first layer's backward (the last to
        finish), and ``(bubble fwd, bubble bwd, comm fwd, comm bwd)`` seconds."""
        frac = bubble_fraction(self.shape)
        per = loop_iterations(self.shape) * self.hop_s / len(self.piped)
        fwd, bwd = list(fwd_s), list(bwd_s)
        parts = [0.0, 0.0, 0.0, 0.0]
        for i in self.piped:
            bubble_f, bubble_b = fwd[i] * frac, bwd[i] * frac
            fwd[i] += bubble_f + per
            bwd[i] += bubble_b + per
            parts[0] += bubble_f
            parts[1] += bubble_b
        parts[2] = parts[3] = per * len(self.piped)
        bwd[0] += self.outside_s
        parts[3] += self.outside_s
        return fwd, bwd, tuple(parts)

    def comm_entry(self):
        """The pipeline axis's comm counts of one step and device (the permutes)."""
        n = 2 * loop_iterations(self.shape)
        n_outside = 1 if self.outside_s > 0 else 0
        entry = {"collectives": n + n_outside, "nbytes": float(n * self.nbytes), "busy_s": float(n * self.hop_s + self.outside_s),
                 "dcn_collectives": 0, "dcn_nbytes": 0.0, "dcn_busy_s": 0.0}
        for _, nbytes, t in self.dcn_phases:
            entry["dcn_collectives"] += n
            entry["dcn_nbytes"] += float(n * nbytes)
            entry["dcn_busy_s"] += float(n * t)
        for _, nbytes, t in self.outside_phases:
            entry["dcn_collectives"] += 1
            entry["dcn_nbytes"] += float(nbytes)
            entry["dcn_busy_s"] += float(t)
        return entry


def pipeline_step(workload, shape, options, mesh, dcn, lay, topology, ms, batch, coll_s):
    """The :class:`PipelineStep` of *shape* for a data-parallel group's *batch* (refused in one line
    unless the microbatches divide it, MaxText's rule); *coll_s* is the mesh step's."""
    if batch % shape.microbatches:
        raise ConfigError(f"must divide the batch of {batch} examples a data-parallel group runs (MaxText: "
                          "micro_batch_size_to_train_on % num_pipeline_microbatches == 0)",
                          key_path="pipeline_microbatches", value=shape.microbatches)
    nbytes = permute_nbytes(workload, batch, shape, mesh.tensor)
    hop = ici_hop_s(topology, lay, nbytes) if mesh.pipeline > 1 else 0.0
    phases = ()
    if dcn.pipeline > 1:
        t = dcn_hop_s(ms, nbytes * topology.num_replicas / topology.num_chips)
        hop, phases = max(hop, t), (("collective-permute", nbytes, t),)
    piped = set(_pipelined_layers(workload))
    outside = sum(t.size for t in workload.tensors if t.layer not in piped) * workload.grad_bytes
    shards = mesh.fsdp * dcn.fsdp * mesh.expert * dcn.expert
    outside_phases = []
    outside_s = coll_s("all-reduce", outside / (shards * mesh.tensor), ("pipeline",), outside_phases)
    return PipelineStep(shape, tuple(sorted(piped)), hop, nbytes, outside_s, phases, tuple(outside_phases))


def pipeline_report(shape):
    """*shape* as JSON-ready data (step --json's ``mesh.pipeline``)."""
    return {"stages": shape.stages, "microbatches": shape.microbatches, "repeats": shape.repeats,
            "layers_per_stage": shape.layers_per_stage, "schedule": shape.schedule,
            "bubble_fraction": bubble_fraction(shape), "in_flight_microbatches": in_flight_microbatches(shape)}


def pipeline_sizes(workload, slices, dcn_fixed=None, ici_fixed=None, options=None):
    """Pipeline sizes a mesh search tries, ``(in the slice, across slices)``. In the slice only a
    size the caller fixes (*ici_fixed*; else 1: a pipeline within a slice pays a bubble that fsdp and
    tensor avoid on the ICI). Across slices, a size the caller fixes (*dcn_fixed*), else, with several
    slices and a stack of blocks, every divisor of the slices whose stages (x the fixed in-slice
    size) divide the blocks (and the circular schedule's blocks per stage): 1 among them, so the DCN
    meshes are at most the slices' divisor pairs (2 slices: 3 instead of 2; 4: 6 instead of 3)."""
    ici = (ici_fixed,) if ici_fixed is not None else (1,)
    if dcn_fixed is not None:
        return ici, (dcn_fixed,)
    blocks = _blocks(workload)
    if blocks is None or slices <= 1:
        return ici, (1,)
    per = options.pipeline_layers_per_stage if options is not None and options.pipeline_schedule == "circular" else 1
    return ici, tuple(p for p in range(1, slices + 1)
                      if slices % p == 0 and len(blocks) % (p * ici[0] * per) == 0)
