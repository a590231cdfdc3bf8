"""A device mesh as an input value: the axis sizes, read from text, a mapping or the API by one
rule (:func:`mesh_size`), and a run's placement (:class:`Placement`). Where the axes lie on a
slice is :mod:`wus_sim.hardware.mesh`.

One rule for a size, everywhere (``--mesh``, ``--dcn-mesh``, experiment files, ``Mesh(...)``,
``simulate_mesh(mesh=...)``): a whole number from 1 to 2^17. In text it is plain ASCII digits
(``[0-9]+``: no sign, no underscore, no other script's digits, which Python's ``int()`` would
take), with ASCII spaces allowed around names, ``=`` and commas and nothing else (no tab, no
no-break space), which is the experiment schema's pattern (:func:`mesh_json_schema`); in a
mapping or the API it is an integer (a bool or a float such as 4.0 is refused).

One exception, where a mesh is given for a slice (``--mesh``, ``--dcn-mesh``, the point keys
``mesh`` and ``dcn_mesh``, ``simulate_mesh``): one axis may be ``-1``, MaxText's "the rest"
(``ici_fsdp_parallelism: -1``): the devices (or slices) over the product of the other axes,
filled by :func:`fill_mesh` once the slice is known. ``Mesh(...)`` itself holds sizes only.
"""

from dataclasses import dataclass
import math
import numbers
import re

from ..inputs.door import checked, flag, whole
from ..inputs.errors import ConfigError

__all__ = ["MESH_AXES", "DCN_AXES", "CORE_AXES", "MAX_AXIS_SIZE", "Mesh", "mesh_size", "parse_mesh", "mesh_text",
           "mesh_json_schema", "shown_axes", "Placement", "FILL", "has_fill", "fill_sizes", "fill_mesh"]

MESH_AXES = ("data", "pipeline", "fsdp", "context", "tensor", "expert")
"""Mesh axes, outermost first, in MaxText's order of the same names (``mesh_axes`` in
src/maxtext/configs/base.yml: data, stage, fsdp, fsdp_transpose, context, ..., tensor,
tensor_sequence, expert, autoregressive): ``pipeline`` is MaxText's ``stage`` (after ``data``),
``context`` between ``fsdp`` and ``tensor``, ``expert`` after ``tensor``, so the innermost (fastest
varying) of them."""
DCN_AXES = ("data", "pipeline", "fsdp", "expert")
"""Axes a mesh of slices may have (MaxText's ``dcn_data_parallelism``, ``dcn_pipeline_parallelism``,
``dcn_fsdp_parallelism``, ``dcn_expert_parallelism``): tensor over the DCN is never recommended
(MaxText's sharding guide) and is not modelled; nor is context across slices
(``dcn_context_parallelism``: its per-layer K/V all-gathers over the DCN are not modelled)."""
CORE_AXES = ("data", "fsdp", "tensor")
"""The axes every mesh report shows, size 1 included; any other axis is shown where it is above 1
(:func:`shown_axes`), so a mesh without one reads as it did before the axis existed."""
MAX_AXIS_SIZE = 2**17
"""The largest size an axis may have (more devices than any slice or multislice we model)."""
_SIZE_RULE = f"must be a whole number from 1 to {MAX_AXIS_SIZE} (in text digits 0-9 only, else an integer)"


def mesh_size(size, *, key_path, text=False):
    """*size* (an integer; with *text*, a string of ASCII digits) as an ``int`` axis size, else a
    one-line ConfigError at *key_path*: the one place a mesh size is read."""
    if text and isinstance(size, str):
        if re.fullmatch("[0-9]+", size) is None:
            raise ConfigError(_SIZE_RULE, key_path=key_path, value=size)
        size = int(size)
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or not 1 <= size <= MAX_AXIS_SIZE:
        raise ConfigError(_SIZE_RULE, key_path=key_path, value=size)
    return int(size)


