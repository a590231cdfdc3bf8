"""Parallelism beyond the data axis: one step on a device mesh and the search over meshes.

:mod:`.mesh_step` (a step on data x pipeline x fsdp x context x tensor x expert in a slice and data x
pipeline x fsdp x expert across slices), :mod:`.tensor_parallel` (one device's share of a layer split
T ways and the activation collectives it costs), :mod:`.expert_parallel` (the expert axis: routed
experts split E ways, the all-to-alls of each MoE layer), :mod:`.context_parallel` (the context axis:
each sequence split C ways, the K/V all-gathers of each attention layer), :mod:`.pipeline_parallel`
(the pipeline axis: blocks split into stages, the schedule's bubble, the stage-to-stage permutes),
:mod:`.mesh_search` (every factorisation ranked).

May import: the step (:mod:`wus_sim.training.step`) and every other room of training, and the
layers below; nothing in training imports this package.
"""
