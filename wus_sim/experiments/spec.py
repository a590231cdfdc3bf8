"""Experiment files: the point-parameter table, strict validation and sweep expansion.

An experiment YAML names what to simulate and which parameters to sweep; it
only refers to workloads, topologies and optimizers by name::

    name: quickstart                      # default: the file's stem
    description: Speedup of sharded over replicated weight update.
    workloads: [resnet50, transformer-big] # sweep axis 'workload'
    topologies: [tpu-v3-32, tpu-v3-512]    # sweep axis 'topology'
    optimizers: [adam, lars]               # sweep axis 'optimizer'
    strategies: [replicated, sharded]      # one point simulates both ('both'; 'all' adds fully-sharded)
    base:                                  # fixed point parameters
      per_replica_batch: 16
    sweep:                                 # axes: cartesian product ...
      link_GBps: [50, 100, 200]
      zip:                                 # ... except zip groups, which vary together
        - topology: [tpu-v3-32, tpu-v3-128]
          global_batch: [4096, 16384]
    reduce:                                # the reduced form (tests, --reduced): keep only
      topology: [tpu-v3-32]                #   points whose value is listed
    plots:
      - kind: speedup                      # options are checked by wus_sim.plotting
        name: speedup

Every point parameter, its type, default, unit and rule is in ONE table,
:data:`POINT_KEYS`; ``wus_sim.step.simulate_point`` accepts exactly those keys
and the results table documents them from the same entries. Points always
carry every key (defaults filled in), so a point's hash names it completely.
``None`` (YAML ``null``) means "the model's own default" (the workload's
optimizer and gradient dtype, the topology's link bandwidth, ...).
"""

from dataclasses import dataclass, field
import hashlib
import itertools
import json
import math
import os
from pathlib import Path

from ..config import Section, is_file, key_join, load_yaml
from ..errors import ConfigError, UnknownNameError
from ..keys import Key, KeyTable
from ..limits import MAX_STEPS, MAX_SWEEP_POINTS, check_limit
from ..shipped import shipped_dir

__all__ = [
    "Param", "POINT_KEYS", "EXPERIMENT_KEYS", "STRATEGY_CHOICES", "Axis", "PlotSpec", "Experiment",
    "load_experiment", "find_experiment", "known_experiments", "parse_experiment", "check_point_value", "check_param", "complete_point",
    "point_hash", "strategies_of",
]

STRATEGY_CHOICES = ("replicated", "sharded", "fully-sharded", "both", "all")
"""Values of the ``strategy`` key; ``both`` simulates replicated and sharded (the paper's pair) and
reports the speedup, ``all`` every strategy with each one's speedup over replicated."""

_STRATEGY_SETS = {"both": ("replicated", "sharded"), "all": ("replicated", "sharded", "fully-sharded")}
"""What ``both`` and ``all`` name, in report order."""

def _algorithms():
    """Collective algorithms of the collective engine (imported when a point is checked)."""
    from ..collectives import ALGORITHMS

    return tuple(ALGORITHMS)


def _routings():
    """Routing modes of the network model (imported when a point is checked)."""
    from ..network import ROUTINGS

    return tuple(ROUTINGS)


# ---------------------------------------------------------------- name checks
def _existing_path(text, base_dir):
    """*text* as an existing YAML file (relative to cwd, then to *base_dir*), or None."""
    if not text.endswith((".yaml", ".yml")) and "/" not in text:
        return None
    for candidate in (Path(text), (Path(base_dir) / text) if base_dir else None):
        if candidate is not None and is_file(candidate):
            return candidate if candidate == Path(text) else candidate.resolve()
    raise ConfigError("file not found", value=text)


