"""Workload files from the model descriptions users have on disk: a Hugging Face ``config.json``
or a safetensors checkpoint's headers (nothing is downloaded).

:func:`import_workload` reads a ``config.json`` of one of the families in :data:`FAMILIES`
(decoders ``llama``, ``mistral``, ``qwen2``, ``gemma``, ``gemma2``, ``phi3``, ``gpt2``,
``gpt_neox``; mixtures of experts ``mixtral`` and ``deepseek_v2``; the encoders ``bert`` and
``vit``; the encoder-decoder ``t5``) and builds the workload file's document: every trainable tensor with the name and
shape the family's Hugging Face ``transformers`` module gives it (``modeling_<type>.py``), in
forward order, grouped into layers (embeddings; per block an attention and an MLP layer; the
output head), forward FLOPs per token per layer, activation terms and dtypes.
:func:`workload_yaml` writes it as YAML that :func:`wus_sim.model.workload_files.load_workload` reads.

Given a ``.safetensors`` file, a ``model.safetensors.index.json`` or a folder holding them,
only each file's header is read (an 8-byte little-endian length, then that many bytes of
JSON): the tensors' exact names and shapes are taken from it and checked against the
``config.json`` beside it, which gives the FLOPs, layers and activation terms. Buffers that
checkpoints carry and training does not update (GPT-2's ``attn.bias`` causal mask, rotary
``inv_freq``) are left out; so is the second copy of a tied embedding.

What is counted, and why:

* FLOPs (2 per multiply-add): every weight matrix once per token it applies to (the output
  head over the whole vocabulary, tied or not; BERT's masked-LM head on the masked positions,
  its pooler and next-sentence head once per sequence), plus attention's scores and weighted
  sum, ``4 x s x heads x head_dim`` per token per layer at the sequence length ``s`` (the
  sliding window where the config sets one), counted in full, not halved for a causal mask,
  as in PaLM's model-FLOPs count (Chowdhery et al. 2022, arXiv 2204.02311, appendix B:
  ``6N + 12 L H Q T`` per token for training). Norms, activations, softmax and embedding
  lookups are not counted.
* Activations kept for backward, per token and layer, with 16-bit activations, following the
  breakdown of Korthikanti et al. 2022 (arXiv 2205.05198, sec. 4.1; ``34 h + 5 a s`` bytes for
  GPT-style blocks): each matmul's input, Q, K and V, the MLP's hidden outputs (3 of width ``ff``
  for a gated MLP, 2 for GELU), two norm inputs, dropout masks (1 B) where the config's dropout
  is > 0, and the attention probabilities (``2 a s``, plus mask and dropped copy) only where
  attention dropout is > 0; without it the families' TPU training code uses fused (flash)
  attention, which keeps one fp32 log-sum-exp per head and token instead (Dao et al. 2022,
  arXiv 2205.14135, sec. 3.1). The loss keeps bf16 logits and their fp32 log-softmax (6 B) per
  predicted position and vocabulary entry. Under remat ``selective`` (MaxText's ``minimal``) a
  layer keeps its input, Q, K and V, the output projection's output and the MLP's first matmul
  outputs (``selective_bytes_per_element``, :func:`wus_sim.model.importers.hf_families.activation_terms`).
* dtypes: mixed-precision training with fp32 master weights, gradients and optimizer slots and
  bf16 activations (the shipped profiles' choice); the checkpoint's storage dtype
  (``torch_dtype``) is recorded in ``sources``, not used.
"""

import json
import re
import struct
from pathlib import Path

from ...inputs.errors import ConfigError
from ...inputs.limits import MAX_CHECKPOINT_TENSORS, MAX_HEADER_BYTES, MAX_TENSOR_DIMS, MAX_WHOLE_NUMBER
from ...inputs.text import excerpt

from .document import build_document, check_sequence_length
from .hf_families import BUILDERS, FAMILIES, HFConfig, check_family, default_sequence
from .maxtext_keys import is_maxtext_model

__all__ = ["FAMILIES", "import_workload", "workload_document", "workload_yaml", "read_safetensors_header"]

