"""The rules of every public function's arguments, applied where ``wus_sim`` exports it.

One entry per function of ``wus_sim.__all__``: its arguments and the rule of each
(:mod:`wus_sim.inputs.door`). ``wus_sim.NAME`` is the function behind its door: a wrong type
or value is one :class:`~wus_sim.inputs.errors.ConfigError` naming the argument, before any
work. The classes of ``__all__`` (``StepOptions``, ``Mesh``, ``Placement``, ``Topology``,
``ComputeParams``) check their fields where they are defined, since an object must be valid
however it was made.

Why at the export and not on each definition: the command line and the sweeps call these
functions with values their own parsers have already checked, thousands of times a run; the
door is for the caller who has not been through them. An argument the body checks with rules
shared with the files (a point parameter, an override of a topology file) is declared
:func:`~wus_sim.inputs.door.inside`, so that each argument's rule is written somewhere.
"""

import functools

from .inputs.door import (callback, checked, choice, duck, either, flag, inside, instance, items, mapping, name, names,
                          number, out_file, out_folder, path, size, whole)
from .inputs.limits import MAX_REPLICAS, MAX_SIZE_BYTES

__all__ = ["DOORS", "door", "Public"]

_STRATEGIES = ("replicated", "sharded", "fully-sharded")  # wus_sim.model.memory.STRATEGY_NAMES (tests: equal)
_REMATS = ("none", "selective", "layer", "full")  # wus_sim.model.workload.REMAT_MODES (tests: equal)

_TOPOLOGY = either("a topology name, a path to a topology YAML, an inline spec (torus:16x16) or a Topology",
                   path(), instance("wus_sim.hardware.topology:Topology", "a Topology"),
                   instance("wus_sim.hardware.multislice:Multislice", "a Multislice"))
_WORKLOAD = either("a workload name, a path to a workload YAML, or a Workload",
                   path(), instance("wus_sim.model.workload:Workload", "a Workload"))
_OPTIMIZER = either("an optimizer name ('adam', 'adam+clip'), a path to an optimizer YAML, an Optimizer, or None "
                    "(the workload's)", name(nullable=True), path(),
                    instance("wus_sim.optimizers.spec:Optimizer", "an Optimizer"),
                    instance("wus_sim.optimizers.analysis:OptimizerAnalysis", "an OptimizerAnalysis"))
_OPTIMIZER_GIVEN = either("an optimizer name ('adam', 'adam+clip'), a path to an optimizer YAML or an Optimizer",
                          name(), path(), instance("wus_sim.optimizers.spec:Optimizer", "an Optimizer"),
                          instance("wus_sim.optimizers.analysis:OptimizerAnalysis", "an OptimizerAnalysis"))
_CALIBRATION = either("a calibration name, a path to a calibration YAML, 'none', a Calibration, or None (the "
                      "shipped one)", name(nullable=True), path(),
                      instance("wus_sim.model.calibration:Calibration", "a Calibration"))
_OPTIONS = instance("wus_sim.training.step:StepOptions", "a StepOptions (or None: the defaults)", nullable=True)
_MESH = either("a Mesh, a text such as 'fsdp=16,tensor=4', a mapping of axis sizes, or None", name(nullable=True),
               mapping(), instance("wus_sim.hardware.mesh_spec:Mesh", "a Mesh"))
_PER_REPLICA_BATCH = whole(1, 2**24, nullable=True)  # the point table's ranges (tests: equal)
_GLOBAL_BATCH = whole(1, 2**31, nullable=True)
_SIZE = size(MAX_SIZE_BYTES)
_GROUP = inside("None, 'all', an axis ('x', 0) or a list of replica ids (checked against the topology)")
_BYTES_PER_ELEMENT = whole(1, 8)
_PLOT = instance("wus_sim.experiments.experiment:PlotSpec",
                 "a plot spec (an experiment's .plots, or wus_sim.default_plots(experiment))")
_DATAFRAME = instance("pandas:DataFrame", "a DataFrame of results (wus_sim.read_results(DIR))")
_SCHEDULER = either("a Dask scheduler address (tcp://HOST:PORT), a distributed.Client, or None",
                    name(nullable=True), duck("submit", "a distributed.Client"))
_CHOSEN = either("a list of the keys the experiment set (names)", items(name(), "names", empty=True),
                 instance("builtins:frozenset", "a set of names"), instance("builtins:set", "a set of names"))