def _check_workload(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a workload name or a path to a workload YAML file", value=value)
    path = _existing_path(value, base_dir)
    if path is not None:
        return str(path)
    from ..workloads import known_workloads

    if value not in known_workloads():
        raise UnknownNameError("workload", value, known_workloads())
    return value


def _check_optimizer(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be an optimizer name (adam, adam+clip) or a path to an optimizer YAML file",
                          value=value)
    path = _existing_path(value, base_dir)
    from ..optimizers import load_optimizer

    # Loading checks compositions (adam+clip) and files the same way the simulator will read them.
    try:
        load_optimizer(str(path) if path is not None else value)
    except ConfigError as exc:
        raise ConfigError(exc.rule, value=exc.value if exc.value is not None else value) from None
    return str(path) if path is not None else value


def _check_topology(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a topology name, a path, or inline torus:16x16 / mesh:8x8 / torus:8x8x8",
                          value=value)
    from ..topology import known_topologies, parse_inline

    if value.startswith(("torus:", "mesh:")):
        if parse_inline(value) is None:
            raise ConfigError("must look like torus:32x32, mesh:8x8 or torus:4x4x4 (1 to 3 axes)", value=value)
        return value
    path = _existing_path(value, base_dir)
    if path is not None:
        return str(path)
    if value not in known_topologies():
        raise UnknownNameError("topology", value, known_topologies())
    return value


def _check_calibration(value, base_dir):
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a calibration name (default, none) or a path to a calibration YAML", value=value)
    path = _existing_path(value, base_dir)
    from ..calibration import load_calibration

    load_calibration(str(path) if path is not None else value)
    return str(path) if path is not None else value


def _check_failed_links(value, base_dir):
    """A count K (random cables) or a cable list; which chips exist is checked when the
    point's topology is loaded."""
    from ..topology import MAX_RANDOM_CABLES, split_cables

    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= MAX_RANDOM_CABLES:
            raise ConfigError(f"must be a count from 0 to {MAX_RANDOM_CABLES} or cables such as 12+x,40-y",
                              value=value)
        return value
    if not isinstance(value, str):
        raise ConfigError("must be a count K or comma-separated cables such as 12+x,40-y", value=value)
    split_cables(value, key_path=None)
    return value.strip()


def _check_slow_links(value, base_dir):
    from ..topology import split_slow_links

    head, _ = split_slow_links(value if isinstance(value, str) else repr(value))
    try:
        _check_failed_links(head, base_dir)
    except ConfigError as exc:
        raise ConfigError(exc.rule, value=value) from None
    return value.strip()


# ---------------------------------------------------------------- the table
@dataclass(frozen=True)
class Param:
    """One point parameter: its type, default, unit and rule."""

    name: str
    kind: str
    """``'name'`` (checked by *check*), ``'choice'``, ``'int'``, ``'number'``, ``'bool'``,
    ``'wrap'`` (a bool, or one bool per torus axis)."""
    default: object = None
    """Value when the experiment does not set it; ``None`` = the model's own default."""
    meaning: str = ""
    """One line for columns.md: what the parameter is, and what ``None`` means."""
    unit: str = ""
    """The unit the user writes (and that the results column carries)."""
    required: bool = False
    nullable: bool = True
    """Whether ``null`` is allowed (it means the model's default)."""
    choices: object = None
    """Tuple of allowed values, or a function returning it (``'choice'``)."""
    minimum: float = None
    maximum: float = None
    positive: bool = False
    check: object = field(default=None, compare=False)
    """``check(value, base_dir) -> value`` for names; raises ConfigError/UnknownNameError."""
    rule_text: str = None
    """The rule in words of a ``'name'`` parameter that is not a name (``failed_links``)."""

    def rule(self):
        """The rule in words, for error messages and columns.md."""
        if self.rule_text:
            text = self.rule_text
        elif self.kind == "choice":
            text = "one of " + ", ".join(self._choices())
        elif self.kind == "int":
            text = "a whole number"
        elif self.kind == "number":
            text = "a number"
        elif self.kind == "bool":
            text = "true or false"
        elif self.kind == "wrap":
            text = "true/false, or a list with one true/false per torus axis"
        else:
            text = f"{'an' if self.name[0] in 'aeiou' else 'a'} {self.name} name or path"
        bounds = []
        if self.positive:
            bounds.append("> 0")
        if self.minimum is not None:
            bounds.append(f">= {_bound(self.minimum)}")
        if self.maximum is not None:
            bounds.append(f"<= {_bound(self.maximum)}")
        if bounds:
            text += " " + " and ".join(bounds)
        if self.nullable and not self.required:
            text += " (or null)"
        return text

    def _choices(self):
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def json_schema(self):
        """JSON Schema of one value of this parameter (what ``base`` may set it to)."""
        if self.kind == "choice":
            out = {"enum": list(self._choices())}
        elif self.kind in ("int", "number"):
            out = {"type": "integer" if self.kind == "int" else "number"}
            if self.positive:
                out["exclusiveMinimum"] = 0
            if self.minimum is not None:
                out["minimum"] = self.minimum
            if self.maximum is not None:
                out["maximum"] = self.maximum
        elif self.kind == "bool":
            out = {"type": "boolean"}
        elif self.kind == "wrap":
            out = {"oneOf": [{"type": "boolean"},
                             {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}]}
        elif self.rule_text:  # a count or a list in words (failed_links: 2 or "12+x,40-y")
            out = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}]}
        else:
            out = {"type": "string", "minLength": 1}
        if self.nullable and not self.required:
            out = {"anyOf": [out, {"type": "null"}]}
        text = self.meaning + (f" Unit: {self.unit}." if self.unit else "")
        return {"description": text, **out} if self.default is None else \
            {"description": text, **out, "default": self.default}


