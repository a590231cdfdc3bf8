"""One memo of collective plans, shared by both engines, the closed form and the link loads.

A plan does not depend on the size, so it is built once per (slice, op, algorithm, group,
direction). Slices are keyed by value (:func:`topology_key`): equal slices built
separately share entries.
"""

from functools import lru_cache

from .groups import group_key
from .plan import check_op_algorithm, plan_collective

__all__ = ["cached_plan", "clear_plan_cache", "topology_key"]


def topology_key(t):
    """Hashable value of a topology: equal slices built separately share cache entries."""
    return (t.name, t.dims, t.wrap, t.axis_link_Bps, t.hop_latency_s, t.onchip_Bps, t.cores_per_chip,
            t.link_Bps_override, t.chip.hbm_Bps)


_TOPOLOGIES = {}


@lru_cache(maxsize=1024)
def _plan_by_key(tkey, op, algorithm, group, bidirectional):
    group = list(group) if isinstance(group, tuple) else group
    return plan_collective(_TOPOLOGIES[tkey], op, algorithm, group=group, bidirectional=bidirectional)


def cached_plan(topology, op, algorithm, *, group=None, bidirectional=False):
    """:func:`plan_collective`, memoized by the topology's value and the normalized group.

    The one plan cache of the package: the api, the fast engine and :func:`phase_times
    <wus_sim.collectives.analytic.phase_times>` share its plans, and with them the caches
    keyed by plan or embedding objects.
    """
    # names are checked before the cache, so that an unhashable one is still a user error
    check_op_algorithm(op, algorithm)
    key = topology_key(topology)
    _TOPOLOGIES.setdefault(key, topology)
    return _plan_by_key(key, op, algorithm, group_key(group), bool(bidirectional))


def clear_plan_cache():
    """Forget the memoized plans."""
    _plan_by_key.cache_clear()
    _TOPOLOGIES.clear()
