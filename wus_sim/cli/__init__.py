"""The ``wus-sim`` command line.

Each subcommand lives in its own module under ``wus_sim.cli`` with two
functions: ``add_parser(subparsers)`` which registers its arguments, and
``run(args) -> int`` which parses, loads, runs, prints and returns an exit
code. Heavy imports (pandas, matplotlib, simpy) happen inside ``run`` so that
quick commands stay quick. User errors (:class:`wus_sim.inputs.errors.WusError`)
print one line on stderr and exit 2; no traceback.
"""

import argparse
import importlib
import sys

__all__ = ["main", "SUBCOMMANDS"]

SUBCOMMANDS = ("collective", "describe", "list", "plan", "step", "run", "validate", "calibrate", "bench", "docs",
               "import_workload")
"""Subcommand module names, in the order ``--help`` lists them (``import_workload`` is the
command ``import-workload``)."""


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one bounded line, like every other error: the bad value
    cut to an excerpt (argparse quotes it whole) and a pointer to ``--help`` instead of the
    usage block."""

    def error(self, message):
        from ..inputs.text import excerpt

        message = _with_suggestion(message)
        self.exit(2, f"{self.prog}: error: {excerpt(message, 400)} (see {self.prog} --help)\n")


def _with_suggestion(message):
    """argparse's "invalid choice: 'x' (choose from 'a', 'b')" with the closest choice named."""
    import re

    from ..inputs.errors import did_you_mean

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if not m:
        return message
    choices = re.findall(r"'([^']*)'", m.group(2))
    return message[:m.start()] + f"invalid choice: {m.group(1)!r}{did_you_mean(m.group(1), choices)} " \
        f"(choose from {m.group(2)})"


def _unrecognized(parser, command, extras):
    """The usage error for options no parser took, each with the closest option of *command*."""
    from ..inputs.errors import did_you_mean

    options = [o for action in parser.commands[command]._actions for o in action.option_strings]
    said = [a + (did_you_mean(a.split("=", 1)[0], options) if a.startswith("-") else "") for a in extras]
    parser.commands[command].error("unrecognized arguments: " + " ".join(said))


def build_parser():
    import wus_sim  # the package itself (its __version__), not a layer

    parser = _Parser(
        prog="wus-sim",
        description="Simulate replicated vs sharded weight update in data-parallel training on TPU pods.",
    )
    parser.add_argument("--version", action="version", version=f"wus-sim {wus_sim.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parser.commands = {}
    """Each subcommand's parser, by command name (for the closest option to an unknown one)."""
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"wus_sim.cli.{name}")
        sub_parser = module.add_parser(sub)
        sub_parser.set_defaults(_module=module)
        parser.commands[name.replace("_", "-")] = sub_parser  # by the command's name (import-workload)
    return parser


def main(argv=None):
    from ..inputs.errors import WusError

    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unrecognized(parser, args.command, extras)
    try:
        from .options import check_options

        check_options(args)  # numeric options: the same declared ranges as experiment files
        return args._module.run(args) or 0
    except WusError as exc:
        from ..inputs.text import excerpt

        # Messages are bounded where they are made; this is the backstop that keeps it one line.
        print(f"wus-sim {args.command}: error: {excerpt(str(exc), 1000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"wus-sim {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
