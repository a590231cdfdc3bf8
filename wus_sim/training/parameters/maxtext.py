"""A MaxText run as wus-sim runs it: MaxText's keys translated into point parameters.

:data:`~.maxtext_table.RULES` is the table (MaxText key -> wus-sim key, with the rule); :func:`translate`
applies it to a
:class:`~.maxtext_keys.MaxTextInput` on a slice, with the options the user gave beside it:

* a key that changes nothing in a step is accepted and listed (``-v``); a key that would change
  the step and is not modelled is refused, every such key named in one line, unless it is at
  base.yml's default (what wus-sim models is MaxText's default there: scanned layers, dropless
  MoE routing, bf16 activations, fp32 weights, ...); a key of :data:`APPROXIMATED` is run as its
  approximation when asked (``--maxtext-approximate``, point key ``maxtext_approximate``), as the
  tiering validation runs those recipes;
* a key MaxText left at its default gives way to an option given beside it (the option asks a
  what-if of the same run); an option that contradicts a key the run gives is an error naming
  both;
* a device is what JAX counts: a chip on TPU v4 and v5p (megacore), a TensorCore elsewhere (one a
  chip on v5e and v6e); ``per_device_batch_size`` x every device of every slice is the global
  batch, fractions allowed where that product is whole.

The mesh axes are read from :data:`wus_sim.hardware.mesh.MESH_AXES` and ``DCN_AXES`` when a run is
translated: MaxText's ``ici_expert_parallelism`` works as soon as the mesh has an ``expert`` axis
(likewise ``pipeline`` for MaxText's ``stage``, ``context``); until then a size other than 1 for
it is refused as not modelled.
"""

from dataclasses import dataclass, field
import math
import re

from ...inputs.errors import ConfigError
from .maxtext_keys import base_keys, no_step_effect
from .maxtext_pipeline import pipeline_keys
from .maxtext_table import APPROXIMATED, MAXTEXT_AXES, REMAT_TENSOR_KEYS
from .maxtext_workload import run_workload

__all__ = ["MaxTextRun", "translate", "custom_mesh_used"]


@dataclass
class MaxTextRun:
    """What a MaxText run is on a slice: the point parameters it sets and what was done with each key."""

    point: dict = field(default_factory=dict)
    """Point parameters to run with (the options beside it already reconciled: a key they override is
    not here)."""
    sources: dict = field(default_factory=dict)
    """``{point key: the key=value words it came from}``."""
    defaulted: set = field(default_factory=set)
    """The point keys whose MaxText keys the run left at base.yml's defaults."""
    listed: list = field(default_factory=list)
    """``(key=value, why)`` of every key that changes nothing here (``-v``)."""
    notes: list = field(default_factory=list)
    """Lines every output shows (megacore, ignored DCN keys, approximations)."""
    approximated: list = field(default_factory=list)
    """``(key=value, what wus-sim runs instead)``."""
    devices: int = 0
    """Devices per slice, as MaxText counts them."""
    slices: int = 1
    megacore: bool = False
    custom_mesh: str = None
    """MaxText's ``custom_mesh`` ring layout the run's mesh takes (:func:`_custom_mesh`), ``None``: JAX's."""

    def to_dict(self, inp):
        return {"input": inp.words(), "point": dict(self.point), "from": dict(self.sources),
                "from_defaults": sorted(self.defaulted),
                "devices_per_slice": self.devices, "slices": self.slices, "megacore": self.megacore,
                "custom_mesh": self.custom_mesh,
                "notes": list(self.notes), "approximated": [{"key": k, "runs": w} for k, w in self.approximated],
                "no_effect": [{"key": k, "why": w} for k, w in self.listed],
                "skipped": [{"word": k, "why": w} for k, w in inp.skipped]}


