"""The engines: what turns a compiled schedule into event times, and what only they use.

:mod:`.simpy_engine` (every message through the SimPy network: the reference),
:mod:`.fast_engine` (a max-plus recurrence, exact where no link serves two streams; the
all-to-all's passes in :mod:`.fast_alltoall`),
:mod:`.window_engine` (any schedule, contended or not, a time window at a time) with its
:mod:`.window_tables`, :mod:`.window_steps`, :mod:`.window_copies` and :mod:`.clean_rings`,
:mod:`.uniform_torus` (plain Python, what ``wus-sim collective`` runs before numpy loads),
:mod:`.replay` (every byte delivered once: the data check) and :mod:`.malloc_tuning`.

May import: :mod:`wus_sim.collectives.schedules` and the layers below collectives; never the
entry points above it (:mod:`wus_sim.collectives.api`). Importing this package loads nothing.
"""
