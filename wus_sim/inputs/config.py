"""Strict loading of YAML inputs, with errors that name file, key path, value and rule.

Every spec (topology, workload, optimizer, experiment) is read through
:func:`load_yaml` and checked with a :class:`Section`, which remembers where it
is (file and key path) so that every error says exactly what to fix::

    sec = Section(doc, file="topologies/tpu-v3-32.yaml")
    sec.check_keys(required={"chips"}, optional={"wraparound", "source"})
    bw = sec.number("link_GBps", positive=True)
    chip = sec.section("chip")          # nested, key path "chip"
    cores = chip.integer("cores_per_chip", minimum=1)
"""

import copy
from functools import lru_cache
import math
import os
from pathlib import Path
import re

import yaml

from .errors import ConfigError, did_you_mean
from .files import read_text as _read_text
from .limits import MAX_FILE_BYTES, MAX_WHOLE_NUMBER, MAX_YAML_DEPTH, MAX_YAML_NODES
from .text import excerpt, short_repr

__all__ = ["is_file", "present", "read_text", "load_yaml", "parse_yaml", "Section", "key_join"]


def key_join(path, key):
    """Join a key path: ``key_join('sweep', 'bw')`` -> ``'sweep.bw'``; ints index lists."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def is_file(path):
    """Whether *path* names a regular file; False, not an exception, for a name the OS refuses
    (too long, a NUL byte, a component that is not a directory, no permission)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def present(path):
    """Whether something (a file, folder, FIFO, device, even a link to nothing) has the name
    *path*: a search finds a name with it, and reading it then says what is wrong with it, rather
    than skipping it to an "unknown name" or a shipped file of the same name."""
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):
        return False


def read_text(path, *, what="file", named_by=None):
    """The text of *path*, decoded as UTF-8, read through :func:`~wus_sim.inputs.files.read_text`
    (a regular file only, at most :data:`~wus_sim.inputs.limits.MAX_FILE_BYTES`); every failure is
    a one-line ConfigError naming the file (and *named_by*, the option or key that named it)."""
    return _read_text(path, what=what, named_by=named_by, limit=MAX_FILE_BYTES)


def load_yaml(path, *, what="YAML file", named_by=None):
    """Parse a YAML file into Python objects, strictly: UTF-8, safe tags only, no duplicate
    keys, no anchors or aliases, nesting and size bounded. Every failure is a ConfigError
    that names the file and never quotes its contents beyond the YAML parser's position."""
    path = Path(path)
    return parse_yaml(read_text(path, what=what, named_by=named_by), file=path)


def parse_yaml(text, *, file=None):
    """*text* parsed as :func:`load_yaml` parses a file's (the same rules); errors name *file*."""
    path = file
    try:
        # parsed once per content (a sweep loads the same workload for every point); callers
        # get their own copy, so one that edits the document cannot change the next one's
        doc = copy.deepcopy(_parse(text))
    except _Refused as exc:
        raise ConfigError(exc.rule, file=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"is not valid YAML: {where}{problem}", file=path) from None
    except (ValueError, OverflowError) as exc:
        # e.g. an integer literal of more than 4,300 digits (Python refuses to convert it)
        raise ConfigError(f"holds a value that cannot be read: {type(exc).__name__}", file=path) from None
    except RecursionError:
        raise ConfigError(f"nests too deep (limit {MAX_YAML_DEPTH} levels)", file=path) from None
    return {} if doc is None else doc


@lru_cache(maxsize=64)
def _parse(text):
    doc = _parse_with_libyaml(text)
    if doc is not _UNSURE:
        return doc
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 -- a SafeLoader subclass


_UNSURE = object()


