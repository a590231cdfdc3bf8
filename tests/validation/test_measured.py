"""The shipped MLPerf v0.6 TPU-v3 measured step times: loading, consistency, provenance.

Hand-checked values below were derived by hand from the raw ":::MLL" lines of
github.com/mlcommons/training_results_v0.6 at the pinned commit
(f312518c2d6107eec983750eed23950f1f0c8a0e); the arithmetic is in each docstring.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.validation import MeasuredRun, load_measured
from wus_sim.validation.measured import COLUMNS as ALL_COLUMNS, SHIPPED_MEASURED

COLUMNS = [c for c in ALL_COLUMNS if c not in ("round", "framework")]  # the v0.6 table's header

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tests" / "regenerate_mlperf_v06.py"
SNAPSHOT = Path("/work/.mirror/mlcommons+training_results_v0.6/repo")

ROWS = load_measured(SHIPPED_MEASURED)  # the v0.6 table (the v0.7 one: tests/validation/test_measured_v07.py)


def row(benchmark, topology):
    (r,) = [r for r in ROWS if r.benchmark == benchmark and r.topology == topology]
    return r


def test_shipped_table_loads_with_one_row_per_benchmark_and_slice():
    assert SHIPPED_MEASURED.is_file()
    assert all(isinstance(r, MeasuredRun) for r in ROWS)
    keys = [(r.benchmark, r.topology) for r in ROWS]
    assert len(keys) == len(set(keys)) == 26
    assert {r.benchmark for r in ROWS} == {"resnet", "ssd", "mask", "transformer", "gnmt"}


@pytest.mark.parametrize("r", ROWS, ids=lambda r: f"{r.benchmark}-{r.topology}")
def test_row_is_self_consistent(r):
    assert r.global_batch == r.replicas * r.per_replica_batch
    assert r.replicas * r.spatial_ways == r.cores
    assert r.topology == f"tpu-v3-{r.cores}"
    assert (ROOT / "topologies" / f"{r.topology}.yaml").is_file()
    assert (ROOT / "wus_sim" / "data" / "workloads" / f"{r.workload}.yaml").is_file()
    assert (ROOT / "wus_sim" / "data" / "optimizers" / f"{r.optimizer}.yaml").is_file()
    assert r.kind in {"exact", "bound"}
    assert r.update in {"sharded", "replicated", "unknown"}
    assert r.grad_allreduce_dtype in {"fp32", "bf16"}
    assert 0 < r.step_s_min <= r.measured_step_s <= r.step_s_max
    assert r.runs >= 5 and r.steps_per_loop > 0
    assert r.bn_group_cores is None or r.bn_group_cores % r.spatial_ways == 0
    assert r.method and r.update_source
    assert r.sources[0].startswith(f"Google/results/{r.topology}/{r.benchmark}/result_")


def test_resnet_v3_32_by_hand():
    """ResNet-50, v3-32 (1252 steps per device loop = --iterations_per_loop).

    result_0.txt: run_start 1558420845.819; eval_accuracy at 1558421081.652 (block 1,
    235.833 s, includes warm-up: excluded), 1558421245.836 (block 2: 164.184 s),
    1558421409.950 (block 3: 164.114 s); every later block of every one of the 5 runs
    is 164.08-164.20 s and each run's median block is 164.11-164.12 s, so the step time
    is 164.11/1252 = 0.131078 to 164.12/1252 = 0.131086 s.
    """
    r = row("resnet", "tpu-v3-32")
    assert (r.steps_per_loop, r.global_batch, r.kind) == (1252, 4096, "exact")
    assert 164.11 / 1252 - 1e-5 <= r.measured_step_s <= 164.12 / 1252 + 1e-5


def test_ssd_v3_128_by_hand():
    """SSD, v3-128 (625 steps per device loop; block 2 is 2 loops, later blocks 1 loop).

    result_0.txt eval_start lines: 1560218644.902 (run start), 1560218768.544 (end of
    block 1, 6 loops, warm-up: excluded), 1560218809.319 (block 2: 1250 steps, 40.775 s),
    1560218829.928 (block 3: 625 steps, 20.609 s), 1560218850.492 (20.564 s),
    1560218871.087 (20.595 s). With two step counts the OLS slope is the difference of
    means: (40.775 - 20.5893) / (1250 - 625) = 0.032297 s per step; intercept
    20.5893 - 625 x 0.032297 = 0.404 s per block. The other runs agree within 0.1%.
    """
    r = row("ssd", "tpu-v3-128")
    assert r.kind == "exact"
    assert r.step_s_min <= 0.032297 <= r.step_s_max
    assert r.measured_step_s == pytest.approx(0.032297, rel=1e-3)


def test_gnmt_v3_1024_by_hand():
    """GNMT, v3-1024 (420 steps per device loop = int(3442299 / 8192)).

    result_0.txt: run_start 1560229129.003; eval_start at 1560229152.646 (block 1, 23.643 s,
    excluded), then 1560229168.336, 1560229183.992, 1560229199.692, 1560229215.369,
    1560229231.034, 1560229246.756: blocks of 15.690, 15.656, 15.700, 15.677, 15.665,
    15.722 s, median (15.677 + 15.690) / 2 = 15.6835 s, / 420 = 0.037342 s per step
    (an upper bound: each block includes the on-device decode).
    """
    r = row("gnmt", "tpu-v3-1024")
    assert (r.steps_per_loop, r.kind) == (420, "bound")
    assert r.step_s_min <= 0.037342 <= r.step_s_max
    assert r.measured_step_s == pytest.approx(0.037342, rel=1e-3)


def test_generator_check_passes_against_the_logs():
    if not SNAPSHOT.exists():
        pytest.skip(f"no snapshot of mlcommons/training_results_v0.6 at {SNAPSHOT}; "
                    "run tests/tools/regenerate_mlperf_v06.py --check --repo PATH by hand")
    out = subprocess.run([sys.executable, str(GENERATOR), "--check", "--repo", str(SNAPSHOT)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


def _write(tmp_path, header, line):
    p = tmp_path / "m.csv"
    p.write_text(",".join(header) + "\n" + line + "\n")
    return p


def _shipped_line(index=1):
    return SHIPPED_MEASURED.read_text().splitlines()[index]


def test_unknown_column_is_an_error_naming_file_and_column(tmp_path):
    p = _write(tmp_path, list(COLUMNS) + ["extra"], _shipped_line() + ",x")
    with pytest.raises(ConfigError, match=r"m\.csv: extra: is not a known column"):
        load_measured(p)


def test_missing_column_is_an_error_naming_file_and_column(tmp_path):
    import csv
    import io

    rec = next(csv.DictReader(io.StringIO(SHIPPED_MEASURED.read_text())))
    del rec["kind"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rec), lineterminator="\n")
    w.writeheader()
    w.writerow(rec)
    p = tmp_path / "m.csv"
    p.write_text(buf.getvalue())
    with pytest.raises(ConfigError, match=r"m\.csv: kind: column is missing"):
        load_measured(p)


def test_bad_value_names_line_and_column(tmp_path):
    line = _shipped_line().replace(",32,32,1,", ",32,many,1,", 1)
    p = _write(tmp_path, COLUMNS, line)
    with pytest.raises(ConfigError, match=r"line 2\.replicas: 'many' does not parse"):
        load_measured(p)
