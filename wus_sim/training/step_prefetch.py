"""A step's collective times asked for all at once, before its programs ask one by one.

A contended plan (a slice with failed or slow links) runs on the window engine, whose cost is
mostly per time window, whatever the window holds: the sizes of one plan run together in one
:func:`~wus_sim.collectives.collective_times` call share those windows. A step asks, across its
strategies, for every gradient bucket's reduce-scatter or all-reduce, every weight all-gather
and, for the sharded updates, the optimizer norms' small all-reduces; :func:`prefetch_collectives`
asks for all of them first, one call per op, so the memo then answers the programs (the same
times, to the last bit: each size is still simulated alone in its window).
"""

from ..collectives import EXCHANGE_ALGORITHMS

__all__ = ["bidirectional_for", "bucket_gathers", "prefetch_collectives"]


def bidirectional_for(options):
    """Whether ring phases run both directions: the option, or (``None``) yes unless the
    algorithm is halving-doubling or recursive-doubling (pairwise exchanges, no ring direction)."""
    if options.bidirectional is None:
        return options.algorithm not in EXCHANGE_ALGORITHMS
    return bool(options.bidirectional)


def bucket_gathers(work, bucket):
    """*bucket*'s all-gathers of *work*: after the update, before forward, before backward
    (``None`` where it has none)."""
    return tuple(next((g for g in gathers if g.bucket == bucket), None)
                 for gathers in (work.weight_allgathers, work.forward_allgathers, work.backward_allgathers))


def _small_allreduces_simulated(topology, options):
    """Whether :func:`~wus_sim.training.small_allreduce.small_allreduce` simulates the step's own
    algorithm for an all-reduce over every replica: when it is pinned to it, or when it tries
    every candidate (``auto`` on a slice with failed links or per-link overrides, where no
    closed form bounds a candidate out). Elsewhere a bound may skip it, and a size prefetched
    for nothing would cost a simulation."""
    choice = options.small_allreduce_algorithm
    if choice == options.algorithm:
        return True
    return choice == "auto" and bool(topology.failed_links or topology.link_Bps_override)


def prefetch_collectives(works, topology, options):
    """Memoize the times of every collective that the programs of *works* (one
    :class:`~wus_sim.training.update.strategies.StepWork` per strategy, on one slice) ask for with the
    step's algorithm: one :func:`~wus_sim.collectives.collective_times` call per op, so a
    contended plan's sizes run in one window-engine run (anything not asked for here is
    computed alone, as before; the times are the same)."""
    from ..collectives import collective_times

    sizes = {}  # op -> sizes, as the programs ask for them
    for work in works:
        for c in work.grad_collectives:
            sizes.setdefault(c.op, []).append(c.nbytes)
            for g in bucket_gathers(work, c.bucket):
                if g is not None:
                    sizes.setdefault("all-gather", []).append(g.nbytes)
        if _small_allreduces_simulated(topology, options):
            sizes.setdefault("all-reduce", []).extend(c.nbytes for c in work.extra_allreduces if c.op == "all-reduce")
    for op, nbytes in sizes.items():
        nbytes = [b for b in nbytes if b > 0]
        if nbytes:
            collective_times(topology, op, options.algorithm, nbytes, bidirectional=bidirectional_for(options),
                             routing=options.routing)
