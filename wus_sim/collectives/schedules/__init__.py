"""What turns a collective into messages on a torus, before any engine times them.

:mod:`.groups` (which replicas take part), :mod:`.embedding` and :mod:`.snake` (which chips form
each ring and which links its edges use), :mod:`.plan`, :mod:`.alltoall` and :mod:`.pass_order` (an
algorithm as passes of rings, size-free; :mod:`.passes` what a plan is made of), :mod:`.plan_cache` (one memo of plans), :mod:`.messages` (a plan and
a size as the message table) and :mod:`.loads` (static link loads: whether messages contend).

May import: the layers below collectives (hardware, inputs); never the engines or the entry
points. Importing this package loads nothing (:mod:`.snake` and :mod:`.pass_order` are plain
Python, read by the numpy-free :mod:`wus_sim.collectives.engines.uniform_torus`).
"""
