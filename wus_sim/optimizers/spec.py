"""Optimizer specs: the YAML file format, its strict parser, and composition with prefixes.

An optimizer file (``wus_sim/data/optimizers/adam.yaml``, or any path)::

    description: Adam (Kingma & Ba 2015) ...
    sources: {rule: "Kingma & Ba, arXiv 1412.6980, Algorithm 1"}
    hyper:              # scalar hyper-parameters and their defaults
      lr: 1.0e-3
      b1: 0.9
    program:            # statements, in order (see wus_sim.optimizers.language)
      - m = b1*m + (1 - b1)*g
      - w = w - lr*m

Instead of ``program``, ``cases`` gives one program per range of tensor rank
(Adafactor factors matrices but keeps a full second moment for vectors)::

    cases:
      - min_rank: 2
        program: [...]
      - max_rank: 1
        program: [...]

Every rank 0, 1, 2, ... must fall in exactly one case. ``kind: prefix`` marks a
gradient transform (global-norm clipping) that is composed in front of an
optimizer by name, ``adam+clip``: the prefix's statements run first, on every
tensor, and re-bind ``g`` for the optimizer's statements; its names that clash
with the optimizer's are renamed ``<prefix>_<name>``.
"""

from dataclasses import dataclass, field, replace
import keyword
import math

from ..inputs.config import Section
from ..inputs.errors import ConfigError
from ..inputs.keys import Key, KeyTable
from ..inputs.limits import MAX_STATEMENTS
from .dataflow import FlowError, flow
from .language import (INPUTS, REDUCTIONS, RESERVED, LanguageError, Op, Statement, names_read,
                       parse_statement, rename, walk)

__all__ = ["Case", "Optimizer", "parse_optimizer", "compose", "KINDS", "OPTIMIZER_KEYS"]

KINDS = ("optimizer", "prefix")
"""``optimizer``: updates ``w``; ``prefix``: transforms ``g`` before an optimizer runs."""

_RANK_LIMIT = 64
"""Largest rank a case bound may name (tensors have rank <= 8 in practice)."""

_PROGRAM = {"type": "array", "minItems": 1, "items": {"type": "string"}}

_CASE_KEYS = KeyTable("case", [
    Key("min_rank", "integer", "Smallest tensor rank the case covers.", default=0, minimum=0, maximum=_RANK_LIMIT),
    Key("max_rank", "integer", "Largest tensor rank the case covers.", default_text="no upper bound",
        minimum=0, maximum=_RANK_LIMIT),
    Key("description", "string", "One line on the case.", default=""),
    Key("program", "list", "Statements run on tensors of these ranks, in order (the language of "
        "wus_sim/data/optimizers/README.md).", required=True, rule="a non-empty list of statements",
        schema=_PROGRAM),
], meaning="The program run on tensors whose rank is in [min_rank, max_rank]. Every rank 0, 1, 2, ... must "
           "fall in exactly one case.")

OPTIMIZER_KEYS = KeyTable("optimizer file", [
    Key("name", "string", "Optimizer name.", default_text="the file's stem"),
    Key("kind", "string", "optimizer (updates w) or prefix (transforms g in front of an optimizer, composed "
        "by name: adam+clip).", default="optimizer", choices=KINDS),
    Key("description", "string", "What the optimizer does, in a few lines.", default=""),
    Key("sources", "mapping, list or string", "Citations: topic -> citation, a list, or one string.",
        rule="a mapping of topic to citation, a list, or a string",
        schema={"oneOf": [{"type": "object", "additionalProperties": {"type": "string"}},
                          {"type": "array", "items": {"type": "string"}}, {"type": "string"}]}),
    Key("hyper", "mapping", "Scalar hyper-parameters and their default values (name -> number).",
        default_text="none", rule="a mapping of names (letters, digits, '_'; not an input or reserved name) "
                                  "to numbers",
        schema={"type": "object", "additionalProperties": {"type": "number"}}),
    Key("program", "list", "Statements run on every tensor, in order; give this or cases.",
        rule="a non-empty list of statements", schema=_PROGRAM),
    Key("cases", "list", "Programs by tensor rank (not for a prefix); give this or program.", table=_CASE_KEYS),
], meaning="An optimizer's update as a program over the tensor's elements: exactly one of program or cases.")
"""Keys of an optimizer file (read by :func:`parse_optimizer`)."""


@dataclass(frozen=True)
class Case:
    """The program run on tensors whose rank is in ``[min_rank, max_rank]``."""

    min_rank: int
    max_rank: int | None
    """``None``: no upper bound."""
    statements: tuple
    key_path: str = ""
    """Where the case is in its file (``'cases[0]'``; ``''`` for a top-level program)."""

    def covers(self, rank):
        return self.min_rank <= rank and (self.max_rank is None or rank <= self.max_rank)

    @property
    def label(self):
        """``'rank >= 2'``, ``'rank <= 1'``, ``'rank 1..3'`` or ``'any rank'``."""
        if self.max_rank is None:
            return "any rank" if self.min_rank == 0 else f"rank >= {self.min_rank}"
        if self.min_rank == 0:
            return f"rank <= {self.max_rank}"
        return f"rank {self.min_rank}..{self.max_rank}"


