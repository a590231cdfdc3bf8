"""Point parameters: the one table of every parameter a simulated point takes.

:data:`POINT_KEYS` holds, per parameter, its type, default, unit and rule. Everything
that takes point parameters is built from it and checked by it: experiment files
(:mod:`wus_sim.experiments.spec`), the command-line options (:mod:`wus_sim.cli.options`),
:class:`wus_sim.training.step.StepOptions`' defaults and :func:`wus_sim.experiments.records.simulate_point`, and
the results table's documentation. ``None`` (YAML ``null``) means "the model's own
default" (the workload's optimizer, the topology's link bandwidth, ...).
"""

from dataclasses import dataclass, field
import hashlib
import json

from ...hardware.mesh import DCN_AXES, MESH_AXES, mesh_json_schema, mesh_text
from ...hardware.network import DEFAULT_ROUTING
from ...hardware.topology_files import OVERRIDE_RANGES
from ...inputs.errors import ConfigError, did_you_mean, listed
from ...inputs.limits import MAX_REPLICAS, MAX_STEPS, RATE_RANGES
from ...model.memory import PAPER_PAIR as BOTH, STRATEGY_NAMES as STRATEGIES  # light: no planner at CLI start
from .maxtext_point import MAXTEXT_SCHEMA
from .param_checks import check_param
from .param_names import _check_calibration, _check_software_stack, _check_failed_links, _check_optimizer, _check_slow_links, _check_topology, _check_workload

__all__ = ["Param", "POINT_KEYS", "STRATEGY_CHOICES", "STRATEGY_SETS", "check_point_value", "check_param",
           "complete_point", "point_hash", "strategies_of", "default_of", "SMALL_ALLREDUCE_ALGORITHMS"]


STRATEGY_SETS = {"both": BOTH, "all": STRATEGIES}
"""What ``both`` and ``all`` name, in report order."""

STRATEGY_CHOICES = STRATEGIES + tuple(STRATEGY_SETS)
"""Values of the ``strategy`` key; ``both`` simulates replicated and sharded (the paper's pair) and
reports the speedup, ``all`` every strategy with each one's speedup over replicated."""



SMALL_ALLREDUCE_ALGORITHMS = ("auto", "ring", "halving-doubling", "recursive-doubling")
"""Values of ``small_allreduce_algorithm``: ``auto`` picks the fastest per all-reduce."""


def _algorithms():
    """Collective algorithms of the collective engine (imported when a point is checked)."""
    from ...collectives import ALGORITHMS

    return tuple(ALGORITHMS)


def _grad_dtypes():
    from ...inputs.units import GRAD_DTYPES  # light: the table lives in units, not in workloads

    return tuple(GRAD_DTYPES)


def _routings():
    """Routing modes of the network model (imported when a point is checked)."""
    from ...hardware.network import ROUTINGS

    return tuple(ROUTINGS)


