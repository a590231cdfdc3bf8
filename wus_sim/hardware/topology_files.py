"""Reading slices from files: chips.yaml, topology YAML, inline torus:AxB specs, the search
path (``WUS_SIM_TOPOLOGY_PATH``) and the key tables both file formats are checked by."""

from dataclasses import replace
from pathlib import Path
import math
import os
import re

import numpy as np

from ..inputs.config import Section, is_file, load_yaml, present
from ..inputs.files import check_file
from ..inputs.errors import ConfigError, UnknownNameError
from ..inputs.keys import Key, KeyTable
from ..inputs.limits import RATE_RANGES
from ..inputs.memo import IdentityMemo, fixed_while_running
from ..inputs.shipped import env_dirs, note_once, note_override, shipped_dir
from ..inputs.units import GB, US
from .cloud_slices import CLOUD_SLICE_NAMES, cloud_slice, nearest_names
from .chip_files import _SOURCES_SCHEMA, CHIP_KEYS, CHIPS_FILE, chips_from_file, sources_of
from .link_faults import with_link_faults
from .topology import Topology

__all__ = [
    "load_topology", "known_topologies", "topology_dirs", "load_chips", "parse_inline",
    "CHIP_KEYS", "CHIPS_FILE", "TOPOLOGY_KEYS", "RENAMED", "MEANING_CHANGED",
]


TOPOLOGY_PATH_ENV = "WUS_SIM_TOPOLOGY_PATH"
"""Extra directories (``os.pathsep``-separated) of topology YAML and ``chips.yaml`` files; they add
to the shipped ones, and a file or chip of a shipped name overrides it (with a note on stderr)."""


# ====================================================================== file formats
_LINK_MIN, _LINK_MAX = RATE_RANGES["link_GBps"][:2]
_PER_AXIS = "one per axis, listed in chips_per_axis order"

TOPOLOGY_KEYS = KeyTable("topology file", [
    Key("name", "string", "Name of the slice (results' `topology` column).", default_text="the file's stem"),
    Key("description", "string", "One line on the slice.", default=""),
    Key("chip", "string", "Chip model: a chip name of chips.yaml (shipped: tpu-v2, tpu-v3, tpu-v4, tpu-v5e, "
        "tpu-v5p, tpu-v6e, generic; user chips.yaml files add more).", required=True),
    Key("chips_per_axis", "list", "Chips along each torus axis, e.g. [32, 32] or [8, 8, 8].", required=True,
        rule="a list of 1 to 3 whole numbers >= 1",
        schema={"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": 3}),
    Key("wraparound", "boolean or list", "Wraparound links per axis: true = a torus ring, false = a mesh line.",
        required=True, rule=f"true/false (every axis) or a list of them, {_PER_AXIS}",
        schema={"oneOf": [{"type": "boolean"},
                          {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}]}),
    Key("cores_per_chip", "integer", "Replicas per chip on this slice (e.g. 1 for TPU v4 megacore).",
        minimum=1, default_text="the chip's"),
    Key("link_GBps", "number or list", "ICI bandwidth of one link in one direction (10^9 B/s), as the chip's "
        "link_GBps.", unit="GB/s",
        default_text="the chip's", rule=f"a number >= {_LINK_MIN:g} and <= {_LINK_MAX:g}, or a list of them, {_PER_AXIS}",
        schema={"oneOf": [{"type": "number", "minimum": _LINK_MIN, "maximum": _LINK_MAX},
                          {"type": "array", "items": {"type": "number", "minimum": _LINK_MIN, "maximum": _LINK_MAX},
                           "minItems": 1, "maxItems": 3}]}),
    Key("hop_latency_us", "number", "Fixed time per ICI hop (the alpha), as the chip's hop_latency_us.", unit="us",
        minimum=0, default_text="the chip's"),
    Key("onchip_GBps", "number", "Core-to-core bandwidth inside a chip, one direction (10^9 B/s), as the chip's "
        "onchip_GBps.", unit="GB/s",
        minimum=RATE_RANGES["onchip_GBps"][0], maximum=RATE_RANGES["onchip_GBps"][1], default_text="the chip's"),
    Key("sources", "mapping", "Citation per figure or fact (shape, wraparound, link_GBps, ...).",
        schema=_SOURCES_SCHEMA),
    Key("multislice", "mapping", "Several copies of this slice joined by the data-center network "
        "(read by wus_sim.hardware.multislice; `--slices`, `--dcn-GBps`, `--dcn-latency-us` override it).",
        table=KeyTable("multislice section", [
            Key("slices", "integer", "Number of identical slices.", required=True, minimum=1),
            Key("dcn_GBps", "number", "Data-center network bandwidth per chip (10^9 B/s).", unit="GB/s",
                minimum=RATE_RANGES["dcn_GBps"][0], maximum=RATE_RANGES["dcn_GBps"][1],
                default_text="the chip's DCN figure"),
            Key("dcn_latency_us", "number", "Latency of one data-center network exchange.", unit="us",
                minimum=0, default_text="the chip's DCN figure"),
        ])),
], meaning="One TPU slice: its chip, shape and wraparound, and any figure that differs from the chip's.")
"""Keys of a topology file (read by :func:`load_topology`)."""