# Buffers that checkpoints store beside the weights: not trainable, left out.
_BUFFER_SUFFIXES = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq", ".attention.bias",
                    ".attention.masked_bias", "embeddings.position_ids")


def _read_json(path, what):
    from ...inputs.files import read_bytes
    from ...inputs.strict_json import loads_strict

    doc = loads_strict(read_bytes(path, what=what), file=path, what=f"a JSON {what}")
    if not isinstance(doc, dict):
        raise ConfigError(f"is not a JSON {what} (not an object)", file=path)
    return doc


def read_safetensors_header(path):
    """``{tensor name: (dtype, shape)}`` of a safetensors file, from its header only (the length
    is checked against :data:`~wus_sim.inputs.limits.MAX_HEADER_BYTES` before a byte of it is read)."""
    from ...inputs.files import check_file
    from ...inputs.strict_json import loads_strict

    path = Path(path)
    check_file(path, what="safetensors file")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConfigError("is not a safetensors file (shorter than its 8-byte header length)", file=path)
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise ConfigError(f"has a header of {n:,} bytes, over the importer's limit of {MAX_HEADER_BYTES:,}",
                                  file=path)
            raw = f.read(n)
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror or type(exc).__name__}", file=path) from None
    if len(raw) < n:
        raise ConfigError(f"is not a safetensors file (its header says {n:,} bytes; the file holds {len(raw):,})",
                          file=path)
    header = loads_strict(raw, file=path, what="a safetensors header")
    if not isinstance(header, dict):
        raise ConfigError("is not a safetensors file (its header is not a JSON object)", file=path)
    if len(header) > MAX_CHECKPOINT_TENSORS + 1:
        raise ConfigError(f"holds {len(header):,} tensors, over the importer's limit of {MAX_CHECKPOINT_TENSORS:,}",
                          file=path)
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if (not isinstance(shape, list) or len(shape) > MAX_TENSOR_DIMS
                or any(isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= MAX_WHOLE_NUMBER for d in shape)):
            raise ConfigError(f"has no valid shape in the safetensors header (a list of at most {MAX_TENSOR_DIMS} "
                              f"whole numbers)", file=path, key_path=excerpt(name, 60))
        out[name] = (excerpt(str(entry.get("dtype", "")), 20), tuple(shape))
    return out


# ==================================================================== checkpoints
def _canonical(name):
    """A tensor name with the model-class prefix a checkpoint may or may not carry dropped, and
    TF-era ``gamma``/``beta`` spelled ``weight``/``bias``."""
    for prefix in ("transformer.", "model.", "bert.", "gpt_neox."):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    if name.endswith(".gamma"):
        name = name[:-6] + ".weight"
    elif name.endswith(".beta"):
        name = name[:-5] + ".bias"
    return name


def _checkpoint_tensors(path):
    """``(headers {name: (dtype, shape, file)}, files read)`` of a safetensors file or index."""
    path = Path(path)
    if path.suffix == ".json":
        index = _read_json(path, "safetensors index")
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ConfigError("has no weight_map of tensor name to shard file", file=path, key_path="weight_map")
        if len(weight_map) > MAX_CHECKPOINT_TENSORS:
            raise ConfigError(f"names {len(weight_map):,} tensors, over the importer's limit of "
                              f"{MAX_CHECKPOINT_TENSORS:,}", file=path, key_path="weight_map")
        shards = sorted(set(map(str, weight_map.values())))
        out = {}
        for shard in shards:
            shard_path = path.parent / shard
            for name, (dtype, shape) in read_safetensors_header(shard_path).items():
                out[name] = (dtype, shape, shard_path)
            if len(out) > MAX_CHECKPOINT_TENSORS:
                raise ConfigError(f"has shards holding over the importer's limit of {MAX_CHECKPOINT_TENSORS:,} "
                                  "tensors", file=path)
        for name, shard in weight_map.items():
            if name not in out:
                raise ConfigError(f"names a tensor that shard {shard} does not hold", file=path,
                                  key_path=f"weight_map.{excerpt(name, 60)}")
        return out, [path] + [path.parent / s for s in shards]
    return {n: (d, s, path) for n, (d, s) in read_safetensors_header(path).items()}, [path]