@dataclass(frozen=True)
class Mesh:
    """Sizes of the mesh axes; a missing axis is 1. Each size is checked by :func:`mesh_size`."""

    data: int = 1
    fsdp: int = 1
    context: int = 1
    """Splits each sequence (MaxText's ``ici_context_parallelism``); for the weights it shards as fsdp
    does (:mod:`wus_sim.training.parallelism.context_parallel`)."""
    tensor: int = 1
    expert: int = 1
    """Splits each mixture-of-experts layer's routed experts (MaxText's ``ici_expert_parallelism``);
    for the rest of the model it shards weights and the batch as fsdp does
    (:mod:`wus_sim.training.parallelism.expert_parallel`)."""
    pipeline: int = 1
    """Splits the transformer blocks into stages run as a pipeline of microbatches (MaxText's ``stage``
    axis, ``ici_pipeline_parallelism``; :mod:`wus_sim.training.parallelism.pipeline_parallel`)."""

    def __post_init__(self):
        for a in MESH_AXES:
            object.__setattr__(self, a, mesh_size(getattr(self, a), key_path=f"mesh.{a}"))

    @property
    def size(self):
        """Devices the mesh spans (product of its axes)."""
        return self.data * self.pipeline * self.fsdp * self.context * self.tensor * self.expert

    def to_dict(self):
        return {a: getattr(self, a) for a in MESH_AXES}

    def __str__(self):
        return ",".join(f"{a}={getattr(self, a)}" for a in MESH_AXES if getattr(self, a) > 1) or "data=1"


_PAIR = re.compile(" *([^=]*?) *= *(.*?) *")


def _pairs(value, key_path, axes):
    """``(pairs, text)``: *value*'s ``{axis: size as given}`` (text, a mapping or a Mesh) and whether
    it was text; unknown axes and malformed text are ConfigErrors."""
    rule = f"must be axis=size pairs over {', '.join(axes)} (e.g. {axes[-1]}=4), each size a whole number >= 1"
    if isinstance(value, Mesh):
        pairs = {a: getattr(value, a) for a in MESH_AXES if getattr(value, a) > 1}
    elif isinstance(value, str):
        pairs = {}
        for item in value.split(","):
            m = _PAIR.fullmatch(item)
            if m is None or m[1] in pairs:
                raise ConfigError(rule, key_path=key_path, value=value)
            pairs[m[1]] = m[2]
    elif isinstance(value, dict):
        pairs = dict(value)
    else:
        raise ConfigError(rule, key_path=key_path, value=value)
    for name in pairs:
        if name == "context" and name not in axes:  # a mesh of slices: MaxText's dcn_context_parallelism
            raise ConfigError("puts context across slices, which is not modelled (each attention layer's K/V "
                              f"all-gather over the DCN); a mesh of slices has: {', '.join(axes)}",
                              key_path=key_path, value=value)
        if name not in axes:
            raise ConfigError(f"names an unknown axis {name!r}; known: {', '.join(axes)}", key_path=key_path,
                              value=value)
    return pairs, isinstance(value, str)


FILL = -1
"""The size that means "the rest" (MaxText's ``-1``): the devices over the other axes' product."""


def _is_fill(size, text):
    return size == "-1" if text else (size == FILL and not isinstance(size, bool) and isinstance(size, numbers.Integral))


def _fill_axis(pairs, text, key_path, value):
    """The one axis of *pairs* whose size is ``-1``, or ``None``; two are an error."""
    fill = [name for name, size in pairs.items() if _is_fill(size, text)]
    if len(fill) > 1:
        raise ConfigError(f"gives -1 (the rest) to {' and '.join(fill)}: at most one axis may be -1",
                          key_path=key_path, value=value)
    return fill[0] if fill else None


def has_fill(value):
    """Whether *value* (mesh text or a mapping) gives one axis the size -1 (MaxText's "the rest")."""
    if isinstance(value, str):
        return any(_PAIR.fullmatch(item) is not None and _PAIR.fullmatch(item)[2] == "-1"
                   for item in value.split(","))
    return isinstance(value, dict) and any(_is_fill(v, False) for v in value.values())