# ====================================================================== loading
def topology_dirs():
    """Directories searched for ``NAME.yaml``, first match wins: ``WUS_SIM_TOPOLOGY_PATH``'s, then the shipped one."""
    return env_dirs(TOPOLOGY_PATH_ENV) + [shipped_dir("topologies")]


def known_topologies():
    """Names of the topology files found (file stems) and of every Cloud TPU slice
    (:mod:`~wus_sim.hardware.cloud_slices`), sorted."""
    names = set(CLOUD_SLICE_NAMES)
    for d in topology_dirs():
        if os.path.isdir(d):  # False, not OSError, for a name the OS refuses
            names.update(p.stem for p in d.glob("*.yaml") if p.stem != "chips")
    return sorted(names)


def load_chips(path=None):
    """Chip specs keyed by name: the shipped ``chips.yaml`` with every ``chips.yaml`` on
    ``WUS_SIM_TOPOLOGY_PATH`` laid over it (an earlier directory wins), or only the file *path*."""
    if path:
        return chips_from_file(Path(path))
    dirs = topology_dirs()
    chips = {}
    for d in reversed(dirs):  # lowest priority first, so later (higher) entries replace
        p = d / "chips.yaml"
        if is_file(p):
            for name, chip in chips_from_file(p).items():
                if name in chips and d != dirs[-1]:
                    note_override("chip", name, p)
                chips[name] = chip
    return chips


RENAMED = {}
"""Shipped slice names that fail naming the one to use instead: old name -> (new name, what it was).
Empty since every Cloud TPU name resolves (:mod:`~wus_sim.hardware.cloud_slices`): tpu-v4-64 and
tpu-v4-512, refused from wus-sim 0.2 to 0.x, are Google's v4-64 and v4-512 again (see MEANING_CHANGED)."""

MEANING_CHANGED = {
    "tpu-v4-4096": "Google's v4-4096, 2048 chips 8x16x16 (before wus-sim 0.2 it was the 4096-chip pod, now "
                   "tpu-v4-8192)",
    "tpu-v4-64": "Google's v4-64, 32 chips 2x4x4 (before wus-sim 0.2 it was the 64-chip 4x4x4 cube, now "
                 "tpu-v4-128)",
    "tpu-v4-512": "Google's v4-512, 256 chips 4x8x8 (before wus-sim 0.2 it was the 512-chip 8x8x8 slice, now "
                  "tpu-v4-1024)",
}
"""Shipped names that now mean Google's slice of that name, a different one from before: loading one
says so once on stderr."""


def _find_file(stem):
    if stem == "chips":  # the chip file shares the folder but is not a topology
        raise UnknownNameError("topology", stem, known_topologies())
    dirs = topology_dirs()
    for d in dirs:
        p = d / f"{stem}.yaml"
        if present(p):
            if d != dirs[-1] and is_file(dirs[-1] / p.name):
                note_override("topology", stem, p)
            elif stem in MEANING_CHANGED:
                note_once(f"topology {stem!r} is {MEANING_CHANGED[stem]}")
            return p
    if stem in CLOUD_SLICE_NAMES:
        if stem in MEANING_CHANGED:
            note_once(f"topology {stem!r} is {MEANING_CHANGED[stem]}")
        return _LOADED.get((), ("cloud slice", stem, _chips_state()), lambda: cloud_slice(stem, load_chips()))
    if stem in RENAMED:
        new, what = RENAMED[stem]
        raise ConfigError(f"is no longer a shipped slice: {what} is now {new!r} (TPU v4 slices are named as Google "
                          "names them, by TensorCores, two per chip)", key_path="topology", value=stem)
    raise UnknownTopologyError("topology", stem, known_topologies())


