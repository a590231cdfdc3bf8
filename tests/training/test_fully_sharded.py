"""Fully-sharded weights (ZeRO-3 / FSDP style): golden step and memory on the toy model,
the prefetch rule as an invariant of the timeline, and the issue's done-when on
Transformer-big with Adam on tpu-v3-2048.

The golden case reuses the toy two-layer model, its 2x2 torus and the hand formulas of
``test_step_golden`` (figures and derivations there). Here the fusion threshold is set to
layer 1's gradient bytes, so the planner (walking tensors in backward order, closing a
bucket once it holds that many bytes) makes two buckets, one per layer:

* bucket 0 = d1.bias + d1.weight (layer 1, 131328 elements), ready first in backward;
* bucket 1 = d0.bias + d0.weight (layer 0, 131584 elements).

Every size divides by N = 4, so there is no padding.
"""

import json
import math

import pytest

from wus_sim.training.step import simulate_strategies, speedups
from wus_sim.training.update.strategies import STRATEGIES

from test_step_golden import (ACT_PER_EXAMPLE, B, BWD_OPS_S, FWD_OPS_S, N, OP_S, P, STEP_S, TENSORS, adam_update, ag_2d, approx, hand_layers,
                              options, rs_2d, toy)  # noqa: F401 (toy is a fixture)

E1 = 512 * 256 + 256          # bucket 0: layer 1's elements
E0 = 256 * 512 + 512          # bucket 1: layer 0's elements
assert E0 + E1 == P
BUCKET_BYTES = 4 * E1         # closes bucket 0 exactly after layer 1's two tensors
AB = 2                        # gathered bytes per weight: bf16, the toy's compute (activation) dtype,
                              # which each layer casts its fp32 weights to before the gather


def run_fs(toy, **kw):
    results, meta = simulate_strategies(toy, "torus:2x2", "adam", ("fully-sharded",), per_replica_batch=B,
                                        options=options(bucket_bytes=BUCKET_BYTES, **kw))
    return results["fully-sharded"], meta


def test_toy_buckets_are_one_per_layer(toy):
    _, meta = run_fs(toy)
    buckets = meta["plan"].buckets
    assert [(b.kind, b.layers, b.elements, b.padded_elements) for b in buckets] == [
        ("sharded", (1,), E1, E1), ("sharded", (0,), E0, E0)]


def test_toy_step_prefetch_one(toy):
    """gather_prefetch 1, grad reduction after backward (the golden options).

    Step start: both forward gathers are issued (bucket 1 for layer 0, then bucket 0) and
    finish within the 50 us step overhead (checked below), so forward waits on nothing.
    Forward ends at T: both backward gathers are issued (bucket 0 first, layer 1 is first in
    backward). Layer 1's backward waits for bucket 0's gather; bucket 1's gather runs under
    layer 1's backward, which is longer (checked), so layer 0 waits on nothing. Then the two
    reduce-scatters (bucket 0, then 1) and the update of the 1/N shard.
    """
    fwd, bwd = hand_layers()
    ag0, ag1 = ag_2d(AB * E1), ag_2d(AB * E0)
    rs0, rs1 = rs_2d(4 * E1), rs_2d(4 * E0)
    assert ag0 + ag1 < STEP_S           # forward gathers hide behind the step overhead
    assert ag1 < bwd[1]                 # bucket 1's backward gather hides behind layer 1's backward
    res, _ = run_fs(toy, gather_prefetch=1)
    exp = {"overhead_s": STEP_S, "op_launch_s": FWD_OPS_S + BWD_OPS_S + TENSORS * OP_S,
           "fwd_s": sum(fwd) - FWD_OPS_S, "bwd_s": sum(bwd) - BWD_OPS_S, "update_s": adam_update(P / N) - TENSORS * OP_S,
           "exposed_comm_s": ag0 + rs0 + rs1, "extra_reduction_s": 0.0, "idle_s": 0.0}
    for part, value in exp.items():
        assert res.breakdown[part] == approx(value), part
    assert res.step_time_s == approx(sum(exp.values()))

    # the trace's per-bucket gathers: one per bucket and pass, in the order the passes use them
    step0 = [iv for iv in res.timeline.intervals if iv.track == "net" and iv.step == 0]
    assert [iv.name for iv in step0] == [
        "all-gather bucket 1 for forward", "all-gather bucket 0 for forward",
        "all-gather bucket 0 for backward", "all-gather bucket 1 for backward",
        "reduce-scatter bucket 0", "reduce-scatter bucket 1"]
    t_fwd_end = STEP_S + sum(fwd)
    assert step0[2].start_s == approx(t_fwd_end) and step0[2].end_s == approx(t_fwd_end + ag0)

    # bytes: gradients reduce-scattered once, weights gathered twice
    assert res.work.grad_nbytes == 4 * P
    assert res.work.gather_nbytes == 2 * AB * P


