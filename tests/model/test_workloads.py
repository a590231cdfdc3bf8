"""Workload profiles: totals match published counts, structure is sound, loading is strict."""

import json
import math
from pathlib import Path

import pytest

from wus_sim.inputs.errors import ConfigError, UnknownNameError
from wus_sim.hardware.topology_files import load_topology
from wus_sim.model.workload_files import known_workloads, load_workload

SHIPPED = ("resnet50", "transformer-big", "ncf", "ncf-ml20mx16x32", "bert-large", "gnmt",
           "ssd-resnet34", "mask-rcnn")

# Parameter counts, typed here independently of the YAML (sources in tests/data/README.md):
# ResNet-50 as torchvision's resnet50; Transformer and GNMT as NVIDIA's MLPerf v0.6 logs print them
# (mlcommons/training_results_v0.6); NCF and BERT-large are the totals of the transcribed shapes.
PUBLISHED = {
    "resnet50": 25_557_032,
    "transformer-big": 210_808_832,
    "gnmt": 160_671_297,
    "ncf": 31_832_577,
    "bert-large": 336_226_108,
}

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "model_tensors.json"
JSON_KEY = {"resnet50": "resnet50_v1.5", "transformer-big": "transformer_big_v33712", "ncf": "ncf_ml20m",
            "ncf-ml20mx16x32": "ncf_ml20mx16x32", "bert-large": "bert_large_with_pretrain_heads",
            "gnmt": "gnmt_v32320", "ssd-resnet34": "ssd_resnet34_300", "mask-rcnn": "mask_rcnn_r50_fpn"}


def test_every_issue_workload_ships():
    assert set(SHIPPED) <= set(known_workloads())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_totals_equal_published_counts(name):
    w = load_workload(name)
    assert w.params == PUBLISHED[name]
    assert sum(t.size for t in w.tensors) == PUBLISHED[name]


def test_transformer_uses_the_33712_vocabulary():
    w = load_workload("transformer-big")
    emb = w.tensors[0]
    assert emb.shape == (33712, 1024) and emb.layer == 0


@pytest.mark.parametrize("name", SHIPPED)
def test_tensors_are_exactly_the_reference_lists(name):
    ref = json.loads(REFERENCE.read_text())[JSON_KEY[name]]
    w = load_workload(name)
    assert [(t.name, list(t.shape)) for t in w.tensors] == [(n, list(s)) for n, s in ref["tensors"]]
    # the reference counts weight matmuls; an attention layer adds its score and context matmuls,
    # 4 x key tokens x heads x head_dim per query token (Vaswani et al. 2017), spread per unit
    scores = sum(4 * a.query_tokens * a.key_tokens * a.heads * a.head_dim for a in w.attention)
    assert w.fwd_flops_per_unit == ref["fwd_flops"] + scores / w.units_per_example
    assert len(w.tensors) == ref["trainable_tensors"]


def test_shipped_files_are_what_the_generator_writes(tmp_path):
    import runpy

    tool = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tools" / "regenerate_workloads.py"))
    tool["main"](["--json", str(REFERENCE), "--out", str(tmp_path)])
    shipped = Path(load_workload("resnet50").path).parent
    for name in SHIPPED:
        assert (tmp_path / f"{name}.yaml").read_text() == (shipped / f"{name}.yaml").read_text(), name


def test_resnet50_small_tensor_count_matches_the_paper():
    # Xu et al. 2020 (arXiv 2004.13336): 161 tensors, 107 with fewer than 4096 elements
    w = load_workload("resnet50")
    assert len(w.tensors) == 161 and len(w.small_tensors(4096)) == 107


@pytest.mark.parametrize("name", SHIPPED)
def test_structure(name):
    w = load_workload(name)
    # layers are forward-ordered: indices in range, never decreasing along the file except for
    # tensors that share a layer with an earlier one (the file lists models front to back)
    assert all(0 <= t.layer < w.num_layers for t in w.tensors)
    assert [t.layer for t in w.tensors] == sorted(t.layer for t in w.tensors)
    assert len(w.layer_names) == w.num_layers == len(w.layer_fwd_flops)
    assert math.isclose(sum(w.layer_fwd_flops), w.fwd_flops_per_example, rel_tol=1e-9)
    assert w.fwd_flops_per_example == w.fwd_flops_per_unit * w.units_per_example
    assert w.layer_params().sum() == w.params
    assert w.activation_bytes_per_example == sum(t.elements * t.bytes_per_element for t in w.activation_terms)
    assert w.activation_bytes_per_example > 0
    assert (w.weight_bytes, w.slot_bytes, w.activation_bytes) == (4, 4, 2) and w.grad_bytes in (2, 4)
    assert w.default_optimizer and w.sources
    hist = w.size_histogram()
    assert sum(h[2] for h in hist) == len(w.tensors) and sum(h[3] for h in hist) == w.params


