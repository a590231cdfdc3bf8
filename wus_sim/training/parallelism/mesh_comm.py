"""What a mesh step did, per axis: :class:`MeshSummary` (layout and collective totals) and the
accounting that fills it, including the cross-slice (DCN) phases and the split of today's path's
exposed wait between the fsdp and data axes."""

from dataclasses import dataclass, replace
import math

from ...hardware.mesh import DCN_AXES, Mesh, shown_axes
from ...hardware.multislice import dcn_time_s, hierarchical_phases

__all__ = ["MESH_PARTS", "MeshSummary"]

MESH_PARTS = ("tensor_comm_s", "expert_comm_s", "context_comm_s", "pipeline_bubble_s", "pipeline_comm_s",
              "fsdp_comm_s", "data_comm_s")
"""Breakdown parts a mesh step adds: ``tensor_comm_s``, ``expert_comm_s`` (the MoE layers'
dispatch and combine all-to-alls), ``context_comm_s`` (the attention layers' K/V all-gathers and
their gradients' reduce-scatters over the context axis), ``pipeline_bubble_s`` and
``pipeline_comm_s`` (the pipeline's idle iterations and its stage-to-stage collective-permutes) are
taken out of ``fwd_s``/``bwd_s`` (the layers wait on them), so the parts still add up;
``fsdp_comm_s`` + ``data_comm_s`` split
``exposed_comm_s`` (the wait on fsdp gathers and reduce-scatters, and on the data axis's
collectives: what the step would save with free fsdp collectives, and the rest)."""


@dataclass(frozen=True)
class MeshSummary:
    """What the mesh did: its layout and per-axis collective totals of one step."""

    mesh: Mesh
    dcn_mesh: Mesh
    layout: object
    """:class:`wus_sim.hardware.mesh.MeshLayout`."""
    comm: dict
    """``{axis: {"collectives": count, "nbytes": bytes, "busy_s": seconds, "dcn_collectives": count,
    "dcn_nbytes": bytes, "dcn_busy_s": seconds}}`` per step and device. The first three count each
    collective once on the axis it serves (its busy seconds include its DCN phases); the ``dcn_``
    three count the cross-slice phases (:func:`~wus_sim.hardware.multislice.hierarchical_phases`)
    on the axis whose slices they cross (data where data spans slices: the fsdp shard's gradient
    reduction after the in-slice reduce-scatter is data's), with the bytes of the shard each
    device sends into the DCN collective (its buffer in the collectives' size convention) and
    the DCN seconds."""
    path: str
    """``'today'`` (a mesh today's step expresses, run through it) or ``'mesh'``."""
    workload: object = None
    """The whole model, where the run's plan holds a tensor group's 1/T share of it (``'mesh'``
    path); what model FLOPs and MFU count."""
    pipeline: dict = None
    """With a pipeline axis: its stages, microbatches, repeats, layers_per_stage, schedule,
    bubble_fraction (of the busy time) and in_flight_microbatches."""

    def to_dict(self, topology=None):
        out = {"mesh": self.mesh.to_dict(), "dcn_mesh": None if self.dcn_mesh is None else
               {a: getattr(self.dcn_mesh, a) for a in DCN_AXES},
               "layout": self.layout.describe(), "comm": self.comm, "path": self.path}
        if self.pipeline is not None:
            out["pipeline"] = dict(self.pipeline)
        if topology is not None:
            c = topology.cores_per_chip
            out["groups"] = {a: self.layout.members(a) for a in shown_axes(self.mesh)[::-1]}
            out["device"] = "TensorCore" if c > 1 else "chip"
        return out


COMM_AXES = ("tensor", "expert", "context", "pipeline", "fsdp", "data")
"""The axes of a step's per-axis comm summary, in the order reports list them."""


def no_comm():
    return {a: {"collectives": 0, "nbytes": 0.0, "busy_s": 0.0, "dcn_collectives": 0, "dcn_nbytes": 0.0,
                "dcn_busy_s": 0.0} for a in COMM_AXES}


