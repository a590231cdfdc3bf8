"""The shipped GPT-3 175B workload: parameters and FLOPs derived by hand from its sizes.

Sizes: Brown et al. 2020 (arXiv 2005.14165), table 2.1 (96 layers, d_model 12,288, 96 heads,
d_ff = 4 d_model, 2,048-token context); vocabulary 50,304, 16,384 learned positions and the
output head tied to the token embedding as MaxText's configs/models/gpt3-175b.yml sets them
(github.com/google/maxtext: vocab_size, trainable_position_size, logits_via_embedding)."""

from wus_sim.model.workload_files import load_workload

L, H, HEADS, FF, SEQ, VOCAB, POSITIONS = 96, 12288, 96, 49152, 2048, 50304, 16384


def test_parameter_count_by_hand():
    # per layer: two layer norms (scale + bias) 4h, fused QKV h x 3h + 3h, output projection
    # h x h + h, MLP h x ff + ff and ff x h + h; plus token and position embeddings and the final
    # layer norm (the head reuses the token embedding)
    per_layer = 4 * H + (3 * H * H + 3 * H) + (H * H + H) + (H * FF + FF) + (FF * H + H)
    expected = L * per_layer + VOCAB * H + POSITIONS * H + 2 * H
    w = load_workload("gpt3-175b")
    assert w.params == expected == 174_780_997_632
    # Brown et al.'s 175.0 B at vocabulary 50,257 and 2,048 positions; MaxText's padded vocabulary
    # and larger position table move it by 0.1 %
    assert abs(w.params - 175.0e9) / 175.0e9 < 0.002


def test_forward_flops_by_hand():
    # matmuls 2 x MACs per token, attention scores + weighted sum 4 s h per token per layer,
    # output head 2 h V (tied, still a matmul)
    per_token = L * (2 * (4 * H * H + 2 * H * FF) + 4 * SEQ * H) + 2 * H * VOCAB
    w = load_workload("gpt3-175b")
    assert w.fwd_flops_per_example == per_token * SEQ
    assert len(w.attention) == L and {(a.heads, a.head_dim, a.query_tokens) for a in w.attention} == \
        {(HEADS, H // HEADS, SEQ)}