def test_toy_step_prefetch_zero_exposes_every_gather_but_the_first(toy):
    """gather_prefetch 0: a gather is issued only when its bucket is needed.

    Forward: bucket 1's gather (issued at the start) hides behind the overhead; bucket 0's is
    issued when layer 0 is done and exposed. Backward: bucket 0's is issued when forward ends
    and exposed, bucket 1's when layer 1's backward is done and exposed.
    """
    fwd, bwd = hand_layers()
    ag0, ag1 = ag_2d(AB * E1), ag_2d(AB * E0)
    rs0, rs1 = rs_2d(4 * E1), rs_2d(4 * E0)
    res, _ = run_fs(toy, gather_prefetch=0)
    assert res.breakdown["exposed_comm_s"] == approx(2 * ag0 + ag1 + rs0 + rs1)
    assert res.step_time_s == approx(STEP_S + sum(fwd) + sum(bwd) + adam_update(P / N)
                                     + 2 * ag0 + ag1 + rs0 + rs1)


def test_toy_step_keeping_weights_skips_the_backward_gathers(toy):
    fwd, bwd = hand_layers()
    rs0, rs1 = rs_2d(4 * E1), rs_2d(4 * E0)
    res, _ = run_fs(toy, keep_gathered_weights=True)
    assert res.breakdown["exposed_comm_s"] == approx(rs0 + rs1)
    assert res.step_time_s == approx(STEP_S + sum(fwd) + sum(bwd) + adam_update(P / N) + rs0 + rs1)
    assert res.work.gather_nbytes == AB * P
    assert not any("backward" in iv.name for iv in res.timeline.intervals)


def test_toy_memory(toy):
    """Per replica, bytes (fp32 weights, gradients and Adam's two slots; no padding):

    * weights: the 1/N shard (4P/N) + the gathered buckets in flight (bf16, AB), k = prefetch + 1
      consecutive buckets (each layer needs one bucket): prefetch 0 holds the larger bucket
      (bucket 1, E0 elements), prefetch 1 both; kept weights hold both whatever the prefetch;
    * gradients: the 1/N shard + the largest bucket's full gradient awaiting its
      reduce-scatter (E0);
    * slots 2 x 4P/N; activations B x 2000 B; no collective buffer (nothing all-reduced).
    """
    act = B * ACT_PER_EXAMPLE
    for kw, gathered in (({"gather_prefetch": 0}, E0), ({"gather_prefetch": 1}, P),
                         ({"gather_prefetch": 0, "keep_gathered_weights": True}, P)):
        m = run_fs(toy, **kw)[0].memory
        assert m.weights == 4 * P / N + AB * gathered, kw
        assert m.gradients == 4 * P / N + 4 * E0
        assert m.slots == 2 * 4 * P / N
        assert m.activations == act and m.collective_buffers == 0 and m.padding == 0
        assert m.peak == m.weights + m.gradients + m.slots + act


