"""One training step on a device mesh: data x pipeline x fsdp x context x tensor x expert in a slice,
data x pipeline x fsdp x expert across slices.

:func:`simulate_mesh` is :func:`wus_sim.training.step.simulate_strategies` for a mesh
(:mod:`wus_sim.hardware.mesh`). The update strategy is what the ``data`` axis does.

* A mesh that today's step already expresses runs through it unchanged, so it gives today's
  numbers exactly: ``data=N`` is pure data parallelism with the strategy asked for; ``fsdp=N`` is
  ``fully-sharded`` over the slice; with a DCN mesh, ``data=S`` across slices keeps each slice's
  shards (``shard_across_slices`` false for an fsdp slice) and ``fsdp=S`` shards across slices.
* Any other mesh is built here, every duration derived:

  - ``tensor`` T (:mod:`wus_sim.training.parallelism.tensor_parallel`): each device runs and holds ``1/T``
    of every layer; per layer the Megatron-LM activation collectives, reduce-scatter +
    all-gather on the tensor rings, on the layer's critical path.
  - ``expert`` E (:mod:`wus_sim.training.parallelism.expert_parallel`): each MoE layer's routed
    experts split E ways, every other weight and the batch sharded over it as over fsdp (MaxText's
    logical axis rules); per MoE layer the dispatch and combine all-to-alls, forward and
    backward, on the expert rings (or over the DCN), on the layer's critical path.
  - ``context`` C (:mod:`wus_sim.training.parallelism.context_parallel`): each sequence split C ways
    (FLOPs and activations / C), the weights sharded over it as over fsdp (MaxText's logical axis
    rules); per attention layer K and V all-gathered over the context rings, their gradients
    reduce-scattered, on the layer's critical path.
  - ``pipeline`` P (:mod:`wus_sim.training.parallelism.pipeline_parallel`): the blocks split into P
    stages; a device runs and holds its stage's share, each block's time grows by the schedule's
    bubble, each loop iteration ends in a collective-permute to the next stage (counted apart).
  - ``fsdp`` F: weights, gradients and optimizer state ``/ F``; each bucket's weights are
    all-gathered over the fsdp rings before its forward and again before its backward, its
    gradients reduce-scattered after; the gathers run ``gather_prefetch`` buckets ahead of the
    compute on the timeline. Why: XLA's latency-hiding scheduler starts a collective as early as
    its operands allow, within a memory limit, and a weight gather depends on nothing the step
    computes, so the next buckets' gathers run under the current bucket's matmuls, as deep as
    the prefetch depth (one bucket, PyTorch FSDP's default, unless ``gather_prefetch`` says).
  - ``data`` D: ``fully-sharded`` makes the data axis another fsdp axis (collectives over
    data x fsdp); ``replicated`` all-reduces the fsdp shard of each bucket's gradient over the
    data rings (hybrid sharding); ``sharded`` reduce-scatters it over the data rings, updates
    ``1/(D F)`` and all-gathers the shard back (Xu et al. 2020 on the fsdp shard).
  - DCN axes: a collective over an axis with a DCN size runs hierarchically, as the
    multislice model does (:mod:`wus_sim.hardware.multislice`): in-slice phases on the axis's
    rings, the cross-slice phase on the DCN with every chip carrying its devices' shards.

Memory per device: the 1/T workload's weights, gradients and slots under the strategy over the
sharding group, activations / T, the gathered buckets of fsdp."""

from dataclasses import dataclass, replace
import math

from ...collectives.schedules.groups import mesh_group
from ...hardware.mesh import DCN_AXES, MESH_AXES, Mesh, layout
from ...hardware.mesh_spec import fill_mesh
from ...hardware.multislice import load_multislice
from ...inputs.errors import ConfigError
from ...model.compute import memory_bound_time_s
from ...model.ops.context import context_view
from ...model.ops.experts import routed_padded_elements
from ...model.layer_stack import layer_stack
from ...model.memory import memory_breakdown, resolve_gather_prefetch
from ...model.workload import resolve_batch
from ...model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too
from ..update.planner import plan as make_plan
from ..step import (StepOptions, StepResult, StepRun, _with_op_launch, bidirectional_for, simulate_strategies,
                    step_layer_times, strategy_names, with_host_offload)
