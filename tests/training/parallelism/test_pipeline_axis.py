"""The pipeline mesh axis in the step (wus_sim.training.parallelism.pipeline_parallel): the mesh without it
is the step before it, to the last bit; each schedule's bubble derived from the textbook by simulating
the schedule here (GPipe: Huang et al. 2019, arXiv 1811.06965, sec. 2.3; 1F1B: Narayanan et al. 2021,
arXiv 2104.04473, sec. 2.2.1, PipeDream-Flush; circular: MaxText's loop, src/maxtext/layers/pipeline.py,
and Narayanan et al. 2021 sec. 2.2.2's (p-1)/(v m)); the step's bubble, permutes over the ICI and the DCN,
memory and refusals by hand; the search's pipeline sizes."""

import json
import math
import os

import pytest

from pin_mesh_records import CASES, records
from wus_sim.hardware.mesh import Mesh, layout
from wus_sim.hardware.multislice import load_multislice
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.layer_stack import layer_stack
from wus_sim.model.workload_files import load_workload
from wus_sim.training.parallelism.mesh_search import Search
from wus_sim.training.parallelism.mesh_step import simulate_mesh
from wus_sim.training.parallelism.pipeline_parallel import (PipelineShape, PipelineStep, bubble_fraction, ici_hop_s,
                                                            in_flight_microbatches)
from wus_sim.training.step import StepOptions, step_layer_times
from wus_sim.training.timeline.timeline import BREAKDOWN_PARTS

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")


# ------------------------------------------------------------------ pipeline=1 is today's step
def test_pipeline_one_is_the_step_before_the_axis_to_the_last_bit():
    """The seven pinned meshes (tests/data/mesh_before_expert.json, pinned at 4856b9b, before the expert and
    pipeline axes existed: Llama, BERT, Mixtral; today's fsdp path, tensor, hybrid, a DCN fsdp axis,
    TensorCores) with ``pipeline=1``: every number of every strategy equal to the last bit."""
    with open(os.path.join(DATA, "mesh_before_expert.json")) as f:
        before = json.load(f)
    assert records(",pipeline=1") == before


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[4]], ids=["llama-tensor", "llama2-dcn-fsdp", "bert"])
def test_pipeline_one_adds_nothing(case):
    """``pipeline=1`` in the slice and across slices: the pipeline parts are 0 and its axis moves nothing."""
    from wus_sim.hardware.mesh import Placement

    w, t, megacore, slices, mesh, dcn, strategies, batch, opts = case
    run = simulate_mesh(w, t, None, strategies, per_replica_batch=batch, options=StepOptions(**opts),
                        placement=Placement(megacore=megacore, slices=slices, mesh=mesh + ",pipeline=1",
                                            dcn_mesh=None if dcn is None else dcn + ",pipeline=1"))
    for r in run.results.values():
        assert r.breakdown["pipeline_bubble_s"] == 0.0 and r.breakdown["pipeline_comm_s"] == 0.0
    assert all(v == 0 for v in run.mesh.comm["pipeline"].values())
    assert run.mesh.to_dict().get("pipeline") is None


# ------------------------------------------------------------------ the schedules, simulated here
def _gpipe(P, M, f, b):
    """GPipe (Huang et al. 2019): every microbatch's forward through the stages, then every backward
    (the last microbatch's first); each op starts when its stage is free and its input has arrived."""
    F = [[0.0] * M for _ in range(P)]
    for s in range(P):
        for m in range(M):
            F[s][m] = max(F[s][m - 1] if m else 0.0, F[s - 1][m] if s else 0.0) + f
    B = [[0.0] * M for _ in range(P)]
    for s in reversed(range(P)):
        free = F[s][M - 1]
        for m in reversed(range(M)):
            B[s][m] = max(free, B[s + 1][m] if s < P - 1 else F[P - 1][m]) + b
            free = B[s][m]
    return B[0][0], M  # the makespan, the most microbatches a stage holds (all its forwards before a backward)


