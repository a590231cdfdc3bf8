"""The matmuls of a workload's layers, with their shapes, and what they cost on a TPU's MXU tiles.

Pure functions over a :class:`~wus_sim.model.workload.Workload`; the shape compute model
(:mod:`wus_sim.model.compute`, ``compute_model: "shape"``) times each one.

Where the shapes come from
--------------------------
* A weight matmul per weight of rank >= 2. Its rows per example ``M`` are the layer's output
  positions, ``(layer FLOPs - attention FLOPs) / (2 x the layer's weight elements)`` (a conv or
  dense layer does 2 FLOPs per weight per position; the same figure
  :attr:`Workload.layer_output_elements` is built from): the tokens of a sequence for a
  transformer's projections, the output pixels of a conv, ``tokens x k / experts`` for one expert
  of a mixture routed top-k. A dense weight ``[in, out]`` (``[out, in]`` under
  :attr:`Workload.dense_layout` ``"out_in"``) contracts ``K = in`` into ``N = out``.
* A conv kernel ``[kh, kw, cin, cout]`` contracts its window and input features, ``kh x kw x cin``,
  into ``cout`` over the output positions (``taps = kh x kw``). How XLA lays that on the MXU is not
  documented; what is: XLA pads a convolution's feature dimensions "to a multiple of either 8 or 128"
  (Cloud TPU docs, "Profile TensorFlow workloads", tf.nn.conv_n_d). Padding features to 8 only
  helps if several window taps share the MXU's 128-deep contraction, so the window is taken as
  folded into it: ``K = kh x kw x ceil8(cin)``, padded to the tile as any contraction (a 1x1 conv
  is a dense layer, ``K = cin``). It agrees with the ``space_to_depth`` stem of Google's MLPerf
  ResNet-50 (github.com/mlcommons/training_results_v0.6, Google's resnet ``conv0_space_to_depth``):
  the 7x7x3 stem folds to 49 x 8 = 392 -> 512 rows for 147 real ones (3.5 x), its 4x4x12
  space-to-depth form to 16 x 16 = 256 for 192 (1.3 x). Taking each tap as a matmul of its own
  instead (``K = cin`` padded to 128 per tap) makes ResNet-50's convs 3.8 x their FLOPs on the
  MXU and the v0.6 ResNet rows 50-70 % slow at any plausible peak fraction. A conv's output
  features pad to 8 in forward and activation-gradient convolutions and to the tile in
  weight-gradient ones, as the same page says for batches from 64 (:func:`conv_output_tiles`).
* An attention layer (:class:`~wus_sim.model.workload.AttentionScores`): per head, the score matmul
  ``Q K^T`` (``M = query tokens``, ``K = head_dim``, ``N = key tokens``) and the context matmul
  ``P V`` (``M = query tokens``, ``K = key tokens``, ``N = head_dim``). A causal one does half of
  each (the kernel skips the masked blocks; MaxText counts causal attention so too,
  ``calculate_tflops_training_per_device`` in src/maxtext/utils/maxtext_utils.py).

Padding (:func:`padded_flops`)
------------------------------
The MXU is a ``t x t`` systolic array (``t = mxu_dim``: 128 on TPU v2-v5p, 256 on v6e) that holds a
``t x t`` tile of the right-hand (weight) operand and streams the left-hand rows through it, 8 at a
time (``bf16[8,128] @ bf16[128,128]`` every 8 cycles; "weight matrices need to be padded to at least
size 128 (256 on TPU v6) in both dimensions": the JAX scaling book, jax-ml/scaling-book tpus.md,
"TPU basics" and "Appendix B"). So ``K`` and ``N`` pad to multiples of ``t`` and ``M`` to a multiple of
8 (the sublanes): ``2 x ceil8(M) x ceil_t(K) x ceil_t(N)`` FLOPs per matmul. The several MXUs of a core
(``mxus_per_core``) take different row blocks or weight tiles of the same matmul: they do not change
the padding of one matmul, so they enter only through the chip's peak.

Backward of a weight matmul is two matmuls: the activation gradient ``dY W^T`` (``M x N`` by ``N x K``)
and the weight gradient ``X^T dY`` (``K x M`` by ``M x N``, contracting the rows): each padded as its
own operands lie (:func:`backward_shapes`).
"""

