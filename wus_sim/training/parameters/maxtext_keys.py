"""MaxText's config keys as a run gives them: read from its command line's ``KEY=VALUE`` words and
from its YAML config files, merged as MaxText merges them, each known to base.yml or not.

What each key does to a step is :mod:`.maxtext`'s table; this module knows MaxText's keys and
their defaults (``wus_sim/data/maxtext/base_keys.csv``, every key of base.yml at the pinned
commits, written by ``tests/tools/regenerate_maxtext_keys.py``), which of them change nothing in a
training step (:data:`NO_STEP_EFFECT`), and how the words and files are read.

Reading the words: the line MaxText is started with may be pasted whole. Its leading
``python3 -m MaxText.train MaxText/configs/base.yml`` (or ``python3 MaxText/train.py ...``,
``maxtext.trainers.pre_train.train``) is skipped, as are ``--flag`` words (a launcher's, not
MaxText's keys) and ``NAME=VALUE`` words whose NAME is upper case (environment variables such as
``LIBTPU_INIT_ARGS``); each skipped word is listed under ``-v``. A value is read as MaxText's
OmegaConf reads a command line: YAML scalars (``-1``, ``0.5``, ``true``, ``flash``), ``true``
and ``false`` in any case as booleans and nothing else (``yes`` stays text). A key given twice
takes its last value, as a config file's keys give way to the command line's (MaxText loads
the config file, then applies the command line's keys over it).
"""

import csv
from dataclasses import dataclass, field
from functools import lru_cache
import json
import re
import shlex
from pathlib import Path

from ...inputs.errors import ConfigError, did_you_mean

__all__ = ["BaseKey", "base_keys", "NO_STEP_EFFECT", "no_step_effect", "MaxTextInput", "read_words",
           "read_config_file", "maxtext_input", "parse_value", "BASE_KEYS_SOURCE"]

BASE_KEYS_FILE = Path(__file__).resolve().parents[2] / "data" / "maxtext" / "base_keys.csv"
BASE_KEYS_SOURCE = ("github.com/AI-Hypercomputer/maxtext, src/maxtext/configs/base.yml at "
                    "e591f30cbbf217ed67ef71263ec0538239f9c3b8 and the tiering recipes' commits "
                    "(wus_sim/data/maxtext/README.md)")


@dataclass(frozen=True)
class BaseKey:
    """One key of MaxText's base.yml."""

    name: str
    kind: str
    """``scalar``, ``list`` or ``mapping``."""
    defaults: tuple
    """Its default value (first) and the different defaults older pinned commits had; empty for a
    list or mapping (not kept: any value given for one is compared with nothing)."""
    source: str

    def is_default(self, value):
        """Whether *value* is a default of this key (numbers compare by value: 4 is 4.0)."""
        return self.kind == "scalar" and any(_same(value, d) for d in self.defaults)


def _same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


@lru_cache(maxsize=1)
def base_keys():
    """``{name: BaseKey}`` of every key of the pinned base.yml files, in base.yml's order."""
    from ...inputs.files import read_text

    out = {}
    for row in csv.DictReader(read_text(BASE_KEYS_FILE).splitlines()):
        defaults = () if row["kind"] != "scalar" else (json.loads(row["default"]),) + tuple(
            json.loads(row["also_default"]) if row["also_default"] else ())
        out[row["key"]] = BaseKey(row["key"], row["kind"], defaults, row["source"])
    return out


