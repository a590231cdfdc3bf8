"""The sharding plan's data: per-tensor formats, buckets, extra reductions, shard ownership
(what :func:`wus_sim.training.update.planner.plan` returns)."""

from dataclasses import dataclass, field
from functools import cached_property
import math

from ...inputs.errors import ConfigError

__all__ = [
    "FORMATS", "TensorPlan", "Bucket", "ExtraReduction", "Plan", "shard_index", "shard_ranges",
]


FORMATS = ("split", "flat", "padded-rows", "padded-cols", "replicated")
"""How a tensor is formatted for sharding (see the module doc)."""
_AXIS_NAMES = ("x", "y", "z")


# ============================================================ ownership after the 2-D RS
def _phases(topology, replicas):
    """``[(phase name, group size)]`` of the reduce-scatter, outermost split first."""
    if replicas != topology.num_replicas:
        # spatially partitioned replicas span several cores: one flat cut over replica ids
        return [("replica", replicas)]
    phases = []
    if topology.cores_per_chip > 1:
        phases.append(("cores", topology.cores_per_chip))
    for axis, d in enumerate(topology.dims):
        if d > 1:
            phases.append((_AXIS_NAMES[axis], d))
    return phases or [("replica", 1)]


def _digits(topology, replicas, replica):
    if replicas != topology.num_replicas:
        return [replica]
    chip, core = divmod(int(replica), topology.cores_per_chip)
    coord = topology.coords[chip]
    digits = [core] if topology.cores_per_chip > 1 else []
    digits += [int(coord[axis]) for axis, d in enumerate(topology.dims) if d > 1]
    return digits or [0]


def shard_index(topology, replica, replicas=None):
    """The shard (0..N-1) replica *replica* owns after the reduce-scatter.

    The reduce-scatter runs on-chip among a chip's cores first, then along X,
    then Y (then Z), each phase on the piece the previous one left
    (collectives contract). Each phase cuts the piece into as many blocks as the
    phase's group has members and the member keeps the block numbered by its
    position (core index, then X, Y, Z coordinate): which ring chunk a member
    ends with is a relabelling fixed once when weights are resharded, so this is
    free. Hence ``j = ((core * X + x) * Y + y) * Z + z``. When a replica spans
    several cores (spatial partitioning), replica ids are cut flat: ``j = replica``.
    """
    replicas = topology.num_replicas if replicas is None else int(replicas)
    if not 0 <= int(replica) < replicas:
        raise ConfigError(f"must be in 0..{replicas - 1}", key_path="replica", value=replica)
    j = 0
    for (_, size), digit in zip(_phases(topology, replicas), _digits(topology, replicas, replica)):
        j = j * size + digit
    return j


def shard_ranges(topology, replica, length, replicas=None):
    """Element ranges of a buffer of *length* (a multiple of N) that *replica* holds after
    each reduce-scatter phase: ``[{'phase', 'group_size', 'start', 'stop'}]``, the last
    one being its shard ``[j*length/N, (j+1)*length/N)``."""
    replicas = topology.num_replicas if replicas is None else int(replicas)
    if length % replicas:
        raise ConfigError(f"must be a multiple of the {replicas} replicas", key_path="length", value=length)
    start, size = 0, int(length)
    out = []
    for (phase, group), digit in zip(_phases(topology, replicas), _digits(topology, replicas, replica)):
        size //= group
        start += digit * size
        out.append({"phase": phase, "group_size": group, "start": start, "stop": start + size})
    return out


