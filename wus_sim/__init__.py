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

from .inputs.errors import ConfigError, InfeasibleError, UnknownNameError, WusError
from .inputs.lazy_names import lazy_names

__version__ = "0.1.0"

_LAZY = {
    "Topology": "hardware.topology", "load_topology": "hardware.topology_files",
    "known_topologies": "hardware.topology_files",
    "load_workload": "model.workload_files", "known_workloads": "model.workload_files",
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