def parse_mesh(value, *, key_path="mesh", axes=MESH_AXES):
    """A :class:`Mesh` from ``"data=4,fsdp=2"``, a mapping ``{data: 4, fsdp: 2}`` or a Mesh
    (``None`` stays ``None``). Errors name *key_path* (and the axis), the value and the rule. A
    size -1 is refused here: it is filled where the slice is known (:func:`fill_mesh`)."""
    if value is None:
        return value
    pairs, text = _pairs(value, key_path, axes)
    sizes = {}
    for name, size in pairs.items():  # the first bad size is the one named
        if _is_fill(size, text):
            raise ConfigError(f"gives {name} -1 (the rest of the devices), which only a mesh for a known slice may "
                              "(--mesh, --dcn-mesh, the point keys mesh and dcn_mesh, simulate_mesh)",
                              key_path=f"{key_path}.{name}", value=value)
        sizes[name] = mesh_size(size, key_path=f"{key_path}.{name}", text=text)
    return Mesh(**sizes)


def fill_sizes(sizes, devices, *, key_path="mesh", value=None):
    """*sizes* (``{axis: int}``, at most one -1) with the -1 replaced by *devices* over the product of
    the others; one line if that is not whole. The rule of MaxText's ``-1``."""
    fill = [name for name, size in sizes.items() if size == FILL]
    if len(fill) > 1:
        raise ConfigError(f"gives -1 (the rest) to {' and '.join(fill)}: at most one axis may be -1",
                          key_path=key_path, value=value)
    if not fill:
        return dict(sizes)
    rest = math.prod(size for name, size in sizes.items() if name != fill[0])
    if devices % rest:
        raise ConfigError(f"fills {fill[0]} (-1) with the rest of {devices} devices, but the other axes multiply to "
                          f"{rest}, which does not divide them", key_path=key_path, value=value)
    return {**sizes, fill[0]: devices // rest}


def fill_mesh(value, devices, *, key_path="mesh", axes=MESH_AXES):
    """The :class:`Mesh` of *value* for a slice of *devices* devices (for a DCN mesh: slices), an
    axis of size -1 taking the rest (:func:`fill_sizes`); without one, :func:`parse_mesh`'s."""
    if not has_fill(value):
        return parse_mesh(value, key_path=key_path, axes=axes)
    pairs, text = _pairs(value, key_path, axes)
    fill = _fill_axis(pairs, text, key_path, value)
    sizes = {name: FILL if name == fill else mesh_size(size, key_path=f"{key_path}.{name}", text=text)
             for name, size in pairs.items()}
    sizes = fill_sizes(sizes, devices, key_path=key_path, value=value)
    return Mesh(**{name: mesh_size(size, key_path=f"{key_path}.{name}") for name, size in sizes.items()})


@checked(megacore=flag(), spatial_ways=whole(1, 2**17, nullable=True), slices=whole(1, 1024, nullable=True))
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


def shown_axes(mesh):
    """The axes a report of *mesh* shows: :data:`CORE_AXES` always, any other axis above 1."""
    return tuple(a for a in MESH_AXES if a in CORE_AXES or getattr(mesh, a) > 1)


def mesh_text(value, *, axes=MESH_AXES, key_path="mesh"):
    """A mesh as its canonical text (``"fsdp=64,tensor=4"``; axes of size 1 left out), from
    ``axis=size`` text or a mapping: the value a point parameter holds. An axis of size -1 (the
    rest, :func:`fill_mesh`) is kept as ``axis=-1``."""
    if not has_fill(value):
        return str(parse_mesh(value, key_path=key_path, axes=axes))
    pairs, text = _pairs(value, key_path, axes)
    fill = _fill_axis(pairs, text, key_path, value)
    sizes = {name: FILL if name == fill else mesh_size(size, key_path=f"{key_path}.{name}", text=text)
             for name, size in pairs.items()}
    return ",".join(f"{a}={sizes[a]}" for a in MESH_AXES if a in sizes and sizes[a] != 1)


def mesh_json_schema(axes):
    """JSON Schema of a mesh value over *axes*: ``axis=size`` text or a mapping (the text pattern
    is :func:`parse_mesh`'s rule: ASCII spaces around the parts, sizes of digits 0-9, or -1 for the
    rest: at most one, which the schema cannot say and the loader checks)."""
    names = "|".join(axes)
    return {"anyOf": [
        {"type": "string", "pattern": f"^ *({names}) *= *([0-9]+|-1) *(, *({names}) *= *([0-9]+|-1) *)*$"},
        {"type": "object", "additionalProperties": False, "minProperties": 1,
         "properties": {a: {"anyOf": [{"type": "integer", "minimum": 1}, {"const": FILL}]} for a in axes}}]}
