"""``wus_sim.import_workload``: a Hugging Face config or safetensors checkpoint as a loaded
:class:`~wus_sim.model.workload.Workload`, optionally written as a workload file too.

    >>> import wus_sim
    >>> w = wus_sim.import_workload("Qwen2-7B/config.json")          # nothing is downloaded
    >>> w.params, w.units_per_example, w.sources["sequence"]
    >>> wus_sim.simulate_strategies(w, "tpu-v5p-128", "adamw").speedups
    >>> wus_sim.import_workload("Qwen2-7B/config.json", out="qwen2-7b.yaml")   # also writes the file

The text-returning writer is :func:`wus_sim.model.importers.importers.import_workload` (what
``wus-sim import-workload`` prints).
"""

from pathlib import Path

__all__ = ["import_workload"]


def import_workload(path, *, sequence_length=None, name=None, out=None):
    """The :class:`~wus_sim.model.workload.Workload` of *path* (a ``config.json``, a
    ``.safetensors`` file, a ``model.safetensors.index.json`` or a folder holding them; see
    :mod:`wus_sim.model.importers.importers`; or a MaxText model ``.yml``:
    :mod:`wus_sim.model.importers.maxtext_model`). *sequence_length* defaults to min(the config's context,
    4,096) (a MaxText file: its ``max_target_length``, else 2,048) (:data:`wus_sim.model.importers.hf_families.DEFAULT_SEQUENCE_TOKENS`); *out* also writes the
    workload file there, which then is the workload's ``path``. What the import approximates is
    in ``sources["notes"]``."""
    from . import importers
    from ..workload_files import load_workload, workload_from_document

    if out is not None:
        importers.import_workload(path, sequence_length=sequence_length, name=name, out=out)
        return load_workload(str(Path(out).resolve()))  # a path, never taken for a shipped name
    doc = importers.workload_document(path, sequence_length=sequence_length, name=name)
    return workload_from_document(doc, None)
