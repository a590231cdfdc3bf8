"""Model FLOPs of a training step and what they say in MaxText's units: MFU, TFLOP/s and tokens/s
per device.

MaxText's definition (AI-Hypercomputer/maxtext, docs/reference/performance_metrics.md, and
``calculate_tflops_training_per_device`` in its maxtext_utils): the FLOPs of one forward and
backward pass "regardless of implementation", counted as 2 x the multiply-accumulates of every
matmul, x 3 for forward plus backward; the attention score and context matmuls halved for a
causal mask (since MaxText PR #1988); the output (unembedding) projection counted, the embedding
lookup not (a gather); what rematerialisation recomputes not counted. MFU = those FLOPs per step /
(step time x the chip's peak); tokens/s/device = tokens per step / step time / devices.

The workload file already counts forward FLOPs that way (2 x MACs per token of every weight
matmul, the attention matmuls in full, no embedding lookup: its ``sources.counts``), so the model
FLOPs per example are 3 x (forward FLOPs - the causal half of the attention matmuls).
"""

from dataclasses import dataclass

__all__ = ["ModelFlops", "model_flops", "training_flops_per_example"]

TRAINING_PASSES = 3
"""Forward plus backward in matmul FLOPs: backward runs two matmuls (activation and weight
gradients) per forward matmul (MaxText: "1 forward pass + 2 backward passes")."""


def training_flops_per_example(workload, *, causal=None):
    """Model FLOPs of one example's forward and backward pass, MaxText's count.

    *causal*: whether self-attention is counted as masked causally (half its score and context
    work); ``None`` takes each attention entry's own word (``causal`` in the workload file,
    :class:`~wus_sim.model.workload.AttentionScores`): the decoders' self-attention is, an
    encoder's and cross-attention are not."""
    halved = sum(a.flops for a in workload.attention if (a.causal if causal is None else causal))
    return TRAINING_PASSES * (float(workload.fwd_flops_per_example) - halved / 2)


@dataclass(frozen=True)
class ModelFlops:
    """A step's model FLOPs and throughput per device, MaxText's units."""

    flops_per_device: float
    """Model FLOPs of one device's share of the step (MaxText's TFLOPs per device x 1e12)."""
    tokens_per_device: float
    """Tokens one device trains on per step (global tokens / devices)."""
    tflops_per_s_per_device: float
    """Model TFLOP/s per device (MaxText's ``per_device_tflops_per_sec``)."""
    tokens_per_s_per_device: float
    mfu: float
    """Model-FLOPs utilisation, a fraction of the device's bf16 peak."""

    def to_dict(self):
        return {"mfu": self.mfu, "tflops_per_s_per_device": self.tflops_per_s_per_device,
                "tokens_per_s_per_device": self.tokens_per_s_per_device,
                "model_flops_per_device": self.flops_per_device, "tokens_per_device": self.tokens_per_device}


def model_flops(workload, global_batch, devices, step_time_s, device_peak_flops, *, causal=None):
    """MFU, TFLOP/s and tokens/s per device of a step of *global_batch* examples over *devices*
    devices (a device: what JAX counts, one chip under megacore) of peak *device_peak_flops*."""
    if not (devices > 0 and step_time_s > 0 and device_peak_flops > 0 and global_batch > 0):
        raise ValueError("devices, step time, peak and batch must be positive")
    per_device = global_batch * training_flops_per_example(workload, causal=causal) / devices
    tokens = global_batch * workload.units_per_example / devices
    rate = per_device / step_time_s
    return ModelFlops(flops_per_device=per_device, tokens_per_device=tokens,
                      tflops_per_s_per_device=rate / 1e12, tokens_per_s_per_device=tokens / step_time_s,
                      mfu=rate / device_peak_flops)
