"""The step's latency-bound all-reduces (batch-norm statistics, optimizer norms).

Expected times are derived by hand from the store-and-forward alpha-beta model: a message
of b bytes over one hop costs alpha + b / bw, and nothing here shares a link.
"""

import numpy as np
import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.training.small_allreduce import batch_norm_allreduce_s, compact_group, small_allreduce
from wus_sim.training.step import StepOptions, simulate_strategies
from wus_sim.model.workload_files import load_workload

from make_topology import make

ALPHA = 1e-6  # make()'s hop latency
BW = 100e9  # make()'s link bandwidth, B/s
KiB = 1024


def options(**kw):
    # the hand derivations are store-and-forward's (the step's default is cut-through, which
    # differs on the ring's two-hop edges only)
    return StepOptions(calibration="none", **{"routing": "store-and-forward", **kw})


def test_compact_group_is_a_block_of_neighbouring_chips():
    # 4 chips of a 4x4 slice: the 2x2 block at the origin, row-major (x fastest)
    assert compact_group(make((4, 4)), 4) == [0, 1, 4, 5]
    # 16 cores on 2-core chips = 8 chips: a 2 x 4 block, each chip's two cores together
    chips = [0, 1, 4, 5, 8, 9, 12, 13]
    assert compact_group(make((4, 4), cores=2), 16) == [2 * c + k for c in chips for k in (0, 1)]
    # a group within one chip is its cores
    assert compact_group(make((4, 4), cores=2), 2) == [0, 1]
    # on a non-square slice (8 chips along x, 4 along y) the block's rows are 8 chips apart:
    # 8 chips = a 2 x 4 block, chips x + 8 y for y < 4, x < 2
    chips = [0, 1, 8, 9, 16, 17, 24, 25]
    assert compact_group(make((8, 4), cores=2), 16) == [2 * c + k for c in chips for k in (0, 1)]


# The 2x2 block [0, 1, 4, 5] of a 4x4 torus. Recursive doubling: step 0 exchanges the whole
# buffer b with the x neighbour, step 1 with the y neighbour, one hop each, every message on
# its own directed link: 2 (alpha + b/bw). Halving-doubling: b/2 with the y neighbour, b/4
# with the x neighbour, then the same back: 4 alpha + 1.5 b/bw. A ring over the list in its
# order goes 0 -> 1 -> 4 -> 5 -> 0, two of its edges two hops long: slower than both.
BLOCK = [0, 1, 4, 5]


def rd_block(b):
    return 2 * (ALPHA + b / BW)


def hd_block(b):
    return 4 * ALPHA + 1.5 * b / BW


@pytest.mark.parametrize("b", [512, 4 * KiB, 16 * KiB])
def test_auto_takes_recursive_doubling_for_a_few_kib(b):
    """Below 4 alpha bw (400 KB here) recursive doubling's two latencies beat halving-doubling's four."""
    algorithm, t = small_allreduce(make((4, 4)), b, options(), BLOCK)
    assert algorithm == "recursive-doubling"
    assert t == pytest.approx(rd_block(b), rel=1e-12)
    assert t < hd_block(b)


def test_auto_takes_halving_doubling_for_a_large_buffer():
    """Above 4 alpha bw halving-doubling's 1.5 b/bw beats recursive doubling's 2 b/bw."""
    b = 64 * 2**20
    algorithm, t = small_allreduce(make((4, 4)), b, options(), BLOCK)
    assert algorithm == "halving-doubling"
    assert t == pytest.approx(hd_block(b), rel=1e-12)
    assert t < rd_block(b)


def test_a_pinned_algorithm_is_used_whatever_it_costs():
    topo, b = make((4, 4)), 1 * KiB
    algorithm, t = small_allreduce(topo, b, options(small_allreduce_algorithm="halving-doubling"), BLOCK)
    assert algorithm == "halving-doubling" and t == pytest.approx(hd_block(b), rel=1e-12)
    algorithm, t = small_allreduce(topo, b, options(small_allreduce_algorithm="ring"), BLOCK)
    # 6 steps of b/4; edges 0->1 and 4->5 one hop, 1->4 and 5->0 two: every member's 6
    # consecutive edges include three two-hop ones (the edge lengths alternate 1, 2)
    assert algorithm == "ring" and t == pytest.approx(9 * (ALPHA + b / 4 / BW), rel=1e-12)


def test_auto_keeps_to_the_ring_on_a_group_that_is_not_a_power_of_two():
    algorithm, _ = small_allreduce(make((3, 3)), 1 * KiB, options(), [0, 1, 2])
    assert algorithm == "ring"


