"""The cost parts of ``step``, ``plan`` and ``plan --search``: the ``--price-per-chip-hour``
option, the price a run is costed at (:mod:`wus_sim.training.cost`), the cost keys of ``--json``
and the text lines that show them.

``--json``: each strategy (``step``, ``plan``) or candidate (``plan --search``) gains
``cost_usd_per_step``, ``cost_usd_per_million_tokens`` (null for a workload not counted in
tokens) and ``cost_usd_per_thousand_examples``; the document gains ``price``: the chip, its
``usd_per_chip_hour`` (null: no price), the ``source`` and the ``chips`` billed.
"""

__all__ = ["add_price_option", "run_price", "price_report", "price_line", "money", "per_unit_label",
           "per_unit_key", "add_step_costs", "step_cost_lines", "PLAN_BASIS", "add_plan_costs", "plan_cost_lines"]


def add_price_option(parser):
    """``--price-per-chip-hour USD`` (point key ``price_usd_per_chip_hour``'s rule)."""
    parser.add_argument("--price-per-chip-hour", type=float, dest="price_per_chip_hour", default=None,
                        metavar="USD",
                        help="US dollars per chip and hour the cost of a step is computed at, e.g. a committed-use "
                             "price (default: the chip's public on-demand price in chips.yaml, cited; a chip "
                             "without one: no price)")


def run_price(args, chip):
    """The :class:`~wus_sim.training.cost.Price` of a command line's run on *chip*."""
    from ..training.cost import chip_price

    return chip_price(chip, getattr(args, "price_per_chip_hour", None), override_by="--price-per-chip-hour")


def price_report(price, chips):
    """``--json``'s ``price``: chip, US dollars per chip-hour (null: none), source, chips billed."""
    return {**price.to_dict(), "chips": chips}


def money(usd):
    """US dollars as text: cents above a dollar, three significant digits below ('-': none)."""
    if usd is None:
        return "-"
    if usd >= 1e5:
        return f"${usd:,.0f}"
    if usd >= 1:
        return f"${usd:,.2f}"
    return f"${usd:.3g}"


def per_unit_key(workload):
    """The cost key a workload's work is counted in: per million tokens, else per 1,000 examples."""
    from ..training.cost import tokens_per_example

    return "cost_usd_per_million_tokens" if tokens_per_example(workload) else "cost_usd_per_thousand_examples"


def per_unit_label(workload):
    """``'M tokens'`` for a workload counted in tokens, else ``'1,000 <examples>'`` (images, ...)."""
    if per_unit_key(workload) == "cost_usd_per_million_tokens":
        return "M tokens"
    unit = workload.example_unit
    return f"1,000 {unit if unit.endswith('s') else unit + 's'}"


def price_line(price, indent="  ", lead="cost: "):
    """One text line: how a step is costed (chips, price, source), or that there is no price;
    *price* as :func:`price_report` gives it."""
    if price["usd_per_chip_hour"] is None:
        return f"{indent}{lead}no price ({price['source']}; --price-per-chip-hour USD sets one)"
    return (f"{indent}{lead}{price['chips']:,} chips x step time x {money(price['usd_per_chip_hour'])} per chip-hour "
            f"/ 3600 ({price['chip']}: {price['source']})")


def add_step_costs(report, args, run, topology, multislice=None):
    """``step --json``'s cost keys: each strategy's, and the ``price`` it was costed at."""
    from ..training.cost import billed_chips, cost_columns

    price = run_price(args, topology.chip)
    chips = billed_chips(topology, 1 if multislice is None else multislice.slices)
    whole = getattr(run.mesh, "workload", None) or run.plan.workload  # a tensor mesh's plan holds 1/T of it
    for per in report["strategies"].values():
        per.update(cost_columns(price, chips, per.get("step_time_s"), run.global_batch, whole))
    report["price"] = price_report(price, chips)


def step_cost_lines(rep, names, width, workload):
    """``step``'s text: the cost rows of its table and, under them, how they were costed."""
    unit, key = per_unit_label(workload), per_unit_key(workload)
    per = rep["strategies"]
    return ["  " + "  cost a step".ljust(width) + "".join(money(per[n].get("cost_usd_per_step")).rjust(16)
                                                       for n in names),
            "  " + f"  cost per {unit}".ljust(width) + "".join(money(per[n].get(key)).rjust(16) for n in names),
            price_line(rep["price"], indent="    ")]


PLAN_BASIS = ("forward + backward + update of one replica: no communication and no fixed costs, so a lower "
              "bound (step simulates the whole step)")
"""What ``plan`` costs: the times it computes, not a simulated step."""


def add_plan_costs(report, args, topology, multislice, workload):
    """``plan --json``'s cost keys per strategy, over :data:`PLAN_BASIS`, and the ``price``."""
    from ..training.cost import billed_chips, cost_columns

    price = run_price(args, topology.chip)
    chips = billed_chips(topology, 1 if multislice is None else multislice.slices)
    c = report["compute"]
    global_batch = report["per_replica_batch"] * report["replicas"]
    for x in report["strategies"].values():
        seconds = c["fwd_time_s"] + c["bwd_time_s"] + x["update_time_s"]
        x.update(cost_columns(price, chips, seconds, global_batch, workload))
    report["price"] = {**price_report(price, chips), "basis": PLAN_BASIS}


def plan_cost_lines(r, names, width):
    """``plan``'s text: the cost rows of its table (a lower bound) and how they were costed."""
    per = r["strategies"]
    tokens = not any(per[n]["cost_usd_per_step"] is not None and per[n]["cost_usd_per_million_tokens"] is None
                     for n in names)
    key, unit = (("cost_usd_per_million_tokens", "M tokens") if tokens else
                 ("cost_usd_per_thousand_examples", "1,000 ex."))
    return ["  " + "min cost a step".ljust(width) + "".join(money(per[n]["cost_usd_per_step"]).rjust(22)
                                                                 for n in names),
            "  " + f"min cost per {unit}".ljust(width) + "".join(money(per[n][key]).rjust(22) for n in names),
            price_line(r["price"]) + f"; the step's time taken as {r['price']['basis']}"]
