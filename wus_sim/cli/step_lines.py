"""The header lines of ``wus-sim step``'s text output that explain a point: what the
calibration was checked on, the multislice's DCN figures, the remat policy; and the MaxText units
(MFU, TFLOP/s, tokens/s per device) of each strategy's columns; and ``--json``'s speedups had the
replicated update fit."""

import math

__all__ = []


def _checked(calibration, *, overridden):
    """What the calibration's numbers were checked against (its ``provenance.validation``), or
    ``None``: no calibration, a file without that record, or a fitted value overridden."""
    checked = calibration.provenance.get("validation") if calibration.provenance else None
    if overridden or not isinstance(checked, dict):
        return None
    return {"measured": "", **checked}


def _checked_line(rep):
    """The model error the calibration states, where the point lies inside what it was checked
    on; outside, what lies outside instead (the stated error was not measured there)."""
    from ..validation.calibrate import model_error_line

    checked = rep.get("validated_range") or {}
    if checked.get("outside") and rep.get("checked"):  # an error is stated, but it was measured elsewhere
        return "  outside the validated range, so no measured error applies: " + "; ".join(checked["outside"])
    return "  " + model_error_line(rep.get("checked"), rep["calibration"])


def _dcn_line(multislice):
    """The multislice's DCN figures with their sources: a default taken for a chip that gives none
    is an assumption the reader must see."""
    from ..inputs.units import GB, US

    src = multislice.sources
    return (f"  multislice: {multislice.slices} slices over the DCN at {multislice.dcn_Bps / GB:g} GB/s per chip "
            f"({src.get('dcn_GBps', '')}), {multislice.dcn_latency_s / US:g} us per exchange "
            f"({src.get('dcn_latency_us', '')})")


_REMAT_LINES = {
    "selective": "each layer keeps its input and weight-matmul outputs; backward recomputes its norms, activation "
                 "functions and attention (MaxText's minimal)",
    "layer": "each layer keeps its input; backward recomputes its forward (MaxText's full)",
    "full": "every ceil(sqrt(L))-th layer keeps its input; backward recomputes one forward (Chen et al. 2016)",
}
"""What each remat policy keeps and recomputes, one line for the text output."""


def throughput_columns(run, strategy, topology):
    """``mfu``, ``tflops_per_s_per_device`` and ``tokens_per_s_per_device`` of one strategy (MaxText's
    units, :mod:`wus_sim.model.model_flops`; null where the step has no time)."""
    mf = run.throughput(strategy, topology)
    keys = ("mfu", "tflops_per_s_per_device", "tokens_per_s_per_device")
    return dict.fromkeys(keys) if mf is None else {k: mf.to_dict()[k] for k in keys}


def if_fit_report(results):
    """``speedup_if_replicated_fit`` and ``fully_sharded_over_sharded`` of ``--json`` (null where
    they do not apply)."""
    from ..training.step import fully_sharded_over_sharded, speedups_if_replicated_fit

    fit = speedups_if_replicated_fit(results)
    nan_none = lambda v: None if math.isnan(v) else v  # noqa: E731
    return {"speedup_if_replicated_fit": {s: nan_none(v) for s, v in fit.items()} if len(results) > 1 else None,
            "fully_sharded_over_sharded": nan_none(fully_sharded_over_sharded(results))}