def _bound(x):
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _table(*params):
    return {p.name: p for p in params}


POINT_KEYS = _table(
    Param("workload", "name", required=True, nullable=False,
          meaning="Workload profile: a shipped name (see `wus-sim describe workload`) or a path to a workload YAML.",
          check=_check_workload),
    Param("topology", "name", required=True, nullable=False,
          meaning="TPU slice: a shipped name (tpu-v3-512), a path, or inline torus:16x16 / mesh:8x8 / "
                  "torus:8x8x8 (1 core per chip, generic chip).",
          check=_check_topology),
    Param("optimizer", "name",
          meaning="Optimizer (see `wus-sim describe optimizer`); null = the workload's default.",
          check=_check_optimizer),
    Param("strategy", "choice", default="both", nullable=False, choices=STRATEGY_CHOICES,
          meaning="Weight-update strategy simulated for the point; 'both' (replicated and sharded) and 'all' "
                  "(adds fully-sharded) give one row each and the speedup of each over replicated."),
    Param("per_replica_batch", "int", minimum=1, maximum=2**24, unit="examples",
          meaning="Examples per replica per step; null = global_batch / replicas, else the MLPerf v0.6 run's "
                  "on that slice, else the workload's default."),
    Param("global_batch", "int", minimum=1, maximum=2**31, unit="examples",
          meaning="Examples per step over all replicas (must divide by the replicas); set this or "
                  "per_replica_batch, not both."),
    Param("link_GBps", "number", positive=True, maximum=1e6, unit="GB/s",
          meaning="ICI bandwidth per link and direction (10^9 B/s); null = the topology's."),
    Param("hop_latency_us", "number", minimum=0, maximum=1e6, unit="us",
          meaning="Latency per ICI hop; null = the topology's."),
    Param("wraparound", "wrap",
          meaning="Wraparound links per torus axis (true = torus ring, false = mesh line); null = the topology's."),
    Param("cores_per_chip", "int", minimum=1, maximum=64,
          meaning="Cores (replicas) per chip; null = the topology's."),
    Param("algorithm", "choice", default="2d", nullable=False, choices=_algorithms,
          meaning="Collective algorithm of the gradient reduction and weight all-gather."),
    Param("bidirectional", "bool",
          meaning="Run each ring phase in both directions at once (half the data each way); null = yes for "
                  "ring algorithms (TPU all-reduces use both link directions). A mesh axis keeps its one folded "
                  "ring either way: it already uses both directions of every link."),
    Param("routing", "choice", default="store-and-forward", nullable=False, choices=_routings,
          meaning="Network routing: store-and-forward (each hop receives the whole message first) or "
                  "cut-through (the head moves on at once; differs on multi-hop edges, e.g. mesh folded rings)."),
    Param("bucket_MiB", "number", positive=True, maximum=2**20, unit="MiB",
          meaning="Gradient fusion bucket size (2^20 B); null = the planner's default."),
    Param("overlap_grad_reduce", "bool", default=True, nullable=False,
          meaning="Start each bucket's gradient reduction as soon as backward has produced it."),
    Param("overlap_all_gather", "bool", default=True, nullable=False,
          meaning="Sharded: overlap the weight all-gather with the next step's forward "
                  "(false: at the end of the step)."),
    Param("gather_prefetch", "int", default=1, minimum=0, maximum=2**20, nullable=False, unit="buckets",
          meaning="Fully-sharded: buckets whose weight all-gather may run ahead of the compute (0 = each gather "
                  "waits until its bucket is needed); each one more holds one more bucket of full weights."),
    Param("keep_gathered_weights", "bool", default=False, nullable=False,
          meaning="Fully-sharded: keep each bucket's gathered weights from its forward to its backward (one "
                  "all-gather per bucket instead of two; every bucket's full weights live at the end of forward)."),
    Param("grad_dtype", "choice", choices=("fp32", "bf16"),
          meaning="Gradient dtype on the wire (bf16 halves collective bytes); null = the workload's."),
    Param("mxu_efficiency", "number", positive=True, maximum=1,
          meaning="Fraction of matrix-unit peak reached by forward/backward; null = the compute model's default."),
    Param("steps", "int", default=3, minimum=2, maximum=MAX_STEPS, nullable=False, unit="steps",
          meaning="Consecutive training steps simulated; the step time is the steady-state period."),
    Param("bn_group_replicas", "int", default=1, minimum=1, nullable=False, unit="replicas",
          meaning="Cross-replica batch norm: replicas that all-reduce their batch statistics in every "
                  "batch-norm layer (1 = local batch norm)."),
    Param("slices", "int", minimum=1, maximum=1024, unit="slices",
          meaning="Multislice: identical slices of `topology` joined by the data-center network (DCN); replicas = "
                  "slices x replicas per slice; null = the topology file's `multislice.slices`, else 1."),
    Param("dcn_GBps", "number", positive=True, maximum=1e6, unit="GB/s",
          meaning="Multislice: DCN bandwidth per chip, one direction (10^9 B/s); null = the topology file's, else "
                  "the chip's default (wus_sim.multislice.DCN_DEFAULTS, with sources). Unused with one slice."),
    Param("dcn_latency_us", "number", minimum=0, maximum=1e6, unit="us",
          meaning="Multislice: latency of one DCN exchange; null = the topology file's, else 10 us (an "
                  "assumption: no published figure). Unused with one slice."),
    Param("shard_across_slices", "bool", default=True, nullable=False,
          meaning="Multislice, sharded update: shard over every replica of every slice (DCN reduce-scatter and "
                  "all-gather); false: within each slice only (DCN all-reduce, every slice updates its copy)."),
    Param("failed_links", "name", rule_text="a count K, or comma-separated cables CHIP+AXIS such as 12+x,40-y",
          meaning="Failed ICI cables (both directions down): K chosen at random (seeded by seed), or a list "
                  "(12+x: the cable from chip 12 to its +x neighbour); routes detour around them; null = none.",
          check=_check_failed_links),
    Param("slow_links", "name", rule_text="LIST:FACTOR or K:FACTOR with FACTOR >= 1, e.g. 12+x,40-y:4 or 2:4",
          meaning="Slowed ICI cables: both directions run at their bandwidth / FACTOR; the cables as in "
                  "failed_links (K random ones are drawn after the failed ones, among the rest); null = none.",
          check=_check_slow_links),
    Param("seed", "int", minimum=0, maximum=2**53,
          meaning="Seed of numpy.random.default_rng that draws the K random failed and slow cables; null = 0."),
    Param("calibration", "name",
          meaning="Calibrated chip parameters: a shipped name, a path, or 'none' for the uncalibrated physics; "
                  "null = the shipped default calibration.",
          check=_check_calibration),
)
"""Every key a point may have, in column order. ``wus_sim.step.simulate_point`` accepts exactly these."""


