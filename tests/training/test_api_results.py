"""The Python API's result objects: StepRun.speedups from the step times, and reprs of a line
(repr(StepRun) was 891 KB: every interval of every timeline)."""

import math

import wus_sim


def test_step_run_speedups_and_short_reprs():
    run = wus_sim.simulate_strategies("transformer-big", "tpu-v3-32", "adam",
                                      ["replicated", "sharded", "fully-sharded"])
    t = {s: r.step_time_s for s, r in run.results.items()}
    assert run.speedups == {"sharded": t["replicated"] / t["sharded"],
                            "fully-sharded": t["replicated"] / t["fully-sharded"]}
    assert all(type(v) is float for v in run.speedups.values())
    res = run.results["sharded"]
    for obj in (run, res, res.memory, res.work, res.timeline, run.plan, run.plan.analysis, wus_sim.load_calibration()):
        text = repr(obj)
        assert len(text) < 250 and "\n" not in text, text
    assert f"({run.speedups['sharded']:.3f}x)" in repr(run)
