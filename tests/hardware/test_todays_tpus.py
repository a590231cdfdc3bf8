"""TPU v5p and v6e, slice names as Google writes them, and DCN figures from chips.yaml."""

import re
import subprocess
import sys

import pytest

from wus_sim.cli import main
from wus_sim.hardware.multislice import load_multislice
from wus_sim.hardware.topology_files import RENAMED, known_topologies, load_chips, load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.inputs.units import GB, GiB


# Cloud TPU docs, typed here independently of chips.yaml: cloud.google.com/tpu/docs/v5p ("peak compute per
# chip (BF16) 459", "HBM capacity per chip (GiB) 95", "HBM bandwidth per chip (GBps) 2765", "TensorCores per
# chip 2", "bidirectional ICI bandwidth per chip (GBps) 1200", "DCN bandwidth per chip (Gbps) 50") and
# cloud.google.com/tpu/docs/v6e (918 TFLOPs, 32 GB, 1640 GBps, one TensorCore, 4 ICI ports, 800 GBps
# bidirectional ICI per chip, DCN 25.6 Tbps per 256-chip pod).
DATASHEET = {
    "tpu-v5p": dict(cores=2, tflops=459, hbm_gib=95, hbm_gbps=2765, ici_bidir_gbps=1200, ports=6, dcn_gbps=50 / 8),
    "tpu-v6e": dict(cores=1, tflops=918, hbm_gib=32, hbm_gbps=1640, ici_bidir_gbps=800, ports=4, dcn_gbps=25.6e3 / 256 / 8),
}


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_chips_carry_the_cloud_tpu_figures_with_sources(name):
    chip, d = load_chips()[name], DATASHEET[name]
    assert chip.cores_per_chip == d["cores"]
    assert chip.peak_flops == d["tflops"] * 1e12
    assert chip.hbm_bytes == d["hbm_gib"] * GiB and chip.hbm_Bps == d["hbm_gbps"] * GB
    # per link and direction: the bidirectional per-chip figure over ports x 2 directions
    assert chip.link_Bps == pytest.approx(d["ici_bidir_gbps"] * GB / d["ports"] / 2)
    assert chip.dcn_Bps == pytest.approx(d["dcn_gbps"] * GB)
    for key in ("peak_bf16_TFLOPs", "hbm_GiB", "hbm_GBps", "link_GBps", "dcn_GBps", "cores_per_chip"):
        assert "Cloud TPU" in chip.sources[key], key


def test_every_shipped_chip_but_generic_has_a_cited_dcn_figure():
    chips = load_chips()
    for name, chip in chips.items():
        if name == "generic":
            assert chip.dcn_Bps is None
            continue
        assert chip.dcn_Bps > 0 and chip.sources.get("dcn_GBps"), name


@pytest.mark.parametrize("name", [n for n in known_topologies() if re.fullmatch(r"tpu-v[0-9][a-z]?-[0-9]+", n)])
def test_slice_names_count_as_google_counts(name):
    """v2/v3/v4/v5p names count TensorCores (two per chip), v5e/v6e names count chips."""
    gen, n = re.fullmatch(r"tpu-(v[0-9][a-z]?)-([0-9]+)", name).groups()
    t = load_topology(name)
    if gen in ("v5e", "v6e"):
        assert t.num_chips == int(n) and t.chip.cores_per_chip == 1
    else:
        assert t.num_chips * t.chip.cores_per_chip == int(n) and t.chip.cores_per_chip == 2


@pytest.mark.parametrize("name, dims, wrap", [
    ("tpu-v4-8", (2, 2, 1), False), ("tpu-v4-128", (4, 4, 4), True), ("tpu-v4-1024", (8, 8, 8), True),
    ("tpu-v4-4096", (8, 16, 16), True), ("tpu-v4-8192", (16, 16, 16), True),
    ("tpu-v5p-8", (2, 2, 1), False), ("tpu-v5p-128", (4, 4, 4), True), ("tpu-v5p-512", (4, 8, 8), True),
    ("tpu-v5p-2048", (8, 8, 16), True), ("tpu-v6e-8", (2, 4), False), ("tpu-v6e-256", (16, 16), True),
])
def test_shapes_and_wraparound_as_cloud_tpu_documents(name, dims, wrap):
    # Cloud TPU v4 docs: a 3-D torus on slices of whole 4x4x4 cubes, a mesh below one cube
    t = load_topology(name)
    assert t.dims == dims and all(w == wrap for w in t.wrap)
    assert t.num_replicas == t.num_chips * 2 if name.startswith(("tpu-v4", "tpu-v5p")) else t.num_chips


