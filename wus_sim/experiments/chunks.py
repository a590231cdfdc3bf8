"""How a run's points are cut into worker tasks: consecutive points, a few dozen a task, and
the points that share most of their work (their collectives, plans and slice) in the same task,
so that one worker computes what they share."""

__all__ = ["SHARED_ACROSS", "chunk_size", "worker_chunks"]


def chunk_size(points, jobs):
    """Points a worker runs per task: enough that the hand-over (two processes pickling a point
    and its rows, a future each) is small beside them when there are many points (at most 32,
    a fraction of a second), one each when there are few, and at least 16 tasks per worker so
    that the workers finish together and the progress bar moves."""
    return max(1, min(32, points // (16 * max(jobs, 1))))


SHARED_ACROSS = ("per_replica_batch", "global_batch", "mxu_efficiency")
"""Point keys that points may differ in and still share most of their work: their collectives,
plans and slice (only compute and memory move). :func:`worker_chunks` keeps such runs of points
in one task, so that one worker pays for what they share."""


def worker_chunks(todo, jobs):
    """*todo* (``(index, hash, point)`` items) cut into worker tasks of about :func:`chunk_size`
    points, in order, at the ends of runs of consecutive points that differ only in
    :data:`SHARED_ACROSS` keys where that keeps a task at most twice that size (and every worker
    at least 16 tasks). Why: a sweep's innermost axis is usually the batch; a run of batches cut
    in two went to both workers, and each simulated the run's collectives (a sweep over link
    bandwidths and batches paid every bandwidth's collectives about twice)."""
    target = chunk_size(len(todo), jobs)
    if target == 1:
        return [[item] for item in todo]
    cap = max(target, min(2 * 32, len(todo) // (16 * max(jobs, 1))))
    chunks, current = [], []
    for run in _shared_runs(todo):
        if len(run) > cap:  # in equal pieces of at most cap, each its own task
            if current:
                chunks.append(current)
                current = []
            pieces = -(-len(run) // cap)
            step = -(-len(run) // pieces)
            chunks.extend(run[i:i + step] for i in range(0, len(run), step))
            continue
        if current and (len(current) >= target or len(current) + len(run) > cap):
            chunks.append(current)
            current = []
        current.extend(run)
    if current:
        chunks.append(current)
    return chunks


def _shared_runs(todo):
    """Runs of consecutive items whose points are equal but for :data:`SHARED_ACROSS` keys."""
    run = []
    for item in todo:
        if run and not _share_work(run[-1][2], item[2]):
            yield run
            run = []
        run.append(item)
    if run:
        yield run


def _share_work(a, b):
    # (the same point but for those keys: chunking moves no result, so 1 and True may pass as equal)
    if a.keys() != b.keys():
        return False
    return {**a, **_NO_SHARED} == {**b, **_NO_SHARED}


_NO_SHARED = dict.fromkeys(SHARED_ACROSS)