class UnknownTopologyError(UnknownNameError):
    """An unknown slice name: the suggestions are the same generation's slices nearest in size
    (``tpu-v5p-9000`` -> tpu-v5p-8192, tpu-v5p-12288), not the closest strings (tpu-v5p-8)."""

    def hint(self):
        from ..inputs.errors import did_you_mean
        from ..inputs.text import excerpt

        near, note = nearest_names(self.name, self.known)
        out = f" (did you mean {' or '.join(near)}?{note})" if near else did_you_mean(self.name, self.known)
        out += f"; known: {excerpt(', '.join(self.known), 600)}"
        return out + "; your own: a NAME.yaml in a folder on WUS_SIM_TOPOLOGY_PATH, or a path to one"


_INLINE_RE = re.compile(r"^(torus|mesh):([0-9]{1,30}(?:x[0-9]{1,30}){0,2})$")


def parse_inline(spec, *, link_GBps=None, hop_latency_us=None):
    """``torus:32x32``, ``mesh:8x8``, ``torus:4x4x4``: 1 core per chip, the ``generic`` chip's
    figures unless *link_GBps* / *hop_latency_us* are given (defaults 100 GB/s, 1 us)."""
    m = _INLINE_RE.match(spec)
    if not m:
        return None
    dims = tuple(int(d) for d in m.group(2).split("x"))
    chip = load_chips()["generic"]
    return Topology(
        name=spec, chip=chip, dims=dims, wrap=(m.group(1) == "torus",) * len(dims),
        axis_link_Bps=(link_GBps if link_GBps is not None else chip.link_Bps / GB) * GB,
        hop_latency_s=(hop_latency_us if hop_latency_us is not None else chip.hop_latency_s / US) * US,
        cores_per_chip=1, description=f"inline {spec}",
    )


MEGACORE_CHIPS_REFUSED = ("tpu-v2", "tpu-v3", "tpu7x")
"""Chips whose TensorCores never run as one device: megacore came with TPU v4 (Cloud TPU v4 docs), and
an Ironwood chip is two devices, one a chiplet (TPU7x docs: dual-chiplet architecture)."""


def _megacore_cores(topo, cores_per_chip):
    """Replicas per chip of a megacore run on *topo*: 1, one over all the chip's TensorCores."""
    if cores_per_chip is not None:
        raise ConfigError("set megacore or cores_per_chip, not both", key_path="megacore", value=True)
    chip = topo.chip
    if chip.name in MEGACORE_CHIPS_REFUSED:
        raise ConfigError(f"is a TPU v4/v5p mode; {chip.name}'s TensorCores run as separate devices (one replica "
                          "per core)", key_path="megacore", value=True)
    if chip.cores_per_chip < 2:
        raise ConfigError(f"needs a chip of several TensorCores; {chip.name} has {chip.cores_per_chip}",
                          key_path="megacore", value=True)
    return 1


def chip_megacore(topo):
    """Whether *topo*'s chip runs as one device by default (chips.yaml ``megacore``: TPU v4 and v5p)
    and the slice still holds a replica per TensorCore (a file's ``cores_per_chip: 1`` already is)."""
    chip = topo.chip
    return bool(chip.megacore) and chip.cores_per_chip > 1 and topo.cores_per_chip == chip.cores_per_chip


def megacore_hint(topo):
    """The line ``step`` and ``plan`` print on a TPU v4/v5p slice run one replica per TensorCore
    (``--no-megacore``): what a replica is, and that the default is one per chip; None elsewhere."""
    from ..inputs.units import format_bytes

    chip = topo.chip
    if chip.name in MEGACORE_CHIPS_REFUSED or chip.cores_per_chip < 2 or topo.cores_per_chip != chip.cores_per_chip:
        return None
    default = "the default, " if chip.megacore else ""
    return (f"a replica is one TensorCore ({topo.cores_per_chip} per {chip.name} chip, "
            f"{format_bytes(topo.hbm_bytes_per_replica)} of HBM each), where JAX counts the chip as one device; "
            f"--megacore ({default}point key megacore: true) runs one replica per chip over its {chip.cores_per_chip} "
            f"TensorCores with all {format_bytes(chip.hbm_bytes)}, as JAX does")


