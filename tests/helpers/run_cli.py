"""Run the command line in-process and capture what it prints (tests only)."""

import contextlib
import io

from wus_sim.cli import main


def run(*argv):
    """``(exit code, stdout, stderr)`` of ``wus-sim ARGV``; a usage error's SystemExit is its code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()
