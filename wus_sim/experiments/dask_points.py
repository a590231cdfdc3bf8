"""Running a sweep's points on a Dask cluster (``wus-sim run --scheduler ADDRESS``).

One concept: reaching a scheduler and handing it the points. The address is checked before
anything else is done (its form, then a plain TCP connect within the timeout), because Dask's
own client answered a malformed address only after its timeout and an unreachable one after 20 s,
and a half-made client printed a traceback when the interpreter exited.

A worker lost mid-run is Dask's to handle (it runs the worker's tasks again on another). A
scheduler lost mid-run is :class:`SchedulerLost`, raised within a bounded time: at once when its
connection closes, and within :data:`QUIET_S` + the timeout when it stops answering with its
connection open (measured on loopback: 0.9 s after a SIGKILL, 16 s after a SIGSTOP; before, the
first was "cannot be written: CommClosedError" and the second a hang).
"""

import time

from ..inputs.errors import ConfigError, WusError
from ..inputs.text import excerpt

__all__ = ["SCHEDULER_TIMEOUT_S", "SchedulerLost", "check_scheduler", "execute_dask"]

SCHEDULER_TIMEOUT_S = 5.0
"""How long connecting to a ``--scheduler`` may take by default (``--scheduler-timeout`` raises it)."""

_ADDRESS = r"(?:(?P<scheme>tcp|tls)://)?(?P<host>[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):(?P<port>[0-9]{1,5})"
_OTHER_SCHEMES = r"(?:inproc|ucx|ws|wss)://[^\s/][^\s]{0,300}"
"""Dask's other transports (``inproc://`` is an in-process LocalCluster's): their form is Dask's to
check; nothing is probed before the client connects."""


QUIET_S = 10.0
"""After this long with no point finished, the scheduler is asked whether it is still there (and
again each time as long again passes): a point may run for minutes, a silent scheduler may not."""


class SchedulerLost(WusError):
    """The Dask scheduler went away while a sweep ran on it (its connection closed, or it did not
    answer within the timeout when asked). The points finished before are journaled: ``wus-sim run``
    stops as after Ctrl-C, with the ``--resume`` hint (exit 130)."""

    def __init__(self, address, why):
        self.address = address
        self.why = why
        super().__init__(f"lost the Dask scheduler at {address}: {why}")


def _looks_like_address(text):
    """A scheduler address: ``tcp://host:port``, ``tls://host:port`` or ``host:port`` (an IPv6 host
    in brackets), port 1..65535, or another Dask transport's ``scheme://...``; checked before the
    client spends its connect timeout on text that cannot be one (Dask's own parse errors came only
    after it, with a traceback at exit)."""
    import re

    if not isinstance(text, str):
        return False
    if re.fullmatch(_OTHER_SCHEMES, text):
        return True
    m = re.fullmatch(_ADDRESS, text)
    return m is not None and 1 <= int(m.group("port")) <= 65535


