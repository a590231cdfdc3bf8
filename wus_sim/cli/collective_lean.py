"""``wus-sim collective`` on a uniform torus, before numpy, YAML or argparse load.

Most of a short command's time is imports (numpy alone is ~0.1 s; see docs/speed.md). When the
command line asks for a collective that :mod:`wus_sim.collectives.engines.uniform_torus` runs in plain
Python (an inline ``torus:...`` slice with both ``--link-GBps`` and ``--hop-latency-us`` given,
so no chip file is read; a ring, bidir-ring or 2d algorithm over the slice or one axis; no
faults, no reduction cost), :func:`run` answers it here and prints the same JSON document as
:mod:`wus_sim.cli.collective` (key for key and bit for bit but ``wall_s``), or the same table
(:func:`print_text`, which both paths print with; but the wall time).

Anything else, including anything unusual on the command line (an option written
``--op=...``, an abbreviation, an option twice, ``--help``, a value out of range), returns
``None`` and the full command runs: it parses, checks and explains errors. So this module
accepts a strict subset of what the full parser accepts and never reports an error itself.
``tests/cli/test_collective_lean.py`` runs both paths on the same command lines.
"""

import math
import os
import time
from types import SimpleNamespace

from ..hardware.routings import DEFAULT_ROUTING, ROUTINGS
from ..inputs.errors import WusError
from ..inputs.limits import MAX_CHIPS, MAX_CHUNKS, MAX_REPLICAS, MAX_SIZE_BYTES, RATE_RANGES
from ..inputs.units import GB, US

__all__ = ["COLLECTIVE_JSON_SCHEMA_VERSION", "run", "print_text", "HOP_LATENCY_US_MAX", "TOPOLOGY_PATH_ENV"]

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
# (plain string tests, no regular expressions: compiling three took longer than the simulation)


def _digits(text, most):
    """*text* is 1 to *most* ASCII digits."""
    return 0 < len(text) <= most and text.isascii() and text.isdigit()


def _torus(text):
    """The dims of ``torus:AxB(xC)`` written plainly (1 to 3 axes of 1 to 6 digits), else ``None``."""
    if not text.startswith("torus:"):
        return None
    parts = text[len("torus:"):].split("x")
    if not 1 <= len(parts) <= 3 or not all(_digits(p, 6) for p in parts):
        return None
    return tuple(int(p) for p in parts)


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
    """*text* as a float if it is a plain decimal number (digits, one point, an exponent of one
    or two digits) in ``[least, most]``, else ``None``."""
    mantissa, e, exponent = text.replace("E", "e").partition("e")
    whole, _, fraction = mantissa.partition(".")
    if not (_digits(whole + fraction, 18) and len(whole) <= 9 and len(fraction) <= 9):
        return None
    if e and not _digits(exponent[1:] if exponent[:1] in "+-" else exponent, 2):
        return None
    x = float(text)
    return x if least <= x <= most else None


def _request(words):
    """The collective *words* ask for, checked, as keyword arguments of
    :func:`wus_sim.collectives.engines.uniform_torus.run` plus the record's own fields; ``None`` where the
    full command must run."""
    o = _options(words)
    if o is None or os.environ.get(TOPOLOGY_PATH_ENV):
        return None
    if any(o.get(k) is None for k in ("topology", "op", "algorithm", "size", "link_GBps", "hop_latency_us")):
        return None
    dims = _torus(o["topology"])
    if dims is None or min(dims) < 1 or math.prod(dims) > min(MAX_CHIPS, MAX_REPLICAS):
        return None
    link_GBps = _number(o["link_GBps"], *RATE_RANGES["link_GBps"][:2])
    hop_latency_us = _number(o["hop_latency_us"], 0.0, HOP_LATENCY_US_MAX)
    chunks = int(o.get("chunks", "1")) if _digits(o.get("chunks", "1"), 4) else 0
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
            "bidirectional": o.get("bidirectional", False), "chunks": chunks, "routing": routing, "group": group,
            "json": o.get("json", False)}


def _num(x):
    return None if x is None or not math.isfinite(x) else float(x)


def run(words):
    """Answer ``wus-sim collective WORDS`` here if it can be (its exit code), else ``None``."""
    q = _request(words)
    if q is None:
        return None
    from ..collectives.engines import uniform_torus

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
    if not q["json"]:
        topo = SimpleNamespace(name=q["topology"], shape_str="x".join(map(str, q["dims"])), cores_per_chip=1,
                               axis_link_Bps=(q["link_Bps"],) * len(q["dims"]), hop_latency_s=q["hop_latency_s"],
                               wrap=(True,) * len(q["dims"]))
        result = SimpleNamespace(**record, reduce_Bps=None)
        print_text(result, topo, group=q["group"], topology_text=q["topology"], record=record)
        return 0
    print(_flat_json(record))
    return 0


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789:-_")


