"""Numeric command-line options: each checked by the same rule table as experiment files.

An option whose destination is a point parameter (``--link-GBps`` -> ``link_GBps``,
``--steps``, ``--bucket-MiB``, ...) is checked by that parameter's entry in
:data:`wus_sim.training.parameters.params.POINT_KEYS`, so the command line and YAML accept exactly
the same values; options that are not point parameters have their range here.
:func:`check_options` runs on every parsed command line before the subcommand does.
"""

import argparse
from contextlib import contextmanager
from dataclasses import replace

from ..inputs.errors import ConfigError
from ..training.parameters.params import POINT_KEYS, Param, check_param, check_point_value
from ..inputs.limits import MAX_CHUNKS
from ..model.layer_stack import REMAT_POLICIES as REMAT_POLICY_NAMES

__all__ = [
    "OPTION_PARAMS", "check_options", "FAULT_KEYS", "add_fault_options", "fault_values",
    "fault_option_errors", "JSON_HELP", "add_json_option", "add_flag",
    "PLACEMENT_KEYS", "add_placement_options", "placement_option_errors", "add_mesh_options", "mesh_placement",
    "fill_mesh_options",
]

OPTION_PARAMS = {p.name: p for p in (
    Param("chunks", "int", minimum=1, maximum=MAX_CHUNKS, nullable=False,
          meaning="Pipelined pieces per collective step."),
    Param("jobs", "int", minimum=1, maximum=1024, meaning="Worker processes."),
    Param("limit", "int", minimum=1, maximum=2**62, meaning="First N points of the sweep."),
    Param("scheduler_timeout", "number", positive=True, maximum=600, meaning="Seconds to reach a Dask scheduler."),
    Param("repeat", "int", minimum=1, maximum=1000, nullable=False, meaning="Timed runs per benchmark case."),
    Param("replicas", "int", minimum=1, maximum=2**17, meaning="Data-parallel replicas."),
    Param("replica", "int", minimum=0, maximum=2**17, nullable=False, meaning="Replica whose shard is shown."),
    Param("replicate_below", "int", minimum=0, maximum=2**40, meaning="Tensors below this stay whole."),
    Param("max_padding_ratio", "number", minimum=0, maximum=1e6, meaning="Largest padding ratio."),
    # --price-per-chip-hour: point key price_usd_per_chip_hour's rule under the option's own name
    replace(POINT_KEYS["price_usd_per_chip_hour"], name="price_per_chip_hour"),
)}
"""Ranges of numeric options that are not point parameters."""


PATH_OPTIONS = ("out", "trace", "measured", "calibration", "path", "scheduler")
"""Options that name a file or folder: an empty one is refused (``--out ""`` wrote to the default)."""


def check_options(args):
    """Check every numeric option of *args* (an argparse Namespace) against its declared range;
    store the normalised value back. Raises ConfigError naming the option."""
    for dest, value in vars(args).items():
        if dest in PATH_OPTIONS and isinstance(value, str) and not value:  # '' is no name, not "the default"
            raise ConfigError("is not a file or folder name (it is empty)",
                              key_path="PATH" if dest == "path" else "--" + dest.replace("_", "-"),
                              value="")
        param = POINT_KEYS.get(dest) or OPTION_PARAMS.get(dest)
        if param is None or param.kind not in ("int", "number") or value is None:
            continue
        setattr(args, dest, check_param(param, value, key_path="--" + dest.replace("_", "-"), option=True))


JSON_HELP = "print one JSON document instead of text"
"""The help of every command's ``--json`` (one wording; each command's schema is in its module)."""


def add_json_option(parser):
    """``--json/--no-json`` with :data:`JSON_HELP`."""
    add_flag(parser, "--json", help=JSON_HELP)


def add_flag(parser, *names, default=False, help, **kwargs):
    """A boolean option, always paired: ``--x`` and ``--no-x`` (the last one given wins), so a
    script can state either value whatever the default."""
    parser.add_argument(*names, action=argparse.BooleanOptionalAction, default=default, help=help, **kwargs)


