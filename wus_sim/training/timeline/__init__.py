"""A step as a program and its two timelines.

:mod:`.step_program` (what one replica does in a step, as plain data), :mod:`.timeline` (the
program as SimPy processes: the reference), :mod:`.timeline_direct` (the same times in program
order, without an event queue) and :mod:`.trace` (Chrome trace-event JSON of a timeline).

May import: :mod:`wus_sim.training.parameters` and the layers below training; never the step
or the parallelism that build programs.
"""
