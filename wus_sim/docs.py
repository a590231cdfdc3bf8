"""The input-format references and JSON Schemas, generated from the loaders' own key tables.

``python -m wus_sim.docs`` writes, from a checkout:

- ``docs/formats/{experiment,topology,chips,optimizer,workload}.md``: every key of each
  YAML format with its type, whether it is required, its default, unit and rule, and an
  example; and ``docs/formats/results.md``, every results column;
- ``wus_sim/schemas/{experiment,topology,chips,optimizer,workload}-file.v1.json``: JSON
  Schemas of the same formats, for editor completion (e.g. a first line
  ``# yaml-language-server: $schema=<path to the schema>`` in a YAML file);
- ``wus_sim/schemas/results.v1.json``: the JSON Schema of one results row;
- the tables of ``docs/commands.md`` (every command and option, from the parsers) and of
  ``docs/maxtext.md`` (from :mod:`wus_sim.training.parameters.maxtext_table`).

Everything is built from the tables the loaders validate with
(:data:`~wus_sim.experiments.spec.EXPERIMENT_KEYS`, :data:`~wus_sim.experiments.spec.POINT_KEYS`,
:data:`~wus_sim.plotting.kinds.PLOT_KINDS`, :data:`~wus_sim.hardware.topology.TOPOLOGY_KEYS`,
:data:`~wus_sim.hardware.topology.CHIP_KEYS`, :data:`~wus_sim.optimizers.spec.OPTIMIZER_KEYS`,
:data:`~wus_sim.model.workload.WORKLOAD_KEYS`, :func:`~wus_sim.experiments.results.columns`), so
a key added to a loader shows up here on the next run; ``--check`` exits 1 if a committed
file differs from what would be written (the test suite runs it). The examples below are
loaded by the tests through the real loaders, so they stay valid too.
"""

import argparse
import inspect
import json
from pathlib import Path
import sys

__all__ = ["FORMATS", "EXAMPLES", "render", "write", "stale", "main"]

FORMATS = ("experiment", "topology", "chips", "optimizer", "workload")
"""The YAML input formats, each with a reference page and a schema ``<format>-file.v1.json``."""

SCHEMA_VERSION = 1

EXAMPLES = {
    "experiment": """\
name: link-bandwidth
description: Speedup of the sharded update vs ICI link bandwidth on two slices.
workloads: [transformer-big]
topologies: [tpu-v3-128, tpu-v3-512]
optimizers: [adam]
strategies: [replicated, sharded]
base:
  per_replica_batch: 16
sweep:
  link_GBps: [50, 100, 200]
reduce:
  topology: [tpu-v3-128]
  link_GBps: [100]
plots:
  - kind: speedup
    x: link_GBps
    hue: [topology]
  - kind: heatmap
    name: speedup-map
    x: link_GBps
    y: replicas
""",
    "topology": """\
name: my-v3-8x16
description: "A 128-chip TPU v3 slice, torus on the long axis only"
chip: tpu-v3
chips_per_axis: [8, 16]
wraparound: [false, true]
link_GBps: 100              # per link and direction; one number for every axis, or one per axis
sources:
  shape: "what-if"
""",
    "chips": """\
my-chip:
  description: A made-up chip, 2 cores
  cores_per_chip: 2
  peak_bf16_TFLOPs: 150
  hbm_GiB: 32
  hbm_GBps: 1000
  link_GBps: 80
  hop_latency_us: 1.0
  onchip_GBps: 160
  sources:
    link_GBps: "assumption"
""",
    "optimizer": """\
description: SGD with heavy-ball momentum (one slot).
sources: {rule: "Polyak 1964; tf.train.MomentumOptimizer"}
hyper:
  lr: 0.1
  mu: 0.9
program:
  - m = mu*m + g
  - w = w - lr*m
""",
    "workload": """\
name: tiny-mlp
description: A two-layer perceptron on 784-pixel images
params: 203530
fwd_flops:
  per_unit: 407040          # 2 FLOPs per multiply-add of the two matmuls
  unit: image
  units_per_example: 1
  example_unit: image
  counts: matmuls only
activation_memory:
  - what: hidden activations
    elements: 256
    bytes_per_element: 2
dtypes: {weights: float32, gradients: float32, slots: float32, activations: bfloat16}
default_optimizer: adam
default_per_replica_batch: 64
layers:
  - [hidden, 401408]
  - [out, 5632]
tensors:
  - [hidden/kernel, [784, 256], 0]
  - [hidden/bias, [256], 0]
  - [out/kernel, [256, 10], 1]
  - [out/bias, [10], 1]
""",
}
"""A small, valid file of each format (the tests load each one with its loader)."""

