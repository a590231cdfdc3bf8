"""``python -m wus_sim``: the command line.

The Ctrl-C handler is installed before the command line's modules are imported (by the package's
first lines when Python was started as ``python -m wus_sim``, and here again for a runner that
imports the package first): a Ctrl-C in the first milliseconds is one line and exit 130, not
Python's KeyboardInterrupt traceback of an import. :func:`wus_sim.cli.main` installs its own at once.
"""
import signal
import sys

import wus_sim  # the package itself (its first lines), not a layer

signal.signal(signal.SIGINT, wus_sim._interrupted)

from .cli import main  # noqa: E402 -- after the handler, on purpose

try:
    code = main()
except KeyboardInterrupt:
    # a second signal of one Ctrl-C (a terminal's, or kill to the whole group) that reaches past main,
    # which has said its line: its exit code, not Python's death by SIGINT (-2; about 1 run in 10 of
    # tests/cli/test_signals.py's `run --jobs 2` under load)
    code = 130
if code == 130:
    # interrupted: every command has said its line and removed its temporaries; the interpreter's
    # shutdown is skipped, so no signal during it can end the process by SIGINT (-2) instead of 130
    # (tests/cli/test_signals.py saw -2 after the line in 2 of its runs under CI's two suites at once)
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 -- a closed or full stream: exit all the same
            pass
    os._exit(130)
sys.exit(code)
