"""MaxText model configs as workloads: a model file of MaxText's library
(``src/maxtext/configs/models/NAME.yml``) or the model keys of a run (``base.yml``'s ``base_*``
dims scaled by ``global_parameter_scale``: MaxText's default model) become the config of the
decoder family that builds the same tensors (:mod:`.hf_decoder`, :mod:`.hf_deepseek`, GPT-2's for
MaxText's ``gpt3``), then a workload document as any import (:func:`.document.build_document`).

What is MaxText's and what is the importer's:

* The sizes are MaxText's effective ones (``types.py``, "CALCULATE MODEL DIMENSIONS"): with
  ``global_parameter_scale`` ``2^k``, ``k = 3b + r``, the embedding grows ``2^(b + [r > 1])``, heads and
  MLP widths ``2^(b + [r > 0])``, layers ``2^b``; ``head_dim`` stays.
* The tensors are those MaxText's block creates (``src/maxtext/models/<block>.py``), named as the
  family's Hugging Face module names them; the experts of a layer are one tensor per weight, as
  MaxText holds them (``wi_0``, ``wi_1``, ``wo``: ``[experts, ...]``). ``gemma2``'s model files count a
  local and a global layer as one (``base_num_decoder_layers: 23`` is Gemma 2 27B's 46 layers).
* The sequence is ``max_target_length``: the model file's, else ``base.yml``'s 2,048.
* Keys are read (:data:`.maxtext_keys.BASE_DEFAULTS`), accepted unread (no tensor or FLOP changes
  with them), recorded (run keys), or refused in one line naming the key and why; so are decoder
  blocks and features the builders do not express.

The library's model files ship in ``wus_sim/data/maxtext/models/`` so that a run at another length
than a shipped workload's can rebuild it (:func:`library_workload`, the workload name
``NAME@TOKENS``): the model file fixes every tensor, the run's ``max_target_length`` only the
sequence. A name, not an object, because a point's workload travels as text (experiment files,
journals, result rows, reproduce lines) and must load again to the same model.
"""

import json
import math
from pathlib import Path
import re

from ...inputs.errors import ConfigError
from ...inputs.limits import IMPORT_MAX
from ...inputs.memo import IdentityMemo

from .hf_families import HFConfig
from .maxtext_keys import (BASE_DEFAULTS, BLOCK_FLAGS, MAXTEXT_SOURCE, REFUSED_BLOCKS, REFUSED_FEATURES,
                           key_kind)

__all__ = ["BLOCKS", "read_model_file", "maxtext_dims", "maxtext_config", "maxtext_document", "maxtext_workload",
           "MaxTextConfig", "LIBRARY_DIR", "DEFAULT_MODEL", "library_models", "split_length", "library_workload",
           "resolve_workload"]

BLOCKS = ("llama2", "mistral", "mixtral", "gemma", "gemma2", "gemma3", "gpt3", "qwen2", "qwen3", "qwen3_moe",
          "deepseek", "llama4", "gpt_oss", "olmo3", "envy")
"""MaxText decoder blocks the importer builds."""

_SIZES = {  # key: (limit kind in IMPORT_MAX, smallest value)
    "base_emb_dim": ("width", 1), "base_num_query_heads": ("heads", 1), "base_num_kv_heads": ("heads", 1),
    "base_mlp_dim": ("ff", 1), "base_num_decoder_layers": ("layers", 1), "head_dim": ("width", 1),
    "vocab_size": ("vocab", 1), "num_experts": ("experts", 1), "num_experts_per_tok": ("experts", 1),
    "base_moe_mlp_dim": ("ff", -1), "shared_experts": ("experts", 0), "first_num_dense_layers": ("layers", 0),
    "interleave_moe_layer_step": ("layers", 1), "q_lora_rank": ("rank", 0), "kv_lora_rank": ("rank", 1),
    "qk_nope_head_dim": ("width", 1), "qk_rope_head_dim": ("width", 1), "v_head_dim": ("width", 1),
    "sliding_window_size": ("positions", 0), "chunk_attn_window_size": ("positions", 0),
    "nope_layer_interval": ("layers", -1), "trainable_position_size": ("positions", -1),
    "max_target_length": ("positions", 1), "global_parameter_scale": ("layers", 1),
}
_FLAGS = ("logits_via_embedding", "enable_dropout", "routed_bias", "mlp_bias", "attention_bias", "attention_sink",
          "use_qk_norm", "use_post_attn_norm", "use_post_ffw_norm")