NO_STEP_EFFECT = (
    ("names, paths and what the run logs, writes or reports",
     ("run_name", "base_output_directory", "metrics_file", "gcs_metrics", "enable_wandb", "wandb_project_name",
      "wandb_run_name", "save_config_to_gcs", "log_period", "log_config", "enable_tensorboard",
      "use_vertex_tensorboard", "vertex_tensorboard_project", "vertex_tensorboard_region", "jax_cache_dir",
      "debug_sharding", "enable_checkpoint_cloud_logger", "enable_checkpoint_standard_logger", "prometheus_port",
      "jax_debug_log_modules", "jax_distributed_initialization_timeout", "abort_on_nan_loss",
      "abort_on_inf_loss", "enable_goodput_recording", "monitor_goodput", "goodput_upload_interval_seconds",
      "enable_pathways_goodput", "monitor_step_time_deviation", "step_deviation_interval_seconds",
      "enable_gcp_goodput_metrics", "enable_gcp_step_deviation_metrics",
      "report_heartbeat_metric_for_gcp_monitoring", "heartbeat_reporting_interval_in_seconds",
      "report_performance_metric_for_gcp_monitoring", "collect_stack_trace", "stack_trace_interval_seconds",
      "stack_trace_to_cloud", "write_estimator_result", "hf_access_token"),
     ("managed_mldiagnostics",)),
    ("checkpoints: saving, loading and converting them",
     ("enable_checkpointing", "async_checkpointing", "checkpoint_period", "save_checkpoint_on_start",
      "save_checkpoint_on_completion", "max_num_checkpoints_to_keep", "enable_continuous_checkpointing",
      "enable_single_replica_ckpt_restoring", "force_unroll", "enable_orbax_v1", "source_checkpoint_layout",
      "colocated_python_checkpointing", "enable_autocheckpoint", "load_parameters_path", "load_full_state_path",
      "enable_multi_tier_checkpointing", "mtc_data_parallelism", "enable_emergency_checkpoint",
      "local_checkpoint_directory", "local_checkpoint_period", "replicator_backup_interval_minutes",
      "use_replicator_service", "save_quantized_params_path", "checkpoint_is_quantized"),
     ("checkpoint_", "multi_tier_checkpointing_", "elastic_")),
    ("how many steps and the values of the learning rate, the optimizer's constants and the seeds "
     "(a step's work does not depend on them)",
     ("steps", "learning_rate", "lr_schedule_type", "learning_rate_final_fraction",
      "cosine_learning_rate_final_fraction", "warmup_steps_fraction", "learning_rate_schedule_steps",
      "adam_b1", "adam_b2", "adam_eps", "adam_eps_root", "adam_weight_decay", "data_shuffle_seed",
      "init_weights_seed", "enable_data_shuffling", "num_epoch", "dense_init_scale"),
     ("wsd_",)),
    ("where the data comes from and how it is tokenized and fed (the model counts every sequence at "
     "max_target_length tokens)",
     ("reuse_example_batch", "dataset_type", "dataset_path", "dataset_name", "eval_dataset_name", "train_split",
      "eval_split", "colocated_python_data_input", "tokenizer_path", "tokenizer_type", "use_chat_template",
      "chat_template_path", "chat_template", "tokenize_train_data", "tokenize_eval_data", "add_bos", "add_eos",
      "use_truncation", "max_corpus_chars", "train_data_columns", "train_data_column", "train_image_column",
      "default_prompt", "packing", "generate_padding_batch_train", "expansion_factor_real_data", "hf_path",
      "hf_name", "hf_data_dir", "hf_train_files", "hf_eval_split", "hf_eval_files"),
     ("grain_", "olmo_")),
    ("evaluation, run between training steps",
     ("eval_per_device_batch_size", "eval_data_columns", "eval_data_column", "eval_image_column",
      "generate_padding_batch_eval", "eval_start_step", "eval_interval", "eval_steps", "target_eval_loss",
      "custom_mesh_and_rule_for_eval", "logical_axis_rules_for_eval"),
     ()),
    ("profiling and dumps (a profiled step is timed as any other)",
     ("profiler", "upload_all_profiler_results", "skip_first_n_steps_for_profiler", "profiler_steps",
      "hide_profiler_step_metric", "profile_cleanly", "profile_periodically_period", "enable_tpu_profiling_options",
      "tpu_num_chips_to_profile_per_task", "tpu_num_sparse_core_tiles_to_trace", "tpu_num_sparse_cores_to_trace",
      "enable_jax_profiler", "jax_profiler_port", "profile_power_events", "dump_step"),
     ("dump_hlo", "dump_jaxpr", "xprof_")),
    ("inference, decoding and serving (not a training step)",
     ("max_prefill_predict_length", "prompt", "load_from_prefill_dir", "prefill_cache_dir",
      "autoregressive_decode_assert", "prefill_slice", "generate_slice", "enable_model_warmup",
      "enable_llm_inference_pool", "multi_sampling", "return_log_prob", "stack_prefill_result_cache",
      "prefill_cache_axis_order", "ar_cache_axis_order", "compute_axis_order", "reshape_q", "prefill_chunk_size",
      "use_chunked_prefill", "enable_prefix_caching", "prefix_caching_hbm_byte", "prefix_caching_dram_byte",
      "quantize_kvcache", "kv_quant_axis", "kv_quant_dtype", "mla_naive_kvcache", "ragged_block_size",
      "use_ragged_attention", "model_call_mode"),
     ("decode_sampling_", "inference_", "pagedattn_", "vllm_")),
    ("compiling ahead of time for a named slice (wus-sim's slice is --topology)",
     ("compiled_trainstep_file", "compile_topology", "compile_topology_num_slices", "internal_compile",
      "internal_compile_num_devices"),
     ()),
    ("which implementation builds the same computation (Linen or NNX modules, the partitioner, checks "
     "at trace time)",
     ("enable_nnx", "pure_nnx", "pure_nnx_decoder", "shardy", "remove_size_one_mesh_axis_from_type", "check_vma",
      "enable_single_controller", "skip_jax_distributed_system", "sharding_tolerance", "use_iota_embed"),
     ()),
    ("splash attention's and the grouped matmuls' kernel tiling (inside the calibrated per-op "
     "efficiency, not a separate choice in this model)",
     ("sa_block_q", "sa_block_kv", "sa_block_kv_compute", "sa_block_q_dkv", "sa_block_kv_dkv",
      "sa_block_kv_dkv_compute", "sa_block_q_dq", "sa_block_kv_dq", "sa_use_fused_bwd_kernel", "sa_bwd_dkv_megacore",
      "sa_q_layout", "sa_k_layout", "sa_v_layout", "use_splash_scheduler", "sa_fuse_reciprocal", "sa_use_base2_exp",
      "tile_activation_dim", "tile_batch_seq", "tile_weight_dim"),
     ("local_sa_", "local_use_splash", "wi_tile_", "wo_tile_")),
    ("post-training's constants, read only when its mode is on (use_dpo, use_sft, distillation: "
     "not modelled, accepted at their defaults only)",
     ("dpo_beta", "dpo_label_smoothing", "sft_train_on_completion_only"),
     ("distill_",)),
)
"""``(why, names, prefixes)``: the keys that change nothing in a training step as wus-sim models it,
accepted with any value and listed under ``-v`` with why."""


