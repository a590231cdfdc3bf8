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

from pathlib import Path

import yaml

from .errors import ConfigError

__all__ = ["load_yaml", "Section", "key_join"]


def key_join(path, key):
    """Join a key path: ``key_join('sweep', 'bw')`` -> ``'sweep.bw'``; ints index lists."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def load_yaml(path):
    """Parse a YAML file into Python objects; a missing file or a syntax error is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError("file not found", file=path) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror}", file=path) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"is not valid YAML: {where}{problem}", file=path) from None
    return {} if doc is None else doc


class Section:
    """A mapping read from a file, with its location for error messages."""

    def __init__(self, data, *, file=None, path=""):
        self.file = None if file is None else str(file)
        """File the data came from (``None`` for inline/CLI input)."""
        self.path = path
        """Key path of this mapping inside the file (``''`` at top level)."""
        if not isinstance(data, dict):
            raise ConfigError("must be a mapping of keys to values", file=self.file,
                              key_path=path or None, value=_short(data))
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
        for key in self.data:
            if key not in allowed:
                raise self.error(key, f"is not a known key here; known keys: {', '.join(sorted(allowed))}",
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
        if positive and not value > 0:
            raise self.error(key, "must be > 0", value)
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}", value)
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be <= {maximum}", value)
        return float(value)

    def integer(self, key, default=None, *, minimum=None, maximum=None):
        """A whole number, checked against the bounds given."""
        value = self.data.get(key, default)
        if value is None:
            raise ConfigError(f"missing required key {key!r}", file=self.file, key_path=self.path or None)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, "must be a whole number", value)
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}", value)
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be <= {maximum}", value)
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
            raise self.error(key, "must be a list", _short(value))
        return value


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