@dataclass(frozen=True)
class Optimizer:
    """A parsed optimizer program (build with :func:`wus_sim.optimizers.load_optimizer`)."""

    name: str
    kind: str
    """One of :data:`KINDS`."""
    description: str
    hyper: dict
    """Hyper-parameter name -> default value (float)."""
    cases: tuple
    """One or more :class:`Case`, covering every rank once."""
    sources: dict = field(default_factory=dict, compare=False)
    """Citation per topic, from the file."""
    file: str | None = field(default=None, compare=False)
    """File the spec came from (``None`` if composed or built in code)."""
    parts: tuple = ()
    """For a composed optimizer: the prefixes then the base, e.g. ``('clip', 'adam')``."""

    def case_for(self, rank):
        """The :class:`Case` that runs on tensors of this rank."""
        for case in self.cases:
            if case.covers(rank):
                return case
        raise AssertionError(f"no case covers rank {rank}")  # parse_optimizer checks coverage

    @property
    def primary_case(self):
        """The case for matrices (rank 2): where almost all parameters of a model live."""
        return self.case_for(2)

    def to_doc(self):
        """A YAML-ready mapping that :func:`parse_optimizer` reads back to an equal program."""
        doc = {"name": self.name, "kind": self.kind, "description": self.description}
        if self.sources:
            doc["sources"] = dict(self.sources)
        doc["hyper"] = dict(self.hyper)
        if len(self.cases) == 1 and self.cases[0].min_rank == 0 and self.cases[0].max_rank is None:
            doc["program"] = [str(s) for s in self.cases[0].statements]
        else:
            doc["cases"] = []
            for case in self.cases:
                entry = {"min_rank": case.min_rank}
                if case.max_rank is not None:
                    entry["max_rank"] = case.max_rank
                entry["program"] = [str(s) for s in case.statements]
                doc["cases"].append(entry)
        return doc


def parse_optimizer(doc, *, name, file=None):
    """Build an :class:`Optimizer` from a parsed YAML mapping; every error is a ConfigError.

    *name* is used unless the document has a ``name`` key (the file stem, usually).
    """
    sec = Section(doc, file=file)
    OPTIMIZER_KEYS.check(sec)
    if ("program" in sec) == ("cases" in sec):
        raise ConfigError("needs exactly one of 'program' (one program for every tensor) or "
                          "'cases' (programs by tensor rank)", file=file)
    name = sec.string("name", name)
    kind = OPTIMIZER_KEYS.read(sec, "kind")
    description = OPTIMIZER_KEYS.read(sec, "description")
    sources = sec.get("sources", {}) or {}
    if not isinstance(sources, (dict, list, str)):
        raise sec.error("sources", "must be a mapping of topic to citation, a list, or a string", sources)
    if isinstance(sources, list):
        sources = {str(i): str(s) for i, s in enumerate(sources)}
    elif isinstance(sources, str):
        sources = {"source": sources}
    hyper = _hyper(sec)

    if "program" in sec:
        cases = [Case(0, None, _statements(sec, "program"), key_path="")]
    else:
        if kind == "prefix":
            raise sec.error("cases", "is not allowed for a prefix; give one 'program'", show_value=False)
        cases = _cases(sec)
    for case in cases:
        _check_flow(case, hyper, file, require_w=(kind == "optimizer"))
    _check_global_reductions(cases, file)
    return Optimizer(name=name, kind=kind, description=description, hyper=hyper,
                     cases=tuple(cases), sources=dict(sources), file=file, parts=(name,))


def _hyper(sec):
    hyper_sec = sec.section("hyper", {})
    hyper = {}
    for key in hyper_sec.keys():
        if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
            raise hyper_sec.error(key, "is not a valid name (letters, digits, '_')", show_value=False)
        if key in INPUTS or key in RESERVED or key.startswith("_"):
            raise hyper_sec.error(key, f"cannot be a hyper-parameter name: it is "
                                  f"{'an input' if key in INPUTS else 'reserved'}", show_value=False)
        value = hyper_sec.get(key)
        if isinstance(value, str):
            # PyYAML reads 1e-3 (no dot) as a string (YAML 1.1); accept what is plainly a number.
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                hyper[key] = number
                continue
        hyper[key] = hyper_sec.number(key)
    return hyper


def _statements(sec, key):
    items = sec.list(key)
    if not items:
        raise sec.error(key, "must list at least one statement", items)
    if len(items) > MAX_STATEMENTS:
        raise sec.error(key, f"has {len(items):,} statements; the limit is {MAX_STATEMENTS:,} per program",
                        show_value=False)
    out = []
    for i, text in enumerate(items):
        try:
            stmt = parse_statement(text)
        except LanguageError as exc:
            raise ConfigError(str(exc), file=sec.file, key_path=_path(sec.path, key, i), value=text) from None
        out.append(replace(stmt, key_path=_path(sec.path, key, i)))
    return tuple(out)


