"""The command line's argparse parser, whose usage errors are one bounded line.

Apart from ``wus_sim.cli`` so that importing the entry point does not import argparse: the
Ctrl-C handler is installed first, and everything after it is covered by it."""

import argparse

__all__ = ["Parser"]


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one bounded line, like every other error: the bad value
    cut to an excerpt (argparse quotes it whole) and a pointer to ``--help`` instead of the
    usage block."""

    def error(self, message):
        from ..inputs.text import excerpt

        message = _short_quotes(_with_suggestion(message))
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


def _short_quotes(message):
    """argparse quotes the bad value whole ("invalid int value: 'xxx...'"): each quoted value cut
    to an excerpt, like every other echo of user input."""
    import re

    from ..inputs.text import EXCERPT_CHARS, excerpt

    return re.sub(r"'([^']{%d,})'" % (EXCERPT_CHARS + 1), lambda m: repr(excerpt(m.group(1))), message)