_INTRO = {
    "experiment": "An experiment names what to simulate and which point parameters to sweep; it refers to "
                  "workloads, topologies and optimizers by name (or path). Run one with "
                  "`wus-sim run FILE.yaml`; shipped ones are listed by `wus-sim list experiments`.",
    "topology": "A topology file describes one TPU slice. `wus-sim step`, `plan`, `collective` and experiments "
                "take its name (the file stem) when the file is in a directory on `WUS_SIM_TOPOLOGY_PATH` "
                "(or shipped), or its path. `wus-sim describe topology NAME` shows what was read.",
    "chips": "`chips.yaml` holds the chips' datasheet figures; a topology names its chip. A `chips.yaml` in a dir "
             "on `WUS_SIM_TOPOLOGY_PATH` adds its chips to the shipped ones (a chip of a shipped name replaces it, "
             "noted on stderr). From a datasheet to these figures, a custom chip: [the chips guide](../chips.md).",
    "optimizer": "An optimizer file states the update as a small program over each tensor's elements; the "
                 "statement language is described in `wus_sim/data/optimizers/README.md` (inputs `w`, `g`, "
                 "`t`; any other name assigned is a slot or a temporary). Pass its path where an optimizer "
                 "name is accepted, or put it in a directory on `WUS_SIM_OPTIMIZER_PATH`. "
                 "`wus-sim describe optimizer FILE` shows its static analysis.",
    "workload": "A workload file lists a model's trainable tensors with their shapes and layers, its forward "
                "FLOPs, activation memory and MLPerf runs. Pass its path where a workload name is accepted, or "
                "put it in a directory on `WUS_SIM_WORKLOAD_PATH`. `wus-sim describe workload FILE` shows "
                "what was read.",
}


# ------------------------------------------------------------------ the tables
def _tables():
    """Format -> its top-level :class:`~wus_sim.inputs.keys.KeyTable` (imported here: the loaders are lower layers)."""
    from .experiments.spec import EXPERIMENT_KEYS
    from .optimizers.spec import OPTIMIZER_KEYS
    from .hardware.topology_files import CHIP_KEYS, TOPOLOGY_KEYS
    from .model.workload_files import WORKLOAD_KEYS

    return {"experiment": EXPERIMENT_KEYS, "topology": TOPOLOGY_KEYS, "chips": CHIP_KEYS,
            "optimizer": OPTIMIZER_KEYS, "workload": WORKLOAD_KEYS}


def _plot_item_schema():
    """JSON Schema of one entry of an experiment's ``plots``: one branch per plot kind."""
    from .plotting.kinds import COMMON_OPTIONS, MAX_FIGSIZE_IN, OPTION_MEANINGS, PLOT_KINDS

    types = {"column": {"type": "string"},
             "columns": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
             "bool": {"type": "boolean"}, "string": {"type": "string"}}
    common = {
        "name": {"description": "File stem of the figure (default: the kind).", "type": "string",
                 "pattern": "^[A-Za-z0-9_-]{1,100}$"},
        "title": {"type": "string"},
        "where": {"type": "object"},
        "facet": {"type": "string"},
        "figsize": {"type": "array", "minItems": 2, "maxItems": 2,
                    "items": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_FIGSIZE_IN}},
    }
    for option in COMMON_OPTIONS:
        common[option] = {"description": OPTION_MEANINGS[option], **common[option]}
    branches = []
    for kind_name, kind in PLOT_KINDS.items():
        props = {"kind": {"const": kind_name}, **common}
        props.update({o: {"description": OPTION_MEANINGS[o], **types[t]} for o, t in kind.options.items()})
        branches.append({"type": "object", "required": ["kind", *kind.required()], "properties": props,
                         "additionalProperties": False})
    return {"oneOf": branches}


