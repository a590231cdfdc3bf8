"""Multislice: slices over the data-center network, hierarchical collectives, golden step.

Expected values are derived by hand in this file. The golden case is 2 slices of the 2x2
torus of ``generic`` chips (1 core per chip, 100 GB/s links per direction, 1 us per hop)
with a DCN of 2 GB/s per chip and 20 us, the toy workload of tests/training/test_step_golden.py
(P = 262,912 fp32 parameters) and its explicit compute parameters; one-direction rings,
no overlap, so every collective is exposed and the step is a plain sum.

Model (wus_sim/hardware/multislice.py): S = full buffer per replica, C = 4 chips per slice, M = 2
slices; after the in-slice reduce-scatter every chip holds c = S / C; one DCN exchange
(a reduce-scatter or all-gather among the M slices) takes alpha_d + (M-1)/M * c / B_d.
"""

import pytest

from test_step_golden import (B, COMPUTE, LINK, OP_S, P, TENSORS, adam_update, approx, ag_2d, hand_layers, make_toy, rs_2d,
                              STEP_S)
from wus_sim.inputs.errors import ConfigError
from wus_sim.hardware.multislice import Multislice, dcn_time_s, hierarchical_time, load_multislice
from wus_sim.experiments.records import simulate_point
from wus_sim.training.step import StepOptions, simulate_strategies, speedup
from wus_sim.hardware.topology_files import load_topology

M = 2                   # slices
C = 4                   # chips (= replicas) per slice of torus:2x2
DCN = 2e9               # B/s per chip
ALPHA_D = 20e-6         # s per DCN exchange
S = 4 * P               # fp32 gradients / weights, bytes per replica


def dcn_exchange(nbytes, m=M, chips=C):
    """One DCN reduce-scatter or all-gather of the shards of an S-byte buffer, by hand."""
    return ALPHA_D + (m - 1) / m * (nbytes / chips) / DCN


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return make_toy(tmp_path_factory.mktemp("multislice"))


def two_slices(**kw):
    return Multislice(load_topology("torus:2x2"), M, DCN, ALPHA_D, **kw)


def run(toy, **kw):
    base = dict(compute=COMPUTE, overlap_grad_reduce=False, overlap_all_gather=False, bucket_bytes=1 << 30,
                algorithm="2d", bidirectional=False)
    base.update(kw)
    return simulate_strategies(toy, two_slices(), "adam", per_replica_batch=B, options=StepOptions(**base))


# ---------------------------------------------------------------- collectives by hand
def test_hand_figures():
    """Anchor the DCN figures in microseconds: c = 1,051,648 / 4 B per chip, half of it
    leaves each chip: 131,456 B at 2 GB/s = 65.728 us, + 20 us."""
    assert S == 1_051_648
    assert dcn_exchange(S) == approx(85.728e-6)


def test_dcn_closed_form_by_hand():
    ms = two_slices()
    assert dcn_time_s(ms, "reduce-scatter", S) == approx(dcn_exchange(S))
    assert dcn_time_s(ms, "all-gather", S) == approx(dcn_exchange(S))
    assert dcn_time_s(ms, "all-reduce", S) == approx(2 * dcn_exchange(S))
    # 4 slices: each chip sends 3/4 of its shard (to 3 peers, 1/4 each), one latency
    ms4 = Multislice(load_topology("torus:2x2"), 4, DCN, ALPHA_D)
    assert dcn_time_s(ms4, "reduce-scatter", S) == approx(ALPHA_D + 0.75 * (S / 4) / DCN)