DOORS = {
    "load_topology": dict(
        spec=_TOPOLOGY, link_GBps=inside("a number or one per axis (the point rule of link_GBps)"),
        hop_latency_us=inside("the point rule of hop_latency_us"),
        wraparound=inside("True/False or one per axis"), cores_per_chip=whole(1, 64, nullable=True),
        failed_links=inside("a count or a list of cables (the point rule of failed_links)"),
        slow_links=inside("LIST:FACTOR (the point rule of slow_links)"), seed=whole(0, 2**63, nullable=True),
        megacore=flag()),
    "known_topologies": {},
    "load_workload": dict(name_or_path=_WORKLOAD),
    "known_workloads": {},
    "import_workload": dict(path=path("a config.json, a .safetensors file, an index, a folder holding them or a "
                                      "MaxText model .yml"),
                            sequence_length=whole(1, 2**24, nullable=True),
                            name=name("a workload name", nullable=True),
                            out=out_file((".yaml", ".yml"), what="workload file", nullable=True)),
    "load_optimizer": dict(spec=_OPTIMIZER_GIVEN),
    "known_optimizers": {},
    "analyse": dict(optimizer=_OPTIMIZER_GIVEN, weight_bytes=_BYTES_PER_ELEMENT, grad_bytes=_BYTES_PER_ELEMENT,
                    slot_bytes=_BYTES_PER_ELEMENT, reduction_bytes=_BYTES_PER_ELEMENT),
    "plan": dict(workload=instance("wus_sim.model.workload:Workload", "a Workload (wus_sim.load_workload(name))"),
                 topology=instance("wus_sim.hardware.topology:Topology", "a Topology "
                                                       "(wus_sim.load_topology(name))"),
                 optimizer=_OPTIMIZER_GIVEN, replicas=whole(1, MAX_REPLICAS, nullable=True),
                 bucket_bytes=whole(1, 2**60), replicate_below_elements=whole(0, 2**53, nullable=True),
                 max_padding_ratio=number(0, 1e6), grad_bytes=whole(1, 8, nullable=True),
                 gather_bytes=whole(1, 8, nullable=True)),
    "memory_breakdown": dict(plan=instance("wus_sim.training.update.sharding_plan:Plan", "a Plan (wus_sim.plan(...))"),
                             strategy=choice(_STRATEGIES), per_replica_batch=number(positive=True, maximum=2**24),
                             activation_scale=number(positive=True, maximum=1e6), check=flag(),
                             gather_prefetch=whole(0, 2**20, nullable=True), keep_gathered_weights=flag(),
                             remat=choice(_REMATS), overlap_grad_reduce=flag(),
                             activation_model=choice(("xla", "unfused")), remat_policy=name(nullable=True),
                             expert_ways=whole(1, 2**17)),
    "step_work": dict(plan=instance("wus_sim.training.update.sharding_plan:Plan", "a Plan (wus_sim.plan(...))"),
                      strategy=choice(_STRATEGIES), keep_gathered_weights=flag()),
    **{fn: dict(topology=_TOPOLOGY, op=name("a collective op"), algorithm=name("a collective algorithm"),
                nbytes=_SIZE, group=_GROUP, bidirectional=flag(), chunks=whole(1, 1024),
                reduce_Bps=number(positive=True, nullable=True), routing=name("a routing"),
                **({"engine": name("an engine")} if fn == "simulate_collective" else {}))
       for fn in ("simulate_collective", "analytic_time", "collective_time")},
    "simulate_step": dict(workload=_WORKLOAD, topology=_TOPOLOGY, optimizer=_OPTIMIZER, strategy=choice(_STRATEGIES),
                          per_replica_batch=_PER_REPLICA_BATCH, global_batch=_GLOBAL_BATCH,
                          replicas=whole(1, MAX_REPLICAS, nullable=True), options=_OPTIONS,
                          spatial_ways=whole(1, 2**17, nullable=True)),
    "simulate_strategies": dict(workload=_WORKLOAD, topology=_TOPOLOGY, optimizer=_OPTIMIZER,
                                strategies=names(_STRATEGIES, "strategies"), per_replica_batch=_PER_REPLICA_BATCH,
                                global_batch=_GLOBAL_BATCH, replicas=whole(1, MAX_REPLICAS, nullable=True),
                                options=_OPTIONS, spatial_ways=whole(1, 2**17, nullable=True)),
    "simulate_point": dict(point=mapping("a point: a mapping of point parameters, e.g. {'workload': 'ncf', "
                                         "'topology': 'tpu-v3-8'}")),
    "simulate_mesh": dict(workload=_WORKLOAD, topology=_TOPOLOGY, optimizer=_OPTIMIZER,
                          strategies=names(_STRATEGIES, "strategies"), mesh=_MESH, dcn_mesh=_MESH,
                          per_replica_batch=_PER_REPLICA_BATCH, global_batch=_GLOBAL_BATCH, options=_OPTIONS,
                          placement=instance("wus_sim.hardware.mesh_spec:Placement", "a Placement (or None)",
                                             nullable=True)),
    "search_meshes": dict(workload=_WORKLOAD, topology=_TOPOLOGY, optimizer=_OPTIMIZER, global_batch=_GLOBAL_BATCH,
                          per_replica_batch=_PER_REPLICA_BATCH, options=_OPTIONS, remats=names(_REMATS, "remat modes"),
                          strategies=names(_STRATEGIES, "strategies"), progress=callback(),
                          jobs=whole(1, 1024)),
    "load_experiment": dict(path=path("a shipped experiment's name or a path to an experiment YAML")),
    "run_experiment": dict(experiment=instance("wus_sim.experiments.experiment:Experiment",
                                               "an Experiment (wus_sim.load_experiment(path) reads one)"),
                           out_dir=path("a folder path"), point_fn=callback(), jobs=whole(1, 1024),
                           resume=flag(), scheduler=_SCHEDULER,
                           reduced=flag(), limit=whole(1, 2**62, nullable=True), progress=flag(nullable=True),
                           write=flag(), overwrite=flag(), on_results=callback(),
                           scheduler_timeout=number(positive=True, maximum=600)),
    "read_results": dict(path=path("a results file (.csv or .parquet) or a run folder")),
    "load_calibration": dict(name=_CALIBRATION),
    "draw_figure": dict(plot=_PLOT, df=_DATAFRAME, chosen=_CHOSEN),
    "save_plots": dict(plots=items(_PLOT, "plot specs (wus_sim.default_plots(experiment))", empty=True),
                       df=_DATAFRAME, out_dir=out_folder(), on_skip=callback(), chosen=_CHOSEN),
    "default_plots": dict(experiment=instance("wus_sim.experiments.experiment:Experiment",
                                              "an Experiment (wus_sim.load_experiment(path) reads one)")),
    "validate": dict(calibration=_CALIBRATION,
                     runs=items(instance("wus_sim.validation.measured:MeasuredRun", "a measured run"),
                                "measured runs (wus_sim.validation.measured.load_measured())", nullable=True),
                     measured=path("a measured table (CSV)", nullable=True),
                     network=mapping("a mapping of network choices (algorithm, bidirectional, ...)", nullable=True),
                     topology_overrides=mapping("a mapping of link_GBps, hop_latency_us, wraparound",
                                                nullable=True)),
    "plot_validation": dict(rows=items(instance("wus_sim.validation.validate:ValidationRow", "a validation row"),
                                       "the rows wus_sim.validate() returns"),
                            path=out_file((".png",), what="figure")),
}
"""``{public function: {argument: rule}}``: every argument of every function of ``__all__``."""


CLOSED_KEYWORDS = {"simulate_step"}
"""Functions whose ``**kw`` takes only the keywords declared here (it passes them on)."""


def door(public_name, value):
    """*value* (``wus_sim``'s export *public_name*) behind its door, if it is a function with one."""
    rules = DOORS.get(public_name)
    if rules is None or isinstance(value, type) or not callable(value):
        return value
    return Public(public_name, checked(value, closed_keywords=public_name in CLOSED_KEYWORDS, **rules))


class Public:
    """A public function behind its door, as ``wus_sim`` exports it: it calls, reads (name, doc,
    signature, module) and pickles as the function, and is pickled by its public name.

    Why: a function is pickled by its module and name, and ``run_experiment(point_fn=
    wus_sim.simulate_point, jobs=2)`` sends it to workers; the module's ``simulate_point`` is
    not this object, so pickle refuses it (``not the same object``)."""

    def __init__(self, public_name, fn):
        functools.update_wrapper(self, fn)
        self._public_name, self._fn = public_name, fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __reduce__(self):
        return _public, (self._public_name,)

    def __repr__(self):
        return f"<function wus_sim.{self._public_name}>"


def _public(public_name):
    import wus_sim

    return getattr(wus_sim, public_name)