def _match_checkpoint(model, headers, config_path, summary):
    """Replace the model's tensors by the checkpoint's (names as stored), in the model's order,
    after checking names and shapes against the config."""
    by_canonical = {}
    for name, (dtype, shape, file) in headers.items():
        if name.endswith(_BUFFER_SUFFIXES):
            summary["buffers"] += 1
            continue
        by_canonical[_canonical(name)] = (name, dtype, shape, file)
    tied = {_canonical(n) for n in model.tied}
    out = []
    for name, shape, layer in model.tensors:
        found = by_canonical.pop(_canonical(name), None)
        if found is None:
            raise ConfigError(f"has no tensor {excerpt(name, 60)!r}, which the config beside it ({config_path}) implies",
                              file=summary["files"][0])
        stored, dtype, stored_shape, file = found
        # a conv kernel may be stored [cout, cin, kh, kw] (PyTorch) for the format's [kh, kw, cin, cout]
        torch_conv = len(shape) == 4 and len(stored_shape) == 4 and [stored_shape[i] for i in (2, 3, 1, 0)] == shape
        if list(stored_shape) != shape and not torch_conv:
            raise ConfigError(f"shape {list(stored_shape)} contradicts the config {config_path}, which "
                              f"implies {shape}", file=file, key_path=excerpt(stored, 60))
        out.append([stored, shape, layer])
        summary["dtypes"].add(dtype)
    for canonical, (stored, dtype, shape, file) in by_canonical.items():
        if canonical in tied:
            summary["tied_copies"] += 1
            continue
        raise ConfigError(f"is not a tensor of the model the config {config_path} describes", file=file,
                          key_path=excerpt(stored, 60))
    model.tensors = out


# ==================================================================== the document
def _resolve(path):
    """``(config path, checkpoint path or None)`` for what the user named."""
    path = Path(path)
    if path.is_dir():
        for candidate in ("model.safetensors.index.json", "model.safetensors"):
            if (path / candidate).is_file():
                return path / "config.json", path / candidate
        return path / "config.json", None
    if path.suffix == ".safetensors" or path.name.endswith(".safetensors.index.json"):
        return path.parent / "config.json", path
    return path, None


def workload_document(path, *, sequence_length=None, name=None, source=None):
    """The workload file's document (a dict) for a config.json, a safetensors file, a
    ``model.safetensors.index.json`` or a folder holding them (see the module docstring), or a
    MaxText model file (``.yml``/``.yaml``: :mod:`.maxtext_model`).
    *source* says where the config came from (``sources.config``; default: its file name)."""
    from ...inputs.api_args import check_path

    check_path(path, "path")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError("must be a workload name (a non-empty str) or None", key_path="name", value=name)
    config_path, checkpoint = _resolve(path)
    if checkpoint is not None and not config_path.is_file():
        raise ConfigError(f"has no config.json beside it ({config_path}) to take FLOPs and layers from",
                          file=checkpoint)
    yml = checkpoint is None and config_path.suffix in (".yml", ".yaml")
    if yml:
        from .maxtext_model import read_model_file

        doc = read_model_file(config_path)
    else:
        doc = _read_json(config_path, "Hugging Face config")
    if checkpoint is None and (yml or is_maxtext_model(doc)):  # a MaxText model file, told by its keys
        from .maxtext_model import maxtext_document

        if doc and not is_maxtext_model(doc):  # an empty file is MaxText's default model
            raise ConfigError(f"is not a MaxText model file: none of its keys ({excerpt(', '.join(map(str, doc)), 80)}) "
                              "is a MaxText model key (decoder_block, base_emb_dim, ...); import-workload reads a "
                              "Hugging Face config.json, safetensors headers or a MaxText model file", file=config_path)
        check_sequence_length(sequence_length)
        return maxtext_document(doc, file=config_path, sequence_length=sequence_length,
                                name=name or config_path.stem, source=source)
    cfg = HFConfig(doc, config_path)
    family = cfg.doc.get("model_type")
    if not isinstance(family, str) or family not in BUILDERS:
        raise cfg.error("model_type", "is not a family the importer reads (it knows each family's tensor names "
                                      f"and FLOP formula; known: {', '.join(FAMILIES)}): if the model shares one "
                                      "of those architectures set model_type to it, else write the workload file "
                                      "by hand (docs/formats/workload.md), or give a MaxText model file (.yml)",
                        family)
    cfg.check_limits(family)  # before any tensor is built (and before the family's fields are read)
    check_family(cfg, family)
    check_sequence_length(sequence_length)
    seq, seq_why = (sequence_length, "given") if sequence_length else default_sequence(cfg, family)
    if not name:  # the model's own name, else its folder's or file's
        given = cfg.doc.get("_name_or_path")
        stem = config_path.resolve().parent.name if config_path.stem == "config" else config_path.stem
        name = (given if isinstance(given, str) and given.strip("/") else stem or family)
        name = name.rstrip("/").split("/")[-1].lower()
    config = ((source or config_path.name) + f", model_type {family}"
              + (f", {cfg.doc['_name_or_path']}" if isinstance(cfg.doc.get("_name_or_path"), str) else ""))
    return build_document(cfg, family, BUILDERS[family], seq, None if sequence_length else seq_why, name=name,
                          config=config, match=None if checkpoint is None else
                          (lambda model: _checkpoint_source(model, checkpoint, config_path)))


