"""The Hugging Face model families :mod:`wus_sim.model.importers.importers` reads: for each ``model_type``,
the trainable tensors (names and shapes as the family's ``transformers`` module
``modeling_<type>.py`` gives them, in forward order), layers with forward FLOPs per token, and the
block widths the activation terms come from. What is counted and why: the importer's docstring.
"""

from ...inputs.errors import ConfigError
from ...inputs.limits import IMPORT_MAX, MAX_CHECKPOINT_TENSORS

from .hf_decoder import decoder
from .hf_deepseek import deepseek_v2
from .hf_model import HFModel, encoder_widths
from .hf_t5 import t5
from .hf_vit import vit, vit_tokens

__all__ = ["FAMILIES", "BUILDERS", "CONFIG_KEYS", "DEFAULT_SEQUENCE_TOKENS", "HFConfig", "activation_terms",
           "bert_masked_positions", "check_family", "default_sequence"]

FAMILIES = ("llama", "mistral", "qwen2", "gemma", "gemma2", "phi3", "mixtral", "deepseek_v2", "gpt2", "gpt_neox",
            "bert", "t5", "vit")
"""``model_type`` values the importer reads."""


# ==================================================================== config reading
SIZE_KINDS = {"hidden_size": "width", "n_embd": "width", "head_dim": "width", "intermediate_size": "ff",
              "n_inner": "ff", "num_hidden_layers": "layers", "n_layer": "layers", "num_attention_heads": "heads",
              "num_key_value_heads": "heads", "n_head": "heads", "vocab_size": "vocab", "type_vocab_size": "vocab",
              "max_position_embeddings": "positions", "n_positions": "positions", "sliding_window": "positions",
              # T5
              "d_model": "width", "d_kv": "width", "d_ff": "ff", "num_heads": "heads", "num_layers": "layers",
              "num_decoder_layers": "layers", "relative_attention_num_buckets": "buckets",
              # mixtures of experts and DeepSeek's latent attention
              "num_local_experts": "experts", "n_routed_experts": "experts", "n_shared_experts": "experts",
              "num_experts_per_tok": "experts", "moe_intermediate_size": "ff", "first_k_dense_replace": "layers",
              "moe_layer_freq": "layers", "kv_lora_rank": "rank", "q_lora_rank": "rank",
              "qk_nope_head_dim": "width", "qk_rope_head_dim": "width", "v_head_dim": "width",
              # ViT
              "image_size": "image", "patch_size": "image", "num_channels": "width", "num_labels": "labels"}
"""The kind of limit (:data:`wus_sim.inputs.limits.IMPORT_MAX`) of each size key a family reads."""

ZERO_ALLOWED = ("type_vocab_size", "n_shared_experts", "first_k_dense_replace")
"""Size keys for which 0 means "none" (no token types, no shared expert, no dense layers first);
every other count, LoRA ranks too, is at least 1 (a null ``q_lora_rank`` is "no compression")."""


