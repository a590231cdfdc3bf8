"""The step's latency-bound all-reduces: batch-norm statistics and optimizer norms.

A training step issues, besides its gradient and weight collectives, all-reduces of a
few hundred bytes to a few KiB: the batch statistics of cross-replica batch norm (per
layer, in groups of neighbouring replicas) and the LARS/LAMB norms of sharded weights
(over every replica). At these sizes the hops' latency decides, not the bandwidth, and
the algorithm that is best for a 100 MiB gradient bucket is the worst here: a ring over
``n`` members pays ``2(n-1)`` latencies, halving-doubling (Rabenseifner) ``2 log2 n``,
recursive doubling ``log2 n`` (each step carries the whole buffer, which costs nothing
that matters at a few KiB).

Which one TPUs run is not published. Collective libraries choose per call by a cost
model: NCCL fills a table of predicted times per algorithm and protocol for every
call and takes the least (``src/enqueue.cc``, its latencies and bandwidths in
``src/graph/tuning.cc``, github.com/NVIDIA/nccl); MPICH switches to recursive doubling
below 2 KiB, a threshold Thakur, Rabenseifner and Gropp (IJHPCA 2005) derive from the
same alpha-beta costs. ``small_allreduce_algorithm: auto`` (the default) does what those
libraries do, with this simulator's own costs: it simulates every candidate that can
run on the group and takes the fastest. An algorithm name pins that one instead, which
is what ``wus-sim validate --choices`` compares.

One source points elsewhere: Google's MLPerf v0.6 SSD code lists each batch-norm group's
cores in the order of a ring of neighbours (``distributed_batch_norm.py`` in
github.com/mlcommons/training_results_v0.6), which suggests a ring. Over 64 cores with 1 us
per hop that is 126 latencies per layer; ``--choices`` reports that rule too (it moves the
SSD rows far from their measurements).
"""

import numpy as np

from ..collectives import EXCHANGE_ALGORITHMS, analytic_time, collective_time
from ..hardware.multislice import hierarchical_time
from ..inputs.errors import ConfigError
from .step_prefetch import bidirectional_for

__all__ = ["small_allreduce", "small_allreduce_s", "small_allreduce_report", "batch_norm_allreduce_s", "compact_group"]

_PAIRWISE = EXCHANGE_ALGORITHMS
"""Candidates that need a power-of-two group (pairwise exchanges, no ring direction)."""

STATISTICS_BYTES_PER_CHANNEL = 2 * 4
"""A batch-norm layer all-reduces two fp32 values per channel: mean and variance in
forward, the two gradient sums in backward."""


def small_allreduce(topology, nbytes, options, group=None, *, bidirectional=False):
    """``(algorithm, seconds)`` of a latency-bound all-reduce of *nbytes* per member.

    *group* is a list of replicas (a batch-norm group) or ``None`` (every replica of the
    slice). ``options.small_allreduce_algorithm`` names the algorithm, or ``'auto'``:
    the fastest of the step's ``algorithm`` (``ring`` for a replica list, which has no
    axes for ``2d``), ``halving-doubling`` and ``recursive-doubling`` where the group is
    a power of two, each simulated on the group (ties go to the first in that order).
    *bidirectional* applies to the step's own ring algorithm (the step passes its rule,
    :func:`wus_sim.training.step.bidirectional_for`); pairwise exchanges and the ring of a replica
    list run one way.
    """
    choice = options.small_allreduce_algorithm
    if choice != "auto":
        return choice, _time(topology, nbytes, options, group, choice, bidirectional)
    base = "ring" if group is not None else options.algorithm
    members = len(group) if group is not None else topology.num_chips
    candidates = [base] + [a for a in _PAIRWISE if a != base and members & (members - 1) == 0]
    # Simulating a pairwise exchange over a whole pod costs a few tenths of a second. Its
    # closed form is a lower bound of its simulated time (the uncontended chain; see
    # wus_sim.collectives.analytic) on a slice without per-link overrides, so a candidate
    # whose bound already exceeds the best time found cannot win and is not simulated:
    # the same pick as simulating all, cheapest bound first.
    bound = _lower_bounds(topology, nbytes, options, group, candidates, bidirectional)
    best, best_s = None, float("inf")
    for i in sorted(range(len(candidates)), key=lambda i: (bound[i], i)):
        if bound[i] > best_s:
            continue
        t = _time(topology, nbytes, options, group, candidates[i], bidirectional)
        if t < best_s or (t == best_s and i < candidates.index(best)):
            best, best_s = candidates[i], t
    return best, best_s


def _lower_bounds(topology, nbytes, options, group, candidates, bidirectional):
    """Per candidate, a time it cannot beat: its closed form, or 0 where per-link overrides or
    failed links let the closed form err either way."""
    if topology.link_Bps_override or topology.failed_links:
        return [0.0] * len(candidates)
    return [analytic_time(topology, "all-reduce", a, nbytes, group=group, routing=options.routing,
                          bidirectional=_directions(options, group, a, bidirectional)) for a in candidates]


def _directions(options, group, algorithm, bidirectional):
    # only the step's own algorithm over the whole slice runs its ring directions
    return bool(bidirectional) and group is None and algorithm == options.algorithm \
        and algorithm not in _PAIRWISE


