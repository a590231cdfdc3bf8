"""Chip compute: forward/backward time on the matrix unit, update time on the vector unit.

Per replica (one TPU v2/v3 core, or ``spatial_ways`` cores when a replica is spatially partitioned):

* matrix work, by :attr:`ComputeParams.compute_model`:

  - ``flops`` (the default, the shipped calibration's): fwd FLOPs per example x per-replica batch /
    (matrix-unit peak x ``mxu_efficiency``); backward = ``backward_flops_ratio`` x forward (2 by
    default: the gradients with respect to activations and to weights each cost about one forward
    matmul; "training is usually taken as ~3 x forward"); int8 (``quantization="int8"``,
    :mod:`wus_sim.model.ops.precision`) runs the weight matmuls at the chip's int8 peak, forward and
    backward, at the same ``mxu_efficiency``; per layer, the matmul takes ``max(matrix time, weight +
    output bytes / HBM)`` (a matmul at a small batch is bound by reading its weights);
  - ``shape``: every matmul of the layer from its shapes, padded to the chip's MXU tiles, each a
    roofline of its own plus a fixed cost (:mod:`wus_sim.model.ops.matmuls`);

* per layer (:func:`layer_times`), besides its matmuls:

  - the memory-bound elementwise work on its output (batch or layer norm,
    activation function, residual add): ``elementwise_{fwd,bwd}_bytes`` per
    output element through HBM. A layer's output elements are derived from its
    shapes: ``FLOPs x out_channels / (2 x weight elements)`` (a conv or dense
    layer does 2 FLOPs per weight per output position); for ResNet-50 they add
    up to the 11.1 M conv outputs per image of its activation estimate. An
    attention layer's score matrix (``heads x query x key`` elements per example,
    :class:`~wus_sim.model.workload.AttentionScores`) takes the same per-element
    work (scale, mask, softmax, dropout): at 512 tokens it outnumbers the layer's
    hidden outputs eight to one (not under ``shape`` when the attention is fused);
  - a fixed cost per op (``op_overhead_s``: kernel launch and pipeline fill;
    backward runs ``backward_flops_ratio`` ops per forward op);
  - with spatial partitioning (a replica over ``spatial_ways`` cores), matrix and
    elementwise work divide over the cores by whole rows of each conv layer's output
    map, so the busiest core sets the pace (``spatial_row_share``: a 38-row map over
    4 cores gives one core 10 rows, not 9.5); weight reads and op overheads do not
    divide, and each conv with a kernel wider than 1 exchanges halo rows with its
    neighbour over ICI (``halo_exchange_time_s``).
* fixed costs per step, run by :mod:`wus_sim.training.step` on the timeline and reported apart:
  the host loop (``host_loop_s`` per device loop, shared by its ``steps_per_loop`` steps), the
  ops' fixed costs (``op_overhead_s`` per op: they sit inside each layer's and the update's
  time, and the breakdown counts them as ``op_launch_s``), and what neither explains
  (``step_overhead_s``, one fitted value per software stack)
* update = max(bytes moved / (HBM bandwidth per replica x efficiency),
               flops / vector-unit peak per replica):
  the optimizer is elementwise, streams weights, gradients and slots through
  HBM once, and does a handful of flops per element, so it is memory-bound. The
  cores of a TPU v2/v3 chip share its HBM bandwidth
  (:attr:`Topology.hbm_Bps_per_replica`).

Every figure that is not a datasheet value is a :class:`ComputeParams` field
with its default and the reason for it; sweeps vary them.
"""

from dataclasses import dataclass, fields
import math
import numbers

import numpy as np

from ..inputs.errors import ConfigError
from ..inputs.limits import RATE_RANGES
from ..inputs.memo import IdentityMemo
from .ops.matmuls import matmul_layer_times
from .ops.precision import matrix_flops_per_layer
from .ops.spatial import halo_exchange_time_s, spatial_activation_share, spatial_row_share

