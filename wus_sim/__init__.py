"""wus-sim: discrete-event simulation of replicated vs sharded weight update on TPU pods.

Public names are curated here. Importing the package does no work and pulls in
no heavy dependency: the names below load their module on first use (PEP 562),
so ``wus-sim collective`` does not pay for pandas, matplotlib or SimPy.

    >>> import wus_sim
    >>> topo = wus_sim.load_topology("tpu-v3-2048")
    >>> wus_sim.collective_time(topo, "all-reduce", "2d", 64 * 2**20)   # seconds
    >>> run = wus_sim.simulate_strategies("transformer-big", topo, "adam")
    >>> run.results["sharded"].step_time_s, run.speedups
    >>> w = wus_sim.import_workload("path/to/config.json")   # a Hugging Face config (docs/importing-models.md)

The guide is docs/api.md (its examples run in the tests, and its reference is
generated from these docstrings); the input formats are in ``docs/formats/``.
"""

import sys as _sys


def _interrupted(signum, frame):
    """Ctrl-C before the command line's own handler is in place: one line, exit 130."""
    try:
        _sys.stderr.write("wus-sim: interrupted\n")
        _sys.stderr.flush()
    except Exception:  # noqa: BLE001 -- stderr closed: exit all the same
        pass
    import os

    os._exit(130)


def _started_as_the_command():
    """Whether this import is the ``wus-sim`` command starting (its console script, or ``python -m
    wus_sim``), not a program that uses the package."""
    argv = getattr(_sys, "orig_argv", _sys.argv)
    script = _sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1] if _sys.argv else ""
    return script in ("wus-sim", "wus-sim.exe") or any(
        a == "-m" and b == "wus_sim" for a, b in zip(argv, argv[1:]))


if _started_as_the_command():
    # the first code of the command: a Ctrl-C from here on is one line and 130, not a traceback
    # of the imports below (wus_sim.cli.main installs its own handler at once)
    import signal as _signal

    _signal.signal(_signal.SIGINT, _interrupted)

from .inputs.errors import ConfigError, InfeasibleError, UnknownNameError, WusError  # noqa: E402
from .inputs.lazy_names import lazy_names  # noqa: E402

__version__ = "0.1.0"

_LAZY = {
    "Topology": "hardware.topology", "load_topology": "hardware.topology_files",
    "known_topologies": "hardware.topology_files",
    # load_workload reads NAME@TOKENS too (a MaxText library model rebuilt at that length)
    "load_workload": "model.importers.maxtext_model:resolve_workload", "known_workloads": "model.workload_files",
    "import_workload": "model.importers.hf_import",
    "load_optimizer": "optimizers", "known_optimizers": "optimizers", "analyse": "optimizers",
    "plan": "training.update.planner", "memory_breakdown": "model.memory", "step_work": "training.update.strategies",
    "STRATEGIES": "training.update.strategies",
    "simulate_collective": "collectives", "analytic_time": "collectives", "collective_time": "collectives",
    "simulate_step": "training.step", "simulate_strategies": "training.step", "simulate_point": "experiments.records",
    "StepOptions": "training.step",
    "simulate_mesh": "training.parallelism.mesh_step", "search_meshes": "training.parallelism.mesh_search", "Mesh": "hardware.mesh",
    "Placement": "hardware.mesh",
    "load_experiment": "experiments", "run_experiment": "experiments.runner", "read_results": "experiments",
    "ComputeParams": "model.compute", "load_calibration": "model.calibration",
    "draw_figure": "plotting", "save_plots": "plotting", "default_plots": "plotting",
    "validate": "validation.validate", "plot_validation": "validation.report",
}

__all__ = ["WusError", "ConfigError", "InfeasibleError", "UnknownNameError", *_LAZY]


def _door(name, value):
    # the public functions check their arguments at the door (wus_sim/doors.py): loaded with
    # the first of them, not at import
    from .doors import door

    return door(name, value)


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(), wrap=_door)
