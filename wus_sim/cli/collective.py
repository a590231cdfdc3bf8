"""``wus-sim collective``: simulate one collective on a topology and print its time.

Only argparse and the point-parameter table (its defaults) are imported at module level;
the topology, the collective API
and (when the SimPy engine runs) SimPy load inside :func:`run`. A uniform torus is answered
before this module loads (:mod:`wus_sim.cli.collective_lean`, whose table printer this module
shares).
"""

from ..inputs.strict_json import dumps_strict
from ..training.parameters.params import default_of
from .collective_lean import COLLECTIVE_JSON_SCHEMA_VERSION, print_text  # the lean path writes them too
from .options import add_fault_options, add_flag, add_json_option, fault_option_errors, fault_values

__all__ = ["add_parser", "run", "COLLECTIVE_JSON_SCHEMA_VERSION"]


# copies of wus_sim.collectives.OPS / ALGORITHMS for the help text, so that building the
# parser imports no numpy (tests/cli/test_cli_collective.py checks they match)
_OPS = ("reduce-scatter", "all-gather", "all-reduce", "all-to-all")
_ALGORITHMS = ("ring", "bidir-ring", "2d", "2d-split", "halving-doubling", "recursive-doubling")
_ALLTOALL_ALGORITHMS = ("ring", "2d", "2d-split", "pairwise", "bruck")


def add_parser(subparsers):
    p = subparsers.add_parser(
        "collective", help="simulate one reduce-scatter / all-gather / all-reduce / all-to-all",
        description="Simulate one collective on the slice --topology T (a shipped name, a YAML path, or "
                    "torus:32x32, mesh:8x8, torus:4x4x4). SIZE is S, the full unsharded buffer per replica, for "
                    "all four ops (all-to-all: each replica's whole send buffer, S/N to each member) "
                    "(67108864, 64MiB, 1GiB, 1.5GB; GB = 10^9 B, GiB = 2^30 B).")
    p.add_argument("--topology", "-t", metavar="T",
                   help="topology name (tpu-v3-2048), YAML path or inline spec (torus:32x32), as step and plan take it")
    # The positional of 0.1, kept for one release as an alias of --topology (0.2 drops it).
    p.add_argument("topology_positional", nargs="?", metavar="TOPOLOGY",
                   help="the same as --topology (the old spelling, kept for one release)")
    p.add_argument("--op", required=True, metavar="OP", help=f"one of {', '.join(_OPS)}")
    p.add_argument("--algorithm", default=None, metavar="ALG",
                   help=f"one of {', '.join(_ALGORITHMS)} (required); for all-to-all one of "
                        f"{', '.join(_ALLTOALL_ALGORITHMS)} (default: ring on one line, 2d-split over two or more "
                        "axes, pairwise over replicas that share chips or a replica list)")
    p.add_argument("--size", required=True, metavar="SIZE", help="S per replica, e.g. 64MiB")
    add_flag(p, "--bidirectional",
             help="run each ring phase in both directions, half the buffer each (--no-bidirectional: one "
                  "direction, the default here; step and experiments run both by default)")
    p.add_argument("--chunks", type=int, default=1, metavar="K", help="pipelined pieces per step (default 1)")
    p.add_argument("--engine", default="auto", metavar="NAME",
                   help="auto (default: the fast engine where no link is contended, else the window engine; "
                        "SimPy where a cut-through message crosses a link of zero latency), fast, window or simpy")
    p.add_argument("--routing", default=default_of("routing"), metavar="R",
                   help="cut-through (default: the head moves on at once, as packets do) or "
                        "store-and-forward (every hop receives the whole message before sending it on); "
                        "they differ only on multi-hop edges such as a mesh's folded rings")
    p.add_argument("--group", default="all", metavar="G",
                   help="all (default), x, y, z (every line along that axis at once), "
                        "or comma-separated replica ids (a ring in that order)")
    add_flag(p, "--reduce",
                   help="charge summing received data at the HBM bandwidth of one replica")
    p.add_argument("--link-GBps", type=float, default=None, metavar="F",
                   help="override the ICI bandwidth per link and direction, GB/s")
    p.add_argument("--hop-latency-us", type=float, default=None, metavar="F",
                   help="override the per-hop latency, microseconds")
    add_fault_options(p)
    add_json_option(p)
    return p