def test_hierarchical_all_reduce_on_two_2x2_slices_by_hand():
    """All-reduce = 2-D reduce-scatter in the slice + DCN all-reduce of the shard + 2-D
    all-gather; the ICI parts are the slice's one-direction 2-D rings (test_step_golden)."""
    from wus_sim.collectives import collective_time

    ms = two_slices()
    slice_ = ms.slice

    def ici(op, n):
        return collective_time(slice_, op, "2d", n, bidirectional=False)

    ar = hierarchical_time(ms, "all-reduce", S, ici)
    assert ar == approx(rs_2d(S) + 2 * dcn_exchange(S) + ag_2d(S))
    # hand figure in us: 2-D ring RS = 2 + 0.75 * 10.51648 = 9.88736 us, AG the same
    assert rs_2d(S) == approx(2e-6 + 0.75 * S / LINK)
    assert ar == approx(2 * (2e-6 + 0.75 * S / 100e9) + 2 * 85.728e-6)
    across_rs = hierarchical_time(ms, "reduce-scatter", S, ici)
    across_ag = hierarchical_time(ms, "all-gather", S, ici)
    assert across_rs == approx(rs_2d(S) + dcn_exchange(S))
    assert across_ag == approx(dcn_exchange(S) + ag_2d(S))
    # sharded within each slice: the shard is all-reduced over the DCN, the gather stays in the slice
    assert hierarchical_time(ms, "reduce-scatter", S, ici, shard_across_slices=False) == \
        approx(rs_2d(S) + 2 * dcn_exchange(S))
    assert hierarchical_time(ms, "all-gather", S, ici, shard_across_slices=False) == approx(ag_2d(S))
    # conservation: the DCN bytes per step are the same either way (2 exchanges per bucket)
    assert across_rs + across_ag == approx(ar)


# ---------------------------------------------------------------- the golden step
def test_golden_step_two_slices_of_2x2(toy):
    results, meta = run(toy)
    assert (meta["replicas"], meta["replicas_per_slice"], meta["slices"]) == (8, 4, 2)
    assert meta["global_batch"] == M * C * B
    fwd, bwd = hand_layers()
    rep, sh = results["replicated"], results["sharded"]
    compute = STEP_S + sum(fwd) + sum(bwd) + TENSORS * OP_S  # the update's op costs count in op_launch_s
    exp_rep = {"exposed_comm_s": rs_2d(S) + 2 * dcn_exchange(S) + ag_2d(S), "update_s": adam_update(P) - TENSORS * OP_S}
    # sharded across slices: 1/8 shards (every tensor of the toy divides by 8: no padding)
    exp_sh = {"exposed_comm_s": (rs_2d(S) + dcn_exchange(S)) + (dcn_exchange(S) + ag_2d(S)),
              "update_s": adam_update(P / 8) - TENSORS * OP_S}
    for res, exp in ((rep, exp_rep), (sh, exp_sh)):
        for part, value in exp.items():
            assert res.breakdown[part] == approx(value), (res.strategy, part)
        assert res.step_time_s == approx(compute + sum(exp.values()))
    assert speedup(results) == approx((compute + sum(exp_rep.values())) / (compute + sum(exp_sh.values())))
    # memory: the sharding factor is every replica of every slice
    assert sh.memory.slots == 2 * 4 * P / 8
    assert sh.memory.gradients == 4 * P + 4 * P / 8
    assert rep.memory.slots == 2 * 4 * P
    assert sh.work.update.elements == P / 8


def test_golden_step_sharded_within_each_slice(toy):
    results, meta = run(toy, shard_across_slices=False)
    assert meta["replicas"] == 8 and meta["global_batch"] == 8 * B
    fwd, bwd = hand_layers()
    sh = results["sharded"]
    assert sh.breakdown["exposed_comm_s"] == approx(rs_2d(S) + 2 * dcn_exchange(S) + ag_2d(S))
    assert sh.breakdown["update_s"] == approx(adam_update(P / 4) - TENSORS * OP_S)  # op costs: op_launch_s
    assert sh.step_time_s == approx(STEP_S + sum(fwd) + sum(bwd) + rs_2d(S) + 2 * dcn_exchange(S) + ag_2d(S)
                                    + adam_update(P / 4))
    assert sh.memory.slots == 2 * 4 * P / 4
    # the replicated strategy does not care where the update would be sharded
    assert results["replicated"].step_time_s == approx(run(toy)[0]["replicated"].step_time_s)