class HFConfig:
    """A config.json's mapping with errors that name the file and the key."""

    def __init__(self, doc, path):
        self.doc, self.path = doc, path

    def error(self, key, rule, value=None):
        return ConfigError(rule, file=self.path, key_path=key, value=value)

    def int(self, *keys, default=None, minimum=1):
        for key in keys:
            if key in self.doc and self.doc[key] is not None:
                value = self.doc[key]
                maximum, what = IMPORT_MAX.get(SIZE_KINDS.get(key), (None, ""))
                if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                    raise self.error(key, f"must be a whole number >= {minimum}"
                                          + (f" and <= {maximum:,}" if maximum else ""), value)
                if maximum is not None and value > maximum:
                    raise self.error(key, f"is over the importer's limit of {maximum:,} for {what}", value)
                return value
        if default is not None:
            return default
        raise self.error(keys[0], f"is missing (a {self.doc.get('model_type')} config needs it)")

    def number(self, key, default):
        """A dropout rate (a probability): in [0, 1]; other numbers go through :meth:`scale`."""
        return self._ranged(key, default, 1, "must be a probability in [0, 1]")

    def scale(self, key, default):
        """A non-negative finite number that is not a rate (a logit soft-capping scale): in [0, 10^6]."""
        return self._ranged(key, default, 1e6, "must be a number in [0, 1000000]")

    def _ranged(self, key, default, high, rule):
        value = self.doc.get(key, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
            raise self.error(key, rule, value)
        return float(value)

    def check_limits(self, family):
        """Every size and rate the family reads, checked before any tensor is built: a layer
        count of 10^9 is refused here, not after minutes of building (limits: IMPORT_MAX)."""
        for key, _default in CONFIG_KEYS[family]:
            if self.doc.get(key) is None:
                continue
            if key in SIZE_KINDS:
                self.int(key, minimum=0 if key in ZERO_ALLOWED else 1)
            elif key.endswith(("dropout", "pdrop", "_prob")):
                self.number(key, 0.0)
            elif key in ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window"):
                self.flag(key, False)
        experts_key = next((k for k in ("num_local_experts", "n_routed_experts") if self.doc.get(k)), None)
        layers = self.doc.get("num_hidden_layers")
        if experts_key and layers and 3 * layers * self.doc[experts_key] > MAX_CHECKPOINT_TENSORS:
            # three weights an expert a layer: the product, not either count, is what an import builds
            raise self.error(experts_key, f"x num_hidden_layers ({layers:,}) x 3 weights is "
                                          f"{3 * layers * self.doc[experts_key]:,} expert tensors, over the importer's "
                                          f"limit of {MAX_CHECKPOINT_TENSORS:,} tensors", self.doc[experts_key])
        arch = self.doc.get("architectures")
        if arch is not None and (not isinstance(arch, list) or not all(isinstance(a, str) for a in arch)):
            raise self.error("architectures", "must be a list of class names", arch)

    def flag(self, key, default):
        value = self.doc.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "must be true or false", value)
        return value


# ==================================================================== architectures
_Model = HFModel


