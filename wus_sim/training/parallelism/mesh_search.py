"""The fastest mesh that fits: every factorisation of a slice's devices into data x fsdp x tensor
(x expert, for a model with mixture-of-experts layers: expert sizes that divide its routed experts;
x context, for a sequence of 32k tokens or more: :func:`~.context_parallel.with_context_meshes`;
and of the slices into data x fsdp over the DCN), every update strategy of the data axis and
every rematerialisation policy, simulated and ranked by step time.

Every candidate runs one global batch: the one given, else the workload's default on the slice
(what ``step`` without a mesh runs: its per-replica batch x replicas x slices,
:func:`default_global_batch`), so no ranking compares steps of different sizes.

A candidate that cannot run is a row with its reason (does not fit in HBM, the batch does not
divide over its data-parallel groups, a tensor axis larger than the attention's query heads:
:func:`~wus_sim.training.parallelism.tensor_parallel.check_tensor_heads`, not simulated), counted by reason; nothing is dropped silently. Meshes
without a data axis run ``fully-sharded`` only (the strategy is what the data axis does; without
one every strategy is the same step), so each distinct step appears once. A remat mode the
workload cannot run (``selective`` without what each layer keeps) or that recomputes nothing of
it (the same step as ``none``) is skipped, with the reason in :attr:`Search.skipped_remats`.

:class:`Search` streams: :meth:`Search.candidates` yields one :class:`Candidate` at a time (a
small record: the step's plan and timeline are dropped as soon as its numbers are read), so a
caller holds what it keeps, can stop at any point (a time limit, Ctrl-C) and still has every
candidate seen so far.
"""

from dataclasses import dataclass, replace
import math

from ...hardware.mesh import CORE_AXES, MESH_AXES, Mesh, factorisations
from ...hardware.multislice import load_multislice
from ...inputs.errors import ConfigError
from ...collectives.api import drop_schedules
from ...inputs.memo import clear_memos
from ...model.ops.experts import moe_layers
from ...model.workload import REMAT_MODES, resolve_batch, resolve_replicas
from ...model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too
from .mesh_step import simulate_mesh
from .context_parallel import with_context_meshes
from .pipeline_parallel import pipeline_sizes
from .tensor_parallel import check_tensor_heads
from ..step import StepOptions
from ..update.strategies import STRATEGIES

__all__ = ["Candidate", "Search", "search_meshes", "dcn_factorisations", "default_global_batch"]

MAX_SCHEDULED_DEVICES = 16 * 2048
"""Collective plans (with their compiled schedules: arrays over the slice's devices) a search lets
the package's caches hold before it drops them, between two meshes, counted as plans x devices of
the slice: 16 plans of a 2048-device slice, fewer on a bigger one (at least :data:`MIN_SCHEDULES`).
Dropping them keeps the memoized times (:func:`~wus_sim.collectives.api.drop_schedules`), so no
collective is simulated twice and a dropped plan costs only its planning again when a later mesh
asks a size not seen yet. Measured (peak RSS): GPT-3 on v5p-2048 120 -> 88 MB against 128 plans
kept; ncf on torus:64x64 3.3 -> 1.9 GB. One mesh's own schedules are not bounded here. A search in
worker processes shares the bound among them (ncf on torus:64x64 with two: 2.6 GB each keeping the
whole bound, 1.9 GB sharing it; peak RSS of the process tree)."""

MIN_SCHEDULES = 4
"""Plans kept at least, whatever the slice."""


def max_schedules(devices):
    """Plans a search's caches may hold between two meshes on a slice of *devices* devices."""
    return max(MIN_SCHEDULES, MAX_SCHEDULED_DEVICES // max(devices, 1))


def cached_plans():
    """How many collective plans the package's plan cache holds now."""
    from ...collectives.schedules.plan_cache import _plan

    return _plan.cache_info().currsize


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
    remat_policy: str = None
    """MaxText's remat policy the step ran under (``remat`` is then ``'none'``), or ``None``."""

    def to_dict(self):
        def num(x):
            return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)

        return {"mesh": self.mesh, "dcn_mesh": self.dcn_mesh or None, "strategy": self.strategy, "remat": self.remat,
                "remat_policy": self.remat_policy,
                "status": self.status, "reason": self.reason or None, "error": self.error or None,
                "step_time_s": num(self.step_time_s), "mem_peak_bytes": num(self.mem_peak_bytes),
                "mem_capacity_bytes": num(self.mem_capacity_bytes), "per_replica_batch": num(self.per_replica_batch),
                "breakdown": {k: num(v) for k, v in self.breakdown.items()}}