# ---------------------------------------------------------------- the table
@dataclass(frozen=True)
class Param:
    """One point parameter: its type, default, unit and rule.

    Why a second table type beside :class:`wus_sim.inputs.keys.Key`: a ``Key`` is one key of one
    file format, read once by its loader, which keeps compound rules to itself. A ``Param`` is
    checked wherever a point comes from (experiment YAML, command-line options, the Python API),
    so it carries what a file key never needs: ``null`` meaning "the model's default", a check
    that a named input (workload, topology, ...) loads, and choices computed late from layers
    above the inputs (collective algorithms, routings). Folding those into ``Key`` would put
    those layers behind every file loader.
    """

    name: str
    kind: str
    """``'name'`` (checked by *check*), ``'choice'``, ``'int'``, ``'number'``, ``'bool'``,
    ``'wrap'`` (a bool, or one bool per torus axis)."""
    default: object = None
    """Value when the experiment does not set it; ``None`` = the model's own default."""
    meaning: str = ""
    """One line for columns.md: what the parameter is, and what ``None`` means."""
    unit: str = ""
    """The unit the user writes (and that the results column carries)."""
    required: bool = False
    nullable: bool = True
    """Whether ``null`` is allowed (it means the model's default)."""
    choices: object = None
    """Tuple of allowed values, or a function returning it (``'choice'``)."""
    minimum: float = None
    maximum: float = None
    positive: bool = False
    check: object = field(default=None, compare=False)
    """``check(value, base_dir) -> value`` for names; raises ConfigError/UnknownNameError."""
    rule_text: str = None
    """The rule in words of a ``'name'`` parameter that is not a name (``failed_links``)."""
    value_schema: dict = field(default=None, compare=False)
    """JSON Schema of a value where the kind's own does not say it (a mesh: text or a mapping)."""

    def rule(self, *, option=False):
        """The rule in words, for error messages and columns.md."""
        if self.rule_text:
            text = self.rule_text
        elif self.kind == "choice":
            text = "one of " + ", ".join(self._choices())
        elif self.kind == "int":
            text = "a whole number"
        elif self.kind == "number":
            text = "a number"
        elif self.kind == "bool":
            text = "true or false"
        elif self.kind == "wrap":
            text = "true/false, or a list with one true/false per torus axis"
        else:
            text = f"{'an' if self.name[0] in 'aeiou' else 'a'} {self.name} name or path"
        bounds = []
        if self.positive:
            bounds.append("> 0")
        if self.minimum is not None:
            bounds.append(f">= {_bound(self.minimum)}")
        if self.maximum is not None:
            bounds.append(f"<= {_bound(self.maximum)}")
        if bounds:
            text += " " + " and ".join(bounds)
        if self.nullable and not self.required and not option:
            text += " (or null)"  # YAML can say null; a command-line option is simply left out
        return text

    def _choices(self):
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def json_schema(self):
        """JSON Schema of one value of this parameter (what ``base`` may set it to)."""
        if self.kind == "choice":
            out = {"enum": list(self._choices())}
        elif self.kind in ("int", "number"):
            out = {"type": "integer" if self.kind == "int" else "number"}
            if self.positive:
                out["exclusiveMinimum"] = 0
            if self.minimum is not None:
                out["minimum"] = self.minimum
            if self.maximum is not None:
                out["maximum"] = self.maximum
        elif self.kind == "bool":
            out = {"type": "boolean"}
        elif self.kind == "wrap":
            out = {"oneOf": [{"type": "boolean"},
                             {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}]}
        elif self.value_schema is not None:
            out = dict(self.value_schema)
        elif self.rule_text:  # a count or a list in words (failed_links: 2 or "12+x,40-y")
            out = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}]}
        else:
            out = {"type": "string", "minLength": 1}
        if self.nullable and not self.required:
            out = {"anyOf": [out, {"type": "null"}]}
        text = self.meaning + (f" Unit: {self.unit}." if self.unit else "")
        return {"description": text, **out} if self.default is None else \
            {"description": text, **out, "default": self.default}


def _bound(x):
    if float(x).is_integer() and abs(x) >= 1e16 and int(x) & (int(x) - 1) == 0:
        return f"2^{int(x).bit_length() - 1}"  # a guard against absurd values, e.g. --limit's 2^62
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _check_mesh(value, base_dir=None):
    return mesh_text(value)


def _check_dcn_mesh(value, base_dir=None):
    return mesh_text(value, axes=DCN_AXES, key_path="dcn_mesh")


def _check_maxtext(value, base_dir=None):
    from .maxtext_point import maxtext_text

    return maxtext_text(value)


def _remat_policy(value, base_dir=None):
    """A MaxText remat policy's name, or ``custom:NAME=PLACE,...``, in its canonical spelling."""
    from ...model.layer_stack import canonical_policy

    return canonical_policy(value)


def _table(*params):
    return {p.name: p for p in params}


