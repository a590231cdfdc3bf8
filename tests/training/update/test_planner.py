"""Sharding planner: formats, padding, buckets, ownership after the 2-D reduce-scatter, extra reductions."""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import ConfigError, UnknownNameError
from wus_sim.optimizers import analyse, known_optimizers
from wus_sim.training.update.planner import DEFAULT_BUCKET_BYTES, plan
from wus_sim.training.update.sharding_plan import shard_index, shard_ranges
from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.workload import Tensor, Workload
from wus_sim.model.workload_files import load_workload
from workload_sample import sample_workloads

from make_topology import make


def make_workload(shapes):
    tensors = tuple(Tensor(f"t{i}", tuple(s), i) for i, s in enumerate(shapes))
    params = sum(t.size for t in tensors)
    return Workload(name="synthetic", description="", tensors=tensors, params=params,
                    fwd_flops_per_example=1.0, example_unit="example", activation_bytes_per_example=0.0,
                    num_layers=len(tensors), layer_names=tuple(t.name for t in tensors),
                    layer_fwd_flops=(1.0 / len(tensors),) * len(tensors))


shape_st = st.lists(st.integers(1, 96), min_size=1, max_size=4).map(tuple)
dims_st = st.lists(st.integers(1, 6), min_size=1, max_size=3)


def check_plan_invariants(p):
    n = p.replicas
    assert p.params == p.workload.params
    assert p.padded_params == p.params + sum(t.padding for t in p.tensors)
    for t in p.tensors:
        if t.replicated:
            assert t.padded_size == t.size
            assert (t.size < p.replicate_below_elements) == (t.replicated_because == "small")
            assert t.shard_shape == t.shape and t.reductions == ()
            continue
        assert t.size >= p.replicate_below_elements
        assert t.padded_size % n == 0 and t.padded_size >= t.size
        assert t.shard_elements * n == t.padded_size
        if t.format == "split":
            assert t.padding == 0 and t.shape[t.split_dim] % n == 0
        elif t.format == "flat":
            assert t.padding == -t.size % n < n
            assert not any(d % n == 0 for d in t.shape), "a dividing dimension must be preferred"
    # every tensor in exactly one bucket of the right kind
    seen = sorted(i for b in p.buckets for i in b.tensors)
    assert seen == list(range(len(p.tensors)))
    for b in p.buckets:
        members = [p.tensors[i] for i in b.tensors]
        assert all(t.bucket == b.index for t in members)
        assert all(t.replicated == (b.kind == "replicated") for t in members)
        assert b.first_layer == min(t.layer for t in members)
        assert b.elements == sum(t.size for t in members)
        assert b.padded_elements == sum(t.padded_size for t in members)
        # greedy closure: a fused bucket was below the threshold before its last tensor arrived
        if len(members) > 1:
            assert (b.padded_elements - members[-1].padded_size) * p.grad_bytes < p.bucket_bytes
    firsts = [b.first_layer for b in p.buckets]
    assert firsts == sorted(firsts, reverse=True), "buckets are numbered in backward order"


@pytest.mark.parametrize("name", sample_workloads())
@pytest.mark.parametrize("topo", ["tpu-v3-32", "tpu-v3-2048", "tpu-v4-128"])
def test_every_shipped_workload_plans(name, topo):
    w = load_workload(name)
    p = plan(w, load_topology(topo), w.default_optimizer)
    check_plan_invariants(p)
    json.dumps(p.to_dict(replica=0))


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(shape_st, min_size=1, max_size=12), dims=dims_st, cores=st.integers(1, 2),
       opt=st.sampled_from(["sgd", "adam", "lamb", "lars", "adafactor", "adam+clip"]),
       bucket=st.integers(1, 4096), below=st.integers(0, 64), ratio=st.sampled_from([0.0, 0.5, 1.0, 100.0]))
def test_plan_invariants_hold_for_any_model_and_n(shapes, dims, cores, opt, bucket, below, ratio):
    p = plan(make_workload(shapes), make(dims, cores=cores), opt, bucket_bytes=bucket, replicate_below_elements=below,
             max_padding_ratio=ratio)
    check_plan_invariants(p)
    for t in p.sharded_tensors:
        assert t.padding <= ratio * t.size


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(shape_st, min_size=1, max_size=10), dims=dims_st,
       opt=st.sampled_from(["sgd", "adam", "lamb", "adafactor"]))
def test_padding_is_zero_when_n_divides_every_tensor(shapes, dims, opt):
    n = math.prod(dims)
    # make every tensor divisible by N by scaling its first dimension
    shapes = [(s[0] * n,) + s[1:] for s in shapes]
    p = plan(make_workload(shapes), make(dims), opt, replicate_below_elements=0)
    assert p.padding_elements == 0 and p.padded_params == p.params
    assert all(t.format == "split" for t in p.tensors)


