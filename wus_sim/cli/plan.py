"""``wus-sim plan WORKLOAD --topology T --optimizer O``: the sharding plan and what it saves.

Prints how the workload's tensors are formatted and fused for N replicas, the
extra reductions the optimizer needs, the shard one replica owns after the 2-D
reduce-scatter, and, for each update strategy (replicated, sharded and fully-sharded,
the last with its default gather prefetch of one bucket), the collectives, the update
work and time, and the memory per replica. ``--json`` prints the same as JSON
(``params``, ``padded_params``, ``buckets``, ``replicated_tensors``,
``extra_reductions``, ``memory_bytes.{replicated,sharded,fully-sharded}.{weights,gradients,slots,
activations,peak}``, ...), in the shape of the shipped schema ``wus_sim/schemas/plan.v1.json``.
Per-element sizes are ``*_bytes_per_element`` (``grad_bytes_per_element``; ``step --json``'s
``grad_nbytes`` is a total). Deprecated aliases, kept for one release (0.2 drops them):
``grad_bytes``, ``weight_bytes``, ``slot_bytes``, ``gather_bytes``, ``extra_reductions[].dtype_bytes``
and ``memory`` (bytes without the unit in the key); ``deprecated_aliases`` maps each to its
replacement.

The per-replica batch and the replica count default to the workload's MLPerf
v0.6 run on that slice (Google's submission), else the workload's default batch and
one replica per core.
"""


from ..inputs.strict_json import dumps_strict
from ..inputs.units import GRAD_DTYPE_SPELLINGS
from .options import add_flag, add_json_option

__all__ = ["add_parser", "run", "build_report", "PLAN_JSON_SCHEMA_VERSION"]


def add_parser(subparsers):
    p = subparsers.add_parser(
        "plan", help="sharding plan of a workload, and memory/update cost of each strategy",
        description="Plan the weight-update sharding of WORKLOAD over a topology's replicas and compare "
                    "the replicated, sharded and fully-sharded updates (collectives, update work, memory per replica).")
    p.add_argument("workload", metavar="WORKLOAD", nargs="?", default=None,
                   help="workload name or YAML path (or --maxtext's model_name)")
    from .plan_search import DEFAULT_HBM_HEADROOM, RANKS, TopologyList

    p.add_argument("--topology", "-t", required=True, metavar="T", action=TopologyList,
                   help="topology name (tpu-v3-2048), YAML path or inline spec (torus:32x32); with --search, give "
                        "-t several times to rank the meshes of several slices together")
    p.add_argument("--optimizer", "-o", metavar="O",
                   help="optimizer name, composition (adam+clip) or YAML path (default: the workload's)")
    from .maxtext_options import add_maxtext_options

    add_maxtext_options(p)
    add_json_option(p)
    p.add_argument("--per-replica-batch", type=int, metavar="B",
                   help="examples per replica (default: the MLPerf v0.6 run on this slice, else the "
                        "workload's default)")
    p.add_argument("--global-batch", type=int, metavar="G", help="examples per step over all replicas (as step takes it)")
    p.add_argument("--slices", type=int, metavar="N",
                   help="multislice: N identical slices of T joined by the data-center network; the update shards "
                        "over every replica of every slice (default: the topology file's multislice section, else 1)")
    p.add_argument("--calibration", metavar="C",
                   help="calibrated chip parameters: 'default' (shipped), 'none' (uncalibrated physics) or a YAML path")
    p.add_argument("--replicas", type=int, metavar="N",
                   help="data-parallel replicas per slice (default: the MLPerf run's, else one per core)")
    from .options import add_placement_options, add_software_stack_option

    add_placement_options(p)
    add_software_stack_option(p)
    from .cost_lines import add_price_option

    add_price_option(p)
    p.add_argument("--bucket-MiB", type=float, metavar="F", dest="bucket_MiB",
                   help="gradient bytes at which a fused bucket closes, MiB (default 25)")
    p.add_argument("--replicate-below", type=int, metavar="E",
                   help="keep tensors with fewer than E elements replicated (default: N)")
    p.add_argument("--max-padding-ratio", type=float, metavar="R",
                   help="keep a tensor replicated if sharding would pad it by more than R x its size "
                        "(default 1)")
    p.add_argument("--grad-dtype", choices=GRAD_DTYPE_SPELLINGS, help="gradient dtype (default: the workload's)")
    p.add_argument("--replica", type=int, default=None, metavar="R",
                   help="replica whose shard ownership is shown (default 1, or 0 when there is one replica)")
    add_flag(p, "--check",
                   help="exit with an error if a strategy does not fit in HBM")
    from .options import add_mesh_options

    add_mesh_options(p)
    add_flag(p, "--search", help="simulate every mesh of the slice's devices (data x fsdp x tensor, x expert for "
                                 "a model with experts, x context for sequences of 32k tokens or more, and the slices' "
                                 "data x fsdp) x update strategy x remat "
                                 "none|selective|layer|full and rank them by step time (--rank cost: by what a step "
                                 "costs); infeasible ones counted with their reason (docs/mesh.md)")
    # plan --search only (each refused or unused without it is said in plan_search's doc)
    p.add_argument("--rank", choices=RANKS, default="time",
                   help="--search: order by step time (default) or by cost: chips x step time x price per "
                        "chip-hour (the chip's in chips.yaml, or --price-per-chip-hour), i.e. per million tokens, "
                        "the global batch being one for every candidate")
    p.add_argument("--hbm-headroom", type=float, default=DEFAULT_HBM_HEADROOM, dest="hbm_headroom", metavar="F",
                   help="--search: fraction of a device's HBM a pick should leave free; candidates above "
                        f"(1 - F) x HBM are marked '!' (default {DEFAULT_HBM_HEADROOM:g}, an assumption: XLA "
                        "holds HBM beside the program but publishes no size)")
    p.add_argument("--time-limit", type=float, default=None, dest="time_limit", metavar="SECONDS",
                   help="--search: stop after SECONDS and rank what was found (said in the header and in "
                        "--json's complete/stopped); Ctrl-C likewise prints the best so far, then exits 130")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="--search: worker processes, each taking whole tensor sizes (default: the number of "
                        "CPUs; 1 = in this process); the ranking is the same whatever N, the workers share the "
                        "search's memory bound on collective plans")
    add_flag(p, "--progress", default=None,
             help="--search: a progress line on stderr every 2 s (default: when stderr is a terminal)")
    # --search ranks every remat mode unless one is given (plan's table: none, as before)
    p.set_defaults(remat=None)
    return p


