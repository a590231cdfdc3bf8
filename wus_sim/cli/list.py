"""``wus-sim list topologies|workloads|optimizers|experiments``: the names a command accepts.

One name a line, sorted, so scripts can read it; ``--json`` prints them as one JSON list of strings;
``--long`` adds, for topologies, each slice's chips, shape, wraparound and TensorCores per chip. Topologies and workloads include those on
``WUS_SIM_TOPOLOGY_PATH`` / ``WUS_SIM_WORKLOAD_PATH``; optimizers end with the gradient
prefixes as ``+NAME`` (``adam+clip``); experiments are the shipped ones, which
``wus-sim run NAME`` runs.
"""

import argparse

from .options import add_json_option

__all__ = ["add_parser", "run", "names", "topology_lines", "KINDS"]

KINDS = ("topologies", "workloads", "optimizers", "experiments")
"""What ``wus-sim list`` lists."""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "list", help="list the known topologies, workloads, optimizers or experiments",
        description="List the names of the known topologies, workloads, optimizers (with +PREFIX "
                    "gradient prefixes) or shipped experiments, one a line.")
    p.add_argument("kind", choices=KINDS, help="what to list")
    p.add_argument("-l", "--long", action=argparse.BooleanOptionalAction, default=False,
                   help="topologies: one slice a line with its chips, shape (chips per axis), wraparound per axis "
                        "(T/F) and TensorCores per chip; other kinds: names only")
    add_json_option(p)
    return p


def run(args):
    if args.json:
        from ..inputs.strict_json import dumps_strict

        print(dumps_strict(names(args.kind)))
    elif getattr(args, "long", False) and args.kind == "topologies":
        print("\n".join(topology_lines()))
    else:
        print("\n".join(names(args.kind)))
    return 0


def topology_lines():
    """``NAME CHIPS SHAPE WRAP CORES DESCRIPTION`` of every topology ``list topologies`` names; a file
    that does not load says why in place of its figures."""
    from ..hardware.topology_files import load_topology
    from ..inputs.errors import WusError

    out = []
    for name in names("topologies"):
        try:
            t = load_topology(name)
        except WusError as exc:
            out.append(f"{name}  ?  ({exc})")
            continue
        out.append(f"{name}  {t.num_chips}  {'x'.join(map(str, t.dims))}  {''.join('TF'[not w] for w in t.wrap)}  "
                   f"{t.chip.cores_per_chip}  {t.description}")
    return out


def names(kind):
    """The names ``wus-sim list KIND`` prints."""
    if kind == "topologies":
        from ..hardware.topology_files import known_topologies

        return known_topologies()
    if kind == "workloads":
        from ..model.workload_files import known_workloads

        return known_workloads()
    if kind == "optimizers":
        from ..optimizers import known_optimizers, known_prefixes

        return known_optimizers() + [f"+{p}" for p in known_prefixes()]
    from ..experiments.spec import known_experiments

    return known_experiments()
