"""The MaxText model keys the importer knows (:mod:`.maxtext_model`): those it reads with their
``base.yml`` defaults, those it accepts because they change no tensor and no FLOP, the run keys a
model file may carry, and the decoder blocks and features it refuses, each with why.

Every value and key here is MaxText's at one commit (:data:`MAXTEXT_COMMIT`): ``base.yml`` is
``src/maxtext/configs/base.yml``, the blocks are ``src/maxtext/models/<block>.py`` and the layers
``src/maxtext/layers/`` (attentions.py, moe.py, linears.py, decoders.py).
"""

__all__ = ["MAXTEXT_COMMIT", "MAXTEXT_SOURCE", "BASE_DEFAULTS", "NO_SHAPE_KEYS", "RUN_KEYS", "REFUSED_BLOCKS",
           "REFUSED_FEATURES", "BLOCK_FLAGS", "MODEL_KEYS", "is_multimodal_key", "key_kind", "is_maxtext_model"]

MAXTEXT_COMMIT = "e591f30cbbf217ed67ef71263ec0538239f9c3b8"
MAXTEXT_SOURCE = f"github.com/AI-Hypercomputer/maxtext at {MAXTEXT_COMMIT}"

BASE_DEFAULTS = {
    # the model MaxText trains when no model_name is given ("default"): a llama2 block of these sizes
    "decoder_block": "llama2", "global_parameter_scale": 1, "base_emb_dim": 2048, "base_num_query_heads": 16,
    "base_num_kv_heads": 16, "base_mlp_dim": 7168, "base_num_decoder_layers": 16, "head_dim": 128,
    "mlp_activations": ["silu", "linear"], "vocab_size": 32000, "logits_via_embedding": False,
    "max_target_length": 2048, "enable_dropout": True, "dropout_rate": 0.0,
    # mixtures of experts
    "num_experts": 1, "num_experts_per_tok": 1, "base_moe_mlp_dim": -1, "shared_experts": 0,
    "first_num_dense_layers": 0, "interleave_moe_layer_step": 1, "routed_bias": False, "mlp_bias": False,
    # multi-head latent attention (attention_type mla)
    "attention_type": "global", "q_lora_rank": 0, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128,
    # attention and norms the blocks read from the config
    "attention_bias": False, "attention_sink": False, "use_qk_norm": False, "qk_norm_with_scale": True,
    "sliding_window_size": 0, "chunk_attn_window_size": 0, "nope_layer_interval": -1,
    "use_post_attn_norm": False, "use_post_ffw_norm": False, "attn_logits_soft_cap": 0.0,
    "final_logits_soft_cap": 0.0, "trainable_position_size": -1,
}
"""base.yml's value of every key the importer reads (MaxText ``base.yml`` at :data:`MAXTEXT_COMMIT`)."""

NO_SHAPE_KEYS = frozenset({
    # rotary positions and their scaling: a function of the position, no tensor and no matmul
    "rope_max_timescale", "rope_min_timescale", "rope_type", "rope_factor", "rope_use_scale",
    "rope_linear_scaling_factor", "rope_interleave", "rope_truncate", "rope_attention_scaling", "rope_pairwise",
    "local_rope_max_timescale", "max_position_embeddings", "original_max_position_embeddings", "beta_fast",
    "beta_slow", "mscale", "temperature_tuning", "use_untrainable_positional_embedding", "use_iota_embed",
    # numerics and the output head's scaling
    "normalization_layer_epsilon", "normalize_embedding_logits", "logits_dot_in_fp32", "cast_logits_to_fp32",
    "mlp_activations_limit", "dense_init_scale",
    # routing rules: which experts a token goes to, not how many nor how large they are
    "routed_score_func", "routed_scaling_factor", "norm_topk_prob", "load_balance_loss_weight",
    "routed_bias_update_rate", "log_moe_bias_norms", "n_routing_groups", "topk_routing_group",
    # the same elements stored fused, and how MaxText groups layers for its scan
    "fused_qkv", "fused_mlp", "inhomogeneous_layer_cycle_interval",
    # names
    "model_name", "tokenizer_type",
})
"""Keys that change no tensor and no FLOP of the model: accepted and not read."""

RUN_KEYS = frozenset({
    "opt_type", "adam_b1", "adam_b2", "adam_eps", "adam_weight_decay", "gradient_clipping_threshold",
    "dataset_path", "dataset_name", "eval_dataset_name", "eval_per_device_batch_size", "checkpoint_period",
    "target_eval_loss", "logical_axis_rules", "override_logical_axis_rules", "mesh_axes", "data_sharding",
    "shard_mode", "use_batch_split_schedule", "remove_size_one_mesh_axis_from_type", "scan_layers", "megablox",
    "sparse_matmul", "attention",
})
"""Keys of the training run that some model files set (gpt3-175b.yml's optimizer, deepseek3's sharding
rules): not part of the workload; recorded in its ``sources.maxtext_run_keys`` (a run takes them
through ``--maxtext``)."""

