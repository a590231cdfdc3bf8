"""Device meshes: named axes ``data``, ``pipeline``, ``fsdp``, ``context``, ``tensor``, ``expert`` laid on a slice's torus.

The mesh as an input value (its axis sizes and the one rule that reads them, the placement of a
run) is :mod:`wus_sim.hardware.mesh_spec`; this module lays it on a slice.

A mesh names how the slice's devices (chips with megacore, TensorCores otherwise) split the
work: ``tensor`` splits each layer's matmuls (Shoeybi et al. 2019, "Megatron-LM", arXiv
1909.08053), ``fsdp`` shards weights, gradients and optimizer state (ZeRO-3, Rajbhandari et
al. 2020, arXiv 1910.02054), ``data`` replicates the weights (the update strategy says how
they are updated: Xu et al. 2020's weight-update sharding), ``expert`` splits the routed experts
of each mixture-of-experts layer and acts as fsdp for the rest of the model
(:mod:`wus_sim.training.parallelism.expert_parallel`), ``context`` splits each sequence and acts as
fsdp for the weights (:mod:`wus_sim.training.parallelism.context_parallel`), ``pipeline`` (MaxText's
``stage``) splits the transformer blocks into stages
(:mod:`wus_sim.training.parallelism.pipeline_parallel`). The vocabulary and the axis
order are MaxText's (github.com/AI-Hypercomputer/maxtext, ``ici_<axis>_parallelism`` /
``dcn_<axis>_parallelism`` in ``configs/base.yml``); the mesh of the DCN (``dcn_mesh``)
names how the slices split the same work.

Layout (:func:`layout`): devices are numbered in the order JAX lists them, the cores of a
chip fastest, then the torus axes x, y, z (``replica = chip * cores + core``, chip ids row
major, x fastest; wrapped axes before unwrapped ones, see :func:`_physical_axes`), and the
mesh ``(data, pipeline, fsdp, context, tensor, expert)`` is that sequence reshaped row-major,
so ``expert`` is innermost (fastest varying), then ``tensor``, as in ``jax.experimental.mesh_utils.
create_device_mesh`` with MaxText's axis order: expert groups are the nearest devices, tensor
groups the next nearest. Each mesh axis then occupies
whole physical axes or a contiguous part of one (a *part*: ``(axis, stride, length)``, axis
``-1`` being the cores of a chip). Each axis's collectives run on rings over its parts
(:func:`wus_sim.collectives.schedules.groups.mesh_group`).

Where that reshape has no such layout (a size that would straddle a physical axis without
dividing it, e.g. ``data=12,fsdp=16,tensor=8`` on an 8x12x16 v5p slice: fsdp would take 4
of y's 12 and 4 of z), the mesh is laid out as JAX lays it out
(:func:`_jax_assign`): ``jax.experimental.mesh_utils.create_device_mesh(...,
allow_split_physical_axes=True)`` (jax/_src/mesh_utils.py, ``_create_device_mesh_for_nd_torus``
and ``_create_device_mesh_for_nd_torus_splitting_axes``), which is what MaxText calls when
its ``allow_split_physical_axes`` is set. In our words, the rule is:

1. The physical axes are x, y, z in that order (with the cores of a chip last when they are
   separate devices, as JAX's physical mesh of v2/v3 has them). The mesh axes are placed
   from the last (``expert``, then ``tensor``: JAX takes the last as the most network-intensive)
   to the first (``data``).
2. Without splitting: a mesh axis takes a set of whole physical axes not yet taken whose
   sizes multiply to its size, trying sets of three axes, then two, then one, each in
   ``itertools.combinations`` order; the first that fits is kept. If every mesh axis finds
   one, that is the layout (the 8x12x16 example: tensor = x, fsdp = z, data = y, no split).
3. Otherwise the assignment starts again, splitting axes: a mesh axis of size ``n`` takes a
   factor ``f_p`` of what is left of each physical axis ``p`` (``prod f_p = n``; every way of
   handing out ``n``'s prime factors is a candidate), and the candidate kept is the one that
   (a) has the largest product of factors that are whole physical axes, then (b) the most
   whole physical axes, then (c) the largest product of factors on physical axes that more
   intensive mesh axes already use (JAX's comment says it means to avoid those; its code
   prefers them, and we do what the code does), then (d) the lexicographically largest
   ``(f_x, f_y, f_z)``.
4. Within a physical axis split between mesh axes, the more intensive axis's factor is the
   minor (fastest-varying) one: a physical axis of 12 with ``data`` 3 and ``fsdp`` 4 gives
   fsdp the contiguous runs of 4 chips (stride 1) and data every 4th chip (stride 4). So a
   split axis's group is either a contiguous segment (a line without a wraparound of its own)
   or a strided set whose ring edges each cross ``stride`` links: the collectives plan those
   edges as multi-hop routes (:func:`wus_sim.collectives.schedules.embedding.part_rings`)
   and the engines time them, contention where routes share links included.

A mesh whose sizes multiply to the devices always has such a layout. Meshes the reshape
lays out keep its layout (their numbers are unchanged); for some of them JAX would pick other
axes (on 4x8x8, ``fsdp=32,tensor=8`` reshapes to tensor = x and half of y, where JAX gives
tensor the whole y).

MaxText's ``custom_mesh`` (:data:`CUSTOM_MESHES`, ``layout(..., custom_mesh=NAME)``) lays a
two-axis mesh on a 16 x 16 slice its own way (github.com/AI-Hypercomputer/maxtext,
src/maxtext/utils/max_utils.py: ``reshape_mesh_to_rings``, ``create_custom_device_mesh``,
``is_valid_custom_mesh``; called by ``create_device_mesh`` in src/maxtext/utils/maxtext_utils.py
on every slice when the run has more than one, else when ``allow_split_physical_axes`` is set).
It takes JAX's ``create_device_mesh([16, 16])`` array ``a`` (our :func:`_whole_axes`: ``a``'s
second axis is x, its first y), cuts it into blocks of ``rows x cols`` devices (2 x 2 for
``hybrid_ring_64x4``, 2 x 4 for ``hybrid_ring_32x8``), lists each block as a ring (its first row
left to right, its second back), and reshapes the ``(blocks, ring)`` array row-major into the
mesh. So the inner axis (the ring, of size ``rows cols``) is a block, ``(x, 1, cols) x (y, 1,
rows)``, its members in that back-and-forth order (:attr:`MeshLayout.snake`), every ring edge one
link; the outer axis (the blocks) is every ``cols``-th chip along x and every ``rows``-th along
y, ``(x, cols, 16 / cols) x (y, rows, 16 / rows)``, blocks numbered with x fastest. On a 16 x 16
torus its parts close round the wraparound (``hybrid_ring_64x4``: 8 chips 2 links apart on each
axis), where JAX's split layout of the same ``fsdp=64,tensor=4`` gives tensor a 4-chip segment
of x (folded ring edges of 1-2 links) and fsdp x at stride 4 times the whole y. Its collectives
are timed as every mesh group's are: one ring pass per part.
"""

