"""A small torus/mesh slice with chosen link parameters, for the network and collective tests.

Built straight from :class:`wus_sim.hardware.topology.Topology` (the generic chip) so a test can set
per-axis bandwidths, mixed wraparound and the on-chip bandwidth that named slices fix.
"""

import numpy as np

from wus_sim.collectives.schedules import embedding

from wus_sim.hardware.topology import Topology
from wus_sim.hardware.topology_files import load_chips

__all__ = ["make", "folded_ring_time"]


def make(dims, wrap=True, *, link_GBps=100.0, hop_latency_us=1.0, cores=1, onchip_GBps=200.0):
    """Slice of shape *dims*; *wrap* and *link_GBps* are one value or one per axis."""
    wrap = (wrap,) * len(dims) if isinstance(wrap, bool) else tuple(wrap)
    bw = np.broadcast_to(np.asarray(link_GBps, float) * 1e9, (len(dims),))
    return Topology("t", load_chips()["generic"], dims=tuple(dims), wrap=wrap, axis_link_Bps=tuple(bw),
                    hop_latency_s=hop_latency_us * 1e-6, cores_per_chip=cores, onchip_Bps=onchip_GBps * 1e9)


def folded_ring_time(d, buf, bw, lat, kind, routing="store-and-forward"):
    """A mesh line's folded ring, K = 1 (``kind`` 'rs', 'ag' or 'ar'): member i finishes after
    the N edges before it; no link ever queues (every edge costs >= one message time), so the
    slowest window of N consecutive edges is the time. An edge of ``h`` hops costs
    ``h (lat + b/bw)`` store-and-forward and ``h lat + b/bw`` cut-through."""
    if d == 1:
        return 0.0
    order = embedding.line_ring_pattern(d, False)[0]
    hops = [abs(order[(i + 1) % d] - order[i]) for i in range(d)]
    nsteps = 2 * (d - 1) if kind == "ar" else d - 1
    window = max(sum(hops[(i - j) % d] for j in range(1, nsteps + 1)) for i in range(d))
    if routing == "cut-through":
        return window * lat + nsteps * buf / d / bw
    return window * (lat + buf / d / bw)