from ..update.strategies import BOTH, step_work, update_work
from .context_parallel import WEIGHT_SHARD_AXES, check_context_mesh, context_times, with_kv_buffers
from .expert_parallel import axes_size, bucket_parts, check_expert_mesh, expert_times
from .tensor_parallel import check_tensor_heads, split_workload, tensor_times
from .pipeline_parallel import activation_factor, check_pipeline_mesh, pipeline_report, pipeline_step, stage_view
from ..timeline.timeline import BREAKDOWN_PARTS, StepProgram, TimelineBucket
from .mesh_comm import MESH_PARTS, MeshSummary, count_dcn, dcn_part, no_comm, today_comm, today_parts, today_run
from .mesh_collectives import MeshCollectives
from .mesh_shared import _BUCKETS, _device_topology, _oom_text, _timeline

__all__ = ["simulate_mesh", "MESH_PARTS", "MeshSummary"]

def simulate_mesh(workload, topology, optimizer=None, strategies=BOTH, *, mesh=None, dcn_mesh=None,
                  per_replica_batch=None, global_batch=None, options=None, placement=None):
    """Simulate each of *strategies* (what the data axis does) on *mesh* (a
    :class:`~wus_sim.hardware.mesh.Mesh`, ``"fsdp=16,tensor=4"`` or a mapping, one axis of which
    may be -1, the rest of the slice's devices; ``None`` = pure data parallelism) and *dcn_mesh* (across the slices of *topology*, a multislice); returns a
    :class:`~wus_sim.training.step.StepRun` whose ``mesh`` is a :class:`MeshSummary`.
    *per_replica_batch* is the batch of one data-parallel group (the T devices of a tensor
    group share it).

    *placement* (a :class:`~wus_sim.hardware.mesh.Placement`) says megacore, slices and both
    meshes in one value instead: a *topology* given by name is then loaded with its megacore and
    slices, and its meshes are used (give it or *mesh*/*dcn_mesh*, not both)."""
    options = options or StepOptions()
    strategies = strategy_names(strategies)
    if isinstance(workload, str):
        workload = load_workload(workload)
    if placement is not None:
        if mesh is not None or dcn_mesh is not None:
            raise ConfigError("give a placement or mesh/dcn_mesh, not both", key_path="placement",
                              value=placement, show_value=False)
        mesh, dcn_mesh = placement.mesh, placement.dcn_mesh
        if isinstance(topology, str):
            topology = load_multislice(topology, slices=placement.slices, megacore=placement.megacore)
            topology = topology[1] or topology[0]
    topology, ms = load_multislice(topology)
    slices = 1 if ms is None else ms.slices
    # an axis of size -1 takes the rest: of the slices across, of the slice's devices within
    dcn = None if dcn_mesh is None else fill_mesh(dcn_mesh, slices, key_path="dcn_mesh", axes=DCN_AXES)
    if dcn is None and slices > 1:
        dcn = Mesh(data=slices)
    if dcn is not None and dcn.size != slices:
        raise ConfigError(f"multiplies to {dcn.size} slices; the topology has {slices}", key_path="dcn_mesh",
                          value=str(dcn))
    mesh = Mesh(data=topology.num_replicas) if mesh is None else fill_mesh(mesh, topology.num_replicas)
    lay = layout(topology, mesh, custom_mesh=options.custom_mesh)
    check_tensor_heads(workload, mesh)
    check_expert_mesh(workload, mesh, dcn)
    check_context_mesh(workload, mesh)
    check_pipeline_mesh(workload, mesh, dcn, options)
    today = today_run(mesh, dcn, strategies, options)
    if today is not None:
        run = simulate_strategies(workload, ms or topology, optimizer, today[0], per_replica_batch=per_replica_batch,
                                  global_batch=global_batch, options=today[1])
        results = {s: today_parts(r) for s, r in run.results.items()}
        if ms is not None and dcn.data > 1 and today[0] == ("fully-sharded",):
            # fsdp in a slice, data across slices: the DCN reductions are the data axis's; what
            # they add to the wait is the step's wait minus the same step's on one slice
            alone = simulate_strategies(workload, topology, optimizer, today[0], per_replica_batch=run.per_replica_batch,
                                        options=today[1])
            results = {s: dcn_part(r, alone.results[s]) for s, r in results.items()}
        comm = today_comm(next(iter(results.values())).work, ms, dcn, today[1], topology.num_replicas)
        return replace(run, results=results, mesh=MeshSummary(mesh, dcn, lay, comm, "today"))
    return _MeshStep(workload, topology, ms, optimizer, mesh, dcn, lay, options).run(
        strategies, per_replica_batch, global_batch)