# the Hugging Face key a family reads -> the MaxText key it comes from (errors name the latter)
_KEYMAP = {"hidden_size": "base_emb_dim", "n_embd": "base_emb_dim", "num_hidden_layers": "base_num_decoder_layers",
           "n_layer": "base_num_decoder_layers", "num_attention_heads": "base_num_query_heads",
           "n_head": "base_num_query_heads", "num_key_value_heads": "base_num_kv_heads",
           "intermediate_size": "base_mlp_dim", "intermediate_size_mlp": "base_mlp_dim", "n_inner": "base_mlp_dim",
           "moe_intermediate_size": "base_moe_mlp_dim", "num_local_experts": "num_experts",
           "n_routed_experts": "num_experts", "n_shared_experts": "shared_experts",
           "first_k_dense_replace": "first_num_dense_layers", "sliding_window": "sliding_window_size",
           "attention_chunk_size": "chunk_attn_window_size", "n_positions": "trainable_position_size"}


class MaxTextConfig(HFConfig):
    """The family config filled from MaxText keys: its errors name the MaxText key, and experts are
    stacked as MaxText holds them."""

    stacked_experts = True

    def error(self, key, rule, value=None):
        return ConfigError(rule, file=self.path, key_path=_KEYMAP.get(key, key), value=value)


def read_model_file(path):
    """The keys of a MaxText model file (YAML, a mapping)."""
    from ...inputs.config import load_yaml

    doc = load_yaml(path, what="MaxText model file")
    if not isinstance(doc, dict):
        raise ConfigError("is not a MaxText model file (not a mapping of keys)", file=path)
    return doc


def _checked(keys, file):
    """*keys* over base.yml's defaults, every key known and every read value in range."""
    for key in keys:
        if not isinstance(key, str) or key_kind(key) is None:
            raise ConfigError("is not a MaxText model key the importer knows (it reads the model keys of base.yml "
                              "and configs/models/*.yml; docs/maxtext-models.md)", file=file, key_path=str(key))
    merged = {**BASE_DEFAULTS, **keys}
    for key, (kind, low) in _SIZES.items():
        value = merged[key]
        high = IMPORT_MAX[kind][0] if kind in IMPORT_MAX else 2**24
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"must be a whole number in [{low}, {high:,}]", file=file, key_path=key, value=value)
    for key in _FLAGS:
        if not isinstance(merged[key], bool):
            raise ConfigError("must be true or false", file=file, key_path=key, value=merged[key])
    rate = merged["dropout_rate"]
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        raise ConfigError("must be a probability in [0, 1]", file=file, key_path="dropout_rate", value=rate)
    scale = merged["global_parameter_scale"]
    if scale & (scale - 1):
        raise ConfigError("must be a power of two (MaxText's rule: finer sizes are set with the base_* keys)",
                          file=file, key_path="global_parameter_scale", value=scale)
    acts = merged["mlp_activations"]
    if not isinstance(acts, list) or not 1 <= len(acts) <= 2 or not all(isinstance(a, str) for a in acts):
        raise ConfigError("must be a list of one or two activation names", file=file, key_path="mlp_activations",
                          value=acts)
    return merged