class _Translation:
    def __init__(self, inp, explicit, approximate, search):
        self.inp, self.explicit, self.approximate, self.search = inp, dict(explicit or {}), approximate, search
        self.run = MaxTextRun()
        self.refused = {}  # why -> the key=value words refused for it
        self.used = set()

    def word(self, key):
        value = self.inp.value(key)
        return f"{key}={_text(value) if value != '' else chr(34) * 2}"

    def default_note(self, key):
        return "" if self.inp.given(key) else " (base.yml's default; not given)"

    def refuse(self, key, why):
        self.refused.setdefault(why, []).append(self.word(key))

    def approx(self, key):
        """Run *key*'s approximation if asked; refuse it otherwise."""
        what, _ = APPROXIMATED[key]
        if self.approximate:
            self.run.approximated.append((self.word(key), what))
        else:
            self.refuse(key, "--maxtext-approximate runs these approximately: docs/maxtext.md")

    def refusal(self):
        """The one line naming every key refused, grouped by why."""
        return "not modelled (each would change the step): " + "; ".join(
            f"{', '.join(words)} ({why})" for why, words in self.refused.items())

    def set(self, point_key, value, keys, *, given=None):
        """Reconcile MaxText's *value* for *point_key* (from *keys*) with an option given beside it."""
        keys = (keys,) if isinstance(keys, str) else tuple(keys)
        given = any(self.inp.given(k) for k in keys) if given is None else given
        words = " ".join(self.word(k) for k in keys)
        if point_key in self.explicit:
            mine, shown = self.explicit[point_key]
            if _same(mine, value):
                pass
            elif given:
                raise ConfigError(f"contradicts {words} of the MaxText run (give one of them)",
                                  key_path=shown, show_value=False)
            else:
                self.run.listed += [(self.word(k), f"base.yml's default, not used: {shown} given") for k in keys]
                return
        self.run.point[point_key] = value
        self.run.sources[point_key] = words
        if not given:
            self.run.defaulted.add(point_key)


def _same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def translate(inp, topology, *, explicit=None, approximate=False, search=False, point_keys=()):
    """The :class:`MaxTextRun` of *inp* (a :class:`~.maxtext_keys.MaxTextInput`) on *topology* (a name,
    path or inline spec). *explicit*: ``{point key: (value, how it was given)}`` of the options
    given beside it (see the module's doc). *search*: ``plan --search``'s fixed part (only the
    mesh axes and the remat policy the run gives are fixed; the others are searched).
    *point_keys*: the point parameters the caller's points take (a MaxText key whose point key is
    among them, such as ``capacity_factor``, becomes it).
    Unknown keys are :func:`~.maxtext_keys.maxtext_input`'s error; keys not modelled are one
    line here."""
    t = _Translation(inp, explicit, approximate, search)
    t.point_keys = frozenset(point_keys)
    workload = run_workload(t)
    _devices(t, topology)
    _mesh(t, "ici", t.run.devices)
    _mesh(t, "dcn", t.run.slices)
    _batch(t)
    _remat(t)
    _precision(t, workload)
    _moe(t, workload)
    pipeline_keys(t)
    _rest(t)
    if t.refused:
        raise ConfigError(t.refusal(), key_path="--maxtext", show_value=False)
    return t.run


def _devices(t, topology):
    """Megacore (a MaxText device on v4 and v5p is a chip), the slices and the devices per slice."""
    from ...hardware.multislice import load_multislice
    from ...hardware.topology_files import load_topology, megacore_hint

    chip_device = megacore_hint(load_topology(topology)) is not None
    if chip_device:
        mine = t.explicit.get("megacore")
        if mine is not None and mine[0] is False:
            raise ConfigError("contradicts the MaxText run: a MaxText device on this chip is the chip (JAX counts "
                              "its TensorCores as one device)", key_path=mine[1], show_value=False)
        t.run.point["megacore"] = True
        t.run.sources["megacore"] = "MaxText's device: a chip"
    n = t.inp.value("num_slices")
    t.used.add("num_slices")
    slices = None
    if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
        t.set("slices", n, "num_slices")
        slices = t.run.point.get("slices", t.explicit.get("slices", (None,))[0])
    elif n != -1:
        raise ConfigError("must be -1 (detected) or a whole number >= 1", key_path="num_slices", value=n)
    elif "slices" in t.explicit:
        slices = t.explicit["slices"][0]
    slice_, ms = load_multislice(topology, slices=slices, megacore=chip_device)
    t.run.megacore = chip_device
    t.run.devices, t.run.slices = slice_.num_replicas, 1 if ms is None else ms.slices
    if chip_device:
        t.run.notes.append(f"a MaxText device on {slice_.chip.name} is a chip (JAX counts its "
                           f"{slice_.chip.cores_per_chip} TensorCores as one device): run as --megacore, "
                           f"{t.run.devices} devices a slice")


def _axes(kind):
    """``[(key, MaxText axis)]`` of base.yml's ``{kind}_*_parallelism`` keys."""
    out = []
    for key in base_keys():
        m = re.fullmatch(f"{kind}_(.+)_parallelism", key)
        if m:
            out.append((key, m[1]))
    return out


