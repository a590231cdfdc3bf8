"""The tensor list one Hugging Face config describes, as the family builders of
:mod:`wus_sim.model.importers.hf_families` fill it: layers in forward order with their forward FLOPs per
token, every trainable tensor with its checkpoint name and shape, the attention score matrices,
the tied copies a checkpoint may carry, and the notes the import prints (what is approximated).
"""

__all__ = ["HFModel", "encoder_widths"]


def encoder_widths(cfg):
    """``(hidden, layers, heads, intermediate)`` of a BERT-style config (``hidden_size``,
    ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size``), heads dividing the width."""
    h = cfg.int("hidden_size")
    n_layers = cfg.int("num_hidden_layers")
    heads = cfg.int("num_attention_heads")
    if h % heads:
        raise cfg.error("num_attention_heads", f"must divide hidden_size ({h})", heads)
    return h, n_layers, heads, cfg.int("intermediate_size")


class HFModel:
    """The tensors, layers, FLOPs and notes of one config, built by a family function."""

    def __init__(self):
        self.layers = []    # [name, fwd FLOPs per token]
        self.tensors = []   # [name, shape, layer index]
        self.tied = {}      # checkpoint name of a tied copy -> the tensor it copies
        self.attention = []  # the workload file's attention entries: each attention layer's scores
        self.notes = []     # what the import approximates or leaves out, said in its output

    def attend(self, layer, heads, head_dim, query_tokens, key_tokens, causal=False):
        """Layer *layer* attends: its FLOPs hold ``4 x key_tokens x heads x head_dim`` per token of
        score and context matmuls, and its score matrix is ``heads x query x key`` per sequence;
        *causal* for a decoder's self-attention (each token sees only those before it)."""
        entry = {"layer": self.layers[layer][0], "heads": heads, "head_dim": head_dim,
                 "query_tokens": query_tokens, "key_tokens": key_tokens}
        if causal:
            entry["causal"] = True
        self.attention.append(entry)

    def layer(self, name, flops=0.0):
        self.layers.append([name, float(flops)])
        return len(self.layers) - 1

    def add(self, layer, name, *shape):
        self.tensors.append([name, list(shape), layer])

    def linear(self, layer, name, rows, cols, bias=False):
        """An ``nn.Linear`` weight ``[out, in]`` (and its bias ``[out]``) named ``NAME.weight``."""
        self.add(layer, f"{name}.weight", rows, cols)
        if bias:
            self.add(layer, f"{name}.bias", rows)

    def layer_norm(self, layer, name, width):
        """A LayerNorm's ``weight`` and ``bias``."""
        self.add(layer, f"{name}.weight", width)
        self.add(layer, f"{name}.bias", width)

    def lm_head(self, h, vocab, tied):
        """The final RMSNorm and output head of the llama-style decoders (tied: no tensor of its own)."""
        head = self.layer("lm_head", 2 * h * vocab)
        self.add(head, "model.norm.weight", h)
        if tied:
            self.tied["lm_head.weight"] = "model.embed_tokens.weight"
        else:
            self.add(head, "lm_head.weight", vocab, h)

    def gated_mlp(self, layer, prefix, h, ff, bias=False):
        """A SwiGLU/GeGLU MLP's ``gate_proj``, ``up_proj`` and ``down_proj`` (llama's names)."""
        for proj, rows, cols in (("gate_proj", ff, h), ("up_proj", ff, h), ("down_proj", h, ff)):
            self.linear(layer, f"{prefix}.{proj}", rows, cols, bias)
