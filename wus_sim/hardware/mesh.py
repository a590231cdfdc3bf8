"""Device meshes: named axes ``data``, ``fsdp``, ``tensor`` laid on a slice's torus.

A mesh names how the slice's devices (chips with megacore, TensorCores otherwise) split the
work: ``tensor`` splits each layer's matmuls (Shoeybi et al. 2019, "Megatron-LM", arXiv
1909.08053), ``fsdp`` shards weights, gradients and optimizer state (ZeRO-3, Rajbhandari et
al. 2020, arXiv 1910.02054), ``data`` replicates the weights (the update strategy says how
they are updated: Xu et al. 2020's weight-update sharding). The vocabulary and the axis
order are MaxText's (github.com/AI-Hypercomputer/maxtext, ``ici_<axis>_parallelism`` /
``dcn_<axis>_parallelism`` in ``configs/base.yml``); the mesh of the DCN (``dcn_mesh``)
names how the slices split the same work.

Layout (:func:`layout`): devices are numbered in the order JAX lists them, the cores of a
chip fastest, then the torus axes x, y, z (``replica = chip * cores + core``, chip ids row
major, x fastest; wrapped axes before unwrapped ones, see :func:`_physical_axes`), and the
mesh ``(data, fsdp, tensor)`` is that sequence reshaped row-major,
so ``tensor`` is innermost (fastest varying) as in ``jax.experimental.mesh_utils.
create_device_mesh``: tensor groups are the nearest devices. Each mesh axis then occupies
whole physical axes or a contiguous part of one (a *part*: ``(axis, stride, length)``, axis
``-1`` being the cores of a chip); a size that would straddle a physical axis without
dividing it has no such layout and is refused, with the factorisations that have one.
Each axis's collectives run on rings over its parts
(:func:`wus_sim.collectives.schedules.groups.mesh_group`).
"""

from dataclasses import dataclass
import math

from ..inputs.errors import ConfigError

__all__ = ["MESH_AXES", "DCN_AXES", "Mesh", "parse_mesh", "mesh_text", "mesh_json_schema", "layout", "MeshLayout", "factorisations",
           "Placement"]

MESH_AXES = ("data", "fsdp", "tensor")
"""Mesh axes, outermost first (MaxText's order of the same names)."""
DCN_AXES = ("data", "fsdp")
"""Axes a mesh of slices may have: tensor over the DCN is never recommended (MaxText's
sharding guide) and is not modelled."""


@dataclass(frozen=True)
class Mesh:
    """Sizes of the mesh axes; a missing axis is 1."""

    data: int = 1
    fsdp: int = 1
    tensor: int = 1

    @property
    def size(self):
        """Devices the mesh spans (product of its axes)."""
        return self.data * self.fsdp * self.tensor

    def to_dict(self):
        return {a: getattr(self, a) for a in MESH_AXES}

    def __str__(self):
        return ",".join(f"{a}={getattr(self, a)}" for a in MESH_AXES if getattr(self, a) > 1) or "data=1"


def parse_mesh(value, *, key_path="mesh", axes=MESH_AXES):
    """A :class:`Mesh` from ``"data=4,fsdp=2"``, a mapping ``{data: 4, fsdp: 2}`` or a Mesh
    (``None`` stays ``None``). Errors name *key_path*, the value and the rule."""
    if value is None or isinstance(value, Mesh):
        return value
    rule = f"must be axis=size pairs over {', '.join(axes)} (e.g. {axes[-1]}=4), each size a whole number >= 1"
    if isinstance(value, str):
        pairs = {}
        for item in value.replace(" ", "").split(","):
            name, sep, size = item.partition("=")
            if not sep or name in pairs:
                raise ConfigError(rule, key_path=key_path, value=value)
            pairs[name] = size
        try:
            pairs = {k: int(v) for k, v in pairs.items()}
        except ValueError:
            raise ConfigError(rule, key_path=key_path, value=value) from None
    elif isinstance(value, dict):
        pairs = dict(value)
    else:
        raise ConfigError(rule, key_path=key_path, value=value)
    for name, size in pairs.items():
        if name not in axes:
            raise ConfigError(f"names an unknown axis {name!r}; known: {', '.join(axes)}", key_path=key_path,
                              value=value)
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 2**17:
            raise ConfigError(rule, key_path=f"{key_path}.{name}", value=size)
    return Mesh(**pairs)


