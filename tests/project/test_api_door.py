"""Every public name checks its arguments at the door (issue 45, item 2).

The walk calls each callable of ``wus_sim.__all__`` with valid arguments but one, that one
given each wrong value in turn: values no argument takes (a bare object, bytes, a complex
number) and the values its declared rule refuses (a bool where a number goes, ``'yes'`` where a
bool goes, ``/dev/full`` where a file goes, ...). Each call must be one WusError whose message
names the argument; a TypeError, an AttributeError or a value taken silently fails.

Checked by hand (the point of this walk): with ``on_results=callback()`` removed from
``run_experiment``'s rules in wus_sim/doors.py, ``test_every_argument_has_a_rule`` fails (the
argument has no rule) and the walk's ``run_experiment-on_results`` cases fail: the whole
experiment runs, then ``TypeError: 'object' object is not callable``.
"""

import dataclasses
import inspect

import pytest

import wus_sim
from wus_sim import WusError
from wus_sim.doors import DOORS
from wus_sim.inputs.door import _ANY_WRONG, rules_of

ERRORS = {"WusError", "ConfigError", "InfeasibleError", "UnknownNameError"}
PUBLIC = [n for n in wus_sim.__all__ if n not in ERRORS and callable(getattr(wus_sim, n))]
CLASSES = [n for n in PUBLIC if isinstance(getattr(wus_sim, n), type)]
FUNCTIONS = [n for n in PUBLIC if n not in CLASSES]


def _params(obj, name=None):
    """The argument names of *obj*; a ``**kw`` stands for the keywords its door declares."""
    sig = inspect.signature(obj)
    out = [p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        out += [k for k in DOORS.get(name, {}) if k not in out]
    return out


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """Valid arguments of each public name: the required ones, so one wrong argument is the only fault."""
    import pandas as pd

    from wus_sim.validation.measured import load_measured

    tmp = tmp_path_factory.mktemp("door")
    topo = wus_sim.load_topology("tpu-v3-8")
    exp = wus_sim.load_experiment("quickstart")
    ncf = wus_sim.load_workload("ncf")
    plan = wus_sim.plan(ncf, topo, "adam")
    rows = wus_sim.validate(runs=load_measured()[:1])
    collective = dict(topology=topo, op="all-reduce", algorithm="2d", nbytes=2**20)
    out = {
        "load_topology": dict(spec="tpu-v3-8"), "load_workload": dict(name_or_path="ncf"),
        "import_workload": dict(path="tests/data/hf_configs/llama3-8b.json"),
        "load_optimizer": dict(spec="adam"), "analyse": dict(optimizer="adam"),
        "plan": dict(workload=ncf, topology=topo, optimizer="adam"),
        "memory_breakdown": dict(plan=plan, strategy="sharded", per_replica_batch=8),
        "step_work": dict(plan=plan, strategy="sharded"),
        "simulate_collective": collective, "analytic_time": collective, "collective_time": collective,
        "simulate_step": dict(workload="ncf", topology=topo, optimizer="adam"),
        "simulate_strategies": dict(workload="ncf", topology=topo, optimizer="adam"),
        "simulate_point": dict(point={"workload": "ncf", "topology": "tpu-v3-8"}),
        "simulate_mesh": dict(workload="ncf", topology=topo, optimizer="adam"),
        "search_meshes": dict(workload="ncf", topology=topo, optimizer="adam"),
        "load_experiment": dict(path="quickstart"), "run_experiment": dict(experiment=exp, out_dir=tmp / "run"),
        "read_results": dict(path=tmp / "missing.csv"), "load_calibration": {},
        "draw_figure": dict(plot=exp.plots[0] if exp.plots else wus_sim.default_plots(exp)[0], df=pd.DataFrame()),
        "save_plots": dict(plots=[], df=pd.DataFrame(), out_dir=tmp),
        "default_plots": dict(experiment=exp), "validate": {},
        "plot_validation": dict(rows=rows, path=tmp / "v.png"),
    }
    for name in CLASSES:
        cls = getattr(wus_sim, name)
        if name == "Topology":
            out[name] = {f.name: getattr(topo, f.name) for f in dataclasses.fields(cls) if f.init}
    for name in PUBLIC:
        out.setdefault(name, {})
    return out


def _cases():
    for name in PUBLIC:
        obj = getattr(wus_sim, name)
        rules = DOORS.get(name) or rules_of(obj)  # a function's, else a class's own
        for arg in _params(obj, name):
            rule = rules.get(arg)
            wrongs = rule.wrong if rule is not None else _ANY_WRONG
            for i, wrong in enumerate(wrongs):
                yield pytest.param(name, arg, wrong, id=f"{name}-{arg}-{i}")


def test_every_argument_has_a_rule():
    """Every argument of every public function is declared in wus_sim/doors.py, and nothing else is."""
    assert set(FUNCTIONS) == set(DOORS)
    for name in FUNCTIONS:
        params = set(_params(getattr(wus_sim, name), name))
        assert set(DOORS[name]) == params, name


def test_the_rules_name_what_the_model_names():
    from wus_sim import doors
    from wus_sim.model.memory import STRATEGY_NAMES
    from wus_sim.model.workload import REMAT_MODES

    from wus_sim.training.parameters.params import POINT_KEYS

    assert doors._STRATEGIES == STRATEGY_NAMES and doors._REMATS == REMAT_MODES
    # the batches' ranges are the point table's: a number the API takes, a file takes too
    for key, rule in (("per_replica_batch", doors._PER_REPLICA_BATCH), ("global_batch", doors._GLOBAL_BATCH)):
        top = int(POINT_KEYS[key].maximum)
        assert rule(top, key) == top
        with pytest.raises(WusError):
            rule(top + 1, key)


@pytest.mark.parametrize("name, arg, wrong", list(_cases()))
def test_a_wrong_argument_is_one_error_naming_it(valid, name, arg, wrong):
    kwargs = {**valid[name], arg: wrong}
    with pytest.raises(WusError) as err:
        getattr(wus_sim, name)(**kwargs)
    message = str(err.value)
    assert arg in message and "\n" not in message, message


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_call_the_signature_cannot_take_is_one_error(valid, name):
    with pytest.raises(WusError, match="no_such_argument"):
        getattr(wus_sim, name)(**valid[name], no_such_argument=1)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_public_function_pickles_as_itself(name):
    """Workers receive ``point_fn=wus_sim.simulate_point`` pickled: by its public name."""
    import pickle

    assert pickle.loads(pickle.dumps(getattr(wus_sim, name))) is getattr(wus_sim, name)
