"""Regenerate the shipped workload YAML files from the reference tensor lists.

Not runtime code and not shipped (it lives outside the package): wus-sim only reads
the YAML files this script writes into ``wus_sim/data/workloads``.
Run it from the repository root when ``tests/data/model_tensors.json`` changes::

    python tests/tools/regenerate_workloads.py [--json tests/data/model_tensors.json]

What comes from where:

* tensor names, shapes, totals and forward FLOPs per unit: ``tests/data/model_tensors.json``
  (transcribed from the MLPerf v0.6 reference implementations, github.com/mlcommons/training,
  and Google's TPU code, github.com/mlcommons/training_results_v0.6; see tests/data/README.md).
* layer of each tensor: derived from its name (one layer = one weight-bearing op
  or sub-block, in forward order = order of first appearance in the json, which
  lists every model front to back).
* FLOPs per layer: derived from shapes (2 x MACs of each matmul/conv; convs times
  their output positions) and checked to sum exactly to the json's ``fwd_flops``
  (Mask R-CNN's total is a rough estimate: its structural estimate is scaled to
  that total).
* activation-memory terms: derived from structure here, factors cited beside them.
* MLPerf v0.6 TPU configurations and default optimizers: Google's MLPerf v0.6 TPU-v3
  run scripts, code and logs in github.com/mlcommons/training_results_v0.6 (the same
  runs as wus_sim/data/validation); BERT and NCF (no v0.6 TPU run): the reference
  implementations and papers named in their specs.

The generated files say at the top that they are generated; edit this script, not them.
"""

import argparse
import json
import math
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "wus_sim" / "data" / "workloads"
DEFAULT_JSON = REPO / "tests" / "data" / "model_tensors.json"


def size(shape):
    return math.prod(shape)


# ----------------------------------------------------------------- layer keys
def strip_leaf(name, leaves):
    """Drop trailing path components that name a parameter of a layer (kernel, bn/gamma...)."""
    parts = name.split("/")
    while len(parts) > 1 and parts[-1] in leaves:
        parts.pop()
    return "/".join(parts)


CNN_LEAVES = {"kernel", "bias", "gamma", "beta", "bn"}


def layer_cnn(name):
    return strip_leaf(name, CNN_LEAVES)


def layer_transformer(name):
    parts = name.split("/")
    if len(parts) >= 3 and parts[1].startswith("layer_"):
        return "/".join(parts[:3])            # encoder/layer_0/self_attention, .../ffn
    return "/".join(parts[:2])                # embedding_shared_weights, */output_normalization


def layer_bert(name):
    parts = name.split("/")
    if parts[0] == "encoder":
        return "/".join(parts[:3])            # encoder/layer_0/{attention,intermediate,output}
    if parts[0] == "cls":
        return "/".join(parts[:2])            # cls/predictions, cls/seq_relationship
    return parts[0]                           # embeddings, pooler


def layer_gnmt(name):
    base = name.split(" (shared")[0]
    if ".attn." in base:
        return "decoder.att_rnn.attn"         # Bahdanau attention: one block
    return base.rsplit(".", 1)[0]             # drop weight_ih / bias_hh / weight


def layer_ncf(name):
    base = name.rsplit(".", 1)[0]
    return "embeddings" if base.endswith("_embed") else base


# ------------------------------------------------------------ FLOPs per layer
def matmul_flops(tensors):
    """2 x MACs per unit for the dense weights (``.../kernel``) of a layer (one row of input per unit)."""
    return sum(2 * size(s) for n, s in tensors if n.rsplit("/", 1)[-1] == "kernel")


def resnet50_conv_hw(name, input_hw=224):
    """Output side length of a ResNet-50 v1.5 conv (stride 2 in the 3x3 of each first block)."""
    parts = name.split("/")
    group = parts[0]
    if group == "conv0":
        return input_hw // 2
    stride = {"group1": 4, "group2": 8, "group3": 16, "group4": 32}[group]
    if group != "group1" and parts[1] == "block1" and parts[2] == "conv1x1a":
        stride //= 2                           # v1.5: the first 1x1 runs before the stride
    return input_hw // stride