def _group(text, topology):
    """The ``--group`` of the command line. Stricter than the API's ``group``: the API's axis
    numbers do not exist here (``--group 1`` is replica 1), so its message, which offers them,
    is not shown; and a group of one replica, which moves nothing in 0 s, is refused, since
    ``--group 1`` for the second axis is the likely mistake."""
    from ..inputs.errors import ConfigError

    text = text.strip()
    axes = tuple("xyz"[: topology.ndim])
    rule = f"must be all, {', '.join(axes)} or at least 2 comma-separated replica ids"
    if text.lower() == "all" or text.lower() in axes:
        return text.lower()
    try:
        group = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(rule, key_path="--group", value=text) from None
    if len(group) < 2:
        why = " (a group of one replica moves nothing)" if group else ""
        raise ConfigError(rule + why, key_path="--group", value=text)
    return group


def _topology(args):
    """The slice: ``--topology``, or the positional alias; exactly one of them."""
    from ..inputs.errors import ConfigError

    if args.topology is not None and args.topology_positional is not None:
        raise ConfigError("is given twice, as --topology and as the positional TOPOLOGY; give it once, "
                          "as --topology", key_path="--topology", value=args.topology_positional)
    topology = args.topology if args.topology is not None else args.topology_positional
    if topology is None:
        raise ConfigError("is required: the slice to run on (e.g. --topology torus:8x8)", key_path="--topology")
    return topology


def run(args):
    from ..collectives import simulate_collective
    from ..inputs.errors import ConfigError
    from ..inputs.units import parse_size

    args.topology = _topology(args)

    for name, value in (("--link-GBps", args.link_GBps), ("--hop-latency-us", args.hop_latency_us)):
        if value is not None and not (value > 0 or (name == "--hop-latency-us" and value == 0)):
            raise ConfigError("must be > 0" if name == "--link-GBps" else "must be >= 0", key_path=name,
                              value=value)
    from ..hardware.multislice import load_multislice
    from ..hardware.link_faults import cable_names, with_link_faults

    # One slice's ICI is simulated; a file's multislice section is read (and checked) to say so.
    topo, multislice = load_multislice(args.topology, link_GBps=args.link_GBps, hop_latency_us=args.hop_latency_us)
    with fault_option_errors():
        topo = with_link_faults(topo, **fault_values(args))
    nbytes = parse_size(args.size, name="--size")
    reduce_Bps = topo.hbm_Bps_per_replica if args.reduce else None
    group = _group(args.group, topo)
    algorithm = args.algorithm
    if algorithm is None:
        if args.op != "all-to-all":
            raise ConfigError(f"is required for {args.op}: one of {', '.join(_ALGORITHMS)}", key_path="--algorithm")
        from ..collectives import default_alltoall_algorithm

        algorithm = default_alltoall_algorithm(topo, group)
    try:
        r = simulate_collective(topo, args.op, algorithm, nbytes, group=group,
                                bidirectional=args.bidirectional, chunks=args.chunks, engine=args.engine,
                                reduce_Bps=reduce_Bps, routing=args.routing)
    except ConfigError as exc:
        if exc.key_path != "group":
            raise
        # the API's check of the ids (a replica twice, one outside the slice), said of the option
        raise ConfigError(exc.rule, key_path="--group", value=args.group) from None
    record = {"schema_version": COLLECTIVE_JSON_SCHEMA_VERSION, **r.to_dict(), "group": args.group}
    record["failed_links"] = ",".join(cable_names(topo, topo.failed_links))
    slow = [link for link, _ in topo.link_Bps_override]
    record["slow_links"] = ",".join(cable_names(topo, slow))
    record["multislice"] = None if multislice is None else multislice.to_dict()
    if args.json:
        print(dumps_strict(record))
        return 0
    print_text(r, topo, group=args.group, topology_text=args.topology, record=record,
               slices=None if multislice is None else multislice.slices,
               slow_factor=args.slow_links.rpartition(":")[2] if slow else None)
    return 0
