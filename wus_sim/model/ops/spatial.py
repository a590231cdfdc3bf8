"""Spatial partitioning of a replica over several cores (SSD and Mask R-CNN in Google's MLPerf v0.6
TPU runs): which core is busiest when a conv layer's output rows divide unevenly, and the halo rows
the cores exchange over ICI. :mod:`wus_sim.model.compute` times the layers with them."""

import numpy as np

__all__ = ["spatial_row_share", "spatial_activation_share", "halo_exchange_time_s"]


def spatial_row_share(workload, spatial_ways):
    """Per layer, the work of a spatially partitioned replica's busiest core over an even ``1 /
    spatial_ways`` share: ``ceil(H / ways) / (H / ways)`` for a conv layer whose output map has ``H``
    rows (:attr:`Workload.layer_map_side`, rounded), 1 for other layers and for one core per replica.

    A core holds whole rows: Google's MLPerf v0.6 SSD and Mask R-CNN runs split each image along its
    height over 4 cores (``--input_partition_dims=1 --input_partition_dims=4`` in their run scripts,
    github.com/mlcommons/training_results_v0.6), and a map of ``H`` rows leaves one core ``ceil(H /
    4)`` of them, which the others wait for. SSD's 38x38 layers, most of its FLOPs, run 10 rows where
    an even split gives 9.5: 5 % slower; its 3x3 and 1x1 maps run on one core."""
    ways = int(spatial_ways)
    share = np.ones(workload.num_layers)
    if ways == 1:
        return share
    side = np.rint(workload.layer_map_side)
    rows = side > 0
    share[rows] = np.ceil(side[rows] / ways) * ways / side[rows]
    return share


def spatial_activation_share(workload, spatial_ways):
    """The busiest core's part of a spatially partitioned replica's activation memory over an even
    ``1 / spatial_ways`` share: :func:`spatial_row_share` weighted by each layer's output elements (1
    with one core per replica, or a workload without conv outputs). The activation estimate is one
    figure per example, not per layer; weighting by the layer outputs assumes it is spread over the
    layers as their outputs are (what backward keeps is mostly each layer's output). SSD-ResNet34
    over 4 cores: 1.04."""
    if int(spatial_ways) == 1:  # (before the sum: most replicas are one core each)
        return 1.0
    outputs = workload.layer_output_elements
    total = outputs.sum()
    if total <= 0:
        return 1.0
    return float((outputs * spatial_row_share(workload, spatial_ways)).sum() / total)


def halo_exchange_time_s(workload, topology, per_replica_batch):
    """Per-layer time of a spatially partitioned replica's halo exchange, seconds: each core sends
    :attr:`Workload.layer_halo_elements` x batch activations (bf16) to each neighbour across its cuts;
    the two directions of a link run at once, so a layer costs one hop latency plus one message time.
    Layers without a halo cost 0."""
    halo = workload.layer_halo_elements * per_replica_batch * workload.activation_bytes
    link_Bps = min(topology.axis_link_Bps)
    return np.where(halo > 0, topology.hop_latency_s + halo / link_Bps, 0.0)
