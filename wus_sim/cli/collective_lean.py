"""``wus-sim collective ... --json`` on a uniform torus, before numpy, YAML or argparse load.

Most of a short command's time is imports (numpy alone is ~0.1 s; see docs/speed.md). When the
command line asks for a collective that :mod:`wus_sim.collectives.uniform_torus` runs in plain
Python (an inline ``torus:...`` slice with both ``--link-GBps`` and ``--hop-latency-us`` given,
so no chip file is read; a ring, bidir-ring or 2d algorithm over the slice or one axis; no
faults, no reduction cost), :func:`run` answers it here and prints the same JSON document as
:mod:`wus_sim.cli.collective`, key for key and bit for bit (but ``wall_s``).

Anything else, including anything unusual on the command line (an option written
``--op=...``, an abbreviation, an option twice, ``--help``, a value out of range, text output),
returns ``None`` and the full command runs: it parses, checks and explains errors. So this
module accepts a strict subset of what the full parser accepts and never reports an error
itself. ``tests/cli/test_collective_lean.py`` runs both paths on the same command lines.
"""

import math
import os
import re
import time

from ..hardware.routings import DEFAULT_ROUTING, ROUTINGS
from ..inputs.errors import WusError
from ..inputs.limits import MAX_CHIPS, MAX_CHUNKS, MAX_REPLICAS, MAX_SIZE_BYTES, RATE_RANGES
from ..inputs.units import GB, US

__all__ = ["COLLECTIVE_JSON_SCHEMA_VERSION", "run", "HOP_LATENCY_US_MAX", "TOPOLOGY_PATH_ENV"]

COLLECTIVE_JSON_SCHEMA_VERSION = 1
"""Version of ``collective --json``'s shape; its schema is ``wus_sim/schemas/collective.v{N}.json``."""

HOP_LATENCY_US_MAX = 1e6
"""The largest ``--hop-latency-us`` taken here: the override's declared maximum
(``hardware.topology_files.OVERRIDE_RANGES``; the tests check they agree)."""

TOPOLOGY_PATH_ENV = "WUS_SIM_TOPOLOGY_PATH"
"""With it set, chip files of the user's are read (and checked): the full command runs."""

_VALUED = {"-t": "topology", "--topology": "topology", "--op": "op", "--algorithm": "algorithm",
           "--size": "size", "--chunks": "chunks", "--engine": "engine", "--routing": "routing",
           "--group": "group", "--link-GBps": "link_GBps", "--hop-latency-us": "hop_latency_us"}
_FLAGS = {"--json": ("json", True), "--no-json": ("json", False),
          "--bidirectional": ("bidirectional", True), "--no-bidirectional": ("bidirectional", False),
          "--no-reduce": ("reduce", False)}
_TORUS = re.compile(r"torus:([0-9]{1,6}(?:x[0-9]{1,6}){0,2})")
_DIGITS = re.compile(r"[0-9]{1,4}")
_NUMBER = re.compile(r"[0-9]{1,9}(?:\.[0-9]{0,9})?(?:[eE][+-]?[0-9]{1,2})?|\.[0-9]{1,9}(?:[eE][+-]?[0-9]{1,2})?")


def _options(words):
    """``{dest: text}`` of *words* (the arguments after ``collective``), or ``None`` unless every
    word is a known option in its plain spelling, each given once."""
    out = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word in _FLAGS:
            dest, value = _FLAGS[word]
            i += 1
        elif word in _VALUED and i + 1 < len(words) and not words[i + 1].startswith("-"):
            dest, value = _VALUED[word], words[i + 1]
            i += 2
        else:
            return None
        if dest in out:
            return None
        out[dest] = value
    return out


def _number(text, least, most):
    """*text* as a float if it is a plain decimal number in ``[least, most]``, else ``None``."""
    if not _NUMBER.fullmatch(text):
        return None
    x = float(text)
    return x if least <= x <= most else None


