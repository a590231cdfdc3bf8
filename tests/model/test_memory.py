"""Per-replica memory of both strategies: closed forms, the N-fold slot saving, infeasibility."""

import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import ConfigError, InfeasibleError, UnknownNameError
from wus_sim.model.memory import PARTS, memory_both, memory_breakdown
from wus_sim.optimizers import analyse
from wus_sim.training.update.planner import plan
from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.workload import Tensor, Workload
from wus_sim.model.workload_files import load_workload
from workload_sample import sample_workloads

from make_topology import make
import make_workload as make_toy


def make_workload(shapes, act=1000.0):
    tensors = tuple(Tensor(f"t{i}", tuple(s), i) for i, s in enumerate(shapes))
    return Workload(name="synthetic", description="", tensors=tensors, params=sum(t.size for t in tensors),
                    fwd_flops_per_example=1.0, example_unit="example", activation_bytes_per_example=act,
                    num_layers=len(tensors), layer_names=tuple(t.name for t in tensors),
                    layer_fwd_flops=(1.0 / len(tensors),) * len(tensors))


shape_st = st.lists(st.integers(1, 80), min_size=1, max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(shape_st, min_size=1, max_size=10), dims=st.lists(st.integers(1, 6), min_size=1, max_size=2),
       opt=st.sampled_from(["sgd", "momentum", "adam", "lamb", "lars"]), batch=st.integers(1, 64))
def test_sharded_slots_are_replicated_over_n_plus_padding(shapes, dims, opt, batch):
    w = make_workload(shapes)
    p = plan(w, make(dims), opt, replicate_below_elements=0, max_padding_ratio=10**6)
    n = p.replicas
    m = memory_both(p, batch)
    rep, sh = m["replicated"], m["sharded"]
    assert sh.slots == pytest.approx(rep.slots / n + sh.details["slot_padding"])
    # elementwise slots: the padding share is slots x padding elements / N
    k = analyse(opt).slots
    assert sh.details["slot_padding"] == pytest.approx(k * p.padding_elements / n * p.slot_bytes)
    # weights are whole on every replica in both strategies (plus padding when sharded)
    assert sh.weights == rep.weights + p.padding_elements * p.weight_bytes
    # activations do not depend on the strategy, and scale with the batch
    assert sh.activations == rep.activations == batch * w.activation_bytes_per_example
    for mm in (rep, sh):
        assert mm.peak == pytest.approx(sum(getattr(mm, part) for part in PARTS))


@settings(max_examples=40, deadline=None)
@given(dims=st.lists(st.integers(1, 5), min_size=1, max_size=2), scale=st.integers(1, 6))
def test_no_padding_when_n_divides_every_tensor(dims, scale):
    n = 1
    for d in dims:
        n *= d
    w = make_workload([(n * scale, 3), (n,), (2, n * 5)])
    sh = memory_breakdown(plan(w, make(dims), "adam", replicate_below_elements=0), "sharded", 1)
    assert sh.padding == 0 and sh.details["slot_padding"] == 0


@pytest.mark.parametrize("name", sample_workloads())
def test_shipped_workloads_with_replicated_tiny_tensors(name):
    w = load_workload(name)
    topo = load_topology("tpu-v3-2048")
    p = plan(w, topo, "adam")
    m = memory_both(p, w.default_per_replica_batch)
    rep, sh = m["replicated"], m["sharded"]
    sharded_slots = sum(t.slot_elements for t in p.sharded_tensors) * p.slot_bytes
    assert sh.slots == pytest.approx(sharded_slots / p.replicas + sh.details["slot_padding"]
                                     + sh.details["replicated_tensor_slots"])
    assert rep.slots == pytest.approx(2 * w.params * 4)   # Adam: m and v, fp32
    assert sh.peak < rep.peak                              # N = 2048: the slot saving dominates
    assert rep.capacity == topo.hbm_bytes_per_replica == 16 * 2**30