def test_toy_fully_sharded_peak_is_below_sharded(toy):
    results, _ = simulate_strategies(toy, "torus:2x2", "adam", STRATEGIES, per_replica_batch=B,
                                     options=options(bucket_bytes=BUCKET_BYTES, gather_prefetch=0))
    sh, fs = results["sharded"].memory, results["fully-sharded"].memory
    # sharded: 4P weights, 4P + P gradients; fully-sharded: P + AB E0 weights (the shard and the
    # bf16 gathered bucket) and P + 4 E0 gradients; the rest is equal
    assert sh.peak - fs.peak == approx((4 * P - (P + AB * E0)) + (4 * P + P - (P + 4 * E0)))


# ---------------------------------------------------------------- the prefetch rule
@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_gathers_run_at_most_prefetch_buckets_ahead(prefetch):
    """Transformer-big (24 sharded buckets) on a 4x4 torus: each layer's forward starts after the
    gathers of its buckets; the gather of the i-th bucket of a pass starts no earlier than the
    compute finished the (i - prefetch - 1)-th or a later one (or needed the i-th)."""
    from wus_sim.model.compute import ComputeParams
    from wus_sim.training.step import StepOptions

    results, meta = simulate_strategies("transformer-big", "torus:4x4", "adam", ("fully-sharded",),
                                        options=StepOptions(compute=ComputeParams(), gather_prefetch=prefetch))
    res = results["fully-sharded"]
    plan = meta["plan"]
    ivs = [iv for iv in res.timeline.intervals if iv.step == 1]
    fwd = [iv for iv in ivs if iv.kind == "fwd"]      # one per layer, in layer order
    assert len(fwd) == plan.workload.num_layers
    gathers = [iv for iv in ivs if iv.kind == "gather" and iv.args["for"] == "forward"]
    sharded = sorted((b for b in plan.buckets if b.kind == "sharded"), key=lambda b: (b.first_layer, b.index))
    assert [iv.name for iv in gathers] == [f"all-gather bucket {b.index} for forward" for b in sharded]
    for i, (b, g) in enumerate(zip(sharded, gathers)):
        for layer in b.layers:
            assert fwd[layer].start_s >= g.end_s - 1e-12
        if i > prefetch:
            # the compute is done with the bucket prefetch + 1 places before, or with one after it
            # (a bucket that a layer before its predecessor's last one is the last to use ends first)
            done = min(fwd[max(c.layers)].end_s for c in sharded[i - prefetch - 1:i])
            # the compute reaches a layer when the previous one ends (then waits for its buckets)
            needed = fwd[b.first_layer - 1].end_s if b.first_layer else fwd[0].start_s
            assert g.start_s >= min(done, needed) - 1e-12


