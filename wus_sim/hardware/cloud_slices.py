"""Every Cloud TPU slice by the name Google sells it under, built from its shape.

A topology file per slice would be ~80 files saying the same three things (chip, shape, wraparound);
this module holds each generation's shapes once and a rule for the rest:

* **Names.** TPU v4, v5p and TPU7x (Ironwood) names count TensorCores, two per chip (``tpu-v5p-256``
  is 128 chips; ``tpu7x-128`` is 64 chips: JAX sees an Ironwood chip as two devices); v5e and v6e
  names count chips (``tpu-v5e-256`` is 256 chips; ``tpu-v5litepod-256`` is the same slice under the
  accelerator type Cloud TPU's API uses for v5e) (Cloud TPU docs: "TPU types and topologies", v5e).
* **Wraparound.** 3-D slices of whole 4x4x4 cubes are 3-D tori, smaller ones 3-D meshes (Cloud TPU
  v5p docs: "All 4x4x4 and larger slices (one cube) have full 3D torus connectivity. Slices smaller
  than a full cube ... don't have wrap-around links"; the v4 docs' 3D mesh and 3D torus section; the
  same assumed for TPU7x, which the docs say "shares many similarities with TPU v5p"). 2-D v5e/v6e
  slices wrap an axis only where it spans the 16x16 pod (a full pod is a 2-D torus, Cloud TPU v5e and
  v6e docs; smaller slices are meshes, the JAX scaling book's rule: no primary source).

A shipped or user topology file of the same name wins over the rule (it may carry other figures).
"""

from dataclasses import dataclass
import math
import re

__all__ = ["Generation", "GENERATIONS", "cloud_slices", "cloud_slice", "CLOUD_SLICE_NAMES", "nearest_names"]


@dataclass(frozen=True)
class Generation:
    """One TPU generation's slices."""

    chip: str
    """Chip name in chips.yaml."""
    prefixes: tuple
    """Name prefixes, ``PREFIX-N``; several where Google uses several (v5e, v5litepod)."""
    name_counts_cores: bool
    """True where N counts TensorCores (two a chip), False where it counts chips."""
    shapes: tuple
    """Chips per axis of each slice the sources list, smallest first; the last is the whole pod."""
    source: str
    """Where the shapes, the pod and the naming come from (public pages)."""


_CUBE_3D = ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 8))
_POD_2D = ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))

GENERATIONS = {
    "v4": Generation(
        "tpu-v4", ("tpu-v4",), True,
        _CUBE_3D + ((8, 8, 12), (8, 8, 16), (8, 16, 16), (16, 16, 16)),
        "Cloud TPU v4 docs (cloud.google.com/tpu/docs/v4): pod of 4096 chips, 3D torus on whole 4x4x4 cubes; "
        "TPU types and topologies (cloud.google.com/tpu/docs/types-topologies): names count TensorCores; "
        "shapes 2x2x1 to 8x16x16 as GKE's xpk lists them (github.com/AI-Hypercomputer/xpk, "
        "src/xpk/core/system_characteristics.py); 16x16x16 is the whole pod (v4-8192)"),
    "v5e": Generation(
        "tpu-v5e", ("tpu-v5e", "tpu-v5litepod"), False, _POD_2D,
        "Cloud TPU v5e docs (cloud.google.com/tpu/docs/v5e): 2D slice shapes 1x1 to 16x16, pod of 256 chips, "
        "2D torus; AcceleratorType v5litepod-N counts chips"),
    "v5p": Generation(
        "tpu-v5p", ("tpu-v5p",), True,
        _CUBE_3D + ((8, 8, 16), (8, 16, 16), (16, 16, 16), (16, 16, 24), (16, 20, 28)),
        "Cloud TPU v5p docs (cloud.google.com/tpu/docs/v5p): shapes table 2x2x1 to 16x16x24 (the largest "
        "job, 6144 chips), pod of 8960 chips, 3D torus on whole cubes; 2x2x4 and the whole pod's 16x20x28 "
        "as GKE's xpk lists them (github.com/AI-Hypercomputer/xpk, src/xpk/core/system_characteristics.py)"),
    "v6e": Generation(
        "tpu-v6e", ("tpu-v6e",), False, _POD_2D,
        "Cloud TPU v6e docs (cloud.google.com/tpu/docs/v6e): 2D slice shapes 1x1 to 16x16, pod of 256 chips, "
        "2D torus; accelerator types v6e-N count chips"),
    "tpu7x": Generation(
        "tpu7x", ("tpu7x",), True,
        ((1, 1, 1),) + _CUBE_3D + ((8, 8, 16), (8, 16, 16), (16, 16, 16), (16, 16, 24), (16, 24, 24)),
        "Cloud TPU7x (Ironwood) docs (docs.cloud.google.com/tpu/docs/tpu7x): pod of 9216 chips, 2 TensorCores "
        "a chip, each a JAX device; names tpu7x-N count them (tpu7x-8 is 4 chips); shapes as GKE's xpk lists "
        "them (github.com/AI-Hypercomputer/xpk, src/xpk/core/system_characteristics.py; 16x24x24 is the pod)"),
}
"""The Cloud TPU generations whose slices resolve by name (v2/v3 slices are topology files)."""