def _parse_with_libyaml(text):
    """*text* parsed by libyaml (PyYAML's C parser) where that is surely what :class:`_StrictLoader`
    returns, else ``_UNSURE`` (then the strict loader parses it, and says what is wrong).

    Why: the pure-Python parser takes about 40 ms for a 20 KB workload file, libyaml a tenth of
    that, and a cold step reads a workload, a calibration and a slice. The rules hold on this
    path too: libyaml's events are scanned first (no anchor or alias, nodes and nesting within
    the limits, with a level to spare), and the document is built by the same constructor, which
    refuses duplicate and merge keys (anything it refuses goes to the strict loader for the message)."""
    if _FastStrictLoader is None:
        return _UNSURE
    try:
        nodes = depth = 0
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            kind = event.__class__
            if kind is yaml.AliasEvent or getattr(event, "anchor", None) is not None:
                return _UNSURE
            if kind in _OPENS:
                nodes += 1
                depth += 1
                if depth + 1 >= MAX_YAML_DEPTH:
                    return _UNSURE
            elif kind in _CLOSES:
                depth -= 1
            elif kind is yaml.ScalarEvent:
                nodes += 1
        if nodes >= MAX_YAML_NODES:
            return _UNSURE
        return yaml.load(text, Loader=_FastStrictLoader)  # noqa: S506 -- a CSafeLoader subclass
    except Exception:  # any error or refusal: the strict loader's own message
        return _UNSURE


