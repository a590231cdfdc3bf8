"""One memo of collective plans, shared by both engines, the closed form and the link loads.

A plan does not depend on the size, so it is built once per (slice, op, algorithm, group,
direction). :class:`~wus_sim.hardware.topology.Topology` is hashable by value, so equal slices
built separately share entries.
"""

from functools import lru_cache

from .groups import group_key
from .plan import check_op_algorithm, plan_collective

__all__ = ["cached_plan", "clear_plan_cache"]


@lru_cache(maxsize=1024)
def _plan(topology, op, algorithm, group, bidirectional):
    group = list(group) if isinstance(group, tuple) else group
    return plan_collective(topology, op, algorithm, group=group, bidirectional=bidirectional)


def cached_plan(topology, op, algorithm, *, group=None, bidirectional=False):
    """:func:`plan_collective`, memoized by the topology's value and the normalized group.

    The one plan cache of the package: the api, the fast engine and :func:`phase_times
    <wus_sim.collectives.analytic.phase_times>` share its plans, and with them the caches
    keyed by plan or embedding objects.
    """
    # names are checked before the cache, so that an unhashable one is still a user error
    check_op_algorithm(op, algorithm)
    return _plan(topology, op, algorithm, group_key(group), bool(bidirectional))


def clear_plan_cache():
    """Forget the memoized plans (and the line rings they share)."""
    from .embedding import clear_ring_cache

    _plan.cache_clear()
    clear_ring_cache()