def check_scheduler(address, timeout_s=SCHEDULER_TIMEOUT_S):
    """One ConfigError at once for a ``--scheduler`` that is not an address, and within
    *timeout_s* for one nothing listens at (a plain TCP connect: no Dask client is made, so
    none is left to time out or to print a traceback when the interpreter exits)."""
    import re
    import socket

    try:
        import distributed  # noqa: F401 -- only whether it is there
    except ImportError:
        raise ConfigError("needs Dask's 'distributed' package: pip install 'wus-sim[dask]'",
                          key_path="--scheduler") from None
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 600:
        raise ConfigError("must be a number of seconds in (0, 600]", key_path="--scheduler-timeout", value=timeout_s)
    if not _looks_like_address(address):
        raise ConfigError("must be a Dask scheduler address such as tcp://host:8786 (or host:8786, "
                          "tcp://[::1]:8786)", key_path="--scheduler", value=str(address))
    m = re.fullmatch(_ADDRESS, address)
    if m is None:  # another transport: Dask connects within the timeout
        return
    host = m.group("host").strip("[]")
    try:
        socket.create_connection((host, int(m.group("port"))), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (getattr(exc, "strerror", None) or str(exc))
        raise ConfigError(f"cannot reach the Dask scheduler within {timeout_s:g} s: {why} (--scheduler-timeout "
                          "S waits longer)", key_path="--scheduler", value=address) from None


def _connect(client_type, address, timeout_s):
    """A connected client, or the error of trying, within *timeout_s*.

    Why a thread: the client's own timeout does not cover a peer that accepts the connection and
    then says nothing (its handshake waits on, measured: past 12 s with timeout=2s), so the wait
    is bounded here; the thread is a daemon and the half-made client is dropped with it."""
    import threading

    out = {}

    def connect():
        try:
            out["client"] = client_type(address, set_as_default=False, timeout=f"{timeout_s}s")
        except BaseException as exc:  # noqa: B036 -- handed to the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=connect, name="wus-sim dask connect", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if "client" in out:
        return out["client"]
    if "error" in out:
        raise out["error"]
    raise TimeoutError(f"no answer in {timeout_s:g} s")


def execute_dask(evaluate_chunk, point_fn, todo, scheduler, timeout_s=SCHEDULER_TIMEOUT_S):
    """Yield ``(index, hash, point, outcome, text)`` as the points finish on the Dask cluster
    *scheduler* (an address or a ``distributed.Client``): *todo* (``(index, hash, point)`` items)
    is cut into tasks as for worker processes (:func:`~.chunks.worker_chunks`, for as many workers
    as the cluster has threads), each run by *evaluate_chunk(point_fn, points)*, which returns
    each point's ``(outcome, journal text)``.

    Why tasks of several points: a task costs the scheduler and the client about a millisecond
    (measured on 2 cores: 50 one-point tasks a second against 1,700 points a second for
    ``--jobs 2``), many times a cheap point; a lost worker's task is run again whole."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ConfigError("needs Dask's 'distributed' package: pip install 'wus-sim[dask]'",
                          key_path="--scheduler") from None
    own_client = not isinstance(scheduler, Client)
    if own_client and not _looks_like_address(scheduler):
        raise ConfigError("must be a Dask scheduler address such as tcp://host:8786", key_path="--scheduler",
                          value=str(scheduler))

    class _Client(Client):
        # A client whose connection failed is half-made; when it is collected (often at exit) its
        # __del__ tries to close it and times out again, printing "Exception ignored ...".
        def __del__(self):
            try:
                super().__del__()
            except BaseException:  # noqa: B036 -- nothing may escape a finaliser
                pass

    try:
        client = _connect(_Client, scheduler, timeout_s) if own_client else scheduler
    except Exception as exc:  # a listener that is not a Dask scheduler fails in many ways (even MemoryError)
        raise ConfigError(f"cannot reach the Dask scheduler within {timeout_s:g} s: "
                          f"{excerpt(str(exc) or type(exc).__name__, 120)}", key_path="--scheduler",
                          value=str(scheduler)) from None
    import logging

    # distributed logs a lost connection at INFO with its traceback (on stderr, by its default
    # logging config): the run says it in one line instead
    quiet = [logging.getLogger(name) for name in ("distributed", "tornado.application")]
    levels = [log.level for log in quiet]
    for log in quiet:
        log.setLevel(logging.CRITICAL)
    lost = False
    try:
        from .chunks import worker_chunks

        threads = sum(client.nthreads().values()) or 1
        futures = {}
        for chunk in worker_chunks(todo, threads):
            future = client.submit(evaluate_chunk, point_fn, [p for _, _, p in chunk], pure=False)
            futures[future] = chunk
        for future, outcomes in _finished(client, list(futures), str(scheduler if own_client else
                                                                      client.scheduler.address), timeout_s):
            for (index, h, point), (outcome, text) in zip(futures.pop(future), outcomes):
                yield index, h, point, outcome, text
    except SchedulerLost:
        lost = True
        raise
    finally:
        # A client whose scheduler is lost is not closed: closing waits on it again (for the
        # timeout), and its fetches still under way then log their tracebacks; it is dropped,
        # with distributed's loggers left quiet (a lost run ends the command).
        if own_client and not lost:
            client.close(timeout=timeout_s)
        if not lost:
            for log, level in zip(quiet, levels):
                log.setLevel(level)


def _finished(client, futures, address, timeout_s, quiet_s=None):
    """Yield ``(future, outcome)`` of *futures* as they finish (a point's own exception is raised
    as it is); :class:`SchedulerLost` when the client has lost its scheduler, or when the
    scheduler, asked after :data:`QUIET_S` with none finished, does not answer within *timeout_s*.
    (A plain ``as_completed`` loop, and ``future.result()`` after it, waited forever on a
    scheduler that stopped answering without closing its connection.) The results are fetched by
    ``as_completed`` in the client's loop, so no call here waits on the scheduler unbounded."""
    from distributed import as_completed

    quiet_s = QUIET_S if quiet_s is None else quiet_s
    # This client need not be the process's default one: give as_completed its loop.
    pending = as_completed(futures, loop=client.loop, with_results=True, raise_errors=False)
    last = time.monotonic()
    while not pending.is_empty():
        batch = pending.next_batch(block=False)
        if batch:
            last = time.monotonic()
            for future, result in batch:
                if future.status == "error":
                    raise result[1].with_traceback(result[2])  # the point's exception
                if future.status != "finished" or isinstance(result, BaseException):
                    # a lost worker (its result could not be gathered: the scheduler reschedules the
                    # key) or the scheduler itself: the client's state or an answer tells them apart
                    if client.status in ("closing", "closed", "connecting"):
                        raise SchedulerLost(address, "its connection closed")
                    _ping(client, address, timeout_s)
                    pending.add(future)
                    continue
                yield future, result
            continue
        if client.status in ("closing", "closed", "connecting"):
            raise SchedulerLost(address, "its connection closed")
        if time.monotonic() - last > quiet_s:
            _ping(client, address, timeout_s)
            last = time.monotonic()
        time.sleep(0.02)


def _ping(client, address, timeout_s):
    try:
        client.sync(client.scheduler.identity, callback_timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 -- any failure to answer is the scheduler lost
        raise SchedulerLost(address, f"no answer in {timeout_s:g} s") from None