def _flat_json(record):
    """``dumps_strict(record)`` of this flat record, written here: importing the ``json`` package
    (its decoder and scanner compile regular expressions) costs more than the simulation. Every
    value here is None, a bool, an int, a finite float (``repr``, as ``json`` writes it) or a
    name of plain characters (nothing to escape); anything else goes to ``dumps_strict``."""
    parts = []
    for key, value in record.items():
        if value is None:
            text = "null"
        elif value is True or value is False:
            text = "true" if value else "false"
        elif type(value) is int or (type(value) is float and math.isfinite(value)):
            text = repr(value)
        elif type(value) is str and _PLAIN.issuperset(value):
            text = f'"{value}"'
        else:
            from ..inputs.strict_json import dumps_strict

            return dumps_strict(record)
        parts.append(f'"{key}": {text}')
    return "{" + ", ".join(parts) + "}"


_EXCHANGE_ALGORITHMS = ("halving-doubling", "recursive-doubling")
"""``collectives.plan.EXCHANGE_ALGORITHMS`` (the tests check they agree), without numpy."""


def print_text(r, topo, *, group, topology_text, record, slices=None, slow_factor=None):
    """The table ``wus-sim collective`` prints without ``--json``, of both paths: *r* a
    :class:`~wus_sim.collectives.api.CollectiveResult` (or the same attributes), *topo* the slice
    (its name, shape_str, cores_per_chip, axis_link_Bps, hop_latency_s, wrap), *group* and
    *topology_text* as given, *record* the JSON record (its cable lists), *slices* of a
    multislice, *slow_factor* the ``--slow-links`` factor as written."""
    from ..inputs.units import format_bytes, format_time

    rows = [
        ("topology", f"{topo.name} ({topo.shape_str}, {topo.cores_per_chip} core(s)/chip, "
                     f"{', '.join(f'{b / GB:g}' for b in topo.axis_link_Bps)} GB/s links, "
                     f"{topo.hop_latency_s / US:g} us/hop)"),
        ("collective", f"{r.op}, {r.algorithm}"
         + (", bidirectional" if r.bidirectional else _one_way(r.op, r.algorithm, topo))
         + (f", {r.chunks} chunks" if r.chunks > 1 else "")
         + (f", reduction at {r.reduce_Bps / GB:g} GB/s" if r.reduce_Bps else "")
         + (f", {r.routing} routing" if r.routing != DEFAULT_ROUTING else "")),
        ("group", f"{group}: {r.group_size} replicas"
                  + (f" of one of its {slices} slices (ICI only: the data-center network phases "
                     "between slices are in wus-sim step)" if slices is not None else "")),
        *([("failed cables", record["failed_links"])] if record["failed_links"] else []),
        *([("slow cables", f"{record['slow_links']} (bandwidth / {slow_factor})")] if record["slow_links"] else []),
        ("size S", f"{format_bytes(r.nbytes)} ({int(r.nbytes)} B) per replica"),
        ("time", format_time(r.time_s)),
        ("closed form", format_time(r.analytic_time_s) + _closed_form_note(r)),
        ("algbw", f"{r.algbw_GBps:.4g} GB/s"),
        ("busbw", f"{r.busbw_GBps:.4g} GB/s"),
        ("engine", f"{r.engine}: {r.events} message hops in {format_time(r.wall_s)} wall"),
        # what the time was checked against, so that it is not read as a measurement
        ("checked", "against the closed form only: link and hop figures come from datasheets and "
                    "assumptions (sources: wus-sim describe topology " + _quote(topology_text) + "), not from "
                    "measured collectives; whole steps are checked against measured runs (wus-sim validate)"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _one_way(op, algorithm, topo):
    """Say so when a ring algorithm runs one direction: ``step`` and experiments run both
    directions of each link by default (docs/validation.md, "Defaults from evidence"), so the same
    collective there takes less time than here."""
    if op == "all-to-all":
        return ""  # its rings send each block the shorter way: both directions already
    if algorithm in _EXCHANGE_ALGORITHMS or algorithm == "bidir-ring":
        return ""  # pairwise exchanges have no ring direction; bidir-ring is both by name
    if algorithm in ("2d", "2d-split") and not any(topo.wrap):
        return ""  # every axis a mesh: each keeps its folded ring, which uses both directions already
    return ", one direction (steps run both by default; --bidirectional to match)"


def _closed_form_note(r):
    if r.exact:
        return " (exact for this schedule)"
    if math.isclose(r.time_s, r.analytic_time_s, rel_tol=1e-9):
        return " (uncontended estimate; the same as the time here)"
    if r.time_s > r.analytic_time_s:
        return " (uncontended estimate; a lower bound here)"
    # with detours or slow links the estimate takes each pass's slowest ring: not a bound
    return " (uncontended estimate of the slowest ring per pass; above the time here)"


def _quote(text):
    import shlex

    return shlex.quote(text)
