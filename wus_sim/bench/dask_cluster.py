"""A real Dask cluster on loopback: one ``dask scheduler`` and N ``dask worker`` processes, each
its own operating-system process, as a user starts them by hand (not an in-process LocalCluster).

The bench times a sweep on it beside ``--jobs 2`` (:mod:`wus_sim.bench.cases`), and the tests kill
its processes mid-run (tests/experiments/test_dask_cluster.py). Everything listens on 127.0.0.1
only: the scheduler on a port the system picks (``--port 0``; its address read back from
``--scheduler-file``, so no port is guessed and none can be taken in between), the workers on
ports of their own, no dashboard. Each worker is started without a nanny (``--no-nanny``): the
process that runs the points is the one a test kills (a nanny would start another), and with
``--death-timeout`` a worker whose scheduler is gone exits by itself. Each process is its own
session: :meth:`LoopbackCluster.close` kills every process it started (SIGKILL to each group), also
when the code inside the ``with`` raised.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

__all__ = ["LoopbackCluster", "dask_command"]

HOST = "127.0.0.1"
"""Every process of the cluster listens here, and nowhere else."""


def dask_command():
    """The ``dask`` command beside this interpreter (the ``[dask]`` extra installs it), else
    ``python -m distributed.cli.<...>`` (a function of the subcommand)."""
    script = os.path.join(os.path.dirname(sys.executable), "dask")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return lambda sub: [script, sub]
    return lambda sub: [sys.executable, "-m", f"distributed.cli.dask_{sub}"]


class LoopbackCluster:
    """``with LoopbackCluster(workers=2) as cluster:`` a scheduler at ``cluster.address`` with
    *workers* one-thread worker processes connected to it. *env*: the processes' environment
    (default this one's; the workers import wus_sim, so its ``PYTHONPATH`` goes with it).
    *timeout_s*: how long starting may take before it is an error."""

    def __init__(self, workers=2, *, env=None, timeout_s=60.0, death_timeout_s=10):
        self.num_workers = workers
        self.env = dict(os.environ if env is None else env)
        self.timeout_s = timeout_s
        self.death_timeout_s = death_timeout_s
        self.scheduler = None
        """The scheduler's :class:`subprocess.Popen`."""
        self.workers = []
        """Each worker's :class:`subprocess.Popen`."""
        self.address = None
        """``tcp://127.0.0.1:PORT``."""
        self._dir = None
        self._logs = []

    # ------------------------------------------------------------------ starting
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _spawn(self, argv, name):
        log = open(os.path.join(self._dir.name, f"{name}.log"), "wb")
        self._logs.append(log)
        # a session of its own: a Ctrl-C at the terminal or a kill of the test's group does not
        # reach it, and close() kills its whole group (the dask script and its interpreter)
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True)

    def start(self):
        dask = dask_command()
        self._dir = tempfile.TemporaryDirectory(prefix="wus-dask-")
        where = self._dir.name
        info = os.path.join(where, "scheduler.json")
        self.scheduler = self._spawn([*dask("scheduler"), "--host", HOST, "--port", "0", "--no-dashboard",
                                      "--scheduler-file", info], "scheduler")
        deadline = time.monotonic() + self.timeout_s
        while True:
            self._check_alive(self.scheduler, "scheduler")
            try:
                with open(info) as fh:
                    self.address = json.load(fh)["address"]
                break
            except (OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Dask scheduler wrote no address in {self.timeout_s:g} s: {self.log('scheduler')}")
            time.sleep(0.05)
        assert self.address.startswith(f"tcp://{HOST}:"), self.address  # loopback only
        for i in range(self.num_workers):
            self.workers.append(self._spawn(
                [*dask("worker"), self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                 "--host", HOST, "--name", f"w{i}", "--memory-limit", "0",
                 "--death-timeout", str(self.death_timeout_s), "--local-directory", where], f"worker{i}"))
        self.wait_for_workers(self.num_workers, deadline)
        return self

    def _check_alive(self, proc, what):
        if proc.poll() is not None:
            raise RuntimeError(f"the Dask {what} exited ({proc.returncode}): {self.log(what)}")

    def log(self, what):
        """The last lines of a process's output (``scheduler``, ``worker0``, ...)."""
        try:
            with open(os.path.join(self._dir.name, f"{what}.log"), errors="replace") as fh:
                return " | ".join(fh.read().splitlines()[-8:])
        except (OSError, AttributeError):
            return "(no log)"

    def wait_for_workers(self, n, deadline):
        """Wait until *n* workers are connected to the scheduler (asked through a client)."""
        from distributed import Client

        with Client(self.address, timeout="10s", set_as_default=False) as client:
            while len(client.scheduler_info(n_workers=-1)["workers"]) < n:
                for i, w in enumerate(self.workers):
                    self._check_alive(w, f"worker{i}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} Dask workers did not connect in {self.timeout_s:g} s: "
                                       + "; ".join(self.log(f"worker{i}") for i in range(len(self.workers))))
                time.sleep(0.1)

    # ------------------------------------------------------------------ stopping
    def kill_worker(self, i):
        """SIGKILL worker *i* (no goodbye to the scheduler: a crashed machine)."""
        _kill(self.workers[i])

    def kill_scheduler(self):
        """SIGKILL the scheduler (the workers then exit within ``death_timeout_s``)."""
        _kill(self.scheduler)

    def close(self):
        """Kill every process this cluster started and remove its folder."""
        for proc in [*self.workers, self.scheduler]:
            if proc is not None:
                _kill(proc)
        for log in self._logs:
            log.close()
        self._logs = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _kill(proc):
    """SIGKILL *proc*'s process group (its own session, see ``_spawn``) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