@pytest.mark.parametrize("name", SHIPPED)
def test_mlperf_configs_fit_their_slices(name):
    w = load_workload(name)
    for c in w.configs:
        topo = load_topology(c.topology)
        assert c.replicas * c.spatial_ways == topo.num_replicas
        assert c.replicas * c.per_replica_batch == c.global_batch
        assert w.per_replica_batch_for(c.topology) == c.per_replica_batch
    assert w.per_replica_batch_for("no-such-slice") == w.default_per_replica_batch


def test_mlperf_tables_from_workloads_md():
    # spot-check against the table rows (v3-2048 Transformer 1 per core, SSD 512 x 4 at v3-2048)
    assert load_workload("transformer-big").config_for("tpu-v3-2048").per_replica_batch == 1
    ssd = load_workload("ssd-resnet34").config_for("tpu-v3-2048")
    assert (ssd.replicas, ssd.spatial_ways, ssd.per_replica_batch) == (512, 4, 4)
    assert load_workload("bert-large").configs == () and load_workload("ncf").configs == ()


def test_tied_embedding_gradients_complete_at_layer_zero():
    # the softmax reusing the embedding runs last, but the embedding's gradient is only complete
    # when backward reaches the lookup (layer 0); the softmax FLOPs sit in the last layer
    w = load_workload("transformer-big")
    assert w.layer_names[-1].startswith("softmax") and w.layer_fwd_flops[-1] > 0
    assert not any(t.layer == w.num_layers - 1 for t in w.tensors)


def test_unknown_name_lists_known():
    with pytest.raises(UnknownNameError) as err:
        load_workload("resnet-51")
    assert "resnet50" in str(err.value) and "transformer-big" in str(err.value)


def _write(tmp_path, text):
    p = tmp_path / "w.yaml"
    p.write_text(text)
    return p


MINIMAL = """\
name: tiny
params: 30
fwd_flops: {per_unit: 100, unit: example, units_per_example: 1, example_unit: example}
activation_memory: [{what: x, elements: 10, bytes_per_element: 2}]
dtypes: {weights: float32, gradients: float32, slots: float32, activations: bfloat16}
default_optimizer: adam
default_per_replica_batch: 4
tensors:
  - [a, [4, 5], 0]
  - [b, [10], 1]
"""


def test_user_yaml_path_loads(tmp_path):
    w = load_workload(str(_write(tmp_path, MINIMAL)))
    assert w.params == 30 and w.num_layers == 2
    # without a layers table, the FLOPs are split by parameter count
    assert w.layer_fwd_flops == pytest.approx((100 * 20 / 30, 100 * 10 / 30))
    assert w.activation_bytes_per_example == 20


@pytest.mark.parametrize("edit, where", [
    (("default_per_replica_batch: 4", "default_per_replica_batch: 4\nbatch: 3"), "batch"),
    (("params: 30", "params: 31"), "params"),
    (("[b, [10], 1]", "[b, [10, 0], 1]"), "tensors[1]"),
    (("[b, [10], 1]", "[a, [10], 1]"), "tensors[1]"),
    (("gradients: float32", "gradients: fp8"), "dtypes.gradients"),
    (("bytes_per_element: 2}", "bytes_per_element: 2, factor: 3}"), "activation_memory[0].factor"),
    (("default_optimizer: adam", "default_optimizer: adam\nmlperf_v06_tpu: [{topology: t, global_batch: 9, "
      "replicas: 2, spatial_ways: 1, per_replica_batch: 4}]"), "mlperf_v06_tpu[0].global_batch"),
    (("tensors:", "layers: [[l0, 50], [l1, 40]]\ntensors:"), "layers"),
    (("tensors:", "layers: [[l0, 100]]\ntensors:"), "tensors[1]"),
    # the optimizer a point without one runs: checked at load, not left to fail without naming the file
    (("default_optimizer: adam", "default_optimizer: adamx"), "default_optimizer: 'adamx'"),
    (("default_optimizer: adam", "default_optimizer: adam+foo"), "default_optimizer: 'adam+foo'"),
])
def test_strict_loading_names_file_and_key(tmp_path, edit, where):
    path = _write(tmp_path, MINIMAL.replace(*edit))
    with pytest.raises(ConfigError) as err:
        load_workload(str(path))
    assert str(path) in str(err.value) and where in str(err.value)


def test_grad_bytes_option():
    w = load_workload("gnmt")
    assert w.with_grad_bytes(2).grad_bytes == 2 and w.grad_bytes == 4
    with pytest.raises(ConfigError):
        w.with_grad_bytes(3)


def test_to_dict_is_json_ready():
    d = load_workload("ncf").to_dict()
    json.dumps(d)
    assert d["params"] == 31_832_577 and len(d["tensors"]) == 12


def test_head_is_for_a_term_after_every_layer(tmp_path):
    """`head: true` marks the output head's activations (freed before backward reaches the layers); a
    per-layer term is none: a one-line ConfigError naming the key."""
    import yaml

    doc = yaml.safe_load(Path(load_workload("llama3-8b").path).read_text())
    doc["activation_memory"][0]["head"] = True
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as info:
        load_workload(str(bad))
    assert info.value.key_path == "activation_memory[0].head"
    assert [t.head for t in load_workload("llama3-8b").activation_terms] == [False, True]