@lru_cache(maxsize=None)
def no_step_effect(key):
    """Why *key* changes nothing in a step (:data:`NO_STEP_EFFECT`), else ``None``."""
    for why, names, prefixes in NO_STEP_EFFECT:
        if key in names or key.startswith(prefixes):
            return why
    return None


@dataclass(frozen=True)
class MaxTextInput:
    """A MaxText run's keys as its sources give them, later sources winning."""

    values: dict
    """``{key: value}`` of every key the sources give (base.yml's defaults not filled in)."""
    where: dict = field(default_factory=dict)
    """``{key: source}``: the file or ``--maxtext`` that gave each key its value."""
    skipped: tuple = ()
    """``(word, why)`` of the words that are no key (a launcher's prefix, ``--flags``, environment
    variables), listed under ``-v``."""

    def given(self, key):
        return key in self.values

    def value(self, key):
        """The key's value: as given, else base.yml's default (``None`` for a list or mapping key)."""
        if key in self.values:
            return self.values[key]
        known = base_keys().get(key)
        return known.defaults[0] if known is not None and known.defaults else None

    def words(self):
        """The keys as one MaxText command line's words, ``key=value`` in the order given."""
        return " ".join(f"{k}={_word(v)}" for k, v in self.values.items())


def _word(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = str(value) if not isinstance(value, (list, dict)) else json.dumps(value)
    return shlex.quote(text) if text == "" or re.search(r"\s|['\"]", text) else text


_LAUNCHER = re.compile(r"(python[0-9.]*|-m|(src/)?(MaxText|maxtext)([./][\w./]*)?|[\w./-]*\.py|&&|export)")
"""Words of the launcher in front of MaxText's keys: ``python3 -m MaxText.train``, ``python3
MaxText/train.py``, ``maxtext.trainers.pre_train.train``, a shell's ``&&`` and ``export``."""
_KEY = re.compile(r"[a-z][a-z0-9_]*")
MAX_WORDS_CHARS = 100_000
"""Longest ``--maxtext`` text read (a pasted command line is a few hundred characters)."""


def parse_value(text):
    """One ``KEY=VALUE`` word's value as MaxText's OmegaConf command line reads it."""
    import yaml

    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        value = yaml.safe_load(text)  # "", null and ~ are None, as OmegaConf reads them
    except yaml.YAMLError:
        return text
    # YAML 1.1's other booleans (yes, on) and its dates are text to OmegaConf's command line
    ok = value is None or (isinstance(value, (int, float, str, list, dict)) and not isinstance(value, bool))
    return value if ok else text


def read_words(text, *, source="--maxtext"):
    """``(pairs, skipped)`` of a MaxText command line: ``[(key, value), ...]`` in order, and the
    ``(word, why)`` of the words skipped. A word that is neither is a one-line error."""
    if not isinstance(text, str):
        raise ConfigError("must be MaxText's KEY=VALUE words (text)", key_path=source, value=text)
    if len(text) > MAX_WORDS_CHARS:
        raise ConfigError(f"is longer than {MAX_WORDS_CHARS:,} characters", key_path=source, show_value=False)
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"cannot be split into words ({exc}); quote each value once", key_path=source,
                          value=text) from None
    pairs, skipped = [], []
    for word in words:
        key, eq, value = word.partition("=")
        if eq and _KEY.fullmatch(key):
            pairs.append((key, parse_value(value)))
        elif word.startswith("-") and word != "-m":
            skipped.append((word, "a launcher's option, not a MaxText key"))
        elif eq and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key):
            skipped.append((word, "an environment variable (MaxText's keys are lower case)"))
        elif word.endswith((".yml", ".yaml")):
            if Path(word).name != "base.yml":
                raise ConfigError("is a MaxText config file other than base.yml: give its keys with "
                                  "--maxtext-config FILE (base.yml's defaults are known)", key_path=source, value=word)
            skipped.append((word, "MaxText's base.yml, whose defaults wus-sim knows"))
        elif _LAUNCHER.fullmatch(word):
            skipped.append((word, "the launcher's command"))
        else:
            raise ConfigError("is not a MaxText KEY=VALUE word (keys are lower case: "
                              "per_device_batch_size=4)", key_path=source, value=word)
    return pairs, skipped


