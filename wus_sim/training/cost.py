"""What a step costs: the chips it holds x its time x the price of a chip-hour.

Cloud TPU bills a slice per chip and hour while it exists (the Cloud TPU pricing page:
cloud.google.com/tpu/pricing), so one step of ``t`` seconds on ``C`` chips at ``P`` US dollars
per chip-hour costs ``C x t x P / 3600``. The chips are the slice's (times the slices of a
multislice) whatever the mesh or megacore does with them: an idle core is billed too.

Per unit of work: the LLMs (and BERT) count tokens, so a step's ``global batch x tokens per
example`` tokens give the cost of a million tokens. A workload whose flops unit is not the token
(ResNet's images, NCF's pairs, GNMT's and Transformer's sentence pairs) has no cost per million
tokens (``None``): its cost is given per 1,000 examples, which every workload has.

The price is the chip's ``price_usd_per_chip_hour`` in chips.yaml (the public on-demand price,
cited with region and date), or the run's own (``--price-per-chip-hour``, point key
``price_usd_per_chip_hour``: a committed-use or negotiated price). A chip without a price has
no cost, never an invented one.
"""

from dataclasses import dataclass
import math

from ..inputs.errors import ConfigError

__all__ = ["Price", "chip_price", "billed_chips", "tokens_per_example", "step_cost_usd", "cost_columns",
           "COST_KEYS", "SECONDS_PER_HOUR"]

SECONDS_PER_HOUR = 3600.0

COST_KEYS = ("cost_usd_per_step", "cost_usd_per_million_tokens", "cost_usd_per_thousand_examples")
"""The cost columns of a result (``None``/NaN where there is no price or no step time)."""


@dataclass(frozen=True)
class Price:
    """The price a run is costed at, and where it comes from."""

    chip: str
    """The chip's name in chips.yaml."""
    usd_per_chip_hour: float
    """US dollars per chip and hour; ``None``: no price (chips.yaml gives none and none was set)."""
    source: str
    """Where the price comes from: the chip's ``sources`` entry, or the option that set it."""

    @property
    def known(self):
        return self.usd_per_chip_hour is not None

    def to_dict(self):
        return {"chip": self.chip, "usd_per_chip_hour": self.usd_per_chip_hour, "source": self.source}


def _check_price(value, key_path):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not value > 0:
        raise ConfigError("must be a number of US dollars > 0", key_path=key_path, value=value)
    return float(value)


def chip_price(chip, override=None, *, override_by="price_usd_per_chip_hour"):
    """The :class:`Price` of *chip* (a :class:`~wus_sim.hardware.chips.Chip`): *override* (US
    dollars per chip-hour, set by *override_by*) if given, else chips.yaml's, else none."""
    if override is not None:
        return Price(chip.name, _check_price(override, override_by), f"{override_by} {float(override):g}")
    if chip.price_usd_per_chip_hour is None:
        return Price(chip.name, None, f"chips.yaml gives chip {chip.name} no price_usd_per_chip_hour")
    return Price(chip.name, float(chip.price_usd_per_chip_hour),
                 chip.sources.get("price_usd_per_chip_hour", f"chips.yaml, chip {chip.name} (no source given)"))


def billed_chips(topology, slices=1):
    """Chips a run holds: the slice's chips x *slices* (a multislice's slices)."""
    return int(topology.num_chips) * int(slices)


def tokens_per_example(workload):
    """Tokens of one example of a workload whose flops unit is the token (its sequence length),
    else ``None`` (images, pairs, sentence pairs: no cost per token)."""
    return workload.units_per_example if workload.flops_unit == "token" else None


def step_cost_usd(chips, step_time_s, usd_per_chip_hour):
    """``chips x step_time_s x usd_per_chip_hour / 3600``; ``None`` without a price or a finite time."""
    if usd_per_chip_hour is None or step_time_s is None or not math.isfinite(step_time_s):
        return None
    return chips * step_time_s * usd_per_chip_hour / SECONDS_PER_HOUR


def cost_columns(price, chips, step_time_s, global_batch, workload):
    """``{cost_usd_per_step, cost_usd_per_million_tokens, cost_usd_per_thousand_examples}`` of a
    step of *step_time_s* over *chips* chips at *price* (a :class:`Price`) running *global_batch*
    examples of *workload*; ``None`` where there is no price, no time or (per token) no tokens."""
    per_step = step_cost_usd(chips, step_time_s, price.usd_per_chip_hour if price is not None else None)
    tokens = tokens_per_example(workload)
    if per_step is None or not global_batch:
        return dict.fromkeys(COST_KEYS)
    return {"cost_usd_per_step": per_step,
            "cost_usd_per_million_tokens": None if tokens is None else per_step / (global_batch * tokens) * 1e6,
            "cost_usd_per_thousand_examples": per_step / global_batch * 1e3}