@pytest.mark.parametrize("old, chips, new", [("tpu-v4-64", 32, "tpu-v4-128"), ("tpu-v4-512", 256, "tpu-v4-1024")])
def test_an_old_name_is_googles_slice_again_and_says_so(old, chips, new):
    # refused from wus-sim 0.2 (they had meant the 64- and 512-chip slices); now Google's v4-64 and v4-512
    assert not RENAMED
    # --no-megacore: the slice's TensorCores (a v4 chip is one device by default, as JAX counts it)
    run = subprocess.run([sys.executable, "-m", "wus_sim", "describe", "topology", old, "--no-megacore"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and f"{chips:,} x 2 cores" in run.stdout
    assert new in run.stderr and "before wus-sim 0.2" in run.stderr


def test_a_name_whose_meaning_changed_says_so():
    run = subprocess.run([sys.executable, "-m", "wus_sim", "describe", "topology", "tpu-v4-4096", "--no-megacore"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "2,048 x 2 cores" in run.stdout
    assert "tpu-v4-8192" in run.stderr and "4096-chip pod" in run.stderr


@pytest.mark.parametrize("topology, gbps, source", [
    ("tpu-v5p-128", 6.25, "Cloud TPU v5p docs"), ("tpu-v6e-256", 12.5, "Cloud TPU v6e docs"),
    ("tpu-v5e-256", 3.125, "Cloud TPU v5e docs"),
])
def test_multislice_dcn_comes_from_the_chip(topology, gbps, source):
    _, ms = load_multislice(topology, slices=2)
    assert ms.dcn_Bps == pytest.approx(gbps * GB) and source in ms.sources["dcn_GBps"]


def test_a_user_chip_without_dcn_figure_shows_the_assumption(tmp_path, monkeypatch, capsys):
    (tmp_path / "chips.yaml").write_text(
        "my-chip:\n  cores_per_chip: 1\n  peak_bf16_TFLOPs: 100\n  hbm_GiB: 16\n  hbm_GBps: 800\n"
        "  link_GBps: 50\n  hop_latency_us: 1\n  onchip_GBps: 100\n")
    (tmp_path / "my-4x4.yaml").write_text("chip: my-chip\nchips_per_axis: [4, 4]\nwraparound: true\n")
    monkeypatch.setenv("WUS_SIM_TOPOLOGY_PATH", str(tmp_path))
    assert main(["step", "resnet50", "--topology", "my-4x4", "--slices", "2"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "multislice" in x)
    assert "6.25 GB/s per chip" in line and "assumption: chip my-chip has no dcn_GBps" in line


# On-demand US dollars per chip-hour, typed here from the sources themselves (not from chips.yaml):
# Cloud TPU pricing page (cloud.google.com/tpu/pricing) as web.archive.org kept it and Epoch AI
# transcribed it (github.com/epoch-research/training-cost-trends, data/Hardware prices.csv):
# v2 1.13 (2018-10-09, US), v3 2.00 (2021-11-17, us-central1), v4 3.22 (2025-03-03, us-central2-b),
# v5e 1.20 and v6e 2.70 (2025-03-03, us-central1 / East US); v5p 4.20: the billing catalog in
# SkyPilot's GCP catalog (skypilot-org/skypilot-catalog, catalogs/v7/gcp/vms.csv: tpu-v5p-6400,
# 3,200 chips, $13,440 an hour in us-east5).
PRICES = {"tpu-v2": 1.13, "tpu-v3": 2.00, "tpu-v4": 3.22, "tpu-v5e": 1.20, "tpu-v5p": 13440 / 3200, "tpu-v6e": 2.70}


@pytest.mark.parametrize("name", sorted(PRICES))
def test_each_chip_has_its_public_price_cited_with_region_and_date(name):
    chip = load_chips()[name]
    assert chip.price_usd_per_chip_hour == pytest.approx(PRICES[name])
    source = chip.sources["price_usd_per_chip_hour"]
    assert "on-demand" in source and "read 2026-12-07" in source
    assert any(region in source for region in ("US", "us-central1", "us-central2", "us-east5")), source
    assert "cloud.google.com/tpu" in source or "billing catalog" in source


def test_a_chip_without_a_published_price_has_none():
    chips = load_chips()
    assert chips["tpu7x"].price_usd_per_chip_hour is None and chips["generic"].price_usd_per_chip_hour is None
    assert set(PRICES) | {"tpu7x", "generic"} == set(chips)
