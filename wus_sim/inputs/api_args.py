"""Arguments of the Python API, held to the rules files and the command line are held to.

A YAML file cannot say ``True`` where it means 1, or ``'true'`` where it means a boolean; a
Python caller can, and Python's own duck typing would let ``jobs=True`` run one worker and
``megacore='true'`` switch megacore on. Every public function checks its plain arguments here
instead, so a wrong type or value is a :class:`~wus_sim.inputs.errors.ConfigError` naming the
argument, never an AttributeError, a TypeError or a silently accepted value:

* a bool is not a whole number or a number (``True`` is not 1), and text is neither a number
  nor a boolean (``'true'`` is not ``True``);
* numpy scalars follow their value: ``np.int64(3)`` is the whole number 3, ``np.float64(0.5)``
  a number, ``np.bool_(True)`` a boolean (a sweep's values often come out of numpy);
* a number is finite; a whole number given as a float must be whole (``2.0``, not ``1.5``).
"""

import math
import numbers
import os

from .errors import ConfigError

__all__ = ["plain", "check_int", "check_number", "check_bool", "check_path", "check_keywords"]


def plain(value):
    """*value* with a numpy scalar turned into the Python value it holds (else unchanged)."""
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    return value


def check_int(value, name, *, minimum=None, maximum=None, nullable=False):
    """*value* as a Python int in ``[minimum, maximum]``; else a ConfigError naming *name*."""
    raw, value = value, plain(value)
    if value is None and nullable:
        return None

    def bad():  # the rule is written only for an error (a sweep checks at every point)
        rule = "must be a whole number" + _bounds(minimum, maximum) + (" (or None)" if nullable else "")
        return ConfigError(rule, key_path=name, value=raw)

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad()
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise bad()
        value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise bad()
    return value


def check_number(value, name, *, minimum=None, maximum=None, positive=False, nullable=False):
    """*value* as a finite Python float in range; else a ConfigError naming *name*."""
    raw, value = value, plain(value)
    if value is None and nullable:
        return None

    def bad():  # the rule is written only for an error (a sweep checks at every point)
        rule = ("must be a finite number" + _bounds(minimum, maximum, positive)
                + (" (or None)" if nullable else ""))
        return ConfigError(rule, key_path=name, value=raw)

    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise bad()
    try:
        value = float(value)
    except (OverflowError, ValueError, TypeError):
        raise bad() from None
    if (not math.isfinite(value) or (positive and not value > 0) or (minimum is not None and value < minimum)
            or (maximum is not None and value > maximum)):
        raise bad()
    return value


def check_bool(value, name, *, nullable=False):
    """*value* as a Python bool (``True``/``False`` or a numpy bool only)."""
    raw, value = value, plain(value)
    if value is None and nullable:
        return None
    if not isinstance(value, bool):
        raise ConfigError("must be True or False" + (" (or None)" if nullable else ""), key_path=name, value=raw)
    return value


def check_path(value, name, *, nullable=False):
    """*value* as a file name (``str`` or a path-like object, not empty)."""
    if value is None and nullable:
        return None
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text:
            return value
    raise ConfigError("must be a file name (a str or a pathlib.Path, not empty)", key_path=name, value=value)


def check_keywords(given, known, what):
    """Refuse keyword arguments not in *known*: one ConfigError naming the first, with the closest."""
    from .errors import did_you_mean

    for key in given:
        if key not in known:
            raise ConfigError(f"is not a keyword of {what}{did_you_mean(str(key), known)}; known: "
                              f"{', '.join(sorted(known))}", key_path=str(key))


def _bounds(minimum, maximum, positive=False):
    parts = (["> 0"] if positive else []) \
        + ([f">= {minimum:g}" if isinstance(minimum, float) else f">= {minimum:,}"] if minimum is not None else []) \
        + ([f"<= {maximum:g}" if isinstance(maximum, float) else f"<= {maximum:,}"] if maximum is not None else [])
    return (" " + " and ".join(parts)) if parts else ""
