"""`wus-sim describe` and `wus-sim plan`: JSON keys, text summaries, one-line errors listing known names."""

import json

import pytest

from wus_sim.cli import main
from wus_sim.optimizers import known_optimizers
from wus_sim.model.workload_files import known_workloads, load_workload
from workload_sample import sample_workloads


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sample_workloads())
def test_describe_workload_json(capsys, name):
    code, out, _ = run_cli(capsys, "describe", "workload", name, "--json")
    assert code == 0
    d = json.loads(out)
    w = load_workload(name)
    assert d["params"] == w.params
    assert len(d["tensors"]) == len(w.tensors)
    assert sum(t["size"] for t in d["tensors"]) == d["params"]
    assert {"fwd_flops_per_example", "example_unit", "size_histogram", "configs", "small_tensors"} <= set(d)


def test_describe_workload_text(capsys):
    code, out, _ = run_cli(capsys, "describe", "workload", "resnet50")
    assert code == 0
    assert "25,557,032" in out and "161 tensors" in out
    assert "small tensors (< 4096 elements): 107" in out
    assert "tpu-v3-2048" in out and "GFLOP per image" in out


def test_describe_workload_shows_a_small_workloads_flops(capsys):
    """NCF's 213,312 FLOPs per pair printed as '0.000 GFLOP' (no digit left)."""
    code, out, _ = run_cli(capsys, "describe", "workload", "ncf")
    assert code == 0
    assert "213,312 per (user, item) pair x 1 = 0.000213 GFLOP per (user, item) pair" in out


def test_describe_lists_names_without_one(capsys):
    code, out, _ = run_cli(capsys, "describe", "workload")
    assert code == 0 and out.split() == known_workloads()
    code, out, _ = run_cli(capsys, "describe", "optimizer")
    assert code == 0 and set(known_optimizers()) <= set(out.split())


@pytest.mark.parametrize("name", known_optimizers() + ["adam+clip"])
def test_describe_optimizer_json(capsys, name):
    code, out, _ = run_cli(capsys, "describe", "optimizer", name, "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("slots", "bytes_read_per_element", "bytes_written_per_element", "flops_per_element",
                "cross_replica_reductions"):
        assert key in d
    assert isinstance(d["cross_replica_reductions"], list)


@pytest.mark.parametrize("kind, name", [("workload", "gnmt"), ("optimizer", "adam")])
def test_describe_grad_dtype_short_and_long_spellings_agree(capsys, kind, name):
    out = {dtype: json.loads(run_cli(capsys, "describe", kind, name, "--json", "--grad-dtype", dtype)[1])
           for dtype in ("bf16", "bfloat16", "fp32", "float32")}
    assert out["bf16"] == out["bfloat16"] != out["fp32"] == out["float32"]


def test_describe_optimizer_text(capsys):
    code, out, _ = run_cli(capsys, "describe", "optimizer", "lamb")
    assert code == 0 and "norm(w)" in out


@pytest.mark.parametrize("argv, known", [
    (("describe", "workload", "resnet-51"), "transformer-big"),
    (("describe", "optimizer", "adamm"), "adam"),
    (("plan", "resnet-51", "--topology", "tpu-v3-32"), "resnet50"),
    (("plan", "resnet50", "--topology", "tpu-v3-33"), "tpu-v3-32"),
    (("plan", "resnet50", "--topology", "tpu-v3-32", "--optimizer", "adamm"), "lamb"),
])
def test_bad_names_list_known_ones_on_one_line(capsys, argv, known):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "known:" in err and known in err


PLAN_KEYS = ("params", "padded_params", "buckets", "replicated_tensors", "extra_reductions", "memory")
MEMORY_KEYS = ("weights", "gradients", "slots", "activations", "peak")


@pytest.mark.parametrize("name", sample_workloads())
def test_plan_json_for_every_workload(capsys, name):
    code, out, _ = run_cli(capsys, "plan", name, "--topology", "tpu-v3-128", "--json")
    assert code == 0
    d = json.loads(out)
    for key in PLAN_KEYS:
        assert key in d
    for strategy in ("replicated", "sharded"):
        for key in MEMORY_KEYS:
            assert d["memory"][strategy][key] >= 0
        m = d["memory"][strategy]
        assert m["peak"] == pytest.approx(m["weights"] + m["gradients"] + m["slots"] + m["activations"]
                                          + m["collective_buffers"])
    w = load_workload(name)
    assert d["params"] == w.params and d["padded_params"] >= w.params
    assert d["optimizer"] == w.default_optimizer
    assert d["per_replica_batch"] == w.per_replica_batch_for("tpu-v3-128")