# ========================================================================== records
@dataclass(frozen=True)
class TensorPlan:
    """How one tensor is sharded (or kept replicated)."""

    index: int
    """Position in ``workload.tensors``."""
    name: str
    shape: tuple
    layer: int
    size: int
    format: str
    """One of :data:`FORMATS`."""
    layout: str
    """The analyser's layout (``'flat'``, ``'rows'``, ``'cols'``); ``None`` if replicated."""
    split_dim: int
    """Dimension cut by a ``split`` format, else ``None``."""
    padded_size: int
    """Elements of the formatted buffer (a multiple of N; ``size`` if replicated)."""
    shard_shape: tuple
    """Shape each replica updates (the full shape if replicated)."""
    slot_elements: int
    """Optimizer slot values for the whole tensor (replicated strategy, per replica)."""
    shard_slot_elements: int
    """Slot values one replica keeps under the sharded strategy (incl. replicated vectors)."""
    slot_padding_elements: float
    """Of those, the replica's average share of padding."""
    bucket: int = -1
    reductions: tuple = ()
    """``((what, values), ...)``: cross-replica values this tensor adds per step when sharded."""
    replicated_because: str = ""
    """Why a replicated tensor is not sharded: ``'small'`` (under ``replicate_below_elements``),
    ``'padding'`` (its cheapest cut pads more than ``max_padding_ratio`` x its size) or
    ``'no allowed cut'`` (the optimizer allows none)."""

    @property
    def replicated(self):
        return self.format == "replicated"

    @property
    def padding(self):
        """Padding elements in the formatted buffer."""
        return self.padded_size - self.size

    @property
    def shard_elements(self):
        """Elements one replica updates (``padded_size / N``, or ``size`` if replicated)."""
        return math.prod(self.shard_shape)

    def to_dict(self):
        return {"name": self.name, "shape": list(self.shape), "layer": self.layer, "size": self.size,
                "format": self.format, "layout": self.layout, "split_dim": self.split_dim,
                "padded_size": self.padded_size, "padding": self.padding,
                "shard_shape": list(self.shard_shape), "shard_elements": self.shard_elements,
                "slot_elements": self.slot_elements, "shard_slot_elements": self.shard_slot_elements,
                "bucket": self.bucket, "reductions": [list(r) for r in self.reductions],
                "replicated_because": self.replicated_because}


@dataclass(frozen=True)
class Bucket:
    """Tensors whose gradients are reduced (and, sharded, weights gathered) as one collective."""

    index: int
    """Buckets are numbered in the order backward completes them (0 = first ready)."""
    kind: str
    """``'sharded'`` (reduce-scatter + all-gather) or ``'replicated'`` (all-reduce)."""
    tensors: tuple
    """Tensor indices, in the order they were added (backward order)."""
    layers: tuple
    """Sorted distinct layer indices of its tensors."""
    elements: int
    padded_elements: int
    """Elements of the formatted buffer (= ``elements`` for a replicated bucket)."""

    @property
    def first_layer(self):
        """Smallest layer: backward completes this bucket's gradient when it finishes this layer."""
        return self.layers[0]

    @property
    def last_layer(self):
        return self.layers[-1]

    def to_dict(self):
        return {"index": self.index, "kind": self.kind, "tensors": len(self.tensors),
                "first_layer": self.first_layer, "last_layer": self.last_layer,
                "elements": self.elements, "padded_elements": self.padded_elements}


@dataclass(frozen=True)
class ExtraReduction:
    """One small cross-replica all-reduce the sharded update adds."""

    what: str
    """The reduction as the analyser writes it (``'norm(w)'``, ``'global_norm(g)'``)."""
    scope: str
    """``'per_tensor'`` or ``'global'``."""
    values: int
    """Values all-reduced (fused over every sharded tensor for per-tensor scope)."""
    dtype_bytes: int
    tensors: int
    """Sharded tensors contributing (0 for a global reduction)."""

    @property
    def nbytes(self):
        return self.values * self.dtype_bytes

    def to_dict(self):
        return {"what": self.what, "scope": self.scope, "values": self.values, "tensors": self.tensors,
                "dtype_bytes": self.dtype_bytes, "nbytes": self.nbytes}


