"""Reading workloads from YAML: the key tables, the search path (``WUS_SIM_WORKLOAD_PATH``)
and the readers of tensors, layers, activation terms and MLPerf configs."""

from dataclasses import replace
from pathlib import Path
import math
import os

import numpy as np

from ..inputs.config import Section, load_yaml, present
from ..inputs.files import check_file
from ..inputs.errors import ConfigError, UnknownNameError
from ..inputs.keys import Key, KeyTable
from ..inputs.limits import MAX_TENSOR_DIMS, MAX_WHOLE_NUMBER
from ..inputs.memo import IdentityMemo, fixed_while_running
# the dtype tables live in units (light, so the command line builds its choices from them)
from ..inputs.units import DTYPE_BYTES
from .workload import ActivationTerm, AttentionScores, MLPerfConfig, Tensor, Workload

__all__ = ["load_workload", "workload_from_text", "known_workloads", "workload_dirs", "workload_from_document",
           "WORKLOAD_KEYS"]


WORKLOAD_PATH_ENV = "WUS_SIM_WORKLOAD_PATH"
"""Extra directories (``os.pathsep``-separated) searched for workload YAML before the shipped ones."""

_SHIPPED = Path(__file__).resolve().parent.parent / "data" / "workloads"


# ====================================================================== loading
def workload_dirs():
    """Directories searched for ``NAME.yaml``, first match wins."""
    extra = [Path(p) for p in os.environ.get(WORKLOAD_PATH_ENV, "").split(os.pathsep) if p]
    return extra + [_SHIPPED]


def known_workloads():
    """Names of the workload files found (file stems), sorted."""
    names = set()
    for d in workload_dirs():
        if os.path.isdir(d):  # False, not OSError, for a name the OS refuses
            names.update(p.stem for p in d.glob("*.yaml"))
    return sorted(names)


@fixed_while_running
def load_workload(name_or_path):
    """A :class:`Workload` from a shipped name (``'transformer-big'``) or a path to YAML."""
    if isinstance(name_or_path, Workload):
        return name_or_path
    spec = str(name_or_path)
    if spec.endswith((".yaml", ".yml")) or os.sep in spec:
        path = Path(spec)
        check_file(path, what="workload file", named_by="workload")
    else:
        for d in workload_dirs():
            path = d / f"{spec}.yaml"
            if present(path):
                break
        else:
            raise UnknownNameError("workload", spec, known_workloads())
    st = check_file(path, what="workload file", named_by="workload")
    return _LOADED.get((), (str(Path(path).resolve()), st.st_mtime_ns, st.st_size),
                       lambda: _workload_from_file(path))


_LOADED = IdentityMemo(maxsize=64)
"""Workloads by file and modification time (an edited file is read again): a sweep's points
load the same few (a Workload is frozen)."""


_DTYPES = tuple(sorted(DTYPE_BYTES))

_FLOPS_KEYS = KeyTable("fwd_flops", [
    Key("per_unit", "number", "Forward FLOPs per unit (2 per multiply-add).", unit="FLOP", required=True,
        positive=True),
    Key("unit", "string", "What one unit is (image, token, sentence pair).", required=True),
    Key("units_per_example", "integer", "Units in one example (tokens per sequence, 1 for an image).",
        required=True, minimum=1),
    Key("example_unit", "string", "What one example is: the unit of batch sizes and throughput.", required=True),
    Key("counts", "string", "What the FLOP count includes and leaves out.", default=""),
], meaning="Forward FLOPs per example = per_unit x units_per_example; backward is a multiple of it "
           "(the compute model's backward_flops_ratio).")