def _path(base, key, i):
    return f"{base + '.' if base else ''}{key}[{i}]"


def _cases(sec):
    items = sec.list("cases")
    if not items:
        raise sec.error("cases", "must list at least one case", items)
    cases = []
    for i, item in enumerate(items):
        path = f"cases[{i}]"
        csec = Section(item, file=sec.file, path=path)
        _CASE_KEYS.check(csec)
        _CASE_KEYS.read(csec, "description")
        lo = _CASE_KEYS.read(csec, "min_rank")
        hi = _CASE_KEYS.read(csec, "max_rank") if "max_rank" in csec else None
        if hi is not None and hi < lo:
            raise csec.error("max_rank", f"must be >= {lo} (min_rank)", hi)
        cases.append(Case(lo, hi, _statements(csec, "program"), key_path=path))
    for rank in range(_RANK_LIMIT + 2):
        covering = [c for c in cases if c.covers(rank)]
        if len(covering) != 1:
            which = ", ".join(c.key_path for c in covering) or "no case"
            raise ConfigError(f"tensors of rank {rank} match {which}; every rank must match exactly one case "
                              "(use min_rank/max_rank)", file=sec.file, key_path="cases")
    return cases


def _check_flow(case, hyper, file, require_w):
    try:
        flow(case.statements, hyper, min_rank=case.min_rank, require_w=require_w)
    except FlowError as exc:
        if exc.index is None:
            where = f"{case.key_path}.program" if case.key_path else "program"
            raise ConfigError(str(exc), file=file, key_path=where) from None
        stmt = case.statements[exc.index]
        raise ConfigError(str(exc), file=file, key_path=stmt.key_path, value=stmt.text or str(stmt)) from None


def _global_reductions(case):
    return [(s.target, str(s)) for s in case.statements
            if any(isinstance(n, Op) and REDUCTIONS.get(n.op) and REDUCTIONS[n.op].over == "global"
                   for n in walk(s.expr))]


def _check_global_reductions(cases, file):
    # A global reduction combines every tensor of the model, whatever its case: the
    # statements that contain one must be the same, in the same order, in every case.
    first = _global_reductions(cases[0])
    for case in cases[1:]:
        if _global_reductions(case) != first:
            raise ConfigError("global reductions (global_norm, global_sum) must appear in the same "
                              "statements, in the same order, in every case", file=file,
                              key_path=case.key_path)


def compose(base, prefixes):
    """``base`` with the :class:`Optimizer` prefixes run first (in the order given).

    Names of a prefix (hyper-parameters, slots, temporaries) that clash with names
    already used are renamed ``<prefix>_<name>``; ``w``, ``g`` and ``t`` are shared.
    """
    if base.kind != "optimizer":
        raise ConfigError(f"is a {base.kind}, not an optimizer; combine it as e.g. adam+{base.name}",
                          key_path="optimizer", value=base.name)
    used = set(base.hyper) | {n for c in base.cases for s in c.statements
                              for n in [s.target, *names_read(s.expr)]}
    hyper = {}
    front = []
    seen = set()
    for p in prefixes:
        if p.kind != "prefix":
            raise ConfigError("is an optimizer, not a prefix; only one optimizer may be named, first "
                              "(e.g. adam+clip)", key_path="optimizer", value=p.name)
        if p.name in seen:
            raise ConfigError("is listed twice", key_path="optimizer", value=p.name)
        seen.add(p.name)
        own = set(p.hyper) | {n for s in p.cases[0].statements for n in [s.target, *names_read(s.expr)]}
        mapping = {}
        for n in sorted(own - set(INPUTS)):
            if n in used:
                new, k = f"{p.name}_{n}", 2
                while new in used or new in own:
                    new, k = f"{p.name}_{n}{k}", k + 1
                mapping[n] = new
        used |= {mapping.get(n, n) for n in own}
        hyper.update({mapping.get(k, k): v for k, v in p.hyper.items()})
        front += [Statement(mapping.get(s.target, s.target), rename(s.expr, mapping),
                            text=s.text if not mapping else "", key_path=f"{p.name}:{s.key_path}")
                  for s in p.cases[0].statements]
    hyper.update(base.hyper)
    cases = tuple(replace(c, statements=tuple(front) + c.statements) for c in base.cases)
    names = [p.name for p in prefixes]
    description = base.description
    for p in prefixes:
        description += f" Gradients first go through {p.name}: {p.description}"
    sources = dict(base.sources)
    for p in prefixes:
        sources.update({f"{p.name}: {k}": v for k, v in p.sources.items()})
    out = Optimizer(name="+".join([base.name, *names]), kind="optimizer", description=description,
                    hyper=hyper, cases=cases, sources=sources, file=None, parts=(*names, base.name))
    for case in out.cases:
        _check_flow(case, hyper, None, require_w=True)
    return out