POINT_KEYS = _table(
    Param("workload", "name", required=True, nullable=False,
          meaning="Workload profile: a shipped name (see `wus-sim describe workload`) or a path to a workload YAML.",
          check=_check_workload),
    Param("topology", "name", required=True, nullable=False,
          meaning="TPU slice: a shipped name (tpu-v3-512), a path, or inline torus:16x16 / mesh:8x8 / "
                  "torus:8x8x8 (1 core per chip, generic chip).",
          check=_check_topology),
    Param("optimizer", "name",
          meaning="Optimizer (see `wus-sim describe optimizer`); null = the workload's default.",
          check=_check_optimizer),
    Param("strategy", "choice", default="both", nullable=False, choices=STRATEGY_CHOICES,
          meaning="Weight-update strategy simulated for the point; 'both' (replicated and sharded) and 'all' "
                  "(adds fully-sharded) give one row each and the speedup of each over replicated."),
    Param("per_replica_batch", "int", minimum=1, maximum=2**24, unit="examples",
          meaning="Examples per replica per step; null = global_batch / replicas, else the MLPerf v0.6 run's "
                  "on that slice, else the workload's default."),
    Param("global_batch", "int", minimum=1, maximum=2**31, unit="examples",
          meaning="Examples per step over all replicas (must divide by the replicas); set this or "
                  "per_replica_batch, not both."),
    Param("link_GBps", "number", minimum=RATE_RANGES["link_GBps"][0], maximum=OVERRIDE_RANGES["link_GBps"][1], unit="GB/s",
          meaning="ICI bandwidth per link and direction (10^9 B/s); null = the topology's."),
    Param("hop_latency_us", "number", minimum=0, maximum=OVERRIDE_RANGES["hop_latency_us"][1], unit="us",
          meaning="Latency per ICI hop; null = the topology's."),
    Param("wraparound", "wrap",
          meaning="Wraparound links per torus axis (true = torus ring, false = mesh line); null = the topology's."),
    Param("cores_per_chip", "int", minimum=1, maximum=OVERRIDE_RANGES["cores_per_chip"][1],
          meaning="Cores (replicas) per chip; null = the topology's."),
    Param("megacore", "bool",
          meaning="TPU v4/v5p megacore: one replica per chip over both its TensorCores (the chip's HBM, bandwidth "
                  "and peak), instead of one per TensorCore (Cloud TPU v4 docs); false = the topology's "
                  "cores_per_chip (one per TensorCore). Not with cores_per_chip, nor on chips with one core or on "
                  "v2/v3. null = the chip's default (chips.yaml megacore): a chip on v4 and v5p, as JAX counts "
                  "devices (unless cores_per_chip is set), a TensorCore elsewhere; until 2026-12 the default was "
                  "false on every chip. The row holds the value used."),
    Param("spatial_ways", "int", minimum=1, maximum=2**17, unit="cores",
          meaning="Cores each replica is spatially partitioned over (replicas = cores / spatial_ways; must "
                  "divide the slice's cores); null = the MLPerf v0.6 run's on that slice, else 1. The row "
                  "holds the value used."),
    Param("remat", "choice", default="none", nullable=False, choices=("none", "selective", "layer", "full"),
          meaning="Rematerialisation: none keeps every activation for backward; selective keeps each layer's input "
                  "and its weight matmuls' outputs and recomputes the elementwise and attention-score work "
                  "(MaxText's `minimal`; a term's `selective_bytes_per_element`); layer keeps each layer's input "
                  "and recomputes the layer in backward (per-layer checkpointing, Korthikanti et al. 2022; "
                  "MaxText's `full`); full keeps every ceil(sqrt(L))-th layer's input (Chen et al. 2016). Layer "
                  "and full add one forward pass of compute, selective its attention matmuls and elementwise "
                  "work; only activation terms that declare their `layers` are recomputed."),
    Param("remat_policy", "name", check=_remat_policy,
          meaning="MaxText's remat_policy by name, for a stack of transformer blocks: what each block saves for "
                  "backward (query_proj, key_proj, value_proj, out_proj, mlpwi_0, mlpwi_1, mlpwo and always its "
                  "input), what it offloads to host memory (the *_offloaded ones: moved over the chip's host link "
                  "beside the compute, host_offload_s where they outlast it) and what it recomputes in backward "
                  "(the rest, at its FLOP share of the layer's forward). MaxText's full is remat: layer (not our "
                  "remat: full). `custom:NAME=PLACE,...` is MaxText's custom policy: NAME one of "
                  "decoder_layer_input, query_proj, key_proj, value_proj, out_proj, mlpwi_0, mlpwi_1, mlpwo, PLACE "
                  "device, offload or remat (unnamed: recomputed, the block input kept on the device). null = "
                  "`remat` decides; not with a remat other than none. See "
                  "docs/precision-and-remat.md."),
    Param("collective_matmul", "bool", default=True, nullable=False,
          meaning="Device mesh with a tensor axis: each tensor-parallel all-gather and reduce-scatter runs as "
                  "XLA's collective matmul (Wang et al. 2023), decomposed into steps beside the matmul it feeds "
                  "or follows; tensor_comm_s is the exposed part: one step + what the collective outlasts the "
                  "matmul by. false: every tensor collective on the critical path, whole."),
    Param("capacity_factor", "number", default=-1.0, nullable=False, minimum=-1, maximum=64,
          meaning="Mixture of experts: MaxText's capacity_factor (src/maxtext/configs/base.yml: -1.0, 'no dropping "
                  "by default'). <= 0: dropless, each expert runs the tokens routed to it, no padding (the default); "
                  "> 0: each expert's token buffer is its even share x capacity_factor (tokens beyond it dropped, "
                  "the rest padding: src/maxtext/layers/moe.py, generate_masks), so its matmuls and the tokens the "
                  "expert all-to-alls carry scale by it. Models without MoE layers are unchanged."),
    Param("expert_load_imbalance", "number", default=1.0, nullable=False, minimum=1, maximum=4096,
          meaning="Mixture of experts, dropless, with an expert mesh axis: the busiest routed expert's tokens over "
                  "its even share (1 = even routing, the default: an assumption, the balance a load-balancing loss "
                  "drives routing to, Fedus et al. 2021, Switch Transformers, arXiv 2101.03961, sec. 2.2; measure "
                  "or sweep it); the other experts share the rest evenly, and the busiest device's expert matmuls "
                  "and all-to-alls set the step (at most the routed experts). No effect with a capacity_factor "
                  "> 0 (its buffers are fixed) or without an expert axis."),
    Param("pipeline_microbatches", "int", default=None, minimum=1, maximum=2**20, unit="microbatches",
          meaning="Mesh with a pipeline axis: MaxText's num_pipeline_microbatches, the microbatches a data-parallel "
                  "group's batch is cut into (a multiple of the stages, dividing the batch); null = the stages "
                  "(MaxText's default, src/maxtext/configs/types.py)."),
    Param("pipeline_layers_per_stage", "int", default=1, minimum=1, maximum=2**20, nullable=False, unit="blocks",
          meaning="Mesh with a pipeline axis, circular schedule: MaxText's num_layers_per_pipeline_stage (base.yml: "
                  "1), blocks a stage runs a pass; repeats = blocks / (stages x this), which must be whole."),
    Param("pipeline_schedule", "choice", default="circular", nullable=False, choices=("circular", "gpipe", "1f1b"),
          meaning="Mesh with a pipeline axis: circular = MaxText's (src/maxtext/layers/pipeline.py: all forwards, "
                  "then the backwards, the blocks passed round the stages repeats times; bubble (stages-1)/(repeats x "
                  "microbatches) of the busy time, every microbatch held); gpipe = Huang et al. 2019 (bubble "
                  "(stages-1)/microbatches, every microbatch held); 1f1b = Narayanan et al. 2021's PipeDream-Flush "
                  "(the same bubble, at most stages microbatches held)."),
    Param("quantization", "choice", default="none", nullable=False, choices=("none", "int8"),
          meaning="Matmul precision: none = bf16 at the chip's bf16 peak; int8 = the weight matmuls, forward and "
                  "backward, at the chip's int8 peak (chips.yaml `peak_int8_TOPs`), as AQT-quantized training "
                  "runs them (MaxText `quantization: int8`); attention-score matmuls, elementwise work, the "
                  "optimizer and the collectives unchanged; the same mxu_efficiency applies."),
    Param("activation_model", "choice", default="xla", nullable=False, choices=("xla", "unfused"),
          meaning="How activation memory is counted: xla = what the TPU compiler keeps for backward after "
                  "fusion (matmul and non-fusable op inputs; elementwise chains recomputed); unfused = every "
                  "elementwise output kept (Korthikanti et al. 2022's GPU count). See docs/model-error.md."),
    Param("algorithm", "choice", default="2d", nullable=False, choices=_algorithms,
          meaning="Collective algorithm of the gradient reduction and weight all-gather."),
    Param("bidirectional", "bool",
          meaning="Run each ring phase in both directions at once (half the data each way); null = yes for "
                  "ring algorithms (TPU all-reduces use both link directions). A mesh axis keeps its one folded "
                  "ring either way: it already uses both directions of every link."),
    Param("routing", "choice", default=DEFAULT_ROUTING, nullable=False, choices=_routings,
          meaning="Network routing: cut-through (the head moves on at once, as on a packet-switched link; the "
                  "default, which the measured runs support) or store-and-forward (each hop receives the whole "
                  "message first). They differ on multi-hop edges: mesh folded rings, detours around failed links."),
    Param("bucket_MiB", "number", positive=True, maximum=2**20, unit="MiB",
          meaning="Gradient fusion bucket size (2^20 B); null = the planner's default."),
    Param("overlap_grad_reduce", "bool", default=True, nullable=False,
          meaning="Start each bucket's gradient reduction as soon as backward has produced it."),
    Param("overlap_all_gather", "bool", default=True, nullable=False,
          meaning="Sharded: overlap the weight all-gather with the next step's forward "
                  "(false: at the end of the step)."),
    Param("gather_prefetch", "int", default=None, minimum=0, maximum=2**20, unit="buckets",
          meaning="Fully-sharded: buckets whose weight all-gather may run ahead of the compute (0 = each gather "
                  "waits until its bucket is needed); each one more holds one more bucket of full weights. "
                  "null = a layer ahead, as PyTorch FSDP prefetches the next module: enough buckets that the "
                  "next layer's gathers are all issued when the current layer starts."),
    Param("keep_gathered_weights", "bool", default=False, nullable=False,
          meaning="Fully-sharded: keep each bucket's gathered weights from its forward to its backward (one "
                  "all-gather per bucket instead of two; every bucket's full weights live at the end of forward)."),
    Param("grad_dtype", "choice", choices=_grad_dtypes,
          meaning="Gradient dtype on the wire (bf16 halves collective bytes); null = the workload's."),
    Param("mxu_efficiency", "number", minimum=RATE_RANGES["mxu_efficiency"][0], maximum=1,
          meaning="Fraction of matrix-unit peak reached by forward/backward; null = the compute model's default."),
    Param("steps", "int", default=3, minimum=2, maximum=MAX_STEPS, nullable=False, unit="steps",
          meaning="Consecutive training steps simulated; the step time is the steady-state period."),
    Param("bn_group_replicas", "int", default=1, minimum=1, maximum=MAX_REPLICAS, nullable=False, unit="replicas",
          meaning="Cross-replica batch norm: replicas that all-reduce their batch statistics in every "
                  "batch-norm layer (1 = local batch norm)."),
    Param("small_allreduce_algorithm", "choice", default="auto", nullable=False,
          choices=SMALL_ALLREDUCE_ALGORITHMS,
          meaning="Algorithm of the latency-bound all-reduces (batch-norm statistics, the LARS/LAMB norms of "
                  "sharded weights): auto = the fastest, as simulated, of the step's `algorithm` (ring for a "
                  "batch-norm group), halving-doubling and recursive-doubling (power-of-two groups), the way "
                  "collective libraries pick per call (NCCL's cost table; MPICH's short-message recursive "
                  "doubling, Thakur et al. 2005); or one of them always."),
    Param("slices", "int", minimum=1, maximum=1024, unit="slices",
          meaning="Multislice: identical slices of `topology` joined by the data-center network (DCN); replicas = "
                  "slices x replicas per slice; null = the topology file's `multislice.slices`, else 1."),
    Param("mesh", "name", rule_text="axis=size pairs over data, pipeline, fsdp, context, tensor, expert (e.g. "
                                    "fsdp=64,tensor=4; one size may be -1, the rest), or a mapping",
          meaning="Device mesh in a slice (MaxText's ici_*_parallelism): data (weights replicated; `strategy` says "
                  "how they are updated), fsdp (weights, gradients and slots sharded, gathered per layer), context "
                  "(each sequence split, K/V all-gathered per attention layer), tensor (each layer split, Megatron-LM), "
                  "expert (MoE layers' routed experts split, tokens exchanged by all-to-alls) and pipeline (the blocks "
                  "split into stages, MaxText's stage); context and expert shard the other weights as fsdp; their "
                  "product is the slice's devices (chips with megacore, TensorCores otherwise), missing axes 1, one "
                  "may be -1: the rest; null = data over every device (today's data parallelism). See docs/mesh.md.",
          check=_check_mesh, value_schema=mesh_json_schema(MESH_AXES)),
    Param("dcn_mesh", "name", rule_text="axis=size pairs over data, pipeline, fsdp, expert (e.g. data=4; one size "
                                        "may be -1, the rest), or a mapping",
          meaning="Mesh across slices (MaxText's dcn_*_parallelism): data, pipeline, fsdp and/or expert over the "
                  "data-center network; its product is the number of slices (it sets `slices`; with an axis of "
                  "-1, the rest of `slices`); null = data over the slices.",
          check=_check_dcn_mesh, value_schema=mesh_json_schema(DCN_AXES)),
    Param("dcn_GBps", "number", minimum=RATE_RANGES["dcn_GBps"][0], maximum=1e6, unit="GB/s",
          meaning="Multislice: DCN bandwidth per chip, one direction (10^9 B/s); null = the topology file's, else "
                  "the chip's `dcn_GBps` in chips.yaml (with its source; a chip without one: 6.25 GB/s, an assumption the "
                  "text output prints). Unused with one slice."),
    Param("dcn_latency_us", "number", minimum=0, maximum=1e6, unit="us",
          meaning="Multislice: latency of one DCN exchange; null = the topology file's, else 10 us (an "
                  "assumption: no published figure). Unused with one slice."),
    Param("shard_across_slices", "bool", default=True, nullable=False,
          meaning="Multislice, sharded update: shard over every replica of every slice (DCN reduce-scatter and "
                  "all-gather); false: within each slice only (DCN all-reduce, every slice updates its copy)."),
    Param("failed_links", "name", rule_text="a count K, or comma-separated cables CHIP+AXIS such as 12+x,40-y",
          meaning="Failed ICI cables (both directions down): K chosen at random (seeded by seed), or a list "
                  "(12+x: the cable from chip 12 to its +x neighbour); routes detour around them; null = none.",
          check=_check_failed_links),
    Param("slow_links", "name", rule_text="LIST:FACTOR or K:FACTOR with FACTOR >= 1, e.g. 12+x,40-y:4 or 2:4",
          meaning="Slowed ICI cables: both directions run at their bandwidth / FACTOR; the cables as in "
                  "failed_links (K random ones are drawn after the failed ones, among the rest); null = none.",
          check=_check_slow_links),
    Param("seed", "int", minimum=0, maximum=2**53,
          meaning="Seed of numpy.random.default_rng that draws the K random failed and slow cables; null = 0."),
    Param("steps_per_loop", "int", default=100, minimum=1, maximum=10**6, nullable=False,
          meaning="Training steps per device loop: the host's round trip to the device (``host_loop_s``, "
                  "a compute parameter) is paid once per loop and shared by its steps. 100 is an assumption; "
                  "Google's MLPerf v0.6 TPU runs set 157-1252 (``--iterations_per_loop``)."),
    Param("software_stack", "name",
          meaning="Software stack whose unexplained fixed cost per step the calibration applies (one fitted "
                  "value per stack it was measured on, e.g. tf1-tpuestimator); null = the calibration's "
                  "default stack.",
          check=_check_software_stack),
    Param("calibration", "name",
          meaning="Calibrated chip parameters: a shipped name, a path, or 'none' for the uncalibrated physics; "
                  "null = the shipped default calibration.",
          check=_check_calibration),
    Param("price_usd_per_chip_hour", "number", positive=True, maximum=1e4, unit="USD/chip-hour",
          meaning="Price of one chip for an hour that the cost columns use (cost_usd_per_step = chips x step_time_s "
                  "x price / 3600), e.g. a committed-use price; null = the chip's public on-demand price in "
                  "chips.yaml (`price_usd_per_chip_hour`, cited). Changes no time. The row holds the price used "
                  "(empty: the chip has none, and the cost columns are empty)."),
    Param("maxtext", "name", rule_text="a mapping of MaxText keys (base.yml's) to values, or their KEY=VALUE words",
          meaning="A MaxText run as the point's input: its keys set workload (model_name), global_batch "
                  "(per_device_batch_size x devices), mesh, dcn_mesh and slices (ici_*, dcn_*_parallelism, -1 the "
                  "rest; num_slices), remat_policy, quantization, optimizer, grad_dtype, strategy and megacore (a "
                  "device on v4/v5p is a chip); a key that changes nothing in a step is accepted, one not modelled "
                  "is an error. A point key set to another value than its default keeps it where the run leaves "
                  "the MaxText key at base.yml's default. Kept as its KEY=VALUE words; null = none. See "
                  "docs/maxtext.md.",
          check=_check_maxtext, value_schema=MAXTEXT_SCHEMA),
    Param("maxtext_approximate", "bool", default=False, nullable=False,
          meaning="With maxtext: run the MaxText keys wus-sim only approximates (custom_mesh, weight_dtype "
                  "bfloat16, capacity_factor, megablox and sparse_matmul false) as their approximations "
                  "(docs/maxtext.md) instead of refusing the point."),
)
"""Every key a point may have, in column order. ``wus_sim.experiments.records.simulate_point`` accepts exactly these."""


