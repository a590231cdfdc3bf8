"""How a run places replicas and keeps activations: megacore, spatial_ways, remat."""

import json
import math

import numpy as np
import pytest

from wus_sim.cli import main
from wus_sim.experiments.records import simulate_point
from wus_sim.hardware.topology_files import load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.calibration import load_calibration
from wus_sim.model.compute import layer_times
from wus_sim.model.workload_files import load_workload


def step_json(capsys, *argv):
    assert main(["step", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys, argv, *words):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err


def test_megacore_runs_one_replica_per_chip(capsys):
    rep = step_json(capsys, "resnet50", "--topology", "tpu-v4-4096", "--megacore", "--per-replica-batch", "16",
                    "--strategy", "sharded")
    assert rep["replicas"] == 2048 and rep["parameters"]["cores_per_chip"] == 1
    t = load_topology("tpu-v4-4096", megacore=True)
    # one replica holds the whole chip: its HBM (32 GiB), bandwidth and peak
    assert t.hbm_bytes_per_replica == 32 * 2**30 and t.num_replicas == t.num_chips == 2048
    assert load_topology("tpu-v4-4096").num_replicas == 4096  # one per TensorCore without it


def test_megacore_errors_are_one_line(capsys):
    one_line_error(capsys, ["step", "resnet50", "--topology", "tpu-v3-32", "--megacore"], "--megacore", "tpu-v3")
    one_line_error(capsys, ["step", "resnet50", "--topology", "tpu-v6e-8", "--megacore"], "--megacore", "tpu-v6e")
    with pytest.raises(ConfigError, match="megacore or cores_per_chip"):
        simulate_point({"workload": "resnet50", "topology": "tpu-v5p-8", "megacore": True, "cores_per_chip": 2})
    with pytest.raises(ConfigError, match="megacore"):
        simulate_point({"workload": "resnet50", "topology": "tpu-v5p-8", "megacore": "yes"})


@pytest.mark.parametrize("topology", ["tpu-v3-32", "tpu-v5p-128", "tpu-v6e-64", "torus:4x4", "tpu-v4-8"])
def test_spatial_ways_runs_any_workload_on_any_slice(capsys, topology):
    cores = load_topology(topology).num_replicas  # TensorCores: --no-megacore on v4 and v5p, whose default is a chip
    rep = step_json(capsys, "transformer-big", "--topology", topology, "--spatial-ways", "4", "--strategy",
                    "sharded", "--per-replica-batch", "2", "--no-megacore")
    assert rep["spatial_ways"] == 4 and rep["replicas"] == cores // 4


def test_spatial_ways_as_a_point_key_and_its_errors(capsys):
    rows = simulate_point({"workload": "resnet50", "topology": "tpu-v3-32", "spatial_ways": 2,
                           "per_replica_batch": 8, "strategy": "sharded"})
    assert rows[0]["spatial_ways"] == 2 and rows[0]["replicas"] == 16 and rows[0]["status"] == "ok"
    one_line_error(capsys, ["step", "resnet50", "--topology", "tpu-v3-32", "--spatial-ways", "3"],
                   "--spatial-ways", "divide")
    one_line_error(capsys, ["plan", "resnet50", "--topology", "tpu-v3-32", "--spatial-ways", "5"],
                   "--spatial-ways", "divide")
    one_line_error(capsys, ["step", "resnet50", "--topology", "tpu-v3-32", "--spatial-ways", "-1"], "--spatial-ways")


# --------------------------------------------------------------------------- remat
def test_bert_large_at_16_sequences_per_core_fits_on_v3_32_with_layer_remat(capsys):
    # the unfused (Korthikanti) count: replicated needs remat at 16 sequences per core
    none = step_json(capsys, "bert-large", "--topology", "tpu-v3-32", "--per-replica-batch", "16",
                     "--activation-model", "unfused")
    assert none["strategies"]["replicated"]["status"] == "infeasible"
    layer = step_json(capsys, "bert-large", "--topology", "tpu-v3-32", "--per-replica-batch", "16",
                      "--remat", "layer", "--activation-model", "unfused")
    assert {s: r["status"] for s, r in layer["strategies"].items()} == {"replicated": "ok", "sharded": "ok"}
    # by hand: 24 layer inputs of 512 x 1024 bf16, then the larger of one layer's 74 B per element
    # recomputed at a time and the MLM logits (76 x 30522 x 6 B), which backward frees first
    per_seq = 24 * 512 * 1024 * 2 + max(512 * 1024 * 74, 76 * 30522 * 6)
    assert layer["strategies"]["sharded"]["memory_bytes"]["activations"] == pytest.approx(16 * per_seq)
    assert load_workload("bert-large").activation_bytes_kept("layer", "unfused") == per_seq
    # what XLA keeps: the recomputed layer holds 22 + 3 a s / h = 46 B per element, not 74
    assert load_workload("bert-large").activation_bytes_kept("layer") == \
        24 * 512 * 1024 * 2 + max(512 * 1024 * (22 + 3 * 16 * 512 // 1024), 76 * 30522 * 6)


def test_bert_large_at_24_sequences_per_core_fits_without_remat_on_v3_and_v4(capsys):
    """Google trained BERT-large at 24 sequences per 16 GiB TensorCore with no recomputation; what
    XLA keeps (by hand: 24 layers x 512 x 1024 x 46 B + 76 x 30522 x 6 B per sequence) fits."""
    per_seq = 24 * 512 * 1024 * 46 + 76 * 30522 * 6
    for topology in ("tpu-v3-32", "tpu-v4-128"):  # a replica a TensorCore: --no-megacore (v4's default is a chip)
        rep = step_json(capsys, "bert-large", "--topology", topology, "--per-replica-batch", "24", "--no-megacore")
        sharded = rep["strategies"]["sharded"]
        assert sharded["status"] == "ok", topology
        assert sharded["memory_bytes"]["activations"] == pytest.approx(24 * per_seq)
        assert sharded["memory_bytes"]["peak"] <= 16 * 2**30
        unfused = step_json(capsys, "bert-large", "--topology", topology, "--per-replica-batch", "24",
                            "--activation-model", "unfused", "--no-megacore")
        assert unfused["strategies"]["sharded"]["status"] == "infeasible"  # the GPU count says no


def test_full_remat_keeps_sqrt_l_layer_inputs():
    w = load_workload("bert-large")
    k = math.ceil(math.sqrt(24))  # 5 segments: 5 boundaries + 5 inputs of the segment in backward
    # the logits (76 x 30522 x 6 B) are freed before backward recomputes a layer: the larger of the two
    assert w.activation_bytes_kept("full", "unfused") == (math.ceil(24 / k) + k) * 512 * 1024 * 2 \
        + max(512 * 1024 * 74, 76 * 30522 * 6)
    assert w.activation_bytes_kept("full") == (math.ceil(24 / k) + k) * 512 * 1024 * 2 \
        + max(512 * 1024 * 46, 76 * 30522 * 6)
    assert w.activation_bytes_kept("full") < w.activation_bytes_kept("layer") < w.activation_bytes_kept("none")
    with pytest.raises(ConfigError, match="remat"):
        w.activation_bytes_kept("some")
    with pytest.raises(ConfigError, match="activation_model"):
        w.activation_bytes_kept("none", "gpu")


def test_remat_adds_one_forward_to_backward():
    w, t = load_workload("transformer-big"), load_topology("tpu-v3-32")
    params = load_calibration().compute_params()
    base = layer_times(w, t, 4, params)
    remat = layer_times(w, t, 4, params, remat="layer")
    assert np.allclose(remat.forward_s, base.forward_s)
    assert np.allclose(remat.backward_s, base.backward_s + base.forward_s)
    # a workload without per-layer terms recomputes nothing (and keeps everything)
    cnn = load_workload("resnet50")
    assert np.allclose(layer_times(cnn, t, 4, params, remat="layer").backward_s, layer_times(cnn, t, 4, params).backward_s)
    assert cnn.activation_bytes_kept("layer") == cnn.activation_bytes_per_example


def test_remat_point_key_and_option_errors(capsys):
    rows = simulate_point({"workload": "bert-large", "topology": "tpu-v3-32", "per_replica_batch": 16,
                           "remat": "layer", "strategy": "sharded"})
    assert rows[0]["status"] == "ok" and rows[0]["remat"] == "layer"
    with pytest.raises(ConfigError, match="remat"):
        simulate_point({"workload": "bert-large", "topology": "tpu-v3-32", "remat": "half"})
    with pytest.raises(SystemExit) as exc:  # argparse's choices, one line through wus-sim's parser
        main(["step", "bert-large", "--topology", "tpu-v3-32", "--remat", "half"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--remat" in err
    assert main(["plan", "bert-large", "--topology", "tpu-v3-32", "--per-replica-batch", "16", "--remat", "layer",
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["replicas"] == 32