from dataclasses import dataclass
import math

import numpy as np

from ...inputs.memo import IdentityMemo

__all__ = ["Matmul", "MatmulTimes", "SUBLANES", "ceil_to", "padded_flops", "window_padded_flops", "operand_reads",
           "conv_output_tiles", "layer_matmuls", "attention_matmuls",
           "backward_shapes", "matmul_layer_times", "FLASH_BACKWARD_MATMULS"]

SUBLANES = 8
"""Rows of the left-hand operand the MXU takes at a time (``NUM_SUBLANES`` in JAX's
jax/_src/tpu_info.py; the scaling book's ``bf16[8,128]``): ``M`` pads to a multiple of it."""

FLASH_BACKWARD_MATMULS = 5
"""Matmuls of a fused (flash) attention backward per forward pair of 2: it recomputes the scores
``Q K^T``, then ``dV = P^T dO``, ``dP = dO V^T``, ``dQ = dS K``, ``dK = dS^T Q`` (Dao 2023,
FlashAttention-2, arXiv 2307.08691, sec. 3.1.2): 2.5 x the forward's work."""


@dataclass(frozen=True)
class Matmul:
    """One matmul of a layer, per example: ``count`` x ``taps`` products of ``[rows, k] x [k, n]``."""

    layer: int
    """Forward-order index of its layer."""
    name: str
    """The weight it multiplies by, or ``score`` / ``context`` for attention."""
    kind: str
    """``weight`` (a trainable weight: quantized under int8, two backward matmuls) or ``attention``
    (activation by activation)."""
    rows: float
    """``M`` per example (tokens, output positions)."""
    k: int
    """Contraction."""
    n: int
    """Output width."""
    taps: int = 1
    """Products summed into one output (a conv's ``kh x kw``)."""
    conv: bool = False
    """A convolution (a rank-4 kernel, 1x1 included): its output features pad by
    :func:`conv_output_tiles`."""
    count: int = 1
    """Independent products (attention heads)."""
    work_fraction: float = 1.0
    """The part of the product computed (1/2 for causal attention: the masked blocks are skipped)."""
    fused: bool = False
    """Attention whose scores stay on chip (flash): its bytes are Q, K, V and the output only."""

    def flops(self, examples=1.0):
        """FLOPs of *examples* examples, unpadded (2 per multiply-add)."""
        return 2.0 * self.rows * examples * self.k * self.n * self.taps * self.count * self.work_fraction

    def padded_flops(self, tile, examples=1.0):
        """FLOPs the MXU spends on *examples* examples with ``K``, ``N`` padded to *tile* and ``M`` to 8:
        a weight matmul stacks the examples' rows into one ``M`` (a conv's window folded into ``K``:
        :func:`window_padded_flops`); attention multiplies each example's and head's own
        ``[rows, k] x [k, n]``."""
        if self.kind == "weight":
            n_tile = conv_output_tiles(tile)[0] if self.conv else tile
            return window_padded_flops(self.rows * examples, self.k, self.n, self.taps, tile, n_tile) * self.count
        return padded_flops(self.rows, self.k, self.n, tile) * examples * self.taps * self.count * self.work_fraction

    @property
    def weight_elements(self):
        """Elements of the weight operand (0 for attention, whose operands are activations)."""
        return self.k * self.n * self.taps if self.kind == "weight" else 0


def ceil_to(x, multiple):
    """*x* rounded up to a multiple of *multiple*."""
    return math.ceil(x / multiple) * multiple


def padded_flops(m, k, n, tile, n_tile=None):
    """``2 x ceil8(m) x ceil_tile(k) x ceil_tile(n)``: the FLOPs an ``[m, k] x [k, n]`` matmul costs on a
    ``tile x tile`` MXU (module docstring); *n_tile* pads ``n`` instead when given (a conv's output
    features: :func:`conv_output_tiles`). *m* may be fractional (rows per example x a batch): it is
    rounded up first."""
    return 2.0 * ceil_to(math.ceil(m - 1e-9), SUBLANES) * ceil_to(k, tile) * ceil_to(n, n_tile or tile)


