"""Decoder-only families with rotary positions, RMSNorm and a gated MLP: ``llama``, ``mistral``,
``qwen2``, ``gemma``, ``gemma2`` (four norms per block, soft-capping, sliding window on every
other layer), ``phi3`` (fused ``qkv_proj`` and ``gate_up_proj``) and ``mixtral`` (a
mixture-of-experts MLP). Tensor names and shapes as in ``transformers``' ``modeling_<type>.py``;
what is counted: :mod:`wus_sim.model.importers.importers`.

The same builder takes the decoder blocks MaxText adds (:mod:`.maxtext_model` fills a config of
these families' keys from a MaxText model file; none is a ``model_type`` the Hugging Face import
reads yet): ``qwen3`` and ``qwen3_moe`` (an RMSNorm on each head's queries and keys), ``gemma3_text``
(Gemma 2's four norms, per-head query and key norms, a sliding window on five layers of six),
``olmo3`` (norms after attention and MLP only, query and key norms over all heads, a sliding window
on three layers of four), ``gpt_oss`` (biases on every attention projection and expert, a learned
sink logit per head, a window on every other layer), ``llama4_text`` (mixture-of-experts blocks every
``interleave_moe_layer_step`` layers, each with a shared expert; chunked attention except on every
``nope_layer_interval``-th layer) and ``envy`` (MaxText's switch-style family: per-head query and key
norms, a norm after the MLP, a routed MLP every other block).

Experts are one tensor per weight and expert (the checkpoints' layout), or, with
``cfg.stacked_experts``, one tensor per weight and layer holding every expert (MaxText's layout, its
``wi_0``, ``wi_1``, ``wo`` of ``[experts, ...]``), written ``[experts x out, in]``: one grouped matmul
whose rows are one expert's tokens.
"""

from .hf_model import HFModel

__all__ = ["decoder", "moe_note", "add_experts"]

_SANDWICH = ("gemma2", "gemma3_text")
"""Families with four norms a block: input, post-attention, pre- and post-feedforward."""
_QK_NORM = {"qwen3": "head", "qwen3_moe": "head", "gemma3_text": "head", "envy": "head", "olmo3": "all"}
"""Query and key RMSNorms: over each head's ``head_dim`` or over all heads at once (OLMo 3)."""
_TIED = ("gemma", "gemma2", "gemma3_text", "envy")
"""Families whose output head is the token embedding unless the config says otherwise."""
_EXPERTS = {"mixtral": "num_local_experts", "qwen3_moe": "num_experts", "gpt_oss": "num_local_experts",
            "llama4_text": "num_local_experts", "envy": "num_local_experts"}
"""Mixture-of-experts families and the key giving their routed experts."""
_ROUTER = {"mixtral": "block_sparse_moe.gate", "gpt_oss": "mlp.router", "llama4_text": "feed_forward.router"}
"""The router's name where it is not ``mlp.gate``."""


def _window(cfg, family):
    """The sliding (or chunked) window the family's attention uses, or None (full attention)."""
    if family == "llama4_text":
        key = "attention_chunk_size"
    elif family in ("mistral", "mixtral", "phi3", "gemma2", "gemma3_text", "olmo3", "gpt_oss") or (
            family == "qwen2" and cfg.flag("use_sliding_window", False)):
        key = "sliding_window"
    else:
        return None
    return None if cfg.doc.get(key) is None else cfg.int(key)


def _windowed(cfg, family, i):
    """Whether layer *i* attends within the window (the others attend to the whole sequence)."""
    if family in ("gemma2", "gpt_oss"):  # even layers local
        return i % 2 == 0
    if family == "gemma3_text":  # five local, one global
        return (i + 1) % cfg.int("sliding_window_pattern", default=6) != 0
    if family == "olmo3":  # three local, one global
        return (i + 1) % 4 != 0
    if family == "llama4_text":  # every nope_layer_interval-th layer global (no rotary positions); 0: none
        interval = cfg.int("nope_layer_interval", default=0, minimum=0)
        return interval == 0 or (i + 1) % interval != 0
    return True


def moe_note(experts, active, shared=0):
    """What an imported mixture of experts counts, said in the output."""
    also = f" and the {shared} shared expert(s) every token passes through" if shared else ""
    return (f"mixture of experts: all {experts} routed experts' weights are trainable tensors (experts.<j>.), "
            "replicated, sharded or fully sharded like any other, or split by an expert mesh axis with all-to-all "
            f"dispatch (wus_sim.model.ops.experts); FLOPs per token count the router, the {active} experts each token "
            f"is routed to (num_experts_per_tok, top-k){also}, routing taken as even")


