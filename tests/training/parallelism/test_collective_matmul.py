"""Collective matmuls: a tensor-parallel all-gather or reduce-scatter decomposed beside the matmul
it feeds or follows (Wang et al. 2023, ASPLOS '23), exposing one step plus what the collective
outlasts the matmul by; every expected value derived here by hand."""

import pytest

from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.compute import layer_times
from wus_sim.model.workload_files import load_workload
from wus_sim.training.parallelism.mesh_step import simulate_mesh
from wus_sim.training.parallelism.tensor_parallel import collective_matmul_exposed_s, split_workload
from wus_sim.training.step import StepOptions
from wus_sim.training.timeline.timeline import BREAKDOWN_PARTS


def test_a_matmul_that_outlasts_its_collective_exposes_one_step():
    # T = 4: the collective is 3 ring steps; 3 ms of it beside a 10 ms matmul leaves its one
    # step that cannot overlap: 3 ms / 3 = 1 ms
    assert collective_matmul_exposed_s(3e-3, 10e-3, 4) == pytest.approx(1e-3, rel=1e-12)


def test_a_collective_that_outlasts_its_matmul_exposes_the_excess_and_one_step():
    # 9 ms of collective beside a 5 ms matmul: 4 ms more than the matmul + one step of 9 / 3 = 3 ms
    assert collective_matmul_exposed_s(9e-3, 5e-3, 4) == pytest.approx(7e-3, rel=1e-12)
    # T = 2: one step is the whole collective, nothing hides
    assert collective_matmul_exposed_s(2e-3, 10e-3, 2) == pytest.approx(2e-3, rel=1e-12)


def test_nothing_to_overlap_is_the_whole_collective():
    assert collective_matmul_exposed_s(3e-3, 0.0, 4) == 3e-3  # the embedding lookup: no matmul
    assert collective_matmul_exposed_s(3e-3, 1e-9, 8) == 3e-3  # never more than the collective
    assert collective_matmul_exposed_s(3e-3, 1.0, 1) == 0.0  # one way: no collective


FLOPS = StepOptions(calibration="flops")
"""The flops compute model's fit (wus-sim 0.1's default): these cases were derived under it."""


def _by_hand(topo, batch, per_group_batch):
    """tensor_comm_s of llama3-8b, tensor=4 on tpu-v5p-128's x rings, derived by hand."""
    h, q, kv, ff, s, T = 4096, 4096, 1024, 14336, 8192, 4  # Meta-Llama-3-8B config.json
    nbytes = per_group_batch * s * h * 2  # the layer output, bf16
    bw, lat, n = topo.axis_link_Bps[0], topo.hop_latency_s, T
    c = (n - 1) * (lat + nbytes / 2 / n / bw)  # a bidirectional one-hop ring of 4: all-gather = reduce-scatter
    split = split_workload(load_workload("llama3-8b"), T)
    fwd = layer_times(split, topo, per_group_batch, FLOPS.compute).forward_s
    weight = 2 * (2 * q + 2 * kv) * h  # per token: q, k, v, o
    attention_frac = weight / (weight + 4 * s * h)  # of the attention layer's forward FLOPs
    attn_in, attn_out = attention_frac * (q + 2 * kv) / (2 * q + 2 * kv), attention_frac * q / (2 * q + 2 * kv)
    mlp_in, mlp_out = 2 / 3, 1 / 3  # gate + up feed on the all-gather, down precedes the reduce-scatter

    def exposed(m):
        return min(c, c / (T - 1) + max(0.0, c - m))

    total, cases = 2 * c, []  # the embedding lookup's forward pair: nothing to hide under
    for layer in range(1, 65):
        a, b = (attn_in, attn_out) if layer % 2 else (mlp_in, mlp_out)
        m_in, m_out = fwd[layer] * a, fwd[layer] * b
        total += exposed(m_in) + exposed(m_out)  # forward: gather -> in matmuls; out matmul -> scatter
        total += exposed(2 * m_out) + exposed(2 * m_in)  # backward: the transposes, 2x the FLOPs
        cases += [m_in > c, m_out > c]
    head = fwd[65] / 2  # outside the blocks: its matmul half and half; backward only
    total += exposed(2 * head) + exposed(2 * head)
    return total, c, cases


def _head(topo, c):
    split = split_workload(load_workload("llama3-8b"), 4)
    head = layer_times(split, topo, 2, FLOPS.compute).forward_s[65]  # backward 2x, halves: = head
    return 2 * min(c, c / 3 + max(0.0, c - head))


@pytest.mark.parametrize("link_GBps,expect", [(None, "matmul outlasts"), (2.0, "collective outlasts")])
def test_tensor_comm_is_the_exposed_part_by_hand(link_GBps, expect):
    topo = load_topology("tpu-v5p-128", megacore=True, link_GBps=link_GBps)
    run = simulate_mesh("llama3-8b", topo, None, ("fully-sharded",), mesh="fsdp=16,tensor=4", global_batch=32,
                        options=StepOptions(remat="none", calibration="flops"))
    total, c, cases = _by_hand(topo, 32, 32 // 16)
    if expect == "matmul outlasts":  # v5p's links: every block matmul outlasts its collective
        assert all(cases)
        blocks = 64 * 4  # each collective of a block layer exposes one step, c / 3
        assert total == pytest.approx(2 * c + blocks * c / 3 + _head(topo, c), rel=1e-12)
    else:  # 2 GB/s links: every collective outlasts its matmul
        assert not any(cases)
    res = run.results["fully-sharded"]
    assert res.breakdown["tensor_comm_s"] == pytest.approx(total, rel=1e-9)
    # busy: every collective whole (2 per pair, 1 + 64 forward pairs + 64 + 1 backward pairs)
    assert run.mesh.comm["tensor"]["busy_s"] == pytest.approx(2 * 130 * c, rel=1e-9)
    assert sum(res.breakdown[p] for p in BREAKDOWN_PARTS) + res.breakdown["tensor_comm_s"] == pytest.approx(
        res.step_time_s, rel=1e-9)


def test_serial_collectives_are_todays_model_bit_for_bit():
    # step times of the mesh step before collective matmuls (commit 44df6e3), tpu-v5p-1024 megacore
    topo = load_topology("tpu-v5p-1024", megacore=True)
    serial = StepOptions(remat="layer", collective_matmul=False, calibration="flops")  # the model then shipped
    run = simulate_mesh("llama3-70b", topo, None, ("fully-sharded",), mesh="fsdp=128,tensor=4",
                        per_replica_batch=4, options=serial)
    res = run.results["fully-sharded"]
    # 25.04240530601318 before fully-sharded gathered bf16 weights (the compute dtype) instead of fp32:
    # the fsdp gathers' exposed part shrank by 13.3 ms; every compute and tensor part is unchanged
    assert res.step_time_s == 25.029103057053177
    assert res.breakdown["tensor_comm_s"] == 3.8944597574400057
    overlapped = simulate_mesh("llama3-70b", topo, None, ("fully-sharded",), mesh="fsdp=128,tensor=4",
                               per_replica_batch=4, options=StepOptions(remat="layer", calibration="flops")).results["fully-sharded"]
    assert overlapped.breakdown["tensor_comm_s"] < res.breakdown["tensor_comm_s"]
    assert overlapped.step_time_s < res.step_time_s