def count_dcn(entry, phases):
    """Add cross-slice phases ``(op, nbytes per device, seconds)`` to a comm *entry*."""
    for _, nbytes, t in phases:
        entry["dcn_collectives"] += 1
        entry["dcn_nbytes"] += float(nbytes)
        entry["dcn_busy_s"] += float(t)


def today_parts(result):
    """*result* of today's step with the mesh parts: no tensor axis; its exposed collectives are
    the fsdp axis's (fully-sharded) or the data axis's."""
    b = dict(result.breakdown)
    exposed = b.get("exposed_comm_s", math.nan)
    fsdp = result.strategy == "fully-sharded"
    b["tensor_comm_s"] = 0.0 if result.status == "ok" else math.nan
    b["expert_comm_s"] = b["context_comm_s"] = b["pipeline_bubble_s"] = b["pipeline_comm_s"] = b["tensor_comm_s"]
    b["fsdp_comm_s"] = exposed if fsdp else (0.0 if result.status == "ok" else math.nan)
    b["data_comm_s"] = (0.0 if result.status == "ok" else math.nan) if fsdp else exposed
    return replace(result, breakdown=b)


def dcn_part(result, alone):
    """*result* (fully-sharded, data across slices) with ``data_comm_s`` the exposed wait the
    DCN phases add (its wait minus *alone*'s, the same step on one slice) and ``fsdp_comm_s``
    the rest."""
    if result.status != "ok" or alone.status != "ok":
        return result
    b = dict(result.breakdown)
    exposed = b["exposed_comm_s"]
    b["data_comm_s"] = min(max(0.0, exposed - alone.breakdown["exposed_comm_s"]), exposed)
    b["fsdp_comm_s"] = exposed - b["data_comm_s"]
    return replace(result, breakdown=b)


def today_comm(work, ms=None, dcn=None, options=None, devices=1):
    """Per-axis collective counts and bytes of a step today's path ran (``busy_s`` None: that
    path times its collectives inside the timeline). On a multislice *ms* each collective's
    cross-slice phases (:func:`~wus_sim.hardware.multislice.hierarchical_phases`) are counted on
    the DCN axis (data if the *dcn* mesh has data, else fsdp): a device's shard (buffer / the
    slice's *devices*) and the DCN seconds the step gives it."""
    fsdp = work.strategy == "fully-sharded"
    comm = {a: {"collectives": 0, "nbytes": 0.0, "busy_s": None, "dcn_collectives": 0, "dcn_nbytes": 0.0,
                "dcn_busy_s": 0.0} for a in COMM_AXES}
    axis = comm["fsdp" if fsdp else "data"]
    across = comm["data" if dcn is not None and dcn.data > 1 else "fsdp"]
    for c in tuple(work.grad_collectives) + tuple(work.all_gathers):
        axis["collectives"] += 1
        axis["nbytes"] += float(c.nbytes)
        if ms is None:
            continue
        phases = hierarchical_phases(c.op, c.nbytes, shard_across_slices=options.shard_across_slices)
        count_dcn(across, [(op, n / devices, dcn_time_s(ms, op, n)) for net, op, n in phases if net == "dcn"])
    return comm


def today_run(mesh, dcn, strategies, options):
    """The strategies and options today's step (:func:`~wus_sim.training.step.simulate_strategies`) runs
    *mesh* (and *dcn*, across slices) with, or ``None`` where the mesh step builds it."""
    if mesh.tensor > 1 or (mesh.data > 1 and mesh.fsdp > 1) or (dcn is not None and dcn.data > 1 and dcn.fsdp > 1):
        return None
    if mesh.expert > 1 or mesh.context > 1 or (dcn is not None and dcn.expert > 1) or mesh.pipeline > 1 \
            or (dcn and dcn.pipeline > 1):
        return None
    fsdp = mesh.fsdp > 1 or (dcn is not None and dcn.fsdp > 1)
    if fsdp and mesh.data > 1:
        return None  # data in the slice, fsdp across slices: the hybrid is built here
    if not fsdp:
        return strategies, options
    across = dcn is None or dcn.fsdp > 1
    return ("fully-sharded",), replace(options, shard_across_slices=across)
