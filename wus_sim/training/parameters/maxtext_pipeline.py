"""MaxText's pipeline keys as point parameters (:mod:`.maxtext`'s translation, kept apart: one concept).

base.yml (github.com/AI-Hypercomputer/maxtext at e591f30cbbf2, src/maxtext/configs/base.yml) and
types.py's checks: ``num_pipeline_microbatches`` -1 = the stages (else a multiple of them),
``num_layers_per_pipeline_stage`` 1, ``num_pipeline_repeats`` -1 = derived from it,
``pipeline_parallel_layers`` -1 = every decoder layer. ``ici_pipeline_parallelism`` and
``dcn_pipeline_parallelism`` are read with the other mesh keys (the mesh has a ``pipeline`` axis).
"""

from ...inputs.errors import ConfigError

__all__ = ["pipeline_keys"]

KEYS = ("num_pipeline_microbatches", "num_layers_per_pipeline_stage")


def _whole(t, key, *, fill=False):
    v = t.inp.value(key)
    if isinstance(v, bool) or not isinstance(v, int) or not (v >= 1 or (fill and v == -1)):
        raise ConfigError("must be a whole number >= 1" + (", or -1 (the stages)" if fill else ""), key_path=key,
                          value=v)
    return v


def pipeline_keys(t):
    """Set ``pipeline_microbatches`` and ``pipeline_layers_per_stage`` from the run's keys where its mesh
    has a pipeline axis (the circular schedule is MaxText's, the default); without one, a key given
    is listed as changing nothing. ``num_pipeline_repeats``, ``pipeline_parallel_layers`` and the
    other pipeline keys stay with the rest: accepted at base.yml's defaults only."""
    t.used.update(KEYS)
    stages = t.inp.value("ici_pipeline_parallelism") * (t.inp.value("dcn_pipeline_parallelism")
                                                         if t.run.slices > 1 else 1)
    if stages == 1:
        for key in KEYS:
            if t.inp.given(key):
                t.run.listed.append((t.word(key), "the run has no pipeline axis"))
        return
    micro = _whole(t, "num_pipeline_microbatches", fill=True)
    if micro != -1:
        t.set("pipeline_microbatches", micro, "num_pipeline_microbatches")
    t.set("pipeline_layers_per_stage", _whole(t, "num_layers_per_pipeline_stage"), "num_layers_per_pipeline_stage")
