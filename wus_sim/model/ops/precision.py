"""Matmul precision: which work of a step runs at the chip's int8 peak under ``quantization: int8``.

The weight matmuls run at the chip's int8 peak (``peak_int8_TOPs`` in chips.yaml), forward and
backward, as AQT-quantized training runs them: MaxText's ``quantization: int8`` builds AQT with
8-bit forward and activation-gradient matmuls, and 8-bit weight-gradient matmuls whenever
``quantization_local_shard_count`` is not 0, its default (-1) meaning the number of slices
(github.com/google/maxtext, MaxText/layers/quantizations.py and pyconfig.py). Only the dense
layers go through AQT there: the attention score and context matmuls (activation by activation),
the elementwise work, the optimizer and the collectives stay as they are, and the weights keep
their dtype (they are quantized on the fly), so memory does not change.

The calibration's ``mxu_efficiency`` applies to int8 as to bf16: no public measurement gives an
int8 efficiency of its own, so it is the same assumption, and the step and plan outputs say so
(:func:`precision_line`). The cost of quantizing (a max-abs scale per tensor, elementwise) is not
modelled.
"""

import numpy as np

from ...inputs.errors import ConfigError

__all__ = ["QUANTIZATIONS", "int8_speedup", "matrix_flops_per_layer", "precision_line"]


QUANTIZATIONS = ("none", "int8")
"""Matmul precisions of the compute model: ``none`` (bf16 at the chip's bf16 peak) or ``int8``
(the weight matmuls at its int8 peak; see the module docstring)."""


def int8_speedup(topology, quantization="none"):
    """The chip's int8 peak over its bf16 peak under *quantization* (1 for ``none``): how much
    faster a weight matmul runs. A chip whose chips.yaml entry gives no ``peak_int8_TOPs`` cannot
    run ``int8`` (a one-line error, not a guess: TPU v2 and v3 have no int8 peak in their docs)."""
    if quantization not in QUANTIZATIONS:
        raise ConfigError(f"must be one of {', '.join(QUANTIZATIONS)}", key_path="quantization", value=quantization)
    if quantization == "none":
        return 1.0
    chip = topology.chip
    if chip.peak_int8_ops is None:
        raise ConfigError(f"needs the chip's int8 peak, and chip {chip.name} gives none (no peak_int8_TOPs in "
                          "chips.yaml; Cloud TPU docs give it for v5e, v5p and v6e)", key_path="quantization",
                          value=quantization)
    return chip.peak_int8_ops / chip.peak_flops


def matrix_flops_per_layer(workload, topology, quantization="none"):
    """Forward matrix work per example of each layer, in FLOPs at the bf16 peak: the layer's FLOPs
    as they are without quantization; under ``int8`` its weight matmuls' FLOPs divided by
    :func:`int8_speedup` plus its attention score and context matmuls' FLOPs unchanged."""
    flops = np.asarray(workload.layer_fwd_flops, dtype=float)
    speedup = int8_speedup(topology, quantization)
    if speedup == 1.0:
        return flops
    attention = workload.layer_attention_flops
    return attention + (flops - attention) / speedup


def precision_line(topology, quantization, mxu_efficiency, calibration_id):
    """One line for the step and plan outputs: what ``int8`` changes and the efficiency it takes."""
    chip = topology.chip
    speedup = int8_speedup(topology, quantization)
    return (f"int8 matmuls: the weight matmuls, forward and backward, at {chip.name}'s int8 peak "
            f"{chip.peak_int8_ops / 1e12:g} TOP/s ({speedup:g}x its bf16 peak), at the same MXU efficiency "
            f"{mxu_efficiency:.3g} as bf16 (calibration {calibration_id}: no int8 measurement, so the bf16 "
            "efficiency is assumed); attention-score matmuls, elementwise work, the optimizer and the "
            "collectives unchanged")