def test_batch_norm_per_layer_is_two_statistics_of_each_channel_all_reduced():
    """Per layer with a batch norm of c channels: 2 fp32 statistics per channel, 8c bytes,
    all-reduced over the group by recursive doubling (the 4-replica block, by hand); 0 elsewhere."""
    w = load_workload("resnet50")
    topo = make((4, 4))
    per_layer = batch_norm_allreduce_s(w, topo, options(bn_group_replicas=4), spatial_ways=1)
    c = w.layer_batch_norm_channels
    assert (c > 0).sum() == 53  # ResNet-50 v1.5: the stem, 16 blocks x 3, 4 projection shortcuts
    want = np.where(c > 0, 2 * (ALPHA + 8 * c / BW), 0.0)
    np.testing.assert_allclose(per_layer, want, rtol=1e-12, atol=0)


def test_batch_norm_group_must_divide_the_slice():
    with pytest.raises(ConfigError, match="must divide"):
        batch_norm_allreduce_s(load_workload("resnet50"), make((3, 3)), options(bn_group_replicas=2), 1)


def test_the_step_waits_for_each_batch_norm_all_reduce_in_forward_and_backward():
    """Cross-replica batch norm adds its per-layer all-reduce once in forward and once in
    backward, as its own breakdown part: forward and backward compute do not change."""
    topo = make((4, 4))
    w = load_workload("resnet50")
    extra = 2 * (ALPHA + 8 * w.layer_batch_norm_channels[w.layer_batch_norm_channels > 0] / BW)

    def breakdown(bn):
        run = simulate_strategies("resnet50", topo, None, ("replicated",), per_replica_batch=8,
                                  options=options(bn_group_replicas=bn))
        return run.results["replicated"].breakdown

    local, grouped = breakdown(1), breakdown(4)
    assert local["batch_norm_s"] == 0
    assert grouped["batch_norm_s"] == pytest.approx(2 * extra.sum(), rel=1e-9)
    assert (grouped["fwd_s"], grouped["bwd_s"]) == (local["fwd_s"], local["bwd_s"])
    assert sum(grouped.values()) - sum(local.values()) == pytest.approx(2 * extra.sum(), rel=1e-9)


def test_auto_norm_all_reduce_is_the_fastest_pinned_choice():
    """The sharded LARS step's norm all-reduces: auto costs what the cheapest pinned
    algorithm costs (here recursive doubling, a few hundred bytes over 16 chips)."""
    topo = make((4, 4))

    def extra(choice):
        run = simulate_strategies("resnet50", topo, None, ("sharded",), per_replica_batch=8,
                                  options=options(small_allreduce_algorithm=choice))
        return run.results["sharded"].breakdown["extra_reduction_s"]

    pinned = {a: extra(a) for a in ("ring", "halving-doubling", "recursive-doubling")}
    assert extra("auto") == min(pinned.values()) == pinned["recursive-doubling"] < pinned["halving-doubling"]


@pytest.mark.parametrize("topo", [make((4, 4)), make((8, 4), (False, True), cores=2), make((8, 8)),
                                  make((3, 5))], ids=["torus4x4", "mixed8x4c2", "torus8x8", "torus3x5"])
@pytest.mark.parametrize("b", [64, 4 * KiB, 256 * KiB, 64 * 2**20])
def test_auto_is_the_fastest_candidate_simulated(topo, b):
    """Brute force: every candidate simulated (the step's 2d, bidirectional; halving- and recursive
    doubling on power-of-two slices), the least time, ties to the first. auto may skip a
    candidate whose closed form (a lower bound) exceeds the best; its pick must not change."""
    from wus_sim.collectives import collective_time

    members = topo.num_chips
    cands = [("2d", True)] + [(a, False) for a in ("halving-doubling", "recursive-doubling")
                              if members & (members - 1) == 0]
    times = [collective_time(topo, "all-reduce", a, b, bidirectional=d) for a, d in cands]
    best = int(np.argmin(times))
    assert small_allreduce(topo, b, options(), bidirectional=True) == (cands[best][0], times[best])


@pytest.mark.parametrize("b", [1 * KiB, 256 * KiB, 1 * 2**20])
def test_auto_on_a_group_is_the_fastest_candidate_simulated(b):
    """Brute force on a batch-norm group: 4 cores on two chips of a 4x4 mesh. From 256 KiB the
    exchanges' closed forms (their lower bounds) are below the ring's time, yet the cores'
    contention on the chips' shared links makes them slower than it: auto must still simulate
    them and pick the ring."""
    from wus_sim.collectives import collective_time

    topo = make((4, 4), False, cores=2)
    group = compact_group(topo, 4)
    cands = ("ring", "halving-doubling", "recursive-doubling")
    times = [collective_time(topo, "all-reduce", a, b, group=group) for a in cands]
    best = int(np.argmin(times))
    assert small_allreduce(topo, b, options(), group) == (cands[best], times[best])
    if b >= 256 * KiB:
        assert cands[best] == "ring"