__all__ = [
    "ComputeParams", "LayerTimes", "COMPUTE_MODELS", "layer_matmul_times",
    "replica_peak_flops", "vector_peak_flops",
    "forward_time_s", "backward_time_s", "layer_times", "halo_exchange_time_s", "spatial_row_share",
    "spatial_activation_share",
    "update_time_s", "memory_bound_time_s",
]


COMPUTE_MODELS = ("flops", "shape")
"""Models of forward and backward matrix time (:attr:`ComputeParams.compute_model`)."""


@dataclass(frozen=True)
class ComputeParams:
    """Efficiencies and peaks of the compute model that no datasheet gives (all sweepable)."""

    mxu_efficiency: float = 0.5
    """Fraction of the matrix-unit peak that forward/backward achieve. An assumption, not a
    measured figure: none of our references gives the MXU utilisation of the MLPerf v0.6 TPU
    runs, so 0.5 stands for "half of peak", a round working value. Small per-replica batches
    and non-matmul work (batch norm, softmax) pull real runs lower. It is the first thing to
    sweep (point key ``mxu_efficiency``, ``wus-sim step --mxu-efficiency``)."""
    backward_flops_ratio: float = 2.0
    """Backward FLOPs / forward FLOPs: one matmul for the activation gradient and one for the
    weight gradient per forward matmul (training ~3 x forward, the usual estimate, e.g. Kaplan et
    al. 2020, arXiv 2001.08361, sec. 2.1)."""
    vector_flops_per_replica: float = None
    """Vector-unit peak of one replica, FLOP/s. ``None`` = :attr:`vector_to_mxu_ratio` x the
    matrix-unit peak (1.92 TFLOP/s for a TPU v3 core)."""
    vector_to_mxu_ratio: float = 1 / 32
    """Vector / matrix peak when :attr:`vector_flops_per_replica` is not given. Not in our
    sources; an assumption: a TPU v3 core's two 128x128 MXUs do 2 x 128 x 128 MACs = 65536
    FLOP per cycle, its vector unit works on 8 x 128 = 1024 lanes at an assumed 2 FLOP per
    lane per cycle = 2048 FLOP per cycle: 1/32. The update is memory-bound by ~10x at this
    figure, so it rarely matters."""
    update_hbm_efficiency: float = 0.8
    """Fraction of the replica's HBM bandwidth the fused elementwise update streams at.
    Assumption: long unit-stride streaming kernels typically reach 80-90 % of peak HBM
    bandwidth (STREAM-like); 0.8 is the conservative end."""
    spatial_efficiency: float = 1.0
    """Speed-up per core when a replica spans several cores (spatial partitioning, SSD and
    Mask R-CNN in MLPerf v0.6): 1.0 = perfect. What is lost to the halo exchange and to
    rows that do not divide evenly is modelled apart (:func:`layer_times`); this is any
    loss beyond those."""
    layer_split: str = "flops"
    """How forward/backward matrix time is split over layers: ``'flops'`` (each layer's FLOPs
    from the workload file) or ``'params'`` (parameter count, a cruder proxy)."""
    elementwise_fwd_bytes: float = 6.0
    """HBM bytes of memory-bound elementwise work per layer-output element, forward.
    Declared assumption (bf16 activations, 2 B): batch norm reads the conv output once for
    its statistics and once to normalise, and writes the result with the activation
    function fused: 3 x 2 B. Layer norm, softmax and residual adds are of the same order."""
    elementwise_bwd_bytes: float = 10.0
    """The same for backward: batch-norm backward reads the output gradient and the input
    for its two reductions, then reads both again and writes the input gradient: 5 x 2 B.
    Declared assumption, like :attr:`elementwise_fwd_bytes`."""
    activation_hbm_efficiency: float = 0.8
    """Fraction of HBM bandwidth the elementwise kernels and weight reads stream at (the
    same STREAM-like assumption as :attr:`update_hbm_efficiency`)."""
    op_overhead_s: float = 0.0
    """Fixed cost of one op (a forward layer is one op, its backward
    ``backward_flops_ratio`` ops): kernel launch, pipeline fill and drain, the part of a
    matmul that does not shrink with the batch. 0 in the uncalibrated physics and in the
    shipped calibration, which fits the fixed cost per step instead (fitting this one in
    its place halves the calibration rows' error but raises the held-out error; see the
    docs/validation.md); a calibration file may set it."""
    step_overhead_s: float = 0.0
    """Fixed cost per training step that no part of the model explains: what remains of the
    software stack's per-step cost once the per-op costs (:attr:`op_overhead_s` x the ops the
    step runs) and the amortised host loop (:attr:`host_loop_s`) are counted. 0 in the
    uncalibrated physics; a calibration fits one value per software stack it was measured on
    (``stacks`` in the calibration file), and the step applies its stack's."""
    host_loop_s: float = 0.0
    """Host round trip per device loop (the host starts a loop of ``steps_per_loop`` training
    steps on the device and waits for it): paid once per loop, so each step pays
    ``host_loop_s / steps_per_loop``. 0 in the uncalibrated physics; the shipped calibration
    declares 1 ms with a range of 0-10 ms (an assumption: a TF ``session.run`` or a JAX
    dispatch plus the infeed/outfeed handshake is of the order of a millisecond). At the MLPerf
    runs' 100+ steps per loop it is under 0.1 ms a step, so the measured step times cannot pin
    it and it is declared, not fitted."""

    compute_model: str = "flops"
    """Matrix time: ``"flops"`` (layer FLOPs at :attr:`mxu_efficiency` x peak, the module docstring's
    roofline; the shipped calibration's) or ``"shape"`` (each matmul from its shapes, padded to the
    MXU tile: :func:`wus_sim.model.ops.matmuls.matmul_layer_times`)."""
    matmul_peak_fraction: float = 0.9
    """``shape``: fraction of the peak a large matmul padded to whole MXU tiles reaches (pipeline
    bubbles, VMEM traffic). Assumption: large matmuls run close to peak on TPU (the JAX scaling book,
    jax-ml/scaling-book tpus.md); to be fitted."""
    op_fixed_s: float = 0.0
    """``shape``: fixed cost of one matmul op (MXU pipeline fill and drain, first operand DMA) on top
    of its roofline. 0 in the uncalibrated physics; :attr:`op_overhead_s` stays the per-layer cost."""
    matmul_block: float = 0.0
    """``shape``: edge, in elements, of the output block a weight matmul computes from one pass over
    its operands' panels in on-chip memory (VMEM): the left operand is read from HBM once per block
    of output columns, the weight once per block of rows (:func:`wus_sim.model.ops.matmuls.operand_reads`),
    so a large matmul moves ``2 x M x K x N / block`` operand bytes (bf16) and is bound by HBM below
    ``block / 2`` FLOPs a byte. 0 = each operand read once (unlimited reuse). Not published for XLA's
    TPU tiling; fitted (it binds on a chip with much compute per byte of HBM, TPU v6e's 560 FLOP/B,
    and not on v3's 137 or v5p's 166)."""

    def __post_init__(self):
        # Every field a real number (not a bool, not text, finite as a float: 10**400 is not);
        # the same checks whether the values come from a calibration file, a point or Python.
        # Each range's ends keep every time finite and non-negative (wus_sim.inputs.limits.RATE_RANGES):
        # an efficiency of 1e-300 made a forward pass of -2e286 s.
        low = RATE_RANGES["mxu_efficiency"][0]
        for name in ("mxu_efficiency", "update_hbm_efficiency", "spatial_efficiency",
                     "activation_hbm_efficiency", "matmul_peak_fraction"):
            v = getattr(self, name)
            if not (_real(v) and low <= v <= 1):
                raise ConfigError(f"must be in [{low:g}, 1]", key_path=name, value=v)
        for name in ("backward_flops_ratio", "vector_to_mxu_ratio"):
            v = getattr(self, name)
            if not (_real(v) and 1e-3 <= v <= 1e3):
                raise ConfigError("must be a number >= 0.001 and <= 1000", key_path=name, value=v)
        for name, top in (("elementwise_fwd_bytes", 1e6), ("elementwise_bwd_bytes", 1e6), ("op_overhead_s", 1e3),
                          ("step_overhead_s", 1e3), ("host_loop_s", 1e3), ("op_fixed_s", 1e3), ("matmul_block", 1e6)):
            v = getattr(self, name)
            if not (_real(v) and 0 <= v <= top):
                raise ConfigError(f"must be a number >= 0 and <= {top:g}", key_path=name, value=v)
        v = self.vector_flops_per_replica
        if v is not None and not (_real(v) and 1e9 <= v <= 1e18):
            raise ConfigError("must be a number >= 1e9 and <= 1e18 FLOP/s (or None)",
                              key_path="vector_flops_per_replica", value=v)
        if not isinstance(self.layer_split, str) or self.layer_split not in ("flops", "params"):
            raise ConfigError("must be 'flops' or 'params'", key_path="layer_split", value=self.layer_split)
        if not isinstance(self.compute_model, str) or self.compute_model not in COMPUTE_MODELS:
            raise ConfigError(f"must be one of {', '.join(COMPUTE_MODELS)}", key_path="compute_model",
                              value=self.compute_model)

    def to_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class LayerTimes:
    """Per-layer compute times of one replica, seconds, indexed by forward layer order."""

    forward_s: np.ndarray
    backward_s: np.ndarray

    @property
    def forward_total_s(self):
        return float(self.forward_s.sum())

    @property
    def backward_total_s(self):
        return float(self.backward_s.sum())

    def backward_done_s(self):
        """Time from the start of backward until each layer's gradients are complete.

        Backward runs from the last layer to the first, so layer ``i`` is done after
        the backward of layers ``i .. L-1``.
        """
        return np.cumsum(self.backward_s[::-1])[::-1].copy()


