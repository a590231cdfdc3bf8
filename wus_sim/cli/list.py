"""``wus-sim list topologies|workloads|optimizers|experiments``: the names a command accepts.

One name a line, sorted, so scripts can read it; ``--json`` prints them as one JSON list of strings. Topologies and workloads include those on
``WUS_SIM_TOPOLOGY_PATH`` / ``WUS_SIM_WORKLOAD_PATH``; optimizers end with the gradient
prefixes as ``+NAME`` (``adam+clip``); experiments are the shipped ones, which
``wus-sim run NAME`` runs.
"""

from .options import add_json_option

__all__ = ["add_parser", "run", "names", "KINDS"]

KINDS = ("topologies", "workloads", "optimizers", "experiments")
"""What ``wus-sim list`` lists."""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "list", help="list the known topologies, workloads, optimizers or experiments",
        description="List the names of the known topologies, workloads, optimizers (with +PREFIX "
                    "gradient prefixes) or shipped experiments, one a line.")
    p.add_argument("kind", choices=KINDS, help="what to list")
    add_json_option(p)
    return p


def run(args):
    if args.json:
        from ..inputs.strict_json import dumps_strict

        print(dumps_strict(names(args.kind)))
    else:
        print("\n".join(names(args.kind)))
    return 0


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
