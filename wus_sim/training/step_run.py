"""What :func:`wus_sim.training.step.simulate_strategies` returns: each strategy's
:class:`~wus_sim.training.step.StepResult`, how the point was resolved, and the speedups
between them (ratios of step times, :mod:`wus_sim.training.speedups`)."""

from dataclasses import dataclass, fields
import math

from ..inputs.units import format_time
from ..model.model_flops import model_flops
from .speedups import speedups, speedups_if_replicated_fit

__all__ = ["StepRun"]


@dataclass(frozen=True)
class StepRun:
    """What :func:`simulate_strategies` returns: each strategy's result and how the point was
    resolved (replicas, batch, the sharding plan they share)."""

    results: dict
    """``{strategy: StepResult}``, in the order asked."""
    plan: object
    """The sharding plan (:class:`wus_sim.training.update.planner.Plan`) every strategy ran with."""
    replicas: int
    """Data-parallel replicas over every slice."""
    spatial_ways: int
    per_replica_batch: float
    global_batch: float
    params: int
    optimizer: str
    slices: int = 1
    replicas_per_slice: int = None
    multislice: object = None
    mesh: object = None
    """A device-mesh run's :class:`~wus_sim.training.parallelism.mesh_step.MeshSummary` (``None`` without a mesh)."""

    @property
    def speedups(self):
        """``{strategy: replicated step time / its step time}`` for every strategy run but
        replicated; NaN where either did not run or fit (see :attr:`speedups_if_replicated_fit`)."""
        return {s: float(v) for s, v in speedups(self.results).items()}

    @property
    def speedups_if_replicated_fit(self):
        """Where replicated does not fit in HBM: each strategy's speedup over replicated with HBM
        capacity ignored (hypothetical; NaN elsewhere)."""
        return {s: float(v) for s, v in speedups_if_replicated_fit(self.results).items()}

    @property
    def devices(self):
        """Devices of the run as JAX counts them (a TensorCore, or a chip under megacore): every
        device of the mesh across slices, else replicas x spatial ways."""
        if self.mesh is not None:
            dcn = self.mesh.dcn_mesh.size if self.mesh.dcn_mesh is not None else 1
            return self.mesh.mesh.size * dcn
        return self.replicas * self.spatial_ways

    def throughput(self, strategy, topology):
        """*strategy*'s step in MaxText's units (:class:`~wus_sim.model.model_flops.ModelFlops`: MFU,
        TFLOP/s and tokens/s per device; tokens are the workload's flops units, images for a CNN),
        with *topology*'s device peak; ``None`` where the step has no time (infeasible, or an error)."""
        r = self.results[strategy]
        t = r.step_time_s
        if not (isinstance(t, float) and math.isfinite(t) and t > 0):
            return None
        whole = getattr(self.mesh, "workload", None) or self.plan.workload  # a tensor mesh's plan: 1/T of it
        return model_flops(whole, self.global_batch, self.devices, t, topology.peak_flops_per_replica)

    def __repr__(self):
        parts = []
        for s, r in self.results.items():
            up = self.speedups.get(s, math.nan)
            parts.append(f"{s} {format_time(r.step_time_s).strip()}" + (f" ({up:.3f}x)" if up == up else "")
                         if r.status == "ok" else f"{s} {r.status}")
        return (f"<StepRun {self.plan.workload.name} with {self.optimizer}, {self.replicas} replicas x batch "
                f"{self.per_replica_batch:g}: {', '.join(parts)}>")

    def meta(self):
        """The resolved values as a dict (everything but :attr:`results`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "results"}
        if self.mesh is None:  # the 0.1 keys exactly, without a mesh
            del out["mesh"]
        return out

    # ``results, meta = simulate_strategies(...)`` (and ``[0]``, ``[1]``): the 0.1 return
    # shape, a ``(results, meta dict)`` pair, kept for one release
    def __iter__(self):
        yield self.results
        yield self.meta()

    def __getitem__(self, index):
        return (self.results, self.meta())[index]

    def __len__(self):
        return 2