def run(args):
    from .maxtext_options import apply_maxtext, report_maxtext, with_maxtext_lines
    from .options import mesh_placement

    apply_maxtext(args, search=args.search)  # --search: the keys the run gives are its fixed part
    placement = mesh_placement(args)
    if len(getattr(args, "topologies", None) or ()) > 1 and not args.search:
        from ..inputs.errors import ConfigError

        raise ConfigError("is given more than once: only plan --search compares slices", key_path="-t",
                          value=", ".join(args.topologies))
    if args.search:
        from .plan_search import run_search

        return run_search(args, placement)
    if args.remat is None:
        args.remat = "none"
    if placement.dcn_mesh is not None:
        args.slices = placement.slices
    report = build_report(args)
    if placement.mesh is not None:
        report["mesh"] = _mesh_report(args, placement)
    if args.json:
        print(dumps_strict(report_maxtext(report, args), indent=1, default=float))
    else:
        print(with_maxtext_lines(_text(report), args))
        hint = _megacore_line(args)
        if hint:
            print(hint)
    return 0


def _megacore_line(args):
    """The megacore hint (:func:`wus_sim.hardware.topology_files.megacore_hint`) for the slice run."""
    from ..hardware.multislice import load_multislice
    from ..hardware.topology_files import megacore_hint

    topology, _ = load_multislice(args.topology, slices=args.slices, megacore=args.megacore)
    hint = megacore_hint(topology)
    return f"  note: {hint}" if hint else None


