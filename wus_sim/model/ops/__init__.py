"""What one op costs on a chip, from its shape and precision, and which ops a remat policy reruns.

:mod:`.matmuls` (the matmuls of a layer with their M, K, N and dtypes, padded to the chip's MXU
tiles and timed on a roofline: the ``shape`` compute model), :mod:`.precision` (int8 matmuls as
AQT runs them: which matmuls, at which peak) and :mod:`.remat_names` (MaxText's remat policies by
name: which named matmul outputs each saves, offloads or recomputes), :mod:`.spatial` (a replica
spatially partitioned over cores: the busiest core's rows, the halo exchange), :mod:`.experts` (a
mixture of experts' routed experts: which tensors, how many a token goes to, and the expert matmuls
one device of an expert group runs) and :mod:`.context` (the share of each sequence one device of a
context group runs and keeps).

May import: the layers below model (hardware, inputs) and nothing of model's top modules, which
build on it (:mod:`wus_sim.model.compute`).
"""
