"""Experiment files: strict validation and sweep expansion over the point parameters.

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
:data:`wus_sim.training.parameters.params.POINT_KEYS`; ``wus_sim.experiments.records.simulate_point`` accepts exactly those keys
and the results table documents them from the same entries. Points always
carry every key (defaults filled in), so a point's hash names it completely.
``None`` (YAML ``null``) means "the model's own default" (the workload's
optimizer and gradient dtype, the topology's link bandwidth, ...).
"""

import json
import os
from pathlib import Path

from ..inputs.config import Section, is_file, key_join, load_yaml, present
from ..inputs.errors import ConfigError, UnknownNameError, did_you_mean, listed
from ..inputs.keys import Key, KeyTable
from ..inputs.shipped import shipped_dir

from ..training.parameters.params import (POINT_KEYS, STRATEGY_CHOICES, STRATEGY_SETS, Param, check_param, check_point_value,  # noqa: F401
                      complete_point, point_hash, strategies_of)

from .experiment import Axis, Experiment, PlotSpec

__all__ = [
    "Param", "POINT_KEYS", "EXPERIMENT_KEYS", "STRATEGY_CHOICES", "Axis", "PlotSpec", "Experiment",
    "load_experiment", "find_experiment", "known_experiments", "parse_experiment", "check_point_value", "check_param", "complete_point",
    "point_hash", "strategies_of",
]

def _point_values_schema(kind):
    """JSON Schema of a mapping of point parameters: to values (``base``) or to lists of them."""
    props = {}
    for p in POINT_KEYS.values():
        value = p.json_schema()
        props[p.name] = value if kind == "value" else {"description": value["description"], "type": "array",
                                                        "minItems": 1, "items": value,
                                                        **({"uniqueItems": True} if kind == "axis" else {})}
    return {"type": "object", "properties": props, "additionalProperties": False}


def _sweep_schema():
    out = _point_values_schema("axis")
    out["properties"]["zip"] = {
        "description": "Groups of parameters that vary together: each group's lists have one length and the "
                       "group is one sweep axis.",
        "type": "array", "items": {**_point_values_schema("list"), "minProperties": 1}}
    return out


_NAMES = {"oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "uniqueItems": True,
                                          "items": {"type": "string"}}]}

EXPERIMENT_KEYS = KeyTable("experiment file", [
    Key("name", "string", "Experiment name (results' `experiment` column, plot titles; a run folder "
        "holds one experiment's results).", default_text="the file's stem",
        rule="non-empty, one line, at most 200 characters",
        schema={"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[^\x00-\x1f\x7f]*\S[^\x00-\x1f\x7f]*$"}),
    Key("description", "string", "What the experiment asks.", default=""),
    Key("workloads", "string or list", "Workloads to sweep: sugar for sweep.workload (a workload name or path, or a list).",
        rule="a name or a non-empty list of distinct names", schema=_NAMES),
    Key("topologies", "string or list", "Topologies to sweep: sugar for sweep.topology.",
        rule="a name or a non-empty list of distinct names", schema=_NAMES),
    Key("optimizers", "string or list", "Optimizers to sweep: sugar for sweep.optimizer.",
        rule="a name or a non-empty list of distinct names", schema=_NAMES),
    Key("strategies", "string or list", "Update strategies: replicated and sharded together (or both) simulate both and "
        "give the speedup; all adds fully-sharded; sugar for base.strategy.", default=["replicated", "sharded"],
        rule="one of replicated, sharded, fully-sharded, both, all, or a non-empty list of them naming one "
             "strategy, replicated and sharded, or all three",
        schema={"oneOf": [{"enum": list(STRATEGY_CHOICES)},
                          {"type": "array", "minItems": 1, "items": {"enum": list(STRATEGY_CHOICES)}}]}),
    Key("base", "mapping", "Point parameters fixed for every point (see Point parameters).", default_text="none",
        rule="a mapping of point parameters to values", schema=lambda: _point_values_schema("value")),
    Key("sweep", "mapping", "Sweep axes: each point parameter listed takes every value of its list (cartesian "
        "product, first axis outermost), except zip groups, which vary together.", default_text="none",
        rule="a mapping of point parameters to non-empty lists of distinct values, and zip: a list of such mappings "
             "(each row of a group distinct)",
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
    if text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text or present(path):
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
    if not exp_name.strip() or not exp_name.isprintable() or len(exp_name) > 200:
        # it labels every result row and plot: a blank or multi-line name labels nothing
        raise top.error("name", "must be a non-empty name of one line, at most 200 characters", exp_name)
    description = EXPERIMENT_KEYS.read(top, "description")

    origin = {}  # key -> key path where it was set, to reject a key set twice

    def claim(key, where):
        if key not in POINT_KEYS:
            raise ConfigError(f"is not a point parameter{did_you_mean(key, POINT_KEYS)}; known: "
                              f"{listed(POINT_KEYS, 450, cut=450)}", file=top.file, key_path=where)
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

    def axis_values(sec, key, where, point_key=None):
        # A value twice on an axis would make each of its points twice in the results.
        values = values_list(sec, key, where, point_key)
        i, j = _first_repeat(values)
        if i is not None:
            raise ConfigError(f"repeats {key_join(where, i)}; list each value once",
                              file=top.file, key_path=key_join(where, j), value=values[j])
        return values

    axes = []
    for sugar, key in _SUGAR.items():
        if sugar in top:
            claim(key, sugar)
            axes.append(Axis((key,), (axis_values(top, sugar, sugar, key),), (sugar,)))

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
                    i, j = _first_repeat(list(zip(*values)))
                    if i is not None:
                        raise ConfigError(f"gives the same values at position {j} as at position {i} "
                                          f"({', '.join(keys)}); list each combination once",
                                          file=top.file, key_path=gpath)
                    axes.append(Axis(tuple(keys), tuple(values), tuple(wheres)))
                continue
            where = key_join("sweep", key)
            claim(key, where)
            axes.append(Axis((key,), (axis_values(sweep, key, where),), (where,)))

    for sugar, key in (("workloads", "workload"), ("topologies", "topology")):
        if key not in origin and not (key == "workload" and "maxtext" in origin):  # a MaxText run names its model
            raise ConfigError(f"needs a {key}: list it under '{sugar}', or set '{key}' in 'base' or 'sweep'"
                              + (" (or a maxtext run's model_name)" if key == "workload" else ""), file=top.file)

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


def _first_repeat(values):
    """``(i, j)``: the first value at *j* equal (as its point hash sees it) to the one at *i* < *j*,
    else ``(None, None)``."""
    seen = {}
    for j, v in enumerate(values):
        text = json.dumps(v, sort_keys=True, default=str)
        if text in seen:
            return seen[text], j
        seen[text] = j
    return None, None


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
        chosen.update(STRATEGY_SETS.get(s, (s,)))
    for name in ("both", "all"):
        if chosen == set(STRATEGY_SETS[name]):
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
