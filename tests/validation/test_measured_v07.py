"""The MLPerf v0.7 TPU-v3 measured step times (tests/tools/regenerate_mlperf_v07.py): invariants
of the shipped CSV, read without the log snapshot, and (when the snapshot is on this
machine) that the generator reproduces it.

The table is read with the csv module: it has the v0.6 columns plus ``round``, and two rows
per benchmark for the two frameworks run on tpu-v3-8192, so ``load_measured`` (one row per
benchmark/topology, v0.6 columns only) does not take it as it is.
"""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
V06 = ROOT / "wus_sim" / "data" / "validation" / "mlperf_v06_tpu_v3.csv"
V07 = ROOT / "wus_sim" / "data" / "validation" / "mlperf_v07_tpu_v3.csv"
GENERATOR = ROOT / "tests" / "regenerate_mlperf_v07.py"
SNAPSHOT = Path("/work/.mirror/mlcommons+training_results_v0.7/repo")


def _read(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


HEADER, ROWS = _read(V07)


def test_columns_are_the_v06_columns_plus_round():
    v06_header, _ = _read(V06)
    assert HEADER == v06_header + ["round", "framework"]
    assert {r["framework"] for r in ROWS} <= {"tf1", "tf2", "jax"}


def test_rows_and_their_keys():
    assert ROWS
    keys = [(r["benchmark"], r["topology"], r["method"].split(";")[0]) for r in ROWS]
    assert len(keys) == len(set(keys))          # benchmark x slice x framework names a row
    assert {r["round"] for r in ROWS} == {"v0.7"}


@pytest.mark.parametrize("r", ROWS, ids=lambda r: f"{r['benchmark']}-{r['topology']}-{r['method'].split(';')[0]}")
def test_row_is_self_consistent(r):
    cores, replicas, ways = int(r["cores"]), int(r["replicas"]), int(r["spatial_ways"])
    assert cores == replicas * ways
    assert int(r["global_batch"]) == int(r["per_replica_batch"]) * replicas
    assert r["topology"] == f"tpu-v3-{cores}"
    lo, med, hi = float(r["step_s_min"]), float(r["measured_step_s"]), float(r["step_s_max"])
    assert 0 < lo <= med <= hi
    assert r["kind"] in {"exact", "bound"}
    assert r["update"] in {"sharded", "replicated", "unknown"} and r["update_source"]
    assert r["grad_allreduce_dtype"] in {"fp32", "bf16"}
    assert r["eval_on_device"] in {"true", "false", "unknown"}
    assert int(r["runs"]) >= 4 and int(r["steps_per_loop"]) > 0
    assert r["bn_group_cores"] == "" or int(r["bn_group_cores"]) % ways == 0
    assert (ROOT / "wus_sim" / "data" / "workloads" / f"{r['workload']}.yaml").is_file()
    assert (ROOT / "topologies" / f"{r['topology']}.yaml").is_file()
    assert (ROOT / "wus_sim" / "data" / "optimizers" / f"{r['optimizer']}.yaml").is_file()
    assert r["method"].split(";")[0] in {"framework=JAX", "framework=TF1", "framework=TF2"}


@pytest.mark.parametrize("r", ROWS, ids=lambda r: f"{r['benchmark']}-{r['topology']}-{r['method'].split(';')[0]}")
def test_sources_are_tpu_v3_paths_only(r):
    sources = [s.strip() for s in r["sources"].split(";")]
    assert sources[0].startswith(f"Google/results/{r['topology']}-")
    assert f"/{r['benchmark']}/result_" in sources[0]
    for s in sources:
        assert s.startswith(("Google/results/tpu-v3-", "Google/benchmarks/"))
        assert "tpu-v3-" in s and "v4" not in s.lower()


def test_generator_check_passes_against_the_logs():
    if not SNAPSHOT.exists():
        pytest.skip(f"no snapshot of mlcommons/training_results_v0.7 at {SNAPSHOT}; "
                    "run tests/tools/regenerate_mlperf_v07.py --check --repo PATH by hand")
    out = subprocess.run([sys.executable, str(GENERATOR), "--check", "--repo", str(SNAPSHOT)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
