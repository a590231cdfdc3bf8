"""Key tables: the keys of an input file, each with its type, default, unit and rule, in one place.

A loader checks a YAML mapping against a :class:`KeyTable` (unknown keys are errors,
required keys must be there) and reads its plain values through the table, so the
bounds and defaults it applies are the ones the table states. The same tables are
turned into the format references (``docs/formats/*.md``) and the editor JSON Schemas
(``wus_sim/schemas/formats/*.json``) by :mod:`wus_sim.docs`: documentation and
validation cannot drift apart, because there is only one description to change::

    CHIP_KEYS = KeyTable("chip", [
        Key("cores_per_chip", "integer", "TensorCores per chip.", required=True, minimum=1),
        Key("link_GBps", "number", "ICI bandwidth per link and direction.", unit="GB/s",
            required=True, positive=True),
    ])
    CHIP_KEYS.check(sec)                        # unknown / missing keys
    bw = CHIP_KEYS.read(sec, "link_GBps") * GB  # bounds from the table

Compound values (lists of ``[name, shape, layer]`` rows, per-axis lists) keep their own
checks in the loader; their entry here states the rule in words (``rule``) and in JSON
Schema (``schema``), and the loader's tests hold the two to the same cases.
"""

from dataclasses import dataclass, field

__all__ = ["Key", "KeyTable"]

_SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


@dataclass(frozen=True)
class Key:
    """One key of an input mapping."""

    name: str
    type: str
    """``string``, ``integer``, ``number``, ``boolean`` (read by :meth:`KeyTable.read`), or a
    compound type, ``mapping``, ``list`` or an alternative in words (``number or list``):
    checked by the loader and described by *rule* and *schema* (or *table*)."""
    meaning: str
    required: bool = False
    default: object = None
    """Value when absent (``None``: no default, or one the loader derives, see *default_text*)."""
    default_text: str = ""
    """The default in words when it is not a constant (``"the file's stem"``)."""
    unit: str = ""
    """Unit the user writes (``GB/s``, ``us``, ``GiB``); '' for counts, names and flags."""
    minimum: float = None
    maximum: float = None
    positive: bool = False
    """Must be > 0."""
    choices: tuple = None
    rule: str = ""
    """The rule in words for a compound value (the scalar rules are derived)."""
    schema: dict = None
    """JSON Schema of a compound value (scalars get theirs from type and bounds); a function
    returning it when building it needs imports the loader should not pay for."""
    table: "KeyTable" = field(default=None, repr=False)
    """For a ``mapping`` with fixed keys, or a ``list`` of such mappings: their table."""

    def rule_text(self):
        """The rule in words, for the reference and for error messages."""
        if self.rule:
            return self.rule
        if self.table is not None:
            return "a mapping (keys below)" if self.type == "mapping" else "a list of mappings (keys below)"
        text = {"string": "a string", "integer": "a whole number", "number": "a number",
                "boolean": "true or false"}.get(self.type, f"a {self.type}")
        if self.choices:
            text = "one of " + ", ".join(map(str, self.choices))
        bounds = (["> 0"] if self.positive else []) \
            + ([f">= {_num(self.minimum)}"] if self.minimum is not None else []) \
            + ([f"<= {_num(self.maximum)}"] if self.maximum is not None else [])
        return text + (" " + " and ".join(bounds) if bounds else "")

    def json_schema(self):
        """The JSON Schema of this key's value."""
        if self.schema is not None:
            out = dict(self.schema() if callable(self.schema) else self.schema)
        elif self.table is not None and self.type == "mapping":
            out = self.table.json_schema()
        elif self.table is not None and self.type == "list":
            out = {"type": "array", "items": self.table.json_schema()}
        elif self.type in _SCALARS:
            out = {"type": _SCALARS[self.type]}
            if self.choices:
                out["enum"] = list(self.choices)
            if self.positive:
                out["exclusiveMinimum"] = 0
            if self.minimum is not None:
                out["minimum"] = self.minimum
            if self.maximum is not None:
                out["maximum"] = self.maximum
        else:
            out = {}
        description = self.meaning + (f" Unit: {self.unit}." if self.unit else "")
        out = {"description": description, **out}
        if self.default is not None:
            out["default"] = self.default
        return out


def _num(x):
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


class KeyTable:
    """The keys of one mapping of an input file, in documentation order."""

    def __init__(self, name, keys, *, meaning="", extra=None):
        self.name = name
        """What the mapping is (``topology file``, ``chip``, ``fwd_flops``), for the reference."""
        self.keys = {k.name: k for k in keys}
        """Key name -> :class:`Key`, in documentation order."""
        self.meaning = meaning
        """One paragraph on the mapping as a whole."""
        self.extra = extra
        """JSON Schema of values under keys the table does not list (``None``: such keys are
        errors); for mappings keyed by user names, like chips.yaml's chip names."""

    def __getitem__(self, name):
        return self.keys[name]

    def __iter__(self):
        return iter(self.keys.values())

    @property
    def required(self):
        """Names of the required keys."""
        return [k.name for k in self if k.required]

    @property
    def optional(self):
        """Names of the optional keys."""
        return [k.name for k in self if not k.required]

    def check(self, sec):
        """Unknown keys and missing required keys of the :class:`~wus_sim.inputs.config.Section` *sec* are errors."""
        sec.check_keys(required=self.required, optional=self.optional)

    def read(self, sec, name):
        """The scalar value of key *name* in *sec*, checked against the table's rule, or its
        default when absent (a missing required key, or one without default, is an error)."""
        key = self.keys[name]
        if key.type == "number":
            return sec.number(name, key.default, positive=key.positive, minimum=key.minimum, maximum=key.maximum)
        if key.type == "integer":
            return sec.integer(name, key.default, minimum=key.minimum, maximum=key.maximum)
        if key.type == "string":
            return sec.string(name, key.default, choices=key.choices)
        if key.type == "boolean":
            return sec.boolean(name, key.default)
        raise AssertionError(f"{self.name}.{name} is a {key.type}: the loader reads it itself")

    def json_schema(self):
        """JSON Schema (draft 2020-12) of the mapping: its keys, required ones, nothing else."""
        out = {"type": "object", "properties": {k.name: k.json_schema() for k in self}}
        if self.meaning:
            out = {"description": self.meaning, **out}
        if self.required:
            out["required"] = self.required
        out["additionalProperties"] = False if self.extra is None else self.extra
        return out
