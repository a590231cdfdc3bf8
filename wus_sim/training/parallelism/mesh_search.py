"""The fastest mesh that fits: every factorisation of a slice's devices into data x fsdp x tensor
(and of the slices into data x fsdp over the DCN), every update strategy of the data axis and
every rematerialisation policy, simulated and ranked by step time.

A candidate that cannot run is a row with its reason (does not fit in HBM, the batch does not
divide over its data-parallel groups, a tensor axis larger than the attention's query heads:
:func:`~wus_sim.training.parallelism.tensor_parallel.check_tensor_heads`, not simulated), counted by reason; nothing is dropped silently. Meshes
without a data axis run ``fully-sharded`` only (the strategy is what the data axis does; without
one every strategy is the same step), so each distinct step appears once.
"""

from dataclasses import dataclass
import math

from ...hardware.mesh import Mesh, factorisations
from ...hardware.multislice import load_multislice
from ...inputs.errors import ConfigError
from ...model.workload import REMAT_MODES
from ...model.workload_files import load_workload
from .mesh_step import simulate_mesh
from .tensor_parallel import check_tensor_heads
from ..step import StepOptions
from ..update.strategies import STRATEGIES

__all__ = ["Candidate", "search_meshes", "dcn_factorisations"]


@dataclass(frozen=True)
class Candidate:
    """One mesh x strategy x remat point of a search."""

    mesh: str
    dcn_mesh: str
    strategy: str
    remat: str
    status: str
    """``'ok'`` or ``'infeasible'``."""
    reason: str
    """Why it is infeasible: ``'memory'``, ``'batch'`` or ``'heads'`` (empty when ok)."""
    error: str
    step_time_s: float
    mem_peak_bytes: float
    mem_capacity_bytes: float
    per_replica_batch: float
    breakdown: dict

    def to_dict(self):
        def num(x):
            return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)

        return {"mesh": self.mesh, "dcn_mesh": self.dcn_mesh or None, "strategy": self.strategy, "remat": self.remat,
                "status": self.status, "reason": self.reason or None, "error": self.error or None,
                "step_time_s": num(self.step_time_s), "mem_peak_bytes": num(self.mem_peak_bytes),
                "mem_capacity_bytes": num(self.mem_capacity_bytes), "per_replica_batch": num(self.per_replica_batch),
                "breakdown": {k: num(v) for k, v in self.breakdown.items()}}


def dcn_factorisations(slices):
    """Every mesh of *slices* slices over the DCN axes (data x fsdp)."""
    return [Mesh(data=slices // f, fsdp=f) for f in range(1, slices + 1) if slices % f == 0]


def search_meshes(workload, topology, optimizer=None, *, global_batch=None, per_replica_batch=None, options=None,
                  remats=REMAT_MODES, strategies=STRATEGIES, progress=None):
    """Every candidate, fastest first, then the infeasible ones (a list of :class:`Candidate`).
    *topology* a slice or a multislice (its slices are factored over the DCN axes)."""
    options = options or StepOptions()
    if isinstance(workload, str):
        workload = load_workload(workload)
    for r in remats:
        if r not in REMAT_MODES:
            raise ConfigError(f"must be one of {', '.join(REMAT_MODES)}", key_path="remat", value=r)
    slice_, ms = load_multislice(topology)
    dcns = dcn_factorisations(ms.slices) if ms is not None else [None]
    out = []
    from dataclasses import replace

    for dcn in dcns:
        for mesh in factorisations(slice_):
            data = mesh.data * (dcn.data if dcn else 1)
            todo = tuple(strategies) if data > 1 else ("fully-sharded",)
            try:
                check_tensor_heads(workload, mesh)
            except ConfigError as exc:  # a row per point, not simulated
                out += [Candidate(str(mesh), str(dcn) if dcn else "", s, remat, "infeasible", "heads", str(exc),
                                  math.nan, math.nan, math.nan, math.nan, {}) for remat in remats for s in todo]
                continue
            for remat in remats:
                opts = replace(options, remat=remat)
                try:
                    run = simulate_mesh(workload, ms or slice_, optimizer, todo, mesh=mesh, dcn_mesh=dcn,
                                        global_batch=global_batch, per_replica_batch=per_replica_batch, options=opts)
                except ConfigError as exc:
                    if "global_batch" not in (exc.key_path or ""):
                        raise
                    for s in todo:
                        out.append(Candidate(str(mesh), str(dcn) if dcn else "", s, remat, "infeasible", "batch",
                                             str(exc), math.nan, math.nan, math.nan, math.nan, {}))
                    continue
                for s, r in run.results.items():
                    m = r.memory
                    out.append(Candidate(str(mesh), str(dcn) if dcn else "", s, remat, r.status,
                                         "" if r.status == "ok" else "memory", r.error, r.step_time_s, m.peak,
                                         m.capacity, run.per_replica_batch, dict(r.breakdown)))
                if progress:
                    progress(len(out))
    out.sort(key=lambda c: (c.status != "ok", c.step_time_s if c.status == "ok" else c.mem_peak_bytes))
    return out
