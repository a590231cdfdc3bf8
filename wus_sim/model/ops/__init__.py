"""What one op costs on a chip, from its shape and precision.

:mod:`.matmuls` (the matmuls of a layer with their M, K, N and dtypes, padded to the chip's MXU
tiles and timed on a roofline: the ``shape`` compute model) and :mod:`.precision` (int8 matmuls as
AQT runs them: which matmuls, at which peak).

May import: the layers below model (hardware, inputs) and nothing of model's top modules, which
build on it (:mod:`wus_sim.model.compute`).
"""