@fixed_while_running
def load_topology(spec, *, link_GBps=None, hop_latency_us=None, wraparound=None,
                  cores_per_chip=None, failed_links=None, slow_links=None, seed=None, megacore=False):
    """A :class:`Topology` from a name (file stem), a path to YAML, or an inline spec.

    The keyword overrides replace the file's values (what-if sweeps use them):
    *link_GBps* (scalar or per axis), *hop_latency_us*, *wraparound* (bool or per
    axis), *cores_per_chip*; *megacore* runs one replica per chip over all its TensorCores
    (TPU v4/v5p; not with *cores_per_chip*), ``None`` as the chip does by default (its chips.yaml
    ``megacore``: one replica per chip on v4 and v5p, as JAX counts devices, unless *cores_per_chip*
    is given); then *failed_links*, *slow_links* and *seed* as in :func:`with_link_faults`.
    The default ``False`` is the slice's hardware: one replica per TensorCore.
    """
    from ..inputs.api_args import check_bool

    megacore = check_bool(megacore, "megacore", nullable=True)
    # the overrides first: an inline spec uses two of them to build its slice
    if hop_latency_us is not None:
        hop_latency_us = _override(hop_latency_us, "hop_latency_us")
    per_axis_link = isinstance(link_GBps, (list, tuple, np.ndarray))
    if link_GBps is not None and not per_axis_link:
        link_GBps = _override(link_GBps, "link_GBps")
    if isinstance(spec, Topology):
        topo = spec
    else:
        if not isinstance(spec, (str, os.PathLike)):
            raise ConfigError("must be a topology name, a path to a topology YAML, or inline torus:16x16 / "
                              "mesh:8x8 / torus:8x8x8", key_path="topology", value=spec)
        spec = str(spec)
        topo = parse_inline(spec, link_GBps=None if per_axis_link else link_GBps, hop_latency_us=hop_latency_us)
        if topo is None:
            if spec.startswith(("torus:", "mesh:")):
                raise ConfigError("must look like torus:32x32, mesh:8x8 or torus:4x4x4 (1 to 3 axes)",
                                  key_path="topology", value=spec)
            path = Path(spec)
            if spec.endswith((".yaml", ".yml")) or os.sep in spec:
                check_file(path, what="topology file", named_by="topology")
            else:
                path = _find_file(spec)
            if isinstance(path, Topology):  # a Cloud TPU slice by its name, no file of that name
                topo = path
            else:
                st = check_file(path, what="topology file", named_by="topology")
                topo = _LOADED.get((), (str(Path(path).resolve()), st.st_mtime_ns, st.st_size, _chips_state()),
                                   lambda: _topology_from_file(path))
    changes = {}
    if link_GBps is not None:
        changes["axis_link_Bps"] = tuple(_override(v, "link_GBps", written=link_GBps) * GB
                                         for v in _per_axis(link_GBps, topo, "link_GBps"))
    if hop_latency_us is not None:
        changes["hop_latency_s"] = _override(hop_latency_us, "hop_latency_us") * US
    if wraparound is not None:
        wrap = _per_axis(wraparound, topo, "wraparound")
        if not all(isinstance(v, (bool, np.bool_)) for v in wrap):
            raise ConfigError("must be true/false, or a list of one true/false per axis", key_path="wraparound",
                              value=wraparound if not isinstance(wraparound, np.ndarray) else list(wraparound))
        changes["wrap"] = tuple(bool(v) for v in wrap)
    if megacore is None:  # the chip's default: JAX's device (a chip on v4 and v5p)
        megacore = cores_per_chip is None and chip_megacore(topo)
    if megacore:
        changes["cores_per_chip"] = _megacore_cores(topo, cores_per_chip)
    elif cores_per_chip is not None:
        changes["cores_per_chip"] = int(_override(cores_per_chip, "cores_per_chip"))
    if changes:
        # one object per slice and overrides: a sweep's points with the same link figures share it,
        # and with it everything memoized by its identity (plans, collective plans, step work)
        topo = _DERIVED.get((topo,), tuple(sorted(changes.items())), lambda: replace(topo, **changes))
    return with_link_faults(topo, failed_links, slow_links, seed)


_DERIVED = IdentityMemo(maxsize=256)
"""Slices with a point's overrides applied, by the slice and the overrides (a Topology is frozen)."""

_LOADED = IdentityMemo(maxsize=64)
"""Slices by file and modification time, and those of the chips files they read (an edited
file, or another WUS_SIM_TOPOLOGY_PATH, is read again): a sweep's points load the same few (a
Topology is frozen; the point's overrides are applied to a copy)."""