def check_point_value(key, value, *, file=None, key_path=None, base_dir=None):
    """Validate *value* for point parameter *key*; return it normalised.

    Errors name *file*, *key_path* (default: *key*), the value and the rule.
    """
    key_path = key_path or key
    param = POINT_KEYS.get(key)
    if param is None:
        raise ConfigError(f"is not a point parameter{did_you_mean(key, POINT_KEYS)}; known: {listed(POINT_KEYS, 450, cut=450)}",
                          file=file, key_path=key_path)
    return check_param(param, value, file=file, key_path=key_path, base_dir=base_dir)


def complete_point(values):
    """A full point: every key of :data:`POINT_KEYS` in table order, defaults filled in."""
    unknown = set(values) - set(POINT_KEYS)
    if unknown:
        raise ConfigError(f"unknown point parameters {sorted(unknown)}; known: {listed(POINT_KEYS, 450, cut=450)}")
    return {key: values.get(key, param.default) for key, param in POINT_KEYS.items()}


def point_hash(point):
    """Stable 16-hex-digit id of a point's parameters (key order does not matter)."""
    text = _HASH_ENCODER.encode(point)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_HASH_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str, check_circular=False)
"""``json.dumps(point, sort_keys=True, separators=(",", ":"), default=str)``'s text (the hash
every journal holds), from one encoder without the circular-reference check (a point is a flat
mapping): a sweep hashes 100,000 points before its first one runs."""


def strategies_of(point):
    """The strategies a point simulates: ``('replicated', 'sharded')`` for ``'both'``, every
    strategy for ``'all'``."""
    strategy = point.get("strategy", "both")
    return STRATEGY_SETS.get(strategy, (strategy,))


def default_of(name):
    """The default of point parameter *name* (``None``: the model's own)."""
    return POINT_KEYS[name].default