def test_split_is_preferred_and_flat_pads_otherwise():
    p = plan(make_workload([(3, 64), (7, 5), (64,)]), make((4, 4)), "adam", replicate_below_elements=0)
    a, b, c = p.tensors
    assert (a.format, a.split_dim, a.padding) == ("split", 1, 0)
    assert (b.format, b.padded_size, b.padding) == ("flat", 48, 13)
    assert (c.format, c.split_dim) == ("split", 0)


def test_adafactor_never_flattens_a_matrix():
    # flat cuts break the row/column statistics (analyser's shard constraint)
    shapes = [(7, 5), (33, 3, 10), (48, 17), (9,)]
    p = plan(make_workload(shapes), make((4, 4)), "adafactor", replicate_below_elements=0,
             max_padding_ratio=100)
    for t in p.tensors:
        if len(t.shape) >= 2:
            assert t.format != "flat" and t.layout in ("rows", "cols")
        else:
            assert t.layout == "flat"
    # [48, 17]: 48 rows divide by 16 -> split along rows, the column statistic is all-reduced
    t = p.tensor("t2")
    assert (t.format, t.split_dim, t.layout) == ("split", 0, "rows")
    assert ("col_mean(g2)", 17) in t.reductions
    # its shard keeps 3 rows of the row statistic and the whole column statistic
    assert t.shard_slot_elements == 48 // 16 + 17


def test_replicate_threshold():
    w = load_workload("resnet50")
    topo = load_topology("tpu-v3-2048")
    default = plan(w, topo, "lars")
    assert default.replicate_below_elements == 2048
    assert {t.name for t in default.replicated_tensors} == {t.name for t in w.tensors if t.size < 2048}
    none = plan(w, topo, "lars", replicate_below_elements=0, max_padding_ratio=10**6)
    assert none.replicated_tensors == ()
    # without that, tensors far smaller than N stay whole anyway: a flat cut would be mostly padding
    capped = plan(w, topo, "lars", replicate_below_elements=0)
    assert {t.replicated_because for t in capped.replicated_tensors} == {"padding"}
    assert all(t.size < 2048 for t in capped.replicated_tensors)
    everything = plan(w, topo, "lars", replicate_below_elements=10**9)
    assert len(everything.replicated_tensors) == len(w.tensors)
    assert all(b.kind == "replicated" for b in everything.buckets)


def test_excessive_padding_keeps_a_tensor_replicated():
    # Adafactor may not flatten a matrix: 24 x 24 over 64 replicas pads 24 rows (or columns) to 64
    w = make_workload([(24, 24), (128, 24)])
    topo = make((8, 8))
    p = plan(w, topo, "adafactor", replicate_below_elements=0)
    assert p.tensors[0].replicated and p.tensors[0].replicated_because == "padding"
    assert not p.tensors[1].replicated and p.tensors[1].format == "split"
    assert any("pad" in note for note in p.notes)
    loose = plan(w, topo, "adafactor", replicate_below_elements=0, max_padding_ratio=10)
    assert loose.tensors[0].format in ("padded-rows", "padded-cols")
    # adam may flatten: padding stays below N elements, so it is sharded
    assert not plan(w, topo, "adam", replicate_below_elements=0).tensors[0].replicated


def test_bucket_threshold_extremes():
    w = load_workload("transformer-big")
    topo = load_topology("tpu-v3-32")
    one_each = plan(w, topo, "adam", bucket_bytes=1)
    assert len(one_each.buckets) == len(w.tensors)
    fused = plan(w, topo, "adam", bucket_bytes=10**12)
    assert len(fused.buckets) == 1  # N=32: every tensor is sharded
    default = plan(w, topo, "adam")
    assert default.bucket_bytes == DEFAULT_BUCKET_BYTES and 1 < len(default.buckets) < len(w.tensors)


@pytest.mark.parametrize("opt", sorted(set(known_optimizers()) | {"adam+clip", "lamb+clip"}))
def test_extra_reductions_come_from_the_analyser(opt):
    w = load_workload("bert-large")
    p = plan(w, load_topology("tpu-v3-32"), opt)
    a = analyse(opt)
    sharded = p.sharded_tensors
    by_what = {r.what: r for r in p.extra_reductions}
    expected = {}
    for t in sharded:
        for red, values in a.reductions_for(t.shape, t.layout):
            e = expected.setdefault(red.what, [0, 0, red.scope])
            e[0] = values if red.scope == "global" else e[0] + values
            e[1] += red.scope == "per_tensor"
    assert set(by_what) == set(expected)
    for what, (values, tensors, scope) in expected.items():
        assert (by_what[what].values, by_what[what].tensors, by_what[what].scope) == (values, tensors, scope)