def _time(topology, nbytes, options, group, algorithm, bidirectional):
    return collective_time(topology, "all-reduce", algorithm, nbytes, group=group,
                           bidirectional=_directions(options, group, algorithm, bidirectional),
                           routing=options.routing)


def small_allreduce_report(plan, topology, options, *, bidirectional=False):
    """What the step's latency-bound all-reduces are and which algorithm each took: one dict
    per distinct (what, size), with ``what``, ``group_cores``, ``nbytes``, ``per_step`` (how
    many a step runs), ``algorithm`` and ``time_s`` (one all-reduce, within the slice). The
    optimizer's norms run only under the sharded strategies (a replicated update has the
    whole tensors). *plan* is the sharding plan (:mod:`wus_sim.training.update.planner`)."""
    out = []
    if options.bn_group_replicas > 1:
        group = _batch_norm_group(topology, options, plan.spatial_ways)
        channels = plan.workload.layer_batch_norm_channels
        sizes, counts = np.unique(STATISTICS_BYTES_PER_CHANNEL * channels[channels > 0], return_counts=True)
        for nbytes, layers in zip(sizes.tolist(), counts.tolist()):
            algorithm, t = small_allreduce(topology, nbytes, options, group)
            out.append({"what": "batch-norm statistics", "group_cores": len(group), "nbytes": nbytes,
                        "per_step": 2 * layers, "algorithm": algorithm, "time_s": t})
    for r in plan.extra_reductions:
        algorithm, t = small_allreduce(topology, r.nbytes, options, bidirectional=bidirectional)
        out.append({"what": f"sharded update: {r.what}", "group_cores": topology.num_replicas,
                    "nbytes": int(r.nbytes), "per_step": 1, "algorithm": algorithm, "time_s": t})
    return out


def batch_norm_allreduce_s(workload, topology, options, spatial_ways):
    """Per-layer seconds of cross-replica batch norm: one all-reduce of the layer's batch
    statistics (mean and variance, fp32, per channel) in forward and one (the two gradient
    sums) in backward, over the cores of ``options.bn_group_replicas`` neighbouring replicas
    (every core of a spatially partitioned replica holds part of the batch); the core waits
    for it. Each is a :func:`small_allreduce` over :func:`compact_group`. The hop latency
    (1 us: a working figure, no datasheet gives one) scales this term, which is why
    ``wus-sim validate --choices`` reports the fit at 0.5 us too."""
    group = _batch_norm_group(topology, options, spatial_ways)
    channels = workload.layer_batch_norm_channels
    out = np.zeros(workload.num_layers)
    for layer in np.flatnonzero(channels):
        out[layer] = small_allreduce(topology, STATISTICS_BYTES_PER_CHANNEL * channels[layer], options, group)[1]
    return out


def _batch_norm_group(topology, options, spatial_ways):
    """The replicas (cores) of one batch-norm group: ``bn_group_replicas`` replicas of
    *spatial_ways* cores each, a :func:`compact_group`; the group must divide the slice."""
    cores = options.bn_group_replicas * spatial_ways
    if topology.num_replicas % cores:
        raise ConfigError(f"spans {cores} cores, which must divide the slice's {topology.num_replicas}",
                          key_path="bn_group_replicas", value=options.bn_group_replicas)
    return compact_group(topology, cores)


def compact_group(topology, cores):
    """Replicas of a group of *cores* neighbouring cores: all cores of a near-square block
    of chips at the origin (a batch-norm group is neighbours, not a row of the pod), chips
    in row-major order, a chip's cores one after the other."""
    cpc = topology.cores_per_chip
    if cores <= cpc:
        return list(range(cores))
    chips = cores // cpc
    a = 1
    while a * 2 <= topology.dims[0] and chips % (a * 2) == 0 and (a * 2) ** 2 <= chips:
        a *= 2
    b = chips // a
    if len(topology.dims) < 2 or b > topology.dims[1]:  # no room for a block: a line of chips
        return list(range(cores))
    block = [x + topology.dims[0] * y for y in range(b) for x in range(a)]
    return [c * cpc + k for c in block for k in range(cpc)]


def small_allreduce_s(topology, nbytes, options, multislice=None, *, ici_s=None):
    """Seconds of one latency-bound all-reduce over every replica (an optimizer norm of the
    sharded update), as the step times it: :func:`small_allreduce` on *topology*; with a
    *multislice*, hierarchical (:mod:`wus_sim.hardware.multislice`): the in-slice all-reduce by
    :func:`small_allreduce`, the in-slice reduce-scatter/all-gather phases as the gradients'
    (*ici_s*, default the step's algorithm), the cross-slice phase over the DCN."""
    def small_ici_s(op, n):
        if op == "all-reduce":
            return small_allreduce(topology, n, options, bidirectional=bidirectional_for(options))[1]
        if ici_s is not None:
            return ici_s(op, n)
        return collective_time(topology, op, options.algorithm, n, bidirectional=bidirectional_for(options),
                               routing=options.routing) if n > 0 else 0.0

    if multislice is None:
        return small_ici_s("all-reduce", nbytes)
    return hierarchical_time(multislice, "all-reduce", nbytes, small_ici_s,
                             shard_across_slices=options.shard_across_slices)
