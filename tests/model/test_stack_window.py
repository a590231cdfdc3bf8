"""Fully-sharded memory of a scanned layer stack: the gathered weights of the current block and
the next one (XLA's scan runs the next iteration's all-gather while the current one computes),
whatever the timeline's prefetch depth; derived by hand from Meta-Llama-3-8B's config.json."""

import pytest

from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.layer_stack import stack_units
from wus_sim.model.memory import memory_breakdown
from wus_sim.model.workload_files import load_workload
from wus_sim.training.update.planner import plan

H, KV, FF, VOCAB = 4096, 1024, 14336, 128256


@pytest.fixture(scope="module")
def llama_plan():
    return plan(load_workload("llama3-8b"), load_topology("tpu-v5e-256"), "adamw", replicas=256)


def test_units_are_the_blocks_and_the_layers_outside(llama_plan):
    units = stack_units(llama_plan.workload)
    # embedding, 32 blocks of (attention, MLP), the head
    assert units[0] == 0 and units[1] == units[2] == 1 and units[3] == 2 and units[64] == 32 and units[65] == 33


@pytest.mark.parametrize("prefetch", [0, 1, 7, None])
def test_two_units_of_gathered_weights_whatever_the_prefetch(llama_plan, prefetch):
    m = memory_breakdown(llama_plan, "fully-sharded", 1, gather_prefetch=prefetch)
    block = 2 * H * H + 2 * H * KV + 3 * H * FF + 2 * H  # q, o; k, v; gate, up, down; two norms
    embedding = VOCAB * H
    # the largest pair: the embedding and block 0 (or the last block and the head, as large), plus
    # the next block's input norm, which the planner fused into block 0's k/v bucket
    # in bf16, the compute dtype the layers cast their fp32 weights to before the gather
    expected = (embedding + block + H) * 2
    assert m.details["gathered_weights"] == expected
    assert m.weights == pytest.approx(llama_plan.total("padded_size", "sharded") / 256 * llama_plan.weight_bytes
                                      + llama_plan.replicated_elements * llama_plan.weight_bytes + expected, rel=1e-12)


def test_a_workload_that_is_no_stack_keeps_the_prefetch_window():
    p = plan(load_workload("transformer-big"), load_topology("tpu-v3-32"), "adam", replicas=32)
    assert stack_units(p.workload) is None
    shallow = memory_breakdown(p, "fully-sharded", 1, gather_prefetch=0).details["gathered_weights"]
    deep = memory_breakdown(p, "fully-sharded", 1, gather_prefetch=8).details["gathered_weights"]
    assert deep > shallow


def test_keep_gathered_weights_still_keeps_every_bucket(llama_plan):
    m = memory_breakdown(llama_plan, "fully-sharded", 1, keep_gathered_weights=True)
    assert m.details["gathered_weights"] == llama_plan.total("padded_size", "sharded") * 2  # bf16
