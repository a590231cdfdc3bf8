"""Numeric command-line options: each checked by the same rule table as experiment files.

An option whose destination is a point parameter (``--link-GBps`` -> ``link_GBps``,
``--steps``, ``--bucket-MiB``, ...) is checked by that parameter's entry in
:data:`wus_sim.training.params.POINT_KEYS`, so the command line and YAML accept exactly
the same values; options that are not point parameters have their range here.
:func:`check_options` runs on every parsed command line before the subcommand does.
"""

import argparse
from contextlib import contextmanager

from ..inputs.errors import ConfigError
from ..training.params import POINT_KEYS, Param, check_param, check_point_value
from ..inputs.limits import MAX_CHUNKS

__all__ = [
    "OPTION_PARAMS", "check_options", "FAULT_KEYS", "add_fault_options", "fault_values",
    "fault_option_errors", "JSON_HELP", "add_json_option", "add_flag",
    "PLACEMENT_KEYS", "add_placement_options", "placement_option_errors",
]

OPTION_PARAMS = {p.name: p for p in (
    Param("chunks", "int", minimum=1, maximum=MAX_CHUNKS, nullable=False,
          meaning="Pipelined pieces per collective step."),
    Param("jobs", "int", minimum=1, maximum=1024, meaning="Worker processes."),
    Param("limit", "int", minimum=1, maximum=2**62, meaning="First N points of the sweep."),
    Param("scheduler_timeout", "number", positive=True, maximum=600, meaning="Seconds to reach a Dask scheduler."),
    Param("repeat", "int", minimum=1, maximum=1000, nullable=False, meaning="Timed runs per benchmark case."),
    Param("replicas", "int", minimum=1, maximum=2**17, meaning="Data-parallel replicas."),
    Param("replica", "int", minimum=0, maximum=2**17, nullable=False, meaning="Replica whose shard is shown."),
    Param("replicate_below", "int", minimum=0, maximum=2**40, meaning="Tensors below this stay whole."),
    Param("max_padding_ratio", "number", minimum=0, maximum=1e6, meaning="Largest padding ratio."),
)}
"""Ranges of numeric options that are not point parameters."""


PATH_OPTIONS = ("out", "trace", "measured", "calibration", "path", "scheduler")
"""Options that name a file or folder: an empty one is refused (``--out ""`` wrote to the default)."""


def check_options(args):
    """Check every numeric option of *args* (an argparse Namespace) against its declared range;
    store the normalised value back. Raises ConfigError naming the option."""
    for dest, value in vars(args).items():
        if dest in PATH_OPTIONS and isinstance(value, str) and not value:  # '' is no name, not "the default"
            raise ConfigError("is not a file or folder name (it is empty)",
                              key_path="PATH" if dest == "path" else "--" + dest.replace("_", "-"),
                              value="")
        param = POINT_KEYS.get(dest) or OPTION_PARAMS.get(dest)
        if param is None or param.kind not in ("int", "number") or value is None:
            continue
        setattr(args, dest, check_param(param, value, key_path="--" + dest.replace("_", "-"), option=True))


JSON_HELP = "print one JSON document instead of text"
"""The help of every command's ``--json`` (one wording; each command's schema is in its module)."""


def add_json_option(parser):
    """``--json/--no-json`` with :data:`JSON_HELP`."""
    add_flag(parser, "--json", help=JSON_HELP)


def add_flag(parser, *names, default=False, help, **kwargs):
    """A boolean option, always paired: ``--x`` and ``--no-x`` (the last one given wins), so a
    script can state either value whatever the default."""
    parser.add_argument(*names, action=argparse.BooleanOptionalAction, default=default, help=help, **kwargs)


FAULT_KEYS = ("failed_links", "slow_links", "seed")
"""Point keys of failed and slow ICI cables, taken as ``--failed-links``, ``--slow-links``, ``--seed``."""


def _option(key):
    return "--" + key.replace("_", "-")


def add_fault_options(parser):
    """The failed/slow cable options of ``step`` and ``collective`` (point keys :data:`FAULT_KEYS`)."""
    parser.add_argument("--failed-links", dest="failed_links", default=None, metavar="K|LIST",
                        help="cables that are down, both directions: K chosen at random (see --seed), or "
                             "comma-separated CHIP+AXIS such as 12+x,40-y (chip ids row-major, axis 0 fastest); "
                             "routes detour around them")
    parser.add_argument("--slow-links", dest="slow_links", default=None, metavar="LIST:FACTOR",
                        help="cables running at their bandwidth / FACTOR, both directions: LIST as for "
                             "--failed-links, or K:FACTOR for K random ones (e.g. 12+x:4, 3:2)")
    parser.add_argument("--seed", type=int, default=None, metavar="S",
                        help="seed of the random choice of K failed or slow cables (default 0)")


def fault_values(args):
    """``{point key: checked value}`` of the fault options (errors name the option)."""
    return {key: check_point_value(key, getattr(args, key), key_path=_option(key)) for key in FAULT_KEYS}


@contextmanager
def fault_option_errors():
    """Re-raise a fault's ConfigError under its option's name instead of its point key's."""
    try:
        yield
    except ConfigError as exc:
        if exc.key_path not in FAULT_KEYS:
            raise
        raise ConfigError(exc.rule, key_path=_option(exc.key_path), value=exc.value) from None


PLACEMENT_KEYS = ("megacore", "spatial_ways", "remat")
"""Point keys of how a run places replicas and keeps activations: ``--megacore``, ``--spatial-ways``, ``--remat``."""


def add_placement_options(parser):
    """``--megacore``, ``--spatial-ways K`` and ``--remat`` of ``step`` and ``plan`` (point keys :data:`PLACEMENT_KEYS`)."""
    from ..training.params import POINT_KEYS

    add_flag(parser, "--megacore",
             help="TPU v4/v5p: one replica per chip over both its TensorCores (default: one per TensorCore)")
    parser.add_argument("--spatial-ways", type=int, dest="spatial_ways", default=None, metavar="K",
                        help="cores each replica is spatially partitioned over: replicas = cores / K (default: the "
                             "MLPerf run's on that slice, else 1)")
    parser.add_argument("--remat", choices=POINT_KEYS["remat"].choices, default=POINT_KEYS["remat"].default,
                        help="rematerialisation: none (keep every activation), layer (keep each layer's input, "
                             "recompute it in backward) or full (every sqrt(L)-th layer's input); default none")


@contextmanager
def placement_option_errors():
    """Re-raise a placement key's ConfigError under its option's name."""
    try:
        yield
    except ConfigError as exc:
        if exc.key_path not in PLACEMENT_KEYS or exc.file:
            raise
        raise ConfigError(exc.rule, key_path=_option(exc.key_path), value=exc.value) from None
