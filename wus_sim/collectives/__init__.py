"""Collectives over TPU slices: reduce-scatter, all-gather, all-reduce and all-to-all.

Size convention for all four: ``nbytes = S``, the full unsharded buffer per
replica (reduce-scatter: ``S`` in, ``S/N`` out; all-gather: ``S/N`` in, ``S``
out; all-reduce: ``S`` in and out; all-to-all: ``S`` in and out, a block of ``S/N``
for each member, as MPI and XLA count it).

Rooms, lowest first: :mod:`.schedules` (a collective as messages on a torus: groups, rings,
passes, messages, link loads), :mod:`.engines` (what times a schedule: the SimPy reference, the
max-plus fast engine, the window engine, the numpy-free uniform torus, the data replay); at the
top :mod:`.analytic` (closed forms) and :mod:`.api` (the entry points below). Importing the
package loads no SimPy.
"""

from ..inputs.lazy_names import lazy_names

# The names load their module on first use (PEP 562), as the package wus_sim's do: importing
# one light module of this package (``uniform_torus``, which ``wus-sim collective`` runs
# before numpy loads) must not import the engines and numpy with it.
_LAZY = {"ENGINES": "api", "CollectiveResult": "api", "analytic_time": "api", "clear_caches": "api",
         "collective_time": "api", "collective_times": "api", "simulate_collective": "api",
         "phase_times": "analytic", "ALGORITHMS": "schedules.plan", "EXCHANGE_ALGORITHMS": "schedules.plan",
         "OPS": "schedules.plan", "REDUCE_OPS": "schedules.plan", "ALLTOALL_ALGORITHMS": "schedules.plan",
         "default_alltoall_algorithm": "schedules.alltoall"}

__all__ = ["OPS", "REDUCE_OPS", "ALGORITHMS", "ALLTOALL_ALGORITHMS", "EXCHANGE_ALGORITHMS", "ENGINES",
           "CollectiveResult", "simulate_collective", "analytic_time", "collective_time", "collective_times",
           "clear_caches", "phase_times", "default_alltoall_algorithm"]

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
