"""Update strategies as data: collectives per bucket, update work, extra all-reduces, all-gathers."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import UnknownNameError
from wus_sim.optimizers import analyse
from wus_sim.training.update.planner import plan
from wus_sim.training.update.strategies import STRATEGIES, step_work, update_work
from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.workload import Tensor, Workload
from wus_sim.model.workload_files import load_workload
from workload_sample import sample_workloads

from make_topology import make


def make_workload(shapes):
    tensors = tuple(Tensor(f"t{i}", tuple(s), i) for i, s in enumerate(shapes))
    return Workload(name="synthetic", description="", tensors=tensors, params=sum(t.size for t in tensors),
                    fwd_flops_per_example=1.0, example_unit="example", activation_bytes_per_example=0.0,
                    num_layers=len(tensors), layer_names=tuple(t.name for t in tensors),
                    layer_fwd_flops=(1.0 / len(tensors),) * len(tensors))


def test_strategy_names():
    assert STRATEGIES == ("replicated", "sharded", "fully-sharded")
    p = plan(load_workload("ncf"), load_topology("tpu-v3-32"), "adam")
    with pytest.raises(UnknownNameError):
        step_work(p, "zero-3")


@pytest.mark.parametrize("name", sample_workloads())
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_contract_for_every_workload(name, strategy):
    w = load_workload(name)
    p = plan(w, load_topology("tpu-v3-128"), w.default_optimizer)
    sw = step_work(p, strategy)
    buckets = p.allreduce_buckets if strategy == "replicated" else p.buckets
    assert len(sw.grad_collectives) == len(buckets)
    for c, b in zip(sw.grad_collectives, buckets):
        assert (c.bucket, c.first_layer, c.layers) == (b.index, b.first_layer, b.layers)
        assert c.nbytes > 0
    if strategy == "replicated":
        assert {c.op for c in sw.grad_collectives} == {"all-reduce"}
        assert sw.grad_nbytes == w.params * p.grad_bytes
        assert sw.extra_allreduces == () and sw.all_gathers == ()
        assert sw.update.elements == w.params
    else:
        ops = [c.op for c in sw.grad_collectives]
        sharded_buckets = sum(b.kind == "sharded" for b in p.buckets)
        assert ops.count("reduce-scatter") == sharded_buckets
        if strategy == "sharded":   # one all-gather per sharded bucket, after the update
            assert len(sw.weight_allgathers) == sharded_buckets
            assert sw.forward_allgathers == sw.backward_allgathers == ()
        else:                       # fully-sharded: before each bucket's forward and its backward
            assert sw.weight_allgathers == ()
            assert len(sw.forward_allgathers) == len(sw.backward_allgathers) == sharded_buckets
        # every sharded bucket's padded weights cross the wire once per all-gather
        gathers_per_bucket = {"sharded": 1, "fully-sharded": 2}[strategy]
        # the sharded update gathers its updated master weights; fully-sharded gathers each layer's
        # weights cast to the compute dtype, the file's activation dtype where it is narrower
        width = p.gather_bytes if strategy == "sharded" else min(p.gather_bytes, w.activation_bytes)
        assert sw.gather_nbytes == gathers_per_bucket * width * sum(
            b.padded_elements for b in p.buckets if b.kind == "sharded")
        assert ops.count("all-reduce") == sum(b.kind == "replicated" for b in p.buckets)
        assert len(sw.extra_allreduces) == len(p.extra_reductions)
        sharded_padded = sum(t.padded_size for t in p.sharded_tensors)
        assert sw.update.elements == sharded_padded // p.replicas + p.replicated_elements
    d = sw.to_dict()
    assert set(d) >= {"grad_collectives", "update", "extra_allreduces", "weight_allgathers"}


@pytest.mark.parametrize("name", ["resnet50", "transformer-big", "bert-large"])
def test_replicated_update_buckets_do_not_depend_on_the_shard_format(name):
    """The replicated update all-reduces every gradient: its buckets fuse tensors by their own
    bytes in backward order, so they are the same on 32 and on 16,384 replicas, where the
    sharded format pads and keeps different tensors whole. (They were the sharded plan's,
    so more replicas could move a small bucket last and shorten the replicated step.)"""
    w = load_workload(name)
    cap = 25 * 2**20
    plans = [plan(w, load_topology(t), w.default_optimizer, bucket_bytes=cap)
             for t in ("tpu-v3-32", "tpu-v3-2048", "torus:64x128")]
    assert plans[0].buckets != plans[2].buckets  # the shard format does change with N
    layouts = [[(b.tensors, b.elements, b.padded_elements) for b in p.allreduce_buckets] for p in plans]
    assert layouts[0] == layouts[1] == layouts[2]
    # by hand: walk the tensors from the last layer back, closing a bucket at >= cap bytes
    order = sorted(range(len(w.tensors)), key=lambda i: (-w.tensors[i].layer, -i))
    expected, current, filled = [], [], 0
    for i in order:
        nbytes = w.tensors[i].size * plans[0].grad_bytes
        if nbytes >= cap:
            expected.append((i,))
            continue
        current.append(i)
        filled += nbytes
        if filled >= cap:
            expected.append(tuple(current))
            current, filled = [], 0
    if current:
        expected.append(tuple(current))
    assert sorted(b.tensors for b in plans[0].allreduce_buckets) == sorted(expected)
    assert all(b.kind == "replicated" and b.elements == b.padded_elements for b in plans[0].allreduce_buckets)


@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam", "adamw", "lamb"])
def test_replicated_update_bytes_are_params_times_analysed_bytes(opt):
    w = load_workload("transformer-big")
    p = plan(w, load_topology("tpu-v3-32"), opt)
    a = analyse(opt)
    u = update_work(p, "replicated")
    assert u.bytes_read == w.params * a.bytes_read_per_element
    assert u.bytes_written == w.params * a.bytes_written_per_element


@settings(max_examples=50, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(1, 64), min_size=1, max_size=3).map(tuple), min_size=1, max_size=8),
       dims=st.lists(st.integers(1, 6), min_size=1, max_size=2),
       opt=st.sampled_from(["sgd", "momentum", "adam", "lamb", "lars"]))
def test_sharded_update_is_one_nth_plus_padding(shapes, dims, opt):
    w = make_workload(shapes)
    p = plan(w, make(dims), opt, replicate_below_elements=0, max_padding_ratio=10**6)
    n = p.replicas
    rep, sh = update_work(p, "replicated"), update_work(p, "sharded")
    assert sh.elements * n == p.padded_params
    a = analyse(opt)
    per_elem = a.bytes_read_per_element + a.bytes_written_per_element
    # elementwise bytes: exactly (P + padding)/N per replica
    assert sh.bytes_moved == pytest.approx(p.padded_params / n * per_elem)
    assert rep.bytes_moved == pytest.approx(w.params * per_elem)
    if p.padding_elements == 0:
        assert sh.bytes_moved * n == pytest.approx(rep.bytes_moved)


def test_sharded_bytes_follow_the_collectives_size_convention():
    w = load_workload("transformer-big")
    p = plan(w, load_topology("tpu-v3-32"), "adam")
    sw = step_work(p, "sharded")
    rs = [c for c in sw.grad_collectives if c.op == "reduce-scatter"]
    for c in rs:
        b = p.buckets[c.bucket]
        assert c.nbytes == b.padded_elements * p.grad_bytes   # the full buffer going in
    for c in sw.weight_allgathers:
        assert c.nbytes == p.buckets[c.bucket].padded_elements * p.gather_bytes   # the full buffer coming out


def test_fully_sharded_moves_one_more_gather_than_sharded_unless_weights_are_kept():
    w = load_workload("transformer-big")
    p = plan(w, load_topology("tpu-v3-32"), "adam")
    sh, fs = step_work(p, "sharded"), step_work(p, "fully-sharded")
    kept = step_work(p, "fully-sharded", keep_gathered_weights=True)
    assert fs.grad_collectives == sh.grad_collectives and fs.update == sh.update
    # fp32 master weights gathered after the update, bf16 (the compute dtype) before each layer:
    # twice the gathers at half the width
    assert fs.gather_nbytes == sh.gather_nbytes
    assert 2 * kept.gather_nbytes == sh.gather_nbytes and kept.backward_allgathers == ()
    assert [c.what for c in fs.forward_allgathers] == ["weights for forward"] * len(sh.weight_allgathers)
    # keeping only matters to fully-sharded
    assert step_work(p, "sharded", keep_gathered_weights=True) == sh


def test_bf16_gradients_halve_gradient_collective_bytes():
    w = load_workload("gnmt")
    topo = load_topology("tpu-v3-256")
    for s in STRATEGIES:
        fp32 = step_work(plan(w, topo, "adam"), s)
        bf16 = step_work(plan(w, topo, "adam", grad_bytes=2), s)
        assert bf16.grad_nbytes * 2 == fp32.grad_nbytes
        assert bf16.gather_nbytes == fp32.gather_nbytes   # weights are gathered in their own dtype


def test_extra_allreduces_only_when_sharded():
    w = load_workload("bert-large")
    p = plan(w, load_topology("tpu-v3-32"), "lamb+clip")
    sh = step_work(p, "sharded")
    assert [c.op for c in sh.extra_allreduces] == ["all-reduce"] * 3
    sizes = {c.what: c.nbytes for c in sh.extra_allreduces}
    n_sharded = len(p.sharded_tensors)
    assert sizes == {"global_norm(g)": 4, "norm(w)": 4 * n_sharded, "norm(u)": 4 * n_sharded}
    assert step_work(p, "replicated").extra_allreduces == ()


def test_update_flops_include_vector_and_scalar_work():
    # Adafactor's row/column statistics add per-row and per-column flops beyond the per-element ones
    w = make_workload([(64, 32)])
    p = plan(w, make((4,)), "adafactor", replicate_below_elements=0)
    a = analyse("adafactor")
    u = update_work(p, "replicated")
    assert u.flops == a.flops((64, 32)) > a.flops_per_element * 64 * 32
    assert math.isclose(update_work(p, "sharded").flops, a.case_for((64, 32)).flops(p.tensors[0].shard_shape))