def _physical_axes(topology):
    """Physical axes innermost first: ``(axis, length)``, axis -1 the cores of a chip, then the
    wrapped torus axes in axis order, then the unwrapped (mesh-line) ones. Why wrapped first:
    an axis split between two mesh axes leaves a strided part, and on a wrapped axis its
    interleaved groups run contention-free rings (one direction each, see
    :func:`wus_sim.collectives.schedules.embedding.part_rings`), while on a line they would share every
    link. JAX's ``create_device_mesh`` likewise picks which physical axes each mesh axis takes
    rather than reshaping blindly; on slices whose every axis wraps (v4, v5p, v6e) the order
    is plain x, y, z."""
    axes = [(-1, topology.cores_per_chip)] if topology.cores_per_chip > 1 else []
    chip = [(a, d) for a, d in enumerate(topology.dims) if d > 1]
    return axes + sorted(chip, key=lambda ad: not topology.wrap[ad[0]])


@dataclass(frozen=True)
class MeshLayout:
    """Where each mesh axis lies on the slice: its parts ``(axis, stride, length)``."""

    mesh: Mesh
    parts: dict
    """``{axis name: ((physical axis, stride, length), ...)}``, innermost part first; axis -1
    is the cores of a chip."""
    topology_name: str = ""
    dims: dict = None
    """``{physical axis: length}`` of the slice (axis -1: cores per chip)."""
    order: tuple = ()
    """The physical axes ``(axis, length)`` in the order the mesh is laid on them, innermost first."""

    def group_parts(self, *names):
        """The physical parts the named mesh axes span together, sorted, adjacent parts of one
        axis merged (what :func:`wus_sim.collectives.schedules.groups.mesh_group` takes)."""
        return _merge(sorted(p for n in MESH_AXES[::-1] if n in names for p in self.parts[n]))

    def members(self, name, index=0, cores_per_chip=1):
        """Device ids of group *index* of axis *name*, in mesh-coordinate order."""
        m = self.mesh
        sizes = {"data": m.data, "fsdp": m.fsdp, "tensor": m.tensor}
        strides = {"tensor": 1, "fsdp": m.tensor, "data": m.tensor * m.fsdp}
        others = [a for a in MESH_AXES if a != name]
        coords, rest = {}, index
        for a in others[::-1]:  # the group's index over the other axes, innermost fastest
            coords[a] = rest % sizes[a]
            rest //= sizes[a]
        base = sum(coords[a] * strides[a] for a in others)
        return [self.device(base + k * strides[name]) for k in range(sizes[name])]

    def device(self, position):
        """Device id (``chip * cores + core``, chips row-major, x fastest) at *position* of the
        sequence the mesh reshapes (:attr:`order`, innermost first)."""
        coord = {}
        for axis, length in self.order:
            coord[axis] = position % length
            position //= length
        cores = self.dims.get(-1, 1)
        chip, stride = 0, 1
        for axis in sorted(a for a in self.dims if a >= 0):
            chip += coord.get(axis, 0) * stride
            stride *= self.dims[axis]
        return chip * cores + coord.get(-1, 0)

    def describe(self):
        """Lines naming each axis's physical parts."""
        names = {-1: "cores of a chip", 0: "x", 1: "y", 2: "z"}
        out = []
        for axis in MESH_AXES[::-1]:
            parts = self.parts[axis]
            where = " x ".join(
                f"{names[a]}" + ("" if s == 1 and n == self._dim(a) else f"[{n} of stride {s}]")
                for a, s, n in parts) or "-"
            out.append(f"{axis}={getattr(self.mesh, axis)}: {where}")
        return out

    def _dim(self, axis):
        return self.dims[axis]


def _merge(parts):
    """Adjacent parts of one physical axis as one (``(a, 1, 2)`` and ``(a, 2, 4)`` are ``(a, 1, 8)``):
    two mesh axes that together hold a whole physical axis use its rings, as that axis alone would."""
    out = []
    for axis, stride, length in parts:
        if out and out[-1][0] == axis and out[-1][1] * out[-1][2] == stride:
            out[-1] = (axis, out[-1][1], out[-1][2] * length)
        else:
            out.append((axis, stride, length))
    return tuple(out)


def layout(topology, mesh, *, key_path="mesh"):
    """The :class:`MeshLayout` of *mesh* on *topology* (raises a one-line ConfigError naming the
    factorisations that would work when it has none)."""
    devices = topology.num_replicas
    if mesh.size != devices:
        raise ConfigError(f"multiplies to {mesh.size} devices; {topology.name} has {devices} "
                          f"({_device_word(topology)}); meshes that fit: {_suggest(topology, mesh)}",
                          key_path=key_path, value=str(mesh))
    parts = _assign(topology, mesh)
    if parts is None:
        raise ConfigError(f"cannot be laid on {topology.name}'s axes "
                          f"({' x '.join(str(d) for _, d in _physical_axes(topology))}): an axis straddles a "
                          f"physical axis it does not divide; meshes that fit: {_suggest(topology, mesh)}",
                          key_path=key_path, value=str(mesh))
    order = tuple(_physical_axes(topology))
    return MeshLayout(mesh, parts, topology.name, dict(order), order)