def test_plan_transformer_on_a_full_pod(capsys):
    code, out, _ = run_cli(capsys, "plan", "transformer-big", "--topology", "tpu-v3-2048", "--optimizer", "adam",
                           "--json")
    d = json.loads(out)
    assert code == 0 and d["replicas"] == 2048 and d["per_replica_batch"] == 1
    rep, sh = d["memory"]["replicated"], d["memory"]["sharded"]
    # Adam's two fp32 slots: 8 bytes per parameter replicated, ~1/2048 of that sharded
    assert rep["slots"] == 8 * d["params"]
    assert sh["slots"] < rep["slots"] / 100
    assert d["strategies"]["sharded"]["update_time_s"] < d["strategies"]["replicated"]["update_time_s"] / 100
    code, text, _ = run_cli(capsys, "plan", "transformer-big", "--topology", "tpu-v3-2048", "--optimizer", "adam")
    assert code == 0 and "replicated" in text and "sharded" in text and "peak" in text


def test_plan_options(capsys):
    base = json.loads(run_cli(capsys, "plan", "gnmt", "-t", "tpu-v3-32", "-o", "adam", "--json")[1])
    bf16 = json.loads(run_cli(capsys, "plan", "gnmt", "-t", "tpu-v3-32", "-o", "adam", "--json",
                              "--grad-dtype", "bfloat16")[1])
    assert bf16["strategies"]["replicated"]["grad_nbytes"] * 2 == base["strategies"]["replicated"]["grad_nbytes"]
    for short, long in (("bf16", bf16), ("fp32", base)):   # `wus-sim step`'s spellings name the same dtypes
        assert json.loads(run_cli(capsys, "plan", "gnmt", "-t", "tpu-v3-32", "-o", "adam", "--json",
                                  "--grad-dtype", short)[1]) == long
    small = json.loads(run_cli(capsys, "plan", "gnmt", "-t", "tpu-v3-32", "-o", "adam", "--json",
                               "--bucket-MiB", "1")[1])
    assert len(small["buckets"]) > len(base["buckets"])
    batch = json.loads(run_cli(capsys, "plan", "gnmt", "-t", "tpu-v3-32", "-o", "adam", "--json",
                               "--per-replica-batch", "256")[1])
    assert batch["memory"]["sharded"]["activations"] == 2 * base["memory"]["sharded"]["activations"]
    own = json.loads(run_cli(capsys, "plan", "gnmt", "-t", "tpu-v3-32", "-o", "adam", "--json",
                             "--replica", "31")[1])["ownership"]
    assert own["replica"] == 31 and own["buckets"]


def test_plan_spatial_config_and_check(capsys):
    d = json.loads(run_cli(capsys, "plan", "ssd-resnet34", "-t", "tpu-v3-2048", "--json")[1])
    assert (d["replicas"], d["spatial_ways"], d["per_replica_batch"]) == (512, 4, 4)
    code, out, err = run_cli(capsys, "plan", "bert-large", "-t", "tpu-v3-32", "--per-replica-batch", "64",
                             "--check")
    assert code == 2 and "over by" in err and err.count("\n") == 1
    code, out, _ = run_cli(capsys, "plan", "bert-large", "-t", "tpu-v3-32", "--per-replica-batch", "64")
    assert code == 0 and "over by" in out


def test_plan_rejects_zero_batch_and_replicas(capsys):
    from wus_sim.cli import main

    assert main(["plan", "resnet50", "-t", "tpu-v3-32", "--per-replica-batch", "0"]) == 2
    assert "--per-replica-batch" in capsys.readouterr().err
    assert main(["plan", "resnet50", "-t", "tpu-v3-32", "--replicas", "0"]) == 2
    assert "replicas" in capsys.readouterr().err


def test_plan_on_a_multislice_topology_shards_over_every_slice(capsys):
    # tpu-v5e-256x2: 2 slices of 16x16 chips, 1 core each. `step` shards the update over all
    # 512 replicas; the plan must be that plan, not one slice's 256-way one.
    code, out, err = run_cli(capsys, "plan", "bert-large", "--topology", "tpu-v5e-256x2", "--optimizer", "adam",
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["replicas"] == 2 * 16 * 16 and d["multislice"]["slices"] == 2
    params = load_workload("bert-large").params
    # Adam's two fp32 slots: 8 B per element, all of them replicated, ~1/512 of them sharded
    assert d["memory_bytes"]["replicated"]["slots"] == 8 * params
    assert d["memory_bytes"]["sharded"]["slots"] == pytest.approx(8 * params / 512, rel=0.01)
    code, out, _ = run_cli(capsys, "plan", "bert-large", "--topology", "tpu-v5e-256x2", "--optimizer", "adam")
    assert code == 0 and "512 replicas" in out.splitlines()[0] and "2 slices" in out.splitlines()[0]
