"""Every Cloud TPU slice by its name (issue 47 item 2), checked against tests/data/cloud_tpu_slices.csv.

The table is typed from the Cloud TPU docs pages and GKE's xpk list (its README section says which
page gave which rows); the code under test builds the slices from its own shape lists and rules.
"""

import csv
import json
import math
from pathlib import Path

import pytest

from wus_sim.cli import main
from wus_sim.hardware.topology_files import known_topologies, load_chips, load_topology
from wus_sim.inputs.errors import ConfigError, UnknownNameError

TABLE = Path(__file__).resolve().parents[1] / "data" / "cloud_tpu_slices.csv"
ROWS = list(csv.DictReader(TABLE.open()))


def test_the_table_holds_every_generation_and_pod():
    gens = {r["generation"] for r in ROWS}
    assert gens == {"v4", "v5e", "v5p", "v6e", "tpu7x"}
    pods = {g: max(int(r["chips"]) for r in ROWS if r["generation"] == g) for g in gens}
    # Cloud TPU docs: pod sizes 4096 (v4), 256 (v5e, v6e), 8960 (v5p), 9216 (TPU7x)
    assert pods == {"v4": 4096, "v5e": 256, "v5p": 8960, "v6e": 256, "tpu7x": 9216}


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_every_table_name_resolves_with_its_chips_shape_and_wraparound(row):
    dims = tuple(int(d) for d in row["shape"].split("x"))
    assert math.prod(dims) == int(row["chips"])
    per_chip = 2 if row["name_counts"] == "TensorCores" else 1
    assert int(row["name"].rsplit("-", 1)[1]) == int(row["chips"]) * per_chip  # the naming rule
    topo = load_topology(row["name"])
    assert topo.dims == dims
    assert topo.wrap == tuple(w == "true" for w in row["wraparound"].split(";"))
    assert topo.chip.cores_per_chip == int(row["cores_per_chip"])
    assert row["name"] in known_topologies()


def test_list_topologies_holds_every_table_name(capsys):
    assert main(["list", "topologies", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in ROWS} <= set(listed)
    assert listed == sorted(listed)


def test_list_long_shows_chips_and_shape(capsys):
    assert main(["list", "topologies", "--long"]) == 0
    lines = {ln.split()[0]: ln.split() for ln in capsys.readouterr().out.splitlines()}
    for r in ROWS:
        assert lines[r["name"]][1:3] == [r["chips"], r["shape"]], r["name"]


@pytest.mark.parametrize("name", ["tpu-v5p-256", "tpu-v5p-17920", "tpu-v4-8192", "tpu-v5e-256", "tpu-v6e-256",
                                  "tpu7x-18432"])
def test_step_runs_on_the_named_slices_and_whole_pods(capsys, name):
    assert main(["step", "llama3-8b", "-t", name, "--megacore" if "v5p" in name or "v4" in name else "--json"]) == 0
    out = capsys.readouterr().out
    assert name in out


def test_multislice_of_a_named_slice(capsys):
    assert main(["step", "llama3-8b", "-t", "tpu-v5p-256", "--slices", "2", "--megacore"]) == 0
    assert "2x tpu-v5p-256" in capsys.readouterr().out


@pytest.mark.parametrize("name, near", [
    ("tpu-v5p-9000", ["tpu-v5p-8192", "tpu-v5p-12288"]),
    ("tpu-v5p-8960", ["tpu-v5p-17920", "tpu-v5p-8192", "tpu-v5p-12288"]),  # 8960 chips, then the sizes
    ("tpu-v5p-100000", ["tpu-v5p-17920"]),
    ("tpu-v6e-100", ["tpu-v6e-64", "tpu-v6e-128"]),
    ("tpu7x-100", ["tpu7x-64", "tpu7x-128"]),
    ("v5p-256", ["tpu-v5p-256"]),  # Google's accelerator type for ours
    ("tpu-v3-51", ["tpu-v3-512", "tpu-v3-32", "tpu-v3-128"]),  # a dropped digit first, then the sizes around
    ("tpu-v6e-265", ["tpu-v6e-256"]),  # two digits swapped; nothing larger than the pod
])
def test_unknown_names_suggest_the_nearest_sizes_of_the_generation(name, near):
    with pytest.raises(UnknownNameError) as exc:
        load_topology(name)
    msg = str(exc.value)
    assert f"did you mean {' or '.join(near)}?" in msg
    assert "tpu-v5p-8?" not in msg and "tpu-v5p-8 " not in msg


def test_a_chip_count_where_the_name_counts_tensorcores_is_said():
    with pytest.raises(UnknownNameError, match="8960 chips is tpu-v5p-17920"):
        load_topology("tpu-v5p-8960")


def test_a_shipped_file_wins_over_the_rule():
    # tpu-v5p-256.yaml cites its own sources; the rule gives the same slice
    topo = load_topology("tpu-v5p-256")
    assert "2 cubes" in topo.sources["shape"]


# TPU7x docs (docs.cloud.google.com/tpu/docs/tpu7x), typed here independently of chips.yaml: peak compute
# per chip (BF16) 2307 TFLOPs, (FP8) 4614 TFLOPs, HBM 192 GiB, 7380 GBps, 2 TensorCores per chip,
# bidirectional ICI 1200 GBps per chip, DCN 100 Gbps per chip.
def test_tpu7x_carries_the_docs_figures_with_sources():
    chip = load_chips()["tpu7x"]
    assert chip.cores_per_chip == 2
    assert chip.peak_flops == 2307e12 and chip.peak_fp8_flops == 4614e12
    assert chip.hbm_bytes == 192 * 2**30 and chip.hbm_Bps == 7380e9
    assert chip.link_Bps * 6 * 2 == pytest.approx(1200e9)
    assert chip.dcn_Bps == pytest.approx(100e9 / 8)
    assert chip.peak_int8_ops is None  # the docs give no int8 peak: quantization int8 is refused
    for key in ("cores_per_chip", "peak_bf16_TFLOPs", "peak_fp8_TFLOPs", "hbm_GiB", "hbm_GBps", "dcn_GBps"):
        assert "tpu7x" in chip.sources[key]
    for key in ("link_GBps", "onchip_GBps"):
        assert "uncertain" in chip.sources[key]


def test_megacore_is_refused_on_tpu7x():
    with pytest.raises(ConfigError, match="separate devices"):
        load_topology("tpu7x-128", megacore=True)


def test_describe_says_how_jax_counts_a_v5p_chip(capsys):
    assert main(["describe", "topology", "tpu-v5p-256", "--no-megacore"]) == 0
    out = capsys.readouterr().out
    assert "JAX counts the chip as one device" in out and "--megacore (the default" in out
    for megacore in (["--megacore"], []):  # a chip a device by default (megacore), as JAX counts it
        assert main(["describe", "topology", "tpu-v5p-256", *megacore]) == 0
        assert "JAX counts" not in capsys.readouterr().out
    assert main(["describe", "topology", "tpu7x-128"]) == 0  # two devices a chip: no megacore to offer
    assert "--megacore" not in capsys.readouterr().out
