"""What the table generators under tests/tools share: a CSV's text, and the command line that
writes it or, with ``--check``, compares it with the shipped one (exit 1 if it differs)."""

import argparse
import csv
import io
from pathlib import Path
import sys


def render_csv(columns, rows):
    """The CSV text of *rows* (mappings) under *columns*, ``\\n`` line ends."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def generator_main(argv, *, description, snapshot, upstream, pinned, out, build, tool):
    """``--repo PATH [--out FILE] [--check]``: ``build(repo)`` gives the text, written to *out* or
    compared with it; *snapshot* the default clone (used when it exists), *tool* the script's path."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repo", default=str(snapshot) if Path(snapshot).exists() else None,
                        help=f"clone or bare git directory of {upstream} (must contain {pinned})")
    parser.add_argument("--out", default=str(out), help="CSV to write (or compare with --check)")
    parser.add_argument("--check", action="store_true", help="exit 1 if --out differs; write nothing")
    args = parser.parse_args(argv)
    if args.repo is None:
        parser.error("--repo is required (no default snapshot on this machine)")
    text = build(args.repo)
    path = Path(args.out)
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is out of date; run python {tool}", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0
