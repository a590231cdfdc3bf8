"""The Hugging Face model families :mod:`wus_sim.model.importers` reads: for each ``model_type``,
the trainable tensors (names and shapes as the family's ``transformers`` module
``modeling_<type>.py`` gives them, in forward order), layers with forward FLOPs per token, and the
block widths the activation terms come from. What is counted and why: the importer's docstring.
"""

from ..inputs.errors import ConfigError
from ..inputs.limits import IMPORT_MAX

__all__ = ["FAMILIES", "BUILDERS", "CONFIG_KEYS", "HFConfig", "activation_terms", "bert_masked_positions", "default_sequence"]

FAMILIES = ("llama", "mistral", "qwen2", "gemma", "gpt2", "gpt_neox", "bert")
"""``model_type`` values the importer reads."""


# ==================================================================== config reading
SIZE_KINDS = {"hidden_size": "width", "n_embd": "width", "head_dim": "width", "intermediate_size": "ff",
              "n_inner": "ff", "num_hidden_layers": "layers", "n_layer": "layers", "num_attention_heads": "heads",
              "num_key_value_heads": "heads", "n_head": "heads", "vocab_size": "vocab", "type_vocab_size": "vocab",
              "max_position_embeddings": "positions", "n_positions": "positions", "sliding_window": "positions"}
