"""How a point parameter's value reads to a person: in a figure's legend, title or subtitle, and in
`wus-sim run`'s summary.

A truth value is yes or no (or the words of its key: a wraparound is ``torus`` or ``mesh``), a
list its items, a missing value "default", a workload, topology or optimizer given by path the
``name`` in its file; never a Python repr (``True``, ``[False, True]``, ``None``). Moved here from
wus_sim/plotting/labels.py, which keeps what a plot's series, groups and axes are called.
"""

from functools import lru_cache
from pathlib import Path

__all__ = ["display_value", "value_text", "is_truth_value", "NAMED_KEYS", "BOOL_WORDS", "AXIS_LETTERS"]


def value_text(value):
    """*value* as a figure writes it: never a Python repr (``True``, ``[False, True]``, ``None``):
    a truth value is yes or no, a list its items, a missing value "default"."""
    if is_truth_value(value):
        return "yes" if _truth(value) else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) for v in value)
    if value is None:
        return "default"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}" if value == value else "default"
    if type(value).__name__ in ("int64", "int32", "float64", "float32"):  # numpy scalars
        return value_text(value.item())
    text = str(value)
    flags = _bool_list(text)
    return ", ".join("yes" if f else "no" for f in flags) if flags else text


def is_truth_value(value):
    """Whether *value* is a truth value: a bool, numpy's, or its text read back from a file."""
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool") or (isinstance(value, str)
                                                                          and value.lower() in ("true", "false"))


def _truth(value):
    return value.lower() == "true" if isinstance(value, str) else bool(value)


def _bool_list(text):
    """The truth values of *text* if it is a Python list of them (a per-axis wraparound read back
    from results.csv: ``"[False, True]"``), else None."""
    import re

    if not re.fullmatch(r"\[\s*(true|false)(\s*,\s*(true|false))*\s*\]|(true|false)(\s*,\s*(true|false))+",
                        text.strip(), re.I):
        return None  # a list's repr, or its items joined by commas ("false,true")
    return [word.lower() == "true" for word in re.findall(r"true|false", text, re.I)]


AXIS_LETTERS = "xyzw"
"""Names of a slice's axes in a figure (axis 0 is x), as a per-axis value is spelled."""


def _wraparound_text(value):
    """A wraparound as the docs spell a slice: ``torus`` (every axis wraps), ``mesh`` (none), or per
    axis, ``wraparound x, y, z: no, no, yes``."""
    flags = value if isinstance(value, (list, tuple)) else (_bool_list(str(value)) if isinstance(value, str) else None)
    if flags is None:
        return None if not is_truth_value(value) else ("torus" if _truth(value) else "mesh")
    flags = [_truth(f) for f in flags]
    if all(flags):
        return "torus"
    if not any(flags):
        return "mesh"
    axes = ", ".join(AXIS_LETTERS[i] if i < len(AXIS_LETTERS) else str(i) for i in range(len(flags)))
    return f"wraparound {axes}: {', '.join('yes' if f else 'no' for f in flags)}"


NAMED_KEYS = ("workload", "topology", "optimizer")
"""Parameters whose value may be a path to a file: a figure shows the file's ``name``."""


def display_value(key, value):
    """*value* as a figure shows it: a file given by path by its ``name`` (a whole path in a
    legend or subtitle hides the only part that means anything), else :func:`value_text`."""
    if key in NAMED_KEYS and isinstance(value, str) and _is_path(value):
        return _file_name(key, value)
    if key == "wraparound":
        text = _wraparound_text(value)
        if text is not None:
            return text
    if key in BOOL_WORDS and is_truth_value(value):
        return BOOL_WORDS[key][not _truth(value)]
    return value_text(value)


def _is_path(text):
    import os

    return text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text


@lru_cache(maxsize=256)
def _file_name(key, path):
    """The ``name`` of the workload, topology or optimizer file at *path*; its stem when it no
    longer loads (results read back after the file has gone)."""
    from ..inputs.errors import WusError

    try:
        if key == "workload":
            from ..model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too

            return load_workload(path).name
        if key == "topology":
            from ..hardware.multislice import load_multislice

            topology, multislice = load_multislice(path)
            return (multislice or topology).name
        from ..optimizers import load_optimizer

        return load_optimizer(path).name
    except (WusError, OSError):
        return Path(path).stem


BOOL_WORDS = {"wraparound": ("torus", "mesh"), "bidirectional": ("bidirectional", "unidirectional"),
              "overlap_grad_reduce": ("overlapped reduce", "reduce after backward"),
              "overlap_all_gather": ("overlapped gather", "gather at step end"),
              "keep_gathered_weights": ("weights kept for backward", "weights re-gathered for backward"),
              "shard_across_slices": ("sharded across slices", "sharded within each slice")}