def conv_output_tiles(tile):
    """``(forward and activation-gradient, weight-gradient)`` padding of a convolution's output
    features: ``(8, tile)``.

    The Cloud TPU docs ("Profile TensorFlow workloads", tf.nn.conv_n_d) state XLA's rule by the most
    common convolution batch: from 64 on, "feature padded to a multiple of 8 for forwards and backwards
    convolutions" and "to a multiple of 128 for gradient update convolutions" (the batch taking the
    128 side), below 64 the other way round. The first branch is taken at every batch: with the second
    below 64, Google's v0.6 ResNet-50 runs at 32 and 16 images a core came out 11 % and 18 % slow in a
    refit of the v0.6/v0.7 rows and each benchmark left out was predicted within 30 % (median 13.5 %);
    with the first everywhere, 4.4 % and 5.5 % (median fit and leave-one-benchmark-out error; the
    ``flops`` model's: 2.3 % and 5.4 %). What the page describes is the arrays' layout, not stated to
    be the MXU's; the batch's own padding to 128 is left out too (ResNet-50 at 64 a core would run
    half idle, and Google's run there is 20 % slower per image than at 128, not 2 x)."""
    return SUBLANES, tile


def window_padded_flops(m, k, n, taps, tile, n_tile=None):
    """:func:`padded_flops` of a conv whose *taps* window positions fold into the contraction, each
    with its *k* features padded to 8: ``K = taps x ceil8(k)`` (module docstring); a dense matmul
    (``taps = 1``) pads ``K`` to the tile alone."""
    return padded_flops(m, taps * ceil_to(k, SUBLANES) if taps > 1 else k, n, tile, n_tile)


def operand_reads(extent, block):
    """How many times a matmul reads an operand from HBM when its output is computed in blocks of edge
    *block* (:attr:`~wus_sim.model.compute.ComputeParams.matmul_block`): once per block along the
    output dimension the operand does not span, *extent* / *block* (an average over the blocks, never
    below one read); once when *block* is 0 (unlimited reuse)."""
    return max(1.0, extent / block) if block else 1.0


def backward_shapes(mm):
    """``((m, k, n), (m, k, n))`` per example of a weight matmul's two backward matmuls: the activation
    gradient ``[M, N] x [N, K]`` and the weight gradient ``[K, M] x [M, N]``. *m* is per example for the
    first; for the second the rows are the weight's ``K`` and the contraction is ``M`` per example
    (times the batch when timed: :func:`wus_sim.model.compute` scales it)."""
    return (mm.rows, mm.n, mm.k), (mm.k, mm.rows, mm.n)


def attention_matmuls(a):
    """The score and context :class:`Matmul` of one :class:`~wus_sim.model.workload.AttentionScores`."""
    half = 0.5 if a.causal else 1.0
    return (Matmul(a.layer, "score", "attention", a.query_tokens, a.head_dim, a.key_tokens, count=a.heads,
                   work_fraction=half, fused=a.fused),
            Matmul(a.layer, "context", "attention", a.query_tokens, a.key_tokens, a.head_dim, count=a.heads,
                   work_fraction=half, fused=a.fused))


def layer_matmuls(workload):
    """The :class:`Matmul` of every layer of *workload*, in forward order (weights first, then
    attention, per layer); memoized per workload."""
    return _MATMULS.get((workload,), (), lambda: _matmuls(workload))


_MATMULS = IdentityMemo(maxsize=64)


def _matmuls(w):
    attention = w.layer_attention_flops
    weight_flops = np.asarray(w.layer_fwd_flops, dtype=float) - attention
    elements = np.zeros(w.num_layers)
    for t in w.tensors:
        if len(t.shape) >= 2:
            elements[t.layer] += t.size
    out = []
    for t in w.tensors:
        if len(t.shape) < 2 or weight_flops[t.layer] <= 0 or elements[t.layer] <= 0:
            continue  # a bias or norm, or an embedding looked up (a gather, no matmul)
        rows = weight_flops[t.layer] / (2 * elements[t.layer])
        if len(t.shape) == 2:
            k, n = (t.shape[1], t.shape[0]) if w.dense_layout == "out_in" else t.shape
            taps = 1
        else:  # a conv kernel [..window.., cin, cout]: one matmul per window position
            k, n, taps = t.shape[-2], t.shape[-1], math.prod(t.shape[:-2])
        out.append(Matmul(t.layer, t.name, "weight", rows, int(k), int(n), int(taps), conv=len(t.shape) > 2))
    for a in w.attention:
        out.extend(attention_matmuls(a))
    out.sort(key=lambda mm: mm.layer)  # stable: a layer's weights, then its attention
    return tuple(out)



