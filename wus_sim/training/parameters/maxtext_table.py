"""The MaxText translation's table: each MaxText key wus-sim reads and what it becomes (:data:`RULES`),
the keys it can run approximately (:data:`APPROXIMATED`), the ones not modelled (:data:`NOT_MODELLED`)
and MaxText's mesh axes. :mod:`.maxtext` applies them; docs/maxtext.md's tables are generated
from them and from :data:`~.maxtext_keys.NO_STEP_EFFECT` (``python -m wus_sim.docs``), so the page
says what the code does."""

from dataclasses import dataclass

__all__ = ["Rule", "RULES", "APPROXIMATED", "NOT_MODELLED", "MAXTEXT_AXES", "REMAT_TENSOR_KEYS", "region",
           "render_page"]


@dataclass(frozen=True)
class Rule:
    """One row of the translation table."""

    keys: str
    """The MaxText key(s)."""
    ours: str
    """What wus-sim takes: an option and its point key."""
    rule: str


RULES = (
    Rule("model_name", "WORKLOAD (point key workload)",
         "the shipped workload of that name (`wus-sim list workloads`; a name not shipped: one line with the "
         "closest ones); base.yml's `default` is MaxText's default model, shipped as workload `default`"),
    Rule("max_target_length", "the workload's sequence",
         "tokens per sequence; a model of MaxText's library at another length than its shipped workload's is "
         "rebuilt from its model file at it (workload NAME@TOKENS, e.g. llama3.1-8b@8192); another workload "
         "must be at the run's length (`wus-sim import-workload CONFIG --sequence-length N`); left out, "
         "base.yml's 2048 applies, as in MaxText"),
    Rule("per_device_batch_size", "--global-batch (point key global_batch)",
         "x every device of every slice (a device: a chip on v4 and v5p, a TensorCore elsewhere); a fraction "
         "where the product is whole"),
    Rule("ici_*_parallelism", "--mesh (point key mesh)",
         "data, fsdp, tensor and each axis the mesh has (expert, pipeline for MaxText's stage, context); "
         "fsdp_transpose multiplies fsdp (the same weights sharded over a second fsdp-like axis); one -1 takes "
         "the rest of the slice's devices; the product must be the slice's devices"),
    Rule("dcn_*_parallelism", "--dcn-mesh (point key dcn_mesh)",
         "data, fsdp and each axis the mesh has across slices (expert, pipeline) (fsdp_transpose multiplies fsdp); one -1 takes the rest of the slices; on one slice "
         "MaxText ignores them, and so does wus-sim (said in a note)"),
    Rule("num_slices", "--slices (point key slices)",
         "-1 (base.yml's: detected) takes --slices, else the topology file's, else 1"),
    Rule("remat_policy", "--remat-policy (point key remat_policy)",
         "the same name (minimal, save_dot_except_mlpwi, save_dot_except_mlp, save_qkv_proj, save_out_proj, "
         "qkv_proj_offloaded, minimal_offloaded, full); MaxText's full is its own name here (= --remat layer, "
         "never --remat full); none: --remat none"),
    Rule("decoder_layer_input, query_proj, key_proj, value_proj, out_proj, mlpwi_0, mlpwi_1, mlpwo",
         "--remat-policy custom:NAME=PLACE,...",
         "with remat_policy=custom: each device, offload or remat (MaxText's custom policy); unused otherwise, "
         "as in MaxText"),
    Rule("quantization", "--quantization (point key quantization)", "`\"\"` (base.yml's): none; int8: int8"),
    Rule("attention", "the workload's attention",
         "autoselected (base.yml's) and flash: the workload's fused (flash) attention; dot_product: a workload "
         "whose scores go through HBM"),
    Rule("opt_type, gradient_clipping_threshold", "--optimizer (point key optimizer)",
         "adamw: adamw; adam_pax: adamw (Adam with decoupled weight decay, the same two slots); sgd: sgd; with "
         "+clip when gradient_clipping_threshold > 0 (base.yml's 1.0: one global norm over the gradients)"),
    Rule("dtype, weight_dtype", "the workload's dtypes",
         "bfloat16 activations and float32 weights, gradients and slots (base.yml's), as the shipped workloads "
         "have them"),
    Rule("grad_dtype", "--grad-dtype (point key grad_dtype)", "float32: the workload's; bfloat16: bf16"),
    Rule("shard_optimizer_over_data", "--strategy (point key strategy)",
         "false (base.yml's): replicated (the data axis all-reduces the gradients and each data replica "
         "updates its fsdp shard); true: sharded (the update sharded over the data axis too)"),
    Rule("allow_split_physical_axes", "always", "every mesh is laid out as create_device_mesh(allow_split_physical_"
         "axes=True) lays it"),
    Rule("scan_layers, hardware", "assumed", "true and tpu (base.yml's): a scanned layer stack on TPUs"),
    Rule("capacity_factor", "--capacity-factor (point key capacity_factor), a MoE model's",
         "-1 (base.yml's): dropless, even routing; > 0: each expert's buffer padded to it x its even share (its "
         "matmuls and all-to-alls x it)"),
    Rule("num_pipeline_microbatches", "--pipeline-microbatches (point key pipeline_microbatches)",
         "with a pipeline axis: -1 (base.yml's): the stages; else a multiple of them dividing a group's batch"),
    Rule("num_layers_per_pipeline_stage", "--pipeline-layers-per-stage (point key pipeline_layers_per_stage)",
         "with a pipeline axis: 1 (base.yml's): MaxText's circular schedule, repeats = blocks / (stages x it); "
         "num_pipeline_repeats, pipeline_parallel_layers, pipeline_delay_activation_forwarding and "
         "pipeline_fsdp_ag_* accepted at base.yml's defaults only"),
)
"""The translation table: every MaxText key wus-sim reads, what it becomes and how."""