def ssd_conv_hw(name):
    """Output side length of an SSD-ResNet34 (300x300) conv.

    MLPerf SSD: ResNet-34 up to group3 with group3 kept at stride 8 (38x38), then
    extra blocks down to 19, 10, 5, 3, 1; heads run on the six feature maps."""
    parts = name.split("/")
    if parts[0] == "resnet34":
        return {"conv0": 150, "group1": 75, "group2": 38, "group3": 38}[parts[1]]
    if parts[0] == "ssd":
        block, kind = parts[1].split("-")
        b = int(block[len("block"):])
        into = {7: 38, 8: 19, 9: 10, 10: 5, 11: 3}
        out = {7: 19, 8: 10, 9: 5, 10: 3, 11: 1}
        return into[b] if kind == "conv1x1" else out[b]
    level = int(parts[1].split("-")[1])
    return {3: 38, 4: 19, 5: 10, 6: 5, 7: 3, 8: 1}[level]


def conv_flops(tensors, hw_of):
    total = 0
    for n, s in tensors:
        if n.endswith("kernel") and len(s) == 4:
            hw = hw_of(n)
            total += 2 * size(s) * hw * hw
        elif n.endswith("kernel"):
            total += 2 * size(s)
    return total


def conv_outputs(tensors, hw_of):
    """Conv output elements (H x W x C_out) of a layer, per example."""
    return sum(hw_of(n) ** 2 * s[-1] for n, s in tensors if n.endswith("kernel") and len(s) == 4)


# Mask R-CNN structural estimate (the json's 570 GFLOP total is "rough"):
MRCNN_IMAGE = 1024          # side of the (padded) training image; an assumption, see notes
MRCNN_BOX_ROIS = 512        # RoIs sampled per image for the box head (Detectron default)
MRCNN_MASK_ROIS = 128       # positive RoIs for the mask head (512 x 0.25 positive fraction)