_ACTIVATION_KEYS = KeyTable("activation_memory entry", [
    Key("what", "string", "The activations counted.", required=True),
    Key("elements", "integer", "Elements kept for backward, per example.", required=True, minimum=0),
    Key("bytes_per_element", "number", "Bytes stored per element (may combine several kept copies).", unit="B",
        required=True, minimum=0),
    Key("why", "string", "Why that many bytes per element.", default=""),
    Key("layers", "integer", "Identical layers the term spans (elements counts them all): rematerialisation "
        "(point key remat) keeps only each layer's input, elements / layers activation elements.", minimum=1,
        default_text="none: not per-layer; kept whole under every remat policy"),
    Key("selective_bytes_per_element", "number", "Bytes per counted element each layer keeps under remat "
        "`selective`: its input and its weight matmuls' outputs that backward needs (MaxText's `minimal` "
        "policy); the rest (norms, activation functions, attention scores) is recomputed. Only with `layers`, "
        "and at most bytes_per_element.", unit="B", minimum=0,
        default_text="none: remat selective is a one-line error for this workload"),
    Key("compiled_bytes_per_element", "number", "Bytes per element the TPU compiler (XLA) keeps after fusion: "
        "the inputs of matmuls and non-fusable ops, elementwise chains recomputed (point key activation_model "
        "xla, the default).", unit="B", minimum=0, default_text="bytes_per_element"),
    Key("compiled_why", "string", "How compiled_bytes_per_element is derived.", default=""),
    Key("head", "boolean", "The term is the output head's (the logits the loss reads), after every layer: "
        "backward frees it before it reaches the layers, so under rematerialisation it is never live together "
        "with a layer's recomputed activations (the peak is the larger of the two). Not with `layers`.",
        default=False),
], meaning="One term of the activation-memory estimate: elements x bytes_per_element bytes per example.")

_DTYPE_KEYS = KeyTable("dtypes", [
    Key(k, "string", what, required=True, choices=_DTYPES) for k, what in (
        ("weights", "Weight dtype in HBM (and of the weight all-gather)."),
        ("gradients", "Gradient dtype in HBM and on the wire (the point parameter grad_dtype overrides it)."),
        ("slots", "Optimizer slot dtype (m, v, momentum)."),
        ("activations", "Activation dtype (HBM traffic of elementwise work)."))
], meaning="Element types; bytes per element: float32 4, bfloat16 2, float16 2.")

_MLPERF_KEYS = KeyTable("mlperf_v06_tpu entry", [
    Key("topology", "string", "Slice the run used (a topology name).", required=True),
    Key("global_batch", "integer", "Examples per step over all replicas.", unit="examples", required=True,
        minimum=1),
    Key("replicas", "integer", "Data-parallel replicas (cores / spatial_ways).", required=True, minimum=1),
    Key("spatial_ways", "integer", "Cores each replica is spatially partitioned over.", required=True, minimum=1),
    Key("per_replica_batch", "integer", "Examples per replica per step; replicas x per_replica_batch must equal "
        "global_batch.", unit="examples", required=True, minimum=1),
    Key("note", "string", "Anything else about the run.", default=""),
], meaning="One MLPerf v0.6 TPU run of the workload: the batch and replica count a point on that slice uses "
           "unless it sets its own.")

_ATTENTION_KEYS = KeyTable("attention entry", [
    Key("layer", "string", "The attention layer (a name in layers).", required=True),
    Key("heads", "integer", "Attention heads (query heads).", required=True, minimum=1),
    Key("head_dim", "integer", "Width of one head's queries and keys.", required=True, minimum=1),
    Key("query_tokens", "integer", "Query positions per example (sequence length; target length for "
        "cross-attention).", unit="tokens", required=True, minimum=1),
    Key("key_tokens", "integer", "Key positions each query attends to, per example (sequence length; source "
        "length for cross-attention; the window when attention is windowed).", unit="tokens", required=True,
        minimum=1),
    Key("causal", "boolean", "Whether a causal mask hides every key after its query (decoder self-attention): "
        "a kernel that skips masked blocks does half the score and context work (the shape compute model "
        "halves it; the layer FLOPs still count it in full).", default=False),
    Key("fused", "boolean", "Whether the scores stay on chip (flash attention): no score matrix goes through "
        "HBM, only Q, K, V and the output (read by the shape compute model).", default=False),
], meaning="One attention layer's score matrix, heads x query_tokens x key_tokens elements per example: the "
           "compute model charges the scores' softmax and dropout as elementwise work. The score and context "
           "matmuls, 4 x query_tokens x key_tokens x heads x head_dim FLOPs per example, must be part of the "
           "layer's FLOPs in layers.")