_CORES_PER_CHIP = 2
"""TensorCores per chip where names count them (v4, v5p, TPU7x: Cloud TPU docs)."""


def _wrap(dims):
    """Wraparound per axis by the rule in the module docstring."""
    if len(dims) == 3:
        cubes = all(d % 4 == 0 for d in dims)
        return (cubes,) * 3
    return tuple(d == 16 for d in dims)


def _count(gen, dims):
    chips = math.prod(dims)
    return chips * _CORES_PER_CHIP if gen.name_counts_cores else chips


def cloud_slices():
    """``{name: (generation key, dims, wrap)}`` of every slice by its Cloud TPU name, every prefix."""
    return dict(_TABLE)


def _table():
    out = {}
    for key, gen in GENERATIONS.items():
        for dims in gen.shapes:
            for prefix in gen.prefixes:
                out[f"{prefix}-{_count(gen, dims)}"] = (key, dims, _wrap(dims))
    return out


_TABLE = _table()
CLOUD_SLICE_NAMES = frozenset(_TABLE)
"""Every Cloud TPU slice name :func:`cloud_slice` builds."""


def cloud_slice(name, chips):
    """The :class:`Topology` of Cloud TPU slice *name* with chip specs *chips* (``load_chips()``), or
    None when *name* is no Cloud TPU slice name."""
    from .topology import Topology

    entry = _TABLE.get(name)
    if entry is None:
        return None
    key, dims, wrap = entry
    gen = GENERATIONS[key]
    chip = chips[gen.chip]
    n = math.prod(dims)
    unit = "TensorCores" if gen.name_counts_cores else "chips"
    pod = " (the whole pod)" if dims == gen.shapes[-1] else ""
    shape = "x".join(map(str, dims))
    title = "TPU7x (Ironwood)" if key == "tpu7x" else f"TPU {key}"
    return Topology(
        name=name, chip=chip, dims=dims, wrap=wrap,
        description=f"Cloud {title} {name.removeprefix('tpu-')}: {shape}, {n} chip{'s' if n > 1 else ''}{pod} "
                    f"(the name counts {unit})",
        sources={"shape": gen.source, "wraparound": _WRAP_SOURCE[len(dims)]},
    )


_WRAP_SOURCE = {
    3: "Cloud TPU v5p docs: all 4x4x4 and larger slices have full 3D torus connectivity, smaller ones no "
       "wrap-around links (v4 docs: 3D mesh and 3D torus; TPU7x assumed as v5p)",
    2: "Cloud TPU v5e/v6e docs: the 16x16 pod is a 2D torus; an axis shorter than the pod's 16 is a mesh line "
       "(JAX scaling book's rule, no primary source)",
}

_NAME_RE = re.compile(r"^(.*?)-?([0-9]{1,12})$")


def _one_edit(a, b):
    """True when digit strings *a* and *b* differ by one typo: a digit added, dropped, changed, or two
    neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def nearest_names(name, known):
    """Known slice names of *name*'s generation (its prefix) to suggest for it: those one digit typo
    away (``tpu-v3-51`` -> tpu-v3-512), most alike first, then the nearest in size, one below and one
    above (``tpu-v5p-9000`` -> tpu-v5p-8192, tpu-v5p-12288; never tpu-v5p-8, which only looks alike);
    and a note when the number reads as chips where the name counts TensorCores. ``([], "")`` when
    *name* names no known generation."""
    import difflib

    m = _NAME_RE.match(name) if isinstance(name, str) and len(name) <= 200 else None
    if not m:
        return [], ""
    prefix, digits = m.group(1).rstrip("-"), m.group(2)
    n = int(digits)
    if not prefix.startswith("tpu"):
        prefix = f"tpu-{prefix}"  # Google's own accelerator type, v5p-256
    sizes = {}
    for k in known:
        km = _NAME_RE.match(k)
        if km and km.group(1).rstrip("-") == prefix:
            sizes[int(km.group(2))] = k
    if not sizes:
        return [], ""
    if n in sizes:  # Google's own name, v5p-256, for ours, tpu-v5p-256
        return [sizes[n]], ""
    typos = [k for s, k in sizes.items() if _one_edit(digits, str(s))]
    typos.sort(key=lambda k: -difflib.SequenceMatcher(None, name, k).ratio())
    below = [s for s in sizes if s < n]
    above = [s for s in sizes if s > n]
    near = ([sizes[max(below)]] if below else []) + ([sizes[min(above)]] if above else [])
    picks = typos + [k for k in near if k not in typos]
    note = ""
    gen = next((g for g in GENERATIONS.values() if prefix in g.prefixes), None)
    if gen is not None and gen.name_counts_cores and n * _CORES_PER_CHIP in sizes:
        meant = sizes[n * _CORES_PER_CHIP]  # the number read as chips: the likeliest slip, first
        picks = [meant] + [k for k in picks if k != meant]
        note = f"; {prefix} names count TensorCores, two a chip: {n} chips is {meant}"
    return picks, note
