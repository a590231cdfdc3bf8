"""A small torus/mesh slice with chosen link parameters, for the network and collective tests.

Built straight from :class:`wus_sim.topology.Topology` (the generic chip) so a test can set
per-axis bandwidths, mixed wraparound and the on-chip bandwidth that named slices fix.
"""

import numpy as np

from wus_sim.topology import Topology, load_chips

__all__ = ["make"]


def make(dims, wrap=True, *, link_GBps=100.0, hop_latency_us=1.0, cores=1, onchip_GBps=200.0):
    """Slice of shape *dims*; *wrap* and *link_GBps* are one value or one per axis."""
    wrap = (wrap,) * len(dims) if isinstance(wrap, bool) else tuple(wrap)
    bw = np.broadcast_to(np.asarray(link_GBps, float) * 1e9, (len(dims),))
    return Topology("t", load_chips()["generic"], dims=tuple(dims), wrap=wrap, axis_link_Bps=tuple(bw),
                    hop_latency_s=hop_latency_us * 1e-6, cores_per_chip=cores, onchip_Bps=onchip_GBps * 1e9)