_EVERY_OTHER = "MaxText's test blocks, not models"
REFUSED_BLOCKS = {
    "deepseek4": "DeepSeek-V4's compressed attention (compress_ratios, o_lora_rank, o_groups), hyper-connections "
                 "(mhc_expansion_rate) and hash-routed expert layers (first_num_hash_layers) are not modelled",
    "gemma4": "Gemma 4's global layers have their own head width and KV heads (global_head_dim, "
              "global_num_kv_heads) and take their values from the keys' projection (share_kv_projections): "
              "attention whose shapes change from layer to layer is not modelled",
    "gemma4_small": "Gemma 4 E2B/E4B add per-layer input embeddings (hidden_size_per_layer_input) and layers that "
                    "reuse an earlier layer's keys and values (num_kv_shared_layers), besides Gemma 4's global "
                    "layers: not modelled",
    "qwen3_next": "three layers in four are Gated DeltaNet linear attention (gdn_*: a convolution and a recurrent "
                  "state instead of attention scores), which is not modelled",
    "qwen3_5": "three layers in four are Gated DeltaNet linear attention (gdn_*), which is not modelled, and its "
               "model files add a vision encoder",
    "qwen3_custom_moe": "attention outputs and expert inputs pass through narrower projections "
                        "(attention_output_dim, moe_expert_input_dim) that no published model has: not modelled",
    "simple": _EVERY_OTHER, "simple_mlp": _EVERY_OTHER, "default": _EVERY_OTHER,
}
"""MaxText decoder blocks the importer refuses, with why."""

REFUSED_FEATURES = {
    "use_multimodal": (False, "the vision encoder (and audio encoder) it adds is not modelled"),
    "use_audio": (False, "the audio encoder is not modelled"),
    "mtp_num_layers": (0, "multi-token prediction's extra layers are not modelled"),
    "use_indexer": (False, "DeepSeek Sparse Attention's indexer (its projections and the top-k keys each query "
                           "keeps) is not modelled"),
    "engram_layers": ([], "engram layers (n-gram memory lookups) are not modelled"),
    "mhc_expansion_rate": (1, "manifold-constrained hyper-connections are not modelled"),
    "first_num_hash_layers": (0, "hash-routed expert layers are not modelled"),
    "share_kv_projections": (False, "values taken from the keys' projection are not modelled"),
    "global_head_dim": (0, "global layers of another head width are not modelled"),
    "global_num_kv_heads": (0, "global layers with their own KV heads are not modelled"),
    "num_kv_shared_layers": (0, "layers that reuse an earlier layer's keys and values are not modelled"),
    "hidden_size_per_layer_input": (0, "per-layer input embeddings are not modelled"),
    "attention_output_dim": (-1, "a projection of the attention output to another width is not modelled"),
    "moe_expert_input_dim": (-1, "a projection of the experts' input to another width is not modelled"),
    "qk_norm_with_scale": (True, "query and key norms without a scale are not modelled"),
}
"""Keys whose every value but MaxText's default (given first) adds what the importer cannot build."""

BLOCK_FLAGS = {
    # block: {key: the value the block's models have (another builds tensors the importer does not)}
    "gemma2": {"use_post_attn_norm": True, "use_post_ffw_norm": True},
    "gemma3": {"use_post_attn_norm": True, "use_post_ffw_norm": True},
    "qwen2": {"use_qk_norm": False},
    "qwen3": {"use_qk_norm": True}, "qwen3_moe": {"use_qk_norm": True}, "olmo3": {"use_qk_norm": True},
    "envy": {"use_qk_norm": True, "use_post_ffw_norm": True},
    "gpt_oss": {"attention_bias": True, "attention_sink": True, "mlp_bias": True, "routed_bias": True},
    "llama4": {"shared_experts": 1},
    "deepseek": {"attention_type": "mla"},
    "gpt3": {"logits_via_embedding": True},
}
"""Flags a block reads whose other value the importer does not build, and the value it needs."""

_MULTIMODAL = ("vision_encoder_block", "image_placeholder", "use_mrope", "mrope_section",
               "position_id_per_seconds", "vision_output_length")


def is_multimodal_key(key):
    """A key of the vision or audio encoder (unused unless ``use_multimodal``)."""
    return key.endswith(("_for_vit", "_for_audio")) or key in _MULTIMODAL


MODEL_KEYS = frozenset(BASE_DEFAULTS) | NO_SHAPE_KEYS | frozenset(REFUSED_FEATURES)
"""Every model key the importer knows (the encoder keys aside: :func:`is_multimodal_key`)."""


def key_kind(key):
    """``"read"``, ``"no-shape"``, ``"run"``, ``"feature"``, ``"multimodal"`` or ``None`` (unknown)."""
    if key in BASE_DEFAULTS:
        return "read"
    if key in NO_SHAPE_KEYS:
        return "no-shape"
    if key in RUN_KEYS:
        return "run"
    if key in REFUSED_FEATURES:
        return "feature"
    return "multimodal" if is_multimodal_key(key) else None


def is_maxtext_model(doc):
    """Whether the mapping *doc* is a MaxText model file by its keys: no ``model_type`` (a Hugging Face
    config's) and a ``decoder_block`` or a ``base_*`` size, or only MaxText model keys."""
    if not isinstance(doc, dict) or "model_type" in doc:
        return False
    return any(k == "decoder_block" or str(k).startswith("base_") for k in doc) or (
        bool(doc) and all(isinstance(k, str) and key_kind(k) in ("read", "no-shape", "feature") for k in doc))
