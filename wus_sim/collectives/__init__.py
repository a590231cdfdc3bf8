"""Collectives over TPU slices: reduce-scatter, all-gather and all-reduce.

Size convention for all three: ``nbytes = S``, the full unsharded buffer per
replica (reduce-scatter: ``S`` in, ``S/N`` out; all-gather: ``S/N`` in, ``S``
out; all-reduce: ``S`` in and out).

Modules: :mod:`.embedding` (which links each ring uses), :mod:`.groups`, :mod:`.plan`
and :mod:`.plan_cache` (algorithms as passes), :mod:`.messages` (passes as messages),
:mod:`.loads` (static link loads), :mod:`.replay` (the data check), :mod:`.analytic` (closed forms),
:mod:`.simpy_engine` (per-message reference), :mod:`.fast_engine` (max-plus
recurrence, uncontended), :mod:`.window_engine` (every message, a time window at a
time, contended or not), :mod:`.api` (the entry points below). Importing the package loads
no SimPy.
"""

from .api import (ENGINES, CollectiveResult, analytic_time, clear_caches, collective_time, collective_times,
                  simulate_collective)
from .analytic import phase_times
from .plan import ALGORITHMS, EXCHANGE_ALGORITHMS, OPS

__all__ = ["OPS", "ALGORITHMS", "EXCHANGE_ALGORITHMS", "ENGINES", "CollectiveResult", "simulate_collective",
           "analytic_time", "collective_time", "collective_times", "clear_caches", "phase_times"]
