"""The order of a line-ring schedule's passes (``2d``, ``ring`` over an axis, a mesh axis's
parts), shared by :mod:`wus_sim.collectives.schedules.plan` and the numpy-free
:mod:`wus_sim.collectives.engines.uniform_torus`. Plain Python: it imports nothing."""

__all__ = ["KINDS", "pass_order"]

KINDS = {"reduce-scatter": "rs", "all-gather": "ag", "all-reduce": "ar"}
"""Op -> the kind of its passes."""


def pass_order(kind, levels):
    """``[(pass kind, level index), ...]`` of a collective of *kind* (``"rs"``, ``"ag"``, ``"ar"``)
    over *levels* ring levels given in reduce-scatter order: reduce-scatter every level in
    order; all-gather them in reverse; all-reduce = reduce-scatter all but the last, the last
    level's ring all-reduce, all-gather the others in reverse."""
    if kind == "rs":
        return [("rs", i) for i in range(levels)]
    if kind == "ag":
        return [("ag", i) for i in reversed(range(levels))]
    if not levels:
        return []
    return [("rs", i) for i in range(levels - 1)] + [("ar", levels - 1)] + \
        [("ag", i) for i in reversed(range(levels - 1))]