"""The kind of limit (:data:`wus_sim.inputs.limits.IMPORT_MAX`) of each size key a family reads."""


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
        """A probability (every number the families read is a dropout rate): in [0, 1]."""
        value = self.doc.get(key, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise self.error(key, "must be a probability in [0, 1]", value)
        return float(value)

    def check_limits(self, family):
        """Every size and rate the family reads, checked before any tensor is built: a layer
        count of 10^9 is refused here, not after minutes of building (limits: IMPORT_MAX)."""
        for key, _default in CONFIG_KEYS[family]:
            if self.doc.get(key) is None:
                continue
            if key in SIZE_KINDS:
                self.int(key, minimum=0 if key == "type_vocab_size" else 1)
            elif key.endswith(("dropout", "pdrop", "_prob")):
                self.number(key, 0.0)
            elif key in ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window"):
                self.flag(key, False)
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
class _Model:
    """The tensors, layers, FLOPs and activation terms of one config, built by a family function."""

    def __init__(self):
        self.layers = []    # [name, fwd FLOPs per token]
        self.tensors = []   # [name, shape, layer index]
        self.tied = {}      # checkpoint name of a tied copy -> the tensor it copies
        self.attention = []  # the workload file's attention entries: each attention layer's scores

    def attend(self, layer, heads, head_dim, query_tokens, key_tokens):
        """Layer *layer* attends: its FLOPs hold ``4 x key_tokens x heads x head_dim`` per token of
        score and context matmuls, and its score matrix is ``heads x query x key`` per sequence."""
        self.attention.append({"layer": self.layers[layer][0], "heads": heads, "head_dim": head_dim,
                               "query_tokens": query_tokens, "key_tokens": key_tokens})

    def layer(self, name, flops=0.0):
        self.layers.append([name, float(flops)])
        return len(self.layers) - 1

    def add(self, layer, name, *shape):
        self.tensors.append([name, list(shape), layer])


def _decoder(cfg, family, seq):
    """llama, mistral, qwen2, gemma: pre-norm blocks, rotary positions, gated MLP, RMSNorm."""
    h = cfg.int("hidden_size")
    n_layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    kv = cfg.int("num_key_value_heads", default=heads)
    if heads % kv:
        raise cfg.error("num_key_value_heads", f"must divide num_attention_heads ({heads})", kv)
    head_dim = cfg.int("head_dim", default=h // heads)
    if "head_dim" not in cfg.doc and h % heads:
        raise cfg.error("num_attention_heads", f"must divide hidden_size ({h}) when head_dim is not given", heads)
    ff = cfg.int("intermediate_size")
    vocab = cfg.int("vocab_size")
    tied = cfg.flag("tie_word_embeddings", family == "gemma")
    qkv_bias = cfg.flag("attention_bias", False) or family == "qwen2"
    o_bias = cfg.flag("attention_bias", False)
    mlp_bias = cfg.flag("mlp_bias", False)
    window = None
    if family == "mistral" or (family == "qwen2" and cfg.flag("use_sliding_window", False)):
        window = cfg.doc.get("sliding_window")
        if window is not None:
            window = cfg.int("sliding_window")
    ctx = min(seq, window) if window else seq
    q_dim, kv_dim = heads * head_dim, kv * head_dim

    m = _Model()
    emb = m.layer("embed_tokens")
    m.add(emb, "model.embed_tokens.weight", vocab, h)
    for i in range(n_layers):
        p = f"model.layers.{i}"
        attn = m.layer(f"{p}.self_attn", 2 * h * (2 * q_dim + 2 * kv_dim) + 4 * ctx * q_dim)
        m.attend(attn, heads, head_dim, seq, ctx)
        m.add(attn, f"{p}.input_layernorm.weight", h)
        for proj, rows in (("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)):
            m.add(attn, f"{p}.self_attn.{proj}.weight", rows, h)
            if qkv_bias:
                m.add(attn, f"{p}.self_attn.{proj}.bias", rows)
        m.add(attn, f"{p}.self_attn.o_proj.weight", h, q_dim)
        if o_bias:
            m.add(attn, f"{p}.self_attn.o_proj.bias", h)
        mlp = m.layer(f"{p}.mlp", 2 * 3 * h * ff)
        m.add(mlp, f"{p}.post_attention_layernorm.weight", h)
        for proj, shape in (("gate_proj", (ff, h)), ("up_proj", (ff, h)), ("down_proj", (h, ff))):
            m.add(mlp, f"{p}.mlp.{proj}.weight", *shape)
            if mlp_bias:
                m.add(mlp, f"{p}.mlp.{proj}.bias", shape[0])
    head = m.layer("lm_head", 2 * h * vocab)
    m.add(head, "model.norm.weight", h)
    if tied:
        m.tied["lm_head.weight"] = "model.embed_tokens.weight"
    else:
        m.add(head, "lm_head.weight", vocab, h)
    dropout = cfg.number("attention_dropout", 0.0)
    shape = dict(h=h, heads=heads, head_dim=head_dim, q_dim=q_dim, kv_dim=kv_dim, ff=ff, gated=True,
                 layers=n_layers, ctx=ctx, attention_dropout=dropout > 0, hidden_dropout=False,
                 vocab=vocab, predicted=seq)
    notes = dict(tied=tied, window=window)
    return m, shape, notes


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
        raise cfg.error("n_positions", f"is below the sequence length {seq}", positions)
    m = _Model()
    emb = m.layer("transformer.wte")
    m.add(emb, "transformer.wte.weight", vocab, h)
    m.add(emb, "transformer.wpe.weight", positions, h)
    for i in range(n_layers):
        p = f"transformer.h.{i}"
        attn = m.layer(f"{p}.attn", 2 * 4 * h * h + 4 * seq * h)
        m.attend(attn, heads, h // heads, seq, seq)
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
    h = cfg.int("hidden_size")
    n_layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    if h % heads:
        raise cfg.error("num_attention_heads", f"must divide hidden_size ({h})", heads)
    ff = cfg.int("intermediate_size")
    vocab = cfg.int("vocab_size")
    tied = cfg.flag("tie_word_embeddings", False)
    bias = cfg.flag("attention_bias", True)
    m = _Model()
    emb = m.layer("gpt_neox.embed_in")
    m.add(emb, "gpt_neox.embed_in.weight", vocab, h)
    for i in range(n_layers):
        p = f"gpt_neox.layers.{i}"
        attn = m.layer(f"{p}.attention", 2 * 4 * h * h + 4 * seq * h)
        m.attend(attn, heads, h // heads, seq, seq)
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
    h = cfg.int("hidden_size")
    n_layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    if h % heads:
        raise cfg.error("num_attention_heads", f"must divide hidden_size ({h})", heads)
    ff = cfg.int("intermediate_size")
    vocab = cfg.int("vocab_size")
    positions = cfg.int("max_position_embeddings")
    types = cfg.int("type_vocab_size", default=2)
    if seq > positions:
        raise cfg.error("max_position_embeddings", f"is below the sequence length {seq}", positions)
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
                 hidden_dropout=cfg.number("hidden_dropout_prob", 0.1) > 0, vocab=vocab, predicted=masked)
    return m, shape, dict(tied=True, window=None, masked=masked, architecture=arch)


BUILDERS = {"llama": _decoder, "mistral": _decoder, "qwen2": _decoder, "gemma": _decoder,
             "gpt2": _gpt2, "gpt_neox": _gpt_neox, "bert": _bert}


def default_sequence(cfg, family):
    return cfg.int("n_positions" if family == "gpt2" else "max_position_embeddings")


def activation_terms(s, seq):
    """Activation terms per sequence of *seq* tokens from the block widths *s* (see the module
    docstring): one for the layer stack, one for the loss."""
    h, q, kv, ff, a = s["h"], s["q_dim"], s["kv_dim"], s["ff"], s["heads"]
    hidden = (3 if s["gated"] else 2) * ff  # gate, up, their product | fc1 output, its GELU
    parts = [("QKV and MLP inputs 2 x 2h", 4 * h), ("Q, K, V 2 x (q_dim + 2 kv_dim)", 2 * (q + 2 * kv)),
             ("output projection input 2 q_dim", 2 * q),
             (f"MLP hidden 2 x {hidden // ff} ff", 2 * hidden), ("two norm inputs 2 x 2h", 4 * h)]
    if s["hidden_dropout"]:
        parts.append(("two dropout masks 2 x h", 2 * h))
    if s["attention_dropout"]:
        parts.append(("attention probabilities, dropout mask and dropped copy 5 a s", 5 * a * s["ctx"]))
    else:
        parts.append(("fused attention: fp32 log-sum-exp 4 a", 4 * a))
    per_token = sum(b for _, b in parts)
    terms = [dict(what=f"transformer layers: {s['layers']} x {seq} tokens x d {h}", elements=s["layers"] * seq * h,
                  bytes_per_element=per_token / h,
                  why=f"{per_token} B per token per layer / h, bf16: "
                      + "; ".join(f"{what} = {b}" for what, b in parts)
                      + " (Korthikanti et al. 2022, generalised; see sources)", layers=s["layers"])]
    terms.append(dict(what=f"output logits: {s['predicted']} predicted positions x vocab {s['vocab']}",
                      elements=s["predicted"] * s["vocab"], bytes_per_element=6,
                      why="bf16 logits + fp32 log-softmax kept for the loss"))
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
}
"""The config.json keys each family reads, with the default of an absent one (None: required).
``model_type`` picks the family; ``torch_dtype`` and ``_name_or_path`` are recorded when present.
Every other key is ignored (rotary and normalisation settings do not change shapes or FLOPs)."""
