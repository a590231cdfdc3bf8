"""What a `wus-sim` command prints, run in-process, and the figures' formats the docs quote.

Shared by tests/tools/regenerate_docs_numbers.py and the page examples it writes
(tests/tools/docs_examples.py): one way to run a command and one spelling of each unit.
"""

import contextlib
import io
import json
import shlex

__all__ = ["cli", "step", "times", "seconds", "millis", "gib", "percent"]


def cli(command):
    """What `wus-sim COMMAND` prints (in-process); a nonzero exit code is an error."""
    from wus_sim.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(shlex.split(command))
    if code:
        raise RuntimeError(f"wus-sim {command} exited {code}")
    return out.getvalue()


def step(command):
    """`wus-sim step COMMAND --json`, read."""
    return json.loads(cli(f"step {command} --json"))


def times(v):
    return f"{v:.2f}x"


def seconds(t_s):
    return f"{t_s:.3f} s"


def millis(t_s):
    return f"{t_s * 1e3:.1f} ms"


def gib(nbytes):
    return f"{nbytes / 2**30:.1f} GiB"


def percent(fraction):
    return f"{100 * abs(fraction):.1f} %"