FAULT_KEYS = ("failed_links", "slow_links", "seed")
"""Point keys of failed and slow ICI cables, taken as ``--failed-links``, ``--slow-links``, ``--seed``."""


def _option(key):
    return "--" + key.replace("_", "-")


def add_fault_options(parser):
    """The failed/slow cable options of ``step`` and ``collective`` (point keys :data:`FAULT_KEYS`)."""
    parser.add_argument("--failed-links", dest="failed_links", default=None, metavar="K|LIST",
                        help="cables that are down, both directions: K chosen at random (see --seed), or "
                             "comma-separated CHIP+AXIS such as 12+x,40-y (chip ids row-major, axis 0 fastest); "
                             "routes detour around them")
    parser.add_argument("--slow-links", dest="slow_links", default=None, metavar="LIST:FACTOR",
                        help="cables running at their bandwidth / FACTOR, both directions: LIST as for "
                             "--failed-links, or K:FACTOR for K random ones (e.g. 12+x:4, 3:2)")
    parser.add_argument("--seed", type=int, default=None, metavar="S",
                        help="seed of the random choice of K failed or slow cables (default 0)")


def fault_values(args):
    """``{point key: checked value}`` of the fault options (errors name the option)."""
    return {key: check_point_value(key, getattr(args, key), key_path=_option(key)) for key in FAULT_KEYS}


@contextmanager
def fault_option_errors():
    """Re-raise a fault's ConfigError under its option's name instead of its point key's."""
    try:
        yield
    except ConfigError as exc:
        if exc.key_path not in FAULT_KEYS:
            raise
        raise ConfigError(exc.rule, key_path=_option(exc.key_path), value=exc.value) from None


def add_software_stack_option(parser):
    """``--software-stack NAME`` of ``step`` and ``plan`` (point key ``software_stack``)."""
    parser.add_argument("--software-stack", dest="software_stack", default=None, metavar="NAME",
                        help="software stack whose fitted fixed costs (per op, per step) apply, e.g. "
                             "tf1-tpuestimator-2019 (default: the calibration's default stack); a stack the "
                             "calibration never measured runs at the default's costs with an extrapolated band")


def software_stack_value(args):
    """The checked ``--software-stack`` (errors name the option), or None."""
    value = getattr(args, "software_stack", None)
    return None if value is None else check_point_value("software_stack", value, key_path="--software-stack")


PLACEMENT_KEYS = ("megacore", "spatial_ways", "remat", "quantization", "remat_policy", "collective_matmul",
                  "capacity_factor", "expert_load_imbalance", "pipeline_microbatches", "pipeline_layers_per_stage",
                  "pipeline_schedule")
"""Point keys of how a run places replicas, keeps activations and multiplies: ``--megacore``,
``--spatial-ways``, ``--remat``, ``--quantization``, ``--remat-policy``, ``--collective-matmul``,
``--capacity-factor``, ``--expert-load-imbalance``, ``--pipeline-microbatches``,
``--pipeline-layers-per-stage``, ``--pipeline-schedule``."""