# ---------------------------------------------------------------- done when (issue 10)
def test_transformer_big_adam_v3_2048_fully_sharded(tmp_path):
    """Fully-sharded peak memory per replica is below the sharded one, its step moves more
    bytes, and the trace shows the per-bucket gathers."""
    from wus_sim.cli import main

    out = tmp_path / "trace.json"
    results, meta = simulate_strategies("transformer-big", "tpu-v3-2048", "adam", STRATEGIES)
    sh, fs = results["sharded"], results["fully-sharded"]
    assert sh.status == fs.status == "ok"
    assert fs.memory.peak < sh.memory.peak
    # twice the gathers (before forward and before backward), each of bf16 weights, not fp32: as
    # many bytes as sharded's one gather of the updated fp32 weights
    assert len(fs.work.forward_allgathers) + len(fs.work.backward_allgathers) == 2 * len(sh.work.weight_allgathers)
    assert fs.work.gather_nbytes == sh.work.gather_nbytes and fs.work.grad_nbytes == sh.work.grad_nbytes
    up = speedups(results)
    assert set(up) == {"sharded", "fully-sharded"} and all(math.isfinite(v) and v > 0 for v in up.values())

    assert main(["step", "transformer-big", "-t", "tpu-v3-2048", "-o", "adam", "--strategy", "fully-sharded",
                 "--trace", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    gathers = {e["name"] for e in events if e.get("cat") == "gather"}
    sharded_buckets = [b.index for b in meta["plan"].buckets if b.kind == "sharded"]
    assert gathers == {f"all-gather bucket {b} for {p}" for b in sharded_buckets for p in ("forward", "backward")}


# ---------------------------------------------------------------- points and command line
def test_point_rows_compare_every_strategy_with_replicated(toy):
    from wus_sim.experiments.records import simulate_point

    rows = simulate_point({"workload": toy.path, "topology": "torus:2x2", "strategy": "all", "calibration": "none",
                           "per_replica_batch": B, "gather_prefetch": 0, "keep_gathered_weights": True})
    by = {r["strategy"]: r for r in rows}
    assert list(by) == ["replicated", "sharded", "fully-sharded"]
    assert math.isnan(by["replicated"]["speedup"])
    for s in ("sharded", "fully-sharded"):
        assert by[s]["speedup"] == pytest.approx(by["replicated"]["step_time_s"] / by[s]["step_time_s"], rel=1e-12)
    assert (by["fully-sharded"]["gather_prefetch"], by["fully-sharded"]["keep_gathered_weights"]) == (0, True)
    # kept weights: one all-gather per bucket, of bf16 weights where sharded's post-update gather
    # moves the fp32 ones
    assert by["sharded"]["gather_comm_bytes"] == 4 * P and by["fully-sharded"]["gather_comm_bytes"] == AB * P


@pytest.mark.parametrize("argv, words", [
    (["--gather-prefetch", "-1"], ["--gather-prefetch", "-1", ">= 0"]),
    (["--gather-prefetch", "x"], ["--gather-prefetch", "'x'"]),
    (["--strategy", "zero-3"], ["--strategy", "'zero-3'", "fully-sharded", "all"]),
])
def test_bad_options_exit_2_with_one_line(capsys, argv, words):
    from wus_sim.cli import main

    with pytest.raises(SystemExit) as info:
        code = main(["step", "resnet50", "-t", "tpu-v3-32", *argv])
        raise SystemExit(code)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err


# ---------------------------------------------------------------- the README's figures
def test_readme_fully_sharded_figures():
    """README "What-if: fully sharded weights": Transformer-big, Adam, tpu-v3-2048, calibrated model."""
    from wus_sim.experiments.records import simulate_point

    def point(batch, **kw):
        # the README's figures were taken with one bucket of prefetch, the default before issue 33
        rows = simulate_point({"workload": "transformer-big", "topology": "tpu-v3-2048", "optimizer": "adam",
                               "strategy": "all", "per_replica_batch": batch, "gather_prefetch": 1,
                               "calibration": "flops", **kw})  # the figures were taken under the flops model
        return {r["strategy"]: r for r in rows}

    one = point(1)
    ms = {s: r["step_time_s"] * 1e3 for s, r in one.items()}
    assert (round(ms["replicated"], 1), round(ms["sharded"], 1), round(ms["fully-sharded"], 1)) == (38.2, 18.6, 20.9)
    # memory as XLA keeps it, sharded gradients as buckets in flight (issue 33; the README said 1.83 GiB
    # and 555 MiB before): 1.10 GiB and 480 MiB; 400 MiB once fully-sharded gathers bf16 weights
    assert round(one["sharded"]["mem_peak_bytes"] / 2**30, 2) == 1.1
    assert round(one["fully-sharded"]["mem_peak_bytes"] / 2**20) == 400  # 480 with fp32 gathers
    moved = {s: (r["grad_comm_bytes"] + r["gather_comm_bytes"]) / 1e9 for s, r in one.items()}
    # fully-sharded's two gathers are of bf16 weights (2.53 GB with fp32 gathers)
    assert (round(moved["sharded"], 2), round(moved["fully-sharded"], 2)) == (1.69, 1.69)
    assert round(one["fully-sharded"]["fwd_s"] * 1e3, 1) == 3.7 and round(one["fully-sharded"]["bwd_s"] * 1e3, 1) == 7.4
    assert round(point(1, gather_prefetch=2)["fully-sharded"]["step_time_s"] * 1e3, 1) == 19.5  # 25.4 with fp32 gathers
    kept = point(1, keep_gathered_weights=True)["fully-sharded"]
    # fp32 gathers: 19.7 ms, 1.1 GiB
    assert round(kept["step_time_s"] * 1e3, 1) == 16.6 and round(kept["mem_peak_bytes"] / 2**30, 2) == 0.71

    sixteen = point(16)
    # 173 ms with fp32 gathers
    assert round(sixteen["fully-sharded"]["step_time_s"] * 1e3) == 171 and round(sixteen["sharded"]["step_time_s"] * 1e3) == 170
    two = point(16, gather_prefetch=2)
    # equal with fp32 gathers (the same exposed tail); the bf16 gathers shorten fully-sharded's tail
    assert two["fully-sharded"]["step_time_s"] < two["sharded"]["step_time_s"]
    assert two["fully-sharded"]["exposed_comm_s"] < two["sharded"]["exposed_comm_s"]

    # the thresholds moved with the memory model (README before issue 33: 48 / 56 / 60)
    status = {b: {s: r["status"] for s, r in point(b).items()} for b in (68, 72, 84)}
    assert status[68] == {"replicated": "ok", "sharded": "ok", "fully-sharded": "ok"}
    assert status[72] == {"replicated": "infeasible", "sharded": "ok", "fully-sharded": "ok"}
    assert status[84] == {"replicated": "infeasible", "sharded": "infeasible", "fully-sharded": "ok"}


# ---------------------------------------------------------------- memory invariants
from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(1, 64), min_size=1, max_size=2).map(tuple), min_size=1, max_size=10),
       dims=st.lists(st.integers(1, 4), min_size=1, max_size=2), bucket_kib=st.integers(1, 64),
       prefetch=st.integers(0, 4))