WORKLOAD_KEYS = KeyTable("workload file", [
    Key("name", "string", "Workload name (results' `workload` column).", required=True),
    Key("description", "string", "One line on the model and data.", default=""),
    Key("params", "integer", "Trainable parameters; must equal the sum of the tensor sizes.", unit="elements",
        required=True, minimum=1),
    Key("fwd_flops", "mapping", "Forward FLOPs per example.", required=True, table=_FLOPS_KEYS),
    Key("activation_memory", "list", "Activation memory per example, as a sum of terms.", required=True,
        table=_ACTIVATION_KEYS),
    Key("dtypes", "mapping", "Element types of weights, gradients, slots and activations.", required=True,
        table=_DTYPE_KEYS),
    Key("default_optimizer", "string", "Optimizer of a point that names none (an optimizer name or "
        "composition).", required=True),
    Key("default_per_replica_batch", "integer", "Per-replica batch of a point that sets none, on a slice with "
        "no MLPerf run.", unit="examples", required=True, minimum=1),
    Key("mlperf_v06_tpu", "list", "MLPerf v0.6 TPU runs of this workload.", default_text="none",
        table=_MLPERF_KEYS),
    Key("sources", "mapping", "Citation per topic (tensors, fwd_flops, configs, ...).",
        schema={"type": "object", "additionalProperties": {"type": "string"}}),
    Key("layers", "list", "Layers in forward order, each [name, forward FLOPs per unit]; the FLOPs must sum "
        "to fwd_flops.per_unit.", default_text="one layer per tensor layer index, FLOPs split by parameters",
        rule="a list of [name, number >= 0] rows with unique names",
        schema={"type": "array", "minItems": 1,
                "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number", "minimum": 0}],
                          "minItems": 2, "maxItems": 2}}),
    Key("dense_layout", "string", "Which dimension of a rank-2 weight is its output (what a layer writes, for "
        "its elementwise work): in_out for TensorFlow kernels [in, out] and GPT-2's Conv1D, out_in for PyTorch "
        "nn.Linear weights [out, in]. Conv kernels are [kh, kw, cin, cout] either way.", default="in_out",
        choices=("in_out", "out_in")),
    Key("attention", "list", "Score matrices of the attention layers.", default_text="none (no attention)",
        table=_ATTENTION_KEYS),
    Key("tensors", "list", "Trainable tensors, each [name, shape, layer index]; the layer is where backward "
        "completes the tensor's gradient.", required=True,
        rule="a non-empty list of [unique name, list of whole numbers >= 1, whole number >= 0 below the "
             "number of layers]",
        schema={"type": "array", "minItems": 1,
                "items": {"type": "array", "minItems": 3, "maxItems": 3,
                          "prefixItems": [{"type": "string", "minLength": 1},
                                          {"type": "array", "items": {"type": "integer", "minimum": 1}},
                                          {"type": "integer", "minimum": 0}]}}),
], meaning="A model's trainable tensors, forward FLOPs, activation memory and MLPerf runs.")
"""Keys of a workload file (read by :func:`load_workload`)."""


def _default_optimizer(doc):
    """The optimizer of a point that names none, loaded now: a wrong name is this file's error
    (a step would otherwise fail with "unknown optimizer" and no word of where the name came from)."""
    from ..optimizers import load_optimizer

    name = WORKLOAD_KEYS.read(doc, "default_optimizer")
    try:
        load_optimizer(name)
    except UnknownNameError as exc:
        raise doc.error("default_optimizer", f"is not a known optimizer{exc.hint()}",
                        name) from None
    except ConfigError as exc:
        raise doc.error("default_optimizer", str(exc) if exc.file else exc.rule, name) from None
    return name


def workload_from_text(text, *, file):
    """The :class:`Workload` of workload-file YAML *text*, read by exactly the rules
    :func:`load_workload` reads a file by (errors name *file*): a file is checked before it is
    written (``import-workload``)."""
    from ..inputs.config import parse_yaml

    return workload_from_document(parse_yaml(text, file=file), file)


def _workload_from_file(path):
    return workload_from_document(load_yaml(path), path)