def _gpt2(cfg, family, seq):
    """GPT-2: learned positions, LayerNorm with bias, GELU MLP, Conv1D weights stored [in, out],
    output head tied to the token embedding (GPT2LMHeadModel ties it)."""
    h = cfg.int("n_embd")
    n_layers = cfg.int("n_layer")
    heads = cfg.int("n_head")
    if h % heads:
        raise cfg.error("n_head", f"must divide n_embd ({h})", heads)
    ff = cfg.int("n_inner", default=4 * h)
    vocab = cfg.int("vocab_size")
    positions = cfg.int("n_positions")
    if seq > positions:
        raise cfg.error("n_positions", f"is below the sequence length {seq}: the model has no position beyond "
                        f"it; ask for --sequence-length {positions} or less", positions)
    m = _Model()
    emb = m.layer("transformer.wte")
    m.add(emb, "transformer.wte.weight", vocab, h)
    m.add(emb, "transformer.wpe.weight", positions, h)
    for i in range(n_layers):
        p = f"transformer.h.{i}"
        attn = m.layer(f"{p}.attn", 2 * 4 * h * h + 4 * seq * h)
        m.attend(attn, heads, h // heads, seq, seq, causal=True)
        m.add(attn, f"{p}.ln_1.weight", h)
        m.add(attn, f"{p}.ln_1.bias", h)
        m.add(attn, f"{p}.attn.c_attn.weight", h, 3 * h)
        m.add(attn, f"{p}.attn.c_attn.bias", 3 * h)
        m.add(attn, f"{p}.attn.c_proj.weight", h, h)
        m.add(attn, f"{p}.attn.c_proj.bias", h)
        mlp = m.layer(f"{p}.mlp", 2 * 2 * h * ff)
        m.add(mlp, f"{p}.ln_2.weight", h)
        m.add(mlp, f"{p}.ln_2.bias", h)
        m.add(mlp, f"{p}.mlp.c_fc.weight", h, ff)
        m.add(mlp, f"{p}.mlp.c_fc.bias", ff)
        m.add(mlp, f"{p}.mlp.c_proj.weight", ff, h)
        m.add(mlp, f"{p}.mlp.c_proj.bias", h)
    head = m.layer("lm_head", 2 * h * vocab)
    m.add(head, "transformer.ln_f.weight", h)
    m.add(head, "transformer.ln_f.bias", h)
    m.tied["lm_head.weight"] = "transformer.wte.weight"
    shape = dict(h=h, heads=heads, head_dim=h // heads, q_dim=h, kv_dim=h, ff=ff, gated=False, layers=n_layers,
                 ctx=seq, attention_dropout=cfg.number("attn_pdrop", 0.1) > 0,
                 hidden_dropout=cfg.number("resid_pdrop", 0.1) > 0, vocab=vocab, predicted=seq)
    return m, shape, dict(tied=True, window=None)


def _gpt_neox(cfg, family, seq):
    """GPT-NeoX (Pythia): fused QKV with bias, LayerNorm with bias, GELU MLP, rotary positions."""
    h, n_layers, heads, ff = encoder_widths(cfg)
    vocab = cfg.int("vocab_size")
    tied = cfg.flag("tie_word_embeddings", False)
    bias = cfg.flag("attention_bias", True)
    m = _Model()
    emb = m.layer("gpt_neox.embed_in")
    m.add(emb, "gpt_neox.embed_in.weight", vocab, h)
    for i in range(n_layers):
        p = f"gpt_neox.layers.{i}"
        attn = m.layer(f"{p}.attention", 2 * 4 * h * h + 4 * seq * h)
        m.attend(attn, heads, h // heads, seq, seq, causal=True)
        m.add(attn, f"{p}.input_layernorm.weight", h)
        m.add(attn, f"{p}.input_layernorm.bias", h)
        m.add(attn, f"{p}.attention.query_key_value.weight", 3 * h, h)
        if bias:
            m.add(attn, f"{p}.attention.query_key_value.bias", 3 * h)
        m.add(attn, f"{p}.attention.dense.weight", h, h)
        if bias:
            m.add(attn, f"{p}.attention.dense.bias", h)
        mlp = m.layer(f"{p}.mlp", 2 * 2 * h * ff)
        m.add(mlp, f"{p}.post_attention_layernorm.weight", h)
        m.add(mlp, f"{p}.post_attention_layernorm.bias", h)
        m.add(mlp, f"{p}.mlp.dense_h_to_4h.weight", ff, h)
        m.add(mlp, f"{p}.mlp.dense_h_to_4h.bias", ff)
        m.add(mlp, f"{p}.mlp.dense_4h_to_h.weight", h, ff)
        m.add(mlp, f"{p}.mlp.dense_4h_to_h.bias", h)
    head = m.layer("embed_out", 2 * h * vocab)
    m.add(head, "gpt_neox.final_layer_norm.weight", h)
    m.add(head, "gpt_neox.final_layer_norm.bias", h)
    if tied:
        m.tied["embed_out.weight"] = "gpt_neox.embed_in.weight"
    else:
        m.add(head, "embed_out.weight", vocab, h)
    shape = dict(h=h, heads=heads, head_dim=h // heads, q_dim=h, kv_dim=h, ff=ff, gated=False, layers=n_layers,
                 ctx=seq, attention_dropout=cfg.number("attention_dropout", 0.0) > 0,
                 hidden_dropout=cfg.number("hidden_dropout", 0.0) > 0, vocab=vocab, predicted=seq)
    return m, shape, dict(tied=tied, window=None)


def bert_masked_positions(seq):
    """Masked positions per sequence the MLM head predicts: 15 % of the tokens, rounded down
    (76 at 512 tokens: MLPerf BERT's max_predictions_per_seq; Devlin et al. 2019 mask 15 %)."""
    return max(1, int(seq * 0.15))


def _bert(cfg, family, seq):
    """BERT with its pre-training heads (BertForPreTraining: masked LM tied to the word
    embedding, next-sentence prediction), or without NSP for BertForMaskedLM."""
    h, n_layers, heads, ff = encoder_widths(cfg)
    vocab = cfg.int("vocab_size")
    positions = cfg.int("max_position_embeddings")
    types = cfg.int("type_vocab_size", default=2)
    if seq > positions:
        raise cfg.error("max_position_embeddings", f"is below the sequence length {seq}: the model has no "
                        f"position beyond it; ask for --sequence-length {positions} or less", positions)
    arch = (cfg.doc.get("architectures") or ["BertForPreTraining"])[0]
    nsp = arch != "BertForMaskedLM"
    masked = bert_masked_positions(seq)
    m = _Model()
    emb = m.layer("bert.embeddings")
    m.add(emb, "bert.embeddings.word_embeddings.weight", vocab, h)
    m.add(emb, "bert.embeddings.position_embeddings.weight", positions, h)
    m.add(emb, "bert.embeddings.token_type_embeddings.weight", types, h)
    m.add(emb, "bert.embeddings.LayerNorm.weight", h)
    m.add(emb, "bert.embeddings.LayerNorm.bias", h)
    for i in range(n_layers):
        p = f"bert.encoder.layer.{i}"
        attn = m.layer(f"{p}.attention", 2 * 4 * h * h + 4 * seq * h)
        m.attend(attn, heads, h // heads, seq, seq)
        for proj in ("query", "key", "value"):
            m.add(attn, f"{p}.attention.self.{proj}.weight", h, h)
            m.add(attn, f"{p}.attention.self.{proj}.bias", h)
        m.add(attn, f"{p}.attention.output.dense.weight", h, h)
        m.add(attn, f"{p}.attention.output.dense.bias", h)
        m.add(attn, f"{p}.attention.output.LayerNorm.weight", h)
        m.add(attn, f"{p}.attention.output.LayerNorm.bias", h)
        inter = m.layer(f"{p}.intermediate", 2 * h * ff)
        m.add(inter, f"{p}.intermediate.dense.weight", ff, h)
        m.add(inter, f"{p}.intermediate.dense.bias", ff)
        out = m.layer(f"{p}.output", 2 * h * ff)
        m.add(out, f"{p}.output.dense.weight", h, ff)
        m.add(out, f"{p}.output.dense.bias", h)
        m.add(out, f"{p}.output.LayerNorm.weight", h)
        m.add(out, f"{p}.output.LayerNorm.bias", h)
    if nsp:
        pool = m.layer("bert.pooler", 2 * h * h / seq)  # the first token of each sequence
        m.add(pool, "bert.pooler.dense.weight", h, h)
        m.add(pool, "bert.pooler.dense.bias", h)
    mlm = m.layer("cls.predictions", 2 * (h * h + h * vocab) * masked / seq)
    m.add(mlm, "cls.predictions.transform.dense.weight", h, h)
    m.add(mlm, "cls.predictions.transform.dense.bias", h)
    m.add(mlm, "cls.predictions.transform.LayerNorm.weight", h)
    m.add(mlm, "cls.predictions.transform.LayerNorm.bias", h)
    m.add(mlm, "cls.predictions.bias", vocab)
    m.tied["cls.predictions.decoder.weight"] = "bert.embeddings.word_embeddings.weight"
    m.tied["cls.predictions.decoder.bias"] = "cls.predictions.bias"
    if nsp:
        ns = m.layer("cls.seq_relationship", 2 * 2 * h / seq)
        m.add(ns, "cls.seq_relationship.weight", 2, h)
        m.add(ns, "cls.seq_relationship.bias", 2)
    shape = dict(h=h, heads=heads, head_dim=h // heads, q_dim=h, kv_dim=h, ff=ff, gated=False, layers=n_layers,
                 ctx=seq, attention_dropout=cfg.number("attention_probs_dropout_prob", 0.1) > 0,
                 hidden_dropout=cfg.number("hidden_dropout_prob", 0.1) > 0, vocab=vocab, predicted=masked,
                 post_norm=True)
    return m, shape, dict(tied=True, window=None, masked=masked, architecture=arch)


BUILDERS = {"llama": decoder, "mistral": decoder, "qwen2": decoder, "gemma": decoder, "gemma2": decoder,
            "phi3": decoder, "mixtral": decoder, "deepseek_v2": deepseek_v2, "gpt2": _gpt2, "gpt_neox": _gpt_neox,
            "bert": _bert, "t5": t5, "vit": vit}

DEFAULT_SEQUENCE_TOKENS = 4096
"""The sequence length an import uses unless told: min(the config's context, 4,096). 4,096 is
the pre-training context of Llama 2 (Touvron et al. 2023, arXiv 2307.09288, sec. 2.2) and
Mistral 7B's attention window (Jiang et al. 2023, arXiv 2310.06825); configs state their longest
context instead (Qwen2-7B: 131,072; DeepSeek-V2-Lite: 163,840), which pre-training reaches only
in a short final stage if at all (Llama 3 pre-trains at 8,192 and extends the context at the end:
Dubey et al. 2024, arXiv 2407.21783, sec. 3.4) and whose activations fill no accelerator's HBM at
batch 1. ``--sequence-length`` asks for another."""


def default_sequence(cfg, family):
    """``(tokens, why)``: the sequence length an import of *cfg* uses unless told."""
    if family == "vit":
        n = vit_tokens(cfg)
        return n, f"{n - 1} patches + the class token (image_size / patch_size squared + 1)"
    key = {"gpt2": "n_positions", "t5": "n_positions"}.get(family, "max_position_embeddings")
    if family == "t5" and key not in cfg.doc:  # relative positions: no limit in the model
        return 512, "T5's pre-training input length (Raffel et al. 2020, sec. 3.1.2); the config states none"
    context = cfg.int(key)
    n = min(context, DEFAULT_SEQUENCE_TOKENS)
    return n, f"min({key} {context:,}, {DEFAULT_SEQUENCE_TOKENS:,}) (the importer's default; --sequence-length sets it)"


# Config fields only one family has: a config that has them under another model_type would be
# imported as that other family with its tensors silently dropped.
_OWN_FIELDS = {
    "gemma2": ("attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"),
    "mixtral": ("num_local_experts",),
    "deepseek_v2": ("kv_lora_rank", "n_routed_experts", "qk_rope_head_dim"),
    "t5": ("d_kv", "relative_attention_num_buckets"),
    "vit": ("patch_size", "image_size"),
}
_ARCHITECTURES = {"LlamaFor": "llama", "MistralFor": "mistral", "Qwen2For": "qwen2", "GemmaFor": "gemma",
                  "Gemma2For": "gemma2", "Phi3For": "phi3", "MixtralFor": "mixtral", "DeepseekV2For": "deepseek_v2",
                  "GPT2": "gpt2", "GPTNeoX": "gpt_neox", "BertFor": "bert", "T5For": "t5", "ViTFor": "vit"}


def check_family(cfg, family):
    """Refuse a config whose fields or architecture contradict its ``model_type`` (a Gemma-2 config
    relabelled ``gemma`` would lose its extra norms), naming the fields and the type to use."""
    for other, fields in _OWN_FIELDS.items():
        found = [f for f in fields if cfg.doc.get(f) is not None]
        if other != family and found:
            raise cfg.error("model_type", f"contradicts the config's {', '.join(found)}, which only {other} "
                                          f"configs have: importing it as {family} would drop what they describe; "
                                          f"set model_type to {other!r}", family)
    for arch in cfg.doc.get("architectures") or []:
        if not isinstance(arch, str):
            continue
        other = next((t for prefix, t in _ARCHITECTURES.items() if arch.startswith(prefix)), None)
        if other is not None and other != family:
            raise cfg.error("model_type", f"contradicts architectures {arch!r}, a {other} model: set model_type "
                                          f"to {other!r} (or fix architectures if the weights are {family}'s)",
                            family)


def activation_terms(s, seq):
    """Activation terms per example of *seq* tokens from the block widths *s* (see the module
    docstring): one for the layer stack, one for the loss; a list of widths (an encoder and a
    decoder) gives one term per stack and the loss of those that predict."""
    if isinstance(s, list):
        terms = [activation_terms(stack, seq) for stack in s]
        return [t for stack_terms, w in zip(terms, s) for t in stack_terms[:1 if not w["predicted"] else 2]]
    h, q, kv, ff, a = s["h"], s["q_dim"], s["kv_dim"], s["ff"], s["heads"]
    blocks, norms, copies = s.get("attn_blocks", 1), s.get("norms", 2), s.get("expert_copies", 1)
    qkv, o_in = s.get("qkv", q + 2 * kv), s.get("o_in", q)
    hidden = (3 if s["gated"] else 2) * ff  # gate, up, their product | fc1 output, its GELU
    each = "" if blocks == 1 else f"{blocks} attention blocks x "
    parts = [("QKV and MLP inputs 2 x 2h" if blocks == 1 else f"QKV ({blocks}) and MLP inputs 2 x {blocks + 1}h",
              2 * (blocks + 1) * h),
             (f"{each}Q, K, V 2 x (q_dim + 2 kv_dim)" if "qkv" not in s else f"{each}Q, K, V and latents 2 x {qkv}",
              2 * blocks * qkv),
             (f"{each}output projection input 2 q_dim" if "o_in" not in s else f"{each}output projection input "
              f"2 x {o_in}", 2 * blocks * o_in),
             (f"MLP hidden 2 x {hidden // ff} ff" if copies == 1 else
              f"MLP hidden of the {copies} active experts 2 x {hidden // ff} x {ff // copies}", 2 * hidden)]
    if copies > 1:
        parts.append((f"inputs dispatched to the {copies} active experts beyond the first 2 x {copies - 1}h",
                      2 * (copies - 1) * h))
    parts.append(("two norm inputs 2 x 2h" if norms == 2 else f"{norms} norm inputs 2 x {norms}h", 2 * norms * h))
    if s["hidden_dropout"]:
        parts.append(("two dropout masks 2 x h", 2 * h))
    if s["attention_dropout"]:
        parts.append((f"{each}attention probabilities, dropout mask and dropped copy 5 a s", 5 * blocks * a * s["ctx"]))
    else:
        parts.append((f"{each}fused attention: fp32 log-sum-exp 4 a", 4 * blocks * a))
    per_token = sum(b for _, b in parts)
    # remat selective keeps the layer input and the weight matmuls' outputs backward needs: Q, K, V
    # (attention is recomputed from them), the output projection's (the residual sum the second
    # norm differentiates is recomputed from it) and the MLP's first matmuls' (the activation
    # function is recomputed); not the MLP's last (no backward in the layer reads it) unless a
    # norm closes the layer
    up = (2 if s["gated"] else 1) * ff
    kept = [("input 2h", 2 * h),
            (f"{each}Q, K, V 2 x (q_dim + 2 kv_dim)" if "qkv" not in s else f"{each}Q, K, V and latents 2 x {qkv}",
             2 * blocks * qkv),
            (f"{each}output projection output 2h", 2 * blocks * h), (f"MLP up matmul outputs 2 x {up // ff} ff", 2 * up)]
    if s.get("post_norm"):  # BERT: the closing norm differentiates the sum the MLP's output enters
        kept.append(("MLP down output 2h (post-norm)", 2 * h))
    kept_per_token = sum(b for _, b in kept)
    stack = f"{s['stack']} " if s.get("stack") else ""
    terms = [dict(what=f"{stack}transformer layers: {s['layers']} x {seq} tokens x d {h}",
                  elements=s["layers"] * seq * h, bytes_per_element=per_token / h,
                  why=f"{per_token} B per token per layer / h, bf16: "
                      + "; ".join(f"{what} = {b}" for what, b in parts)
                      + " (Korthikanti et al. 2022, generalised; see sources). Remat selective keeps "
                      + f"{kept_per_token} B per token: " + "; ".join(f"{what} = {b}" for what, b in kept)
                      + " (MaxText remat_policy minimal)",
                  layers=s["layers"], selective_bytes_per_element=kept_per_token / h)]
    terms.append(dict(what=f"output logits: {s['predicted']} predicted positions x vocab {s['vocab']}",
                      elements=s["predicted"] * s["vocab"], bytes_per_element=6,
                      why="bf16 logits + fp32 log-softmax kept for the loss",
                      compiled_bytes_per_element=4,
                      compiled_why="fp32 logits (MaxText casts them, cast_logits_to_fp32: True in "
                                   "src/MaxText/configs/base.yml), the bf16 matmul output's convert fused into it; "
                                   "the loss's exp and log-softmax are elementwise on them, fused into its "
                                   "reductions and into the two matmuls backward feeds the logits' gradient to",
                      head=True))
    return terms


_DECODER_KEYS = (("hidden_size", None), ("intermediate_size", None), ("num_hidden_layers", None),
                 ("num_attention_heads", None), ("num_key_value_heads", "num_attention_heads"),
                 ("head_dim", "hidden_size / num_attention_heads"), ("vocab_size", None),
                 ("max_position_embeddings", "needed only without --sequence-length"),
                 ("attention_bias", "false (qwen2: biases on q, k, v always)"), ("mlp_bias", "false"),
                 ("attention_dropout", "0"))
CONFIG_KEYS = {
    "llama": _DECODER_KEYS + (("tie_word_embeddings", "false"),),
    "mistral": _DECODER_KEYS + (("tie_word_embeddings", "false"), ("sliding_window", "none: full attention")),
    "qwen2": _DECODER_KEYS + (("tie_word_embeddings", "false"), ("use_sliding_window", "false"),
                              ("sliding_window", "used only with use_sliding_window")),
    "gemma": _DECODER_KEYS + (("tie_word_embeddings", "true"),),
    "gemma2": _DECODER_KEYS + (("tie_word_embeddings", "true"), ("sliding_window", "none: full attention (on the "
                                                                                 "even-numbered layers only)"),
                               ("attn_logit_softcapping", "none (noted, not counted)"),
                               ("final_logit_softcapping", "none (noted, not counted)")),
    "phi3": _DECODER_KEYS + (("tie_word_embeddings", "false"), ("sliding_window", "none: full attention")),
    "mixtral": _DECODER_KEYS + (("tie_word_embeddings", "false"), ("sliding_window", "none: full attention"),
                                ("num_local_experts", None), ("num_experts_per_tok", "2")),
    "deepseek_v2": (("hidden_size", None), ("intermediate_size", None), ("moe_intermediate_size", None),
                    ("num_hidden_layers", None), ("num_attention_heads", None), ("vocab_size", None),
                    ("max_position_embeddings", "needed only without --sequence-length"), ("kv_lora_rank", None),
                    ("q_lora_rank", "none: queries projected directly"), ("qk_nope_head_dim", None),
                    ("qk_rope_head_dim", None), ("v_head_dim", None), ("n_routed_experts", None),
                    ("n_shared_experts", "0"), ("num_experts_per_tok", None), ("first_k_dense_replace", "0"),
                    ("moe_layer_freq", "1"), ("tie_word_embeddings", "false"), ("attention_dropout", "0")),
    "gpt2": (("n_embd", None), ("n_layer", None), ("n_head", None), ("n_inner", "4 x n_embd"), ("vocab_size", None),
             ("n_positions", None), ("attn_pdrop", "0.1"), ("resid_pdrop", "0.1")),
    "gpt_neox": (("hidden_size", None), ("intermediate_size", None), ("num_hidden_layers", None),
                 ("num_attention_heads", None), ("vocab_size", None),
                 ("max_position_embeddings", "needed only without --sequence-length"),
                 ("tie_word_embeddings", "false"), ("attention_bias", "true"), ("attention_dropout", "0"),
                 ("hidden_dropout", "0")),
    "bert": (("hidden_size", None), ("intermediate_size", None), ("num_hidden_layers", None),
             ("num_attention_heads", None), ("vocab_size", None), ("max_position_embeddings", None),
             ("type_vocab_size", "2"), ("architectures", "[BertForPreTraining]; BertForMaskedLM drops the pooler "
                                                         "and NSP head"),
             ("attention_probs_dropout_prob", "0.1"), ("hidden_dropout_prob", "0.1")),
    "t5": (("d_model", None), ("d_kv", None), ("d_ff", None), ("num_heads", None), ("num_layers", None),
           ("num_decoder_layers", "num_layers"), ("vocab_size", None), ("relative_attention_num_buckets", "32"),
           ("feed_forward_proj", "relu (gated-gelu: T5 v1.1)"), ("tie_word_embeddings", "true"),
           ("n_positions", "512: the default sequence length's cap"), ("dropout_rate", "0.1")),
    "vit": (("hidden_size", None), ("intermediate_size", None), ("num_hidden_layers", None),
            ("num_attention_heads", None), ("image_size", None), ("patch_size", None), ("num_channels", "3"),
            ("qkv_bias", "true"), ("num_labels", "len(id2label), else 2"),
            ("attention_probs_dropout_prob", "0"), ("hidden_dropout_prob", "0")),
}
"""The config.json keys each family reads, with the default of an absent one (None: required).
``model_type`` picks the family; ``torch_dtype`` and ``_name_or_path`` are recorded when present.
Every other key is ignored (rotary and normalisation settings do not change shapes or FLOPs)."""
