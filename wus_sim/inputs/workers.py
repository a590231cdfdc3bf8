"""Worker processes for the commands that use several cores (``run --jobs``, ``plan --search
--jobs``): each leaves Ctrl-C and SIGTERM to its parent and dies with it, and a pool stopped
early (an error, Ctrl-C, a time limit) stops its running tasks at once."""

import os
from concurrent.futures import ProcessPoolExecutor

__all__ = ["worker_pool", "stop_pool", "can_fork"]


def worker_pool(jobs, fork=False):
    """A :class:`~concurrent.futures.ProcessPoolExecutor` of *jobs* workers set up by
    :func:`_worker_init`. *fork*: start them by ``fork`` where the platform has it, so they
    inherit what the parent has built (a search's workload and slice) instead of unpickling it."""
    import multiprocessing

    context = multiprocessing.get_context("fork") if fork and can_fork() else None
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_worker_init,
                               initargs=(os.getpid(),))


def can_fork():
    """Whether this platform starts processes by ``fork`` (Linux and the BSDs do; Windows cannot)."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def stop_pool(pool, finished):
    """Shut *pool* down; unless *finished*, drop its queued tasks and kill the running ones now."""
    if not finished:
        # SIGKILL, not SIGTERM: the workers ignore SIGTERM (a signal to the whole process group
        # must not print a worker's traceback beside the parent's one line)
        if hasattr(pool, "kill_workers"):  # Python >= 3.14: the public way
            pool.kill_workers()
        else:  # older Pythons have no public API that stops a running task; the pool keeps them here
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                proc.kill()
    pool.shutdown(wait=True, cancel_futures=True)


def _worker_init(parent_pid):
    """In each worker: die with the parent (Linux ``PR_SET_PDEATHSIG``), so a SIGKILLed run
    leaves no orphan, and leave Ctrl-C and SIGTERM to the parent (which kills the pool): a signal
    to the whole process group (a terminal's Ctrl-C, ``kill -TERM -PGID``) stops the run once,
    with its one line, not once per worker with a traceback each."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's shutdown still stops the pool
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