def workload_from_document(raw, path):
    """A :class:`Workload` from a workload file's document already read (*path* names it in
    errors and becomes :attr:`Workload.path`; None for one built in memory)."""
    doc = Section(raw, file=path)
    WORKLOAD_KEYS.check(doc)

    flops = doc.section("fwd_flops")
    _FLOPS_KEYS.check(flops)
    per_unit = _FLOPS_KEYS.read(flops, "per_unit")
    units = _FLOPS_KEYS.read(flops, "units_per_example")

    dtypes = doc.section("dtypes")
    _DTYPE_KEYS.check(dtypes)
    nbytes = {k: DTYPE_BYTES[_DTYPE_KEYS.read(dtypes, k)] for k in _DTYPE_KEYS.required}

    layer_names, layer_flops_unit = _read_layers(doc, per_unit)
    tensors = _read_tensors(doc, len(layer_names) if layer_names else None)
    if not layer_names:  # no layer table: one layer per distinct index, FLOPs split by parameters later
        n = max(t.layer for t in tensors) + 1
        layer_names = tuple(f"layer_{i}" for i in range(n))
    num_layers = len(layer_names)

    total = sum(t.size for t in tensors)
    declared = WORKLOAD_KEYS.read(doc, "params")
    if total != declared:
        raise doc.error("params", f"does not match the tensors, whose sizes sum to {total:,}", declared)

    if layer_flops_unit is None:  # split the total by parameter count (documented fallback)
        per_layer = np.bincount([t.layer for t in tensors], weights=[t.size for t in tensors],
                                minlength=num_layers)
        layer_flops_unit = tuple(per_unit * per_layer / per_layer.sum())

    terms = _read_activation_terms(doc)
    attention = _read_attention(doc, layer_names, [float(f) * units for f in layer_flops_unit])
    configs = _read_configs(doc)
    default_batch = WORKLOAD_KEYS.read(doc, "default_per_replica_batch")
    sources = doc.get("sources", {}) or {}
    if not isinstance(sources, dict):
        raise doc.error("sources", "must be a mapping of topic to citation", sources)

    return Workload(
        name=WORKLOAD_KEYS.read(doc, "name"),
        description=WORKLOAD_KEYS.read(doc, "description"),
        tensors=tuple(tensors),
        params=total,
        fwd_flops_per_example=per_unit * units,
        example_unit=_FLOPS_KEYS.read(flops, "example_unit"),
        activation_bytes_per_example=float(sum(t.nbytes for t in terms)),
        weight_bytes=nbytes["weights"],
        grad_bytes=nbytes["gradients"],
        slot_bytes=nbytes["slots"],
        activation_bytes=nbytes["activations"],
        default_optimizer=_default_optimizer(doc),
        configs=tuple(configs),
        sources={str(k): str(v) for k, v in sources.items()},
        num_layers=num_layers,
        layer_names=tuple(layer_names),
        layer_fwd_flops=tuple(float(f) * units for f in layer_flops_unit),
        fwd_flops_per_unit=per_unit,
        flops_unit=_FLOPS_KEYS.read(flops, "unit"),
        units_per_example=units,
        flops_note=_FLOPS_KEYS.read(flops, "counts"),
        activation_terms=tuple(terms),
        default_per_replica_batch=default_batch,
        attention=tuple(attention),
        dense_layout=WORKLOAD_KEYS.read(doc, "dense_layout"),
        path=None if path is None else str(path),
    )


def _finite(x):
    try:
        return math.isfinite(float(x))
    except OverflowError:  # an int past float range
        return False


def _read_layers(doc, per_unit):
    if "layers" not in doc:
        return (), None
    rows = doc.list("layers")
    names, flops = [], []
    for i, row in enumerate(rows):
        key = f"layers[{i}]"
        if (not isinstance(row, list) or len(row) != 2 or not isinstance(row[0], str)
                or isinstance(row[1], bool) or not isinstance(row[1], (int, float)) or not _finite(row[1])
                or row[1] < 0):
            raise doc.error(key, "must be [name, fwd FLOPs per unit >= 0, finite]", row)
        names.append(row[0])
        flops.append(float(row[1]))
    if not names:
        raise doc.error("layers", "must list at least one layer", rows)
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise doc.error("layers", f"names must be unique; {dup!r} repeats", show_value=False)
    if not math.isclose(sum(flops), per_unit, rel_tol=1e-9):
        raise doc.error("layers", f"FLOPs per unit sum to {sum(flops):.6g}, not fwd_flops.per_unit "
                                  f"{per_unit:.6g}", show_value=False)
    return tuple(names), tuple(flops)


def _read_tensors(doc, num_layers):
    rows = doc.list("tensors")
    if not rows:
        raise doc.error("tensors", "must list at least one tensor", rows)
    seen = set()
    out = []
    for i, row in enumerate(rows):
        key = f"tensors[{i}]"
        if not isinstance(row, list) or len(row) != 3:
            raise doc.error(key, "must be [name, shape, layer index]", row)
        name, shape, layer = row
        if not isinstance(name, str) or not name:
            raise doc.error(key, "name must be a non-empty string", name)
        if name in seen:
            raise doc.error(key, f"tensor name {name!r} repeats", show_value=False)
        seen.add(name)
        if (not isinstance(shape, list) or len(shape) > MAX_TENSOR_DIMS
                or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape)):
            raise doc.error(key, f"shape must be a list of at most {MAX_TENSOR_DIMS} whole numbers >= 1", shape)
        if math.prod(shape) > MAX_WHOLE_NUMBER:
            raise doc.error(key, "shape has more than 2^53 elements (the most a tensor may have)", shape)
        if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
            raise doc.error(key, "layer index must be a whole number >= 0", layer)
        if num_layers is not None and layer >= num_layers:
            raise doc.error(key, f"layer index must be < {num_layers} (the number of layers listed)", layer)
        out.append(Tensor(name, tuple(shape), layer))
    return out