from dataclasses import dataclass
import itertools
import math

from ..inputs.errors import ConfigError
from .mesh_spec import CORE_AXES, DCN_AXES, MESH_AXES, Mesh, Placement, mesh_json_schema, mesh_text, parse_mesh, shown_axes

__all__ = ["MESH_AXES", "DCN_AXES", "CORE_AXES", "Mesh", "parse_mesh", "mesh_text", "mesh_json_schema", "shown_axes",
           "layout", "MeshLayout", "factorisations", "Placement", "CUSTOM_MESHES"]

CUSTOM_MESHES = {"hybrid_ring_64x4": (2, 2), "hybrid_ring_32x8": (2, 4)}
"""MaxText's ``custom_mesh`` names (src/maxtext/utils/max_utils.py, ``HYBRID_RING_64X4``,
``HYBRID_RING_32X8``) and the block ``(rows, cols)`` of its 16 x 16 device array that each ring
covers (``reshape_mesh_to_rings``: ``a[2i, 2j], a[2i, 2j+1], a[2i+1, 2j+1], a[2i+1, 2j]`` for
64x4; ``a[2i, 4j..4j+3]`` then ``a[2i+1, 4j+3..4j]`` for 32x8)."""

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
    """``{axis name: ((physical axis, stride, length), ...)}``, the minor part first (the part
    whose coordinate varies fastest along the mesh axis); axis -1 is the cores of a chip."""
    topology_name: str = ""
    dims: dict = None
    """``{physical axis: length}`` of the slice (axis -1: cores per chip)."""
    order: tuple = ()
    """The physical axes ``(axis, length)`` in the order the mesh is laid on them, innermost first."""
    wrapped: frozenset = frozenset()
    """The physical axes with a wraparound link."""
    rule: str = "reshape"
    """``'reshape'`` (JAX's device order reshaped row-major), ``'jax'`` (JAX's assignment of
    mesh axes to physical axes, splitting them where needed: :func:`_jax_assign`) or a name of
    :data:`CUSTOM_MESHES` (MaxText's ring layout: :func:`_custom_parts`)."""
    snake: frozenset = frozenset()
    """The mesh axes whose members run back and forth over their two parts (a ring of MaxText's
    ``custom_mesh``: the minor part's order reversed at every odd position of the major part)."""

    def group_parts(self, *names):
        """The physical parts the named mesh axes span together, sorted, adjacent parts of one
        axis merged (what :func:`wus_sim.collectives.schedules.groups.mesh_group` takes)."""
        return _merge(sorted(p for n in MESH_AXES[::-1] if n in names for p in self.parts[n]))

    def members(self, name, index=0, cores_per_chip=1):
        """Device ids of group *index* of axis *name*, in mesh-coordinate order."""
        m = self.mesh
        sizes = m.to_dict()
        others = [a for a in MESH_AXES if a != name]
        coords, rest = {}, index
        for a in others[::-1]:  # the group's index over the other axes, innermost fastest
            coords[a] = rest % sizes[a]
            rest //= sizes[a]
        out = []
        for k in range(sizes[name]):
            coords[name] = k
            out.append(self.device_at(coords))
        return out

    def device_at(self, coords):
        """Device id (``chip * cores + core``, chips row-major, x fastest) at mesh coordinates
        *coords* (``{axis name: index}``): each axis's index read over its parts, minor first,
        each part moving ``stride`` positions along its physical axis per step."""
        where = {}
        for name, parts in self.parts.items():
            rest = coords.get(name, 0)
            for i, (axis, stride, length) in enumerate(parts):
                k = rest % length
                if name in self.snake and i == 0 and (rest // length) % 2:
                    k = length - 1 - k  # back along the block's second row
                where[axis] = where.get(axis, 0) + k * stride
                rest //= length
        cores = self.dims.get(-1, 1)
        chip, step = 0, 1
        for axis in sorted(a for a in self.dims if a >= 0):
            chip += where.get(axis, 0) * step
            step *= self.dims[axis]
        return chip * cores + where.get(-1, 0)

    def describe(self):
        """Lines naming each axis's physical parts; a part that is not a whole axis says how many
        links its ring edges cross (:meth:`edge_hops`)."""
        names = {-1: "cores of a chip", 0: "x", 1: "y", 2: "z"}
        out = []
        for axis in shown_axes(self.mesh)[::-1]:
            parts = self.parts[axis]
            where = " x ".join(
                f"{names[a]}" + ("" if s == 1 and n == self._dim(a) else f"[{n} of stride {s}, {self._hops_text(a, s, n)}]")
                for a, s, n in parts) or "-"
            ring = f" (one {self.rule} ring in MaxText's order)" if axis in self.snake else ""
            out.append(f"{axis}={getattr(self.mesh, axis)}: {where}{ring}")
        return out

    def edge_hops(self, axis, stride, length):
        """``(fewest, most)`` links one ring edge of the part crosses: ``stride`` on a ring
        that closes round a wrapped axis (or a pair), up to ``2 stride`` on the folded ring of
        a segment (:func:`wus_sim.collectives.schedules.embedding.line_ring_pattern`)."""
        if axis == -1:
            return (1, 1)
        closes = (axis in self.wrapped and stride * length == self._dim(axis)) or length <= 2
        return (stride, stride) if closes else (stride, 2 * stride)

    def _hops_text(self, axis, stride, length):
        lo, hi = self.edge_hops(axis, stride, length)
        return f"{lo}-hop ring edges" if lo == hi else f"{lo}-{hi}-hop ring edges"

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


def layout(topology, mesh, *, key_path="mesh", custom_mesh=None):
    """The :class:`MeshLayout` of *mesh* on *topology*: the reshape's where it has one, else
    JAX's (see the module docstring); with *custom_mesh* (a name of :data:`CUSTOM_MESHES`),
    MaxText's ring layout. Raises a one-line ConfigError naming meshes that fit when the sizes
    do not multiply to the slice's devices, or where MaxText would refuse the custom mesh."""
    devices = topology.num_replicas
    if mesh.size != devices:
        raise ConfigError(f"multiplies to {mesh.size} devices; {topology.name} has {devices} "
                          f"({_device_word(topology)}); meshes that fit: {_suggest(topology, mesh)}",
                          key_path=key_path, value=str(mesh))
    order = tuple(_physical_axes(topology))
    wrapped = frozenset(a for a, w in enumerate(topology.wrap) if w)
    if custom_mesh:
        parts, snake = _custom_parts(topology, mesh, custom_mesh, key_path)
        return MeshLayout(mesh, parts, topology.name, dict(order), order, wrapped, custom_mesh, snake)
    parts, rule = _assign(topology, mesh), "reshape"
    if parts is None:  # the reshape would straddle a physical axis: JAX's assignment
        parts, rule = _jax_assign(topology, mesh), "jax"
    return MeshLayout(mesh, parts, topology.name, dict(order), order, wrapped, rule)


def _custom_parts(topology, mesh, name, key_path):
    """``(parts, snake axes)`` of MaxText's custom mesh *name* (the module docstring), or the
    one-line error MaxText's own checks give: ``create_custom_device_mesh`` asserts whole 256s of
    devices and builds ``create_device_mesh([16, 16])`` per slice, which only a 16 x 16 slice of
    one device per chip lays out; ``is_valid_custom_mesh`` wants the ICI axis sizes to be
    ``{1, ring, 256 / ring}``; the ``(blocks, ring)`` array reshaped row-major into the mesh keeps
    the ring an axis only when the blocks' axis comes first (MaxText's axis order is ours)."""
    if name not in CUSTOM_MESHES:
        raise ConfigError(f"is not a custom mesh wus-sim lays out; known: {', '.join(CUSTOM_MESHES)}",
                          key_path="custom_mesh", value=name)
    rows, cols = CUSTOM_MESHES[name]
    ring = rows * cols
    phys = _jax_physical_axes(topology)
    if sorted(d for _, d in phys if d > 1) != [16, 16]:
        raise ConfigError(f"{name} lays out a 16 x 16 slice of one device per chip (MaxText's "
                          f"create_device_mesh([16, 16])); {topology.name} is not one", key_path="custom_mesh",
                          value=name)
    sized = [a for a in MESH_AXES if getattr(mesh, a) > 1]
    if [getattr(mesh, a) for a in sized] != [256 // ring, ring]:
        raise ConfigError(f"{name} needs an axis of {256 // ring} then (inner, in the order {', '.join(MESH_AXES)}) "
                          f"an axis of {ring}, every other axis 1", key_path=key_path, value=str(mesh))
    table = _whole_axes([d for _, d in phys], [16, 16])  # a = create_device_mesh([16, 16])
    y, x = (next(phys[i][0] for i in range(len(phys)) if table[i][j] > 1) for j in (0, 1))
    parts = {a: () for a in MESH_AXES}
    outer, inner = sized
    parts[outer] = ((x, cols, 16 // cols), (y, rows, 16 // rows))  # blocks numbered x fastest
    parts[inner] = ((x, 1, cols), (y, 1, rows))  # the block, read back and forth
    return parts, frozenset((inner,))


def _device_word(topology):
    return "TensorCores" if topology.cores_per_chip > 1 else "chips"


def _assign(topology, mesh):
    """Row-major reshape of the device order into :data:`MESH_AXES`, as physical parts, or
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


def _jax_physical_axes(topology):
    """The physical axes as JAX's physical mesh lists them: x, y, z, then the cores of a chip
    when they are separate devices (JAX's v2/v3 mesh ``[x, y, core]``)."""
    axes = list(enumerate(topology.dims))
    return axes + ([(-1, topology.cores_per_chip)] if topology.cores_per_chip > 1 else [])


def _prime_factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _jax_assign(topology, mesh):
    """Parts of every mesh axis as JAX assigns mesh axes to physical axes (the rule is in the
    module docstring; jax/_src/mesh_utils.py, ``_create_device_mesh_for_nd_torus`` and
    ``_create_device_mesh_for_nd_torus_splitting_axes``), minor part first."""
    phys = _jax_physical_axes(topology)
    dims = [d for _, d in phys]
    sizes = [getattr(mesh, n) for n in MESH_AXES]
    table = _whole_axes(dims, sizes)
    if table is None:
        table = _split_axes(dims, sizes)
    parts = {}
    for j, name in enumerate(MESH_AXES):
        mine = []
        for i in reversed(range(len(phys))):  # the last physical axis is the minor digit
            if table[i][j] > 1:
                stride = math.prod(table[i][k] for k in range(j + 1, len(MESH_AXES)))
                mine.append((phys[i][0], stride, table[i][j]))
        parts[name] = tuple(mine)
    return parts


def _whole_axes(dims, sizes):
    """JAX's assignment without splitting: ``table[physical][mesh axis]`` of factors, or None."""
    left = list(dims)
    table = [[1] * len(sizes) for _ in dims]
    for j in reversed(range(len(sizes))):
        found = None
        for k in range(len(dims), 0, -1):
            found = next((c for c in itertools.combinations(range(len(dims)), k)
                          if math.prod(left[i] for i in c) == sizes[j]), None)
            if found is not None:
                break
        if found is None:
            if sizes[j] > 1:
                return None
            continue
        for i in found:
            table[i][j], left[i] = dims[i], 0  # taken: no later axis can use it
    return table


def _split_axes(dims, sizes):
    """JAX's assignment splitting physical axes: ``table[physical][mesh axis]`` of factors."""
    table = [[1] * len(sizes) for _ in dims]
    for j in reversed(range(len(sizes))):
        best = None
        for cand in _candidates(dims, table, sizes[j]):
            if best is None or _prefer(cand, best, dims, table):
                best = cand
        for i, f in enumerate(best):
            table[i][j] = f
    return table


def _candidates(dims, table, size):
    """Every way of taking *size*'s prime factors from what is left of the physical axes."""
    need = {}
    for p in _prime_factors(size):
        need[p] = need.get(p, 0) + 1
    left = [d // math.prod(row) for d, row in zip(dims, table)]
    slots = {p: [i for i, n in enumerate(left) for q in _prime_factors(n) if q == p] for p in need}
    choices = [sorted(set(itertools.combinations(slots[p], m))) for p, m in need.items()]
    for pick in itertools.product(*choices):
        out = [1] * len(dims)
        for p, axes in zip(need, pick):
            for i in axes:
                out[i] *= p
        yield tuple(out)


def _prefer(x, y, dims, table):
    """Whether candidate *x* beats *y* (JAX's ``_prefer_first_logical_axis_assignment``)."""
    def key(c):
        used = [math.prod(row) for row in table]
        return (math.prod(f for f, d in zip(c, dims) if f == d),
                sum(1 for f, d in zip(c, dims) if f == d and f > 1),
                math.prod(f for f, u in zip(c, used) if u > 1),
                c)
    return key(x) > key(y)


def factorisations(topology, axes=CORE_AXES, pipeline=(1,)):
    """Every mesh over *axes* whose sizes multiply to the slice's devices (each has a layout:
    the reshape's or JAX's), by pipeline size (of *pipeline*, when *axes* has the axis), then tensor
    size, then expert size (when *axes* has it), then fsdp; ``expert`` and ``pipeline`` only where
    *axes* names them (the default does not: a search adds them for a model that can use them)."""
    n = topology.num_replicas
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    experts = divisors if "expert" in axes else [1]
    stages = [p for p in pipeline if n % p == 0] if "pipeline" in axes else [1]
    out = []
    for p in stages:
        for t in divisors:
            for e in experts:
                if (n // p // t) % e or (n // p) % t:
                    continue
                for f in divisors:
                    if (n // (p * t * e)) % f:
                        continue
                    m = Mesh(data=n // (p * t * e * f), fsdp=f, tensor=t, expert=e, pipeline=p)
                    if any(getattr(m, a) > 1 for a in MESH_AXES if a not in axes):
                        continue
                    out.append(m)
    return out


def _suggest(topology, asked=None, most=6):
    """The meshes that fit, nearest the one *asked* first (by its tensor size, then fsdp)."""
    asked = asked or Mesh()
    axes = CORE_AXES + tuple(a for a in ("expert", "pipeline") if getattr(asked, a) > 1)
    fits = factorisations(topology, axes, pipeline=(asked.pipeline,))

    def distance(m):
        return (abs(math.log(m.tensor / asked.tensor)), abs(math.log(m.expert / asked.expert)),
                abs(math.log(m.fsdp / asked.fsdp)), m.tensor, m.data)

    shown = ", ".join(f"--mesh {m}" for m in sorted(fits, key=distance)[:most])
    more = f" (and {len(fits) - most} more)" if len(fits) > most else ""
    return shown + more
