"""Speedups of a simulated point: each strategy over replicated, the hypothetical one where
replicated does not fit in HBM, and fully-sharded over sharded (ratios of :class:`StepResult`
step times, NaN where a ratio has no meaning)."""

import math

__all__ = ["speedup", "speedups", "speedups_if_replicated_fit", "fully_sharded_over_sharded"]


def speedup(results, strategy="sharded"):
    """Replicated step time / *strategy*'s step time (NaN unless both ran and fit)."""
    r, s = results.get("replicated"), results.get(strategy)
    if r is None or s is None or r.status != "ok" or s.status != "ok":
        return math.nan
    return r.step_time_s / s.step_time_s


def speedups(results):
    """``{strategy: replicated step time / its step time}`` for every strategy run but
    replicated (NaN where either did not run or fit)."""
    return {s: speedup(results, s) for s in results if s != "replicated"}


def speedups_if_replicated_fit(results):
    """``{strategy: replicated step time with HBM capacity ignored / its step time}`` for every
    strategy but replicated, where replicated does not fit and the strategy does (NaN
    elsewhere): the answer :func:`speedups` cannot give, marked as hypothetical."""
    r = results.get("replicated")
    out = {}
    for s, res in results.items():
        if s == "replicated":
            continue
        ok = r is not None and r.status == "infeasible" and res.status == "ok"
        out[s] = r.step_time_if_fit_s / res.step_time_s if ok else math.nan
    return out


def fully_sharded_over_sharded(results):
    """Sharded step time / fully-sharded step time (NaN unless both ran and fit)."""
    s, f = results.get("sharded"), results.get("fully-sharded")
    if s is None or f is None or s.status != "ok" or f.status != "ok":
        return math.nan
    return s.step_time_s / f.step_time_s
