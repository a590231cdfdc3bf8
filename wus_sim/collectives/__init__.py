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

from ..inputs.lazy_names import lazy_names

# The names load their module on first use (PEP 562), as the package wus_sim's do: importing
# one light module of this package (``uniform_torus``, which ``wus-sim collective`` runs
# before numpy loads) must not import the engines and numpy with it.
_LAZY = {"ENGINES": "api", "CollectiveResult": "api", "analytic_time": "api", "clear_caches": "api",
         "collective_time": "api", "collective_times": "api", "simulate_collective": "api",
         "phase_times": "analytic", "ALGORITHMS": "plan", "EXCHANGE_ALGORITHMS": "plan", "OPS": "plan"}

__all__ = ["OPS", "ALGORITHMS", "EXCHANGE_ALGORITHMS", "ENGINES", "CollectiveResult", "simulate_collective",
           "analytic_time", "collective_time", "collective_times", "clear_caches", "phase_times"]

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
