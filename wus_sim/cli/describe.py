"""``wus-sim describe workload|optimizer|topology NAME [--json]``: what a workload, an optimizer or a slice is.

``describe workload`` prints parameters, tensors, a size histogram, the small-tensor
count, FLOPs, activation estimate and the MLPerf v0.6 TPU runs; ``--json`` the whole
profile (at least ``params`` and ``tensors``). ``describe optimizer`` prints the static
analysis of the optimizer program (``--json``: its ``to_dict()``). ``describe topology``
prints the slice's shape, wraparound per axis, chip, core and link counts and every link
figure with its source, and the multislice a file declares (``--json``: ``Topology.to_dict()``
and ``multislice``, ``Multislice.to_dict()`` or null). Without NAME, the known names
are listed.
"""


from ..inputs.strict_json import dumps_strict
from ..inputs.units import GRAD_DTYPE_SPELLINGS
from .options import add_flag, add_json_option

__all__ = [
    "add_parser", "run", "workload_text", "topology_text", "TOPOLOGY_JSON_SCHEMA_VERSION",
    "DESCRIBE_JSON_SCHEMA_VERSION",
]

TOPOLOGY_JSON_SCHEMA_VERSION = 1
"""Version of ``describe topology --json``'s shape; its schema is
``wus_sim/schemas/describe-topology.v{N}.json``."""
DESCRIBE_JSON_SCHEMA_VERSION = 1
"""Version of ``describe workload|optimizer --json``'s shapes; schemas
``wus_sim/schemas/describe-workload.v{N}.json`` and ``describe-optimizer.v{N}.json``."""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "describe", help="describe a workload, an optimizer or a topology",
        description="Describe a workload profile, an optimizer's static analysis or a slice's "
                    "shape and link figures with their sources.")
    p.add_argument("kind", choices=("workload", "optimizer", "topology"), help="what to describe")
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="shipped name or path to a YAML file (omit to list the known names)")
    add_json_option(p)
    p.add_argument("--grad-dtype", choices=GRAD_DTYPE_SPELLINGS, default=None,
                   help="gradient dtype (default: the workload's; optimizer: float32)")
    p.add_argument("--mesh", default=None, metavar="data=D,fsdp=F,tensor=T",
                   help="topology: where this device mesh's axes lie and which devices form one group of each "
                        "(docs/mesh.md)")
    add_flag(p, "--megacore", default=None,
             help="topology: one device per chip over both TensorCores (default on v4 and v5p, as JAX counts "
                  "devices); --no-megacore: one per TensorCore")
    return p


def run(args):
    if args.mesh is not None and args.kind != "topology":  # an option that would do nothing is refused
        from ..hardware.mesh import parse_mesh
        from ..inputs.errors import ConfigError

        try:
            parse_mesh(args.mesh)
        except ConfigError as exc:  # a bad mesh says what is wrong with it first
            raise exc.at("--" + (exc.key_path or "mesh")) from None
        raise ConfigError(f"applies to describe topology only (where the mesh's axes lie), not {args.kind}",
                          key_path="--mesh", value=args.mesh)
    if args.kind == "workload":
        return _workload(args)
    if args.kind == "topology":
        return _topology(args)
    return _optimizer(args)


def _names(names, args):
    """Without a name: the known names, one a line, or with ``--json`` a JSON array (schema names.v1.json)."""
    print(dumps_strict(list(names)) if args.json else "\n".join(names))
    return 0


def _topology(args):
    from ..hardware.multislice import load_multislice
    from ..hardware.topology_files import known_topologies

    if not args.name:
        return _names(known_topologies(), args)
    # Through the multislice loader, so a file's multislice section is checked and shown (the
    # slice alone would say 256 replicas where a step on tpu-v5e-256x2 runs 512).
    topology, multislice = load_multislice(args.name, megacore=args.megacore)
    d = {**topology.to_dict(), "multislice": None if multislice is None else multislice.to_dict()}
    mesh = None
    if args.mesh is not None:
        from ..hardware.mesh import parse_mesh
        from ..inputs.errors import ConfigError
        from .step_mesh import layout_report

        try:
            asked = parse_mesh(args.mesh)
        except ConfigError as exc:  # mesh or mesh.AXIS
            raise ConfigError(exc.rule, key_path="--" + (exc.key_path or "mesh"), value=exc.value) from None
        mesh = layout_report(topology, asked)
    if args.json:
        print(dumps_strict({"schema_version": TOPOLOGY_JSON_SCHEMA_VERSION, **d,
                          **({"mesh": mesh} if mesh else {})}, indent=1))
    else:
        from ..hardware.topology_files import megacore_hint

        print(topology_text(d))
        hint = megacore_hint(topology)
        if hint:  # v4/v5p one replica per TensorCore: JAX counts a chip as one device (megacore)
            print(f"  note: {hint}")
        if mesh:
            from .step_mesh import layout_lines

            print("\n".join(layout_lines(mesh)))
    return 0


def _workload(args):
    from ..inputs.units import grad_dtype_bytes
    from ..model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too
    from ..model.workload_files import known_workloads

    if not args.name:
        return _names(known_workloads(), args)
    w = load_workload(args.name)
    if args.grad_dtype:
        w = w.with_grad_bytes(grad_dtype_bytes(args.grad_dtype))
    if args.json:
        print(dumps_strict({"schema_version": DESCRIBE_JSON_SCHEMA_VERSION, **w.to_dict()}, indent=1))
    else:
        print(workload_text(w))
    return 0