def test_adafactor_keeps_the_column_statistic_whole():
    w = make_workload([(64, 10)])
    p = plan(w, make((4, 4)), "adafactor", replicate_below_elements=0)
    rep, sh = memory_both(p, 1).values()
    assert rep.slots == (64 + 10) * 4
    assert sh.slots == (64 // 16 + 10) * 4


def test_spatial_partitioning_splits_activations_only(tmp_path):
    """A toy convnet over 4 cores per replica: a 3x3 conv 64 -> 64 on a 10x10 map and a 1x1
    conv 64 -> 16 on a 1x1 map. The busiest core holds ceil(10/4) = 3 of the 10 rows (1.2 x
    an even quarter) and the whole 1-row map (4 x); weighted by the layers' outputs per
    image (6400 and 16) it holds (6400 x 1.2 + 16 x 4) / 6416 of a quarter of the
    activations (1000 bf16 elements per image). Weights and slots are whole on each core."""
    w = make_toy.make(tmp_path, "toyconv", "two convs", params=37888, unit="image",
                      layers=[("c0", 2 * 9 * 64 * 64 * 100), ("c1", 2 * 64 * 16)],
                      tensors=[("c0.kernel", [3, 3, 64, 64], 0), ("c1.kernel", [1, 1, 64, 16], 1)])
    topo = load_topology("tpu-v3-8")
    batch = 64
    whole = memory_breakdown(plan(w, topo, "momentum"), "replicated", batch)
    spatial = memory_breakdown(plan(w, topo, "momentum", replicas=2), "replicated", batch)
    assert whole.activations == batch * 1000 * 2
    assert spatial.activations == pytest.approx(batch * 1000 * 2 / 4 * (6400 * 1.2 + 16 * 4) / 6416, rel=1e-12)
    assert spatial.weights == whole.weights and spatial.slots == whole.slots


def test_bf16_gradients_halve_gradient_memory():
    w = load_workload("transformer-big")
    topo = load_topology("tpu-v3-512")
    fp32 = memory_breakdown(plan(w, topo, "adam"), "replicated", 4)
    bf16 = memory_breakdown(plan(w, topo, "adam", grad_bytes=2), "replicated", 4)
    assert bf16.gradients == fp32.gradients / 2


def test_over_capacity_raises_naming_the_parts_and_excess():
    w = load_workload("bert-large")
    p = plan(w, load_topology("tpu-v3-512"), "lamb")
    ok = memory_breakdown(p, "replicated", 16, activation_model="unfused")  # check=False: a row, not a crash
    assert not ok.fits and ok.headroom < 0
    with pytest.raises(InfeasibleError) as err:
        memory_breakdown(p, "replicated", 16, check=True, activation_model="unfused")
    e = err.value
    assert e.what == "hbm" and e.need == ok.peak and e.have == ok.capacity
    text = str(e)
    assert "replicated" in text and "over by" in text and "activations" in text
    # sharding saves LAMB's slots and (ZeRO stage 2) frees each bucket's full gradient once it is
    # reduce-scattered: it fits beside the unfused 14 GiB of activations
    sharded = memory_breakdown(p, "sharded", 16, activation_model="unfused")
    assert sharded.peak < ok.peak and sharded.fits
    # by hand: the 1/N shards + the replicated tensors' whole gradients + the largest sharded bucket
    shards = sum(t.padded_size for t in p.sharded_tensors) / p.replicas
    repl = sum(t.size for t in p.replicated_tensors)
    largest = max(b.padded_elements for b in p.buckets if b.kind == "sharded")
    assert sharded.gradients == pytest.approx((shards + repl + largest) * 4)
    whole = memory_breakdown(p, "sharded", 16, activation_model="unfused", overlap_grad_reduce=False)
    assert whole.gradients == pytest.approx((shards + repl + sum(t.padded_size for t in p.sharded_tensors)) * 4)
    assert not whole.fits  # every bucket waiting for the end of backward: over


def test_activation_scale_and_bad_inputs():
    w = load_workload("ncf")
    p = plan(w, load_topology("tpu-v3-32"), "adam")
    one = memory_breakdown(p, "replicated", 8)
    two = memory_breakdown(p, "replicated", 8, activation_scale=2)
    assert two.activations == 2 * one.activations
    with pytest.raises(UnknownNameError):
        memory_breakdown(p, "zero", 8)
    with pytest.raises(ConfigError):
        memory_breakdown(p, "sharded", 0)


def test_to_dict_has_the_documented_keys():
    p = plan(load_workload("gnmt"), load_topology("tpu-v3-32"), "adam")
    d = memory_breakdown(p, "sharded", 4).to_dict()
    for key in ("weights", "gradients", "slots", "padding", "activations", "collective_buffers", "peak",
                "capacity", "fits", "details"):
        assert key in d


@pytest.mark.parametrize("topology", ["tpu-v3-32", "tpu-v3-2048"])
def test_replicated_collective_buffer_is_its_largest_own_all_reduce(topology):
    """The replicated update all-reduces in its own buckets (Plan.allreduce_buckets): its
    in-flight buffer is the largest of those, by hand from the tensors: the biggest bucket's
    elements x 4 B of fp32 gradient."""
    w = load_workload("resnet50")
    p = plan(w, load_topology(topology), "lars")
    largest = max(sum(w.tensors[i].size for i in b.tensors) for b in p.allreduce_buckets) * 4
    assert memory_breakdown(p, "replicated", 32).collective_buffers == largest
