"""The mesh step: meshes today's step expresses reproduce it exactly; a tensor axis costs what
Megatron-LM derives (Shoeybi et al. 2019, arXiv 1909.08053, sec. 3), derived here by hand; every
axis combination runs on 2-D and 3-D tori and in two slices with parts that add up."""

import math

import pytest

from wus_sim.hardware.mesh import factorisations
from wus_sim.hardware.multislice import load_multislice
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.workload_files import load_workload
from wus_sim.training.parallelism.mesh_step import simulate_mesh
from wus_sim.training.step import StepOptions, simulate_strategies
from wus_sim.training.parallelism.tensor_parallel import split_workload, tensor_collective_layers
from wus_sim.training.timeline.timeline import BREAKDOWN_PARTS

STRATEGIES = ("replicated", "sharded", "fully-sharded")
OPTIONS = StepOptions(remat="layer")


def same(a, b):
    assert a.status == b.status
    if a.status == "ok":
        assert a.step_time_s == b.step_time_s
        for part in BREAKDOWN_PARTS:
            assert a.breakdown[part] == b.breakdown[part], part
    assert a.memory.peak == b.memory.peak


@pytest.fixture(scope="module")
def v5p():
    return load_topology("tpu-v5p-128", megacore=True)  # 64 chips, 4x4x4


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_mesh_data_n_is_today(v5p, strategy):
    today = simulate_strategies("llama3-8b", v5p, None, (strategy,), global_batch=64, options=OPTIONS)
    mesh = simulate_mesh("llama3-8b", v5p, None, (strategy,), mesh="data=64", global_batch=64, options=OPTIONS)
    same(mesh.results[strategy], today.results[strategy])
    assert mesh.mesh.path == "today"


def test_mesh_fsdp_n_is_todays_fully_sharded(v5p):
    today = simulate_strategies("llama3-8b", v5p, None, ("fully-sharded",), global_batch=64, options=OPTIONS)
    for strategies in (("fully-sharded",), ("replicated", "sharded")):  # no data axis: fsdp whatever is asked
        mesh = simulate_mesh("llama3-8b", v5p, None, strategies, mesh="fsdp=64", global_batch=64, options=OPTIONS)
        assert list(mesh.results) == ["fully-sharded"]
        same(mesh.results["fully-sharded"], today.results["fully-sharded"])


def test_data_times_fsdp_fully_sharded_is_fsdp_over_both(v5p):
    # built by the mesh step (data and fsdp both > 1) over the data x fsdp rings: the whole slice
    both = simulate_mesh("llama3-8b", v5p, None, ("fully-sharded",), mesh="data=4,fsdp=16", global_batch=64,
                         options=OPTIONS)
    assert both.mesh.path == "mesh"
    today = simulate_strategies("llama3-8b", v5p, None, ("fully-sharded",), global_batch=64, options=OPTIONS)
    same(both.results["fully-sharded"], today.results["fully-sharded"])


def test_megatron_split_flops_and_weights_by_hand():
    # Llama-3-8B (Meta-Llama-3-8B config.json): h 4096, 32 heads of 128, 8 KV heads, MLP 14336,
    # vocabulary 128256, 8192-token sequences. Per token, forward, 2 x MACs:
    h, kv, ff, s, vocab, T = 4096, 1024, 14336, 8192, 128256, 4
    attention = 2 * (h * h + 2 * h * kv + h * h) + 4 * s * h  # q, k, v, o + scores and context
    mlp = 2 * 3 * h * ff  # gate, up, down
    w = load_workload("llama3-8b")
    split = split_workload(w, T)
    # per example (a sequence of s tokens), per device: / T
    assert split.layer_fwd_flops[1] == pytest.approx(s * attention / T, rel=1e-12)
    assert split.layer_fwd_flops[2] == pytest.approx(s * mlp / T, rel=1e-12)
    assert split.attention[0].heads == 32 // T
    # every matrix / T; the 65 norm vectors of h stay whole on every device
    matrices = 32 * (2 * h * h + 2 * h * kv + 3 * h * ff) + 2 * vocab * h
    vectors = (2 * 32 + 1) * h
    assert w.params == matrices + vectors
    assert split.params == matrices // T + vectors
    # per layer collectives: one forward and one backward per attention and MLP; the embedding
    # lookup forward only, the vocabulary-parallel head backward only
    per = tensor_collective_layers(w)
    assert per[0] == (1, 0) and per[-1] == (0, 1)
    assert all(p == (1, 1) for p in per[1:-1]) and len(per) == 2 + 2 * 32


def test_tensor_parallel_comm_by_hand():
    # tensor=4 on tpu-v5p-128's x axis (4 chips, wrapped): every reduce-scatter and all-gather of
    # the layer output b x s x h x 2 B is a bidirectional one-hop ring of 4
    topo = load_topology("tpu-v5p-128", megacore=True)
    run = simulate_mesh("llama3-8b", topo, None, ("fully-sharded",), mesh="fsdp=16,tensor=4", global_batch=32,
                        options=StepOptions(remat="none", collective_matmul=False))
    b = 32 // 16  # batch of one data-parallel group (its 4 tensor devices share it)
    nbytes = b * 8192 * 4096 * 2
    bw, lat, n = topo.axis_link_Bps[0], topo.hop_latency_s, 4
    one = (n - 1) * (lat + nbytes / 2 / n / bw)  # each direction carries half
    per_pass = 2 * one  # reduce-scatter + all-gather = one all-reduce's bytes (Korthikanti et al. 2022)
    collectives = 1 + 2 * 32  # forward: embedding + 64 sub-layers; backward: 64 sub-layers + head
    res = run.results["fully-sharded"]
    assert res.breakdown["tensor_comm_s"] == pytest.approx(2 * collectives * per_pass, rel=1e-9)
    assert run.mesh.comm["tensor"]["nbytes"] == 2 * 2 * collectives * nbytes
    assert sum(res.breakdown[p] for p in BREAKDOWN_PARTS) + res.breakdown["tensor_comm_s"] == pytest.approx(
        res.step_time_s, rel=1e-9)


