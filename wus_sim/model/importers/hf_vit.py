"""``vit`` (``ViTForImageClassification``): an image cut into ``patch_size`` squares, each
patch linearly embedded (a stride-``patch_size`` convolution) and treated as a token, one
learned class token in front, a pre-norm encoder with LayerNorm and a GELU MLP, and a linear
classifier on the class token. Tensor names as in ``transformers``' ``modeling_vit.py``
(Dosovitskiy et al. 2021, arXiv 2010.11929); the patch kernel is written in the workload format's
``[kh, kw, cin, cout]`` layout (the checkpoint stores ``[cout, cin, kh, kw]``; both are accepted).
There is no vocabulary: the output is ``num_labels`` classes (``len(id2label)``).
"""

from ...inputs.limits import IMPORT_MAX
from .hf_model import HFModel, encoder_widths

__all__ = ["vit", "vit_tokens"]


def vit_tokens(cfg):
    """Tokens per image: its patches plus the class token."""
    image, patch = cfg.int("image_size"), cfg.int("patch_size")
    if image % patch:
        raise cfg.error("patch_size", f"must divide image_size ({image})", patch)
    tokens = (image // patch) ** 2 + 1
    limit, what = IMPORT_MAX["positions"]
    if tokens > limit:  # the sequence every layer's activations and attention scale with
        raise cfg.error("image_size", f"/ patch_size ({patch}) squared + 1 is {tokens:,} tokens, over the importer's "
                                      f"limit of {limit:,} {what}", image)
    return tokens


def _labels(cfg):
    if "num_labels" in cfg.doc:
        return cfg.int("num_labels")
    labels = cfg.doc.get("id2label")
    if isinstance(labels, dict) and labels:
        return len(labels)
    return 2  # transformers' PretrainedConfig default


def vit(cfg, family, seq):
    h, n_layers, heads, ff = encoder_widths(cfg)
    channels = cfg.int("num_channels", default=3)
    patch = cfg.int("patch_size")
    tokens = vit_tokens(cfg)
    if seq != tokens:
        raise cfg.error("image_size", f"gives {tokens} tokens per image ({tokens - 1} patches and the class "
                                      f"token), not the {seq} asked: ViT's tokens are its patches; set "
                                      "image_size or patch_size in the config instead of a sequence length",
                        cfg.doc.get("image_size"))
    bias = cfg.flag("qkv_bias", True)
    labels = _labels(cfg)
    patches = tokens - 1
    m = HFModel()
    emb = m.layer("vit.embeddings", 2 * h * channels * patch * patch * patches / tokens)
    m.add(emb, "vit.embeddings.cls_token", 1, 1, h)
    m.add(emb, "vit.embeddings.position_embeddings", 1, tokens, h)
    m.add(emb, "vit.embeddings.patch_embeddings.projection.weight", patch, patch, channels, h)
    m.add(emb, "vit.embeddings.patch_embeddings.projection.bias", h)
    for i in range(n_layers):
        p = f"vit.encoder.layer.{i}"
        attn = m.layer(f"{p}.attention", 2 * 4 * h * h + 4 * tokens * h)
        m.attend(attn, heads, h // heads, tokens, tokens)
        m.layer_norm(attn, f"{p}.layernorm_before", h)
        for proj in ("query", "key", "value"):
            m.linear(attn, f"{p}.attention.attention.{proj}", h, h, bias)
        m.linear(attn, f"{p}.attention.output.dense", h, h, True)
        mlp = m.layer(f"{p}.mlp", 2 * 2 * h * ff)
        m.layer_norm(mlp, f"{p}.layernorm_after", h)
        m.linear(mlp, f"{p}.intermediate.dense", ff, h, True)
        m.linear(mlp, f"{p}.output.dense", h, ff, True)
    head = m.layer("classifier", 2 * h * labels / tokens)  # on the class token, once per image
    m.layer_norm(head, "vit.layernorm", h)
    m.linear(head, "classifier", labels, h, True)
    m.notes.append(f"patches as tokens: {patches} patches of {patch}x{patch} plus the class token, {tokens} "
                   f"tokens per image; no vocabulary: a {labels}-class head on the class token")
    shape = dict(h=h, heads=heads, head_dim=h // heads, q_dim=h, kv_dim=h, ff=ff, gated=False, layers=n_layers,
                 ctx=tokens, attention_dropout=cfg.number("attention_probs_dropout_prob", 0.0) > 0,
                 hidden_dropout=cfg.number("hidden_dropout_prob", 0.0) > 0, vocab=labels, predicted=1)
    return m, shape, dict(tied=False, window=None, example_unit="image", labels=labels)