def test_gathered_window_is_between_one_bucket_and_all(shapes, dims, bucket_kib, prefetch):
    from wus_sim.model.memory import gathered_window, memory_breakdown
    from wus_sim.training.update.planner import plan
    from wus_sim.model.workload import Tensor, Workload

    from make_topology import make

    tensors = tuple(Tensor(f"t{i}", s, i) for i, s in enumerate(shapes))
    w = Workload(name="synthetic", description="", tensors=tensors, params=sum(t.size for t in tensors),
                 fwd_flops_per_example=1.0, example_unit="example", activation_bytes_per_example=0.0,
                 num_layers=len(tensors), layer_names=tuple(t.name for t in tensors),
                 layer_fwd_flops=(1.0 / len(tensors),) * len(tensors))
    p = plan(w, make(dims), "adam", bucket_bytes=bucket_kib * 1024, replicate_below_elements=0,
             max_padding_ratio=10**6)   # every tensor sharded
    sharded = [b.padded_elements for b in p.buckets if b.kind == "sharded"]
    window, _ = gathered_window(p, prefetch)
    assert max(sharded) <= window <= sum(sharded)
    assert window <= gathered_window(p, prefetch + 1)[0]                  # deeper prefetch never holds less
    assert gathered_window(p, prefetch, keep_gathered_weights=True)[0] == sum(sharded)
    fs = memory_breakdown(p, "fully-sharded", 1, gather_prefetch=prefetch)
    sh = memory_breakdown(p, "sharded", 1)
    n = p.replicas
    assert fs.slots == sh.slots and fs.collective_buffers == sh.collective_buffers
    # the gathered window in the compute dtype (bf16 activations, the Workload default: 2 B)
    assert fs.weights == pytest.approx(sum(sharded) / n * p.weight_bytes + window * 2)
    assert fs.gradients == pytest.approx(sum(sharded) / n * p.grad_bytes + max(sharded) * p.grad_bytes)