APPROXIMATED = {
    "custom_mesh": ("the mesh laid out as create_device_mesh(allow_split_physical_axes=True) lays it, not on "
                    "MaxText's custom ring", lambda v: v not in ("", None)),
    "optimize_mesh_for_tpu_v6e": ("the mesh laid out as create_device_mesh lays it", lambda v: v is True),
    "weight_dtype": ("master weights, gradients and optimizer slots in the workload's float32",
                     lambda v: v == "bfloat16"),
    "megablox": ("the experts' matmuls as grouped matmuls of the routed tokens (no dense dispatch and combine "
                 "einsums)", lambda v: v is False),
    "sparse_matmul": ("the experts' matmuls as grouped matmuls of the routed tokens (no dense dispatch and combine "
                      "einsums)", lambda v: v is False),
}
"""Keys a run may ask to approximate (``--maxtext-approximate``, point key ``maxtext_approximate``):
``key: (what wus-sim runs instead, whether a value needs it)``. The tiering validation runs its
recipes so (wus_sim/data/validation/README.md)."""

NOT_MODELLED = (
    ("dcn_context_parallelism, the other axes (sequence, tensor_sequence, autoregressive, diloco)",
     "an axis the mesh does not have (read from wus_sim.hardware.mesh.MESH_AXES: an axis added there is read)"),
    ("context_parallel_strategy other than all_gather (ring, ulysses, usp), context_parallel_load_balance: false",
     "the context axis is MaxText's default attention: K and V all-gathered, the causal work balanced "
     "(docs/mesh.md, the context axis)"),
    ("gradient_accumulation_steps", "one step is one optimizer update"),
    ("quantization other than int8 (fp8, nanoo_fp8, int4w, ...)", "only int8 matmuls are modelled"),
    ("remat_policy minimal_with_context, save_dot_with_context_except_mlp, *_with_quantization", "not among the "
     "policies the model knows"),
    ("scan_layers: false, dtype other than bfloat16, matmul_precision, opt_type: muon, use_dpo, use_sft, ...",
     "every other key of base.yml is accepted at its default only"),
)
"""The keys that change a step and are not modelled, by group, with why (docs/maxtext.md)."""

MAXTEXT_AXES = {"data": "data", "fsdp": "fsdp", "fsdp_transpose": "fsdp", "tensor": "tensor", "expert": "expert",
                "pipeline": "pipeline", "context": "context"}
"""MaxText's mesh axis (as its ``ici_*_parallelism`` keys name it) -> wus-sim's axis, used when
the mesh has that axis."""

REMAT_TENSOR_KEYS = ("decoder_layer_input", "indexer_cutoff_threshold", "context", "mlpwi", "mlpwi_0", "mlpwi_1",
                     "mlpwo", "moe_mlpwi_0", "moe_mlpwi_1", "moe_mlpwo", "query_proj", "key_proj", "value_proj",
                     "kv_proj", "qkv_proj", "out_proj", "query_wa_proj", "kv_wa_proj", "mla_q", "mla_kv",
                     "attention_out", "engram")
"""base.yml's per-tensor keys of ``remat_policy: custom`` (device, offload or remat)."""


REGION = r"<!-- maxtext:([a-z\-]+) -->\n(.*?)<!-- /maxtext -->"
"""A generated region of docs/maxtext.md: its name and its text."""


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def region(name):
    """The Markdown of region *name* of docs/maxtext.md: ``reads`` (:data:`RULES`), ``approximated``
    (:data:`APPROXIMATED`), ``not-modelled`` (:data:`NOT_MODELLED`), ``no-effect``
    (:data:`~.maxtext_keys.NO_STEP_EFFECT`, with the keys of base.yml each group takes)."""
    from .maxtext_keys import NO_STEP_EFFECT, base_keys

    if name == "reads":
        rows = ["| MaxText key | wus-sim | rule |", "|---|---|---|"]
        rows += [f"| {_cell(r.keys)} | {_cell(r.ours)} | {_cell(r.rule)} |" for r in RULES]
    elif name == "approximated":
        rows = ["| MaxText key | when | what `--maxtext-approximate` runs instead |", "|---|---|---|"]
        when = {"custom_mesh": "a name other than hybrid_ring_64x4, hybrid_ring_32x8 (laid out as MaxText lays "
                               "them); any under plan --search", "optimize_mesh_for_tpu_v6e": "true",
                "weight_dtype": "bfloat16", "megablox": "false", "sparse_matmul": "false"}
        rows += [f"| `{k}` | {when[k]} | {_cell(what)} |" for k, (what, _) in APPROXIMATED.items()]
    elif name == "not-modelled":
        rows = ["| MaxText keys | why not |", "|---|---|"]
        rows += [f"| {_cell(keys)} | {_cell(why)} |" for keys, why in NOT_MODELLED]
    elif name == "no-effect":
        keys = list(base_keys())
        rows = ["| why a step does not change | base.yml's keys |", "|---|---|"]
        for why, names, prefixes in NO_STEP_EFFECT:
            taken = [k for k in keys if k in names or k.startswith(prefixes)]
            rows.append(f"| {_cell(why)} | {', '.join(f'`{k}`' for k in taken)} |")
    else:
        return f"(no region {name!r}: remove it)\n"
    return "\n".join(rows) + "\n"


def render_page(text):
    """docs/maxtext.md (*text*, as committed) with each generated region rewritten from the tables."""
    import re

    return re.sub(REGION, lambda m: f"<!-- maxtext:{m.group(1)} -->\n{region(m.group(1))}<!-- /maxtext -->", text,
                  flags=re.S)