def _request(words):
    """The collective *words* ask for, checked, as keyword arguments of
    :func:`wus_sim.collectives.uniform_torus.run` plus the record's own fields; ``None`` where the
    full command must run."""
    o = _options(words)
    if o is None or not o.get("json") or os.environ.get(TOPOLOGY_PATH_ENV):
        return None
    if any(o.get(k) is None for k in ("topology", "op", "algorithm", "size", "link_GBps", "hop_latency_us")):
        return None
    m = _TORUS.fullmatch(o["topology"])
    if not m:
        return None
    dims = tuple(int(d) for d in m.group(1).split("x"))
    if min(dims) < 1 or math.prod(dims) > min(MAX_CHIPS, MAX_REPLICAS):
        return None
    link_GBps = _number(o["link_GBps"], *RATE_RANGES["link_GBps"][:2])
    hop_latency_us = _number(o["hop_latency_us"], 0.0, HOP_LATENCY_US_MAX)
    chunks = int(o.get("chunks", "1")) if _DIGITS.fullmatch(o.get("chunks", "1")) else 0
    routing = o.get("routing", DEFAULT_ROUTING)
    group = o.get("group", "all")
    axis = None if group == "all" else {"x": 0, "y": 1, "z": 2}.get(group)
    if (link_GBps is None or hop_latency_us is None or not 1 <= chunks <= MAX_CHUNKS or routing not in ROUTINGS
            or o.get("engine", "auto") not in ("auto", "fast") or (group != "all" and axis is None)):
        return None
    from ..inputs.units import parse_size

    try:
        nbytes = float(parse_size(o["size"], name="--size"))
    except WusError:
        return None
    if not 0 < nbytes <= MAX_SIZE_BYTES:
        return None
    return {"topology": o["topology"], "dims": dims, "link_Bps": link_GBps * GB, "hop_latency_s": hop_latency_us * US,
            "op": o["op"], "algorithm": o["algorithm"], "nbytes": nbytes, "axis": axis,
            "bidirectional": o.get("bidirectional", False), "chunks": chunks, "routing": routing, "group": group}


def _num(x):
    return None if x is None or not math.isfinite(x) else float(x)


def run(words):
    """Answer ``wus-sim collective WORDS`` here if it can be (its exit code), else ``None``."""
    q = _request(words)
    if q is None:
        return None
    from ..collectives import uniform_torus

    t0 = time.perf_counter()
    r = uniform_torus.run(q["dims"], q["link_Bps"], q["hop_latency_s"], q["op"], q["algorithm"], q["nbytes"],
                          axis=q["axis"], bidirectional=q["bidirectional"], chunks=q["chunks"])
    wall = time.perf_counter() - t0
    if r is None:
        return None
    algbw, busbw = uniform_torus.bandwidths(q["op"], q["nbytes"], r["time_s"], r["group_size"])
    # the keys and their order of cli.collective's record (CollectiveResult.to_dict in the middle)
    record = {
        "schema_version": COLLECTIVE_JSON_SCHEMA_VERSION,
        "topology": q["topology"], "op": q["op"], "algorithm": q["algorithm"], "nbytes": _num(q["nbytes"]),
        "group_size": r["group_size"], "time_s": _num(r["time_s"]), "analytic_time_s": _num(r["analytic_time_s"]),
        "exact": r["exact"], "algbw_GBps": _num(algbw), "busbw_GBps": _num(busbw), "events": int(r["events"]),
        "engine": "fast", "wall_s": _num(wall), "chunks": q["chunks"], "bidirectional": bool(q["bidirectional"]),
        "routing": q["routing"], "reduce_GBps": None, "max_link_bytes": _num(r["max_link_bytes"]),
        "total_link_bytes": _num(r["total_link_bytes"]),
        "group": q["group"], "failed_links": "", "slow_links": "", "multislice": None,
    }
    from ..inputs.strict_json import dumps_strict

    print(dumps_strict(record))
    return 0