def _mesh_report(args, placement):
    """Where each axis of ``--mesh`` lies on the slice and which devices form group 0 of each."""
    from ..hardware.topology_files import load_topology
    from ..model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too
    from ..training.parallelism.context_parallel import check_context_mesh
    from ..training.parallelism.expert_parallel import check_expert_mesh
    from ..training.parallelism.pipeline_parallel import check_pipeline_mesh
    from .options import placement_option_errors
    from ..training.parallelism.tensor_parallel import check_tensor_heads
    from .step_mesh import layout_report, mesh_option_errors

    with mesh_option_errors(), placement_option_errors():  # what step refuses, plan refuses: a tensor axis
        workload = load_workload(args.workload)  # beyond the heads, experts, a pipeline that cannot be
        check_tensor_heads(workload, placement.mesh)
        check_expert_mesh(workload, placement.mesh, placement.dcn_mesh)
        check_context_mesh(workload, placement.mesh)
        check_pipeline_mesh(workload, placement.mesh, placement.dcn_mesh, args)
    return layout_report(load_topology(args.topology, megacore=args.megacore), placement.mesh,
                         getattr(args, "custom_mesh", None))


def build_report(args):
    """The plan report as a JSON-ready dict (what ``--json`` prints)."""
    from ..model.calibration import load_calibration
    from ..model.compute import memory_bound_time_s
    from ..model.layer_stack import check_remat_policy, layer_times_under
    from ..model.calibration import matrix_efficiency
    from ..model.ops.precision import precision_line
    from .options import placement_option_errors
    from ..inputs.errors import ConfigError
    from ..model.memory import memory_both
    from ..training.update.planner import DEFAULT_BUCKET_BYTES, DEFAULT_MAX_PADDING_RATIO, plan
    from ..training.update.strategies import STRATEGIES, step_work
    from ..hardware.multislice import load_multislice, planning_topology
    from ..inputs.units import MiB
    from ..inputs.units import grad_dtype_bytes
    from ..model.workload import resolve_batch, resolve_replicas
    from ..model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too

    workload = load_workload(args.workload)
    with placement_option_errors():
        topology, multislice = load_multislice(args.topology, slices=args.slices, megacore=args.megacore)
    config = workload.config_for(topology.name)
    replicas = args.replicas
    if args.spatial_ways is not None:
        if replicas is not None:
            raise ConfigError("give --replicas or --spatial-ways, not both", key_path="--spatial-ways",
                              value=args.spatial_ways)
        if topology.num_replicas % args.spatial_ways:
            raise ConfigError(f"must divide the {topology.num_replicas} cores of {topology.name}",
                              key_path="--spatial-ways", value=args.spatial_ways)
        replicas = topology.num_replicas // args.spatial_ways
    replicas = resolve_replicas(workload, topology, replicas)
    # Over several slices, the plan step runs by default: shards over every replica of every slice.
    grid = topology if multislice is None else planning_topology(multislice)
    if multislice is not None:
        replicas *= multislice.slices
    batch = resolve_batch(workload, topology, replicas, per_replica_batch=args.per_replica_batch,
                          global_batch=args.global_batch)
    bucket_bytes = int(args.bucket_MiB * MiB) if args.bucket_MiB is not None else DEFAULT_BUCKET_BYTES
    optimizer = args.optimizer or workload.default_optimizer
    p = plan(workload, grid, optimizer, replicas=replicas, bucket_bytes=bucket_bytes,
             replicate_below_elements=args.replicate_below,
             max_padding_ratio=(DEFAULT_MAX_PADDING_RATIO if args.max_padding_ratio is None
                                else args.max_padding_ratio),
             grad_bytes=grad_dtype_bytes(args.grad_dtype) if args.grad_dtype else None)
    replica = min(1, p.replicas - 1) if args.replica is None else args.replica  # 1 replica: 0, never an error
    if not 0 <= replica < p.replicas:
        raise ConfigError(f"must be in 0..{p.replicas - 1}", key_path="--replica", value=replica)

    calibration = load_calibration(args.calibration)  # default: the shipped one, as every other command
    from .options import software_stack_value

    stack = software_stack_value(args)
    params = calibration.compute_params(stack=stack)
    with placement_option_errors():  # an int8 run on a chip without an int8 peak: named by --quantization
        check_remat_policy(args.remat, args.remat_policy)
        memory = memory_both(p, batch, check=args.check, strategies=STRATEGIES, remat=args.remat,
                             activation_model=args.activation_model, remat_policy=args.remat_policy)
        from ..model.layer_stack import moe_device_view

        computed = moe_device_view(workload, 1, args.capacity_factor, args.expert_load_imbalance)  # padded expert buffers
        layers = layer_times_under(computed, topology, batch, params, spatial_ways=p.spatial_ways, remat=args.remat,
                                   remat_policy=args.remat_policy, quantization=args.quantization)
    fwd, bwd = float(layers.forward_s.sum()), float(layers.backward_s.sum())
    strategies = {}
    for s in STRATEGIES:
        work = step_work(p, s)
        strategies[s] = {**work.summary(),
                         "update_time_s": memory_bound_time_s(work.update.bytes_moved, work.update.flops,
                                                              topology, params)}
    report = {"schema_version": PLAN_JSON_SCHEMA_VERSION, **p.to_dict(replica=replica)}
    for key in ("grad", "weight", "slot", "gather"):
        report[f"{key}_bytes_per_element"] = report[f"{key}_bytes"]
    for e in report["extra_reductions"]:
        e["bytes_per_element"] = e["dtype_bytes"]
    report.update(
        per_replica_batch=batch,
        batch_source=("--per-replica-batch" if args.per_replica_batch is not None else
                      "--global-batch" if args.global_batch is not None else
                      f"MLPerf v0.6 run on {topology.name}" if config else "workload default"),
        mlperf_config=vars(config).copy() if config else None,
        compute={"fwd_time_s": fwd, "bwd_time_s": bwd, "params": params.to_dict(), "remat": args.remat,
                 "remat_policy": args.remat_policy,
                 "quantization": args.quantization,
                 "quantization_note": None if args.quantization == "none" else
                 precision_line(topology, args.quantization, matrix_efficiency(params), calibration.id)},
        calibration=calibration.id,
        software_stack=stack or calibration.default_stack,
        multislice=None if multislice is None else multislice.to_dict(),
        strategies=strategies,
        memory_bytes={s: _memory_bytes(m.to_dict()) for s, m in memory.items()},
        memory_fits={s: m.fits for s, m in memory.items()},
        memory={s: m.to_dict() for s, m in memory.items()},
        deprecated_aliases=dict(_ALIASES),
    )
    from .cost_lines import add_plan_costs

    add_plan_costs(report, args, topology, multislice, workload)
    return report


