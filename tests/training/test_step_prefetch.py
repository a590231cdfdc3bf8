"""A step asks for all its collectives at once (issue 34): on a slice with a failed cable each
contended plan runs its sizes, both strategies' and the optimizer norms', in one window-engine
run, and every time is the same as with each size asked for alone."""

import pytest

from wus_sim.collectives import clear_caches
from wus_sim.collectives.engines import window_engine
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.memo import clear_memos
from wus_sim.training import step as step_module
from wus_sim.training.step import StepOptions, simulate_strategies


def _results(topo, options):
    clear_caches()
    clear_memos()  # the step's memoized collective parts too: each run simulates afresh
    return simulate_strategies("bert-large", topo, "lamb", ("replicated", "sharded"), options=options).results


@pytest.mark.parametrize("routing", ["cut-through", "store-and-forward"])
def test_each_contended_plan_runs_once_with_the_same_times_as_each_size_alone(monkeypatch, routing):
    topo = load_topology("tpu-v3-32", failed_links=1, seed=0)
    options = StepOptions(routing=routing)
    runs = []
    real = window_engine.run_schedules

    def spy(scheds, **kw):
        runs.append((scheds[0].plan.op, scheds[0].plan.algorithm, sorted(s.nbytes for s in scheds)))
        return real(scheds, **kw)

    monkeypatch.setattr(window_engine, "run_schedules", spy)
    batched = _results(topo, options)
    of_2d = [r for r in runs if r[1] == "2d"]
    assert sorted(op for op, _, _ in of_2d) == ["all-gather", "all-reduce", "reduce-scatter"]  # one run each
    norms = sorted(c.nbytes for c in batched["sharded"].work.extra_allreduces if c.op == "all-reduce")
    assert norms and set(norms) <= set(next(s for op, _, s in of_2d if op == "all-reduce"))

    runs.clear()
    monkeypatch.setattr(step_module, "prefetch_collectives", lambda works, topology, options: None)
    alone = _results(topo, options)
    assert len([r for r in runs if r[1] == "2d"]) > 3  # without it the sizes run in several runs
    for strategy in ("replicated", "sharded"):
        assert batched[strategy].step_time_s == alone[strategy].step_time_s
        assert batched[strategy].breakdown == alone[strategy].breakdown