_OPENS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSES = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class _Refused(Exception):
    def __init__(self, rule):
        super().__init__(rule)
        self.rule = rule


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors/aliases and duplicate keys and bounds nesting and size.

    Why refuse aliases instead of bounding their expansion: no shipped file uses them, and a
    few aliases of aliases ("billion laughs") expand to 10^10 items that any later step (a
    check, an error message) may walk; refusing costs users nothing and closes that door.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(f"uses a YAML alias (*{excerpt(event.anchor, 30)}, line {event.start_mark.line + 1}); "
                           "aliases and anchors are not allowed: write the value out")
        event = self.peek_event()
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"uses a YAML anchor (&{excerpt(event.anchor, 30)}, line {event.start_mark.line + 1}); "
                           "aliases and anchors are not allowed: write the value out")
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise _Refused(f"has more than {MAX_YAML_NODES:,} YAML values (the limit)")
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(f"nests deeper than {MAX_YAML_DEPTH} levels (line {event.start_mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        _refuse_merge_and_repeated_keys(self, node)
        return super().construct_mapping(node, deep=deep)


def _refuse_merge_and_repeated_keys(loader, node):
    """A mapping node's keys, refused where one is a merge key ``<<``, a list or mapping, or set twice."""
    seen = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            raise _Refused(f"uses a YAML merge key '<<' (line {key_node.start_mark.line + 1}); write the keys out")
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:
            raise _Refused(f"has a mapping key that is a list or mapping (line {key_node.start_mark.line + 1})") \
                from None
        if first is not None:
            raise _Refused(f"sets the key {short_repr(key, 40)} twice in one mapping (lines {first} and "
                           f"{key_node.start_mark.line + 1}); each key may appear once")
        seen[key] = key_node.start_mark.line + 1


# YAML 1.2 reads 1e2, 1.0e5 and .5e-3 as numbers; PyYAML's YAML 1.1 resolver reads them as text (it
# wants a dot and a signed exponent), so `link_GBps: 1e2` was "text, not a number (write it without
# quotes)". The editor schemas (JSON, YAML 1.2) take them as numbers: so does the loader.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


if getattr(yaml, "__with_libyaml__", False):
    class _FastStrictLoader(yaml.CSafeLoader):
        """libyaml's parser with :class:`_StrictLoader`'s constructor rules and resolvers."""

        def construct_mapping(self, node, deep=False):
            _refuse_merge_and_repeated_keys(self, node)
            return super().construct_mapping(node, deep=deep)

    _FastStrictLoader.yaml_implicit_resolvers = {k: list(v) for k, v in _StrictLoader.yaml_implicit_resolvers.items()}
else:  # PyYAML built without libyaml: the strict loader alone
    _FastStrictLoader = None


class Section:
    """A mapping read from a file, with its location for error messages."""

    def __init__(self, data, *, file=None, path=""):
        self.file = None if file is None else str(file)
        """File the data came from (``None`` for inline/CLI input)."""
        self.path = path
        """Key path of this mapping inside the file (``''`` at top level)."""
        if not isinstance(data, dict):
            if not path:
                # The whole file is not a mapping: name the file, never quote it (it may be any file).
                raise ConfigError("is not a file of the expected kind: its top level must be a YAML mapping "
                                  f"of keys to values, not a {_kind(data)}", file=self.file)
            raise ConfigError("must be a mapping of keys to values", file=self.file,
                              key_path=path or None, value=data)
        self.data = data
        """The raw mapping."""

    def error(self, key, rule, value=None, show_value=True):
        """A ConfigError located at *key* inside this section."""
        return ConfigError(rule, file=self.file, key_path=key_join(self.path, key),
                           value=value, show_value=show_value)

    def __contains__(self, key):
        return key in self.data

    def keys(self):
        return self.data.keys()

    def check_keys(self, *, required=(), optional=()):
        """Unknown keys and missing required keys are errors."""
        allowed = set(required) | set(optional)
        if not self.path and self.data and not any(_hashable(k) and k in allowed for k in self.data):
            # Not one known key: probably a file of another kind (or not a spec at all), so it is
            # named, not quoted -- its first line may be anything (a password file's, say).
            raise ConfigError("is not a file of the expected kind: none of its top-level keys is a known "
                              f"key ({', '.join(sorted(allowed))})", file=self.file)
        for key in self.data:
            if key not in allowed:
                # the key as written, cut to an excerpt: it is input (a 10,000-character key)
                shown = excerpt(key) if isinstance(key, str) else key if isinstance(key, int) else short_repr(key)
                hint = did_you_mean(key, allowed) if isinstance(key, str) else ""
                raise self.error(shown, f"is not a known key here{hint}; known keys: {', '.join(sorted(allowed))}",
                                 show_value=False)
        for key in required:
            if key not in self.data:
                raise ConfigError(f"missing required key {key!r}", file=self.file,
                                  key_path=self.path or None)

    def get(self, key, default=None):
        return self.data.get(key, default)

    def section(self, key, default=None):
        """The nested mapping at *key* as a Section (``default`` if absent)."""
        if key not in self.data:
            if default is None:
                raise ConfigError(f"missing required key {key!r}", file=self.file, key_path=self.path or None)
            return Section(default, file=self.file, path=key_join(self.path, key))
        return Section(self.data[key], file=self.file, path=key_join(self.path, key))

    def number(self, key, default=None, *, positive=False, minimum=None, maximum=None):
        """A real number, checked against the bounds given."""
        value = self.data.get(key, default)
        if value is None:
            raise ConfigError(f"missing required key {key!r}", file=self.file, key_path=self.path or None)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, "must be a number", value)
        if not _finite(value):
            raise self.error(key, "must be a finite number", value)
        if positive and not value > 0:
            raise self.error(key, "must be > 0", value)
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}", value)
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be <= {maximum}", value)
        return float(value)

    def integer(self, key, default=None, *, minimum=None, maximum=None):
        """A whole number, checked against the bounds given (and never over
        :data:`~wus_sim.inputs.limits.MAX_WHOLE_NUMBER`, which a float holds exactly)."""
        maximum = MAX_WHOLE_NUMBER if maximum is None else min(maximum, MAX_WHOLE_NUMBER)
        value = self.data.get(key, default)
        if value is None:
            raise ConfigError(f"missing required key {key!r}", file=self.file, key_path=self.path or None)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, "must be a whole number", value)
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}", value)
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be <= {'2^53' if maximum == MAX_WHOLE_NUMBER else maximum}", value)
        return value

    def boolean(self, key, default=None):
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, "must be true or false", value)
        return value

    def string(self, key, default=None, *, choices=None):
        value = self.data.get(key, default)
        if value is None:
            raise ConfigError(f"missing required key {key!r}", file=self.file, key_path=self.path or None)
        if not isinstance(value, str):
            raise self.error(key, "must be a string", value)
        if choices is not None and value not in choices:
            raise self.error(key, f"must be one of {', '.join(map(str, choices))}", value)
        return value

    def list(self, key, default=None):
        value = self.data.get(key, default)
        if value is None:
            raise ConfigError(f"missing required key {key!r}", file=self.file, key_path=self.path or None)
        if not isinstance(value, list):
            raise self.error(key, "must be a list", value)
        return value


def _finite(value):
    """Whether a YAML number is finite and fits a float (10^400 as an int does not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _hashable(key):
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _kind(data):
    return {str: "text string", list: "list", int: "number", float: "number", bool: "boolean"}.get(type(data),
                                                                                           type(data).__name__)