def _optimizer(args):
    from ..optimizers import analyse, describe_text, known_optimizers, known_prefixes
    from ..inputs.units import grad_dtype_bytes

    if not args.name:
        return _names(known_optimizers() + [f"+{p}" for p in known_prefixes()], args)
    grad_bytes = grad_dtype_bytes(args.grad_dtype) if args.grad_dtype else 4
    analysis = analyse(args.name, grad_bytes=grad_bytes)
    if args.json:
        print(dumps_strict({"schema_version": DESCRIBE_JSON_SCHEMA_VERSION, **analysis.to_dict()}, indent=1))
    else:
        print(describe_text(analysis))
    return 0


def workload_text(w):
    """The text summary of a workload."""
    from ..inputs.units import format_bytes
    from ..model.workload import SMALL_TENSOR_ELEMENTS

    small = w.small_tensors()
    out = [f"workload {w.name}: {w.description}",
           f"  parameters: {w.params:,} in {len(w.tensors)} tensors over {w.num_layers} layers "
           f"({format_bytes(w.params * w.weight_bytes)} of weights)",
           f"  small tensors (< {SMALL_TENSOR_ELEMENTS} elements): {len(small)} holding "
           f"{sum(t.size for t in small):,} elements",
           "  tensor sizes (elements):"]
    hist = w.size_histogram()
    width = max(len(str(h[2])) for h in hist)
    for lo, hi, count, elements in hist:
        bar = "#" * max(1, round(40 * count / len(w.tensors)))
        out.append(f"    [{lo:>11,} , {hi:>11,}) {count:>{width}} tensors {elements:>13,} elements  {bar}")
    biggest = max(w.tensors, key=lambda t: t.size)
    out.append(f"    largest: {biggest.name} {list(biggest.shape)} ({biggest.size:,})")
    out += [f"  forward FLOPs: {w.fwd_flops_per_unit:,.0f} per {w.flops_unit} x {w.units_per_example} "
            f"= {_gflop(w.fwd_flops_per_example)} GFLOP per {w.example_unit}",
            f"    counted: {w.flops_note}" if w.flops_note else "",
            (f"  attention scores: {len(w.attention)} layers, {w.layer_score_elements.sum():,.0f} score elements "
             f"per {w.example_unit} (softmax and dropout work, next to {w.layer_output_elements.sum():,.0f} "
             "layer outputs)") if w.attention else "",
            f"  activation memory: {format_bytes(w.activation_bytes_kept())} per {w.example_unit} as XLA keeps "
            f"it, {format_bytes(w.activation_bytes_per_example)} unfused (estimate; terms below)"]
    out += [f"    {t.what}: {t.elements:,} x {t.bytes_per_element:g} B" + (f" ({t.why})" if t.why else "")
            + (f"; XLA keeps {t.compiled_bytes_per_element:g} B" if t.compiled_bytes_per_element is not None else "")
            for t in w.activation_terms]
    out.append(f"  dtypes: weights {w.weight_bytes} B, gradients {w.grad_bytes} B, slots {w.slot_bytes} B, "
               f"activations {w.activation_bytes} B")
    out.append(f"  default optimizer: {w.default_optimizer}; default per-replica batch "
               f"{w.default_per_replica_batch}")
    if w.configs:
        out.append("  MLPerf v0.6 TPU runs (slice, global batch, replicas x spatial ways, per-replica batch):")
        for c in w.configs:
            note = f"  [{c.note}]" if c.note else ""
            out.append(f"    {c.topology:<12} {c.global_batch:>6}  {c.replicas:>5} x {c.spatial_ways}"
                       f"  {c.per_replica_batch:>4}{note}")
    else:
        out.append("  MLPerf v0.6 TPU runs: none (what-if profile)")
    if w.sources:
        out.append("  sources:")
        out += [f"    {k}: {v}" for k, v in w.sources.items()]
    return "\n".join(line for line in out if line)


def topology_text(d):
    """The text summary of a topology, from its :meth:`~wus_sim.hardware.topology.Topology.to_dict`."""
    src = d["sources"]
    wrap = ", ".join(f"axis {i}: {'wraps' if w else 'no wrap'}" for i, w in enumerate(d["wraparound"]))
    chip = d["chip"]
    links = ", ".join(f"{b:g}" for b in d["link_GBps"])
    ms = d.get("multislice")
    out = [f"topology {d['name']}: {d['description']}" if d["description"] else f"topology {d['name']}",
           f"  shape: {d['dims']} chips ({d['kind']}; {wrap})",
           f"  chips: {d['chips']:,} x {d['cores_per_chip']} cores = {d['cores']:,} cores "
           f"{'per slice ' if ms else ''}(one replica each); {d['directed_links']:,} directed ICI links",
           f"  chip {chip['name']}: {chip['peak_bf16_TFLOPs']:g} TFLOP/s bf16, {chip['hbm_GiB']:g} GiB HBM "
           f"at {chip['hbm_GBps']:g} GB/s",
           f"  link bandwidth per axis, one direction: {links} GB/s",
           f"  hop latency: {d['hop_latency_us']:g} us; on-chip core-to-core: {d['onchip_GBps']:g} GB/s"]
    if ms:
        out.append(f"  multislice: {ms['slices']} slices over the data-center network: {ms['chips']:,} chips, "
                   f"{ms['cores']:,} replicas; DCN {ms['dcn_GBps']:g} GB/s per chip, one direction, "
                   f"{ms['dcn_latency_us']:g} us per exchange")
        src = {**src, **{k: v for k, v in ms["sources"].items() if k not in src}}
    out.append("  sources:")
    out += [f"    {k}: {v}" for k, v in src.items()]
    return "\n".join(out)


def _gflop(flops):
    """GFLOP with three decimals, or three significant digits below 0.1 GFLOP: NCF's
    213,312 FLOPs per pair printed as '0.000 GFLOP'."""
    gflop = flops / 1e9
    return f"{gflop:,.3f}" if gflop >= 0.1 else f"{gflop:.3g}"