# ---------------------------------------------------------------- invariants
def test_one_slice_is_the_single_slice_model(toy):
    opts = StepOptions(compute=COMPUTE)
    one, meta1 = simulate_strategies(toy, "torus:2x2", "adam", per_replica_batch=B, options=opts)
    topo, ms = load_multislice("torus:2x2", slices=1, dcn_GBps=0.001)
    assert ms is None and topo == load_topology("torus:2x2")
    for s in one:
        again, _ = simulate_strategies(toy, topo, "adam", per_replica_batch=B, options=opts)
        assert again[s].step_time_s == one[s].step_time_s
    assert meta1["replicas"] == 4 and meta1["slices"] == 1


def test_a_slower_dcn_never_speeds_a_step(toy):
    opts = StepOptions(compute=COMPUTE)
    prev = None
    for gbps in (100, 10, 1, 0.1):
        ms = Multislice(load_topology("torus:2x2"), 2, gbps * 1e9, ALPHA_D)
        res, _ = simulate_strategies(toy, ms, "adam", per_replica_batch=B, options=opts)
        times = {s: r.step_time_s for s, r in res.items()}
        if prev:
            assert all(times[s] >= prev[s] for s in times)
        prev = times


def test_global_batch_divides_over_every_replica_of_every_slice(toy):
    opts = StepOptions(compute=COMPUTE)
    _, meta = simulate_strategies(toy, two_slices(), "adam", global_batch=8 * 16, options=opts)
    assert meta["per_replica_batch"] == 16
    with pytest.raises(ConfigError, match="8 replicas"):
        simulate_strategies(toy, two_slices(), "adam", global_batch=4 * 16 + 4, options=opts)


def test_named_multislice_is_the_slice_times_two():
    topo, ms = load_multislice("tpu-v5e-256x2")
    assert ms.slices == 2 and topo.dims == (16, 16) and ms.num_replicas == 512
    # Cloud TPU v5e docs: 6.4 Tbps of data-center network per 256-chip pod -> 3.125 GB/s per chip
    assert ms.dcn_Bps == pytest.approx(6.4e12 / 8 / 256)
    _, same = load_multislice("tpu-v5e-256", slices=2)
    assert same.dcn_Bps == ms.dcn_Bps and same.dcn_latency_s == ms.dcn_latency_s
    _, single = load_multislice("tpu-v5e-256x2", slices=1)
    assert single is None
    _, slow = load_multislice("tpu-v5e-256x2", dcn_GBps=0.5)
    assert slow.slices == 2 and slow.dcn_Bps == 0.5e9 and slow.sources["dcn_GBps"] == "set for this run"


@pytest.mark.parametrize("kw, key", [({"slices": 0}, "slices"), ({"slices": 2, "dcn_GBps": 0}, "dcn_GBps"),
                                     ({"slices": 2, "dcn_latency_us": -1}, "dcn_latency_us"),
                                     ({"slices": 2.5}, "slices")])
def test_bad_multislice_values_name_the_key(kw, key):
    with pytest.raises(ConfigError) as exc:
        load_multislice("torus:2x2", **kw)
    assert exc.value.key_path == key


def test_bad_multislice_section_in_a_topology_file(tmp_path):
    path = tmp_path / "ms.yaml"
    path.write_text("chip: generic\nchips_per_axis: [2, 2]\nwraparound: true\nmultislice:\n  slices: 2\n  dcn: 3\n")
    with pytest.raises(ConfigError) as exc:
        load_multislice(str(path))
    assert exc.value.key_path == "multislice.dcn" and str(path) in str(exc.value)


