"""The plots of an experiment that asks for none: chosen from what its sweep varies.

An experiment without ``plots:`` used to draw nothing, without a word. Its sweep says
what a reader wants to see: the first numeric swept key (the slice, through its replica
count, or a bandwidth, a batch, ...) is the x axis of the speedup and of the step time;
two numeric keys make a speedup heatmap (faceted by the first other key, the rest pinned to
their first value: a cell must not average points unasked); the rest (workloads, optimizers, ...) are the
series. A sweep of a language model also gets its MFU and tokens per second per device over the
same x, when its rows have them. A small sweep (at most :data:`MAX_BAR_GROUPS` points) also gets the step-time
breakdown and the memory bars, which stop being readable past that.

The defaults are chosen before the sweep runs, so they cannot know what will fit in HBM.
:func:`fit_default_plots` fits them to the results: on the LLM question (Llama-3-8B on
tpu-v6e-256, where only fully-sharded fits) the sharded speedup heatmap would be all blank,
so it shows what has values instead, and a default plot with nothing at all is dropped.
"""

from ..inputs.config import Section

__all__ = ["default_plots", "fit_default_plots", "counts_tokens", "MAX_BAR_GROUPS"]

MAX_BAR_GROUPS = 12
"""Largest sweep that also gets breakdown and memory bars (two bars a point)."""


def default_plots(experiment):
    """:class:`~wus_sim.experiments.spec.PlotSpec` tuple for *experiment* (see the module)."""
    from ..experiments.spec import POINT_KEYS, PlotSpec

    swept = experiment.swept_keys()
    numeric = [("replicas" if k == "topology" else k) for k in swept
               if k == "topology" or POINT_KEYS[k].kind in ("int", "number")]
    others = [k for k in swept if k != "topology" and k not in numeric and k != "strategy"]
    strategies = {str(v) for axis in experiment.axes for k, vals in zip(axis.keys, axis.values)
                  if k == "strategy" for v in vals} or {experiment.base.get("strategy") or "both"}
    both = bool({"both", "all"} & strategies) or {"replicated", "sharded"} <= strategies

    specs = []
    if numeric:
        x, series = numeric[0], others + numeric[1:]
        if both:
            specs.append(("speedup", {"x": x, "hue": series}))
        specs.append(("step_time", {"kind": "lines", "x": x, "y": "step_time_s", "hue": series}))
        if counts_tokens(experiment):  # a language model's throughput, as MaxText reports it
            specs.append(("mfu", {"kind": "lines", "x": x, "y": "mfu", "hue": series}))
            specs.append(("tokens_per_s", {"kind": "lines", "x": x, "y": "tokens_per_s_per_device", "hue": series}))
        if both and len(numeric) > 1:
            # every swept key has a place: x, y, the facet, or pinned to its first value (a cell
            # must not average points unasked; the subtitle names what is pinned)
            placed = {numeric[0], numeric[1], "replicas" if "topology" in swept else None, *others[:1]}
            pins = {axis.keys[0]: axis.values[0][0] for axis in experiment.axes
                    if len(axis) > 1 and not set(axis.keys) & (placed | {"strategy", "topology"})}
            specs.append(("heatmap", {"x": numeric[1], "y": x, **({"facet": others[0]} if others else {}),
                                      **({"where": pins} if pins else {})}))
    if numeric and experiment.count() > MAX_BAR_GROUPS:
        # too many points for memory bars: each strategy's peak per replica as lines, what does not
        # fit drawn hollow at what it would need, against the HBM line
        specs.append(("memory_peak", {"kind": "lines", "x": numeric[0], "y": "mem_peak_bytes",
                                      "hue": others + numeric[1:]}))
    if experiment.count() <= MAX_BAR_GROUPS:
        by = {"by": [k for k in swept if k != "strategy"]} if swept else {}
        specs.append(("breakdown", dict(by)))
        specs.append(("memory", dict(by)))
    out = []
    for name, options in specs:
        kind = options.pop("kind", name)
        data = {"kind": kind, "name": name, **options}
        out.append(PlotSpec(kind=kind, name=name, options=options,
                            section=Section(data, file=experiment.file, path=f"plots (default '{name}')")))
    return tuple(out)


def counts_tokens(experiment):
    """Whether some workload of *experiment* is a language model (its FLOPs counted per token): its
    sweep also gets MFU and tokens per second per device, the figures a MaxText user reads first."""
    from ..inputs.errors import WusError
    from ..model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too

    for name in experiment.values_of("workload"):
        try:
            unit = load_workload(name).flops_unit
        except (WusError, OSError, TypeError):
            continue
        if isinstance(unit, str) and unit.endswith("token"):
            return True
    return False


HEATMAP_CHOICES = (("sharded", "speedup"), ("fully-sharded", "speedup"), ("fully-sharded", "speedup_over_sharded"),
                   ("sharded", "speedup_if_replicated_fit"), ("fully-sharded", "speedup_if_replicated_fit"),
                   ("fully-sharded", "step_time_s"), ("sharded", "step_time_s"), ("replicated", "step_time_s"))
"""What a default heatmap shows, the first of these with a value in some cell: the speedup of
sharding, then fully sharding (over replicated, over sharded), then the speedups if replicated
fit in HBM, then the step time of a strategy that fits."""


def fit_default_plots(plots, df):
    """*plots* (:func:`default_plots`) fitted to the results *df*: each default heatmap shows
    the first of :data:`HEATMAP_CHOICES` that has a value, and a default plot with no value to
    draw (no strategy fits; no speedup and no if-fit speedup) is left out, never an empty panel."""
    import math

    from ..experiments.spec import PlotSpec

    ok = df[df["status"] == "ok"] if "status" in df.columns else df

    def has(strategy, column):
        # memory has a value where it does not fit too: what the strategy would need
        rows = df if column.startswith("mem_") else ok
        rows = rows[rows["strategy"] == strategy] if "strategy" in rows.columns else rows
        return column in rows.columns and any(math.isfinite(v) for v in rows[column].astype(float))

    out = []
    for plot in plots:
        if plot.kind == "heatmap":
            choice = next((c for c in HEATMAP_CHOICES if has(*c)), None)
            if choice is None:
                continue
            strategy, value = choice
            options = {**plot.options, "strategy": strategy, "value": value}
            data = {"kind": plot.kind, "name": plot.name, **options}
            plot = PlotSpec(kind=plot.kind, name=plot.name, options=options,
                            section=Section(data, file=plot.section.file, path=plot.section.path))
        elif plot.kind == "speedup" and not any(has(s, c) for s in ("sharded", "fully-sharded")
                                                for c in ("speedup", "speedup_if_replicated_fit")):
            continue
        elif plot.kind == "lines" and not any(has(s, plot.options.get("y", "step_time_s"))
                                              for s in ("replicated", "sharded", "fully-sharded")):
            continue
        out.append(plot)
    return tuple(out)
