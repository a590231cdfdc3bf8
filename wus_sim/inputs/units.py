"""Units and their conversion, done once at the boundary.

Conventions used everywhere in wus-sim:

* GB and GB/s are 10**9 bytes (and bytes per second); MB = 10**6, KB = 10**3.
* KiB, MiB, GiB, TiB are 2**10, 2**20, 2**30, 2**40 bytes.
* Inside the code every quantity is SI: bytes, seconds, bytes/s, FLOP/s.
  Names carry the unit (``nbytes``, ``t_s``, ``bw_Bps``); YAML keys carry the
  unit the user writes (``link_GBps``, ``hop_latency_us``).
"""

import re

from .errors import ConfigError
from .limits import MAX_SIZE_BYTES

__all__ = [
    "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
    "US", "NS", "MS",
    "parse_size", "format_bytes", "format_time",
    "DTYPE_BYTES", "GRAD_DTYPES", "GRAD_DTYPE_SPELLINGS", "grad_dtype_short", "grad_dtype_bytes",
    "grad_dtype_of_bytes",
]

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
NS, US, MS = 1e-9, 1e-6, 1e-3

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": KB, "mb": MB, "gb": GB, "tb": TB,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
}
# A bare letter (64M) or an IEC prefix without its B (64Mi) is refused: tools disagree on it
# (`dd` and `numfmt --from=iec` read M as 2^20, SI and disk vendors as 10^6), and a size
# that is silently 4.9 % off moves every bandwidth figure. The error names both readings.
_BARE_PREFIXES = {"k": 1, "m": 2, "g": 3, "t": 4, "ki": 1, "mi": 2, "gi": 3, "ti": 4}
"""Refused suffix -> power: binary 2^(10*power), decimal 10^(3*power)."""
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text, *, name="size"):
    """Return a byte count from ``67108864`` (bytes), ``64MiB`` (2^20 steps) or ``1.5GB`` (10^3 steps).

    The grammar: a number, then nothing (bytes) or one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB
    (any letter case). Raises :class:`ConfigError` naming *name* if *text* does not parse, uses a
    bare ``M``/``G``-style suffix (the message says which size was probably meant), is not
    positive, or is not a whole number of bytes.
    """
    if isinstance(text, bool):
        raise ConfigError("must be a size such as 67108864, 64MiB or 1.5GB", key_path=name, value=text)
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise ConfigError("must be a size such as 67108864, 64MiB or 1.5GB", key_path=name, value=text)
        value, unit = float(m.group(1)), m.group(2).lower()
        if unit in _BARE_PREFIXES:
            raise ConfigError(_bare_suffix_rule(m.group(1), m.group(2)), key_path=name, value=text)
        if unit not in _SIZE_UNITS:
            raise ConfigError(
                f"has unknown unit {m.group(2)!r}; use B, KB, MB, GB, TB (10^3 steps) or KiB, MiB, GiB, TiB (2^10 steps)",
                key_path=name, value=text)
    nbytes = value * _SIZE_UNITS[unit]
    if not nbytes <= MAX_SIZE_BYTES:  # also inf and nan (1e400 parses as inf)
        raise ConfigError(f"must be at most {MAX_SIZE_BYTES // 2**50} PiB", key_path=name, value=text)
    if nbytes <= 0:
        raise ConfigError("must be > 0 bytes", key_path=name, value=text)
    if abs(nbytes - round(nbytes)) > 1e-6 * max(1.0, nbytes):
        raise ConfigError("must be a whole number of bytes", key_path=name, value=text)
    return int(round(nbytes))


def _bare_suffix_rule(number, suffix):
    """The rule for a refused bare suffix: both readings, the binary one (the old one) first."""
    power = _BARE_PREFIXES[suffix.lower()]
    letter = "KMGT"[power - 1]
    binary, decimal = float(number) * 2 ** (10 * power), float(number) * 10 ** (3 * power)
    return (f"is ambiguous ({suffix!r} has no B); probably meant {number}{letter}iB = {binary:,.0f} bytes "
            f"(2^{10 * power} steps, how a bare {letter} used to read), else {number}{letter}B = "
            f"{decimal:,.0f} bytes (10^{3 * power} steps)")


def format_bytes(nbytes):
    """Human-readable bytes in binary units (``'64.0 MiB'``)."""
    n = float(nbytes)
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}" if n / scale < 100 else f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def format_time(t_s):
    """Human-readable seconds (``'1.23 ms'``)."""
    t = float(t_s)
    for unit, scale in (("s", 1.0), ("ms", MS), ("us", US), ("ns", NS)):
        if abs(t) >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t:.3g} s"


# ================================================================ dtypes
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per element of the dtypes a workload file may name."""

GRAD_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
"""Gradient dtypes on the wire: short name (the ``grad_dtype`` point key's values) -> dtype name."""

GRAD_DTYPE_SPELLINGS = tuple(GRAD_DTYPES) + tuple(GRAD_DTYPES.values())
"""Every accepted spelling of a gradient dtype, short names first (``--grad-dtype`` choices)."""


def grad_dtype_short(name):
    """The short name (``fp32``/``bf16``) of a gradient dtype given either way; raises ConfigError."""
    for short, long in GRAD_DTYPES.items():
        if name in (short, long):
            return short
    raise ConfigError("must be " + ", ".join(f"{s} ({l})" for s, l in GRAD_DTYPES.items()), key_path="grad_dtype",
                      value=name)


def grad_dtype_bytes(name):
    """Bytes per element of a gradient dtype given either way (``fp32`` or ``float32``)."""
    return DTYPE_BYTES[GRAD_DTYPES[grad_dtype_short(name)]]


def grad_dtype_of_bytes(nbytes):
    """The short name of a gradient width in bytes (its number as text if none has it)."""
    return next((s for s, l in GRAD_DTYPES.items() if DTYPE_BYTES[l] == nbytes), str(nbytes))