def _refuse_block_and_features(keys, file):
    """The decoder block and features the builders do not express, refused before anything else."""
    block = keys.get("decoder_block", BASE_DEFAULTS["decoder_block"])
    if not isinstance(block, str):
        raise ConfigError("must be a decoder block's name", file=file, key_path="decoder_block", value=block)
    if block in REFUSED_BLOCKS:
        raise ConfigError(f"is a decoder block the importer does not build: {REFUSED_BLOCKS[block]}", file=file,
                          key_path="decoder_block", value=block)
    if block not in BLOCKS:
        raise ConfigError(f"is not a MaxText decoder block the importer knows (it builds {', '.join(BLOCKS)})",
                          file=file, key_path="decoder_block", value=block)
    for key, (default, why) in REFUSED_FEATURES.items():
        value = keys.get(key, default)
        off = value == default or (default in (0, -1) and not isinstance(default, bool) and value in (0, -1))
        if not off:
            raise ConfigError(f"is not MaxText's default {json.dumps(default)}: {why}", file=file, key_path=key,
                              value=value)
    return block


def _refuse_flags(merged, block, file):
    """Flags whose value on *block* builds tensors the importer does not."""
    for key, needed in BLOCK_FLAGS.get(block, {}).items():
        if merged[key] != needed:
            raise ConfigError(f"must be {json.dumps(needed)} for decoder_block {block} (the importer builds its "
                              "models' tensors; this value changes them)", file=file, key_path=key, value=merged[key])
    if merged["attention_type"] != "global" and block != "deepseek":
        raise ConfigError(f"is not 'global': decoder_block {block} with another attention is not built",
                          file=file, key_path="attention_type", value=merged["attention_type"])
    if merged["enable_dropout"] and merged["dropout_rate"]:
        raise ConfigError("is above 0 with enable_dropout: dropout's masks are not in the activation estimate of "
                          "MaxText's blocks", file=file, key_path="dropout_rate", value=merged["dropout_rate"])
    gated = 1 if block == "gpt3" else 2
    if len(merged["mlp_activations"]) != gated:
        raise ConfigError(f"must name {gated} activation(s) for decoder_block {block} (a "
                          f"{'plain' if gated == 1 else 'gated'} MLP)", file=file, key_path="mlp_activations",
                          value=merged["mlp_activations"])
    moe = block in ("mixtral", "qwen3_moe", "deepseek", "llama4", "gpt_oss", "envy")
    for key, refused in (("routed_bias", moe and block not in ("deepseek", "gpt_oss")),
                         ("mlp_bias", moe and block != "gpt_oss"), ("attention_sink", block != "gpt_oss")):
        if refused and merged[key]:
            raise ConfigError(f"is true: decoder_block {block} with it has tensors the importer does not build",
                              file=file, key_path=key, value=True)


def maxtext_dims(keys, *, file=None):
    """MaxText's effective sizes of *keys* (model keys over base.yml's defaults): ``emb_dim``,
    ``num_query_heads``, ``num_kv_heads``, ``mlp_dim``, ``moe_mlp_dim``, ``num_decoder_layers`` as
    ``global_parameter_scale`` scales them, with the merged keys."""
    merged = _checked(keys, file)
    b, r = divmod(int(math.log2(merged["global_parameter_scale"])), 3)
    heads_s, emb_s = b + int(r > 0), b + int(r > 1)
    dims = {"emb_dim": 2**emb_s * merged["base_emb_dim"], "num_query_heads": 2**heads_s * merged["base_num_query_heads"],
            "num_kv_heads": 2**heads_s * merged["base_num_kv_heads"], "mlp_dim": 2**heads_s * merged["base_mlp_dim"],
            "moe_mlp_dim": 2**heads_s * merged["base_moe_mlp_dim"],
            "num_decoder_layers": 2**b * merged["base_num_decoder_layers"]}
    for key, kind in (("emb_dim", "width"), ("num_query_heads", "heads"), ("mlp_dim", "ff"),
                      ("num_decoder_layers", "layers")):
        if dims[key] > IMPORT_MAX[kind][0]:
            raise ConfigError(f"gives {key} {dims[key]:,}, over the importer's limit of {IMPORT_MAX[kind][0]:,}",
                              file=file, key_path="global_parameter_scale", value=merged["global_parameter_scale"])
    return dims, merged