def mrcnn_hw_count(name):
    """(positions per example, is_per_roi) for a Mask R-CNN kernel."""
    parts = name.split("/")
    side = MRCNN_IMAGE
    if parts[0] == "resnet50":
        stride = {"group2": 8, "group3": 16, "group4": 32}[parts[1]]
        if parts[2] == "block1" and parts[3] == "conv1x1a":
            stride //= 2
        return (side // stride) ** 2
    if parts[0] == "fpn":
        level = int(parts[1][-1])
        return (side // 2 ** level) ** 2
    if parts[0].startswith("rpn"):
        return sum((side // 2 ** level) ** 2 for level in range(2, 7))   # P2..P6
    if parts[0] == "box_head":
        return MRCNN_BOX_ROIS
    if parts[0] == "mask_head":
        per_roi = 14 * 14 if parts[1].startswith("mask-conv") or parts[1] == "conv5-mask" else 28 * 28
        return per_roi * MRCNN_MASK_ROIS
    raise ValueError(name)


# ------------------------------------------------------------------ the specs
REPO_V06 = "github.com/mlcommons/training_results_v0.6"
JSON_PATH = "tests/data/model_tensors.json"
CITE_JSON = ("transcribed from the MLPerf v0.6 reference implementations (github.com/mlcommons/training, v0.6) "
             f"and Google's TPU code ({REPO_V06}, Google/benchmarks/*/implementations); origin and checks in "
             "tests/data/README.md")
CITE_RUNS = (f"Google's MLPerf v0.6 TPU-v3 submission, {REPO_V06}: run scripts "
             "Google/benchmarks/<bench>/tpu-v3-<cores>/run_and_time.sh and logs Google/results/tpu-v3-<cores>/<bench>")
CITE_CODE = f"Google's MLPerf v0.6 TPU-v3 code, {REPO_V06}"
CITE_KORTHIKANTI = ("Korthikanti et al., 'Reducing Activation Recomputation in Large Transformer Models', "
                    "arXiv 2205.05198, sec. 4.1: per layer s*b*h*(34 + 5*a*s/h) bytes with 16-bit activations "
                    "(attention block 11sbh + 5as^2b, MLP 19sbh, two layer norms 4sbh)")


def cfg(topology, global_batch, replicas, ways, per_replica, note=None):
    d = {"topology": topology, "global_batch": global_batch, "replicas": replicas,
         "spatial_ways": ways, "per_replica_batch": per_replica}
    if note:
        d["note"] = note
    return d


XLA_ENCODER_WHY = "XLA after fusion, per token and layer in units of h (bf16): Q and K 4, V 2, attention-output projection input 2, its dropout mask 1; MLP activation-function input 8 (4h), its dropout mask 1; two layer-norm inputs 4; per head and key: softmax output 2 and dropout mask 1 (3*a*s/h). Not kept: the layer-norm outputs (QKV and MLP inputs), the activation function's output and the dropped probabilities, which fuse into the matmuls that read them and are recomputed in backward; Korthikanti et al. 2022's per-tensor count less those (docs/model-error.md)"
"""What the TPU compiler keeps of a transformer encoder layer (the activation model xla)."""


def spec_resnet50(data):
    t = data["resnet50_v1.5"]
    return dict(
        name="resnet50", key="resnet50_v1.5",
        description="ResNet-50 v1.5 on ImageNet (224x224), MLPerf v0.6 image classification",
        layer_of=layer_cnn,
        layer_flops=lambda name, ts: conv_flops(ts, resnet50_conv_hw),
        flops=dict(unit="image", units_per_example=1, example_unit="image",
                   counts="conv and fc matmul work only (2 x MACs, conv = kernel x output positions); "
                          "batch norm, ReLU, pooling and the loss not counted"),
        activations=[dict(
            what="conv outputs: sum over the 53 convs of H_out x W_out x C_out at 224x224",
            elements=sum(conv_outputs([(n, s)], resnet50_conv_hw) for n, s in t["tensors"]),
            bytes_per_element=4,
            why="bf16 conv output kept for batch-norm backward + bf16 BN/ReLU output kept as the next "
                "conv's input (2 x 2 B); ReLU masks and BN statistics are small")],
        default_optimizer="lars",
        default_per_replica_batch=16,
        per_replica_why="per-replica batch of the largest MLPerf v0.6 run (v3-2048, 32768 / 2048)",
        configs=[cfg("tpu-v3-32", 4096, 32, 1, 128), cfg("tpu-v3-128", 16384, 128, 1, 128),
                 cfg("tpu-v3-256", 32768, 256, 1, 128), cfg("tpu-v3-512", 32768, 512, 1, 64),
                 cfg("tpu-v3-1024", 32768, 1024, 1, 32),
                 cfg("tpu-v3-2048", 32768, 2048, 1, 16,
                     "distributed batch norm over groups of 8 cores (--distributed_group_size=8 in "
                     "Google/benchmarks/resnet/tpu-v3-2048/run_and_time.sh)")],
        optimizer_cite=f"LARS: --enable_lars=True in the ResNet-50 run scripts, {REPO_V06}",
        sources={"optimizer": f"{CITE_CODE} (Google/benchmarks/resnet: --enable_lars=True, log opt_name): "
                              "LARS, momentum 0.9; BN and bias skipped by LARS scaling"},
    )


def spec_ssd(data):
    t = data["ssd_resnet34_300"]
    return dict(
        name="ssd-resnet34", key="ssd_resnet34_300",
        description="SSD with a ResNet-34 backbone on COCO (300x300), MLPerf v0.6 object detection",
        layer_of=layer_cnn,
        layer_flops=lambda name, ts: conv_flops(ts, ssd_conv_hw),
        flops=dict(unit="image", units_per_example=1, example_unit="image",
                   counts="conv matmul work only (2 x MACs x output positions) over backbone, extra blocks "
                          "and class/box heads; box decoding, NMS-free loss matching not counted"),
        activations=[dict(
            what="conv outputs: sum over all convs of H_out x W_out x C_out at 300x300",
            elements=sum(conv_outputs([(n, s)], ssd_conv_hw) for n, s in t["tensors"]),
            bytes_per_element=4,
            why="as ResNet-50: bf16 conv output + bf16 BN/ReLU output per conv output element")],
        default_optimizer="momentum",
        default_per_replica_batch=4,
        per_replica_why="per-replica batch of the largest MLPerf v0.6 run (v3-2048, 2048 / 512 replicas)",
        configs=[cfg("tpu-v3-32", 1024, 32, 1, 32), cfg("tpu-v3-128", 1024, 128, 1, 8),
                 cfg("tpu-v3-256", 1024, 256, 1, 4), cfg("tpu-v3-512", 2048, 512, 1, 4),
                 cfg("tpu-v3-1024", 2048, 256, 4, 8, "spatial partitioning: each replica spans 4 cores"),
                 cfg("tpu-v3-2048", 2048, 512, 4, 4, "spatial partitioning: each replica spans 4 cores")],
        optimizer_cite=f"MomentumOptimizer, 0.9 in Google's SSD code, {REPO_V06}",
        sources={"optimizer": f"{CITE_CODE} (Google/benchmarks/ssd: tf.train.MomentumOptimizer, "
                              "ssd_constants.MOMENTUM = 0.9): SGD momentum 0.9"},
    )


def spec_mrcnn(data):
    t = data["mask_rcnn_r50_fpn"]
    r50 = data["resnet50_v1.5"]["tensors"]
    scale_side = MRCNN_IMAGE / 224
    stem = [(n, s) for n, s in r50 if n.split("/")[0] in ("conv0", "group1")]
    stem_flops = round(conv_flops(stem, resnet50_conv_hw) * scale_side ** 2)   # conv_flops counts kernels only
    # structural estimate per layer, later scaled to the json's (rough) total
    def raw_flops(name, ts):
        return sum(2 * size(s) * mrcnn_hw_count(n) for n, s in ts if n.endswith("kernel"))

    def acts(ts):
        out = 0
        for n, s in ts:
            if n.endswith("kernel"):
                out += mrcnn_hw_count(n) * s[-1]
        return out

    return dict(
        name="mask-rcnn", key="mask_rcnn_r50_fpn",
        description="Mask R-CNN with a ResNet-50 FPN backbone on COCO, MLPerf v0.6 instance segmentation",
        layer_of=layer_cnn,
        layer_flops=raw_flops,
        extra_layers={0: ("resnet50/stem+group1 (frozen, no trainable tensors)", stem_flops)},
        scale_flops_to_total=True,
        flops=dict(unit="image", units_per_example=1, example_unit="image",
                   counts="rough (a structural estimate; no public per-image figure for this configuration): conv/fc matmul work only. Per-layer split is a structural "
                          f"estimate ({MRCNN_IMAGE}x{MRCNN_IMAGE} image, {MRCNN_BOX_ROIS} box-head RoIs, "
                          f"{MRCNN_MASK_ROIS} mask-head RoIs, frozen stem included) scaled to the json's total"),
        activations=[dict(
            what=f"conv/fc outputs of the trainable layers at {MRCNN_IMAGE}x{MRCNN_IMAGE} "
                 f"({MRCNN_BOX_ROIS} box RoIs, {MRCNN_MASK_ROIS} mask RoIs); frozen stem keeps none",
            elements=acts(t["tensors"]),
            bytes_per_element=4,
            why="bf16 layer output + bf16 normalised/activated output per element, as for ResNet-50")],
        default_optimizer="momentum",
        default_per_replica_batch=2,
        per_replica_why="per-replica batch of the largest MLPerf v0.6 run (v3-256, 128 / 64 replicas)",
        configs=[cfg("tpu-v3-32", 128, 32, 1, 4),
                 cfg("tpu-v3-128", 128, 32, 4, 4, "spatial partitioning: each replica spans 4 cores"),
                 cfg("tpu-v3-256", 128, 64, 4, 2, "spatial partitioning: each replica spans 4 cores")],
        optimizer_cite=f"MomentumOptimizer, 0.9 in Google's Mask R-CNN code, {REPO_V06}",
        sources={"optimizer": f"{CITE_CODE} (Google/benchmarks/mask: tf.train.MomentumOptimizer, "
                              "mask_rcnn_params.py momentum=0.9): SGD momentum 0.9",
                 "per_layer_flops": "structural estimate in tests/tools/regenerate_workloads.py (image side, RoI counts are "
                                    "assumptions: Detectron-style 512 sampled RoIs, 25% positive)"},
    )


def spec_transformer(data):
    key = "transformer_big_v33712"
    t = data[key]
    seq, d, heads, n_enc, n_dec = 256, 1024, 16, 6, 6
    vocab = t["tensors"][0][1][0]
    return dict(
        name="transformer-big", key=key,
        description="Transformer big (6+6 layers, d 1024, ff 4096, 16 heads) on WMT En-De, MLPerf v0.6 "
                    "translation; shared 33712 x 1024 embedding/softmax",
        layer_of=layer_transformer,
        # each attention layer's score and context matmuls: 4 x seq x d per query token, one query token
        # (source for the encoder, target for the decoder) per token pair
        layer_flops=lambda name, ts: matmul_flops(ts) + (4 * seq * d if name.endswith("attention") else 0),
        attention=[(f"{side}/layer_{i}/{kind}", heads, d // heads, seq, seq)
                   for side, kinds, n in (("encoder", ("self_attention",), n_enc),
                                          ("decoder", ("self_attention", "encdec_attention"), n_dec))
                   for i in range(n) for kind in kinds],
        extra_layers={"end": ("softmax (tied to embedding_shared_weights)", 2 * vocab * d)},
        flops=dict(unit="(source + target) token pair", units_per_example=seq, example_unit="sequence pair",
                   counts="matmul work (2 x MACs): ~151 MFLOP per source token (encoder) + ~270 MFLOP per "
                          "target token (decoder + tied softmax), plus the 18 attention layers' score and "
                          f"context matmuls (4 x seq x d = 1 MFLOP per query token each at seq {seq}, 4.3 %); "
                          f"one example = one packed pair of {seq}-token sequences"),
        activations=[
            dict(what=f"encoder layers: {n_enc} x {seq} tokens x d {d}", elements=n_enc * seq * d, layers=n_enc,
                 bytes_per_element=34 + 5 * heads * seq // d,
                 why=f"34 + 5*a*s/h with a={heads}, s={seq}, h={d} (Korthikanti et al. 2022)",
                 compiled_bytes_per_element=22 + 3 * heads * seq // d,
                 compiled_why=f"22 + 3*a*s/h: " + XLA_ENCODER_WHY),
            dict(what=f"decoder layers: {n_dec} x {seq} tokens x d {d}", elements=n_dec * seq * d, layers=n_dec,
                 bytes_per_element=47 + 10 * heads * seq // d,
                 why="self + cross attention (2 x (11 + 5*a*s/h)), MLP 19, three layer norms 6 "
                     "(Korthikanti et al. 2022 per-block counts)",
                 compiled_bytes_per_element=33 + 6 * heads * seq // d,
                 compiled_why="self + cross attention 2 x (9 + 3*a*s/h), MLP 9, three layer-norm inputs 6, "
                              "as the encoder layer's XLA count"),
            dict(what=f"output logits: {seq} tokens x vocab {vocab}", elements=seq * vocab,
                 bytes_per_element=6, why="bf16 logits + fp32 log-softmax kept for the loss", head=True),
        ],
        default_optimizer="adam",
        default_per_replica_batch=1,
        per_replica_why="per-replica batch of the largest MLPerf v0.6 run (v3-2048, 2048 / 2048)",
        configs=[cfg("tpu-v3-32", 512, 32, 1, 16,
                     "gradients all-reduced in bfloat16 (bfloat16_grads_all_reduce=true in "
                     "Google/benchmarks/transformer/tpu-v3-32/run_and_time.sh)"),
                 cfg("tpu-v3-128", 512, 128, 1, 4), cfg("tpu-v3-256", 512, 256, 1, 2),
                 cfg("tpu-v3-512", 2048, 512, 1, 4), cfg("tpu-v3-1024", 2048, 1024, 1, 2),
                 cfg("tpu-v3-2048", 2048, 2048, 1, 1)],
        optimizer_cite=f"Adam: the Transformer runs' log opt_name, {REPO_V06}",
        sources={
            "optimizer": f"{CITE_RUNS} (Google/benchmarks/transformer: log opt_name; optimizer_adam_beta1/2 "
                         "hparams): Adam (b1 .86, b2 .92 at 512+ cores)",
            "vocabulary": "33712-row variant (json key transformer_big_v33712): its total, 210,808,832, is the count "
                          "NVIDIA's MLPerf v0.6 Transformer logs print ('num. model params', "
                          f"NVIDIA/results/dgx1_n60_ngc19.05_pytorch/transformer/result_*.txt in {REPO_V06}). "
                          "The MLPerf data's subword vocabulary has 33,708 "
                          "entries; 33,712 is that padded to the next multiple of 8, which is what the TPU "
                          "(tensor2tensor-derived) implementation's embedding holds. The 4 extra rows change "
                          "nothing qualitatively",
            "activations": CITE_KORTHIKANTI,
        },
    )


def spec_bert(data):
    key = "bert_large_with_pretrain_heads"
    t = data[key]
    seq, d, heads, layers, masked = 512, 1024, 16, 24, 76
    vocab = t["tensors"][0][1][0]
    return dict(
        name="bert-large", key=key,
        description="BERT-large (24 layers, d 1024, 16 heads, vocab 30522) pre-training with MLM and NSP "
                    "heads; first in MLPerf v0.7 (no v0.6 TPU run)",
        layer_of=layer_bert,
        # the attention layers' score and context matmuls: 4 x seq x d per token
        layer_flops=lambda name, ts: (matmul_flops(ts) + (4 * seq * d if name.endswith("attention") else 0)
                                      if name.startswith("encoder") else 0),
        attention=[(f"encoder/layer_{i}/attention", heads, d // heads, seq, seq) for i in range(layers)],
        flops=dict(unit="token", units_per_example=seq, example_unit="sequence",
                   counts="encoder matmul work (2 x MACs per token), with the attention score and context "
                          f"matmuls (4 x seq x d = 2.1 MFLOP per token per layer at seq {seq}, 7.7 %); "
                          "the pooler and the MLM/NSP heads (only on masked positions) not counted; "
                          f"one example = one {seq}-token sequence"),
        activations=[
            dict(what=f"encoder layers: {layers} x {seq} tokens x d {d}", elements=layers * seq * d, layers=layers,
                 bytes_per_element=34 + 5 * heads * seq // d,
                 why=f"34 + 5*a*s/h with a={heads}, s={seq}, h={d} (Korthikanti et al. 2022)",
                 # post-norm block: each layer norm differentiates the residual sum, recomputed from the
                 # matmul output it adds, so the FFN's second matmul output is kept too
                 selective_bytes_per_element=2 * (1 + 3 + 1 + 4 + 1),
                 selective_why="remat selective, bf16 per token / h: input 1, Q K V 3, attention output 1, "
                               "FFN up 4, FFN down 1 (post-norm)",
                 compiled_bytes_per_element=22 + 3 * heads * seq // d,
                 compiled_why=f"22 + 3*a*s/h: " + XLA_ENCODER_WHY),
            dict(what=f"MLM logits: {masked} masked positions x vocab {vocab}", elements=masked * vocab,
                 bytes_per_element=6, why="bf16 logits + fp32 log-softmax; 76 = MLPerf BERT max predictions "
                                          "per sequence (assumption, not in our reference files)", head=True),
        ],
        default_optimizer="lamb",
        default_per_replica_batch=8,
        per_replica_why="what-if: no MLPerf v0.6 TPU run; 8 sequences of 512 per core keeps the activation "
                        "estimate (~7.5 GB) inside a v3 core's 16 GiB next to LAMB's state",
        configs=[],
        optimizer_cite="LAMB (You et al., arXiv 1904.00962), as in the MLPerf BERT reference from v0.7",
        sources={"optimizer": "LAMB: You et al., 'Large Batch Optimization for Deep Learning: Training BERT in "
                              "76 minutes', arXiv 1904.00962; the optimizer of the MLPerf BERT reference "
                              "(github.com/mlcommons/training, language_model/tensorflow/bert, from v0.7)",
                 "activations": CITE_KORTHIKANTI},
    )


def spec_gnmt(data):
    key = "gnmt_v32320"
    # 48: src_max_len = tgt_max_len = 48 in Google's MLPerf v0.6 GNMT code (nmt.py defaults; no run
    # script overrides them), mlcommons/training_results_v0.6 Google/benchmarks/gnmt/implementations
    tokens, h, vocab = 48, 1024, 32320
    lstm_layers = 5 + 4   # encoder: bidirectional layer 0 (2) + 3; decoder: attention LSTM + 3
    return dict(
        name="gnmt", key=key,
        description="GNMT (4+4 LSTM layers of 1024, attention, vocab 32320) on WMT En-De, MLPerf v0.6 translation",
        layer_of=layer_gnmt,
        layer_flops=lambda name, ts: sum(2 * size(s) for n, s in ts
                                         if "weight" in n and not n.startswith("embedder")),
        flops=dict(unit="(source + target) token pair", units_per_example=tokens, example_unit="sentence pair",
                   counts="matmul work only (2 x MACs): ~94 MFLOP per source token + ~161 MFLOP per target token "
                          "(incl. the 32320-way classifier); attention scores not counted; one example = one "
                          f"sentence pair of {tokens} tokens, the training length cap of Google's MLPerf v0.6 GNMT code "
                          "(src_max_len = tgt_max_len = 48). Its runs bucket sentence pairs into 5 length buckets "
                          "and run the LSTMs to the longest pair of the batch, so a real step is often shorter: "
                          "an upper bound"),
        activations=[
            dict(what=f"LSTM layers: {lstm_layers} x {tokens} tokens x h {h}", elements=lstm_layers * tokens * h,
                 bytes_per_element=14,
                 why="per step: 4 gate activations bf16 (8 B) + fp32 cell state (4 B) + bf16 output (2 B)"),
            dict(what=f"output logits: {tokens} tokens x vocab {vocab}", elements=tokens * vocab,
                 bytes_per_element=6, why="bf16 logits + fp32 log-softmax kept for the loss", head=True),
        ],
        default_optimizer="adam",
        default_per_replica_batch=8,
        per_replica_why="per-replica batch of the largest MLPerf v0.6 run (v3-1024, 8192 / 1024)",
        configs=[cfg("tpu-v3-32", 4096, 32, 1, 128), cfg("tpu-v3-128", 8192, 128, 1, 64),
                 cfg("tpu-v3-256", 8192, 256, 1, 32), cfg("tpu-v3-512", 8192, 512, 1, 16),
                 cfg("tpu-v3-1024", 8192, 1024, 1, 8)],
        optimizer_cite=f"Adam: --optimizer default in Google's GNMT code (nmt.py), {REPO_V06}",
        sources={"optimizer": f"{CITE_CODE} (Google/benchmarks/gnmt: nmt.py --optimizer default): Adam"},
    )


def spec_ncf(data, *, v06):
    key = "ncf_ml20mx16x32" if v06 else "ncf_ml20m"
    return dict(
        name="ncf-ml20mx16x32" if v06 else "ncf", key=key,
        description=("NCF / NeuMF on ml-20mx16x32 (2.2 M users, 856 k items), the MLPerf v0.6 reference "
                     "dataset" if v06 else "NCF / NeuMF on MovieLens-20M (138493 users, 26744 items), the "
                     "MLPerf v0.5 dataset") + "; TPU profile is a what-if (not submitted by Google on TPU)",
        layer_of=layer_ncf,
        layer_flops=lambda name, ts: (64 if name == "embeddings" else
                                      sum(2 * size(s) for n, s in ts if n.endswith("weight"))),
        flops=dict(unit="(user, item) pair", units_per_example=1, example_unit="(user, item) pair",
                   counts="MLP matmul work (2 x MACs) + the 64-wide GMF elementwise product; embedding "
                          "lookups not counted"),
        activations=[dict(
            what="per pair: 4 embedding rows (384) + MLP input (256) + MLP outputs (256+128+64) + GMF product "
                 "(64) + final concat (128) + logit (1)",
            elements=384 + 256 + 448 + 64 + 128 + 1, bytes_per_element=4,
            why="bf16 value + bf16 pre-activation per element")],
        default_optimizer="adam",
        default_per_replica_batch=2048,
        per_replica_why="what-if: the MLPerf v0.6 NCF reference's global batch 65536 on a v3-32 slice",
        optimizer_cite="Adam, as the MLPerf NCF reference (github.com/mlcommons/training, recommendation/pytorch)",
        configs=[],
        sources={"optimizer": "MLPerf v0.6 NCF reference implementation (github.com/mlcommons/training, v0.6, "
                              "recommendation/pytorch): Adam",
                 "tpu": "NCF was not submitted by Google on TPU in MLPerf v0.6 (Google/benchmarks in "
                        f"{REPO_V06} holds gnmt, mask, resnet, ssd and transformer only)"},
    )


def build(spec, data):
    """Layers (name, flops per unit) and tensors (name, shape, layer) for one spec."""
    entry = data[spec["key"]]
    tensors = [(n, list(s)) for n, s in entry["tensors"]]
    order, members = [], {}
    for n, s in tensors:
        key = spec["layer_of"](n)
        if key not in members:
            order.append(key)
            members[key] = []
        members[key].append((n, s))
    layers = [[k, spec["layer_flops"](k, members[k])] for k in order]
    for where, (lname, lflops) in spec.get("extra_layers", {}).items():
        layers.insert(len(layers) if where == "end" else where, [lname, lflops])
    # the json's fwd_flops count weight matmuls only; the score and context matmuls are the spec's
    total = entry["fwd_flops"] + attention_flops_per_unit(spec)
    if spec.get("scale_flops_to_total"):
        raw = sum(f for _, f in layers)
        for layer in layers:
            layer[1] = int(layer[1] * total / raw)
        layers[-1][1] += int(total) - sum(f for _, f in layers)   # rounding remainder
    got = sum(f for _, f in layers)
    if got != total:
        raise SystemExit(f"{spec['name']}: per-layer FLOPs sum to {got}, json says {total}")
    index = {name: i for i, (name, _) in enumerate(layers)}
    rows = [(n, s, index[spec["layer_of"](n)]) for n, s in tensors]
    if sum(size(s) for _, s, _ in rows) != entry["trainable_params"]:
        raise SystemExit(f"{spec['name']}: tensor sizes do not sum to trainable_params")
    return layers, rows, entry


def attention_flops_per_unit(spec):
    """Score and context matmul FLOPs per FLOP unit the spec adds to the json's: 4 x key tokens x
    heads x head_dim per query token, over the example's units."""
    units = spec["flops"]["units_per_example"]
    return sum(4 * qt * kt * h * hd for _, h, hd, qt, kt in spec.get("attention", ())) // units


def q(text):
    return json.dumps(text)


def render(spec, data):
    layers, rows, entry = build(spec, data)
    f = spec["flops"]
    out = [
        f"# {spec['description']}",
        f"# GENERATED by tests/tools/regenerate_workloads.py from {JSON_PATH}",
        f"# (key {spec['key']}); edit the generator, not this file. Units are in the key names.",
        f"name: {spec['name']}",
        f"description: {q(spec['description'])}",
        f"params: {entry['trainable_params']}            # published count; the loader checks the tensors sum to it",
        "fwd_flops:",
        f"  per_unit: {int(entry['fwd_flops'] + attention_flops_per_unit(spec))}            # FLOPs per {f['unit']} "
        f"(json fwd_flops{' + attention score and context matmuls' if spec.get('attention') else ''})",
        f"  unit: {q(f['unit'])}",
        f"  units_per_example: {f['units_per_example']}",
        f"  example_unit: {q(f['example_unit'])}",
        f"  counts: {q(f['counts'])}",
        "activation_memory:                # per example; bytes = sum of elements x bytes_per_element (a parameter)",
    ]
    for term in spec["activations"]:
        out += [f"  - what: {q(term['what'])}",
                f"    elements: {term['elements']}",
                f"    bytes_per_element: {term['bytes_per_element']}",
                f"    why: {q(term['why'])}"]
        if term.get("layers"):
            out.append(f"    layers: {term['layers']}               # identical layers: what remat keeps the input of")
        if term.get("selective_bytes_per_element") is not None:
            out.append(f"    selective_bytes_per_element: {term['selective_bytes_per_element']}   "
                       f"# {term['selective_why']}")
        if term.get("compiled_bytes_per_element") is not None:
            out += [f"    compiled_bytes_per_element: {term['compiled_bytes_per_element']}   # what XLA keeps after fusion",
                    f"    compiled_why: {q(term['compiled_why'])}"]
        if term.get("head"):
            out.append("    head: true                       # the output head: backward frees it before the layers")
    out += [
        "dtypes:                            # bf16 activations, fp32 master weights and slots (MLPerf v0.6 TPU)",
        "  weights: float32",
        "  gradients: float32              # bfloat16 is the what-if option (halves gradient collective bytes)",
        "  slots: float32",
        "  activations: bfloat16",
        f"default_optimizer: {spec['default_optimizer']}       # {spec['optimizer_cite']}",
        f"default_per_replica_batch: {spec['default_per_replica_batch']}   # {spec['per_replica_why']}",
    ]
    if spec["configs"]:
        out.append(f"mlperf_v06_tpu:                    # Google's runs ({REPO_V06}): replicas = cores / spatial ways")
        for c in spec["configs"]:
            out.append("  - {" + ", ".join(f"{k}: {q(v) if isinstance(v, str) else v}" for k, v in c.items()) + "}")
    else:
        out.append(f"mlperf_v06_tpu: []                 # no MLPerf v0.6 TPU run (none in {REPO_V06})")
    out.append("sources:")
    sources = {"tensors": f"{JSON_PATH}, key {spec['key']}: {CITE_JSON}",
               "fwd_flops": f"{JSON_PATH} (same key), per {f['unit']} as in counts above",
               "layers": "derived from tensor names in tests/tools/regenerate_workloads.py (forward order = json order)",
               "configs": f"{CITE_RUNS} (also wus_sim/data/validation/mlperf_v06_tpu_v3.csv)"}
    sources.update(spec.get("sources", {}))
    for k, v in sources.items():
        out.append(f"  {k}: {q(v)}")
    out.append("layers:                            # [name, fwd FLOPs per unit], forward order; index = position")
    for name, fl in layers:
        out.append(f"  - [{q(name)}, {fl}]")
    if spec.get("attention"):
        out.append("attention:                         # score matrices: heads x query x key elements per example")
        for name, h, hd, qt, kt in spec["attention"]:
            out.append(f"  - {{layer: {q(name)}, heads: {h}, head_dim: {hd}, query_tokens: {qt}, key_tokens: {kt}}}")
    out.append("tensors:                           # [name, shape, layer index]")
    for n, s, layer in rows:
        out.append(f"  - [{q(n)}, {s}, {layer}]")
    return "\n".join(out) + "\n"


SPECS = [spec_resnet50, spec_ssd, spec_mrcnn, spec_transformer, spec_bert, spec_gnmt,
         lambda d: spec_ncf(d, v06=False), lambda d: spec_ncf(d, v06=True)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="path to model_tensors.json")
    parser.add_argument("--out", default=str(OUT_DIR), help="output directory")
    args = parser.parse_args(argv)
    data = json.loads(Path(args.json).read_text())
    for make in SPECS:
        spec = make(data)
        path = Path(args.out) / f"{spec['name']}.yaml"
        path.write_text(render(spec, data))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