# ------------------------------------------------------------------ schemas
def format_schema(fmt):
    """The JSON Schema (draft 2020-12) of input format *fmt*, as a dict."""
    tables = _tables()
    if fmt == "chips":
        from .hardware.topology_files import CHIPS_FILE

        body = CHIPS_FILE.json_schema()
        del body["properties"]
    else:
        body = tables[fmt].json_schema()
    if fmt == "experiment":
        body["properties"]["plots"]["items"] = _plot_item_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://wus-sim/schemas/{fmt}-file.v{SCHEMA_VERSION}.json",
            "title": f"wus-sim {fmt} file, version {SCHEMA_VERSION}",
            **body}


def results_schema():
    """JSON Schema of one row of results.csv / results.parquet (as a JSON object: missing = null)."""
    from .experiments.results import columns

    types = {"string": "string", "Int64": "integer", "float64": "number", "boolean": "boolean"}
    props = {}
    for c in columns():
        props[c.name] = {"description": c.meaning + (f" Unit: {c.unit}." if c.unit else ""),
                         "type": [types[c.dtype], "null"]}
    props["status"]["enum"] = ["ok", "infeasible", "error"]
    props["strategy"]["enum"] = ["replicated", "sharded"]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://wus-sim/schemas/results.v{SCHEMA_VERSION}.json",
            "title": f"wus-sim results row (results.csv / results.parquet), version {SCHEMA_VERSION}",
            "description": "One row per simulated point and strategy. Every documented column is present; "
                           "a value may be missing (null) where the row has none (an infeasible point's step "
                           "results). The simulator may add undocumented columns after these.",
            "type": "object",
            "required": [c.name for c in columns()],
            "properties": props}


# ------------------------------------------------------------------ markdown
def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default(key):
    if key.required or key.default_text:
        return "required" if key.required else key.default_text
    return "none" if key.default is None else f"`{json.dumps(key.default)}`"


def _key_rows(table):
    lines = ["| key | type | default | unit | rule | meaning |", "|---|---|---|---|---|---|"]
    for key in table:
        lines.append(f"| `{key.name}` | {key.type} | {_cell(_default(key))} | {_cell(key.unit)} | "
                     f"{_cell(key.rule_text())} | {_cell(key.meaning)} |")
    return lines


def _table_section(table, heading, level=2):
    out = [f"{'#' * level} {heading}", ""]
    if table.meaning:
        out += [table.meaning, ""]
    out += _key_rows(table) + [""]
    for key in table:
        if key.table is not None:
            where = f"each entry of `{key.name}`" if key.type == "list" else f"`{key.name}`"
            out += _table_section(key.table, f"Keys of {where}", level + 1)
    return out


def _point_section():
    from .experiments.spec import POINT_KEYS

    kinds = {"name": "string", "choice": "string", "int": "integer", "number": "number", "bool": "boolean",
             "wrap": "boolean or list"}
    out = ["## Point parameters", "",
           "What one simulated point is. `base` sets them, `sweep` (and its `zip` groups) varies them, "
           "`reduce` filters them; each is also a column of results.csv. `null` means the model's own default "
           "(the workload's optimizer, the topology's link bandwidth, ...).", "",
           "| key | type | default | unit | rule | meaning |", "|---|---|---|---|---|---|"]
    for p in POINT_KEYS.values():
        default = "required" if p.required else ("null" if p.default is None else f"`{json.dumps(p.default)}`")
        out.append(f"| `{p.name}` | {kinds[p.kind]} | {default} | {_cell(p.unit)} | {_cell(p.rule())} | "
                   f"{_cell(p.meaning)} |")
    return out + [""]