def _chips_state():
    """Which chips files :func:`load_chips` reads now, with their modification times and sizes."""
    out = []
    for d in topology_dirs():
        p = d / "chips.yaml"
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


OVERRIDE_RANGES = {"link_GBps": (False, _LINK_MAX, False), "hop_latency_us": (True, 1e6, False),
                   "cores_per_chip": (False, 64, True)}
"""Declared range of each override of :func:`load_topology`: (0 allowed, maximum, whole number).
The point parameters of the same names (``POINT_KEYS``) take their bounds from here."""


def _override(value, key, written=None):
    """An override checked against :data:`OVERRIDE_RANGES` (the Python API's, like a file's or an
    option's): a real number, not a bool or text, finite, in range; returned as a float."""
    zero_ok, maximum, whole = OVERRIDE_RANGES[key]
    least = RATE_RANGES[key][0] if key in RATE_RANGES else (1 if whole else 0)
    rule = (f"must be a {'whole number' if whole else 'number'} >= {least:g} and <= {maximum:g}")
    shown = value if written is None or isinstance(written, (int, float, str)) else written
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(rule, key_path=key, value=shown if not isinstance(shown, np.ndarray) else list(shown))
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x) or x > maximum or x < least or (x == 0 and not zero_ok) \
            or (whole and not x.is_integer()):
        raise ConfigError(rule, key_path=key, value=shown if not isinstance(shown, np.ndarray) else list(shown))
    return x


def _per_axis(value, topo, key):
    """An override given for every axis at once (a scalar) or one per axis: a list of exactly
    ``topo.ndim`` values (a shorter list is not spread over the axes; that hides a typo)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) != topo.ndim:
            raise ConfigError(f"must be one value for every axis or a list of {topo.ndim} (one per axis of "
                              f"{topo.name}, {'x'.join(map(str, topo.dims))})", key_path=key, value=list(value))
        return list(value)
    return [value] * topo.ndim


def _topology_from_file(path):
    doc = Section(load_yaml(path), file=path)
    TOPOLOGY_KEYS.check(doc)
    read = lambda key: TOPOLOGY_KEYS.read(doc, key) if key in doc else None
    chips = load_chips()
    chip_name = doc.string("chip", choices=sorted(chips))  # TOPOLOGY_KEYS["chip"]: the known chips
    chip = chips[chip_name]
    dims = doc.list("chips_per_axis")
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise doc.error("chips_per_axis", "must be a list of 1 to 3 whole numbers >= 1", dims)
    wrap = doc.get("wraparound")
    if isinstance(wrap, bool):
        wrap = [wrap] * len(dims)
    if not isinstance(wrap, list) or len(wrap) != len(dims) or any(not isinstance(w, bool) for w in wrap):
        raise doc.error("wraparound", f"must be true/false or a list of {len(dims)} of them", wrap)
    written = doc.get("link_GBps")
    if written is not None:
        # the message quotes the value as written: a scalar, not the per-axis list made of it
        link = written if isinstance(written, list) else [written] * len(dims)
        if len(link) != len(dims) or any(isinstance(b, bool) or not isinstance(b, (int, float))
                                         or not _LINK_MIN <= b <= _LINK_MAX for b in link):
            raise doc.error("link_GBps", f"must be a number >= {_LINK_MIN:g} and <= {_LINK_MAX:g} or a list of "
                                         f"{len(dims)} of them", written)
        link = tuple(b * GB for b in link)
    else:
        link = None
    try:
        return Topology(
            name=doc.string("name", Path(path).stem),
            chip=chip,
            dims=tuple(dims),
            wrap=tuple(wrap),
            axis_link_Bps=link,
            hop_latency_s=read("hop_latency_us") * US if "hop_latency_us" in doc else None,
            onchip_Bps=read("onchip_GBps") * GB if "onchip_GBps" in doc else None,
            cores_per_chip=read("cores_per_chip"),
            description=TOPOLOGY_KEYS.read(doc, "description"),
            sources=sources_of(doc),
        )
    except ConfigError as exc:
        if exc.file:
            raise
        # The slice's own checks (size limits) speak of the slice: say which file and key.
        key = {"topology": "chips_per_axis", "dims": "chips_per_axis"}.get(exc.key_path, exc.key_path)
        raise doc.error(key, exc.rule, exc.value) from None
