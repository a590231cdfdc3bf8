"""Decoder-only families with rotary positions, RMSNorm and a gated MLP: ``llama``, ``mistral``,
``qwen2``, ``gemma``, ``gemma2`` (four norms per block, soft-capping, sliding window on every
other layer), ``phi3`` (fused ``qkv_proj`` and ``gate_up_proj``) and ``mixtral`` (a
mixture-of-experts MLP). Tensor names and shapes as in ``transformers``'
``modeling_<type>.py``; what is counted: :mod:`wus_sim.model.importers.importers`.
"""

from .hf_model import HFModel

__all__ = ["decoder", "moe_note"]


def _window(cfg, family):
    """The sliding window the family's attention uses, or None (full attention)."""
    uses = family in ("mistral", "mixtral", "phi3", "gemma2") or (
        family == "qwen2" and cfg.flag("use_sliding_window", False))
    if not uses or cfg.doc.get("sliding_window") is None:
        return None
    return cfg.int("sliding_window")


def moe_note(experts, active, shared=0):
    """What an imported mixture of experts counts, said in the output."""
    also = f" and the {shared} shared expert(s) every token passes through" if shared else ""
    return (f"mixture of experts: all {experts} routed experts' weights are trainable tensors (experts.<j>.), "
            "replicated, sharded or fully sharded like any other, or split by an expert mesh axis with all-to-all "
            f"dispatch (wus_sim.model.ops.experts); FLOPs per token count the router, the {active} experts each token "
            f"is routed to (num_experts_per_tok, top-k){also}, routing taken as even")


def decoder(cfg, family, seq):
    """One of the decoder families above: ``(model, block widths, notes)``."""
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
    tied = cfg.flag("tie_word_embeddings", family in ("gemma", "gemma2"))
    qkv_bias = cfg.flag("attention_bias", False) or family == "qwen2"
    o_bias = cfg.flag("attention_bias", False)
    mlp_bias = cfg.flag("mlp_bias", False)
    window = _window(cfg, family)
    experts = active = 0
    if family == "mixtral":
        experts = cfg.int("num_local_experts")
        active = cfg.int("num_experts_per_tok", default=2)
        if active > experts:
            raise cfg.error("num_experts_per_tok", f"must be at most num_local_experts ({experts})", active)
    q_dim, kv_dim = heads * head_dim, kv * head_dim

    def ctx_of(i):  # keys each query attends to in layer i (gemma2: the window on even layers only)
        if window and (family != "gemma2" or i % 2 == 0):
            return min(seq, window)
        return seq

    m = HFModel()
    emb = m.layer("embed_tokens")
    m.add(emb, "model.embed_tokens.weight", vocab, h)
    for i in range(n_layers):
        p = f"model.layers.{i}"
        attn = m.layer(f"{p}.self_attn", 2 * h * (2 * q_dim + 2 * kv_dim) + 4 * ctx_of(i) * q_dim)
        m.attend(attn, heads, head_dim, seq, ctx_of(i), causal=True)
        m.add(attn, f"{p}.input_layernorm.weight", h)
        if family == "phi3":
            m.add(attn, f"{p}.self_attn.qkv_proj.weight", q_dim + 2 * kv_dim, h)
        else:
            for proj, rows in (("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)):
                m.linear(attn, f"{p}.self_attn.{proj}", rows, h, qkv_bias)
        m.linear(attn, f"{p}.self_attn.o_proj", h, q_dim, o_bias)
        if family == "gemma2":  # its second norm is on the attention output; two more around the MLP
            m.add(attn, f"{p}.post_attention_layernorm.weight", h)
        if family == "mixtral":
            mlp = m.layer(f"{p}.block_sparse_moe", 2 * h * experts + active * 2 * 3 * h * ff)
        else:
            mlp = m.layer(f"{p}.mlp", 2 * 3 * h * ff)
        m.add(mlp, f"{p}.{'pre_feedforward' if family == 'gemma2' else 'post_attention'}_layernorm.weight", h)
        if family == "phi3":
            m.add(mlp, f"{p}.mlp.gate_up_proj.weight", 2 * ff, h)
            m.add(mlp, f"{p}.mlp.down_proj.weight", h, ff)
        elif family == "mixtral":
            m.add(mlp, f"{p}.block_sparse_moe.gate.weight", experts, h)
            for j in range(experts):
                e = f"{p}.block_sparse_moe.experts.{j}"
                for w, rows, cols in (("w1", ff, h), ("w2", h, ff), ("w3", ff, h)):
                    m.add(mlp, f"{e}.{w}.weight", rows, cols)
        else:
            m.gated_mlp(mlp, f"{p}.mlp", h, ff, mlp_bias)
        if family == "gemma2":
            m.add(mlp, f"{p}.post_feedforward_layernorm.weight", h)
    m.lm_head(h, vocab, tied)
    ctx = [ctx_of(i) for i in range(n_layers)]
    if family == "gemma2":
        caps = [f"{k} {cfg.scale(k, 0.0):g}" for k in ("attn_logit_softcapping", "final_logit_softcapping")
                if cfg.doc.get(k) is not None]
        if caps:
            m.notes.append("soft-capping (" + ", ".join(caps) + "): a tanh on the logits, elementwise, not "
                           "counted in FLOPs")
        m.notes.append("four RMSNorms per block (input, post-attention, pre- and post-feedforward), all "
                       "trainable tensors")
    if window and family == "gemma2":
        m.notes.append(f"sliding window {window} on the {sum(1 for i in range(n_layers) if i % 2 == 0)} "
                       f"even-numbered layers (full attention on the others): their attention FLOPs count "
                       f"{min(seq, window)} keys per query")
    elif window:
        m.notes.append(f"sliding window {window}: attention FLOPs count {min(seq, window)} keys per query")
    if family == "phi3":
        m.notes.append("fused qkv_proj and gate_up_proj as stored (one tensor each per block)")
    if experts:
        m.notes.append(moe_note(experts, active))
    dropout = cfg.number("attention_dropout", 0.0)
    shape = dict(h=h, heads=heads, head_dim=head_dim, q_dim=q_dim, kv_dim=kv_dim, ff=ff * max(active, 1),
                 gated=True, layers=n_layers, ctx=round(sum(ctx) / n_layers), attention_dropout=dropout > 0,
                 hidden_dropout=False, vocab=vocab, predicted=seq, norms=4 if family == "gemma2" else 2,
                 expert_copies=max(active, 1))
    return m, shape, dict(tied=tied, window=window)