def _plots_section():
    from .plotting.kinds import COMMON_OPTIONS, MAX_FIGSIZE_IN, OPTION_MEANINGS, PLOT_KINDS

    types = {"column": "a results column", "columns": "a results column or a list of them",
             "bool": "true or false", "string": "a string"}
    out = ["## Plots", "",
           "Each entry of `plots` draws one figure (PNG and SVG beside the results) from the results table. "
           "`kind` is required; `name` is the file stem (default: the kind; letters, digits, `-`, `_`, unique "
           "in the experiment). Options a kind does not list are errors.", "",
           "| kind | draws | options (default) |", "|---|---|---|"]
    for name, kind in PLOT_KINDS.items():
        params = inspect.signature(kind.function).parameters
        opts = []
        for option in kind.options:
            default = params[option].default
            shown = "required" if default is inspect.Parameter.empty else json.dumps(default)
            opts.append(f"`{option}` ({shown})")
        doc = inspect.getdoc(kind.function).split("\n\n")[0].replace("\n", " ")
        out.append(f"| `{name}` | {_cell(doc)} | {', '.join(opts)} |")
    out += ["", "Options:", "", "| option | value | meaning |", "|---|---|---|"]
    value = {"title": "a string", "where": "a mapping of results columns to a value or a list of values",
             "facet": "a results column", "figsize": f"[width, height], each > 0 and <= {MAX_FIGSIZE_IN}"}
    seen = {}
    for kind in PLOT_KINDS.values():
        for option, otype in kind.options.items():
            seen.setdefault(option, types[otype])
    for option in COMMON_OPTIONS:
        seen[option] = value[option]
    for option, text in seen.items():
        out.append(f"| `{option}` | {_cell(text)} | {_cell(OPTION_MEANINGS[option])} |")
    return out + [""]


def _import_section():
    from .model.importers.hf_families import CONFIG_KEYS

    out = ["## Imported from Hugging Face: `wus-sim import-workload`", "",
           "`wus-sim import-workload PATH [--sequence-length N] [--name NAME] [--out FILE]` (Python: "
           "`wus_sim.model.importers.importers.import_workload`) writes a workload file of this format from a Hugging "
           "Face `config.json`, or from a `.safetensors` file, a `model.safetensors.index.json` or a folder "
           "holding them with the `config.json` beside it (exact tensor names and shapes from the headers, "
           "checked against the config; only the headers are read; nothing is downloaded). `--sequence-length` "
           "(default: the config's `max_position_embeddings`, GPT-2's `n_positions`) sets the tokens per "
           "sequence: the example and the attention FLOPs. What is counted and why is the docstring of "
           "`wus_sim/model/importers/importers.py`. An unknown `model_type`, a missing or bad key, or a stored shape "
           "that contradicts the config is one line naming the file and key, exit 2. The keys read are "
           f"also a JSON Schema, `wus_sim/schemas/hf-config.v{SCHEMA_VERSION}.json`.", "",
           "| model_type | config.json keys read (default when absent) |", "|---|---|"]
    for family, keys in CONFIG_KEYS.items():
        cells = ", ".join(f"`{k}`" + (f" ({d})" if d else "") for k, d in keys)
        out.append(f"| `{family}` | {_cell(cells)} |")
    return out + [""]


def format_markdown(fmt):
    """The reference page of input format *fmt*."""
    tables = _tables()
    title = {"chips": "Chips file (chips.yaml)"}.get(fmt, f"{fmt.capitalize()} file")
    out = [f"# {title}", "", "<!-- GENERATED by `python -m wus_sim.docs` from the loaders' key tables; "
           "edit the tables, not this file. -->", "", _INTRO[fmt], "",
           f"JSON Schema for editor completion: `wus_sim/schemas/{fmt}-file.v{SCHEMA_VERSION}.json` "
           "(in the installed package too); e.g. a first line "
           f"`# yaml-language-server: $schema=<path>/{fmt}-file.v{SCHEMA_VERSION}.json`.", "",
           "Units are in the key names (`_GBps` = 10^9 B/s, `_GiB` = 2^30 B, `_us` = microseconds, "
           "`_TFLOPs` = 10^12 FLOP/s) and converted once, at load. Unknown keys are errors.", ""]
    if fmt == "chips":
        out += ["The file maps chip names to chips; every top-level key is a chip name.", ""]
        out += _table_section(tables[fmt], "Keys of each chip")
    else:
        out += _table_section(tables[fmt], "Keys")
    if fmt == "experiment":
        out += _point_section() + _plots_section()
    if fmt == "workload":
        out += _import_section()
    out += ["## Example", "", "```yaml", EXAMPLES[fmt].rstrip("\n"), "```", ""]
    return "\n".join(out)


