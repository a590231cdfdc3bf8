"""The collectives of a mesh step: the seconds of an op over some of the mesh's axes, within the
slice (the collective engines, on the group the axes form) and across slices (the DCN's phases
of :mod:`wus_sim.hardware.multislice`), memoized per step."""

from dataclasses import replace
import math

from ...collectives.schedules.groups import mesh_group
from ...hardware.mesh import DCN_AXES
from ...hardware.multislice import dcn_phase_time_s, dcn_time_s, hierarchical_phases
from ..step import bidirectional_for

__all__ = ["MeshCollectives"]


class MeshCollectives:
    """What a mesh step (:class:`~.mesh_step._MeshStep`) knows of its collectives. Needs the
    attributes ``topology`` (the device slice), ``lay`` (the mesh laid on it), ``options``
    (:class:`~wus_sim.training.step.StepOptions`), ``dcn`` and ``ms`` (the mesh across slices and
    the multislice) and ``_coll`` (a dict: the memo)."""

    def coll_s(self, op, nbytes, axes, dcn=None):
        """Seconds of *op* over the mesh axes *axes* (full buffer *nbytes* per device), over the
        DCN too where those axes span slices; each cross-slice phase is appended to the list
        *dcn* (if given) as ``(op, nbytes per device, seconds)``."""
        if nbytes <= 0:
            return 0.0
        key = (op, nbytes, axes)
        hit = self._coll.get(key)
        if hit is None:
            phases = []
            hit = self._coll[key] = (self._coll_s(op, nbytes, axes, phases), tuple(phases))
        if dcn is not None:
            dcn.extend(hit[1])
        return hit[0]

    def _coll_s(self, op, nbytes, axes, dcn):
        """:meth:`coll_s` computed."""
        from ...collectives import collective_time

        group = mesh_group(self.lay, *axes)
        bidir = bidirectional_for(self.options)

        def ici(phase_op, n):
            if group.size <= 1 or n <= 0:
                return 0.0
            if phase_op == "all-to-all":  # the collective's own default algorithm on the group
                from ...collectives import default_alltoall_algorithm

                return collective_time(self.topology, phase_op, default_alltoall_algorithm(self.topology, group), n,
                                       group=group, routing=self.options.routing)
            return collective_time(self.topology, phase_op, self.options.algorithm, n, group=group,
                                   bidirectional=bidir, routing=self.options.routing)

        across = math.prod(getattr(self.dcn, a) for a in axes if a in DCN_AXES)
        if across <= 1:
            return ici(op, nbytes)
        ms = replace(self.ms, slices=across)
        if op == "all-to-all":
            # each device's blocks for the other slices go first, to its peers there at once (a direct
            # exchange, as every DCN phase here: each chip carries its devices' buffers), then the
            # in-slice all-to-all of the whole buffer
            t = dcn_phase_time_s(ms, nbytes * self.topology.num_replicas / self.topology.num_chips)
            if dcn is not None:
                dcn.append((op, nbytes, t))
            return t + ici(op, nbytes)
        scale = self.topology.num_replicas / max(group.size, 1)  # each chip carries its groups' shards
        total = 0.0
        for network, phase_op, n in hierarchical_phases(op, nbytes, shard_across_slices=True):
            if network == "ici":
                total += ici(phase_op, n)
                continue
            t = dcn_time_s(ms, phase_op, n * scale)
            total += t
            if dcn is not None:  # the device's shard after the in-slice phase crosses the DCN
                dcn.append((phase_op, n / max(group.size, 1), t))
        return total

    def dcn_axis(self, axes):
        """The axis whose slices a collective over *axes* crosses: data where data spans slices
        (the fsdp shard's reduction across data replicas), else fsdp, else expert where only it does."""
        if "data" in axes and self.dcn.data > 1:
            return "data"
        return "expert" if "expert" in axes and self.dcn.expert > 1 and self.dcn.fsdp == 1 else "fsdp"