def _read_activation_terms(doc):
    rows = doc.list("activation_memory")
    terms = []
    for i, row in enumerate(rows):
        sec = Section(row, file=doc.file, path=f"activation_memory[{i}]")
        _ACTIVATION_KEYS.check(sec)
        term = ActivationTerm(**{k: _ACTIVATION_KEYS.read(sec, k) for k in
                                 ("what", "elements", "bytes_per_element", "why")},
                              layers=_ACTIVATION_KEYS.read(sec, "layers") if "layers" in sec else 0,
                              compiled_bytes_per_element=(_ACTIVATION_KEYS.read(sec, "compiled_bytes_per_element")
                                                          if "compiled_bytes_per_element" in sec else None),
                              compiled_why=_ACTIVATION_KEYS.read(sec, "compiled_why"),
                              head=bool(_ACTIVATION_KEYS.read(sec, "head")))
        if term.head and term.layers:
            raise ConfigError("is for the output head's term, after every layer; a per-layer term (`layers`) is "
                              "none", file=doc.file, key_path=f"activation_memory[{i}].head", value=True)
        if "selective_bytes_per_element" in sec:
            selective = _ACTIVATION_KEYS.read(sec, "selective_bytes_per_element")
            if not term.layers:
                raise ConfigError("needs `layers`: only a per-layer term is rematerialised", file=doc.file,
                                  key_path=f"activation_memory[{i}].selective_bytes_per_element", value=selective)
            if selective > term.bytes_per_element:
                raise ConfigError(f"must be at most bytes_per_element ({term.bytes_per_element:g}): selective "
                                  "remat keeps part of what no remat keeps", file=doc.file,
                                  key_path=f"activation_memory[{i}].selective_bytes_per_element", value=selective)
            term = replace(term, selective_bytes_per_element=selective)
        terms.append(term)
    return terms


def _read_attention(doc, layer_names, layer_flops):
    """The ``attention`` entries; each names a layer whose FLOPs hold its score and context matmuls."""
    index = {name: i for i, name in enumerate(layer_names)}
    out, flops = [], [0.0] * len(layer_names)
    for i, row in enumerate(doc.list("attention", [])):
        sec = Section(row, file=doc.file, path=f"attention[{i}]")
        _ATTENTION_KEYS.check(sec)
        name = _ATTENTION_KEYS.read(sec, "layer")
        if name not in index:
            raise sec.error("layer", "is not a layer of this workload (a name in layers)", name)
        a = AttentionScores(index[name], *(_ATTENTION_KEYS.read(sec, k) for k in
                                           ("heads", "head_dim", "query_tokens", "key_tokens", "causal", "fused")))
        flops[a.layer] += a.flops
        if flops[a.layer] > layer_flops[a.layer] * (1 + 1e-9):
            raise sec.error("layer", f"has {layer_flops[a.layer]:.6g} forward FLOPs per example, fewer than its "
                                     f"attention's score and context matmuls ({flops[a.layer]:.6g}: 4 x query_tokens "
                                     "x key_tokens x heads x head_dim); layers must count them", name)
        out.append(a)
    return out


def _read_configs(doc):
    rows = doc.list("mlperf_v06_tpu", [])
    configs = []
    for i, row in enumerate(rows):
        sec = Section(row, file=doc.file, path=f"mlperf_v06_tpu[{i}]")
        _MLPERF_KEYS.check(sec)
        c = MLPerfConfig(**{key.name: _MLPERF_KEYS.read(sec, key.name) for key in _MLPERF_KEYS})
        if c.replicas * c.per_replica_batch != c.global_batch:
            raise sec.error("global_batch", f"must equal replicas x per_replica_batch "
                                            f"({c.replicas} x {c.per_replica_batch})", c.global_batch)
        configs.append(c)
    return configs
