"""Golden step tests: absolute step times, breakdowns, speedups and per-replica memory,
every expected value derived by hand in this file from the model's documented formulas.

The rest of the suite checks the step simulator relationally (sharded < replicated,
parts add up, ...), which deliberately broken code can still satisfy. Here the numbers
are written out: a toy two-layer workload on a 2x2 torus of ``generic`` chips with
explicit compute parameters (no calibration), both strategies, fp32 and bf16
gradients, spatial partitioning; and hand-counted update / all-gather / LARS-norm bytes
of ResNet-50 on tpu-v3-32. No expected value comes from the helper under test.

Figures used (wus_sim/data/chips.yaml ``generic``; ``torus:2x2`` = 1 core per chip,
100 GB/s links, 1 us per hop):
peak 61.5 TFLOP/s, HBM 450 GB/s and 16 GiB per replica.
"""

import math

import pytest

from wus_sim.model.compute import ComputeParams
from wus_sim.training.step import StepOptions, simulate_strategies, speedup
from wus_sim.model.workload_files import load_workload

import make_workload

# ---------------------------------------------------------------- chip and slice
PEAK = 61.5e12          # generic chip matrix peak, FLOP/s (1 core per chip)
HBM_BPS = 450e9         # generic chip HBM bandwidth, B/s
HBM_CAP = 16 * 2**30    # generic chip HBM, bytes
LINK = 100e9            # ICI link, B/s per direction
ALPHA = 1e-6            # hop latency, s

# ---------------------------------------------------------------- compute parameters
MXU_EFF = 0.5
BWD_RATIO = 2.0
ACT_EFF = 0.5           # deliberately different from UPD_EFF, so a swap shows
UPD_EFF = 0.8
EW_FWD = 6.0
EW_BWD = 10.0
OP_S = 2e-6
STEP_S = 50e-6
# The toy's ops (their fixed costs are the breakdown's op_launch_s, counted apart from the
# passes that run them): 2 forward layers, BWD_RATIO backward ops each, one update kernel per tensor.
FWD_OPS_S = 2 * OP_S
BWD_OPS_S = 2 * BWD_RATIO * OP_S
SPATIAL_EFF = 0.75

COMPUTE = ComputeParams(mxu_efficiency=MXU_EFF, backward_flops_ratio=BWD_RATIO,
                        activation_hbm_efficiency=ACT_EFF, update_hbm_efficiency=UPD_EFF,
                        elementwise_fwd_bytes=EW_FWD, elementwise_bwd_bytes=EW_BWD,
                        op_overhead_s=OP_S, step_overhead_s=STEP_S, spatial_efficiency=SPATIAL_EFF)

# ---------------------------------------------------------------- toy workload
# layer 0: dense 256 -> 512 (+ bias 512); layer 1: dense 512 -> 256 (+ bias 256) whose
# declared FLOPs are tiny (2048 per example), so its matmul is bound by reading weights.
P = 256 * 512 + 512 + 512 * 256 + 256       # 262912 parameters
assert P == 262912
B = 1024                                    # per-replica batch
LAYER_FLOPS = (262144.0, 2048.0)            # forward FLOPs per example
LAYER_WEIGHTS = (256 * 512 + 512, 512 * 256 + 256)   # elements per layer: 131584, 131328
# output elements per example: FLOPs x out_channels / (2 x main weight elements)
LAYER_OUT = (262144 * 512 / (2 * 256 * 512), 2048 * 256 / (2 * 512 * 256))  # 512, 2
assert LAYER_OUT == (512.0, 2.0)
ACT_PER_EXAMPLE = 1000 * 2                  # bytes
TENSORS = 4
N = 4                                       # replicas on torus:2x2


def make_toy(folder):
    """The toy workload, written to *folder* and loaded."""
    return make_workload.make(
        folder, "toy", "two dense layers with round sizes (golden step tests)",
        params=262912, layers=[("d0", 262144), ("d1", 2048)], optimizer="adam", batch=1024,
        tensors=[("d0.weight", [256, 512], 0), ("d0.bias", [512], 0), ("d1.weight", [512, 256], 1),
                 ("d1.bias", [256], 1)])


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return make_toy(tmp_path_factory.mktemp("golden"))


def options(**kw):
    base = dict(compute=COMPUTE, overlap_grad_reduce=False, overlap_all_gather=False,
                bucket_bytes=1 << 30, algorithm="2d", bidirectional=False)  # the hand forms are one-direction rings
    base.update(kw)
    return StepOptions(**base)


