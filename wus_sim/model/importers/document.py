"""The workload document an import builds from a family's config (:func:`build_document`): tensors,
layers and FLOPs from the family's builder, activation terms, dtypes and sources, for the Hugging
Face import (:mod:`.importers`) and the MaxText one (:mod:`.maxtext_model`) alike. What is counted
and why: :mod:`.importers`.
"""

import math
from pathlib import Path

from ...inputs.errors import ConfigError

from .hf_families import activation_terms

__all__ = ["build_document", "check_sequence_length", "HF_MODELING", "CITE_FLOPS", "CITE_ACTIVATIONS"]

HF_MODELING = "github.com/huggingface/transformers, src/transformers/models/{t}/modeling_{t}.py"
CITE_FLOPS = ("matmuls 2 x MACs per token; attention 4 x s x heads x head_dim per token per layer, "
              "counted in full as in Chowdhery et al. 2022 (PaLM, arXiv 2204.02311, appendix B)")
CITE_ACTIVATIONS = ("Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer "
                    "Models', arXiv 2205.05198, sec. 4.1 (per layer 34 h + 5 a s bytes per token for "
                    "GPT-style blocks), generalised to the block's widths; fused attention keeps a "
                    "log-sum-exp per head instead of the probabilities: Dao et al. 2022 (FlashAttention, "
                    "arXiv 2205.14135)")


def build_document(cfg, family, builder, seq, seq_why, *, name, config, tensors=None, match=None):
    """The workload document of *cfg* (an :class:`~.hf_families.HFConfig`) built by *builder* as
    *family* at *seq* tokens a sequence: *seq_why* says why that length (None: it was asked for),
    *config* where the config came from, *tensors* where the tensors' names and shapes come from
    (default: the family's ``transformers`` module); *match*, given the built model, replaces its
    tensors by a checkpoint's and says where they came from."""
    config_path = cfg.path
    model, widths, notes = builder(cfg, family, seq)
    stacks = widths if isinstance(widths, list) else [widths]
    units = notes.get("units", seq)

    sources = {"config": config,
               "tensors": tensors or "names and shapes as in " + HF_MODELING.format(t=family),
               "fwd_flops": CITE_FLOPS, "activations": CITE_ACTIVATIONS,
               "dtypes": "fp32 master weights, gradients and slots, bf16 activations (mixed-precision training); "
                         f"checkpoint dtype {cfg.doc.get('torch_dtype', 'not stated')}"}
    if seq_why:  # a length asked for needs no reason
        sources["sequence"] = f"{seq:,} tokens per sequence: {seq_why}"
    if model.notes:
        sources["notes"] = "; ".join(model.notes)
    if match is not None:
        sources["tensors"] = match(model)
    params = sum(math.prod(t[1]) for t in model.tensors)
    per_token = sum(f for _, f in model.layers)
    tied = "tied to the input embedding" if notes["tied"] else "untied"
    window = f", sliding window {notes['window']}" if notes.get("window") else ""
    unit = notes.get("unit", "token")
    counts = (f"matmuls (2 x MACs per token) and attention scores + weighted sum at sequence length {seq}"
              f"{window} (4 s heads head_dim per token per layer, not halved for causal masking); output head "
              f"{tied}")
    if family == "bert":
        counts += (f"; the MLM head on {notes['masked']} masked positions and the pooler / NSP head on one "
                   "token per sequence, spread per token")
    counts += "; norms, softmax, activations and embedding lookups not counted"
    if model.notes:
        counts += "; " + "; ".join(model.notes)
    doc = {
        "name": name,
        "description": f"{family} from {Path(config_path or 'keys').name}: {sum(w['layers'] for w in stacks)} layers, d "
                       f"{stacks[0]['h']}, {stacks[0]['heads']} heads, "
                       + (f"{notes['labels']} classes" if "labels" in notes else f"vocab {stacks[0]['vocab']}")
                       + f", sequence {seq} (imported)",
        "params": params,
        "fwd_flops": {"per_unit": per_token, "unit": unit, "units_per_example": units,
                      "example_unit": notes.get("example_unit", "sequence"), "counts": counts},
        "activation_memory": activation_terms(widths, seq),
        "dtypes": {"weights": "float32", "gradients": "float32", "slots": "float32", "activations": "bfloat16"},
        "default_optimizer": "lamb" if family == "bert" else "adamw",
        "default_per_replica_batch": 1,
        "mlperf_v06_tpu": [],
        "sources": sources,
        # GPT-2's Conv1D stores [in, out]; every other family's nn.Linear [out, in]
        "dense_layout": "in_out" if family == "gpt2" else "out_in",
        "layers": model.layers,
        # without attention dropout the families' TPU training code runs fused (flash) attention, as
        # the activation estimate above assumes: the scores never go through HBM
        "attention": [{**a, "fused": True} if not any(s.get("attention_dropout") for s in stacks) else a
                      for a in model.attention],
        "tensors": model.tensors,
    }
    return doc


def check_sequence_length(sequence_length):
    """Refuse a *sequence_length* that is not None or a whole number in [1, 2^24]."""
    if sequence_length is not None and (isinstance(sequence_length, bool) or not isinstance(sequence_length, int)
                                        or sequence_length < 1 or sequence_length > 2**24):
        raise ConfigError("must be a whole number in [1, 16777216]", key_path="sequence_length",
                          value=sequence_length)