def read_config_file(path):
    """``[(key, value), ...]`` of a MaxText YAML config file (its own keys; a ``base_config`` naming
    base.yml is skipped: its defaults are known), and the skipped ``(word, why)``."""
    from ...inputs.config import load_yaml

    doc = load_yaml(path, what="MaxText config file", named_by="--maxtext-config")
    if not isinstance(doc, dict):
        raise ConfigError("must be a mapping of MaxText keys", file=path)
    pairs, skipped = [], []
    for key, value in doc.items():
        if key == "base_config":
            if Path(str(value)).name != "base.yml":
                raise ConfigError("names a config other than base.yml: give its keys with another "
                                  "--maxtext-config FILE first", file=path, key_path=key, value=value)
            skipped.append((f"base_config: {value}", "MaxText's base.yml, whose defaults wus-sim knows"))
            continue
        pairs.append((str(key), value))
    return pairs, skipped


def maxtext_input(files=(), words=()):
    """The :class:`MaxTextInput` of config *files* (paths, in order) then ``--maxtext`` *words*
    (texts, in order), later keys winning; an unknown key (in no pinned base.yml) is a one-line
    error naming every unknown one."""
    values, where, skipped = {}, {}, []
    sources = [(read_config_file(f), str(f)) for f in files]
    sources += [(read_words(w), "--maxtext") for w in words]
    for (pairs, skip), source in sources:
        skipped += skip
        for key, value in pairs:
            values.pop(key, None)  # the last one given, in the order given
            values[key] = value
            where[key] = source
    known = base_keys()
    unknown = [k for k in values if k not in known]
    if unknown:
        raise ConfigError(f"{'is not a key' if len(unknown) == 1 else 'are not keys'} of MaxText's base.yml"
                          f"{did_you_mean(unknown[0], known)}: {', '.join(unknown)} ({BASE_KEYS_SOURCE})",
                          key_path=where[unknown[0]], show_value=False)
    return MaxTextInput(values=values, where=where, skipped=tuple(skipped))