def _checkpoint_source(model, checkpoint, config_path):
    """Replace *model*'s tensors by *checkpoint*'s (:func:`_match_checkpoint`); where they came from."""
    headers, files = _checkpoint_tensors(checkpoint)
    summary = {"files": files, "buffers": 0, "tied_copies": 0, "dtypes": set()}
    _match_checkpoint(model, headers, config_path, summary)
    return (f"safetensors headers of {', '.join(f.name for f in files)} (exact names and shapes, stored as "
            f"{', '.join(sorted(summary['dtypes']))}); {summary['buffers']} buffers and {summary['tied_copies']} "
            f"tied copies left out; checked against {config_path.name}")


_NOT_YAML_PRINTABLE = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters a YAML file may not hold as they are (YAML 1.1, 5.1: the printable set), and NEL,
which a quoted string would read as a line break."""


def workload_yaml(doc, *, header=None):
    """*doc* (from :func:`workload_document`) as workload-file YAML: one tensor and one layer a
    line (JSON flow style, which YAML reads)."""
    def dump(v):
        # JSON escapes the C0 controls; YAML refuses a few more characters raw (DEL, the C1
        # controls, surrogates, U+FFFE/U+FFFF): a config's name may hold any of them
        return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(v, ensure_ascii=False))

    lines = [f"# {line}" for line in (header or [])]
    for key, value in doc.items():
        if key in ("layers", "tensors", "activation_memory", "mlperf_v06_tpu", "attention") and value:
            lines.append(f"{key}:")
            lines.extend(f"  - {dump(row)}" for row in value)
        elif isinstance(value, dict):
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {dump(v)}" for k, v in value.items())
        else:
            lines.append(f"{key}: {dump(value)}")
    return "\n".join(lines) + "\n"


def import_workload(path, *, sequence_length=None, name=None, out=None, source=None, header=None):
    """Workload-file YAML for *path* (see :func:`workload_document`); written to *out* if given.
    *header* replaces the first comment lines. Returns the YAML text."""
    doc = workload_document(path, sequence_length=sequence_length, name=name, source=source)
    text = workload_yaml(doc, header=header or [f"Written by wus-sim import-workload from {Path(path).name}; "
                                                "units are in the key names."])
    if out is not None:
        from ...inputs.writes import write_atomic
        from ..workload_files import workload_from_text

        workload_from_text(text, file=out)  # load_workload's rules, before anything is written
        write_atomic(out, text, what="workload file", named_by="out")
    return text