PLAN_JSON_SCHEMA_VERSION = 1
"""Version of ``plan --json``'s shape; its schema is ``wus_sim/schemas/plan.v{N}.json``."""

_ALIASES = {
    "grad_bytes": "grad_bytes_per_element", "weight_bytes": "weight_bytes_per_element",
    "slot_bytes": "slot_bytes_per_element", "gather_bytes": "gather_bytes_per_element",
    "extra_reductions[].dtype_bytes": "extra_reductions[].bytes_per_element",
    "memory": "memory_bytes (byte parts), memory_fits, per_replica_batch",
}
"""Keys of the old shape kept for one release (0.2 drops them) -> what replaces them. ``grad_bytes``
here was bytes per element, while ``step --json``'s ``grad_nbytes`` is a total: the new names say which."""

_MEMORY_PARTS = ("weights", "gradients", "slots", "padding", "activations", "collective_buffers", "peak",
                 "capacity")


def _memory_bytes(m):
    """One strategy's memory in bytes: the parts of the peak, the peak, the capacity and the details."""
    return {**{k: m[k] for k in _MEMORY_PARTS}, "details": dict(m["details"])}


def _text(r):
    from ..inputs.units import format_bytes, format_time

    s, m, fit = r["strategies"], r["memory_bytes"], r["memory_fits"]
    rep, sh = s["replicated"], s["sharded"]
    f = r["formats"]
    out = [
        f"plan: {r['workload']} with {r['optimizer']} on {r['topology']}: {r['replicas']} replicas"
        + (f" x {r['spatial_ways']} cores each" if r["spatial_ways"] > 1 else "")
        + (f" in {ms['slices']} slices over the data-center network, the update sharded across them"
           if (ms := r.get("multislice")) else "")
        + f", per-replica batch {r['per_replica_batch']} ({r['batch_source']})",
        f"  parameters {r['params']:,} in {r['tensors']} tensors; formatted for sharding "
        f"{r['padded_params']:,} (padding {r['padding_elements']:,} elements, "
        f"{format_bytes(r['padding_bytes'])} of weights + gradients)",
        "  formats: " + ", ".join(f"{k} {v}" for k, v in f.items() if v)
        + f"  (replicated: {r['replicated_elements']:,} elements; tensors under "
          f"{r['replicate_below_elements']:,} elements or padded > {r['max_padding_ratio']:g}x stay whole)",
        f"  buckets: {len(r['buckets'])} "
        f"(closed at {format_bytes(r['bucket_bytes'])} of gradients, in backward order; "
        f"gradients {r['grad_bytes_per_element']} B, gathered weights {r['gather_bytes_per_element']} B "
        f"per element); the replicated update all-reduces in {len(r['allreduce_buckets'])} of its own "
        "(every tensor at its own size: no shard format)",
    ]
    if r["extra_reductions"]:
        out.append("  extra all-reduces of the sharded update: " + "; ".join(
            f"{e['what']} ({e['values']:,} values"
            + (f" from {e['tensors']} tensors" if e["scope"] == "per_tensor" else ", once per step")
            + f", {format_bytes(e['nbytes'])})" for e in r["extra_reductions"]))
    else:
        out.append("  extra all-reduces of the sharded update: none (elementwise optimizer)")
    own = r.get("ownership") or {}
    if own.get("buckets"):
        first = own["buckets"][0]
        phases = ", ".join(f"{ph['phase']}/{ph['group_size']} [{ph['start']:,}, {ph['stop']:,})"
                           for ph in first["phases"])
        out.append(f"  replica {own['replica']} owns shard {own['shard']} of every sharded tensor; "
                   f"in bucket {first['bucket']} after each reduce-scatter phase: {phases}")
    c = r["compute"]
    out.append(f"  compute per replica: forward {format_time(c['fwd_time_s'])}, backward "
               f"{format_time(c['bwd_time_s'])} (MXU efficiency {c['params']['mxu_efficiency']:.3g}, calibration {r['calibration']}"
               f"; remat {c['remat']})")
    if c["quantization_note"]:
        out.append("  " + c["quantization_note"])
    out.append("")
    rows = [
        ("gradient collectives", lambda x: f"{x['grad_collectives']} ({format_bytes(x['grad_nbytes'])})"),
        ("extra all-reduces", lambda x: f"{x['extra_allreduces']} ({format_bytes(x['extra_nbytes'])})"),
        ("weight all-gathers", lambda x: f"{x['weight_allgathers']} ({format_bytes(x['gather_nbytes'])})"),
        ("update elements", lambda x: f"{x['update_elements']:,}"),
        ("update HBM traffic", lambda x: format_bytes(x["update_bytes"])),
        ("update time", lambda x: format_time(x["update_time_s"])),
    ]
    mem_rows = [("weights", "weights"), ("gradients", "gradients"), ("optimizer slots", "slots"),
                ("  of which padding", "padding"), ("activations", "activations"),
                ("collective buffers", "collective_buffers"), ("peak", "peak")]
    width = 24
    names = list(s)
    out.append(f"  {'per replica':<{width}}" + "".join(f"{n:>22}" for n in names))
    for label, fn in rows:
        out.append(f"  {label:<{width}}" + "".join(f"{fn(s[n]):>22}" for n in names))
    for label, key in mem_rows:
        out.append(f"  {label:<{width}}" + "".join(f"{format_bytes(m[n][key]):>22}" for n in names))
    cap = m["replicated"]["capacity"]
    fits = lambda s: "fits" if fit[s] else f"over by {format_bytes(m[s]['peak'] - m[s]['capacity'])}"
    hbm = "HBM per replica " + format_bytes(cap)
    out.append(f"  {hbm:<{width}}" + "".join(f"{fits(n):>22}" for n in names))
    if r.get("price"):
        from .cost_lines import plan_cost_lines

        out += plan_cost_lines(r, names, width)
    saved = m["replicated"]["peak"] - m["sharded"]["peak"]
    ratio = rep["update_time_s"] / sh["update_time_s"] if sh["update_time_s"] else float("inf")
    out.append("")
    out.append(f"  sharding the update cuts its time {ratio:,.0f}x ({format_time(rep['update_time_s'])} -> "
               f"{format_time(sh['update_time_s'])}; forward + backward take "
               f"{format_time(c['fwd_time_s'] + c['bwd_time_s'])}) and peak memory by {format_bytes(saved)}.")
    for note in r.get("notes", []):
        out.append(f"  note: {note}")
    if r.get("mesh"):
        from .step_mesh import layout_lines

        out += layout_lines(r["mesh"])
        out.append("  (the plan above is pure data parallelism's; `step --mesh` simulates the mesh)")
    return "\n".join(out)
