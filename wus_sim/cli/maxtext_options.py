"""``--maxtext``, ``--maxtext-config``, ``--maxtext-approximate`` and ``-v`` of ``step`` and ``plan``:
a MaxText run as the input (:mod:`wus_sim.training.parameters.maxtext`).

The sources are read in one order, whatever the command line's: every ``--maxtext-config FILE``
(MaxText YAML keys) in the order given, then every ``--maxtext 'KEY=VALUE ...'``, later keys
winning, as MaxText applies its command line over its config file. The translated run fills
the command's options (workload, global batch, mesh, slices, remat policy, quantization,
optimizer, ...): an option given beside it keeps its value where the MaxText run left that key at
base.yml's default, and is an error naming both where the run gives the key. ``-v`` lists on
stderr every key that changes nothing in a step and every word skipped, with why.
"""

import argparse
import sys

from .options import add_flag

__all__ = ["add_maxtext_options", "apply_maxtext", "maxtext_lines", "with_maxtext_lines", "report_maxtext",
           "ARGS_OF"]

ARGS_OF = {"workload": "workload", "global_batch": "global_batch", "per_replica_batch": "per_replica_batch",
           "mesh": "mesh", "dcn_mesh": "dcn_mesh", "slices": "slices", "megacore": "megacore", "remat": "remat",
           "remat_policy": "remat_policy", "quantization": "quantization", "optimizer": "optimizer",
           "grad_dtype": "grad_dtype", "strategy": "strategy", "capacity_factor": "capacity_factor",
           "pipeline_microbatches": "pipeline_microbatches", "pipeline_layers_per_stage": "pipeline_layers_per_stage"}
"""Point key -> the argparse destination of the option that sets it."""

_FLAGS = {"workload": "WORKLOAD"}
_LABELS = {"workload": "", "global_batch": "global batch ", "mesh": "mesh ", "dcn_mesh": "mesh across slices ",
           "slices": "slices ", "remat_policy": "remat policy ", "remat": "remat ", "quantization": "quantization ",
           "optimizer": "optimizer ", "grad_dtype": "gradients ", "strategy": "update ",
           "capacity_factor": "capacity factor ", "pipeline_microbatches": "pipeline microbatches ",
           "pipeline_layers_per_stage": "pipeline layers per stage "}


def add_maxtext_options(parser):
    """The MaxText input options of ``step`` and ``plan``."""
    parser.add_argument("--maxtext", action="append", default=None, metavar="'KEY=VALUE ...'",
                        help="a MaxText run as the input: its command line's KEY=VALUE words (a pasted "
                             "'python3 -m MaxText.train MaxText/configs/base.yml' prefix and --flags are skipped); "
                             "sets WORKLOAD (model_name), the global batch, --mesh, --dcn-mesh, --slices, "
                             "--remat-policy, --quantization, --optimizer; on v4/v5p a device is a chip "
                             "(--megacore). May be repeated; see docs/maxtext.md")
    parser.add_argument("--maxtext-config", dest="maxtext_config", action="append", default=None, metavar="FILE",
                        help="a MaxText YAML config file's keys, read before the --maxtext words (later keys win)")
    add_flag(parser, "--maxtext-approximate", dest="maxtext_approximate",
             help="run the MaxText keys wus-sim only approximates (custom_mesh, weight_dtype: bfloat16, "
                  "capacity_factor, megablox and sparse_matmul false) as their approximations, each said in the "
                  "output, instead of refusing them")
    add_flag(parser, "-v", "--verbose", help="list on stderr each MaxText key that changes nothing in a step "
                                             "and each word skipped, with why")


def _given_dests(args):
    """The destinations the command line set itself (not by default), or ``None`` when unknown."""
    words = getattr(args, "_words", None)
    if words is None:
        return None
    from . import build_parser

    parser = build_parser(args.command)
    sub = parser.commands[args.command]
    for action in sub._actions:
        action.default = argparse.SUPPRESS
    sub._defaults.clear()
    ns, _ = parser.parse_known_args(words)
    return set(vars(ns)) - {"command"}