def test_cli_options_and_json(capsys):
    import json

    from wus_sim.cli import main

    code = main(["step", "transformer-big", "-t", "tpu-v5e-256", "--slices", "2", "--dcn-GBps", "1",
                 "--per-replica-batch", "4", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["replicas"] == 512 and doc["global_batch"] == 2048
    assert doc["parameters"]["slices"] == 2 and doc["parameters"]["dcn_GBps"] == 1.0
    assert doc["parameters"]["shard_across_slices"] is True
    assert main(["step", "transformer-big", "-t", "tpu-v5e-256", "--slices", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--slices" in err[0] and ">= 1" in err[0]


def test_point_keys_reach_the_model():
    recs = simulate_point({"workload": "transformer-big", "topology": "tpu-v5e-256", "optimizer": "adam",
                           "slices": 2, "dcn_GBps": 0.5, "per_replica_batch": 4, "shard_across_slices": False})
    sh = next(r for r in recs if r["strategy"] == "sharded")
    assert sh["replicas"] == 512 and sh["replicas_per_slice"] == 256 and sh["global_batch"] == 2048
    assert sh["dcn_GBps"] == 0.5 and sh["dcn_latency_us"] == 10.0 and sh["shard_across_slices"] is False
    one = simulate_point({"workload": "transformer-big", "topology": "tpu-v5e-256", "optimizer": "adam",
                          "per_replica_batch": 4})
    assert next(r for r in one if r["strategy"] == "sharded")["slices"] == 1


# ---------------------------------------------------------------- the shipped experiment
def test_shipped_experiment_sharding_gains_more_as_the_dcn_slows():
    """Done-when of issue 10: on 2 slices of v5e-256, from experiments/whatif_multislice.yaml,
    the speedup of sharding grows as the DCN bandwidth per chip falls (Transformer-big with
    Adam, 16 sequences per replica: the points of the experiment's reduced form, then the
    whole sweep where the README quotes it)."""
    from pathlib import Path

    from wus_sim.experiments.spec import load_experiment

    exp = load_experiment(Path(__file__).resolve().parents[2] / "experiments" / "whatif_multislice.yaml")
    points = [p for p in exp.points() if p["workload"] == "transformer-big" and p["per_replica_batch"] == 16
              and p["shard_across_slices"] is True]
    up = {}
    for p in points:
        if p["dcn_GBps"] in (25, 3.125, 0.2, 0.1, 0.05):
            # the figures were taken under the flops compute model (--calibration flops)
            up[p["dcn_GBps"]] = next(r for r in simulate_point({**p, "calibration": "flops"})
                                     if r["strategy"] == "sharded")["speedup"]
    # README: 1.14-1.15x down to 0.2 GB/s, rising to 1.26x at 0.05 GB/s (it never falls by more than
    # rounding as the DCN slows)
    rates = sorted(up, reverse=True)
    assert all(up[b] >= up[a] - 0.005 for a, b in zip(rates, rates[1:]))  # 1.146 to 1.142 by 0.2 GB/s
    assert up[25] == pytest.approx(1.15, abs=0.005) and up[0.2] == pytest.approx(1.14, abs=0.005)
    assert up[0.05] == pytest.approx(1.26, abs=0.005)
    # README: BERT-large with LAMB at 4 per replica, 1.27x at v5e's 3.125, 1.33x at 0.4 (1.44x
    # sharded within slices only), back to 1.21x at 0.05
    bert = {(p["dcn_GBps"], p["shard_across_slices"]): p for p in exp.points() if p["workload"] == "bert-large"}
    got = {k: next(r for r in simulate_point({**bert[k], "calibration": "flops"}) if r["strategy"] == "sharded")["speedup"]
           for k in ((3.125, True), (0.4, True), (0.4, False), (0.05, True))}
    for key, value in {(3.125, True): 1.27, (0.4, True): 1.33, (0.4, False): 1.44, (0.05, True): 1.21}.items():
        assert got[key] == pytest.approx(value, abs=0.005), key