def _one_f_one_b(P, M, f, b):
    """1F1B, PipeDream-Flush (Narayanan et al. 2021 sec. 2.2.1): stage s runs min(P-s-1, M) warm-up
    forwards, then one forward one backward, then the remaining backwards; an op starts when its stage
    is free and its input (the previous stage's forward, the next stage's backward) is done."""
    order = []
    for s in range(P):
        warm = min(P - s - 1, M)
        ops = [("F", m) for m in range(warm)]
        for i in range(M - warm):
            ops += [("F", warm + i), ("B", i)]
        ops += [("B", m) for m in range(M - warm, M)]
        order.append(ops)
    done, free, nxt = {}, [0.0] * P, [0] * P
    held = [0] * P
    most = 0
    while any(nxt[s] < len(order[s]) for s in range(P)):
        for s in range(P):
            if nxt[s] == len(order[s]):
                continue
            kind, m = order[s][nxt[s]]
            dep = ("F", s - 1, m) if kind == "F" and s else ("B", s + 1, m) if kind == "B" and s < P - 1 else \
                ("F", s, m) if kind == "B" else None
            if dep is not None and dep not in done:
                continue
            start = max(free[s], done[dep] if dep else 0.0)
            done[(kind, s, m)] = free[s] = start + (f if kind == "F" else b)
            held[s] += 1 if kind == "F" else -1
            most = max(most, held[s])
            nxt[s] += 1
    return max(free), most


def _circular(P, M, R, f, b):
    """MaxText's circular loop: a stage holds R chunks of its blocks (each f/R forward, b/R backward); a
    microbatch passes round the stages R times, chunk (s, r, m) after (s-1, r, m), or after (P-1, r-1, m)
    on stage 0; each stage takes its chunks in the order r M + m; backward is the same graph reversed,
    after the forward (the scan's autodiff)."""
    def run(t, dep):
        done, free = {}, [0.0] * P
        for k in range(M * R):  # M >= P (MaxText: a multiple of the stages): no chunk waits on a later one
            for s in range(P):
                r, m = divmod(k, M)
                d = dep(s, r, m)
                done[(s, r, m)] = free[s] = max(free[s], done[d] if d else 0.0) + t
        return max(free)

    fwd = run(f / R, lambda s, r, m: (s - 1, r, m) if s else ((P - 1, r - 1, m) if r else None))
    # backward: the chunks in reverse, each after its successor's gradient (stage s + 1, or stage 0 of the
    # next repeat for the last stage), written with reversed stage and repeat indices
    bwd = run(b / R, lambda s, r, m: (s - 1, r, m) if s else ((P - 1, r - 1, m) if r else None))
    return fwd + bwd, M