def run(toy, optimizer="adam", **kw):
    per = {k: kw.pop(k) for k in ("replicas",) if k in kw}
    return simulate_strategies(toy, "torus:2x2", optimizer, per_replica_batch=B, options=options(**kw), **per)


# ---------------------------------------------------------------- hand formulas
def hand_layers(grad_bytes=4, ways=1):
    """Per-layer forward and backward seconds, the roofline written out."""
    mxu = PEAK * MXU_EFF * (1 + (ways - 1) * SPATIAL_EFF)   # achieved FLOP/s of the replica
    hbm = HBM_BPS * ACT_EFF                                   # 225 GB/s
    fwd, bwd = [], []
    for flops, w, out in zip(LAYER_FLOPS, LAYER_WEIGHTS, LAYER_OUT):
        mf = flops * B / mxu
        mb = BWD_RATIO * mf
        outs = out * B / ways
        io_f = (w * 2 + outs * 2) / hbm                      # bf16 weights read + bf16 output written
        io_b = (w * (2 + grad_bytes) + 2 * outs * 2) / hbm   # weights again + weight grads; 2 x outputs
        fwd.append(max(mf, io_f) + outs * EW_FWD / hbm + OP_S)
        bwd.append(max(mb, io_b) + outs * EW_BWD / hbm + BWD_RATIO * OP_S)
    return fwd, bwd


def rs_2d(S):
    """2-D reduce-scatter on a 2x2 torus: a 2-ring along X on S, then a 2-ring along Y on S/2;
    each ring of n=2 takes (n-1)(alpha + B/(n bw))."""
    return (ALPHA + S / 2 / LINK) + (ALPHA + (S / 2) / 2 / LINK)


def ag_2d(S):
    """All-gather: the same passes in reverse order (Y on S/2, then X on S)."""
    return (ALPHA + (S / 2) / 2 / LINK) + (ALPHA + S / 2 / LINK)


def ar_2d(S):
    """2-D all-reduce: reduce-scatter X (S), ring all-reduce Y on S/2 (2(n-1) steps of S/4),
    all-gather X (S)."""
    return (ALPHA + S / 2 / LINK) + 2 * (ALPHA + (S / 2) / 2 / LINK) + (ALPHA + S / 2 / LINK)


def ar_ring(S, n=N):
    """Textbook ring all-reduce: 2(n-1)(alpha + S/(n bw))."""
    return 2 * (n - 1) * (ALPHA + S / (n * LINK))


def adam_update(elements, tensors=TENSORS):
    """Adam fp32: read 16 B (w, g, m, v) + write 12 B (w, m, v) per element, one kernel per tensor."""
    return elements * (16 + 12) / (HBM_BPS * UPD_EFF) + tensors * OP_S


def approx(x, rel=1e-9):
    return pytest.approx(x, rel=rel, abs=1e-15)


# ---------------------------------------------------------------- the toy case
def test_hand_figures_are_what_we_think():
    """Anchor the hand figures of the report (units: microseconds)."""
    fwd, bwd = hand_layers()
    # layer 0 is compute-bound: 262144*1024 / 30.75e12 = 8.7296 us matrix > 5.83 us io
    assert 262144 * 1024 / 30.75e12 > (131584 * 2 + 512 * 1024 * 2) / 225e9
    # layer 1 is io-bound: 0.068 us matrix < 1.186 us weight + output bytes
    assert 2048 * 1024 / 30.75e12 < (131328 * 2 + 2 * 1024 * 2) / 225e9
    assert fwd[0] == approx(262144 * 1024 / 30.75e12 + 512 * 1024 * 6 / 225e9 + 2e-6)
    assert bwd[1] == approx((131328 * 6 + 2 * 2 * 1024 * 2) / 225e9 + 2 * 1024 * 10 / 225e9 + 4e-6)
    assert ar_2d(4 * P) == approx(4e-6 + 1.5 * 4 * P / 100e9)
    assert rs_2d(4 * P) == approx(2e-6 + 0.75 * 4 * P / 100e9)