def add_placement_options(parser):
    """``--megacore``, ``--spatial-ways K``, ``--remat`` and ``--quantization`` of ``step`` and ``plan`` (point keys :data:`PLACEMENT_KEYS`)."""
    from ..training.parameters.params import POINT_KEYS

    add_flag(parser, "--megacore", default=None,
             help="TPU v4/v5p: one replica per chip over both its TensorCores, as JAX counts devices (the default "
                  "on v4 and v5p: chips.yaml megacore); --no-megacore: one replica per TensorCore")
    parser.add_argument("--spatial-ways", type=int, dest="spatial_ways", default=None, metavar="K",
                        help="cores each replica is spatially partitioned over: replicas = cores / K (default: the "
                             "MLPerf run's on that slice, else 1)")
    parser.add_argument("--activation-model", dest="activation_model", choices=POINT_KEYS["activation_model"].choices,
                        default=POINT_KEYS["activation_model"].default,
                        help="activation memory: xla (default: what the TPU compiler keeps after fusion) or "
                             "unfused (every elementwise output kept, Korthikanti et al. 2022's GPU count)")
    parser.add_argument("--remat", choices=POINT_KEYS["remat"].choices, default=POINT_KEYS["remat"].default,
                        help="rematerialisation: none (keep every activation), selective (keep each layer's input "
                             "and matmul outputs, recompute elementwise and attention-score work), layer (keep each "
                             "layer's input, recompute it in backward; MaxText's full) or full (every sqrt(L)-th "
                             "layer's input); default none")
    parser.add_argument("--remat-policy", dest="remat_policy", default=None, metavar="NAME",
                        help="MaxText's remat_policy by name (" + ", ".join(REMAT_POLICY_NAMES)
                             + ", or custom:NAME=PLACE,... with PLACE device, offload or remat): what each "
                             "transformer block saves, offloads to host memory or recomputes; MaxText's full is "
                             "--remat layer; not with --remat (default: --remat decides)")
    add_flag(parser, "--collective-matmul", dest="collective_matmul", default=POINT_KEYS["collective_matmul"].default,
             help="with a tensor mesh axis: overlap each tensor-parallel collective with the matmul it feeds or "
                  "follows, decomposed as XLA's collective matmul (default); --no-collective-matmul: each one "
                  "whole on the critical path")
    parser.add_argument("--quantization", choices=POINT_KEYS["quantization"].choices,
                        default=POINT_KEYS["quantization"].default,
                        help="matmul precision: none (bf16) or int8 (weight matmuls at the chip's int8 peak, as "
                             "AQT-quantized training runs them); default none")
    parser.add_argument("--capacity-factor", dest="capacity_factor", type=float,
                        default=POINT_KEYS["capacity_factor"].default, metavar="F",
                        help="mixture of experts: MaxText's capacity_factor; <= 0 dropless (default -1), > 0 each "
                             "expert's token buffer is its even share x F (its matmuls and all-to-alls scale by F)")
    parser.add_argument("--expert-load-imbalance", dest="expert_load_imbalance", type=float,
                        default=POINT_KEYS["expert_load_imbalance"].default, metavar="F",
                        help="mixture of experts, dropless, with an expert mesh axis: the busiest expert's tokens "
                             "over its even share (default 1: even routing, an assumption)")
    parser.add_argument("--pipeline-microbatches", dest="pipeline_microbatches", type=int,
                        default=POINT_KEYS["pipeline_microbatches"].default, metavar="M",
                        help="with a pipeline mesh axis: MaxText's num_pipeline_microbatches, a multiple of the "
                             "stages dividing a data-parallel group's batch (default: the stages, MaxText's)")
    parser.add_argument("--pipeline-layers-per-stage", dest="pipeline_layers_per_stage", type=int,
                        default=POINT_KEYS["pipeline_layers_per_stage"].default, metavar="N",
                        help="circular pipeline: MaxText's num_layers_per_pipeline_stage, blocks a stage runs a pass "
                             "(default 1, MaxText's: repeats = blocks / (stages x N))")
    parser.add_argument("--pipeline-schedule", dest="pipeline_schedule",
                        choices=POINT_KEYS["pipeline_schedule"].choices, default=POINT_KEYS["pipeline_schedule"].default,
                        help="with a pipeline mesh axis: circular (MaxText's, default), gpipe or 1f1b: the bubble "
                             "and the microbatches in flight (docs/mesh.md)")


@contextmanager
def placement_option_errors():
    """Re-raise a placement key's ConfigError under its option's name."""
    try:
        yield
    except ConfigError as exc:
        if exc.key_path not in PLACEMENT_KEYS or exc.file:
            raise
        raise ConfigError(exc.rule, key_path=_option(exc.key_path), value=exc.value) from None