_GATED = (("gate_proj", "up"), ("up_proj", "up"), ("down_proj", "down"))
"""A gated expert's weights in order, each ``up`` (``[ff, h]``) or ``down`` (``[h, ff]``)."""


def add_experts(m, cfg, layer, prefix, h, ff, experts, names=_GATED, bias=False):
    """The routed experts' gated MLPs of one layer: per expert ``PREFIX.J.NAME.weight`` (*names*: each
    weight's name and whether it is ``up`` ``[ff, h]`` or ``down`` ``[h, ff]``), or stacked
    (``cfg.stacked_experts``) ``PREFIX.NAME.weight`` of ``[experts x ff, h]`` or ``[experts x h, ff]``,
    each expert's output rows after another's."""
    stacked = getattr(cfg, "stacked_experts", False)
    for j in ([None] if stacked else range(experts)):
        for name, kind in names:
            rows, cols = (ff, h) if kind == "up" else (h, ff)
            if stacked:
                m.linear(layer, f"{prefix}.{name}", experts * rows, cols, bias)
            else:
                m.linear(layer, f"{prefix}.{j}.{name}", rows, cols, bias)


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
    tied = cfg.flag("tie_word_embeddings", family in _TIED)
    qkv_bias = cfg.flag("attention_bias", False) or family == "qwen2"
    o_bias = cfg.flag("attention_bias", False)
    mlp_bias = cfg.flag("mlp_bias", False)
    window = _window(cfg, family)
    qk_norm = _QK_NORM.get(family)
    experts = active = shared = 0
    moe_ff, step = ff, 1
    if family in _EXPERTS:
        experts = cfg.int(_EXPERTS[family])
        active = cfg.int("num_experts_per_tok", default=2)
        if active > experts:
            raise cfg.error("num_experts_per_tok", f"must be at most {_EXPERTS[family]} ({experts})", active)
        if family in ("qwen3_moe", "envy"):
            moe_ff = cfg.int("moe_intermediate_size")
        if family == "llama4_text":
            shared, ff = 1, cfg.int("intermediate_size_mlp", default=ff)
        if family in ("llama4_text", "envy"):
            step = cfg.int("interleave_moe_layer_step", default=1)
    q_dim, kv_dim = heads * head_dim, kv * head_dim

    def ctx_of(i):  # keys each query attends to in layer i
        return min(seq, window) if window and _windowed(cfg, family, i) else seq

    def is_moe(i):
        return experts > 0 and (i + 1) % step == 0

    m = HFModel()
    emb = m.layer("embed_tokens")
    m.add(emb, "model.embed_tokens.weight", vocab, h)
    for i in range(n_layers):
        p = f"model.layers.{i}"
        attn = m.layer(f"{p}.self_attn", 2 * h * (2 * q_dim + 2 * kv_dim) + 4 * ctx_of(i) * q_dim)
        m.attend(attn, heads, head_dim, seq, ctx_of(i), causal=True)
        if family != "olmo3":  # OLMo 3 normalises each sub-block's output, not its input
            m.add(attn, f"{p}.input_layernorm.weight", h)
        if family == "phi3":
            m.add(attn, f"{p}.self_attn.qkv_proj.weight", q_dim + 2 * kv_dim, h)
        else:
            for proj, rows in (("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)):
                m.linear(attn, f"{p}.self_attn.{proj}", rows, h, qkv_bias)
        m.linear(attn, f"{p}.self_attn.o_proj", h, q_dim, o_bias)
        if qk_norm:
            m.add(attn, f"{p}.self_attn.q_norm.weight", head_dim if qk_norm == "head" else q_dim)
            m.add(attn, f"{p}.self_attn.k_norm.weight", head_dim if qk_norm == "head" else kv_dim)
        if family == "gpt_oss":
            m.add(attn, f"{p}.self_attn.sinks", heads)
        if family in _SANDWICH or family == "olmo3":  # a norm on the attention output
            m.add(attn, f"{p}.post_attention_layernorm.weight", h)
        _mlp(m, cfg, family, p, h, ff, moe_ff, (experts, active, shared) if is_moe(i) else None, mlp_bias)
    m.lm_head(h, vocab, tied)
    ctx = [ctx_of(i) for i in range(n_layers)]
    _notes(m, cfg, family, window, n_layers, seq, qk_norm, (experts, active, shared, step))
    norms = 4 if family in _SANDWICH else 3 if family == "envy" else 2
    copies = max(active + shared, 1)
    shape = dict(h=h, heads=heads, head_dim=head_dim, q_dim=q_dim, kv_dim=kv_dim,
                 ff=moe_ff * copies if experts else ff, gated=True, layers=n_layers, ctx=round(sum(ctx) / n_layers),
                 attention_dropout=cfg.number("attention_dropout", 0.0) > 0, hidden_dropout=False, vocab=vocab,
                 predicted=seq, norms=norms, expert_copies=max(active, 1))
    return m, shape, dict(tied=tied, window=window)


def _mlp(m, cfg, family, p, h, ff, moe_ff, moe, bias):
    """Layer *p*'s MLP: dense (*moe* None) or its router, routed and shared experts."""
    sandwich = family in _SANDWICH
    if moe is None:
        mlp = m.layer(f"{p}.mlp", 2 * 3 * h * ff)
    else:
        experts, active, shared = moe
        mlp = m.layer(f"{p}.block_sparse_moe" if family == "mixtral" else f"{p}.mlp",
                      2 * h * experts + (active + shared) * 2 * 3 * h * moe_ff)
    if family != "olmo3":
        m.add(mlp, f"{p}.{'pre_feedforward' if sandwich else 'post_attention'}_layernorm.weight", h)
    if family == "phi3":
        m.add(mlp, f"{p}.mlp.gate_up_proj.weight", 2 * ff, h)
        m.add(mlp, f"{p}.mlp.down_proj.weight", h, ff)
    elif moe is None:
        m.gated_mlp(mlp, f"{p}.mlp", h, ff, bias)
    elif family == "mixtral":
        m.add(mlp, f"{p}.block_sparse_moe.gate.weight", experts, h)
        add_experts(m, cfg, mlp, f"{p}.block_sparse_moe.experts", h, moe_ff, experts,
                    (("w1", "up"), ("w2", "down"), ("w3", "up")))
    else:
        m.linear(mlp, f"{p}.{_ROUTER.get(family, 'mlp.gate')}", experts, h, family == "gpt_oss")
        add_experts(m, cfg, mlp, f"{p}.mlp.experts", h, moe_ff, experts, bias=bias)
        if shared:
            m.gated_mlp(mlp, f"{p}.mlp.shared_expert", h, moe_ff * shared)
    if sandwich or family in ("olmo3", "envy"):
        m.add(mlp, f"{p}.post_feedforward_layernorm.weight", h)


def _notes(m, cfg, family, window, n_layers, seq, qk_norm, moe):
    """What the import of *family* approximates or leaves out, said in its output."""
    if family in ("gemma2", "gemma3_text"):
        caps = [f"{k} {cfg.scale(k, 0.0):g}" for k in ("attn_logit_softcapping", "final_logit_softcapping")
                if cfg.doc.get(k) is not None]
        if caps:
            m.notes.append("soft-capping (" + ", ".join(caps) + "): a tanh on the logits, elementwise, not "
                           "counted in FLOPs")
        m.notes.append("four RMSNorms per block (input, post-attention, pre- and post-feedforward), all "
                       "trainable tensors")
    if qk_norm:
        m.notes.append("RMSNorms on the queries and keys " + ("of each head" if qk_norm == "head" else
                                                              "over all heads at once") + ", trainable tensors")
    local = sum(1 for i in range(n_layers) if _windowed(cfg, family, i))
    kind = "chunked attention" if family == "llama4_text" else "sliding window"
    which = (f"the {local} even-numbered layers" if family in ("gemma2", "gpt_oss")
             else f"{local} of the {n_layers} layers")
    if window and local < n_layers:
        m.notes.append(f"{kind} {window} on {which} (full attention on the others): "
                       f"their attention FLOPs count {min(seq, window)} keys per query")
    elif window:
        m.notes.append(f"sliding window {window}: attention FLOPs count {min(seq, window)} keys per query")
    if family == "phi3":
        m.notes.append("fused qkv_proj and gate_up_proj as stored (one tensor each per block)")
    if family == "gpt_oss":
        m.notes.append("biases on q, k, v and o and on every expert's projections; one learned sink logit per "
                       "head (its softmax term not counted)")
    experts, active, shared, step = moe
    if experts:
        every = "" if step == 1 else f"; a routed MLP every {step} blocks, a dense one in the others"
        m.notes.append(moe_note(experts, active, shared) + every)
        if getattr(cfg, "stacked_experts", False):
            m.notes.append("the experts of a layer stacked in one tensor per weight, as MaxText holds them "
                           "([experts x out, in]: one grouped matmul)")