def results_markdown():
    """The reference of the results columns (the same table ``columns.md`` in a run folder comes from)."""
    from .experiments.results import columns

    out = ["# Results columns (results.csv / results.parquet)", "",
           "<!-- GENERATED by `python -m wus_sim.docs` from wus_sim/experiments/results.py; edit the table, "
           "not this file. -->", "",
           "One row per simulated point and strategy (long form). Units: s = seconds, B = bytes; GB/s = "
           "10^9 B/s, MiB = 2^20 B, us = microseconds. JSON Schema of a row: "
           f"`wus_sim/schemas/results.v{SCHEMA_VERSION}.json`. Every run folder also has `columns.md` and "
           "`columns.json` for the columns it holds.", "",
           "| column | unit | type | group | meaning |", "|---|---|---|---|---|"]
    for c in columns():
        out.append(f"| `{c.name}` | {c.unit} | {c.dtype} | {c.group} | {_cell(c.meaning)} |")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ files
def _json(doc):
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def hf_config_schema():
    """JSON Schema of the Hugging Face ``config.json`` keys ``import-workload`` reads, per
    ``model_type`` (:data:`wus_sim.model.importers.hf_families.CONFIG_KEYS`): a key without a default is
    required for its family; every other key of the file is Hugging Face's and is ignored."""
    from .model.importers.hf_families import CONFIG_KEYS, FAMILIES

    families = []
    for family, keys in CONFIG_KEYS.items():
        props = {k: {"description": "read by import-workload" + (f"; default when absent: {d}" if d else "")}
                 for k, d in keys}
        families.append({"if": {"properties": {"model_type": {"const": family}}},
                         "then": {"properties": props, "required": [k for k, d in keys if not d]}})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://wus-sim/schemas/hf-config.v{SCHEMA_VERSION}.json",
        "title": "Hugging Face config.json, as wus-sim import-workload reads it",
        "description": "The keys import-workload reads from a Hugging Face config.json, per model_type "
                       "(docs/formats/workload.md); other keys are Hugging Face's and are ignored.",
        "type": "object",
        "required": ["model_type"],
        "properties": {"model_type": {"enum": list(FAMILIES)}},
        "allOf": families,
    }


def render(root=None):
    """Every generated file: path relative to the checkout *root* -> its text (:mod:`wus_sim.cli.reference`)."""
    from .cli.reference import generated_pages  # commands.md and maxtext.md: their prose kept
    files = {f"wus_sim/schemas/hf-config.v{SCHEMA_VERSION}.json": _json(hf_config_schema()), **generated_pages(root)}
    for fmt in FORMATS:
        files[f"docs/formats/{fmt}.md"] = format_markdown(fmt)
        files[f"wus_sim/schemas/{fmt}-file.v{SCHEMA_VERSION}.json"] = _json(format_schema(fmt))
    files["docs/formats/results.md"] = results_markdown()
    files[f"wus_sim/schemas/results.v{SCHEMA_VERSION}.json"] = _json(results_schema())
    return files


def stale(root):
    """Generated files under *root* that are missing or differ from :func:`render`'s."""
    root = Path(root)
    return sorted(rel for rel, text in render(root).items()
                  if not (root / rel).is_file() or (root / rel).read_text() != text)


def write(root):
    """Write every generated file under *root* (the checkout); return the paths written."""
    root = Path(root)
    written = []
    for rel, text in render(root).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m wus_sim.docs",
                                     description="Regenerate the format references and JSON Schemas.")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent),
                        help="checkout root (default: the folder above the package)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    args = parser.parse_args(argv)
    if args.check:
        old = stale(args.root)
        for rel in old:
            print(f"out of date: {rel}", file=sys.stderr)
        return 1 if old else 0
    for path in write(args.root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
