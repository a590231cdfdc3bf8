"""The ``wus-sim`` command line.

Each subcommand lives in its own module under ``wus_sim.cli`` with two
functions: ``add_parser(subparsers)`` which registers its arguments, and
``run(args) -> int`` which parses, loads, runs, prints and returns an exit
code. Heavy imports (pandas, matplotlib, simpy) happen inside ``run`` so that
quick commands stay quick. User errors (:class:`wus_sim.inputs.errors.WusError`)
print one line on stderr and exit 2; no traceback.
"""

import importlib
import sys

__all__ = ["main", "SUBCOMMANDS"]

SUBCOMMANDS = ("collective", "describe", "list", "plan", "step", "run", "validate", "calibrate", "bench", "docs",
               "import_workload")
"""Subcommand module names, in the order ``--help`` lists them (``import_workload`` is the
command ``import-workload``)."""


def build_parser(only=None):
    """The parser of every subcommand; with *only* (a command name such as ``"step"``), of that
    one alone: a short command then imports one subcommand module, not all eleven (their
    imports are most of a short command's start-up)."""
    import wus_sim  # the package itself (its __version__), not a layer

    from .parser import Parser

    parser = Parser(
        prog="wus-sim",
        description="Simulate replicated vs sharded weight update in data-parallel training on TPU pods.",
    )
    parser.add_argument("--version", action="version", version=f"wus-sim {wus_sim.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parser.commands = {}
    """Each subcommand's parser, by command name (for the closest option to an unknown one)."""
    for name in SUBCOMMANDS if only is None else (only.replace("-", "_"),):
        module = importlib.import_module(f"wus_sim.cli.{name}")
        sub_parser = module.add_parser(sub)
        sub_parser.set_defaults(_module=module)
        parser.commands[name.replace("_", "-")] = sub_parser  # by the command's name (import-workload)
    return parser


def main(argv=None):
    """Run one command; return its exit code: 0, 1 (a sweep with error rows), 2 (a user error, or
    an OS error: a file or stdout that cannot be written), 130 (interrupted), 141 (stdout is a
    pipe whose reader left).

    Ctrl-C at any moment is one line and 130: the handler is installed before anything heavy is
    imported (building the parser imports every subcommand module), so an early Ctrl-C is not a
    traceback of an import. After the command, when main is the program (*argv* None), SIGINT is
    ignored: the interpreter's shutdown resets a Python handler to the default one, so a Ctrl-C
    then killed the process (exit -2) after its work was done; an ignored signal stays ignored
    (SIGTERM likewise: a signal to a finished run's group killed it, exit -15, while it exited).
    SIGTERM is handled as Ctrl-C while a command runs. Called with *argv* (tests, scripts), the
    caller's handlers are put back. The output is flushed here, so a full device (``> /dev/full``) or a
    closed pipe is one line (or none) and exit 2 (141), not Python's "Exception ignored"."""
    import signal

    caller_handler = signal.signal(signal.SIGINT, _raise_interrupt)
    # SIGTERM (a kill, a scheduler's stop) is taken as Ctrl-C by every command: one line, 130,
    # temporaries removed by the writers' cleanup; run's sweep installs its own while it runs
    caller_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    command = None
    _one_blas_thread()
    words = sys.argv[1:] if argv is None else [*argv]  # (the name list is the list subcommand here)
    if words == ["--version"]:  # asked by scripts and installers: no parser, no imports
        import wus_sim

        print(f"wus-sim {wus_sim.__version__}")
        _flush_stdout()
        signal.signal(signal.SIGINT, signal.SIG_IGN if argv is None else caller_handler)
        signal.signal(signal.SIGTERM, signal.SIG_IGN if argv is None else caller_term)
        raise SystemExit(0)  # as argparse's version action does
    try:
        try:
            code = _lean(words)
            if code is None:
                parser = build_parser(_command_of(words))
                args, extras = parser.parse_known_args(argv)
                args._words = words  # what the user typed: which options were given, not defaulted
                command = args.command
                if extras:
                    _unrecognized(parser, args.command, extras)
                code = _run(args)
        finally:
            _flush_stdout()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C (or SIGTERM) while this line is printed
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _say(f"wus-sim{' ' + command if command else ''}: interrupted")
        code = 130
    except BrokenPipeError:
        _drop_stdout()
        code = 141
    except OSError as exc:  # stdout on a full device, or an I/O error writing it: an OS error, exit 2
        _drop_stdout()
        from ..inputs.writes import write_rule

        _say(f"wus-sim{' ' + command if command else ''}: error: stdout: {write_rule(exc)} "
             "(cannot write the output)")
        code = 2
    signal.signal(signal.SIGINT, signal.SIG_IGN if argv is None else caller_handler)
    # SIGTERM too: no kill during shutdown (a caller's handler is put back)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if argv is None else caller_term)
    return code


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""What numpy's BLAS reads, once, when numpy loads."""


def _one_blas_thread():
    """One BLAS thread, unless the user set a number: the simulation does no linear algebra
    worth a thread pool (element-wise array work), starting the pool costs every short
    command start-up time, and ``--jobs N`` workers (forked, so they inherit it) would
    otherwise each start a pool on cores the other workers need. Only before numpy loads
    (the variables are read then); a process that loaded it already (tests calling
    :func:`main`) keeps its pool and its environment."""
    import os

    if "numpy" not in sys.modules:
        for name in BLAS_THREAD_VARIABLES:
            os.environ.setdefault(name, "1")


def _lean(words):
    """``wus-sim collective ... --json`` on a uniform torus answered before numpy, YAML and the
    parser load (:mod:`wus_sim.cli.collective_lean`): its exit code, or ``None`` for every other
    command line, which the full parser then handles."""
    if words[:1] != ["collective"]:
        return None
    from .collective_lean import run

    return run(words[1:])


def _command_of(words):
    """The subcommand *words* name first, if they start with one (a bare option first, e.g.
    ``--help``, or an unknown word: ``None``, and the full parser answers)."""
    if words and words[0].replace("-", "_") in SUBCOMMANDS and words[0] != "import_workload":
        return words[0]
    return None


def _unrecognized(parser, command, extras):
    """The usage error for options no parser took, each with the closest option of *command*."""
    from ..inputs.errors import did_you_mean

    options = [o for action in parser.commands[command]._actions for o in action.option_strings]
    said = [a + (did_you_mean(a.split("=", 1)[0], options) if a.startswith("-") else "") for a in extras]
    parser.commands[command].error("unrecognized arguments: " + " ".join(said))


def _run(args):
    from ..inputs.errors import WusError

    try:
        from .options import check_options

        check_options(args)  # numeric options: the same declared ranges as experiment files
        return args._module.run(args) or 0
    except WusError as exc:
        from ..inputs.text import excerpt

        # Messages are bounded where they are made; this is the backstop that keeps it one line.
        _say(f"wus-sim {args.command}: error: {excerpt(str(exc), 1000)}")
        return 2


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _flush_stdout():
    if sys.stdout is not None:
        sys.stdout.flush()


def _drop_stdout():
    """Point stdout at /dev/null, so the interpreter's own flush at exit finds nothing to write."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass


def _say(line):
    """One line on stderr; nothing if stderr itself cannot be written."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
