"""The software stack a point names reaches the simulation on every path (issue 33): the API
(records.simulate_point), an experiment file's points, ``step`` and ``plan`` with
``--software-stack``; a measured run re-run as a point with its stack gives validate's step."""

import json
import math

import pytest

from wus_sim.experiments.records import simulate_point
from wus_sim.model.calibration import load_calibration
from wus_sim.validation.measured import load_measured, run_key, software_stack
from wus_sim.validation.simulate import NOT_EXPRESSIBLE, TENSOR_PARALLEL, simulate_run, strategy_of

V06 = "tf1-tpuestimator-2019"
POINT = {"workload": "resnet50", "topology": "tpu-v3-2048", "strategy": "replicated"}


def _op_cost(stack):
    # read from the calibration file's own table, not through compute_params (the code under test)
    cal = load_calibration()
    return cal.stacks[stack]["op_overhead_s"]


def test_api_point_uses_its_stack():
    old, = simulate_point({**POINT, "software_stack": V06})
    new, = simulate_point(dict(POINT))
    assert old["op_overhead_s"] == _op_cost(V06)
    assert new["op_overhead_s"] == _op_cost(load_calibration().default_stack)
    assert old["op_overhead_s"] > 4 * new["op_overhead_s"]
    assert old["step_time_s"] > new["step_time_s"]


def test_unmeasured_stack_runs_at_default_costs_and_says_so():
    row, = simulate_point({**POINT, "software_stack": "my-stack-2031"})
    default, = simulate_point(dict(POINT))
    assert row["op_overhead_s"] == default["op_overhead_s"]
    assert "software stack my-stack-2031" in row["outside_validated_range"]
    assert row["band_kind"] == "extrapolated"


def _cli(capsys, *argv):
    from wus_sim.cli import main

    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_step_and_plan_take_the_stack(capsys):
    step = _cli(capsys, "step", "resnet50", "-t", "tpu-v3-2048", "--strategy", "replicated",
                "--software-stack", V06, "--json")
    assert step["parameters"]["op_overhead_s"] == _op_cost(V06)
    api, = simulate_point({**POINT, "software_stack": V06})
    assert step["step_time_s"] == api["step_time_s"]
    plan = _cli(capsys, "plan", "resnet50", "-t", "tpu-v3-2048", "--software-stack", V06, "--json")
    assert plan["compute"]["params"]["op_overhead_s"] == _op_cost(V06)
    assert plan["software_stack"] == V06


def test_experiment_point_uses_its_stack(tmp_path):
    from wus_sim.experiments import load_experiment
    from wus_sim.experiments.runner import run_experiment

    spec = tmp_path / "e.yaml"
    spec.write_text("name: stacks\nworkloads: [resnet50]\ntopologies: [tpu-v3-32]\nstrategies: [replicated]\n"
                    f"sweep: {{software_stack: [{V06}, tf-jax-2020]}}\n")
    result = run_experiment(load_experiment(str(spec)), str(tmp_path / "out"))
    by_stack = {r["software_stack"]: r["op_overhead_s"] for r in result.frame.to_dict("records")}
    assert by_stack == {V06: _op_cost(V06), "tf-jax-2020": _op_cost("tf-jax-2020")}


def _point_of(run):
    cores_per_replica = run.cores // run.replicas
    point = {"workload": run.workload, "topology": run.topology, "optimizer": run.optimizer,
             "strategy": strategy_of(run), "per_replica_batch": run.per_replica_batch,
             "spatial_ways": cores_per_replica, "grad_dtype": run.grad_allreduce_dtype or None,
             "bn_group_replicas": max(1, int(run.bn_group_cores or 1) // run.spatial_ways),
             "steps_per_loop": max(1, run.steps_per_loop), "software_stack": software_stack(run)}
    ways = TENSOR_PARALLEL.get(run_key(run))
    if ways:  # a replica's cores split each layer: the point names the mesh validate runs
        point["mesh"] = f"data={run.replicas},tensor={ways}"
        del point["spatial_ways"]
    return point


@pytest.mark.slow
def test_every_measured_run_as_a_point_matches_validate():
    _match(load_measured())


def test_measured_runs_of_both_rounds_as_points_match_validate():
    """Reduced form: one row of each round."""
    rows = load_measured()
    picked = [next(r for r in rows if r.round == rnd and r.workload == "resnet50") for rnd in ("v0.6", "v0.7")]
    assert {software_stack(r) for r in picked} == {V06, "tf-jax-2020"}
    _match(picked)


def _match(rows):
    checked = 0
    for run in rows:
        if run_key(run) in NOT_EXPRESSIBLE:
            continue
        want = simulate_run(run).step_time_s
        got, = simulate_point(_point_of(run))
        if math.isnan(want):
            assert got["status"] == "infeasible"
        else:
            assert got["step_time_s"] == want, run_key(run)
        checked += 1
    assert checked
