"""``deepseek_v2`` (DeepSeek-V2, DeepSeek-V2-Lite): multi-head latent attention (MLA: queries
directly or through a rank-``q_lora_rank`` bottleneck, keys and values through a shared
rank-``kv_lora_rank`` latent plus one rotary key per token) and a mixture-of-experts MLP with
shared experts after the first ``first_k_dense_replace`` dense layers. Tensor names and shapes as
in the model's own ``modeling_deepseek.py`` (huggingface.co/deepseek-ai/DeepSeek-V2-Lite, loaded
with ``trust_remote_code``; DeepSeek-AI 2024, arXiv 2405.04434, sec. 2.1-2.2).

``deepseek_v3`` (DeepSeek-V3, Kimi K2; filled from MaxText's ``deepseek`` block with ``routed_bias``,
not read from a Hugging Face config yet) adds to each router the bias its auxiliary-loss-free load
balancing adds to the routing scores (``e_score_correction_bias``, one per expert: DeepSeek-AI 2024,
arXiv 2412.19437, sec. 2.1.2), which MaxText holds among the parameters (``GateLogit``'s ``bias``).
"""

from .hf_decoder import add_experts, moe_note
from .hf_model import HFModel

__all__ = ["deepseek_v2"]


def deepseek_v2(cfg, family, seq):
    h = cfg.int("hidden_size")
    n_layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    ff = cfg.int("intermediate_size")
    moe_ff = cfg.int("moe_intermediate_size")
    vocab = cfg.int("vocab_size")
    kv_rank = cfg.int("kv_lora_rank")
    q_rank = cfg.int("q_lora_rank", default=0)  # null in V2-Lite: queries projected directly (0: none; a rank >= 1)
    nope = cfg.int("qk_nope_head_dim")
    rope = cfg.int("qk_rope_head_dim")
    v_dim = cfg.int("v_head_dim")
    experts = cfg.int("n_routed_experts")
    shared = cfg.int("n_shared_experts", default=0, minimum=0)
    active = cfg.int("num_experts_per_tok")
    if active > experts:
        raise cfg.error("num_experts_per_tok", f"must be at most n_routed_experts ({experts})", active)
    dense_first = cfg.int("first_k_dense_replace", default=0, minimum=0)
    freq = cfg.int("moe_layer_freq", default=1)
    tied = cfg.flag("tie_word_embeddings", False)
    q_head = nope + rope
    # matmul weights per token of the attention: q (direct or through its bottleneck), the kv
    # latent and rotary key, the latent's up-projection to keys and values, the output
    q_weights = q_rank * h + heads * q_head * q_rank if q_rank else heads * q_head * h
    attn_weights = q_weights + (kv_rank + rope) * h + heads * (nope + v_dim) * kv_rank + h * heads * v_dim
    # scores over q_head wide keys, context over v_dim wide values: 2 s heads (q_head + v_dim) per
    # token, written as the workload's 4 s heads head_dim with head_dim their mean
    score_dim = (q_head + v_dim) / 2
    if score_dim != int(score_dim):
        raise cfg.error("v_head_dim", f"plus qk_nope_head_dim + qk_rope_head_dim ({q_head}) must be even "
                                      "(the attention FLOPs are written with their mean head width)", v_dim)
    score_dim = int(score_dim)

    m = HFModel()
    emb = m.layer("embed_tokens")
    m.add(emb, "model.embed_tokens.weight", vocab, h)
    n_moe = 0
    for i in range(n_layers):
        p = f"model.layers.{i}"
        attn = m.layer(f"{p}.self_attn", 2 * attn_weights + 4 * seq * heads * score_dim)
        m.attend(attn, heads, score_dim, seq, seq, causal=True)
        m.add(attn, f"{p}.input_layernorm.weight", h)
        a = f"{p}.self_attn"
        if q_rank:
            m.linear(attn, f"{a}.q_a_proj", q_rank, h)
            m.add(attn, f"{a}.q_a_layernorm.weight", q_rank)
            m.linear(attn, f"{a}.q_b_proj", heads * q_head, q_rank)
        else:
            m.linear(attn, f"{a}.q_proj", heads * q_head, h)
        m.linear(attn, f"{a}.kv_a_proj_with_mqa", kv_rank + rope, h)
        m.add(attn, f"{a}.kv_a_layernorm.weight", kv_rank)
        m.linear(attn, f"{a}.kv_b_proj", heads * (nope + v_dim), kv_rank)
        m.linear(attn, f"{a}.o_proj", h, heads * v_dim)
        moe = i >= dense_first and i % freq == 0
        if moe:
            n_moe += 1
            mlp = m.layer(f"{p}.mlp", 2 * h * experts + (active + shared) * 2 * 3 * h * moe_ff)
        else:
            mlp = m.layer(f"{p}.mlp", 2 * 3 * h * ff)
        m.add(mlp, f"{p}.post_attention_layernorm.weight", h)
        if moe:
            add_experts(m, cfg, mlp, f"{p}.mlp.experts", h, moe_ff, experts)
            m.add(mlp, f"{p}.mlp.gate.weight", experts, h)
            if family == "deepseek_v3":
                m.add(mlp, f"{p}.mlp.gate.e_score_correction_bias", experts)
            if shared:
                m.gated_mlp(mlp, f"{p}.mlp.shared_experts", h, moe_ff * shared)
        else:
            m.gated_mlp(mlp, f"{p}.mlp", h, ff)
    m.lm_head(h, vocab, tied)
    m.notes.append(f"multi-head latent attention: q {'through rank ' + str(q_rank) if q_rank else 'direct'}, keys "
                   f"and values through the rank-{kv_rank} latent plus a {rope}-wide rotary key; attention FLOPs "
                   f"4 s heads x {score_dim} (the mean of the {q_head}-wide scores and {v_dim}-wide values)")
    m.notes.append(moe_note(experts, active, shared) + f"; {n_moe} MoE layers, {n_layers - n_moe} dense "
                   "(first_k_dense_replace, moe_layer_freq)")
    if family == "deepseek_v3":
        m.notes.append("each router's routing bias (e_score_correction_bias, one per expert) is a tensor, as "
                       "MaxText holds it among the parameters")
    if getattr(cfg, "stacked_experts", False):
        m.notes.append("the experts of a layer stacked in one tensor per weight, as MaxText holds them "
                       "([experts x out, in]: one grouped matmul)")
    # activations: the MoE layers' widths stand for every block (the dense ones are few)
    shape = dict(h=h, heads=heads, head_dim=score_dim, q_dim=heads * q_head, kv_dim=heads * q_head,
                 qkv=heads * (2 * q_head + v_dim) + kv_rank + rope + q_rank, o_in=heads * v_dim,
                 ff=moe_ff * (active + shared), gated=True, layers=n_layers, ctx=seq,
                 attention_dropout=cfg.number("attention_dropout", 0.0) > 0, hidden_dropout=False, vocab=vocab,
                 predicted=seq, expert_copies=active)
    return m, shape, dict(tied=tied, window=None)
