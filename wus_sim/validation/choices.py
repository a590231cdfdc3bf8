"""The disputed network choices, each validated against the same measured rows.

Where sources disagree on a network figure or nobody publishes it (link bandwidth,
ring direction, sub-pod wraparound, per-hop latency, the algorithm of small all-reduces,
routing),
the shipped default follows the evidence in docs/validation.md ("Defaults from evidence") and
this module reports how well each alternative fits the measured runs, under the same
calibration: the table that ``wus-sim validate --choices`` prints.
"""

import math
from dataclasses import dataclass

from .validate import summary, validate

__all__ = ["Choice", "CHOICES", "compare_choices", "choices_table"]


@dataclass(frozen=True)
class Choice:
    """One alternative: a label, collective overrides and slice overrides."""

    label: str
    network: dict
    """Overrides of :data:`~wus_sim.validation.simulate.NETWORK_DEFAULTS` (algorithm, bidirectional,
    small-all-reduce algorithm, routing)."""
    topology: dict
    """Keyword overrides of :func:`~wus_sim.hardware.topology.load_topology` for every slice."""


CHOICES = (
    Choice("shipped: `2d`, both directions on wrapped axes, 100 GB/s, sub-pod meshes, 1 us hops, "
           "small all-reduces `auto`", {}, {}),
    Choice("`2d`, one direction everywhere", {"bidirectional": False}, {}),
    Choice("`2d-split`, both directions", {"algorithm": "2d-split"}, {}),
    Choice("link 70 GB/s (ISCA 2023 table) instead of 100", {}, {"link_GBps": 70.0}),
    Choice("link 50 GB/s", {}, {"link_GBps": 50.0}),
    Choice("sub-pod slices wrap (torus) instead of mesh", {}, {"wraparound": True}),
    Choice("hop latency 0.5 us instead of 1 (no primary source for either)", {}, {"hop_latency_us": 0.5}),
    Choice("small all-reduces (batch-norm statistics, LARS/LAMB norms) by halving-doubling always",
           {"small_allreduce_algorithm": "halving-doubling"}, {}),
    Choice("small all-reduces by recursive doubling always", {"small_allreduce_algorithm": "recursive-doubling"}, {}),
    Choice("small all-reduces by a ring (batch-norm groups in row-major block order)",
           {"small_allreduce_algorithm": "ring"}, {}),
    Choice("cut-through routing instead of store-and-forward (mesh folded rings' two-hop edges at one "
           "hop's time)", {"routing": "cut-through"}, {}),
)
"""The alternatives compared, the shipped defaults first."""


def compare_choices(calibration=None, *, choices=CHOICES, runs=None, refit=False):
    """``[(choice, summary)]``: :func:`~wus_sim.validation.validate.summary` of every measured
    row simulated under each choice, with one calibration; or, *refit*, ``[(choice, summary,
    refitted summary)]`` where the third is under the choice's own calibration (the chip
    parameters fitted again to the rows simulated under that choice), which does not favour the
    choice the shipped calibration was fitted under. *runs* defaults to the v0.6 table."""
    from .calibrate import calibrate
    from .measured import SHIPPED_MEASURED, load_measured

    # the v0.6 runs, where the network figures are disputed: the v0.7 multipod rows take minutes
    # a fit under some choices (2d-split on v3-8192 needs the event engine)
    runs = load_measured(SHIPPED_MEASURED) if runs is None else runs
    out = []
    for c in choices:
        shared = summary(validate(calibration, runs=runs, network=c.network, topology_overrides=c.topology))
        if not refit:
            out.append((c, shared))
            continue
        own = calibrate(runs=runs, network=c.network, topology_overrides=c.topology,
                        calibration_id=f"refit: {c.label}", leave_one_out=False, uncertainty=False)
        out.append((c, shared, summary(validate(own, runs=runs, network=c.network,
                                                topology_overrides=c.topology))))
    return out


def choices_table(results):
    """A Markdown table of :func:`compare_choices`' results (refitted columns when present)."""
    refit = any(len(r) > 2 for r in results)
    head = "| choice | median | worst | rms of log error | bounds kept |"
    if refit:
        head += " refitted: median | worst | rms of log error | bounds kept |"
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for choice, *summaries in results:
        cells = [choice.label]
        for s in summaries:
            b = s["bounds"]
            # every expressible training-only row is fitted now: the columns are their errors
            part = s["calibration"] if s["calibration"]["rows"] else s["held_out"]
            cells += [f"{100 * part['median_abs_error']:.1f} %", f"{100 * part['worst_abs_error']:.1f} %",
                      f"{100 * s.get('rms_log', math.nan):.1f} %", f"{b['within']}/{b['rows']}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