def _real(value):
    """A real number that a float holds finitely: not a bool, not text, not 10**400 or inf/nan."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _params(params):
    return ComputeParams() if params is None else params


def replica_peak_flops(topology, params=None, *, spatial_ways=1):
    """Achieved matrix-unit FLOP/s of one replica (peak x efficiency x spatial ways)."""
    p = _params(params)
    ways = int(spatial_ways)
    if ways < 1:
        raise ConfigError("must be >= 1", key_path="spatial_ways", value=spatial_ways)
    speedup = 1 + (ways - 1) * p.spatial_efficiency
    return topology.peak_flops_per_replica * p.mxu_efficiency * speedup


def vector_peak_flops(topology, params=None):
    """Vector-unit FLOP/s of one replica (core)."""
    p = _params(params)
    if p.vector_flops_per_replica is not None:
        return float(p.vector_flops_per_replica)
    return topology.peak_flops_per_replica * p.vector_to_mxu_ratio


def _check_batch(per_replica_batch):
    if isinstance(per_replica_batch, bool) or not per_replica_batch > 0:
        raise ConfigError("must be > 0", key_path="per_replica_batch", value=per_replica_batch)


def forward_time_s(workload, topology, per_replica_batch, params=None, *, spatial_ways=1, quantization="none"):
    """Forward time of one replica for *per_replica_batch* examples, seconds (matrix work only)."""
    _check_batch(per_replica_batch)
    if quantization == "none":
        per_example = workload.fwd_flops_per_example
    else:
        per_example = float(matrix_flops_per_layer(workload, topology, quantization).sum())
    flops = per_example * per_replica_batch
    return flops / replica_peak_flops(topology, params, spatial_ways=spatial_ways)


def backward_time_s(workload, topology, per_replica_batch, params=None, *, spatial_ways=1, quantization="none"):
    """Backward time: ``backward_flops_ratio`` x :func:`forward_time_s`."""
    p = _params(params)
    return p.backward_flops_ratio * forward_time_s(workload, topology, per_replica_batch, p,
                                                   spatial_ways=spatial_ways, quantization=quantization)


def layer_times(workload, topology, per_replica_batch, params=None, *, spatial_ways=1, remat="none",
                quantization="none"):
    """:class:`LayerTimes` of one replica: the per-layer roofline of the module docstring.

    With a *remat* policy that recomputes (:data:`wus_sim.model.workload.REMAT_MODES`), each
    layer's backward first runs its forward again: backward time += forward time, layer by layer;
    under ``selective`` only its attention score and context matmuls and its elementwise forward
    work (the weight matmuls' outputs are kept).

    Under ``compute_model: flops``, with ``elementwise_*_bytes = 0``, no overheads, compute-bound
    layers and one core per replica (or maps whose rows divide over the cores), the sums equal
    :func:`forward_time_s` and :func:`backward_time_s`; ``int8`` runs the weight matmuls at the int8
    peak (:func:`matrix_flops_per_layer`)."""
    p = _params(params)
    _check_batch(per_replica_batch)
    ways = int(spatial_ways)
    # a step asks for the same times several times (each strategy's program, each band's
    # gradient), and a sweep's points that differ only in their links ask again: computed once;
    # the arrays are read-only, so a memoized result cannot be changed
    return _LAYER_TIMES.get((workload, topology.chip), (p, per_replica_batch, ways, remat, quantization,
                                                        *compute_view(topology, ways)),
                            lambda: _layer_times(workload, topology, per_replica_batch, p, ways, remat, quantization))


_LAYER_TIMES = IdentityMemo(maxsize=512)


def compute_view(topology, spatial_ways=1):
    """What of *topology* (besides its chip) the layer times read: its cores per chip, and for a
    spatially partitioned replica (*spatial_ways* > 1: a halo exchange over the links) its
    slowest link and hop latency. Slices equal in these have the same layer times."""
    if int(spatial_ways) > 1:
        return topology.cores_per_chip, min(topology.axis_link_Bps), topology.hop_latency_s
    return topology.cores_per_chip, None, None


def layer_matmul_times(workload, topology, per_replica_batch, params=None, *, spatial_ways=1, quantization="none"):
    """:class:`LayerTimes` of each layer's matrix part alone (what a tensor-split layer's collectives may
    overlap with): no elementwise work, per-layer overhead, halo or remat."""
    p = _params(params)
    _check_batch(per_replica_batch)
    ways = int(spatial_ways)
    share = spatial_row_share(workload, ways)
    if p.compute_model == "shape":
        t = matmul_layer_times(workload, topology, per_replica_batch, p, quantization=quantization, share=share,
                               spatial_ways=ways)
        fwd_s, bwd_s = t.forward_s, t.backward_s
    else:
        fwd_s, bwd_s = _flops_matrix_times(workload, topology, per_replica_batch, p, ways, quantization, share)
    fwd_s, bwd_s = np.array(fwd_s, dtype=float), np.array(bwd_s, dtype=float)
    fwd_s.flags.writeable = bwd_s.flags.writeable = False
    return LayerTimes(forward_s=fwd_s, backward_s=bwd_s)


def _flops_matrix_times(workload, topology, per_replica_batch, p, ways, quantization, share):
    """The ``flops`` model's matrix part per layer, ``(forward, backward)``."""
    fwd = forward_time_s(workload, topology, per_replica_batch, p, spatial_ways=ways, quantization=quantization)
    if p.layer_split == "flops":
        weights = matrix_flops_per_layer(workload, topology, quantization)
    else:
        weights = workload.layer_params().astype(float)
    if weights.sum() <= 0:  # nothing to split by: spread evenly
        weights = np.ones(workload.num_layers)
    matrix_fwd = fwd * weights / weights.sum() * share
    matrix_bwd = p.backward_flops_ratio * matrix_fwd
    hbm_Bps = topology.hbm_Bps_per_replica * p.activation_hbm_efficiency
    act_B = workload.activation_bytes
    per_core = (workload.layer_output_elements + workload.layer_score_elements) * per_replica_batch / ways * share
    weight_elems = workload.layer_params().astype(float)
    # Every core of a spatially partitioned replica reads all weights and writes its part
    # of the output; forward reads bf16 weights, backward reads them again and writes
    # weight gradients.
    io_fwd = (weight_elems * act_B + per_core * act_B) / hbm_Bps
    io_bwd = (weight_elems * (act_B + workload.grad_bytes) + 2 * per_core * act_B) / hbm_Bps
    return np.maximum(matrix_fwd, io_fwd), np.maximum(matrix_bwd, io_bwd)