def test_toy_replicated_and_sharded_step_fp32(toy):
    results, meta = run(toy)
    assert meta["replicas"] == N and meta["spatial_ways"] == 1 and meta["params"] == P
    fwd, bwd = hand_layers()
    S = 4 * P                                   # fp32 gradients and weights, no padding
    rep, sh = results["replicated"], results["sharded"]

    # per-layer program durations
    for res in (rep, sh):
        prog_f = [iv.end_s - iv.start_s for iv in res.timeline.intervals if iv.kind == "fwd" and iv.step == 0]
        prog_b = [iv.end_s - iv.start_s for iv in res.timeline.intervals if iv.kind == "bwd" and iv.step == 0]
        assert prog_f == [approx(t) for t in fwd]
        assert prog_b == [approx(t) for t in reversed(bwd)]   # backward runs last layer first

    # replicated: one all-reduce bucket of 4P bytes, every replica updates P elements
    ops = FWD_OPS_S + BWD_OPS_S + TENSORS * OP_S
    exp_rep = {"overhead_s": STEP_S, "host_loop_s": 0.0, "op_launch_s": ops, "fwd_s": sum(fwd) - FWD_OPS_S,
               "bwd_s": sum(bwd) - BWD_OPS_S, "update_s": adam_update(P) - TENSORS * OP_S,
               "exposed_comm_s": ar_2d(S), "extra_reduction_s": 0.0, "idle_s": 0.0}
    # sharded: reduce-scatter 4P, update P/4, all-gather 4P (weights fp32), no extra reductions
    exp_sh = {"overhead_s": STEP_S, "host_loop_s": 0.0, "op_launch_s": ops, "fwd_s": sum(fwd) - FWD_OPS_S,
              "bwd_s": sum(bwd) - BWD_OPS_S, "update_s": adam_update(P / N) - TENSORS * OP_S,
              "exposed_comm_s": rs_2d(S) + ag_2d(S), "extra_reduction_s": 0.0, "idle_s": 0.0}
    for res, exp in ((rep, exp_rep), (sh, exp_sh)):
        for part, value in exp.items():
            assert res.breakdown[part] == approx(value), (res.strategy, part)
        assert res.step_time_s == approx(sum(exp.values()))
    assert speedup(results) == approx(sum(exp_rep.values()) / sum(exp_sh.values()))

    # what the step moves
    assert [(c.op, c.nbytes) for c in rep.work.grad_collectives] == [("all-reduce", 4 * P)]
    assert [(c.op, c.nbytes) for c in sh.work.grad_collectives] == [("reduce-scatter", 4 * P)]
    assert [(c.op, c.nbytes) for c in sh.work.weight_allgathers] == [("all-gather", 4 * P)]
    assert rep.work.update.bytes_read == 16 * P and rep.work.update.bytes_written == 12 * P
    assert sh.work.update.bytes_read == 16 * P / N and sh.work.update.bytes_written == 12 * P / N
    assert sh.work.extra_allreduces == ()

    # memory per replica, bytes
    act = B * ACT_PER_EXAMPLE
    m = rep.memory
    assert (m.weights, m.gradients, m.slots, m.activations, m.collective_buffers) == (
        4 * P, 4 * P, 2 * 4 * P, act, 4 * P)   # Adam: 2 fp32 slots; the all-reduce's output buffer
    assert m.peak == 4 * P + 4 * P + 8 * P + act + 4 * P
    assert m.padding == 0 and m.capacity == HBM_CAP
    m = sh.memory
    # weights whole (all-gathered), backward's gradients + the reduce-scattered 1/N shards,
    # slots of the shard only, no all-reduce buffer (no replicated tensor, no extra reduction)
    assert (m.weights, m.gradients, m.slots, m.activations, m.collective_buffers) == (
        4 * P, 4 * P + 4 * P / N, 2 * 4 * P / N, act, 0)
    assert m.details["grad_shards"] == 4 * P / N
    assert m.peak == 4 * P + (4 * P + P) + 2 * P + act


def test_toy_bf16_gradients_gather_weights_not_gradients(toy):
    """bf16 gradients: reduce-scatter 2P bytes, all-gather still 4P (fp32 weights)."""
    results, _ = run(toy, grad_dtype="bf16")
    fwd, bwd = hand_layers(grad_bytes=2)
    rep, sh = results["replicated"], results["sharded"]
    assert [(c.op, c.nbytes) for c in sh.work.grad_collectives] == [("reduce-scatter", 2 * P)]
    assert [(c.op, c.nbytes) for c in sh.work.weight_allgathers] == [("all-gather", 4 * P)]
    assert rep.breakdown["exposed_comm_s"] == approx(ar_2d(2 * P))
    assert sh.breakdown["exposed_comm_s"] == approx(rs_2d(2 * P) + ag_2d(4 * P))
    # Adam with bf16 gradients reads 4 (w) + 2 (g) + 8 (m, v) and writes 12 per element
    upd = P / N * (4 + 2 + 8 + 12) / (HBM_BPS * UPD_EFF) + TENSORS * OP_S
    assert sh.breakdown["update_s"] == approx(upd - TENSORS * OP_S)
    # backward is checked separately (next test): the rest of the step by hand
    assert sh.breakdown["fwd_s"] == approx(sum(fwd) - FWD_OPS_S)
    assert sh.step_time_s - sh.breakdown["bwd_s"] - BWD_OPS_S == approx(STEP_S + sum(fwd) + upd + rs_2d(2 * P) + ag_2d(4 * P))
    assert rep.memory.gradients == 2 * P
    assert sh.memory.gradients == 2 * P + 2 * P / N


