"""The weight update over data-parallel replicas: how it is planned and what each strategy does.

:mod:`.planner` (how each tensor is cut over N replicas, fused into buckets and owned),
:mod:`.sharding_plan` (that plan as data) and :mod:`.strategies` (replicated, sharded and
fully-sharded: what a step does after backward, as plain data).

May import: :mod:`wus_sim.training.parameters` and the layers below training; never the
timeline, the step or the parallelism above it.
"""
