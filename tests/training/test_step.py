"""The training-step simulator: derived durations, closed forms, the paper's qualitative claims."""

import json
import math

import pytest

from wus_sim.cli import main
from wus_sim.inputs.errors import ConfigError
from wus_sim.experiments.records import simulate_point
from wus_sim.training.step import StepOptions, simulate_step, simulate_strategies, speedup
from wus_sim.training.timeline.timeline import BREAKDOWN_PARTS


def test_serial_replicated_step_is_compute_plus_collectives_plus_update():
    from wus_sim.collectives import analytic_time
    from wus_sim.model.compute import forward_time_s, backward_time_s

    from wus_sim.model.compute import ComputeParams

    # matmul-only compute (no elementwise traffic, no fixed costs). At 25 % of a v3 core's
    # 61.5 TFLOP/s and 80 % of its 450 GB/s the ridge is 15.4e12 / 360e9 = 43 FLOP/B; ResNet-50's
    # lowest-intensity layers (1x1 convs from 64 channels: 2 x 64 FLOP per 2 B output) are
    # at 64 FLOP/B, so every layer is compute-bound and the layers add up to the matrix time
    matmul_only = ComputeParams(mxu_efficiency=0.25, elementwise_fwd_bytes=0, elementwise_bwd_bytes=0)
    opts = StepOptions(overlap_grad_reduce=False, overlap_all_gather=False, compute=matmul_only, bidirectional=False)
    res = simulate_step("resnet50", "tpu-v3-32", "momentum", "replicated", options=opts)
    topo = __import__("wus_sim.hardware.topology_files", fromlist=["load_topology"]).load_topology("tpu-v3-32")
    from wus_sim.model.workload_files import load_workload

    w = load_workload("resnet50")
    batch = w.per_replica_batch_for("tpu-v3-32")
    comm = sum(analytic_time(topo, c.op, "2d", c.nbytes, routing=opts.routing) for c in res.work.grad_collectives)
    expect = (forward_time_s(w, topo, batch, matmul_only) + backward_time_s(w, topo, batch, matmul_only) + comm
              + res.breakdown["update_s"])
    assert res.step_time_s == pytest.approx(expect, rel=1e-9)
    assert res.breakdown["exposed_comm_s"] == pytest.approx(comm, rel=1e-9)


def test_breakdown_adds_up_and_records_are_flat():
    recs = simulate_point({"workload": "transformer-big", "topology": "tpu-v3-128", "optimizer": "adam"})
    assert [r["strategy"] for r in recs] == ["replicated", "sharded"]
    for r in recs:
        assert r["status"] == "ok"
        assert sum(r[p] for p in BREAKDOWN_PARTS) == pytest.approx(r["step_time_s"], rel=1e-9)
        assert all(not isinstance(v, (dict, list, tuple)) for v in r.values())
    assert math.isnan(recs[0]["speedup"])
    assert recs[1]["speedup"] == pytest.approx(recs[0]["step_time_s"] / recs[1]["step_time_s"])


def test_sharded_update_is_one_nth_of_the_replicated_one():
    results, meta = simulate_strategies("transformer-big", "tpu-v3-512", "adam")
    n = meta["replicas"]
    rep, sh = results["replicated"].work.update, results["sharded"].work.update
    plan = meta["plan"]
    # sharded elements = padded shards of sharded tensors + whole replicated tensors
    expect = sum(t.padded_size for t in plan.tensors if not t.replicated) / n + sum(
        t.size for t in plan.tensors if t.replicated)
    assert sh.elements == pytest.approx(expect)
    assert rep.elements == plan.params
    assert sh.bytes_moved < rep.bytes_moved / n * 1.5 + 64 * sum(t.size for t in plan.tensors if t.replicated)


def test_speedup_grows_with_replicas_for_transformer():
    """Paper claim: the gain grows with the number of replicas (smaller per-replica batch)."""
    ups = []
    for slice_ in ("tpu-v3-32", "tpu-v3-128", "tpu-v3-512", "tpu-v3-2048"):
        results, _ = simulate_strategies("transformer-big", slice_, "adam")
        ups.append(speedup(results))
    assert all(u > 1 for u in ups)
    assert ups == sorted(ups)


def test_adam_costs_about_sgd_when_sharded():
    """Paper claim: with WUS, Adam's step time and memory come close to SGD's."""
    def step(opt, strategy):
        return simulate_step("transformer-big", "tpu-v3-2048", opt, strategy)

    adam_r, sgd_r = step("adam", "replicated"), step("sgd", "replicated")
    adam_s, sgd_s = step("adam", "sharded"), step("sgd", "sharded")
    gap_rep = adam_r.step_time_s / sgd_r.step_time_s - 1
    gap_sh = adam_s.step_time_s / sgd_s.step_time_s - 1
    assert gap_sh < gap_rep / 5
    assert adam_s.memory.peak < adam_r.memory.peak
    assert (adam_s.memory.peak - sgd_s.memory.peak) < (adam_r.memory.peak - sgd_r.memory.peak) / 100


def test_bf16_gradients_halve_gradient_bytes():
    fp32, _ = simulate_strategies("transformer-big", "tpu-v3-32", "adam", options=StepOptions(grad_dtype="fp32"))
    bf16, _ = simulate_strategies("transformer-big", "tpu-v3-32", "adam", options=StepOptions(grad_dtype="bf16"))
    for s in ("replicated", "sharded"):
        assert bf16[s].work.grad_nbytes == pytest.approx(fp32[s].work.grad_nbytes / 2, rel=1e-3)
        assert bf16[s].step_time_s <= fp32[s].step_time_s