def check_point_value(key, value, *, file=None, key_path=None, base_dir=None):
    """Validate *value* for point parameter *key*; return it normalised.

    Errors name *file*, *key_path* (default: *key*), the value and the rule.
    """
    key_path = key_path or key
    param = POINT_KEYS.get(key)
    if param is None:
        raise ConfigError(f"is not a point parameter; known: {', '.join(POINT_KEYS)}",
                          file=file, key_path=key_path)
    return check_param(param, value, file=file, key_path=key_path, base_dir=base_dir)


def check_param(param, value, *, file=None, key_path=None, base_dir=None):
    """Validate *value* against *param*'s kind and declared range (the one check that
    YAML points and command-line options alike go through); return it normalised."""
    key_path = key_path or param.name
    raw = value

    def bad(rule=None):
        return ConfigError(f"must be {rule or param.rule()}", file=file, key_path=key_path, value=raw)

    if value is None:
        if param.required or not param.nullable:
            raise bad()
        return None
    kind = param.kind
    if kind == "name":
        try:
            return param.check(value, base_dir)
        except ConfigError as exc:
            shown = exc.value if exc.value is not None else value  # e.g. the bad part of 'clip+adam'
            raise ConfigError(exc.rule, file=file, key_path=key_path, value=shown) from None
        except UnknownNameError as exc:
            raise ConfigError(f"is not a known {exc.kind}; known: {', '.join(exc.known)}",
                              file=file, key_path=key_path, value=value) from None
    if kind == "choice":
        if not _hashable(value) or value not in param._choices():
            raise bad()
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if kind == "wrap":
        if isinstance(value, bool):
            return value
        if (isinstance(value, list) and 1 <= len(value) <= 3
                and all(isinstance(v, bool) for v in value)):
            return list(value)
        raise bad()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad()
    if not _finite(value):
        raise bad("a finite number")
    if kind == "int":
        if isinstance(value, float):
            if not value.is_integer():
                raise bad()
            value = int(value)
    else:
        value = float(value)
    if param.positive and not value > 0:
        raise bad()
    if param.minimum is not None and value < param.minimum:
        raise bad()
    if param.maximum is not None and value > param.maximum:
        raise bad()
    return value