@pytest.mark.parametrize("P,M", [(2, 2), (4, 4), (4, 8), (8, 16), (3, 7)])
def test_gpipe_and_1f1b_bubble_is_p_minus_1_over_m(P, M):
    """Both schedules finish in (M + P - 1)(f + b): the bubble is (P-1)(f+b), (P-1)/M of the ideal M(f+b);
    GPipe holds all M microbatches, 1F1B at most P (its first stage's warm-up + 1)."""
    f, b = 1.0, 2.0
    ideal = M * (f + b)
    for schedule, sim in (("gpipe", _gpipe), ("1f1b", _one_f_one_b)):
        t, held = sim(P, M, f, b)
        shape = PipelineShape(P, M, 1, 16 // P, schedule, 16)
        assert (t - ideal) / ideal == pytest.approx((P - 1) / M, rel=1e-12)
        assert bubble_fraction(shape) == pytest.approx((t - ideal) / ideal, rel=1e-12)
        assert in_flight_microbatches(shape) == held == (M if schedule == "gpipe" else min(P, M))
    assert bubble_fraction(PipelineShape(4, 8, 1, 4, "gpipe", 16)) == 3 / 8  # by hand


@pytest.mark.parametrize("P,M,R", [(2, 2, 48), (4, 4, 3), (4, 8, 2), (2, 4, 1)])
def test_the_circular_bubble_is_p_minus_1_over_m_r(P, M, R):
    """MaxText's loop: M R + P - 1 iterations a direction, M R of them busy: bubble (P-1)/(M R) of the
    busy time (base.yml's (P-1)/(R M + P-1) is the same bubble over the whole loop; Narayanan et al.'s
    interleaved (p-1)/(v m) with v = R); R = 1 is GPipe's."""
    f, b = 1.0, 2.0
    t, held = _circular(P, M, R, f, b)
    ideal = M * (f + b)
    shape = PipelineShape(P, M, R, 16, "circular", P * R * 16)
    assert (t - ideal) / ideal == pytest.approx((P - 1) / (M * R), rel=1e-12)
    assert bubble_fraction(shape) == pytest.approx((t - ideal) / ideal, rel=1e-12)
    assert (t - ideal) / t == pytest.approx((P - 1) / (R * M + P - 1), rel=1e-12)  # base.yml's form
    assert in_flight_microbatches(shape) == held
    assert bubble_fraction(PipelineShape(2, 2, 48, 1, "circular", 96)) == 1 / 96  # GPT-3 on 2 stages, by hand


def test_the_bubble_and_permutes_go_on_the_blocks():
    """By hand: blocks on layers 1 and 2, P = 2, M = 2, R = 1: the bubble is half of each block's time;
    3 permutes a direction (M + P - 1) of 0.5 s spread over the 2 block layers; the outside all-reduce on
    layer 0's backward."""
    shape = PipelineShape(2, 2, 1, 1, "gpipe", 2)
    pp = PipelineStep(shape, (1, 2), hop_s=0.5, nbytes=1.0, outside_s=0.25)
    fwd, bwd, parts = pp.add([1.0, 2.0, 2.0, 1.0], [2.0, 4.0, 4.0, 2.0])
    assert fwd == [1.0, 2.0 + 1.0 + 0.75, 2.0 + 1.0 + 0.75, 1.0]
    assert bwd == [2.25, 4.0 + 2.0 + 0.75, 4.0 + 2.0 + 0.75, 2.0]
    assert parts == (2.0, 4.0, 1.5, 1.75)


# ------------------------------------------------------------------ the step
def _default_step(**opts):
    """MaxText's default model (16 blocks, hidden 2048, 2048 tokens) on a 2x4 torus (1 us a hop, 100 GB/s a
    link): fsdp = x (2), pipeline = y (4 stages, a wrapped ring), 8 examples a data-parallel group."""
    return simulate_mesh("default", load_topology("torus:2x4"), None, ("fully-sharded",), mesh="fsdp=2,pipeline=4",
                         per_replica_batch=8, options=StepOptions(**opts))


def test_the_steps_bubble_is_the_schedules_share_of_a_stages_blocks():
    """The bubble = (P-1)/(M R) x the stage's block time: each block's forward and backward (the whole
    model's at the group's batch, step_layer_times) less its op fixed costs, / P, plus them."""
    opts = StepOptions(pipeline_schedule="gpipe", pipeline_microbatches=4)
    run = _default_step(pipeline_schedule="gpipe", pipeline_microbatches=4)
    w = load_workload("default")
    blocks = sorted(i for block in layer_stack(w).blocks for i in block)
    layers = step_layer_times(w, load_topology("torus:2x4"), 8, opts)
    c, ratio = opts.compute.op_overhead_s, opts.compute.backward_flops_ratio
    busy = sum((layers.forward_s[i] - c) / 4 + c + (layers.backward_s[i] - ratio * c) / 4 + ratio * c for i in blocks)
    r = run.results["fully-sharded"]
    assert r.breakdown["pipeline_bubble_s"] == pytest.approx(3 / 4 * busy, rel=1e-12)
    # the parts still add up to the step
    parts = sum(r.breakdown[p] for p in BREAKDOWN_PARTS) + sum(
        r.breakdown[p] for p in ("tensor_comm_s", "expert_comm_s", "pipeline_bubble_s", "pipeline_comm_s"))
    assert parts == pytest.approx(r.step_time_s, rel=1e-9)


def test_the_bubble_follows_the_schedule_and_the_microbatches():
    """With the layer times fixed by the group's batch, the bubble scales as (P-1)/(M R) exactly: M 8 halves
    GPipe's of M 4; 1F1B's equals GPipe's; MaxText's circular default (1 block a stage: R = 16/4 = 4) is
    a quarter of it."""
    bubble = {k: _default_step(**o).results["fully-sharded"].breakdown["pipeline_bubble_s"] for k, o in {
        "gpipe4": dict(pipeline_schedule="gpipe", pipeline_microbatches=4),
        "gpipe8": dict(pipeline_schedule="gpipe", pipeline_microbatches=8),
        "1f1b4": dict(pipeline_schedule="1f1b", pipeline_microbatches=4),
        "circular4": dict()}.items()}
    assert bubble["gpipe8"] == pytest.approx(bubble["gpipe4"] / 2, rel=1e-12)
    assert bubble["1f1b4"] == bubble["gpipe4"]
    assert bubble["circular4"] == pytest.approx(bubble["gpipe4"] / 4, rel=1e-12)


def test_one_permute_over_the_ici_is_one_hop():
    """torus:2x4, fsdp=2,pipeline=4: the stages are y's wrapped ring, each send one hop: 1 us + S / 100 GB/s,
    S = 8/4 examples x 2048 tokens x 2048 x 2 B (bf16). v5p-256 (4x4x8), pipeline=4,fsdp=8,tensor=4:
    the stages every 2nd chip of z (stride 2, a ring closing round z): two hops."""
    s = 2 * 2048 * 2048 * 2
    topo = load_topology("torus:2x4")
    assert ici_hop_s(topo, layout(topo, Mesh(fsdp=2, pipeline=4)), s) == pytest.approx(1e-6 + s / 100e9, rel=1e-12)
    v5p = load_topology("tpu-v5p-256", megacore=True)
    lay = layout(v5p, Mesh(pipeline=4, fsdp=8, tensor=4))
    assert lay.parts["pipeline"] == ((2, 2, 4),)
    assert ici_hop_s(v5p, lay, s) == pytest.approx(2 * v5p.hop_latency_s + s / v5p.axis_link_Bps[2], rel=1e-12)
    run = _default_step(pipeline_schedule="gpipe", pipeline_microbatches=4)
    c = run.mesh.comm["pipeline"]
    assert c["collectives"] == 2 * (4 + 4 - 1) + 1  # permutes both ways, and the outside all-reduce
    assert c["nbytes"] == 2 * (4 + 4 - 1) * s


def test_two_stages_across_two_slices_over_the_dcn_by_hand():
    """v5p-8 (4 chips, megacore) x 2 slices, fsdp=4 in a slice, pipeline=2 across, GPipe, M = 2, 8 examples
    a group: a permute sends S = 4 x 2048 x 2048 x 2 B to the peer chip in the other slice, 10 us +
    S / 6.25 GB/s (the DCN's per chip), 2 (M + P - 1) = 6 of them; the embedding and head gradients
    (2 x 32000 x 2048 + the final norm's 2048, fp32) over fsdp 4: n = 131,074,048 B a device, all-reduced
    over the 2 slices as two DCN exchanges of half of it, 2 (10 us + n / 2 / 6.25 GB/s)."""
    topo, ms = load_multislice("tpu-v5p-8", slices=2, megacore=True)
    run = simulate_mesh("default", ms, None, ("fully-sharded",), mesh="fsdp=4", dcn_mesh="pipeline=2",
                        per_replica_batch=8, options=StepOptions(pipeline_schedule="gpipe", pipeline_microbatches=2))
    s = 4 * 2048 * 2048 * 2
    hop = 10e-6 + s / 6.25e9
    n = (2 * 32000 * 2048 + 2048) * 4 / 4
    outside = 2 * (10e-6 + n / 2 / 6.25e9)
    r = run.results["fully-sharded"]
    assert r.breakdown["pipeline_comm_s"] == pytest.approx(6 * hop + outside, rel=1e-9)
    assert run.mesh.comm["pipeline"]["dcn_collectives"] >= 6
    assert run.replicas == 4 and run.global_batch == 32  # the 2 stages share a group's batch


def test_memory_holds_the_stage_and_its_microbatches_in_flight():
    """Activations: 1F1B holds P = 4 of M = 8 microbatches, GPipe all 8: half. Weights: a device holds 1/4 of
    the blocks' and the whole embedding, norm and head, fp32, sharded over fsdp 2 (the blocks' widths all
    divide by 4: exact)."""
    one_f = _default_step(pipeline_schedule="1f1b", pipeline_microbatches=8).results["fully-sharded"].memory
    gpipe = _default_step(pipeline_schedule="gpipe", pipeline_microbatches=8).results["fully-sharded"].memory
    assert one_f.activations == pytest.approx(gpipe.activations / 2, rel=1e-12)
    w = load_workload("default")
    piped = {i for block in layer_stack(w).blocks for i in block}
    blocks = sum(t.size for t in w.tensors if t.layer in piped)
    outside = sum(t.size for t in w.tensors if t.layer not in piped)
    assert gpipe.details["weight_shards"] == (blocks / 4 + outside) * 4 / 2  # its persistent shard (+ gathered)


@pytest.mark.parametrize("workload,mesh,dcn,opts,key,says", [
    ("default", "fsdp=8", "pipeline=3", {}, "dcn_mesh", "must divide the blocks"),
    ("resnet50", "fsdp=2,pipeline=4", None, {}, "mesh", "not a stack of transformer blocks"),
    ("default", "fsdp=2,pipeline=4", None, {"pipeline_microbatches": 6}, "pipeline_microbatches", "multiple of the 4"),
    ("default", "fsdp=2,pipeline=4", None, {"pipeline_microbatches": 16}, "pipeline_microbatches", "must divide the batch"),
    ("default", "fsdp=2,pipeline=4", None, {"pipeline_layers_per_stage": 3}, "pipeline_layers_per_stage",
     "must divide them"),
])
def test_a_pipeline_that_cannot_be_is_one_line(workload, mesh, dcn, opts, key, says):
    topo = load_topology("torus:2x4") if dcn is None else load_multislice("torus:2x4", slices=3)[1]
    with pytest.raises(ConfigError) as e:
        simulate_mesh(workload, topo, None, ("fully-sharded",), mesh=mesh, dcn_mesh=dcn, per_replica_batch=8,
                      options=StepOptions(**opts))
    assert e.value.key_path == key and says in str(e.value) and "\n" not in str(e.value)


def test_the_search_tries_stages_across_slices_only():
    """Two slices: the DCN meshes are data=2, fsdp=2 and pipeline=2 (every divisor of the slices dividing the
    16 blocks); one slice, or a model without blocks: no pipeline; in a slice only a fixed size."""
    two = load_multislice("torus:2x4", slices=2)[1]
    search = Search("default", two, remats=("none",))
    assert {str(d) for d, _ in search.meshes} == {"data=2", "fsdp=2", "pipeline=2"}
    assert not any(m.pipeline > 1 for _, m in search.meshes)
    one = Search("default", load_topology("torus:2x4"), remats=("none",))
    assert not any(m.pipeline > 1 for _, m in one.meshes)
    cnn = Search("resnet50", two, remats=("none",))
    assert {str(d) for d, _ in cnn.meshes} == {"data=2", "fsdp=2"}
    fixed = Search("default", load_topology("torus:2x4"), remats=("none",), mesh=Mesh(pipeline=4))
    assert {m.pipeline for _, m in fixed.meshes} == {4} and len(fixed.meshes) == 3  # data, fsdp or tensor 2 beside