def test_infeasible_point_is_a_row_not_a_crash():
    recs = simulate_point({"workload": "bert-large", "topology": "tpu-v3-32", "per_replica_batch": 100000})
    assert {r["status"] for r in recs} == {"infeasible"}
    assert all("HBM" in r["error"] or "hbm" in r["error"].lower() for r in recs)
    assert all(math.isnan(r["step_time_s"]) for r in recs)


def test_batch_rules():
    with pytest.raises(ConfigError, match="global_batch"):
        simulate_point({"workload": "resnet50", "topology": "tpu-v3-32", "global_batch": 1000})
    recs = simulate_point({"workload": "resnet50", "topology": "tpu-v3-32", "global_batch": 4096})
    assert recs[0]["per_replica_batch"] == 128


def test_cli_step_json_and_trace(tmp_path, capsys):
    trace = tmp_path / "step.json"
    assert main(["step", "transformer-big", "--topology", "tpu-v3-32", "--optimizer", "adam", "--json",
                 "--trace", str(trace)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "breakdown", "memory", "speedup"):
        assert key in out
    assert "peak" in out["memory"] and set(BREAKDOWN_PARTS) <= set(out["breakdown"])
    assert out["strategies"]["replicated"]["step_time_s"] / out["strategies"]["sharded"]["step_time_s"] == \
        pytest.approx(out["speedup"])
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert complete and all(isinstance(e["ts"], float) and e["dur"] >= 0 for e in complete)
    assert {e["pid"] for e in complete} == {1, 2}
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "compute (replica 0)" in names


def test_cli_step_single_strategy_and_errors(capsys):
    assert main(["step", "resnet50", "-t", "tpu-v3-32", "--strategy", "replicated", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # one shape for every --strategy (issue 9): speedup is there, null with one strategy
    assert out["strategy"] == "replicated" and out["speedup"] is None and list(out["strategies"]) == ["replicated"]
    assert main(["step", "nosuchmodel", "-t", "tpu-v3-32"]) == 2
    err = capsys.readouterr().err
    assert "unknown workload" in err and "Traceback" not in err
    assert "NAME@TOKENS (e.g. llama3.1-8b@8192)" in err  # a library model at another length is a name too


def test_trace_splits_collectives_into_their_phases(tmp_path):
    from wus_sim.collectives import phase_times
    from wus_sim.hardware.topology_files import load_topology

    trace = tmp_path / "t.json"
    assert main(["step", "transformer-big", "-t", "tpu-v3-2048", "-o", "adam", "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    grads = [e for e in events if e["ph"] == "X" and e["cat"] == "grad" and e["pid"] == 1]
    phases = [e for e in events if e["ph"] == "X" and e["cat"] == "phase" and e["pid"] == 1]
    # every gradient all-reduce on the 2-D torus shows its six phases, tiling it exactly
    assert len(phases) == 6 * len(grads)
    for g in grads:
        inside = sorted((p for p in phases if g["ts"] - 1e-6 <= p["ts"] < g["ts"] + g["dur"] - 1e-9),
                        key=lambda p: p["ts"])
        assert [tracks[(1, p["tid"])] for p in inside] == [
            f"ICI phase: {n}" for n in ("on-chip reduce-scatter", "axis X reduce-scatter", "axis Y reduce-scatter",
                                        "axis Y all-gather", "axis X all-gather", "on-chip all-gather")]
        assert sum(p["dur"] for p in inside) == pytest.approx(g["dur"], rel=1e-9)
    # a schedule whose phases overlap (2-D all-reduce on a mesh) is not split
    assert phase_times(load_topology("tpu-v3-32"), "all-reduce", "2d", 2**20) is None


def test_cli_step_on_the_v3_8192_multipod(capsys):
    """The MLPerf v0.7 multipod shape runs (what-if): 8192 replicas, one per core; compute per
    replica does not depend on the slice, so forward matches the full pod's at the same batch."""
    assert main(["step", "resnet50", "--topology", "tpu-v3-8192", "--per-replica-batch", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replicas"] == 8192 and out["global_batch"] == 8 * 8192
    assert out["step_time_s"] > 0 and out["speedup"] > 0
    assert main(["step", "resnet50", "--topology", "tpu-v3-2048", "--per-replica-batch", "8", "--json"]) == 0
    pod = json.loads(capsys.readouterr().out)
    assert out["breakdown"]["fwd_s"] == pytest.approx(pod["breakdown"]["fwd_s"], rel=1e-12)


def test_cli_step_text_memory_rows_add_up_to_the_peak(capsys):
    """The text lists every part of the peak (weights, gradients, slots, activations and the
    in-flight collective buffers), each the --json figure; and only a sharded update's norm
    all-reduces where a sharded update ran (ResNet-50 with LARS, replicated alone: none)."""
    from wus_sim.inputs.units import format_bytes

    argv = ["step", "resnet50", "-t", "tpu-v3-32", "--strategy", "replicated"]
    assert main(argv + ["--json"]) == 0
    mem = json.loads(capsys.readouterr().out)["strategies"]["replicated"]["memory_bytes"]
    parts = ("weights", "gradients", "slots", "activations", "collective_buffers")
    assert sum(mem[p] for p in parts) == pytest.approx(mem["peak"], rel=1e-12)
    assert mem["collective_buffers"] > 0
    assert main(argv) == 0
    text = capsys.readouterr().out
    for p in parts:
        row = next(line for line in text.splitlines() if line.strip().startswith(f"mem {p.replace('_', ' ')}"))
        assert row.split()[-2:] == format_bytes(mem[p]).split()
    assert "norm(w)" not in text and "norm(g)" not in text
    assert main(argv[:-1] + ["both"]) == 0
    assert "sharded update: norm(w)" in capsys.readouterr().out
