"""Strict JSON: what every JSON input (``config.json``, safetensors headers and indexes, run
files) is read with, and the one switch every ``--json`` writer uses.

Python's :func:`json.loads` accepts what JSON does not (``NaN``, ``Infinity``, ``-Infinity``),
keeps the last of a key set twice, turns ``1e400`` into ``inf``, converts integers of any length
(a 4,300-digit one raises ``ValueError`` and takes quadratic time before), recurses once per level
of nesting (``RecursionError`` near 1,000) and keeps lone UTF-16 surrogates (``"\\ud800"``) that
no file or terminal can encode later. :func:`loads_strict` refuses each of these with one line
naming the file and, where there is one, the key. :func:`dumps_strict` is ``json.dumps`` with
``allow_nan=False``: a NaN or infinity in an output is an error in the program, never a token a
JSON parser rejects.
"""

import json

from .errors import ConfigError
from .limits import MAX_JSON_DEPTH, MAX_JSON_INT_DIGITS

__all__ = ["loads_strict", "dumps_strict", "nan_to_null"]


class _Refused(Exception):
    def __init__(self, rule, key=None):
        super().__init__(rule)
        self.rule, self.key = rule, key


def _constant(name):
    raise _Refused(f"holds {name}, which is not JSON (numbers must be finite)")


def _int(text):
    if len(text.lstrip("-")) > MAX_JSON_INT_DIGITS:
        raise _Refused(f"holds an integer of {len(text.lstrip('-')):,} digits (limit {MAX_JSON_INT_DIGITS})")
    return int(text)


def _float(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"holds a number too large for a float ({text[:40]})")
    return value


def _pairs(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _Refused("is set twice (a key may appear once)", key)
        out[key] = value
    return out


def loads_strict(text, *, file=None, what="JSON file", max_depth=MAX_JSON_DEPTH):
    """Parse *text* (``str`` or UTF-8 ``bytes``) as strict JSON; every refusal is a one-line
    ConfigError naming *file* (see the module docstring)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"is not {what} (not UTF-8 at byte {exc.start})", file=file) from None
    try:
        doc = json.loads(text, parse_constant=_constant, parse_int=_int, parse_float=_float,
                         object_pairs_hook=_pairs)
    except _Refused as exc:
        raise ConfigError(exc.rule, file=file,
                          key_path=None if exc.key is None else _key(exc.key)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"is not {what}: {exc.msg} at line {exc.lineno}, column {exc.colno}", file=file) from None
    except RecursionError:
        raise ConfigError(f"is not {what}: nests deeper than {max_depth} levels", file=file) from None
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"is not {what}: {type(exc).__name__}", file=file) from None
    _check_tree(doc, file, what, max_depth)
    return doc


def _key(key):
    from .text import excerpt

    return excerpt(key.encode("utf-8", "backslashreplace").decode("utf-8"), 60)


def _check_tree(doc, file, what, max_depth):
    """Depth and strings, walked without recursion (the parse already bounded the depth below
    the interpreter's limit; this bounds it to what a program that recurses can take)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > max_depth:
                raise ConfigError(f"is not {what}: nests deeper than {max_depth} levels", file=file)
            items = node.items() if isinstance(node, dict) else ((None, v) for v in node)
            for key, value in items:
                if key is not None:
                    _check_string(key, file, what)
                stack.append((value, depth + 1))
        elif isinstance(node, str):
            _check_string(node, file, what)


def _check_string(s, file, what):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"is not {what}: a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not "
                          "text", file=file) from None


def dumps_strict(doc, **kwargs):
    """``json.dumps(doc, allow_nan=False, **kwargs)``: the writer of every ``--json`` output. A
    value JSON cannot carry (NaN, an infinity) is one line, never a ``NaN`` token in the output."""
    try:
        return json.dumps(doc, allow_nan=False, **kwargs)
    except ValueError:
        raise ConfigError("cannot represent the result as JSON: a value is not finite (NaN or infinity); the "
                          "inputs are outside what the simulator represents (see docs/limits.md)") from None


def nan_to_null(doc):
    """*doc* with every float NaN (pandas' "missing") as ``None``, which JSON writes ``null``."""
    if isinstance(doc, dict):
        return {k: nan_to_null(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [nan_to_null(v) for v in doc]
    if isinstance(doc, float) and doc != doc:
        return None
    return doc
