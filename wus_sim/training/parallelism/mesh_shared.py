"""What the candidates of a mesh search share, kept apart from the step that uses it
(:mod:`wus_sim.training.parallelism.mesh_step`): the flat device grid a shard count is planned on,
a mesh's timeline buckets and a step program's timeline, each memoized (results identical to
computing them afresh; :mod:`wus_sim.inputs.memo`), and the text of a step that does not fit."""

from dataclasses import replace

from ...hardware.topology import Topology
from ...inputs.memo import IdentityMemo
from ..timeline.timeline import run_timeline

__all__ = []


def _device_topology(topology, devices):
    """A flat grid of *devices* single-device chips with *topology*'s per-device HBM, peak and
    bandwidth: what the planner and the memory model cut shards over (nothing is simulated on it).
    One object per slice and count (memoized): the plan and its step work are memoized by the
    grid's identity, so a search's meshes with the same shard count share them."""
    return _DEVICE_GRIDS.get((topology,), devices, lambda: _new_device_topology(topology, devices))


_DEVICE_GRIDS = IdentityMemo()


def _new_device_topology(topology, devices):
    c = topology.cores_per_chip
    chip = replace(topology.chip, cores_per_chip=1, peak_flops=topology.chip.peak_flops / c,
                   hbm_bytes=topology.chip.hbm_bytes / c, hbm_Bps=topology.chip.hbm_Bps / c)
    return Topology(name=topology.name, chip=chip, dims=(devices,), wrap=(False,),
                    axis_link_Bps=(min(topology.axis_link_Bps),), hop_latency_s=topology.hop_latency_s,
                    onchip_Bps=topology.onchip_Bps, cores_per_chip=1, description=f"{devices} devices of {topology.name}")


_BUCKETS = IdentityMemo()

_TIMELINES = IdentityMemo(maxsize=64)
"""A step program (by value) -> its timeline: a search's meshes that differ only in how the data
and fsdp axes split one sharding group (``fully-sharded`` over data x fsdp) give equal programs."""


def _timeline(program, steps):
    """:func:`run_timeline` of *program*, memoized by its value (hashing a program costs a small
    part of evaluating it)."""
    return _TIMELINES.get((), (program, steps), lambda: run_timeline(program, steps=steps))
"""(step work, slice, multislice) and the mesh, strategy and collective options -> what
:meth:`_MeshStep._buckets` makes of them."""


def _oom_text(memory, mesh, batch):
    from ...inputs.units import format_bytes

    parts = ", ".join(f"{p} {format_bytes(getattr(memory, p))}" for p in
                      ("weights", "gradients", "slots", "activations", "collective_buffers"))
    return (f"needs {format_bytes(memory.peak)} of HBM per device, has {format_bytes(memory.capacity)} "
            f"(mesh {mesh}, batch {batch} per data-parallel group: {parts})")