def _mesh(t, kind, devices):
    """The ici (in a slice) or dcn (across slices) mesh: -1 filled, folded onto wus-sim's axes."""
    from ...hardware.mesh_spec import DCN_AXES, MESH_AXES, Mesh, fill_mesh, fill_sizes

    ours_axes = MESH_AXES if kind == "ici" else DCN_AXES
    point_key = "mesh" if kind == "ici" else "dcn_mesh"
    keys = _axes(kind)
    t.used.update(k for k, _ in keys)
    sizes = {}
    for key, axis in keys:
        v = t.inp.value(key)
        if isinstance(v, bool) or not isinstance(v, int) or not (v >= 1 or v == -1):
            raise ConfigError("must be a whole number >= 1, or -1 (the rest)", key_path=key, value=v)
        sizes[axis] = v
    if kind == "dcn" and devices == 1:
        shown = [f"{k}={t.inp.value(k)}" for k, _ in keys if t.inp.given(k) and t.inp.value(k) not in (1, -1)]
        if shown:
            t.run.notes.append(f"{', '.join(shown)}: one slice, where MaxText ignores dcn_*_parallelism (num_slices=N "
                               "or --slices N for more)")
        return
    filled = fill_sizes(sizes, devices, key_path=f"{kind}_*_parallelism",
                        value=" ".join(f"{k}={t.inp.value(k)}" for k, _ in keys if t.inp.given(k)) or None)
    if math.prod(filled.values()) != devices:
        raise ConfigError(f"multiply to {math.prod(filled.values())}, but the {'slice has' if kind == 'ici' else 'run has'} "
                          f"{devices} {'devices' if kind == 'ici' else 'slices'} (MaxText requires the product)",
                          key_path=f"{kind}_*_parallelism", value=" ".join(
                              f"{k}={t.inp.value(k)}" for k, _ in keys if t.inp.given(k)) or None, show_value=True)
    ours = {}
    for key, axis in keys:
        mine = MAXTEXT_AXES.get(axis)
        if filled[axis] == 1:
            continue
        if mine is None or mine not in ours_axes:
            t.refuse(key, f"the mesh has no {axis} axis{' across slices' if kind == 'dcn' else ''}")
            continue
        ours[mine] = ours.get(mine, 1) * filled[axis]
    given = [k for k, _ in keys if t.inp.given(k)]
    if t.search:  # the axes the run gives fix their sizes; the others are searched
        fixed = {}
        for key, axis in keys:
            v, mine = t.inp.value(key), MAXTEXT_AXES.get(axis)
            if t.inp.given(key) and v >= 1 and mine in ours_axes:
                fixed[mine] = fixed.get(mine, 1) * v
        fsdp = f"{kind}_fsdp_parallelism"
        if "fsdp" in fixed and not (t.inp.given(fsdp) and t.inp.value(fsdp) >= 1):
            raise ConfigError("fixes part of fsdp in a search: give its fsdp parallelism too",
                              key_path=f"{kind}_fsdp_transpose_parallelism",
                              value=t.inp.value(f"{kind}_fsdp_transpose_parallelism"))
        if fixed:
            t.set(point_key, ",".join(f"{a}={fixed[a]}" for a in ours_axes if a in fixed), given, given=True)
        return
    mesh = Mesh(**ours)
    if point_key in t.explicit:  # compared as meshes (an option's -1 filled as MaxText's is)
        mine, shown = t.explicit[point_key]
        if fill_mesh(mine, devices, key_path=shown, axes=ours_axes) == mesh:
            t.explicit[point_key] = (str(mesh), shown)
    # shown by the keys given, else by base.yml's -1 that filled the mesh
    t.set(point_key, str(mesh), given or [f"{kind}_{'fsdp' if kind == 'ici' else 'data'}_parallelism"],
          given=bool(given))


def _batch(t):
    pdbs = t.inp.value("per_device_batch_size")
    t.used.add("per_device_batch_size")
    if isinstance(pdbs, bool) or not isinstance(pdbs, (int, float)) or not math.isfinite(pdbs) or pdbs <= 0:
        raise ConfigError("must be a number > 0", key_path="per_device_batch_size", value=pdbs)
    devices = t.run.devices * t.run.slices
    total = pdbs * devices
    if abs(total - round(total)) > 1e-9 * max(1.0, total) or round(total) < 1:
        raise ConfigError(f"x {devices} devices = {total:g} sequences, not a whole number (MaxText's global batch is "
                          "per_device_batch_size x devices)", key_path="per_device_batch_size", value=pdbs)
    given = t.inp.given("per_device_batch_size")
    if given and "per_replica_batch" in t.explicit:
        raise ConfigError("contradicts per_device_batch_size of the MaxText run (give one of them)",
                          key_path=t.explicit["per_replica_batch"][1], show_value=False)
    if "per_replica_batch" in t.explicit:
        t.run.listed.append((t.word("per_device_batch_size"), "base.yml's default, not used: "
                             f"{t.explicit['per_replica_batch'][1]} given"))
        return
    t.set("global_batch", int(round(total)), "per_device_batch_size")
    t.run.sources["global_batch"] += f" x {devices} devices"


