"""Numeric command-line options: each checked by the same rule table as experiment files.

An option whose destination is a point parameter (``--link-GBps`` -> ``link_GBps``,
``--steps``, ``--bucket-MiB``, ...) is checked by that parameter's entry in
:data:`wus_sim.params.POINT_KEYS`, so the command line and YAML accept exactly
the same values; options that are not point parameters have their range here.
:func:`check_options` runs on every parsed command line before the subcommand does.
"""

from ..params import POINT_KEYS, Param, check_param
from ..limits import MAX_CHUNKS

__all__ = ["OPTION_PARAMS", "check_options"]

OPTION_PARAMS = {p.name: p for p in (
    Param("chunks", "int", minimum=1, maximum=MAX_CHUNKS, nullable=False,
          meaning="Pipelined pieces per collective step."),
    Param("jobs", "int", minimum=1, maximum=1024, meaning="Worker processes."),
    Param("limit", "int", minimum=1, maximum=2**62, meaning="First N points of the sweep."),
    Param("repeat", "int", minimum=1, maximum=1000, nullable=False, meaning="Timed runs per benchmark case."),
    Param("replicas", "int", minimum=1, maximum=2**17, meaning="Data-parallel replicas."),
    Param("replica", "int", minimum=0, maximum=2**17, nullable=False, meaning="Replica whose shard is shown."),
    Param("replicate_below", "int", minimum=0, maximum=2**40, meaning="Tensors below this stay whole."),
    Param("max_padding_ratio", "number", minimum=0, maximum=1e6, meaning="Largest padding ratio."),
)}
"""Ranges of numeric options that are not point parameters."""


def check_options(args):
    """Check every numeric option of *args* (an argparse Namespace) against its declared range;
    store the normalised value back. Raises ConfigError naming the option."""
    for dest, value in vars(args).items():
        param = POINT_KEYS.get(dest) or OPTION_PARAMS.get(dest)
        if param is None or param.kind not in ("int", "number") or value is None:
            continue
        setattr(args, dest, check_param(param, value, key_path="--" + dest.replace("_", "-")))