def _explicit(args, given):
    """``{point key: (value, how given)}`` of the options given beside the MaxText run."""
    out = {}
    for key, dest in ARGS_OF.items():
        if not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if given is not None and dest not in given:
            continue
        if given is None and value in (None, False):
            continue
        if key == "grad_dtype" and value is not None:
            from ..inputs.units import grad_dtype_short

            value = grad_dtype_short(value)
        option = _FLAGS.get(key) or "--" + dest.replace("_", "-")
        shown = option if key != "megacore" else ("--megacore" if value else "--no-megacore")
        out[key] = (value, f"{shown} {value}" if key not in ("megacore", "workload") else
                    (shown if key == "megacore" else f"WORKLOAD {value}"))
    return out


def apply_maxtext(args, *, search=False):
    """Translate the MaxText run of *args* (if any) and write it into *args*; the
    ``(MaxTextRun, MaxTextInput)`` or ``None``. Without one, WORKLOAD is required."""
    from ..inputs.errors import ConfigError

    files, words = getattr(args, "maxtext_config", None) or (), getattr(args, "maxtext", None) or ()
    if not files and not words:
        if getattr(args, "workload", None) is None:
            raise ConfigError("is required: a workload name or path, or --maxtext 'model_name=NAME ...'",
                              key_path="WORKLOAD", show_value=False)
        return None
    from ..training.parameters.maxtext import translate
    from ..training.parameters.maxtext_keys import maxtext_input

    inp = maxtext_input(files=files, words=words)
    from ..training.parameters.params import POINT_KEYS

    run = translate(inp, args.topology, explicit=_explicit(args, _given_dests(args)),
                    approximate=bool(getattr(args, "maxtext_approximate", False)), search=search,
                    point_keys=[k for k in POINT_KEYS if hasattr(args, ARGS_OF.get(k, k))])
    for key, value in run.point.items():
        dest = ARGS_OF.get(key)
        if dest is not None and hasattr(args, dest):
            setattr(args, dest, value)
    args._maxtext = (run, inp)
    args.custom_mesh = run.custom_mesh  # MaxText's ring layout of the mesh (StepOptions.custom_mesh)
    if getattr(args, "verbose", False):
        for key, why in [*inp.skipped, *run.listed]:
            print(f"wus-sim {args.command}: maxtext: {key}: {why}", file=sys.stderr)
    return run, inp


def maxtext_lines(args):
    """The lines the text output shows of the MaxText run (none without one)."""
    got = getattr(args, "_maxtext", None)
    if got is None:
        return []
    run, inp = got
    parts = {True: [], False: []}
    for key, src in run.sources.items():
        if key != "megacore":
            parts[key in run.defaulted].append(f"{src} -> {_LABELS.get(key, key)}{run.point[key]}")
    lines = ["  MaxText run: " + ", ".join(parts[False])]
    if parts[True]:
        lines.append("    base.yml's defaults: " + ", ".join(parts[True]))
    lines += [f"  note: {note}" for note in run.notes]
    quiet = len(run.listed) + len(inp.skipped)
    if quiet and not getattr(args, "verbose", False):
        skipped = f" and {len(inp.skipped)} words were skipped" if inp.skipped else ""
        lines.append(f"  {len(run.listed)} MaxText keys change nothing in a step here{skipped} (-v lists them)")
    return lines


def with_maxtext_lines(text, args):
    """*text* (a command's text output) with :func:`maxtext_lines` after its first line."""
    lines = text.split("\n")
    return "\n".join(lines[:1] + maxtext_lines(args) + lines[1:])


def report_maxtext(report, args):
    """*report* (a ``--json`` document) with the MaxText run's ``maxtext`` object, if there is one."""
    got = getattr(args, "_maxtext", None)
    if got is not None:
        report["maxtext"] = got[0].to_dict(got[1])
    return report