def _remat(t):
    from ...model.ops.remat_names import CUSTOM_TENSORS, REMAT_POLICIES, canonical_policy

    policy = t.inp.value("remat_policy")
    t.used.update(("remat_policy", *REMAT_TENSOR_KEYS))
    given = t.inp.given("remat_policy")
    if policy != "custom":
        for key in REMAT_TENSOR_KEYS:
            if t.inp.given(key):
                t.run.listed.append((t.word(key), "read only under remat_policy=custom, as in MaxText"))
    if t.search and not given:
        return
    if policy == "none":
        t.set("remat", "none", "remat_policy")
        return
    if policy == "custom":
        places = {}
        for key in REMAT_TENSOR_KEYS:
            place = t.inp.value(key)
            if place not in ("device", "offload", "remat"):
                raise ConfigError("must be device, offload or remat", key_path=key, value=place)
            if key in CUSTOM_TENSORS:
                places[key] = place
            elif place != "remat":
                t.refuse(key, "a tensor the model's block does not name")
        policy = canonical_policy("custom:" + ",".join(f"{k}={p}" for k, p in places.items()))
        keys = ["remat_policy"] + [k for k in CUSTOM_TENSORS if t.inp.given(k)]
    elif policy in REMAT_POLICIES:
        keys = ["remat_policy"]
    else:
        t.refuse("remat_policy", f"not among the policies modelled: {', '.join(REMAT_POLICIES)}, custom, none")
        return
    mine = t.explicit.get("remat")
    if mine is not None and (mine[0] != "none" or "remat_policy" not in t.explicit):  # --remat none: no remat
        if given:
            raise ConfigError(f"contradicts remat_policy={t.inp.value('remat_policy')} of the MaxText run (give one "
                              "of them; MaxText's full is --remat-policy full)", key_path=t.explicit["remat"][1],
                              show_value=False)
        t.run.listed.append((t.word("remat_policy"), f"base.yml's default, not used: {t.explicit['remat'][1]} given"))
        return
    t.set("remat_policy", policy, keys, given=given)


def _precision(t, workload):
    from ...inputs.units import DTYPE_BYTES

    t.used.update(("quantization", "attention", "dtype", "weight_dtype", "grad_dtype"))
    q = t.inp.value("quantization")
    if q in ("", None, "int8"):
        t.set("quantization", q or "none", "quantization")
    else:
        t.refuse("quantization", "only int8 matmuls are modelled")
    attention = t.inp.value("attention")
    fused = bool(workload.attention) and all(a.fused for a in workload.attention)
    if attention in ("autoselected", "flash") and not fused:
        t.refuse("attention", f"workload {workload.name}'s attention keeps its scores in HBM, not flash")
    elif attention == "dot_product" and fused:
        t.refuse("attention", f"workload {workload.name}'s attention is fused (flash); dot_product's scores in HBM "
                              "are not")
    elif attention not in ("autoselected", "flash", "dot_product"):
        t.refuse("attention", "not a TPU attention kernel modelled (autoselected, flash, dot_product)")
    dtype = t.inp.value("dtype")
    if DTYPE_BYTES.get(dtype) != workload.activation_bytes or dtype != "bfloat16":
        t.refuse("dtype", f"workload {workload.name}'s activations are bfloat16")
    weights = t.inp.value("weight_dtype")
    if weights == "bfloat16" and workload.weight_bytes == 4:
        t.approx("weight_dtype")
    elif DTYPE_BYTES.get(weights) != workload.weight_bytes:
        t.refuse("weight_dtype", f"workload {workload.name}'s weights are {workload.weight_bytes} B")
    grads = t.inp.value("grad_dtype")
    if grads == "bfloat16":
        t.set("grad_dtype", "bf16", "grad_dtype")
    elif grads != "float32":
        t.refuse("grad_dtype", "float32 or bfloat16")


