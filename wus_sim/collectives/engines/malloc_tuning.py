"""Let the process keep the memory it frees between window-engine runs (glibc only).

Why: a window-engine run builds a plan's schedule and tables from cold caches (a 2048-chip
all-reduce has 267k nodes: arrays of a few MiB each, some hundred MiB written in a step) and
frees them when the caches are cleared. glibc's defaults hand such blocks back to the system
(``munmap``, or trimming the heap's top past twice the largest block freed so far), so the
next run asks for them again and the system maps and zeroes every page a second time: on the
1-failed-cable step that was ~13,000 page faults a run, some 15% of its CPU time. Raising the
two thresholds keeps blocks up to :data:`MMAP_THRESHOLD_BYTES` in the heap and lets it keep up
to :data:`TRIM_THRESHOLD_BYTES` free at its top, so a run reuses the pages the previous one
freed. The cost is resident memory: the process keeps up to that much it no longer uses (what
Python allocates, which ``bench --memory`` reports, is unchanged). Nothing simulated changes.

Elsewhere than glibc (musl, macOS, Windows) this does nothing.
"""

import ctypes
import platform

__all__ = ["MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "keep_freed_memory"]

MMAP_THRESHOLD_BYTES = 32 << 20
"""Blocks up to this size come from the heap instead of their own mapping (glibc's dynamic
threshold grows to at most this too; fixing it stops the growth from being undone)."""
TRIM_THRESHOLD_BYTES = 256 << 20
"""Free memory the heap keeps at its top before giving it back (measured on the
1-failed-cable step: 128 MiB still left a few hundred faults a run, 256 MiB none to speak of)."""

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3

_state = {"done": False}


def keep_freed_memory():
    """Set glibc's thresholds once per process (see the module docstring); later calls, and
    calls on another C library, do nothing. Returns whether glibc took both settings."""
    if _state["done"]:
        return _state.get("set", False)
    _state["done"] = True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _state["set"] = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    return _state["set"]
