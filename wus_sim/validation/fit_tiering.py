"""The shipped calibration's second stage: today's LLM runs (the tiering page's rows on TPU v5p and
v6e, :mod:`wus_sim.validation.tiering`) fit what the TPU-v3 rows cannot tell.

The MLPerf TPU-v3 rows (2019-2020 TF and JAX) pin the elementwise traffic and each of their stacks'
matmul peak fraction and fixed cost per op; they are blind to two things that today's runs show:

* how close MaxText on the JAX/XLA of 2025 (stack ``maxtext-jax-2025``) brings a large matmul to the
  peak (``matmul_peak_fraction`` of that stack);
* the matmuls' output block (:attr:`~wus_sim.model.compute.ComputeParams.matmul_block`), which binds
  only where a chip has much compute per HBM byte: v6e (560 FLOP/B), not v3 (137) or v5p (166).

This stage fits those two to the expressible tiering rows with every other value at the first
stage's fit; :func:`wus_sim.validation.calibrate.calibrate` runs the two stages in turn twice (the
block, once fitted, declared to the v3 rows' refit), which settles them: the v3 rows move by under
1 % with the block. The tiering rows' fixed cost per op is declared 0: an LLM layer runs a few
matmuls of 10-100 ms each, so the v3 stacks' 0-30 us per op would move their steps by under 0.1 %
and the rows cannot pin it.
"""

from .fit import ELEMENTWISE_BWD_PER_FWD, Fitter

__all__ = ["LLM_STACK", "LLM_FITTED", "LLM_DECLARED_STACK", "TIERING_SOURCE", "llm_stage"]

LLM_STACK = "maxtext-jax-2025"
"""The tiering rows' software stack (:data:`~wus_sim.validation.measured.SOFTWARE_STACKS`)."""

LLM_FITTED = (f"matmul_peak_fraction@{LLM_STACK}", "matmul_block")
"""What the second stage fits."""

LLM_DECLARED_STACK = {"step_overhead_s": 0.0, "op_overhead_s": 0.0}
"""The tiering stack's fixed costs, declared (module docstring)."""

TIERING_SOURCE = {
    "name": "MaxText's tiering page: today's LLM runs on TPU v5p and v6e (the expressible rows)",
    "repository": "github.com/AI-Hypercomputer/maxtext (docs/reference/models/tiering.md); the recipes' configs and "
                  "tpu-recipes logs each row cites",
    "table": "wus_sim/data/validation/maxtext_tiering.csv",
}
"""Where the second stage's rows come from (``provenance.data.tiering`` of the calibration)."""


def llm_stage(first, declared, network, bounds, *, start=None, progress=None):
    """Fit :data:`LLM_FITTED` to the expressible tiering rows, every other value at *first* (the first
    stage's fitted values, ``name@stack`` included) and *declared*; ``(fitter, result)``."""
    from .tiering import tiering_fit_rows

    rows = tiering_fit_rows()
    shared = {n: v for n, v in first.items() if "@" not in n}
    if "elementwise_fwd_bytes" in shared and "elementwise_bwd_bytes" not in shared:
        shared["elementwise_bwd_bytes"] = shared["elementwise_fwd_bytes"] * ELEMENTWISE_BWD_PER_FWD
    fitter = Fitter(rows, {}, list(LLM_FITTED), network, bounds=bounds,
                    declared={**{k: v for k, v in declared.items() if k != "matmul_block"}, **shared,
                              **LLM_DECLARED_STACK})
    return fitter, fitter.fit(start=start, progress=progress)