def test_toy_bf16_backward_writes_bf16_weight_gradients(toy):
    results, _ = run(toy, grad_dtype="bf16")
    _, bwd = hand_layers(grad_bytes=2)
    assert results["sharded"].breakdown["bwd_s"] == approx(sum(bwd) - BWD_OPS_S)


def test_point_record_reports_the_bf16_gradients_it_ran(toy):
    from wus_sim.experiments.records import simulate_point
    rec = simulate_point({"workload": toy.path, "topology": "torus:2x2", "grad_dtype": "bf16",
                          "strategy": "sharded", "calibration": "none", "per_replica_batch": B})[0]
    assert rec["grad_comm_bytes"] == 2 * P
    assert rec["grad_dtype"] == "bf16"


def test_toy_ring_algorithm_is_the_textbook_ring(toy):
    results, _ = run(toy, algorithm="ring")
    S = 4 * P
    assert results["replicated"].breakdown["exposed_comm_s"] == approx(ar_ring(S))
    # reduce-scatter and all-gather: (n-1)(alpha + S/(n bw)) each
    assert results["sharded"].breakdown["exposed_comm_s"] == approx(2 * (N - 1) * (ALPHA + S / (N * LINK)))


def test_toy_momentum_update_bytes(toy):
    """Momentum (1 fp32 slot): read w, g, m = 12 B, write w, m = 8 B per element."""
    results, _ = run(toy, optimizer="momentum")
    rep, sh = results["replicated"], results["sharded"]
    assert rep.work.update.bytes_moved == 20 * P
    assert sh.work.update.bytes_moved == 20 * P / N
    assert rep.breakdown["update_s"] == approx(20 * P / (HBM_BPS * UPD_EFF))
    assert sh.breakdown["update_s"] == approx(20 * P / N / (HBM_BPS * UPD_EFF))
    assert rep.breakdown["op_launch_s"] == approx(FWD_OPS_S + BWD_OPS_S + TENSORS * OP_S)
    assert rep.memory.slots == 4 * P and sh.memory.slots == 4 * P / N


def test_toy_spatial_partitioning(toy):
    """2 replicas of 2 cores each on the 2x2 torus: matrix and output work over the cores
    (speed-up 1 + (2-1) x 0.75), weight reads and op overheads not; activations halve."""
    results, meta = run(toy, replicas=2)
    assert meta["replicas"] == 2 and meta["spatial_ways"] == 2
    fwd, bwd = hand_layers(ways=2)
    for res in results.values():
        assert res.breakdown["fwd_s"] == approx(sum(fwd) - FWD_OPS_S)
        assert res.breakdown["bwd_s"] == approx(sum(bwd) - BWD_OPS_S)
        assert res.memory.activations == B * ACT_PER_EXAMPLE / 2
    assert results["replicated"].breakdown["update_s"] == approx(adam_update(P) - TENSORS * OP_S)
    assert results["sharded"].breakdown["update_s"] == approx(adam_update(P / 2) - TENSORS * OP_S)
    assert results["sharded"].memory.gradients == 4 * P + 4 * P / 2


# ---------------------------------------------------------------- real workloads
def test_mask_rcnn_on_v3_128_runs_32_replicas_of_4_cores():
    w = load_workload("mask-rcnn")
    opts = StepOptions(compute=ComputeParams())
    results, meta = simulate_strategies(w, "tpu-v3-128", options=opts)
    assert meta["replicas"] == 32 and meta["spatial_ways"] == 4
    assert meta["per_replica_batch"] == 4 and meta["global_batch"] == 128
    # 4 images over 4 cores, the busiest core holding ceil(H / 4) of each map's H rows:
    # a quarter of the activations, weighted up by the layers' outputs
    rows = [(out, math.ceil(round(h) / 4) * 4 / round(h) if h > 0 else 1.0)
            for out, h in zip(w.layer_output_elements, w.layer_map_side)]
    busiest = sum(out * r for out, r in rows) / sum(out for out, _ in rows)
    assert 1.0 < busiest < 1.05
    for res in results.values():
        assert res.memory.activations == approx(4 * w.activation_bytes_per_example / 4 * busiest, rel=1e-12)
    # sharded: each replica updates 1/32 of every big tensor, not 1/128
    sh = results["sharded"]
    shard = sum(math.ceil(t.size / 32) if t.size >= 32 else t.size for t in w.tensors)
    assert sh.work.update.elements == shard


