"""``python -m wus_sim``: the command line.

The Ctrl-C handler is installed in the first lines, before the command line's modules are
imported: a Ctrl-C in the first milliseconds is one line and exit 130, not Python's
KeyboardInterrupt traceback of an import. :func:`wus_sim.cli.main` installs its own at once.
"""
import signal
import sys


def _interrupted(signum, frame):
    try:
        sys.stderr.write("wus-sim: interrupted\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 -- stderr closed: exit all the same
        pass
    import os

    os._exit(130)


signal.signal(signal.SIGINT, _interrupted)

from .cli import main  # noqa: E402 -- after the handler, on purpose

sys.exit(main())