def check_parts(run):
    for s, r in run.results.items():
        assert r.status in ("ok", "infeasible"), (s, r.error)
        if r.status == "ok":
            total = sum(r.breakdown[p] for p in BREAKDOWN_PARTS) + r.breakdown["tensor_comm_s"]
            assert total == pytest.approx(r.step_time_s, rel=1e-9)
            assert r.breakdown["fsdp_comm_s"] + r.breakdown["data_comm_s"] == pytest.approx(
                r.breakdown["exposed_comm_s"], abs=1e-12)
            assert r.step_time_s > 0 and r.memory.peak > 0


CASES = [("torus:4x4", None, {}), ("torus:2x2x4", None, {}), ("torus:4x4", "data=2", {"slices": 2}),
         ("torus:4x4", "fsdp=2", {"slices": 2})]


@pytest.mark.slow
@pytest.mark.parametrize("spec,dcn,kw", CASES)
def test_every_axis_combination_runs(spec, dcn, kw):
    topology, ms = load_multislice(spec, **kw)
    for mesh in factorisations(topology):
        check_parts(simulate_mesh("bert-large", ms or topology, None, STRATEGIES, mesh=str(mesh), dcn_mesh=dcn,
                                  global_batch=64 * (ms.slices if ms else 1), options=OPTIONS))


@pytest.mark.parametrize("spec,dcn,kw", CASES)
def test_every_axis_combination_runs_reduced(spec, dcn, kw):
    # the reduced form of the slow test: a mesh with all three axes, and one with tensor alone
    topology, ms = load_multislice(spec, **kw)
    for mesh in ("data=2,fsdp=2,tensor=4", "tensor=16"):
        check_parts(simulate_mesh("bert-large", ms or topology, None, STRATEGIES, mesh=mesh, dcn_mesh=dcn,
                                  global_batch=16 * (ms.slices if ms else 1), options=OPTIONS))


def test_one_placement_value_gives_the_same_step():
    from wus_sim import Placement

    by_options = simulate_mesh("llama3-8b", load_topology("tpu-v5p-128", megacore=True), None, ("sharded",),
                               mesh="data=8,fsdp=2,tensor=4", global_batch=64, options=OPTIONS)
    by_placement = simulate_mesh("llama3-8b", "tpu-v5p-128", None, ("sharded",), global_batch=64, options=OPTIONS,
                                 placement=Placement(megacore=True, mesh="data=8,fsdp=2,tensor=4"))
    assert by_placement.results["sharded"].step_time_s == by_options.results["sharded"].step_time_s


@pytest.mark.parametrize("strategies", ["all", "sharded", "replicated"])
def test_a_plain_string_of_strategies_is_refused_not_split_into_letters(v5p, strategies):
    # as simulate_strategies refuses it: 'all' would otherwise be the strategies 'a', 'l', 'l'
    with pytest.raises(ConfigError, match="^strategies: .* must be a non-empty list of strategy names$"):
        simulate_mesh("llama3-8b", v5p, None, strategies, mesh="fsdp=16,tensor=4", global_batch=64, options=OPTIONS)


def test_a_tensor_axis_beyond_the_query_heads_is_refused_before_it_runs(v5p):
    # llama3-8b: 32 query heads (8 KV heads) a layer; 64 devices of a v5p-128 with megacore
    with pytest.raises(ConfigError) as err:
        simulate_mesh("llama3-8b", v5p, None, ("sharded",), mesh="data=1,tensor=64", global_batch=64, options=OPTIONS)
    assert str(err.value) == ("mesh: 'tensor=64' splits attention 64 ways, but llama3-8b has 32 query heads a layer; "
                              "tensor must be at most the query heads")
    # 32 = the heads runs (tensor above the 8 KV heads replicates them, as MaxText does): every part >= 0
    run = simulate_mesh("llama3-8b", v5p, None, ("sharded",), mesh="data=2,tensor=32", global_batch=64,
                        options=OPTIONS)
    check_parts(run)
    assert min(run.results["sharded"].breakdown[p] for p in ("fwd_s", "bwd_s")) > 0


def test_the_search_counts_meshes_beyond_the_heads_and_runs_none_of_them():
    from wus_sim.training.parallelism.mesh_search import search_meshes

    # bert-large: 16 heads; torus:4x8 has 32 chips, so the one mesh tensor=32 is beyond them
    cands = search_meshes("bert-large", "torus:4x8", global_batch=32, remats=("none",), strategies=("replicated",))
    heads = [c for c in cands if c.reason == "heads"]
    assert [(c.mesh, c.strategy, c.status) for c in heads] == [("tensor=32", "fully-sharded", "infeasible")]
    assert "has 16 query heads" in heads[0].error and math.isnan(heads[0].step_time_s)
    assert len(cands) == 21  # 32 = 2^5 over three axes: 6 x 7 / 2 meshes, one strategy and one remat each


def test_without_the_heads_rule_the_step_crashes_rather_than_time_negative(monkeypatch):
    # tensor=1024 on 32 heads made layer times below zero (forward -28 ms): the timeline's
    # assertion now stops such a step before a result holds them
    from wus_sim.training.parallelism import mesh_step

    monkeypatch.setattr(mesh_step, "check_tensor_heads", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="negative duration"):
        simulate_mesh("llama3-8b", load_topology("tpu-v5p-2048", megacore=True), None, ("replicated",),
                      mesh="tensor=1024", options=OPTIONS)
