"""Which replicas take part in a collective: the whole slice, the lines of one axis, a list,
or the groups of a device-mesh axis (:mod:`wus_sim.hardware.mesh`): every group at once, one
ring per group and physical part."""

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ...inputs.errors import ConfigError

__all__ = ["Group", "resolve_group", "group_key", "mesh_group", "one_copy"]

_AXIS_NAMES = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class Group:
    """Which replicas take part: all of them, the lines along one axis, or an explicit list."""

    kind: str
    """``"all"``, ``"axis"``, ``"list"`` or ``"mesh"``."""
    axis: int = None
    """The axis for ``kind == "axis"``."""
    replicas: tuple = None
    """Replica ids in ring order for ``kind == "list"``."""
    size: int = 1
    """Replicas in one group (for ``"axis"``: in one line)."""
    parts: tuple = ()
    """For ``kind == "mesh"``: the physical parts ``(axis, stride, length)`` one group spans
    (axis -1: the cores of a chip; a part's members are ``stride`` apart along its axis), sorted;
    every group of the mesh axis runs at once."""


def resolve_group(topology, group):
    """A :class:`Group` from ``None``/``"all"``, ``"x"``/``"y"``/``"z"``/0/1/2, or a list of replica ids."""
    c = topology.cores_per_chip
    if isinstance(group, Group):
        if group.kind == "mesh":
            _check_parts(topology, group)
        return group
    if group is None or (isinstance(group, str) and group.lower() == "all"):
        return Group("all", size=topology.num_replicas)
    if isinstance(group, str) or (isinstance(group, (int, np.integer)) and not isinstance(group, bool)):
        axis = _AXIS_NAMES.get(group.lower()) if isinstance(group, str) else int(group)
        if axis is None or not 0 <= axis < topology.ndim:
            names = ", ".join(["all"] + list("xyz"[: topology.ndim]))
            raise ConfigError(f"must be one of {names}, an axis number < {topology.ndim}, "
                              "or a list of replica ids", key_path="group", value=group)
        return Group("axis", axis=axis, size=topology.dims[axis] * c)
    try:
        replicas = [int(r) for r in group]
        bad = any(isinstance(r, bool) or int(r) != r for r in group)
    except (TypeError, ValueError):
        raise ConfigError("must be all, x, y, z or a list of replica ids", key_path="group",
                          value=group) from None
    if bad or not replicas:
        raise ConfigError("must be a non-empty list of whole replica ids", key_path="group", value=group)
    if len(set(replicas)) != len(replicas):
        raise ConfigError("lists a replica twice", key_path="group", value=replicas)
    if min(replicas) < 0 or max(replicas) >= topology.num_replicas:
        raise ConfigError(f"must hold replica ids 0..{topology.num_replicas - 1}", key_path="group",
                          value=replicas)
    return Group("list", replicas=tuple(replicas), size=len(replicas))


def mesh_group(layout, *axes):
    """The :class:`Group` of the mesh axes *axes* of *layout* (a
    :class:`wus_sim.hardware.mesh.MeshLayout`) together: every group of them at once."""
    parts = tuple(layout.group_parts(*axes))
    size = 1
    for _, _, length in parts:
        size *= length
    return Group("mesh", parts=parts, size=size)


def one_copy(topology, group):
    """``(topology, group)`` with every torus axis the mesh *group* does not span cut to one chip:
    the slice on which one copy of its collective runs, taking the same time.

    Why exact: a mesh group's rings run along its parts' axes only (:func:`plan_collective
    <wus_sim.collectives.schedules.plan.plan_collective>`), and a route between two members that
    differ only on those axes never leaves their line or plane, so the groups at each coordinate
    of an unspanned axis are copies that share no link, each timed as the others. Simulating one
    copy is what makes a whole-pod mesh affordable: a v5p pod's (16, 20, 28) torus, a group over
    two of its axes, is 16 copies of one 20 x 28 plane, each built and run 16 times over else
    (the step's contended collectives: 9x faster, bit-identical times; tests/collectives). A slice
    with failed or overridden links (link ids of the whole slice) is kept whole. Any other group
    is returned as given."""
    if not isinstance(group, Group) or group.kind != "mesh" or topology.failed_links or topology.link_Bps_override:
        return topology, group
    spanned = frozenset(a for a, _, _ in group.parts if a >= 0)
    if all(a in spanned or d == 1 for a, d in enumerate(topology.dims)):
        return topology, group
    return _copy_slice(topology, spanned), group


@lru_cache(maxsize=64)
def _copy_slice(topology, spanned):
    """*topology* with the axes outside *spanned* cut to one chip, no wraparound (one object per
    slice and set of axes: the plan and time memos key on its value)."""
    dims = tuple(d if a in spanned else 1 for a, d in enumerate(topology.dims))
    wrap = tuple(w and a in spanned for a, w in enumerate(topology.wrap))
    return replace(topology, dims=dims, wrap=wrap, description=f"one copy of a mesh group's rings on {topology.name}")


def _check_parts(topology, group):
    dims = {-1: topology.cores_per_chip, **dict(enumerate(topology.dims))}
    for axis, stride, length in group.parts:
        if axis not in dims or stride < 1 or length < 1 or dims[axis] % (stride * length):
            raise ConfigError(f"mesh part ({axis}, {stride}, {length}) does not fit {topology.name}",
                              key_path="group", value=group.parts)
        if axis == -1 and (stride, length) != (1, topology.cores_per_chip):
            raise ConfigError("a mesh axis takes a chip's cores all together or not at all",
                              key_path="group", value=group.parts)


def group_key(group):
    """Hashable, normalized group (``None`` for the whole slice)."""
    if isinstance(group, Group):
        return group
    if group is None or (isinstance(group, str) and group.lower() == "all"):
        return None
    if isinstance(group, str):
        return group.lower()
    if isinstance(group, (int, np.integer)) and not isinstance(group, bool):
        return int(group)
    try:
        return tuple(group)
    except TypeError:
        return group