def dcn_factorisations(slices, expert=1, pipelines=(1,)):
    """Every mesh of *slices* slices over the DCN axes data x fsdp, with *expert* slices an expert axis
    (what a caller fixes: a search does not vary it), for each pipeline size of *pipelines*
    (:func:`~.pipeline_parallel.pipeline_sizes`)."""
    out = []
    for p in pipelines:
        rest = slices // (expert * p) if slices % (expert * p) == 0 else 0
        out += [Mesh(data=rest // f, fsdp=f, expert=expert, pipeline=p) for f in range(1, rest + 1) if rest % f == 0]
    return out


def default_global_batch(workload, slice_, slices=1):
    """The global batch a search runs when none is given: ``step``'s on the slice without a mesh
    (the MLPerf run's per-replica batch x its replicas where one is recorded, else the workload's
    default per-replica batch x one replica per device), x *slices*."""
    replicas = resolve_replicas(workload, slice_)
    return resolve_batch(workload, slice_, replicas) * replicas * slices


def _pinned(mesh, axes):
    """``{axis: size}`` of the *axes* of *mesh* the caller fixed (a Mesh: its axes above 1)."""
    if mesh is None:
        return {}
    if axes is None:
        axes = [a for a, v in mesh.to_dict().items() if v > 1]
    return {a: getattr(mesh, a) for a in axes}


class Search:
    """One search: the meshes it runs (after the fixed parts), what it skips and why, and the
    candidates, streamed (:meth:`candidates`).

    *mesh* / *dcn_mesh*: fixed parts (a :class:`Mesh`; *mesh_axes* / *dcn_axes* name the axes the
    caller fixed, default those above 1): only meshes with those sizes on those axes run.
    *replicas*: only meshes with that many data-parallel groups per slice (``data x fsdp x expert``).
    *remats*: the remat modes ranked; with ``options.remat_policy`` only ``'none'`` runs, under it.
    *global_batch*: every candidate's (default :func:`default_global_batch`); *per_replica_batch*
    instead gives ``per_replica_batch x`` the devices of every slice (pure data parallelism's)."""

    def __init__(self, workload, topology, optimizer=None, *, global_batch=None, per_replica_batch=None,
                 options=None, remats=REMAT_MODES, strategies=STRATEGIES, mesh=None, mesh_axes=None,
                 dcn_mesh=None, dcn_axes=None, replicas=None):
        self.options = options or StepOptions()
        self.workload = load_workload(workload) if isinstance(workload, str) else workload
        self.optimizer = optimizer
        remats = tuple(remats)
        strategies = tuple(strategies)
        if not remats:
            raise ConfigError("must name at least one remat mode", key_path="remats", value=remats)
        if not strategies:
            raise ConfigError("must name at least one strategy", key_path="strategies", value=strategies)
        for r in remats:
            if r not in REMAT_MODES:
                raise ConfigError(f"must be one of {', '.join(REMAT_MODES)}", key_path="remat", value=r)
        for s in strategies:
            if s not in STRATEGIES:
                raise ConfigError(f"must be one of {', '.join(STRATEGIES)}", key_path="strategies", value=s)
        self.strategies = strategies
        self.slice, self.ms = load_multislice(topology)
        self.slices = 1 if self.ms is None else self.ms.slices
        devices = self.slice.num_replicas * self.slices
        if global_batch is not None and per_replica_batch is not None:
            raise ConfigError("give per_replica_batch or global_batch, not both", key_path="global_batch",
                              value=global_batch)
        if per_replica_batch is not None:
            if isinstance(per_replica_batch, bool) or not isinstance(per_replica_batch, int) or per_replica_batch < 1:
                raise ConfigError("must be a whole number >= 1", key_path="per_replica_batch", value=per_replica_batch)
            self.global_batch, self.batch_source = per_replica_batch * devices, "per_replica_batch"
        elif global_batch is not None:
            self.global_batch, self.batch_source = global_batch, "global_batch"
        else:
            self.global_batch = default_global_batch(self.workload, self.slice, self.slices)
            self.batch_source = "default"
        self.remat_policy = self.options.remat_policy
        if self.remat_policy is not None:
            remats = ("none",)
        self.skipped_remats = {}
        """Remat mode -> why it is not searched (the workload cannot run it, or it recomputes nothing)."""
        self.remats = tuple(r for r in remats if not self._skip(r))
        self.meshes, self.beyond_heads = self._meshes(_pinned(mesh, mesh_axes), _pinned(dcn_mesh, dcn_axes), replicas)
        self.meshes_done = 0
        """Meshes whose candidates :meth:`candidates` has yielded, all of them."""
        self.workers = 1
        """Worker processes running the meshes now (:meth:`candidates`'s *jobs*, at most the parts)."""

    def _skip(self, remat):
        w, o = self.workload, self.options
        if remat == "none":
            return False
        if not w.rematerialises(remat):
            self.skipped_remats[remat] = f"recomputes nothing of {w.name} (the same step as none)"
            return True
        try:
            w.activation_bytes_kept(remat, o.activation_model)
        except ConfigError as exc:
            if exc.key_path != "remat":
                raise
            self.skipped_remats[remat] = exc.rule
            return True
        return False

    def _meshes(self, fixed, dcn_fixed, replicas):
        """``[(dcn mesh or None, mesh)]`` to run and ``[(dcn, mesh, heads error)]`` beyond the heads."""
        ici_p, dcn_p = pipeline_sizes(self.workload, self.slices, dcn_fixed.get("pipeline"), fixed.get("pipeline"),
                                      self.options)
        dcns = dcn_factorisations(self.slices, dcn_fixed.get("expert", 1), dcn_p) if self.slices > 1 else [None]
        dcns = [d for d in dcns if all(getattr(d, a) == v for a, v in dcn_fixed.items())]
        moe = moe_layers(self.workload)
        # expert sizes join only for a model with experts, and only those that divide them
        axes = CORE_AXES if moe is None else MESH_AXES
        across = dcn_fixed.get("expert", 1)  # an expert axis across slices (fixed: never searched)
        base = with_context_meshes(self.workload, factorisations(self.slice, axes + ("pipeline",), ici_p),
                                   fixed.get("context"))
        meshes = [m for m in base if all(getattr(m, a) == v for a, v in fixed.items())
                  and (moe is None or moe.experts % (m.expert * across) == 0)
                  and (replicas is None or m.data * m.fsdp * m.expert == replicas)]
        if self.slices > 1 and not dcns:
            raise ConfigError(f"fixes no mesh of the {self.slices} slices", key_path="dcn_mesh",
                              value=",".join(f"{a}={v}" for a, v in dcn_fixed.items()))
        if not meshes:
            what = ", ".join([f"{a}={v}" for a, v in fixed.items()] + ([f"data x fsdp x expert = {replicas}"] if replicas else []))
            raise ConfigError(f"fixes no mesh of the {self.slice.num_replicas} devices of {self.slice.name} "
                              "(the sizes must divide them)", key_path="mesh" if fixed else "replicas", value=what)
        run, beyond = [], []
        for m in meshes:  # factorisations' order: by tensor size, what the step's memos share
            try:
                check_tensor_heads(self.workload, m)
            except ConfigError as exc:
                beyond += [(d, m, str(exc)) for d in dcns]
                continue
            run += [(d, m) for d in dcns]
        return run, beyond

    def strategies_of(self, dcn, mesh):
        """The strategies a mesh runs: all asked where it has a data axis, else ``fully-sharded``."""
        data = mesh.data * (dcn.data if dcn else 1)
        return self.strategies if data > 1 else ("fully-sharded",)

    @property
    def size(self):
        """Candidates the search yields in all (the rows beyond the heads included)."""
        per = len(self.remats)
        return sum(len(self.strategies_of(d, m)) * per for d, m in self.meshes + [x[:2] for x in self.beyond_heads])

    def _row(self, dcn, mesh, strategy, remat, status, reason, error, run=None, r=None):
        nan = math.nan
        m = r.memory if r is not None else None
        return Candidate(str(mesh), str(dcn) if dcn else "", strategy, remat, status, reason, error,
                         r.step_time_s if r is not None else nan, m.peak if m is not None else nan,
                         m.capacity if m is not None else nan, run.per_replica_batch if run is not None else nan,
                         dict(r.breakdown) if r is not None else {}, self.remat_policy)

    def candidates(self, jobs=1):
        """Every candidate, one at a time, in mesh order (the rows beyond the heads first).
        *jobs* > 1: the meshes run in that many worker processes (:meth:`parts`), their
        candidates yielded in the same order as with one."""
        for dcn, mesh, error in self.beyond_heads:
            for remat in self.remats:
                for s in self.strategies_of(dcn, mesh):
                    yield self._row(dcn, mesh, s, remat, "infeasible", "heads", error)
        parts = self.parts()
        if jobs <= 1 or len(parts) <= 1:
            yield from self._run(0, len(self.meshes))
            return
        from ...inputs.workers import can_fork, stop_pool, worker_pool

        global _WORKER_SEARCH
        _WORKER_SEARCH = self  # what forked workers inherit: the search is then not pickled per part
        self.workers = min(jobs, len(parts))  # they share the plans' memory bound (:meth:`_run`)
        forked = can_fork()
        pool = worker_pool(self.workers, fork=forked)
        finished = False
        try:
            futures = [pool.submit(_run_part, None if forked else self, start, stop) for start, stop in parts]
            for future in futures:
                for mesh_candidates in future.result():
                    yield from mesh_candidates
                    self.meshes_done += 1
            finished = True
        finally:  # an error, Ctrl-C, a time limit (the caller stops reading): the workers stop now
            _WORKER_SEARCH, self.workers = None, 1
            stop_pool(pool, finished)

    def parts(self):
        """``[(start, stop)]``: the runs of :attr:`meshes` of one tensor size, what a worker takes
        whole (the step's memos serve one tensor size: :meth:`_run` drops them between two)."""
        out, start = [], 0
        for i in range(1, len(self.meshes) + 1):
            if i == len(self.meshes) or self.meshes[i][1].tensor != self.meshes[start][1].tensor:
                out.append((start, i))
                start = i
        return out

    def _run(self, start, stop):
        """The candidates of :attr:`meshes` ``[start:stop]``, simulated here."""
        tensor = None
        # each of the search's worker processes keeps its share of the plans the bound allows
        bound = max(MIN_SCHEDULES, max_schedules(self.slice.num_replicas) // self.workers)
        for dcn, mesh in self.meshes[start:stop]:
            if mesh.tensor != tensor:
                # the memos of one tensor size (its split workload, plans, step work, buckets) serve
                # no later mesh: dropped, so a search holds one tensor size's at a time
                tensor = mesh.tensor
                clear_memos()
            # the collective schedules of the groups (shared across meshes) once there are more
            # than max_schedules allows (GPT-3 on v5p-3072: 593 MB of them else); their times stay
            if cached_plans() > bound:
                drop_schedules()
            todo = self.strategies_of(dcn, mesh)
            for remat in self.remats:
                opts = replace(self.options, remat=remat)
                try:
                    run = simulate_mesh(self.workload, self.ms or self.slice, self.optimizer, todo, mesh=mesh,
                                        dcn_mesh=dcn, global_batch=self.global_batch, options=opts)
                except ConfigError as exc:
                    if "global_batch" not in (exc.key_path or "") and exc.key_path != "pipeline_microbatches":
                        raise  # (a pipeline's microbatches must divide a group's batch: a batch reason too)
                    for s in todo:
                        yield self._row(dcn, mesh, s, remat, "infeasible", "batch", str(exc))
                    continue
                for s, r in run.results.items():
                    yield self._row(dcn, mesh, s, remat, r.status, "" if r.status == "ok" else "memory", r.error,
                                    run, r)
                del run
            self.meshes_done += 1


_WORKER_SEARCH = None
"""The search a pool's workers run parts of (set before they fork)."""


def _run_part(search, start, stop):
    """In a worker: the candidates of meshes ``[start:stop]`` of *search* (``None``: the parent's,
    inherited by fork), a list per mesh."""
    search = search or _WORKER_SEARCH
    groups, done = [], search.meshes_done
    for c in search._run(start, stop):
        if not groups or search.meshes_done != done:  # _run counts a mesh once its candidates are out
            groups.append([])
            done = search.meshes_done
        groups[-1].append(c)
    return groups


def rank_key(c):
    """Fastest first, then the infeasible ones (the smaller need first)."""
    return (c.status != "ok", c.step_time_s if c.status == "ok" else c.mem_peak_bytes)


SEARCH_FIXED = ("mesh", "mesh_axes", "dcn_mesh", "dcn_axes", "replicas")
"""The keyword arguments of :func:`search_meshes` that fix part of the search (:class:`Search`'s)."""


def search_meshes(workload, topology, optimizer=None, *, global_batch=None, per_replica_batch=None, options=None,
                  remats=REMAT_MODES, strategies=STRATEGIES, progress=None, jobs=1, **fixed):
    """Every candidate, fastest first, then the infeasible ones (a list of :class:`Candidate`).
    *topology* a slice or a multislice (its slices are factored over the DCN axes). *fixed*:
    :class:`Search`'s ``mesh``, ``mesh_axes``, ``dcn_mesh``, ``dcn_axes`` and ``replicas``.
    *progress*: called with the number of candidates so far after each mesh x remat (each part,
    with *jobs* > 1 worker processes: :meth:`Search.candidates`)."""
    if progress is not None and not callable(progress):
        raise ConfigError("must be callable (or None)", key_path="progress", value=progress)
    for name in fixed:
        if name not in SEARCH_FIXED:
            raise ConfigError(f"is not an argument of search_meshes (its fixed parts: {', '.join(SEARCH_FIXED)})",
                              key_path=name)
    search = Search(workload, topology, optimizer, global_batch=global_batch, per_replica_batch=per_replica_batch,
                    options=options, remats=remats, strategies=strategies, **fixed)
    out = []
    for c in search.candidates(jobs=jobs):
        out.append(c)
        if progress:
            progress(len(out))
    out.sort(key=rank_key)
    return out