class _MeshStep(MeshCollectives):
    """The pieces of one mesh step that every strategy shares."""

    def __init__(self, workload, topology, ms, optimizer, mesh, dcn, lay, options):
        self.topology, self.ms, self.mesh, self.dcn, self.lay, self.options = topology, ms, mesh, dcn, lay, options
        self.dcn = dcn or Mesh()
        self.workload = workload
        self.optimizer = workload.default_optimizer if optimizer is None else optimizer
        # a device's 1/C of each sequence (the whole model's blocks kept), then its 1/T of each layer
        self.local = context_view(workload, mesh.context, stack=layer_stack(workload) or False)
        self.split = split_workload(self.local, mesh.tensor)
        self.ep = mesh.expert * self.dcn.expert
        """Devices an expert group spans, in the slice and across slices."""
        self.pipe = check_pipeline_mesh(workload, mesh, self.dcn, options)
        """The pipeline's :class:`~.pipeline_parallel.PipelineShape`, ``None`` without the axis."""
        self.stage = self.split if self.pipe is None else stage_view(self.split, self.pipe.stages)
        """What a device holds: its stage's share of its tensor group's share."""
        self.pp = None
        self._coll = {}
        """``(op, nbytes, axes) -> (seconds, cross-slice phases)``: a step asks for the same bucket
        sizes hundreds of times (a search's GPT-3 candidate: ~1,000 calls, a few dozen sizes)."""

    # ------------------------------------------------------------ one strategy
    def _scheme(self, strategy):
        """``(shards, memory strategy, sharding axes, gather axes)`` of *strategy* on this mesh. The
        expert axis shards as fsdp does (the routed experts' own split is the same ``1/E``)."""
        m, d = self.mesh, self.dcn
        fsdp = m.fsdp * d.fsdp * m.context * self.ep
        data = m.data * d.data
        if fsdp == 1:  # the strategy over the data axis, on the 1/T workload
            return data, strategy, ("data",), ("data",)
        if strategy == "fully-sharded" or data == 1:
            return data * fsdp, "fully-sharded", ("data",) + WEIGHT_SHARD_AXES, ("data",) + WEIGHT_SHARD_AXES
        return fsdp, "fully-sharded", WEIGHT_SHARD_AXES, WEIGHT_SHARD_AXES  # hybrid: fsdp shards, data replicas

    def _comm_key(self, data_only, *axes_sets):
        """What of the mesh the buckets' collectives read: the mesh itself where the data axis
        reduces apart (*data_only*), else the groups of the axes they run over and their sizes, so
        that the meshes splitting one sharding group differently (data x fsdp, fully-sharded) share
        the buckets: the same groups give the same collectives."""
        if data_only:
            return str(self.mesh)
        sets = set(axes_sets) | {tuple(a for a in s if a != "expert") for s in axes_sets}
        return self.ep, tuple(sorted((s, mesh_group(self.lay, *s).parts, axes_size(self.mesh, self.dcn, s)) for s in sets))

    def run(self, strategies, per_replica_batch, global_batch):
        o, m = self.options, self.mesh
        groups = m.data * m.fsdp * m.expert * self.dcn.size // self.dcn.pipeline  # data-parallel groups (T x P devices)
        batch = resolve_batch(self.workload, self.topology, groups, per_replica_batch=per_replica_batch,
                              global_batch=global_batch)
        if self.pipe is not None and per_replica_batch is None and global_batch is None:
            batch *= self.pipe.stages  # a default batch per device (MaxText's): a group's P stages bring theirs
        layers = step_layer_times(self.split, self.topology, batch, o, spatial_ways=1, expert_ways=self.ep)
        tp = tensor_times(self.local, self.split, o, m.tensor, batch, layers, self.coll_s)
        ep = expert_times(self.local, self.split, o, m, self.ep, batch, self.coll_s)
        cp = context_times(self.workload, m, batch, self.coll_s)
        if self.pipe is not None:  # a device runs its stage's 1/P of the layers, its permutes and bubble
            self.pp = pipeline_step(self.local, self.pipe, o, m, self.dcn, self.lay, self.topology, self.ms, batch,
                                    self.coll_s)
            layers, tp, ep, cp = self.pp.device_share(layers, o.compute, tp, ep, cp)
        if m.data * self.dcn.data == 1 and m.fsdp * self.dcn.fsdp * m.context * self.ep > 1:
            strategies = ("fully-sharded",)  # no data axis: the weights are sharded over fsdp, whatever is asked
        results, plan = {}, None
        for strategy in strategies:
            shards, mem_strategy, shard_axes, gather_axes = self._scheme(strategy)
            # the slice itself when the shards are its devices (the same cuts as today's step)
            grid = self.topology if shards == self.topology.num_replicas else _device_topology(self.topology, shards)
            plan = make_plan(self.stage, grid, self.optimizer, replicas=shards, bucket_bytes=o.bucket_bytes)
            results[strategy] = self._one(strategy, plan, batch, (tp, ep, cp), layers, shards, mem_strategy, shard_axes,
                                          gather_axes)
        summary = MeshSummary(self.mesh, self.dcn if self.dcn.size > 1 else None, self.lay,
                              next((r for r in results.values() if r.result.status == "ok"),
                                   next(iter(results.values()))).comm_summary, "mesh",
                              self.workload, None if self.pipe is None else pipeline_report(self.pipe))
        results = {s: r.result for s, r in results.items()}
        return StepRun(results=results, plan=plan, replicas=groups, spatial_ways=1, per_replica_batch=batch,
                       global_batch=batch * groups, params=self.workload.params, optimizer=plan.analysis.name,
                       slices=self.dcn.size, replicas_per_slice=m.data * m.fsdp * m.expert, multislice=self.ms,
                       mesh=summary)

    def _buckets(self, work, strategy, data_only, sharded_weights, shard_axes, gather_axes, routed):
        """The timeline buckets of *work* on this mesh, the same with free fsdp collectives, each
        bucket's seconds on the data axis, and the fsdp and data axes' comm counts. *routed*: per
        bucket, the fraction of its buffer in routed experts (an expert axis moves it apart:
        :func:`~wus_sim.training.parallelism.expert_parallel.bucket_parts`). Memoized
        (:data:`_BUCKETS`): a search's remat modes of one mesh share them (only layer times and
        memory differ)."""
        comm = no_comm()

        def count(axis, nbytes, op, axes):
            """Seconds of *op* over *axes*, counted on *axis*; its cross-slice phases on the
            axis whose slices it crosses (:meth:`dcn_axis`)."""
            dcn = []
            t = self.coll_s(op, nbytes, axes, dcn)
            comm[axis]["collectives"] += 1
            comm[axis]["nbytes"] += float(nbytes)
            comm[axis]["busy_s"] += float(t)
            count_dcn(comm[self.dcn_axis(axes)], dcn)
            return t

        def counts(axis, nbytes, op, axes, bucket):
            """:func:`count` of a bucket's collective: with an expert axis its dense part over *axes*,
            its routed part (a device's own experts) over *axes* without expert."""
            if self.ep == 1 or "expert" not in axes:
                return count(axis, nbytes, op, axes)
            dense, own = bucket_parts(nbytes, routed[bucket], self.ep)
            rest = tuple(a for a in axes if a != "expert")
            t = count(axis, dense, op, axes) if dense > 0 else 0.0
            if own > 0 and axes_size(self.mesh, self.dcn, rest) > 1:
                t += count(axis, own, op, rest)
            return t

        def gathered(g):
            if g is None:
                return 0.0, 0.0
            axis = "fsdp" if sharded_weights else "data"
            return g.nbytes, counts(axis, g.nbytes, "all-gather", gather_axes, g.bucket)

        # each bucket's all-gathers after the update, before forward, before backward (what
        # step_prefetch.bucket_gathers finds by a scan per bucket, indexed once: the first of each)
        by_bucket = [{} for _ in range(3)]
        for index, gathers in zip(by_bucket, (work.weight_allgathers, work.forward_allgathers,
                                              work.backward_allgathers)):
            for g in gathers:
                index.setdefault(g.bucket, g)

        buckets, data_part, free = [], [], []  # data_part: each bucket's gradient seconds on the data axis
        for c in work.grad_collectives:
            after, fwd_g, bwd_g = (gathered(index.get(c.bucket)) for index in by_bucket)
            if data_only and c.op == "reduce-scatter":  # fsdp shard, then the data axis on 1/F of it
                t = counts("fsdp", c.nbytes, "reduce-scatter", WEIGHT_SHARD_AXES, c.bucket)
                part = c.nbytes / (self.mesh.fsdp * self.dcn.fsdp * self.mesh.context * self.ep)
                ops = ("all-reduce",) if strategy == "replicated" else ("reduce-scatter", "all-gather")
                on_data = sum(count("data", part, op, ("data",)) for op in ops)
                t += on_data
            else:
                axis = "fsdp" if (sharded_weights and c.op == "reduce-scatter") else "data"
                t = counts(axis, c.nbytes, c.op, shard_axes, c.bucket)
                on_data = t if axis == "data" else 0.0
            data_part.append(on_data)
            bucket = dict(name=f"bucket {c.bucket}", first_layer=c.first_layer, layers=tuple(c.layers), grad_op=c.op,
                          grad_nbytes=c.nbytes, gather_nbytes=after[0], gather_time_s=after[1],
                          fwd_gather_nbytes=fwd_g[0], bwd_gather_nbytes=bwd_g[0])
            buckets.append(TimelineBucket(**bucket, grad_time_s=t, fwd_gather_time_s=fwd_g[1],
                                          bwd_gather_time_s=bwd_g[1]))
            # the same bucket with free fsdp collectives (its data-axis part only), for fsdp_comm_s
            free.append(TimelineBucket(**bucket, grad_time_s=on_data, fwd_gather_time_s=0.0, bwd_gather_time_s=0.0))
        return tuple(buckets), tuple(free), tuple(data_part), {a: comm[a] for a in ("fsdp", "data")}

    def _one(self, strategy, plan, batch, layer_comm, layers, shards, mem_strategy, shard_axes, gather_axes):
        o = self.options
        (tp_fwd, tp_bwd, tp_count, tp_nbytes, tp_busy), (ep_fwd, ep_bwd, ep_count, ep_nbytes, ep_busy, ep_dcn) = layer_comm[:2]
        cp_fwd, cp_bwd, cp_count, cp_nbytes, cp_busy = layer_comm[2]
        work = step_work(plan, mem_strategy, keep_gathered_weights=o.keep_gathered_weights)
        data_only = (strategy in ("replicated", "sharded") and mem_strategy == "fully-sharded"
                     and shard_axes == WEIGHT_SHARD_AXES)
        data_n = self.mesh.data * self.dcn.data
        gather = dict(gather_prefetch=o.gather_prefetch, keep_gathered_weights=o.keep_gathered_weights, remat=o.remat,
                      overlap_grad_reduce=o.overlap_grad_reduce, activation_model=o.activation_model,
                      remat_policy=o.remat_policy)
        memory = memory_breakdown(plan, mem_strategy, batch, **gather, expert_ways=self.ep)
        if self.pipe is not None:  # the stage's microbatches in flight
            act = memory.activations * (1 - activation_factor(self.pipe))
            memory = replace(memory, activations=memory.activations - act, peak=memory.peak - act)
        if data_only and strategy == "sharded":  # slots of 1/(D F): the data axis shards the update too
            memory = replace(memory, slots=memory.slots / data_n, peak=memory.peak - memory.slots * (1 - 1 / data_n))
        memory = with_kv_buffers(memory, self.workload, self.mesh, batch)  # one layer's gathered K/V
        if not memory.fits:  # an OOM row, as today's step gives: no timeline to run
            nan = dict.fromkeys(tuple(BREAKDOWN_PARTS) + MESH_PARTS, math.nan)
            return _Outcome(StepResult(strategy, "infeasible", math.nan, nan, memory, work,
                                       error=_oom_text(memory, self.mesh, batch)), no_comm())
        # the layers wait on their tensor collectives, their expert all-to-alls and their K/V gathers
        fwd_s = [float(t) + x + e + c for t, x, e, c in zip(layers.forward_s, tp_fwd, ep_fwd, cp_fwd)]
        bwd_s = [float(t) + x + e + c for t, x, e, c in zip(layers.backward_s, tp_bwd, ep_bwd, cp_bwd)]
        fwd_s, bwd_s, pipe = (fwd_s, bwd_s, (0.0,) * 4) if self.pp is None else self.pp.add(fwd_s, bwd_s)
        comm = no_comm()
        comm["tensor"].update(collectives=tp_count, nbytes=float(tp_nbytes), busy_s=tp_busy)
        comm["expert"].update(collectives=ep_count, nbytes=float(ep_nbytes), busy_s=ep_busy)
        count_dcn(comm["expert"], ep_dcn * ep_count)
        comm["context"].update(collectives=cp_count, nbytes=float(cp_nbytes), busy_s=cp_busy)
        if self.pp is not None:
            comm["pipeline"] = self.pp.comm_entry()
        # what the issue calls fsdp traffic: every weight gather and gradient reduce-scatter of a
        # fully-sharded update (a data axis that is fully-sharded behaves as fsdp); the data axis's
        # own collectives (replicated and sharded updates, the hybrid's cross-replica part) are data
        sharded_weights = mem_strategy == "fully-sharded"

        if self.ep > 1:
            own = routed_padded_elements(plan)
            routed = {b.index: own[b.index] / b.padded_elements if b.padded_elements else 0.0 for b in plan.buckets}
        else:
            routed = None
        buckets, free, data_part, axis_comm = _BUCKETS.get(
            (work, self.topology, self.ms),
            (strategy, data_only, sharded_weights, shard_axes, gather_axes, self._comm_key(data_only, shard_axes,
                                                                                          gather_axes), str(self.dcn),
             o.algorithm, bidirectional_for(o), o.routing),
            lambda: self._buckets(work, strategy, data_only, sharded_weights, shard_axes, gather_axes, routed))
        for axis, entry in axis_comm.items():
            comm[axis] = dict(entry)
        upd = update_work(plan, mem_strategy)
        if data_only and strategy == "sharded":
            upd = replace(upd, elements=upd.elements // data_n, bytes_read=upd.bytes_read / data_n,
                          bytes_written=upd.bytes_written / data_n, flops=upd.flops / data_n)
        work = replace(work, update=upd)
        update_s = (memory_bound_time_s(upd.bytes_moved, upd.flops, self.topology, o.compute)
                    + upd.kernels * o.compute.op_overhead_s)
        extra = tuple(self.coll_s(c.op, c.nbytes, MESH_AXES) for c in work.extra_allreduces)

        def program(bks):
            return StepProgram(
                strategy=mem_strategy, fwd_layer_s=tuple(fwd_s), bwd_layer_s=tuple(bwd_s), buckets=tuple(bks),
                update_s=update_s, extra_reduction_s=extra, overlap_grad_reduce=o.overlap_grad_reduce,
                overlap_all_gather=o.overlap_all_gather and mem_strategy == "sharded",
                step_overhead_s=o.compute.step_overhead_s, host_loop_s=o.compute.host_loop_s / o.steps_per_loop,
                layer_names=tuple(self.workload.layer_names),
                gather_prefetch=resolve_gather_prefetch(plan, o.gather_prefetch))

        tl = _timeline(program(buckets), o.steps)
        breakdown = _with_op_launch(dict(tl.breakdown), self.split, work, o.compute)
        with_host_offload(breakdown, layers)
        breakdown["tensor_comm_s"] = tensor_s = float(sum(tp_fwd) + sum(tp_bwd))
        breakdown["expert_comm_s"] = expert_s = float(sum(ep_fwd) + sum(ep_bwd))
        # the layers wait on their tensor collectives and all-to-alls: counted apart from the compute
        fwd_tp, fwd_ep = float(sum(tp_fwd)), float(sum(ep_fwd))
        breakdown["fwd_s"] -= fwd_tp
        breakdown["bwd_s"] -= tensor_s - fwd_tp
        if self.ep > 1:
            breakdown["fwd_s"] -= fwd_ep
            breakdown["bwd_s"] -= expert_s - fwd_ep
        breakdown["context_comm_s"] = context_s = float(sum(cp_fwd) + sum(cp_bwd))
        if self.mesh.context > 1:
            breakdown["fwd_s"] -= float(sum(cp_fwd))
            breakdown["bwd_s"] -= context_s - float(sum(cp_fwd))
        breakdown["pipeline_bubble_s"], breakdown["pipeline_comm_s"] = pipe[0] + pipe[1], pipe[2] + pipe[3]
        if self.pp is not None:  # the blocks wait on the bubble and the permutes: counted apart
            breakdown["fwd_s"] -= pipe[0] + pipe[2]
            breakdown["bwd_s"] -= pipe[1] + pipe[3]
        fsdp_s = 0.0
        # the wait fsdp costs: the step's exposed wait minus that with free fsdp collectives (none
        # to split when nothing waits: the second timeline would give 0 again)
        if sharded_weights and breakdown["exposed_comm_s"] > 0:
            # with every bucket's collectives free the network runs nothing of positive length but
            # the optimizer's reductions (counted apart): nothing to wait on, no second timeline
            idle_net = not any(data_part) and not any(b.gather_time_s for b in buckets)
            without = 0.0 if idle_net else _timeline(program(free), o.steps).breakdown["exposed_comm_s"]
            fsdp_s = min(max(0.0, breakdown["exposed_comm_s"] - without), breakdown["exposed_comm_s"])
        breakdown["fsdp_comm_s"] = fsdp_s
        breakdown["data_comm_s"] = breakdown["exposed_comm_s"] - fsdp_s
        return _Outcome(StepResult(strategy, "ok", tl.step_time_s, breakdown, memory, work, tl), comm)


@dataclass(frozen=True)
class _Outcome:
    result: object
    comm_summary: dict