def add_mesh_options(parser):
    """``--mesh`` and ``--dcn-mesh`` of ``step`` and ``plan`` (point keys ``mesh``, ``dcn_mesh``)."""
    parser.add_argument("--mesh", default=None, metavar="data=D,fsdp=F,tensor=T,expert=E",
                        help="device mesh in a slice: data, fsdp, context, tensor and expert axis sizes whose "
                             "product is the slice's devices (chips with --megacore, TensorCores otherwise); missing "
                             "axes are 1, one axis may be -1: the rest of the devices, as MaxText's -1 (default: data "
                             "over every device); context splits each sequence, expert a mixture of experts' routed "
                             "experts. See docs/mesh.md")
    parser.add_argument("--dcn-mesh", dest="dcn_mesh", default=None, metavar="data=S[,fsdp=S2,expert=S3]",
                        help="mesh across slices over the data-center network; its product is the number of "
                             "slices (sets --slices; with an axis of -1, the rest of --slices)")


def mesh_placement(args):
    """The :class:`~wus_sim.hardware.mesh.Placement` of *args* (errors name the options); an axis
    of size -1 in ``--mesh`` or ``--dcn-mesh`` is filled first (:func:`fill_mesh_options`)."""
    from ..hardware.mesh import Placement

    resolve_megacore(args)
    fill_mesh_options(args)
    try:
        return Placement(megacore=bool(getattr(args, "megacore", False)), spatial_ways=args.spatial_ways,
                         slices=getattr(args, "slices", None), mesh=args.mesh, dcn_mesh=args.dcn_mesh)
    except ConfigError as exc:
        path = exc.key_path or ""
        head, _, rest = path.partition(".")
        if head in ("mesh", "dcn_mesh", "spatial_ways", "slices") and not exc.file:
            raise ConfigError(exc.rule, key_path=_option(head) + (f".{rest}" if rest else ""),
                              value=exc.value) from None
        raise


def resolve_megacore(args):
    """``--megacore`` / ``--no-megacore`` as given, else the chip's default written into *args*: a chip
    on TPU v4 and v5p (chips.yaml ``megacore``, as JAX counts devices), a TensorCore elsewhere. Left
    ``None`` (each slice's chip decides when it is loaded) for ``plan --search`` over several slices,
    and for a slice that does not load (the command says why when it loads it)."""
    if not hasattr(args, "megacore") or args.megacore is not None:
        return
    if len(set(getattr(args, "topologies", None) or ())) > 1 or getattr(args, "cores_per_chip", None) is not None:
        return
    from ..hardware.multislice import load_multislice
    from ..hardware.topology_files import chip_megacore
    from ..inputs.errors import WusError

    try:
        topology, _ = load_multislice(args.topology, slices=getattr(args, "slices", None))
    except (WusError, OSError):
        return
    args.megacore = chip_megacore(topology)


def fill_mesh_options(args):
    """``--mesh`` and ``--dcn-mesh`` with an axis of size -1 (MaxText's "the rest") filled against
    the slice ``--topology`` names: its devices (chips with ``--megacore``) within it, the slices
    (``--slices``, else the topology file's) across; written back with every axis they name."""
    from ..hardware.mesh_spec import DCN_AXES, has_fill, fill_mesh

    mesh, dcn = getattr(args, "mesh", None), getattr(args, "dcn_mesh", None)
    if not (has_fill(mesh) or has_fill(dcn)):
        return
    from ..hardware.multislice import load_multislice

    topology, ms = load_multislice(args.topology, slices=getattr(args, "slices", None),
                                   megacore=bool(getattr(args, "megacore", False)))
    if has_fill(mesh):
        args.mesh = _named_text(fill_mesh(mesh, topology.num_replicas, key_path="--mesh"), mesh)
    if has_fill(dcn):
        args.dcn_mesh = _named_text(fill_mesh(dcn, 1 if ms is None else ms.slices, key_path="--dcn-mesh",
                                              axes=DCN_AXES), dcn)


def _named_text(mesh, text):
    """*mesh*'s sizes of the axes *text* names, as text (a search fixes the axes named)."""
    names = [item.split("=", 1)[0].strip() for item in text.split(",")]
    return ",".join(f"{a}={getattr(mesh, a)}" for a in names)
