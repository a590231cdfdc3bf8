"""The ``wus-sim`` command line.

Each subcommand lives in its own module under ``wus_sim.cli`` with two
functions: ``add_parser(subparsers)`` which registers its arguments, and
``run(args) -> int`` which parses, loads, runs, prints and returns an exit
code. Heavy imports (pandas, matplotlib, simpy) happen inside ``run`` so that
quick commands stay quick. User errors (:class:`wus_sim.errors.WusError`)
print one line on stderr and exit 2; no traceback.
"""

import argparse
import importlib
import sys

__all__ = ["main", "SUBCOMMANDS"]

SUBCOMMANDS = ("collective", "describe", "plan", "step", "run", "validate", "calibrate", "bench")
"""Subcommand module names, in the order ``--help`` lists them."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="wus-sim",
        description="Simulate replicated vs sharded weight update in data-parallel training on TPU pods.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"wus_sim.cli.{name}")
        sub_parser = module.add_parser(sub)
        sub_parser.set_defaults(_module=module)
    return parser


def main(argv=None):
    from ..errors import WusError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args._module.run(args) or 0
    except WusError as exc:
        print(f"wus-sim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"wus-sim {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