def test_a_bad_choice_is_one_line_naming_the_rule(capsys):
    from wus_sim.cli import main

    with pytest.raises(ConfigError, match="small_allreduce_algorithm"):
        options(small_allreduce_algorithm="2d")
    with pytest.raises(SystemExit) as exc:
        main(["step", "resnet50", "-t", "tpu-v3-32", "--small-allreduce-algorithm", "2d"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--small-allreduce-algorithm" in err[-1] and "recursive-doubling" in err[-1]


def test_records_name_the_small_allreduce_algorithm():
    from wus_sim.experiments.records import simulate_point

    rec = simulate_point({"workload": "resnet50", "topology": "tpu-v3-32", "strategy": "sharded",
                          "small_allreduce_algorithm": "ring"})[0]
    assert rec["small_allreduce_algorithm"] == "ring"
    auto = simulate_point({"workload": "resnet50", "topology": "tpu-v3-32", "strategy": "sharded"})[0]
    assert auto["small_allreduce_algorithm"] == "auto" and auto["extra_reduction_s"] < rec["extra_reduction_s"]


def test_the_report_lists_each_batch_norm_size_its_count_and_pick():
    """ResNet-50 v1.5's batch norms by channels, counted by hand from its blocks: the stem (64),
    3 + 4 + 6 + 3 bottlenecks (c, c, 4c with c = 64, 128, 256, 512) and 4 projection shortcuts
    (4c): 64 x 7, 128 x 8, 256 x 16, 512 x 11, 1024 x 7, 2048 x 4; each twice a step (forward
    and backward), over the 4-replica block by recursive doubling. LARS's two norms are listed
    as the sharded update's (a replicated update holds whole tensors and all-reduces none)."""
    from wus_sim.training.small_allreduce import small_allreduce_report

    topo = make((4, 4))
    run = simulate_strategies("resnet50", topo, None, ("replicated",), per_replica_batch=8,
                              options=options(bn_group_replicas=4))
    report = small_allreduce_report(run.plan, topo, options(bn_group_replicas=4))
    bn = [x for x in report if x["what"] == "batch-norm statistics"]
    assert [(x["nbytes"], x["per_step"]) for x in bn] == [
        (8 * 64, 14), (8 * 128, 16), (8 * 256, 32), (8 * 512, 22), (8 * 1024, 14), (8 * 2048, 8)]
    for x in bn:
        assert x["group_cores"] == 4 and x["algorithm"] == "recursive-doubling"
        assert x["time_s"] == pytest.approx(rd_block(x["nbytes"]), rel=1e-12)
    norms = [x for x in report if x["what"].startswith("sharded update")]
    assert [x["what"] for x in norms] == ["sharded update: norm(w)", "sharded update: norm(g)"]
    assert all(x["group_cores"] == 16 and x["per_step"] == 1 for x in norms)


def test_on_several_slices_the_report_times_the_norms_as_the_step_does(capsys):
    """The sharded update's norms span every slice: the report said '32 cores ... within the
    slice' with the in-slice time, while the step ran them across the DCN too. Now its
    group counts every slice's cores and its times add up to the step's optimizer reductions,
    each at least one DCN latency (10 us) above the in-slice time."""
    import json

    from wus_sim.cli import main

    argv = ["step", "bert-large", "-t", "tpu-v3-32", "-o", "lamb", "-s", "sharded", "--json"]
    assert main(argv) == 0
    one = json.loads(capsys.readouterr().out)
    assert main(argv + ["--slices", "2", "--dcn-latency-us", "10"]) == 0
    two = json.loads(capsys.readouterr().out)
    norms = [x for x in two["small_allreduces"] if x["what"].startswith("sharded update")]
    assert len(norms) == 2 and all(x["group_cores"] == 64 for x in norms)
    assert sum(x["time_s"] * x["per_step"] for x in norms) == pytest.approx(
        two["strategies"]["sharded"]["breakdown"]["extra_reduction_s"], rel=1e-12)
    for x, y in zip(norms, one["small_allreduces"]):
        assert x["time_s"] >= y["time_s"] + 10e-6
    assert main(argv[:-1] + ["--slices", "2"]) == 0
    text = capsys.readouterr().out
    assert "within the slice" not in text and "across the 2 slices, the DCN phase included" in text
