"""``t5`` (T5, T5 v1.1, Flan-T5: ``T5ForConditionalGeneration``): an encoder-decoder with
relative position buckets in each stack's first block, RMS-style ``T5LayerNorm`` without bias,
a ReLU MLP (``wi``, ``wo``) or a gated-GELU one (``wi_0``, ``wi_1``, ``wo``) and cross-attention
in every decoder block. Tensor names and shapes as in ``transformers``' ``modeling_t5.py``
(Raffel et al. 2020, arXiv 1910.10683).

An example is an input of ``s`` tokens and a target of ``s`` tokens (the sequence length names
both); the FLOP unit is one token of either, ``2 s`` per example.
"""

from .hf_model import HFModel

__all__ = ["t5"]


def t5(cfg, family, seq):
    d = cfg.int("d_model")
    d_kv = cfg.int("d_kv")
    heads = cfg.int("num_heads")
    ff = cfg.int("d_ff")
    n_enc = cfg.int("num_layers")
    n_dec = cfg.int("num_decoder_layers", default=n_enc)
    vocab = cfg.int("vocab_size")
    buckets = cfg.int("relative_attention_num_buckets", default=32)
    tied = cfg.flag("tie_word_embeddings", True)
    proj = cfg.doc.get("feed_forward_proj", "relu")
    if not isinstance(proj, str) or proj.split("-")[-1] not in ("relu", "gelu") or proj.count("-") > 1 \
            or (proj.count("-") == 1 and not proj.startswith("gated-")):
        raise cfg.error("feed_forward_proj", "must be relu, gelu, gated-relu or gated-gelu (T5's MLP kinds)", proj)
    gated = proj.startswith("gated-")
    inner = heads * d_kv
    s_in = s_out = seq
    units = s_in + s_out  # FLOPs per example spread over its input and target tokens

    m = HFModel()
    emb = m.layer("shared")
    m.add(emb, "shared.weight", vocab, d)

    def attention(layer, prefix, first, cross=False):
        m.linear(layer, f"{prefix}.q", inner, d)
        m.linear(layer, f"{prefix}.k", inner, d)
        m.linear(layer, f"{prefix}.v", inner, d)
        m.linear(layer, f"{prefix}.o", d, inner)
        if first and not cross:
            m.add(layer, f"{prefix}.relative_attention_bias.weight", buckets, heads)

    def mlp(layer, prefix):
        if gated:
            m.linear(layer, f"{prefix}.DenseReluDense.wi_0", ff, d)
            m.linear(layer, f"{prefix}.DenseReluDense.wi_1", ff, d)
        else:
            m.linear(layer, f"{prefix}.DenseReluDense.wi", ff, d)
        m.linear(layer, f"{prefix}.DenseReluDense.wo", d, ff)
        m.add(layer, f"{prefix}.layer_norm.weight", d)

    mlp_flops = 2 * (3 if gated else 2) * d * ff
    for stack, n, tokens in (("encoder", n_enc, s_in), ("decoder", n_dec, s_out)):
        for i in range(n):
            p = f"{stack}.block.{i}"
            # per example: projections per token of this stack, then the scores over its own tokens
            attn = m.layer(f"{p}.layer.0", (tokens * 2 * 4 * d * inner + 4 * tokens * tokens * inner) / units)
            m.attend(attn, heads, d_kv, tokens, tokens, causal=stack == "decoder")
            attention(attn, f"{p}.layer.0.SelfAttention", i == 0)
            m.add(attn, f"{p}.layer.0.layer_norm.weight", d)
            if stack == "decoder":  # queries from the target, keys and values from the encoder output
                cross = m.layer(f"{p}.layer.1", (s_out * 2 * 2 * d * inner + s_in * 2 * 2 * d * inner
                                                 + 4 * s_out * s_in * inner) / units)
                m.attend(cross, heads, d_kv, s_out, s_in)
                attention(cross, f"{p}.layer.1.EncDecAttention", i == 0, cross=True)
                m.add(cross, f"{p}.layer.1.layer_norm.weight", d)
            k = 2 if stack == "decoder" else 1
            ffn = m.layer(f"{p}.layer.{k}", tokens * mlp_flops / units)
            mlp(ffn, f"{p}.layer.{k}")
        m.add(ffn, f"{stack}.final_layer_norm.weight", d)
    head = m.layer("lm_head", s_out * 2 * d * vocab / units)
    for copy in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        m.tied[copy] = "shared.weight"
    if tied:
        m.tied["lm_head.weight"] = "shared.weight"
    else:
        m.add(head, "lm_head.weight", vocab, d)
    m.notes.append(f"encoder-decoder: an example is {s_in} input and {s_out} target tokens (the sequence length "
                   f"names both); FLOPs are per token of either, {units} per example; the relative position "
                   "buckets' additions and T5LayerNorm are not counted")
    dropout = cfg.number("dropout_rate", 0.1) > 0
    common = dict(h=d, heads=heads, head_dim=d_kv, q_dim=inner, kv_dim=inner, ff=ff, gated=gated, ctx=seq,
                  attention_dropout=dropout, hidden_dropout=dropout, vocab=vocab)
    shapes = [dict(common, layers=n_enc, stack="encoder", predicted=0),
              dict(common, layers=n_dec, stack="decoder", predicted=s_out, attn_blocks=2, norms=3)]
    return m, shapes, dict(tied=tied, window=None, units=units, example_unit="input-target pair")