# ====================================================================== timing
@dataclass(frozen=True)
class MatmulTimes:
    """Per layer (forward order), seconds, on one replica: the roofline of each of the layer's matmul
    ops summed (:func:`matmul_layer_times`)."""

    forward_s: np.ndarray
    backward_s: np.ndarray
    attention_forward_s: np.ndarray
    """The part of :attr:`forward_s` that is attention (what selective remat runs again)."""
    forward_ops: np.ndarray
    """Matmul ops per layer, forward (each pays ``op_fixed_s``)."""
    backward_ops: np.ndarray


def matmul_layer_times(workload, topology, per_replica_batch, params, *, quantization="none", share=None,
                       spatial_ways=1):
    """:class:`MatmulTimes` of *workload*'s matmuls (:func:`layer_matmuls`) on one replica of
    *topology* at *per_replica_batch* examples: each op takes

        ``max(padded FLOPs / (peak x matmul_peak_fraction), bytes / (HBM x activation_hbm_efficiency)) + op_fixed_s``

    with the padding of :func:`padded_flops` on the chip's ``mxu_dim`` tile (none when the chip gives
    no tile) and the bytes its operands and result move through HBM at their dtypes: the weight at the
    activation dtype (the compute copy of fp32 master weights, as the ``flops`` model reads it), the
    input and output activations, and the weight gradient at the gradient dtype; with a
    ``matmul_block``, each input operand read once per output block across it (:func:`operand_reads`).

    * Weight matmuls: forward one op, backward two (activation and weight gradient, each padded as its
      operands lie: :func:`backward_shapes`).
    * Attention: fused (flash) attention is one kernel forward and one backward. Forward reads Q, K, V
      and writes O; backward reads Q, K, V, O and dO and writes dQ, dK, dV, and runs
      :data:`FLASH_BACKWARD_MATMULS` matmuls for the forward's two (two score-shaped, three
      context-shaped). No score matrix goes through HBM. Unfused, the score and context matmuls are an
      op each and write, then read, the ``heads x query x key`` scores; backward runs two matmuls per
      forward one, moving twice the bytes. K and V are counted at the query heads (a grouped-query layer
      reads fewer: an upper bound on bytes that the attention's compute hides at long sequences).
    * ``quantization="int8"`` (AQT, :mod:`wus_sim.model.ops.precision`): the weight matmuls, forward and both
      backward, run at the chip's int8 peak on int8 operands (1 B each); before each, both operands are
      quantized by memory-bound passes, a max-abs scale (read) then the rounding (read, write 1 B):
      ``2 x activation bytes + 1`` per operand element. The int32 result is rescaled in the matmul's
      output fusion and written at the activation dtype. Attention stays bf16.
    * Layer FLOPs that no matmul explains (a tied softmax without a weight of its own) run unpadded at
      the same rate, backward twice, with no bytes and no op of their own.
    * *share* (per layer) and *spatial_ways*: a spatially partitioned replica's busiest core does
      ``share / ways`` of the activation traffic and ``share`` of an even split of the compute over
      ``1 + (ways - 1) x spatial_efficiency`` cores; every core reads the whole weight.
    """
    from .precision import int8_speedup  # (same room; precision imports nothing of ours)

    p = params
    ways = int(spatial_ways)
    n_layers = workload.num_layers
    share = np.ones(n_layers) if share is None else np.asarray(share, dtype=float)
    tile = topology.chip.mxu_dim or 1
    rate = topology.peak_flops_per_replica * p.matmul_peak_fraction * (1 + (ways - 1) * p.spatial_efficiency)
    int8 = int8_speedup(topology, quantization)
    hbm = topology.hbm_Bps_per_replica * p.activation_hbm_efficiency
    act_B, grad_B = workload.activation_bytes, workload.grad_bytes
    op_B = 1 if int8 != 1.0 else act_B  # operand bytes of a weight matmul
    quant_s_per_element = (2 * act_B + 1) / hbm if int8 != 1.0 else 0.0
    B = float(per_replica_batch)

    fwd, bwd, attn = np.zeros(n_layers), np.zeros(n_layers), np.zeros(n_layers)
    fwd_ops, bwd_ops = np.zeros(n_layers), np.zeros(n_layers)
    explained = np.zeros(n_layers)

    def op(flops, nbytes, r):
        return max(flops / r, nbytes / hbm) + p.op_fixed_s

    block = p.matmul_block

    for mm in layer_matmuls(workload):
        if mm.kind != "weight":
            continue
        i = mm.layer
        s, r = share[i] / ways, rate / share[i] * int8
        explained[i] += mm.flops()
        M = mm.rows * B
        W, x, y = mm.k * mm.n * mm.taps, M * mm.k, M * mm.n  # weight, input, output elements
        (m1, k1, n1), (m2, k2, n2) = backward_shapes(mm)
        # forward; activation gradient (a conv over dY: the window folds over cout); weight gradient
        # (rows: the window's taps x cin, contracting the batch's positions)
        n_fwd, n_dw = conv_output_tiles(tile) if mm.conv else (tile, tile)
        # each operand is read once per output block across it (operand_reads): forward [M, K] x [K, N],
        # activation gradient [M, N] x [N, K], weight gradient [K, M] x [M, N]
        rows, cols, window = operand_reads(M, block), operand_reads(mm.n, block), operand_reads(mm.k * mm.taps, block)
        fwd[i] += op(window_padded_flops(M, mm.k, mm.n, mm.taps, tile, n_fwd),
                     W * op_B * rows + s * (x * op_B * cols + y * act_B), r)
        bwd[i] += op(window_padded_flops(m1 * B, k1, n1, mm.taps, tile, n_fwd),
                     W * op_B * rows + s * (y * op_B * window + x * act_B), r)
        bwd[i] += op(padded_flops(m2 * mm.taps, k2 * B, n2, tile, n_dw),
                     s * (x * cols + y * window) * op_B + W * grad_B, r)
        fwd_ops[i] += 1
        bwd_ops[i] += 2
        fwd[i] += (W + s * x) * quant_s_per_element  # quantize both operands of each int8 matmul
        bwd[i] += (W + s * y + s * (x + y)) * quant_s_per_element

    for a in workload.attention:
        i = a.layer
        s, r = share[i] / ways, rate / share[i]
        score, context = attention_matmuls(a)
        explained[i] += a.flops
        f_score, f_context = score.padded_flops(tile, B), context.padded_flops(tile, B)
        q = o = B * a.heads * a.query_tokens * a.head_dim
        k = v = B * a.heads * a.key_tokens * a.head_dim
        if a.fused:
            t_fwd = op(f_score + f_context, s * (q + k + v + o) * act_B, r)
            t_bwd = op(f_score * 2 + f_context * (FLASH_BACKWARD_MATMULS - 2),
                       s * (2 * (q + k + v) + 2 * o) * act_B, r)
            ops = 1
        else:
            scores = B * a.heads * a.query_tokens * a.key_tokens
            t_score = op(f_score, s * (q + k + scores) * act_B, r)
            t_context = op(f_context, s * (scores + v + o) * act_B, r)
            t_fwd = t_score + t_context
            t_bwd = 2 * t_fwd
            ops = 2
        fwd[i] += t_fwd
        bwd[i] += t_bwd
        attn[i] += t_fwd
        fwd_ops[i] += ops
        bwd_ops[i] += ops if a.fused else 2 * ops

    flops = np.asarray(workload.layer_fwd_flops, dtype=float)
    rest = np.where(flops - explained > 1e-9 * flops, flops - explained, 0.0) * B  # not float rounding
    rest_s = rest / (rate / share)
    fwd = fwd + rest_s
    bwd = bwd + 2 * rest_s
    return MatmulTimes(forward_s=fwd, backward_s=bwd, attention_forward_s=attn, forward_ops=fwd_ops,
                       backward_ops=bwd_ops)