def _device_word(topology):
    return "TensorCores" if topology.cores_per_chip > 1 else "chips"


def _assign(topology, mesh):
    """Row-major reshape of the device order into (data, fsdp, tensor), as physical parts, or
    ``None`` where an axis would straddle a physical axis it does not divide."""
    phys = [[a, d, 1] for a, d in _physical_axes(topology)]  # axis, length left, stride used
    parts, i = {}, 0
    for name in MESH_AXES[::-1]:
        need, mine = getattr(mesh, name), []
        while need > 1:
            while i < len(phys) and phys[i][1] == 1:
                i += 1
            axis, left, stride = phys[i]
            take = math.gcd(need, left)
            if take == 1 or (take < need and take < left):
                return None  # straddles: a part of this axis and a part of the next
            mine.append((axis, stride, take))
            phys[i][1] //= take
            phys[i][2] *= take
            need //= take
        parts[name] = tuple(mine)
    return parts


def factorisations(topology, axes=MESH_AXES):
    """Every mesh over *axes* whose sizes multiply to the slice's devices and that has a
    layout, in (data, fsdp, tensor) order."""
    n = topology.num_replicas
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    out = []
    for t in divisors:
        for f in divisors:
            if (n // t) % f:
                continue
            m = Mesh(data=n // (t * f), fsdp=f, tensor=t)
            if any(getattr(m, a) > 1 for a in MESH_AXES if a not in axes):
                continue
            if _assign(topology, m) is not None:
                out.append(m)
    return out


def _suggest(topology, asked=None, most=6):
    """The meshes that fit, nearest the one *asked* first (by its tensor size, then fsdp)."""
    fits = factorisations(topology)
    asked = asked or Mesh()

    def distance(m):
        return (abs(math.log(m.tensor / asked.tensor)), abs(math.log(m.fsdp / asked.fsdp)), m.tensor, m.data)

    shown = ", ".join(f"--mesh {m}" for m in sorted(fits, key=distance)[:most])
    more = f" (and {len(fits) - most} more)" if len(fits) > most else ""
    return shown + more


@dataclass(frozen=True)
class Placement:
    """How a run places its work on the hardware, in one value: megacore, spatial ways, slices
    and the mesh axes within a slice and across slices. ``None`` fields mean the model's default
    (the topology's cores, the MLPerf run's spatial ways, the topology file's slices, pure data
    parallelism)."""

    megacore: bool = False
    spatial_ways: int = None
    slices: int = None
    mesh: Mesh = None
    dcn_mesh: Mesh = None

    def __post_init__(self):
        object.__setattr__(self, "mesh", parse_mesh(self.mesh))
        object.__setattr__(self, "dcn_mesh", parse_mesh(self.dcn_mesh, key_path="dcn_mesh", axes=DCN_AXES))
        if self.dcn_mesh is not None:
            if self.slices is not None and self.slices != self.dcn_mesh.size:
                raise ConfigError(f"multiplies to {self.dcn_mesh.size} slices, but slices is {self.slices}",
                                  key_path="dcn_mesh", value=str(self.dcn_mesh))
            object.__setattr__(self, "slices", self.dcn_mesh.size)
        if self.mesh is not None and self.spatial_ways not in (None, 1):
            raise ConfigError("give a mesh or spatial_ways, not both (the mesh's tensor axis splits a layer "
                              "over devices)", key_path="spatial_ways", value=self.spatial_ways)


def mesh_text(value, *, axes=("data", "fsdp", "tensor"), key_path="mesh"):
    """A mesh as its canonical text (``"fsdp=64,tensor=4"``; axes of size 1 left out), from
    ``axis=size`` text or a mapping: the value a point parameter holds."""
    return str(parse_mesh(value, key_path=key_path, axes=axes))


def mesh_json_schema(axes):
    """JSON Schema of a mesh value over *axes*: ``axis=size`` text or a mapping."""
    names = "|".join(axes)
    return {"anyOf": [
        {"type": "string", "pattern": f"^ *({names}) *= *[0-9]+ *(, *({names}) *= *[0-9]+ *)*$"},
        {"type": "object", "additionalProperties": False, "minProperties": 1,
         "properties": {a: {"type": "integer", "minimum": 1} for a in axes}}]}