def test_lamb_lars_one_value_per_tensor_sgd_none_clip_one():
    w = load_workload("resnet50")
    topo = load_topology("tpu-v3-32")
    lamb = plan(w, topo, "lamb", replicate_below_elements=0)
    assert [(r.what, r.values) for r in lamb.extra_reductions] == [("norm(w)", 161), ("norm(u)", 161)]
    # LARS skips rank <= 1 tensors (BN, bias): one value per kernel
    lars = plan(w, topo, "lars", replicate_below_elements=0)
    kernels = sum(1 for t in w.tensors if len(t.shape) >= 2)
    assert {r.values for r in lars.extra_reductions} == {kernels}
    assert plan(w, topo, "sgd").extra_reductions == ()
    clip = plan(w, topo, "sgd+clip")
    assert [(r.scope, r.values) for r in clip.extra_reductions] == [("global", 1)]
    # replicated tensors hold whole tensors: they add nothing
    all_repl = plan(w, topo, "lamb", replicate_below_elements=10**9)
    assert all_repl.extra_reductions == ()


@settings(max_examples=40, deadline=None)
@given(dims=dims_st, cores=st.integers(1, 2))
def test_shard_index_is_a_bijection_and_ranges_nest(dims, cores):
    topo = make(dims, cores=cores)
    n = topo.num_replicas
    length = 3 * n
    owned = []
    for r in range(n):
        j = shard_index(topo, r)
        phases = shard_ranges(topo, r, length)
        lo, hi = 0, length
        for ph in phases:
            assert lo <= ph["start"] < ph["stop"] <= hi
            assert (ph["stop"] - ph["start"]) * ph["group_size"] == hi - lo
            lo, hi = ph["start"], ph["stop"]
        assert (lo, hi) == (j * 3, j * 3 + 3)
        owned.append(j)
    assert sorted(owned) == list(range(n))


def test_ownership_phases_follow_cores_then_x_then_y():
    topo = load_topology("tpu-v3-32")        # 4x4 chips, 2 cores each
    # replica 11 = chip 5 = (x 1, y 1), core 1
    phases = shard_ranges(topo, 11, 32 * 8)
    assert [p["phase"] for p in phases] == ["cores", "x", "y"]
    assert [(p["start"], p["stop"]) for p in phases] == [(128, 256), (160, 192), (168, 176)]
    assert shard_index(topo, 11) == (1 * 4 + 1) * 4 + 1


def test_shard_of_a_split_tensor_is_a_row_range():
    p = plan(load_workload("transformer-big"), load_topology("tpu-v3-32"), "adam")
    emb = p.tensor("embedding_shared_weights")    # [33712, 1024]: 1024 divides by 32
    assert emb.format == "split" and emb.split_dim == 1
    for r in (0, 7, 31):
        own = p.shard_of(r, emb)
        lo, hi = own["index"]
        assert hi - lo == 1024 // 32 and own["dim"] == 1
        assert own["elements"][1] - own["elements"][0] == emb.size // 32


def test_spatial_partitioning_uses_fewer_replicas():
    w = load_workload("ssd-resnet34")
    topo = load_topology("tpu-v3-2048")
    p = plan(w, topo, "momentum", replicas=512)
    assert (p.replicas, p.spatial_ways) == (512, 4)
    assert [ph["phase"] for ph in shard_ranges(topo, 3, 1024, 512)] == ["replica"]
    check_plan_invariants(p)


def test_bad_inputs():
    w = load_workload("ncf")
    topo = load_topology("tpu-v3-32")
    with pytest.raises(ConfigError):
        plan(w, topo, "adam", replicas=7)
    with pytest.raises(ConfigError):
        plan(w, topo, "adam", grad_bytes=3)
    with pytest.raises(ConfigError):
        plan(w, topo, "adam", bucket_bytes=0)
    with pytest.raises(UnknownNameError) as err:
        plan(w, topo, "adamm")
    assert "adam" in str(err.value)
    with pytest.raises(ConfigError):
        shard_index(topo, 32)


def test_accepts_an_analysis_and_rederives_for_bf16_gradients():
    w = load_workload("gnmt")
    topo = load_topology("tpu-v3-32")
    p = plan(w, topo, analyse("adam"), grad_bytes=2)
    assert p.analysis.grad_bytes == 2 and p.grad_bytes == 2
    same = analyse("adam")
    assert plan(w, topo, same).analysis is same