@dataclass(frozen=True, eq=False)
class Plan:
    """The sharding plan of one (workload, optimizer, topology, N). Build with :func:`plan`."""

    workload: object
    topology: object
    analysis: object
    """The optimizer analysis, derived with the plan's weight, gradient and slot dtypes."""
    replicas: int
    bucket_bytes: int
    replicate_below_elements: int
    max_padding_ratio: float
    gather_bytes: int
    """Bytes per weight element in the all-gather (the weights' dtype by default)."""
    tensors: tuple
    buckets: tuple
    allreduce_buckets: tuple
    """The buckets of the replicated update: every gradient fused by bytes in backward order
    as one kind, unpadded. An all-reduce needs no shard format, so neither the format's
    padding nor its split into sharded and replicated tensors (both change with N) moves
    the replicated update's buckets."""
    extra_reductions: tuple
    notes: tuple = field(default=())

    @property
    def spatial_ways(self):
        """Cores per replica (> 1: spatial partitioning)."""
        return self.topology.num_replicas // self.replicas

    @property
    def weight_bytes(self):
        return self.analysis.weight_bytes

    @property
    def grad_bytes(self):
        return self.analysis.grad_bytes

    @property
    def slot_bytes(self):
        return self.analysis.slot_bytes

    @property
    def layer_gather_bytes(self):
        """Bytes per weight element in a fully-sharded step's per-layer all-gathers: the compute
        dtype where it is narrower than :attr:`gather_bytes`. A layer casts its (fp32) weights to
        the compute dtype before its matmul, and XLA's SPMD partitioner places the all-gather where
        the matmul needs them whole, after the cast (PyTorch FSDP's mixed precision gathers in its
        ``param_dtype`` too, Zhao et al. 2023, arXiv 2304.11277, sec. 4.4). The sharded update's
        all-gather of the updated master weights keeps :attr:`gather_bytes`."""
        return min(self.gather_bytes, self.workload.activation_bytes)

    # -------------------------------------------------------------- totals
    # cached: a plan is read-only, and a sweep's memory and step models ask for these at every
    # point (a plan replaced onto another slice starts with none cached)
    @cached_property
    def params(self):
        return int(sum(t.size for t in self.tensors))

    @cached_property
    def padded_params(self):
        """Elements of all formatted buffers (sharded tensors padded, replicated ones as is)."""
        return int(sum(t.padded_size for t in self.tensors))

    @cached_property
    def padding_elements(self):
        return self.padded_params - self.params

    @cached_property
    def sharded_tensors(self):
        return tuple(t for t in self.tensors if not t.replicated)

    @cached_property
    def replicated_tensors(self):
        return tuple(t for t in self.tensors if t.replicated)

    @cached_property
    def replicated_elements(self):
        return int(sum(t.size for t in self.replicated_tensors))

    def total(self, attribute, of="all"):
        """``sum(getattr(t, attribute))`` over the tensors *of* this plan (``"all"``,
        ``"sharded"`` or ``"replicated"``), summed in tensor order once and kept (the memory
        model asks at every point of a sweep)."""
        totals = self.__dict__.setdefault("_totals", {})  # a frozen dataclass's own dict: a cache
        key = (attribute, of)
        if key not in totals:
            tensors = {"all": self.tensors, "sharded": self.sharded_tensors, "replicated": self.replicated_tensors}[of]
            totals[key] = sum(getattr(t, attribute) for t in tensors)
        return totals[key]

    def format_counts(self):
        """``{format: number of tensors}``."""
        out = {f: 0 for f in FORMATS}
        for t in self.tensors:
            out[t.format] += 1
        return out

    def tensor(self, name_or_index):
        if isinstance(name_or_index, int):
            return self.tensors[name_or_index]
        for t in self.tensors:
            if t.name == name_or_index:
                return t
        raise ConfigError("is not a tensor of this workload", key_path="tensor", value=name_or_index)

    # ----------------------------------------------------------- ownership
    def shard_of(self, replica, tensor):
        """What *replica* owns of *tensor* after the reduce-scatter.

        ``{'shard': j, 'phases': [...], 'elements': [start, stop)}`` in the tensor's
        formatted buffer, plus ``'dim': split_dim, 'index': [start, stop)`` along the
        cut dimension (split and padded-rows/cols formats). A replicated tensor is
        owned whole by every replica.
        """
        t = tensor if isinstance(tensor, TensorPlan) else self.tensor(tensor)
        if t.replicated:
            return {"shard": None, "phases": [], "elements": [0, t.size]}
        phases = shard_ranges(self.topology, replica, t.padded_size, self.replicas)
        start, stop = phases[-1]["start"], phases[-1]["stop"]
        out = {"shard": shard_index(self.topology, replica, self.replicas), "phases": phases,
               "elements": [start, stop]}
        if t.format == "split":
            inner = t.size // t.shape[t.split_dim]
            out.update(dim=t.split_dim, index=[start // inner, stop // inner])
        elif t.format == "padded-rows":
            cols = t.shape[-1]
            out.update(dim="rows", index=[start // cols, stop // cols])
        elif t.format == "padded-cols":
            rows = t.size // t.shape[-1]
            out.update(dim="cols", index=[start // rows, stop // rows])
        return out

    def bucket_shard_of(self, replica, bucket):
        """Phase ranges *replica* holds of a sharded bucket's (shard-major) buffer."""
        b = self.buckets[bucket] if isinstance(bucket, int) else bucket
        if b.kind != "sharded":
            return []
        return shard_ranges(self.topology, replica, b.padded_elements, self.replicas)

    # -------------------------------------------------------------- export
    def summary(self):
        """Flat dict of the plan's totals."""
        return {
            "workload": self.workload.name, "optimizer": self.analysis.name,
            "topology": self.topology.name, "replicas": self.replicas, "spatial_ways": self.spatial_ways,
            "params": self.params, "padded_params": self.padded_params,
            "padding_elements": self.padding_elements,
            "padding_bytes": self.padding_elements * (self.weight_bytes + self.grad_bytes),
            "tensors": len(self.tensors), "sharded_tensors": len(self.sharded_tensors),
            "replicated_tensors": len(self.replicated_tensors),
            "replicated_elements": self.replicated_elements,
            "buckets": len(self.buckets), "bucket_bytes": self.bucket_bytes,
            "replicate_below_elements": self.replicate_below_elements,
            "max_padding_ratio": self.max_padding_ratio,
            "grad_bytes": self.grad_bytes, "weight_bytes": self.weight_bytes, "slot_bytes": self.slot_bytes,
            "gather_bytes": self.gather_bytes,
            "extra_reductions": len(self.extra_reductions),
        }

    def to_dict(self, *, replica=None):
        """JSON-ready plan; *replica* adds what that replica owns of each sharded bucket."""
        d = self.summary()
        d.update(
            formats=self.format_counts(),
            buckets=[b.to_dict() for b in self.buckets],
            allreduce_buckets=[b.to_dict() for b in self.allreduce_buckets],
            replicated_tensors=[t.name for t in self.replicated_tensors],
            extra_reductions=[r.to_dict() for r in self.extra_reductions],
            tensor_plans=[t.to_dict() for t in self.tensors],
            notes=list(self.notes),
        )
        if replica is not None:
            d["ownership"] = {
                "replica": int(replica),
                "shard": shard_index(self.topology, replica, self.replicas),
                "buckets": [{"bucket": b.index, "phases": self.bucket_shard_of(replica, b)}
                            for b in self.buckets if b.kind == "sharded"],
            }
        return d

    def __repr__(self):
        return (f"<Plan {self.workload.name} / {self.analysis.name} on {self.topology.name}: "
                f"N={self.replicas}, {len(self.buckets)} buckets, padding {self.padding_elements:,} elements>")
