"""Workload files from Hugging Face configs and MaxText model files: the importer's front door and
its families.

:mod:`.hf_import` (:func:`~.hf_import.import_workload`, the front door), :mod:`.importers`
(config and safetensors-header reading, file output), :mod:`.document` (the workload document a
family's config gives), :mod:`.hf_model` (a model as tensors and layers), :mod:`.hf_families`
(which family a config is) and one module per family: :mod:`.hf_decoder`, :mod:`.hf_deepseek`,
:mod:`.hf_t5`, :mod:`.hf_vit`; :mod:`.maxtext_model` (a MaxText model's keys as the config of the
family that builds its tensors) and :mod:`.maxtext_keys` (the keys it knows).

May import: :mod:`wus_sim.model`'s top modules (workload files, compute) and the layers below;
nothing else in model imports it.
"""