def _finite(value):
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int such as 10**400
        return False


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def complete_point(values):
    """A full point: every key of :data:`POINT_KEYS` in table order, defaults filled in."""
    unknown = set(values) - set(POINT_KEYS)
    if unknown:
        raise ConfigError(f"unknown point parameters {sorted(unknown)}; known: {', '.join(POINT_KEYS)}")
    return {key: values.get(key, param.default) for key, param in POINT_KEYS.items()}


def point_hash(point):
    """Stable 16-hex-digit id of a point's parameters (key order does not matter)."""
    text = json.dumps(point, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def strategies_of(point):
    """The strategies a point simulates: ``('replicated', 'sharded')`` for ``'both'``, every
    strategy for ``'all'``."""
    strategy = point.get("strategy", "both")
    return _STRATEGY_SETS.get(strategy, (strategy,))


# ---------------------------------------------------------------- experiments
@dataclass(frozen=True)
class Axis:
    """A sweep axis group: one key, or several keys that vary together (a zip group)."""

    keys: tuple
    values: tuple
    """One tuple of values per key, all the same length."""
    where: tuple
    """Key path of each key in the file (for error messages)."""

    def __len__(self):
        return len(self.values[0])

    def rows(self):
        """One ``{key: value}`` dict per position along the axis."""
        return [dict(zip(self.keys, combo)) for combo in zip(*self.values)]


@dataclass(frozen=True)
class PlotSpec:
    """A plot the experiment asks for; its options are checked by :mod:`wus_sim.plotting`."""

    kind: str
    name: str
    """File stem of the PNG/SVG written beside the results."""
    options: dict
    section: Section = field(repr=False, compare=False)
    """The YAML mapping it came from (for errors naming file and key path)."""


@dataclass(frozen=True)
class Experiment:
    """A validated experiment: fixed parameters, sweep axes, reduced-form filter and plots."""

    name: str
    description: str
    file: str
    """Source YAML path (``None`` when built from a mapping)."""
    base: dict
    """Fixed point parameters (validated, defaults not yet filled)."""
    axes: tuple
    """:class:`Axis` groups, outermost first; the sweep is their cartesian product."""
    reduce: dict = field(default_factory=dict)
    """``{key: [values]}``: the reduced form keeps only points whose value is listed."""
    plots: tuple = ()

    @property
    def num_points(self):
        """Points of the full sweep, counted without expanding it."""
        return math.prod(len(axis) for axis in self.axes)

    def _axis_rows(self, reduced):
        """Each axis's rows; with *reduced*, only rows the ``reduce`` filter keeps (each key
        lives on one axis, so filtering axis by axis keeps exactly the points it would)."""
        out = []
        for axis in self.axes:
            rows = axis.rows()
            if reduced:
                rows = [r for r in rows if all(r[k] in self.reduce[k] for k in r if k in self.reduce)]
            out.append(rows)
        return out

    def count(self, *, reduced=False, limit=None):
        """Points :meth:`points` would give, counted without expanding the sweep."""
        n = math.prod(len(rows) for rows in self._axis_rows(reduced))
        return n if limit is None else min(n, limit)

    def iter_points(self, *, reduced=False, limit=None):
        """Complete points in sweep order (first axis outermost), generated lazily."""
        combos = itertools.product(*self._axis_rows(reduced))
        for combo in itertools.islice(combos, limit):
            values = dict(self.base)
            for part in combo:
                values.update(part)
            yield complete_point(values)

    def points(self, *, reduced=False, limit=None):
        """Expanded, complete points in sweep order (first axis outermost), as a list.

        *reduced* applies the ``reduce`` filter; *limit* keeps the first N points. The
        count is checked against :data:`~wus_sim.limits.MAX_SWEEP_POINTS` before anything
        is expanded.
        """
        check_limit("the points to run", self.count(reduced=reduced, limit=limit), MAX_SWEEP_POINTS,
                    file=self.file, key_path="sweep", hint="use --limit N or --reduced, or sweep fewer values")
        return list(self.iter_points(reduced=reduced, limit=limit))

    def _check_cross(self):
        """per_replica_batch and global_batch never both set on one point (checked on the
        axes, not on the expanded sweep, so a 10^7-point sweep is checked at once)."""
        a, b = "per_replica_batch", "global_batch"

        def values(key):  # (axis index or None for base, values along it)
            if key in self.base:
                return None, [self.base[key]]
            for i, axis in enumerate(self.axes):
                if key in axis.keys:
                    return i, list(axis.values[axis.keys.index(key)])
            return None, [None]

        (ia, va), (ib, vb) = values(a), values(b)
        if ia is not None and ia == ib:
            pairs = [(x, y) for x, y in zip(va, vb) if x is not None and y is not None]
        else:
            # On different axes (or base) every value of one meets every value of the other.
            xs, ys = [x for x in va if x is not None], [y for y in vb if y is not None]
            pairs = [(xs[0], ys[0])] if xs and ys else []
        if pairs:
            x, y = pairs[0]
            raise ConfigError(
                "per_replica_batch and global_batch are both set for a point "
                f"({x} and {y}); give one of them",
                file=self.file, key_path=self._where(a))

    def _where(self, key):
        if key in self.base:
            return key_join("base", key)
        for axis in self.axes:
            if key in axis.keys:
                return axis.where[axis.keys.index(key)]
        return None

    def swept_keys(self):
        """Keys that take more than one value over the sweep, in axis order."""
        return [k for axis in self.axes if len(axis) > 1 for k in axis.keys]

    def resolved(self, *, reduced=False, limit=None):
        """A plain mapping of the experiment with every default spelled out (config.resolved.yaml)."""
        swept = {k for axis in self.axes for k in axis.keys}
        return {
            "name": self.name,
            "description": self.description,
            "source": self.file,
            "base": {k: v for k, v in complete_point(self.base).items() if k not in swept},
            "sweep": [{k: list(v) for k, v in zip(axis.keys, axis.values)} for axis in self.axes],
            "swept_keys": self.swept_keys(),
            "reduce": {k: list(v) for k, v in self.reduce.items()},
            "reduced": bool(reduced),
            "limit": limit,
            "num_points": self.count(reduced=reduced, limit=limit),
            "plots": [{"kind": p.kind, "name": p.name, **p.options} for p in self.plots],
        }


def _point_values_schema(kind):
    """JSON Schema of a mapping of point parameters: to values (``base``) or to lists of them."""
    props = {}
    for p in POINT_KEYS.values():
        value = p.json_schema()
        props[p.name] = value if kind == "value" else {"description": value["description"], "type": "array",
                                                        "minItems": 1, "items": value}
    return {"type": "object", "properties": props, "additionalProperties": False}


def _sweep_schema():
    out = _point_values_schema("list")
    out["properties"]["zip"] = {
        "description": "Groups of parameters that vary together: each group's lists have one length and the "
                       "group is one sweep axis.",
        "type": "array", "items": {**_point_values_schema("list"), "minProperties": 1}}
    return out


_NAMES = {"oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "string"}}]}

EXPERIMENT_KEYS = KeyTable("experiment file", [
    Key("name", "string", "Experiment name (results' `experiment` column, run folder name).",
        default_text="the file's stem"),
    Key("description", "string", "What the experiment asks.", default=""),
    Key("workloads", "string or list", "Workloads to sweep: sugar for sweep.workload (a workload name or path, or a list).",
        rule="a name or a non-empty list of names", schema=_NAMES),
    Key("topologies", "string or list", "Topologies to sweep: sugar for sweep.topology.",
        rule="a name or a non-empty list of names", schema=_NAMES),
    Key("optimizers", "string or list", "Optimizers to sweep: sugar for sweep.optimizer.",
        rule="a name or a non-empty list of names", schema=_NAMES),
    Key("strategies", "string or list", "Update strategies: replicated and sharded together (or both) simulate both and "
        "give the speedup; sugar for base.strategy.", default=["replicated", "sharded"],
        rule="replicated, sharded or both, or a non-empty list of them",
        schema={"oneOf": [{"enum": list(STRATEGY_CHOICES)},
                          {"type": "array", "minItems": 1, "items": {"enum": list(STRATEGY_CHOICES)}}]}),
    Key("base", "mapping", "Point parameters fixed for every point (see Point parameters).", default_text="none",
        rule="a mapping of point parameters to values", schema=lambda: _point_values_schema("value")),
    Key("sweep", "mapping", "Sweep axes: each point parameter listed takes every value of its list (cartesian "
        "product, first axis outermost), except zip groups, which vary together.", default_text="none",
        rule="a mapping of point parameters to non-empty lists, and zip: a list of such mappings",
        schema=_sweep_schema),
    Key("reduce", "mapping", "The reduced form (tests, run --reduced): keep only points whose value of each "
        "listed sweep axis is listed.", default_text="the full sweep",
        rule="a mapping of sweep axes to non-empty lists of their values",
        schema=lambda: _point_values_schema("list")),
    Key("plots", "list", "Figures drawn from the results (see Plots); without it, a default set.",
        default_text="a default set for the swept parameters",
        rule="a list of mappings with kind, optional name and the kind's options",
        schema={"type": "array", "items": {"type": "object", "required": ["kind"]}}),
], meaning="What to simulate and which point parameters to sweep; workloads, topologies and optimizers are "
           "referred to by name or path.")
"""Top-level keys of an experiment file (read by :func:`parse_experiment`)."""

_SUGAR = {"workloads": "workload", "topologies": "topology", "optimizers": "optimizer"}


def known_experiments():
    """Names of the shipped experiments (file stems), sorted."""
    return sorted(p.stem for p in shipped_dir("experiments").glob("*.yaml"))


def find_experiment(spec):
    """The file an experiment argument names: a path to YAML, or a shipped experiment's name
    (``quickstart``), which is what an installed package without a checkout has to go on."""
    path = Path(spec)
    text = str(spec)
    if text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text or is_file(path):
        return path
    shipped = shipped_dir("experiments") / f"{text}.yaml"
    if is_file(shipped):
        return shipped
    raise UnknownNameError("experiment", text, known_experiments())


def load_experiment(path):
    """Read and validate an experiment: a YAML file, or a shipped experiment by name."""
    path = find_experiment(path)
    return parse_experiment(load_yaml(path), file=path)


def parse_experiment(doc, *, file=None, name=None):
    """Validate an experiment mapping; *file* is used in errors and to resolve relative paths."""
    top = Section(doc, file=file)
    EXPERIMENT_KEYS.check(top)
    base_dir = Path(file).parent if file is not None else None
    default_name = Path(file).stem if file is not None else (name or "experiment")
    exp_name = top.string("name", default_name)
    description = EXPERIMENT_KEYS.read(top, "description")

    origin = {}  # key -> key path where it was set, to reject a key set twice

    def claim(key, where):
        if key not in POINT_KEYS:
            raise ConfigError(f"is not a point parameter; known: {', '.join(POINT_KEYS)}",
                              file=top.file, key_path=where)
        if key in origin:
            raise ConfigError(f"sets {key!r}, which {origin[key]} already sets; set each parameter in one place",
                              file=top.file, key_path=where)
        origin[key] = where

    def values_list(sec, key, where, point_key=None):
        raw = sec.get(key)
        key = point_key or key
        if isinstance(raw, str) and where in _SUGAR:
            raw = [raw]  # `workloads: resnet50` is a list of one
        if not isinstance(raw, list) or not raw:
            raise ConfigError("must be a non-empty list of values", file=top.file, key_path=where,
                              value=raw)
        return tuple(check_point_value(key, v, file=top.file, key_path=key_join(where, i), base_dir=base_dir)
                     for i, v in enumerate(raw))

    axes = []
    for sugar, key in _SUGAR.items():
        if sugar in top:
            claim(key, sugar)
            axes.append(Axis((key,), (values_list(top, sugar, sugar, key),), (sugar,)))

    base = {}
    if "strategies" in top:
        claim("strategy", "strategies")
        base["strategy"] = _parse_strategies(top)

    if "base" in top:
        sec = top.section("base")
        for key in sec.keys():
            where = key_join("base", key)
            claim(key, where)
            base[key] = check_point_value(key, sec.get(key), file=top.file, key_path=where, base_dir=base_dir)

    if "sweep" in top:
        sweep = top.section("sweep")
        for key in sweep.keys():
            if key == "zip":
                groups = sweep.list("zip")
                for g, raw_group in enumerate(groups):
                    gpath = key_join(key_join("sweep", "zip"), g)
                    group = Section(raw_group, file=top.file, path=gpath)
                    if len(group.keys()) < 1:
                        raise ConfigError("must name at least one parameter", file=top.file, key_path=gpath)
                    keys, values, wheres = [], [], []
                    for gkey in group.keys():
                        where = key_join(gpath, gkey)
                        claim(gkey, where)
                        keys.append(gkey)
                        values.append(values_list(group, gkey, where))
                        wheres.append(where)
                    lengths = {len(v) for v in values}
                    if len(lengths) > 1:
                        raise ConfigError(
                            "lists of a zip group vary together and must have the same length; got "
                            + ", ".join(f"{k}: {len(v)}" for k, v in zip(keys, values)),
                            file=top.file, key_path=gpath)
                    axes.append(Axis(tuple(keys), tuple(values), tuple(wheres)))
                continue
            where = key_join("sweep", key)
            claim(key, where)
            axes.append(Axis((key,), (values_list(sweep, key, where),), (where,)))

    for sugar, key in (("workloads", "workload"), ("topologies", "topology")):
        if key not in origin:
            raise ConfigError(f"needs a {key}: list it under '{sugar}', or set '{key}' in 'base' or 'sweep'",
                              file=top.file)

    swept = {k: axis for axis in axes for k in axis.keys}
    reduce = {}
    if "reduce" in top:
        sec = top.section("reduce")
        for key in sec.keys():
            where = key_join("reduce", key)
            if key not in swept:
                raise ConfigError(f"is not a sweep axis of this experiment; sweep axes: {', '.join(swept) or 'none'}",
                                  file=top.file, key_path=where)
            keep = values_list(sec, key, where)
            axis = swept[key]
            allowed = axis.values[axis.keys.index(key)]
            for i, v in enumerate(keep):
                if v not in allowed:
                    raise ConfigError(f"is not among the sweep's values for {key} ({', '.join(map(str, allowed))})",
                                      file=top.file, key_path=key_join(where, i), value=v)
            reduce[key] = keep

    plots = _parse_plots(top) if "plots" in top else ()

    exp = Experiment(name=exp_name, description=description, file=top.file, base=base, axes=tuple(axes),
                     reduce=reduce, plots=plots)
    # Cross-key rules are checked now, on the axes, so a bad combination fails before any run.
    exp._check_cross()
    if reduce and not exp.count(reduced=True):
        raise ConfigError("keeps no point of the sweep", file=top.file, key_path="reduce")
    return exp


def _parse_strategies(top):
    raw = top.get("strategies")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise top.error("strategies", "must be a list of replicated/sharded/fully-sharded (or 'both', 'all')", raw)
    for i, s in enumerate(raw):
        if s not in STRATEGY_CHOICES:
            raise ConfigError(f"must be one of {', '.join(STRATEGY_CHOICES)}", file=top.file,
                              key_path=key_join("strategies", i), value=s)
    chosen = set()
    for s in raw:
        chosen.update(_STRATEGY_SETS.get(s, (s,)))
    for name in ("both", "all"):
        if chosen == set(_STRATEGY_SETS[name]):
            return name
    if len(chosen) == 1:
        return raw[0]
    # A point runs one strategy, both or all; another pair would need its own sweep axis.
    raise top.error("strategies", "must name one strategy, replicated and sharded ('both'), or all three "
                    "('all'); to compare another pair, sweep 'strategy' instead", raw)


def _parse_plots(top):
    raw = top.list("plots")
    plots, names = [], set()
    for i, item in enumerate(raw):
        sec = Section(item, file=top.file, path=key_join("plots", i))
        kind = sec.string("kind")
        name = sec.string("name", kind)
        if not name.replace("-", "").replace("_", "").isascii() or len(name) > 100 \
                or not name.replace("-", "").replace("_", "").isalnum():
            raise sec.error("name", "must be a file stem of up to 100 ASCII letters, digits, '-' and '_'", name)
        if name in names:
            raise sec.error("name", "is used by another plot of this experiment; names must be unique", name)
        names.add(name)
        options = {k: v for k, v in item.items() if k not in ("kind", "name")}
        plots.append(PlotSpec(kind=kind, name=name, options=options, section=sec))
    return tuple(plots)