def _moe(t, workload):
    t.used.update(("capacity_factor", "megablox", "sparse_matmul"))
    experts = any("experts" in tensor.name for tensor in workload.tensors)
    if not experts:
        for key in ("capacity_factor", "megablox", "sparse_matmul"):
            if t.inp.given(key):
                t.run.listed.append((t.word(key), f"workload {workload.name} has no experts"))
        return
    cf = t.inp.value("capacity_factor")
    if isinstance(cf, bool) or not isinstance(cf, (int, float)):
        raise ConfigError("must be a number (-1: dropless)", key_path="capacity_factor", value=cf)
    t.set("capacity_factor", float(cf) if cf > 0 else -1.0, "capacity_factor")  # -1: dropless
    for key in ("megablox", "sparse_matmul"):
        if t.inp.value(key) is False:
            t.approx(key)


def _rest(t):
    """The optimizer, the strategy, the keys assumed, the approximations, and every other key."""
    opt, clip = t.inp.value("opt_type"), t.inp.value("gradient_clipping_threshold")
    names = {"adamw": "adamw", "adam_pax": "adamw", "sgd": "sgd"}
    if opt in names:
        t.set("optimizer", names[opt] + ("+clip" if clip and clip > 0 else ""), ("opt_type", "gradient_clipping_threshold"))
    else:
        t.refuse("opt_type", "not an optimizer modelled (adamw, adam_pax, sgd)")
    shard = t.inp.value("shard_optimizer_over_data")
    t.set("strategy", "sharded" if shard else "replicated", "shard_optimizer_over_data")
    for key, value in (("scan_layers", True), ("hardware", "tpu")):
        if t.inp.value(key) != value:
            t.refuse(key, f"only {_text(value)} is modelled")
    if t.inp.given("allow_split_physical_axes"):
        t.run.listed.append((t.word("allow_split_physical_axes"), "every mesh is laid out as "
                             "create_device_mesh(allow_split_physical_axes=True) lays it"))
    _custom_mesh(t)
    if APPROXIMATED["optimize_mesh_for_tpu_v6e"][1](t.inp.value("optimize_mesh_for_tpu_v6e")):
        t.approx("optimize_mesh_for_tpu_v6e")
    t.used.update(("opt_type", "gradient_clipping_threshold", "shard_optimizer_over_data", "scan_layers", "hardware",
                   "allow_split_physical_axes", "custom_mesh", "optimize_mesh_for_tpu_v6e"))
    known = base_keys()
    for key, value in t.inp.values.items():
        if key in t.used:
            continue
        why = no_step_effect(key)
        if why is not None:
            t.run.listed.append((t.word(key), why))
        elif known[key].is_default(value):
            t.run.listed.append((t.word(key), "base.yml's default"))
        else:
            t.refuse(key, "accepted at base.yml's default only")
    for word, what in t.run.approximated:
        t.run.notes.append(f"{word} approximated: {what} (--maxtext-approximate)")


def custom_mesh_used(inp, slices):
    """The ``custom_mesh`` of *inp* (a :class:`~.maxtext_keys.MaxTextInput`) that MaxText lays the mesh out
    with on *slices* slices, else ``None``: src/maxtext/utils/maxtext_utils.py, ``create_device_mesh``,
    uses it across slices always, on one slice only with ``allow_split_physical_axes`` (a name of
    wus_sim.hardware.mesh.CUSTOM_MESHES; any other is not laid out here)."""
    from ...hardware.mesh import CUSTOM_MESHES

    name = inp.value("custom_mesh")
    if name in CUSTOM_MESHES and (slices > 1 or inp.value("allow_split_physical_axes") is True):
        return name
    return None


def _custom_mesh(t):
    """``custom_mesh``: run as MaxText lays it where :func:`custom_mesh_used` says so, listed where MaxText
    ignores it (one slice, no ``allow_split_physical_axes``); any other name is approximated, as is the
    key under ``plan --search`` (its candidates are laid out as JAX lays them)."""
    from ...hardware.mesh import CUSTOM_MESHES

    name = t.inp.value("custom_mesh")
    if not APPROXIMATED["custom_mesh"][1](name):
        return
    if name not in CUSTOM_MESHES or t.search:
        t.approx("custom_mesh")
    elif custom_mesh_used(t.inp, t.run.slices):
        t.run.custom_mesh = name
        t.run.notes.append(f"{t.word('custom_mesh')}: each slice's mesh laid out as MaxText's {name} lays it "
                           "(docs/mesh.md)")
    else:
        t.run.listed.append((t.word("custom_mesh"), "MaxText uses it on one slice only with "
                             "allow_split_physical_axes=true"))