def test_resnet50_lars_on_v3_32_bytes_by_hand():
    """ResNet-50, LARS, tpu-v3-32 (32 replicas, 1 per core, batch 128), bf16 gradients.

    LARS keeps one fp32 slot: read w, g, m and write w, m: (4+4+4) + (4+4) = 20 B per
    element with fp32 gradients, 18 with bf16. Tensors of rank >= 2 take the trust ratio:
    under sharding each adds one value to norm(w) and one to norm(g), two fp32 all-reduces.
    Shards: ceil(size / 32) elements (a split or flat cut pads to a multiple of 32).
    """
    w = load_workload("resnet50")
    n = 32
    opts = StepOptions(compute=COMPUTE, grad_dtype="bf16", overlap_grad_reduce=False,
                       overlap_all_gather=False)
    results, meta = simulate_strategies(w, "tpu-v3-32", "lars", options=opts)
    assert meta["replicas"] == n and meta["spatial_ways"] == 1 and meta["per_replica_batch"] == 128
    params = sum(math.prod(t.shape) for t in w.tensors)
    assert params == meta["params"]
    big = [t for t in w.tensors if t.size >= n]               # sharded (>= N elements)
    small = [t for t in w.tensors if t.size < n]              # replicated
    padded = sum(math.ceil(t.size / n) * n for t in big)
    shard = padded // n + sum(t.size for t in small)
    matrices = sum(1 for t in w.tensors if len(t.shape) >= 2)
    assert all(t.size >= n for t in w.tensors if len(t.shape) >= 2)

    rep, sh = results["replicated"], results["sharded"]
    per_elem = (4 + 2 + 4) + (4 + 4)                          # bf16 gradient read
    assert rep.work.update.bytes_moved == per_elem * params
    assert sh.work.update.elements == shard
    assert sh.work.update.bytes_moved == per_elem * shard
    kernels = 2 * matrices + (len(w.tensors) - matrices)       # LARS: norms pass + step pass
    hbm = 900e9 / 2                                            # tpu-v3: 2 cores share 900 GB/s
    assert rep.breakdown["update_s"] == approx(per_elem * params / (hbm * UPD_EFF))
    assert sh.breakdown["update_s"] == approx(per_elem * shard / (hbm * UPD_EFF))
    layers = w.num_layers
    assert sh.breakdown["op_launch_s"] == approx((layers + BWD_RATIO * layers + kernels) * OP_S)

    assert sh.work.gather_nbytes == 4 * padded                 # fp32 weights, not bf16 gradients
    assert sum(c.nbytes for c in sh.work.grad_collectives if c.op == "reduce-scatter") == 2 * padded
    assert sum(c.nbytes for c in sh.work.grad_collectives if c.op == "all-reduce") == \
        2 * sum(t.size for t in small)
    assert rep.work.grad_nbytes == 2 * params
    assert sorted((c.what, c.nbytes) for c in sh.work.extra_allreduces) == [
        ("norm(g)", 4 * matrices), ("norm(w)", 4 * matrices)]
    assert rep.work.extra_allreduces == ()
    assert sh.breakdown["extra_reduction_s"] > 0 and rep.breakdown["extra_reduction_s"] == 0
    # each tiny all-reduce costs at least the hops of a 2-D all-reduce on the 4x4 chips x 2
    # cores: > 2 x 1 us; the two together are timed in the step
    assert sh.breakdown["extra_reduction_s"] > 2 * 2e-6
    # memory: one fp32 slot per element; sharded keeps the shard's slots and gradient shards
    assert rep.memory.slots == 4 * params
    assert sh.memory.slots == 4 * shard
    assert sh.memory.gradients == 2 * padded + 2 * sum(t.size for t in small) + 2 * padded / n
    assert sh.memory.weights == 4 * (padded + sum(t.size for t in small))
    pad = padded - sum(t.size for t in big)
    assert sh.memory.details["grad_padding"] == 2 * pad + 2 * pad / n   # formatted buffer + own shard
    assert sh.memory.details["weight_padding"] == 4 * pad
    # collective buffers: the replicated tensors' all-reduce (bf16; they are few and tiny, one
    # bucket of the 25 MiB default) + the two fp32 norm vectors
    assert sh.memory.collective_buffers == 2 * sum(t.size for t in small) + 2 * 4 * matrices