def maxtext_config(keys, *, file=None):
    """``(family, MaxTextConfig)``: the decoder family that builds *keys*' model and its config."""
    if not isinstance(keys, dict):
        raise ConfigError("must be a mapping of MaxText keys", file=file, key_path="keys", value=type(keys).__name__)
    block = _refuse_block_and_features(keys, file)
    dims, m = maxtext_dims(keys, file=file)
    _refuse_flags(m, block, file)
    layers = dims["num_decoder_layers"] * (2 if block == "gemma2" else 1)  # a local and a global layer each
    doc = {"hidden_size": dims["emb_dim"], "num_hidden_layers": layers, "num_attention_heads": dims["num_query_heads"],
           "num_key_value_heads": dims["num_kv_heads"], "head_dim": m["head_dim"], "intermediate_size": dims["mlp_dim"],
           "vocab_size": m["vocab_size"], "tie_word_embeddings": m["logits_via_embedding"]}
    experts = {"num_local_experts": m["num_experts"], "num_experts_per_tok": m["num_experts_per_tok"]}
    moe_ff = {"moe_intermediate_size": dims["moe_mlp_dim"]}
    window = {"sliding_window": m["sliding_window_size"]} if m["sliding_window_size"] > 0 else {}
    family = {"llama2": "llama", "mistral": "mistral", "gemma": "gemma", "qwen3": "qwen3"}.get(block)
    if block == "mixtral":  # its experts are mlp_dim wide (mixtral.py)
        family, doc = "mixtral", {**doc, **experts}
    elif block in ("gemma2", "gemma3"):
        family = "gemma2" if block == "gemma2" else "gemma3_text"
        caps = {k: m[mk] for k, mk in (("attn_logit_softcapping", "attn_logits_soft_cap"),
                                       ("final_logit_softcapping", "final_logits_soft_cap")) if m[mk]}
        doc = {**doc, **window, **caps}
    elif block == "qwen2":  # q, k, v biases with attention_bias (none on o: attentions.py, is_qwen2)
        family = "qwen2" if m["attention_bias"] else "llama"
    elif block == "qwen3_moe":
        family, doc = "qwen3_moe", {**doc, **moe_ff, "num_experts": m["num_experts"],
                                    "num_experts_per_tok": m["num_experts_per_tok"]}
    elif block == "gpt_oss":  # experts mlp_dim wide (gpt_oss.py)
        family, doc = "gpt_oss", {**doc, **experts, **window, "attention_bias": True, "mlp_bias": True}
    elif block == "olmo3":
        family, doc = "olmo3", {**doc, **window, "attention_bias": m["attention_bias"]}
    elif block == "envy":
        family, doc = "envy", {**doc, **experts, **moe_ff, "interleave_moe_layer_step": m["interleave_moe_layer_step"]}
    elif block == "llama4":  # routed and shared experts moe_mlp_dim wide, dense layers mlp_dim
        family = "llama4_text"
        doc = {**doc, **experts, "intermediate_size": dims["moe_mlp_dim"], "intermediate_size_mlp": dims["mlp_dim"],
               "interleave_moe_layer_step": m["interleave_moe_layer_step"],
               "nope_layer_interval": max(m["nope_layer_interval"], 0)}
        if m["chunk_attn_window_size"] > 0:
            doc["attention_chunk_size"] = m["chunk_attn_window_size"]
    elif block == "deepseek":
        family = "deepseek_v3" if m["routed_bias"] else "deepseek_v2"
        doc = {**doc, **moe_ff, "n_routed_experts": m["num_experts"], "n_shared_experts": m["shared_experts"],
               "num_experts_per_tok": m["num_experts_per_tok"], "first_k_dense_replace": m["first_num_dense_layers"],
               **{k: m[k] for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")}}
        if m["q_lora_rank"]:
            doc["q_lora_rank"] = m["q_lora_rank"]
    elif block == "gpt3":  # GPT-2's blocks: LayerNorms with bias, fused QKV with bias, learned positions, tied
        if dims["num_query_heads"] * m["head_dim"] != dims["emb_dim"] or dims["num_kv_heads"] != dims["num_query_heads"]:
            raise ConfigError(f"x base_num_query_heads must be base_emb_dim ({dims['emb_dim']}) with as many KV heads "
                              "for decoder_block gpt3", file=file, key_path="head_dim", value=m["head_dim"])
        if m["trainable_position_size"] <= 0:
            raise ConfigError("must be > 0 for decoder_block gpt3 (its learned positions)", file=file,
                              key_path="trainable_position_size", value=m["trainable_position_size"])
        family = "gpt2"
        doc = {"n_embd": dims["emb_dim"], "n_layer": layers, "n_head": dims["num_query_heads"],
               "n_inner": dims["mlp_dim"], "vocab_size": m["vocab_size"],
               "n_positions": m["trainable_position_size"], "attn_pdrop": 0.0, "resid_pdrop": 0.0}
    cfg = MaxTextConfig(doc, file)
    return family, cfg


def maxtext_document(keys, *, file=None, sequence_length=None, name=None, source=None):
    """The workload document of a MaxText model: *keys* are a model file's (or a run's model keys;
    ``{}`` is MaxText's default model), *file* the file they came from (errors name it),
    *sequence_length* overrides ``max_target_length``, *name* defaults to ``model_name`` or the file's stem."""
    from .hf_deepseek import deepseek_v2
    from .hf_decoder import decoder
    from .hf_families import BUILDERS
    from .document import build_document

    family, cfg = maxtext_config(keys, file=file)
    block = {**BASE_DEFAULTS, **keys}["decoder_block"]
    builder = {"gpt2": BUILDERS["gpt2"], "deepseek_v2": deepseek_v2, "deepseek_v3": deepseek_v2}.get(family, decoder)
    if sequence_length:
        seq, why = sequence_length, None
    elif "max_target_length" in keys:
        seq, why = keys["max_target_length"], "max_target_length, the model file's"
    else:
        seq, why = BASE_DEFAULTS["max_target_length"], "max_target_length, MaxText's default (base.yml)"
    file = None if file is None else Path(file)
    name = name or keys.get("model_name") or (file.stem if file is not None else "default")
    where = source or (file.name if file is not None else "MaxText's default model (base.yml's base_* keys)")
    doc = build_document(
        cfg, family, builder, seq, why, name=name,
        config=f"{where}: MaxText decoder_block {block}, {MAXTEXT_SOURCE}",
        tensors=f"shapes as MaxText's {block} block builds them (src/maxtext/models/{block}.py, "
                f"src/maxtext/layers/), experts stacked per layer as MaxText holds them; named in the style of "
                f"the importer's {family} family")
    doc["description"] = (f"MaxText {name} ({block}): {cfg.doc.get('num_hidden_layers', cfg.doc.get('n_layer'))} "
                          f"layers, d {cfg.doc.get('hidden_size', cfg.doc.get('n_embd'))}, vocab "
                          f"{cfg.doc['vocab_size']}, sequence {seq} (imported)")
    doc["sources"]["dtypes"] = ("fp32 master weights, gradients and slots, bf16 activations: MaxText's "
                                "weight_dtype float32, grad_dtype float32, dtype bfloat16 (base.yml)")
    run = {k: v for k, v in keys.items() if key_kind(k) == "run"}
    if run:
        doc["sources"]["maxtext_run_keys"] = "; ".join(f"{k} {v}" for k, v in run.items())
    return doc


def maxtext_workload(keys, *, sequence_length=None, name=None, file=None):
    """The :class:`~wus_sim.model.workload.Workload` of MaxText model keys (:func:`maxtext_document`):
    what a run's ``global_parameter_scale`` and ``base_*`` keys describe, e.g.
    ``maxtext_workload({"global_parameter_scale": 8})`` for MaxText's default model at scale 8."""
    from .document import check_sequence_length
    from ..workload_files import workload_from_document

    check_sequence_length(sequence_length)
    return workload_from_document(maxtext_document(keys, file=file, sequence_length=sequence_length, name=name), None)


# ====================================================================== the library at a run's length
LIBRARY_DIR = Path(__file__).resolve().parents[2] / "data" / "maxtext" / "models"
"""MaxText's model files (``src/maxtext/configs/models/NAME.yml``, keys only; the folder's README)."""

DEFAULT_MODEL = "default"
"""MaxText's name of the model a run trains without ``model_name``: base.yml's ``base_*`` keys."""

_AT = re.compile(r"([^@/\\]+)@([0-9]+)")


def library_models():
    """The names of MaxText's library models (its model files, and ``default``), sorted."""
    return sorted({DEFAULT_MODEL, *(p.stem for p in LIBRARY_DIR.glob("*.yml"))})


def split_length(spec):
    """``(name, tokens)`` of a workload spec ``NAME@TOKENS``; ``(spec, None)`` for any other spec."""
    if not isinstance(spec, str) or "@" not in spec or spec.endswith((".yaml", ".yml")):
        return spec, None
    m = _AT.fullmatch(spec)
    if m is None:
        raise ConfigError("must be NAME@TOKENS (a MaxText library model and its tokens per sequence, e.g. "
                          "llama3.1-8b@8192)", key_path="workload", value=spec)
    return m[1], int(m[2])


def library_workload(name, tokens):
    """MaxText's library model *name* built at *tokens* tokens per sequence, named ``NAME@TOKENS``:
    the model file's tensors (so its parameter count), with everything that depends on the
    sequence (attention's FLOPs and scores, activation memory, tokens per example) at *tokens*."""
    from .document import check_sequence_length

    try:
        check_sequence_length(tokens)
    except ConfigError as exc:
        raise ConfigError(exc.rule, key_path="workload", value=f"{name}@{tokens}") from None
    if name not in library_models():
        from ...inputs.errors import UnknownNameError

        raise UnknownNameError("MaxText library model", name, library_models())
    return _REBUILT.get((), (name, tokens), lambda: _build(name, tokens))


_REBUILT = IdentityMemo(maxsize=16)
"""Rebuilt workloads by (model, tokens): a sweep's points name the same few (a Workload is frozen)."""


def _build(name, tokens):
    from ..workload_files import workload_from_document

    if name == DEFAULT_MODEL:
        keys, path, source = {}, None, None
    else:
        path = LIBRARY_DIR / f"{name}.yml"
        keys, source = read_model_file(path), f"src/maxtext/configs/models/{name}.yml"
    doc = maxtext_document(keys, file=path, sequence_length=tokens, name=f"{name}@{tokens}", source=source)
    doc["sources"]["sequence"] = (f"{tokens} tokens: the run's max_target_length; {name} rebuilt from MaxText's model "
                                  "file at it (wus_sim/data/maxtext/models/)")
    return workload_from_document(doc, None)


def resolve_workload(name_or_path):
    """A :class:`~wus_sim.model.workload.Workload` from a shipped name (``'transformer-big'``), a path
    to YAML, a loaded Workload (as :func:`~wus_sim.model.workload_files.load_workload` reads them),
    or ``NAME@TOKENS``: MaxText's library model NAME rebuilt at TOKENS tokens per sequence
    (:func:`library_workload`, e.g. ``'llama3.1-8b@8192'``). ``wus_sim.load_workload`` is this."""
    from ..workload_files import load_workload

    name, tokens = split_length(name_or_path)
    if tokens is None:
        return load_workload(name_or_path)
    return library_workload(name, tokens)