def _layer_times(workload, topology, per_replica_batch, p, ways, remat, quantization):
    """:func:`layer_times` once its arguments are checked: each layer's matrix part by the chosen model,
    then its elementwise work, fixed cost per op, halo and recomputation."""
    share = spatial_row_share(workload, ways)  # the busiest core's work / an even share
    if p.compute_model == "shape":
        mm = matmul_layer_times(workload, topology, per_replica_batch, p, quantization=quantization, share=share,
                                spatial_ways=ways)
        matrix_fwd, matrix_bwd, attention_s = mm.forward_s, mm.backward_s, mm.attention_forward_s
        scores = np.zeros(workload.num_layers)  # fused (flash) attention's never reach HBM
        np.add.at(scores, [a.layer for a in workload.attention if not a.fused],
                  [a.elements for a in workload.attention if not a.fused])
    else:
        matrix_fwd, matrix_bwd = _flops_matrix_times(workload, topology, per_replica_batch, p, ways, quantization,
                                                     share)
        # the attention matmuls (bf16 under int8 too), what selective remat runs again
        attention_s = (workload.layer_attention_flops * per_replica_batch * share
                       / replica_peak_flops(topology, p, spatial_ways=ways))
        scores = workload.layer_score_elements
    hbm_Bps = topology.hbm_Bps_per_replica * p.activation_hbm_efficiency
    # the replica's outputs, all its cores'; an attention layer's score matrix is an output of its
    # score matmul and takes the same memory-bound work (softmax, dropout) as a layer output
    per_core = (workload.layer_output_elements + scores) * per_replica_batch / ways * share
    elem_fwd = per_core * p.elementwise_fwd_bytes / hbm_Bps
    elem_bwd = per_core * p.elementwise_bwd_bytes / hbm_Bps
    fwd_s = matrix_fwd + elem_fwd + p.op_overhead_s
    bwd_s = matrix_bwd + elem_bwd + p.backward_flops_ratio * p.op_overhead_s
    if ways > 1:
        halo = halo_exchange_time_s(workload, topology, per_replica_batch)
        fwd_s = fwd_s + halo
        bwd_s = bwd_s + halo  # the halo of the activation gradient goes back the same way
    if workload.rematerialises(remat) and remat == "selective":
        # the attention matmuls and the elementwise forward work, again
        bwd_s = bwd_s + attention_s + elem_fwd
    elif workload.rematerialises(remat):
        bwd_s = bwd_s + fwd_s  # the recomputed forward, just before the layer's backward
    fwd_s, bwd_s = np.array(fwd_s, dtype=float), np.array(bwd_s, dtype=float)
    fwd_s.flags.writeable = bwd_s.flags.writeable = False
    return LayerTimes(forward_s=fwd_s, backward_s=bwd_s)


def memory_bound_time_s(nbytes, flops, topology, params=None):
    """max(bytes / (HBM bandwidth per replica x efficiency), flops / vector peak), seconds."""
    p = _params(params)
    if nbytes < 0 or flops < 0:
        raise ConfigError("bytes and flops must be >= 0", key_path="update", value=(nbytes, flops))
    t_mem = nbytes / (topology.hbm_Bps_per_replica * p.update_hbm_efficiency)
    t_vec = flops / vector_peak_flops(topology, p)
    return max(t_mem, t_vec)


def update_time_s(elements, bytes_per_element, flops_per_element, topology, params=None):
    """Time of an elementwise update of *elements* values on one replica, seconds.

    *bytes_per_element* is read + written (e.g. Adam fp32: 16 read + 12 written = 28).
    """
    return memory_bound_time_s(elements * bytes_per_element, elements * flops_per_element, topology, params)
