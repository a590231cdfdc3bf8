"""`wus-sim --version`, `wus-sim list KIND` and `wus-sim describe topology NAME [--json]`.

Expected values come from the files on disk and from closed forms (link counts of a torus),
not from the code under test.
"""

import importlib.metadata
import json
import math
from pathlib import Path

import pytest
import yaml

from wus_sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
CHIPS = yaml.safe_load((ROOT / "topologies" / "chips.yaml").read_text())


def run_cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own exits (--version, usage errors)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_version_is_the_installed_distributions(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0
    assert out.strip() == f"wus-sim {importlib.metadata.version('wus-sim')}"


def stems(folder, skip=()):
    return sorted(p.stem for p in folder.glob("*.yaml") if p.stem not in skip)


# the files, and every Cloud TPU slice by its name (built from its shape: tests/data/cloud_tpu_slices.csv)
CLOUD_NAMES = [line.split(",")[1] for line in (ROOT / "tests" / "data" / "cloud_tpu_slices.csv").read_text().splitlines()[1:]]
TOPOLOGIES = sorted(set(stems(ROOT / "topologies", skip=("chips",))) | set(CLOUD_NAMES))


@pytest.mark.parametrize("kind, expected", [
    ("topologies", TOPOLOGIES),
    ("workloads", stems(ROOT / "wus_sim" / "data" / "workloads")),
    ("experiments", stems(ROOT / "experiments")),
])
def test_list_prints_the_shipped_names(capsys, kind, expected):
    code, out, _ = run_cli(capsys, "list", kind)
    assert code == 0
    assert out.split() == expected


def test_list_optimizers_marks_the_prefixes(capsys):
    code, out, _ = run_cli(capsys, "list", "optimizers")
    assert code == 0
    listed = out.split()
    # every optimizer file is listed once, a gradient prefix (clip) as +NAME after the optimizers
    assert sorted(n.lstrip("+") for n in listed) == stems(ROOT / "wus_sim" / "data" / "optimizers")
    assert "adam" in listed and "+clip" in listed and "clip" not in listed


def test_list_unknown_kind_exits_2(capsys):
    code, _, err = run_cli(capsys, "list", "chips")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "topologies" in err


def directed_links(dims, wrap):
    """Closed form: a ring of d > 1 chips has d cables, a line d - 1; each cable is 2 directed links."""
    chips = math.prod(dims)
    return 2 * sum((d if (w and d > 1) else d - 1) * (chips // d) for d, w in zip(dims, wrap))


@pytest.mark.parametrize("name", stems(ROOT / "topologies", skip=("chips",)))
def test_describe_topology_json_matches_its_files(capsys, name):
    # --no-megacore: the file's cores (a v4 or v5p chip is one device by default, as JAX counts it)
    code, out, _ = run_cli(capsys, "describe", "topology", name, "--json", "--no-megacore")
    assert code == 0
    d = json.loads(out)
    doc = yaml.safe_load((ROOT / "topologies" / f"{name}.yaml").read_text())
    chip = CHIPS[doc["chip"]]
    dims = doc["chips_per_axis"]
    wrap = doc["wraparound"] if isinstance(doc["wraparound"], list) else [doc["wraparound"]] * len(dims)
    cores_per_chip = doc.get("cores_per_chip", chip["cores_per_chip"])
    assert d["shape"] == dims and d["wraparound"] == wrap
    assert d["chips"] == math.prod(dims) and d["cores"] == math.prod(dims) * cores_per_chip
    assert d["directed_links"] == directed_links(dims, wrap)
    assert d["chip"]["name"] == doc["chip"]
    assert d["chip"]["peak_bf16_TFLOPs"] == chip["peak_bf16_TFLOPs"]
    link = doc.get("link_GBps", chip["link_GBps"])
    assert d["link_GBps"] == pytest.approx(link if isinstance(link, list) else [link] * len(dims))
    assert d["hop_latency_us"] == pytest.approx(doc.get("hop_latency_us", chip["hop_latency_us"]))
    # every figure has a source; the slice's own citations are passed through unchanged
    for key in ("link_GBps", "hop_latency_us", "onchip_GBps", "cores_per_chip", "peak_bf16_TFLOPs", "hbm_GiB"):
        assert d["sources"][key]
    for key, citation in doc.get("sources", {}).items():
        assert d["sources"][key] == citation
    if "link_GBps" not in doc and "link_GBps" in chip.get("sources", {}):
        assert d["sources"]["link_GBps"] == chip["sources"]["link_GBps"]


def test_describe_topology_cites_a_figure_the_slice_sets(capsys, tmp_path):
    path = tmp_path / "fast.yaml"
    path.write_text(yaml.safe_dump({"chip": "tpu-v3", "chips_per_axis": [4, 2], "wraparound": [True, False],
                                    "link_GBps": [150, 50], "sources": {"link_GBps": "a what-if"}}))
    d = json.loads(run_cli(capsys, "describe", "topology", str(path), "--json")[1])
    assert d["link_GBps"] == [150, 50] and d["sources"]["link_GBps"] == "a what-if"
    assert d["sources"]["hop_latency_us"] == CHIPS["tpu-v3"]["sources"]["hop_latency_us"]
    path.write_text(yaml.safe_dump({"chip": "tpu-v3", "chips_per_axis": [4], "wraparound": True, "link_GBps": 150}))
    d = json.loads(run_cli(capsys, "describe", "topology", str(path), "--json")[1])
    assert "no source" in d["sources"]["link_GBps"]  # not the chip's citation for a figure it did not give


def test_describe_topology_text_says_wraparound_per_axis(capsys):
    code, out, _ = run_cli(capsys, "describe", "topology", "tpu-v3-4096")
    assert code == 0
    assert "axis 0: no wrap" in out and "axis 1: wraps" in out
    assert "4,096 cores" in out and "deepsea_wrap" in out  # the file's own citation


def test_describe_topology_without_name_lists_them(capsys):
    code, out, _ = run_cli(capsys, "describe", "topology")
    assert code == 0 and out.split() == TOPOLOGIES


def test_describe_unknown_topology_exits_2_naming_the_known_ones(capsys):
    code, _, err = run_cli(capsys, "describe", "topology", "tpu-v3-33")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "tpu-v3-32" in err


def test_describe_topology_shows_the_multislice_a_file_declares(capsys):
    # tpu-v5e-256x2 is two 256-chip slices over the DCN: 512 replicas, not the one slice's 256.
    doc = yaml.safe_load((ROOT / "topologies" / "tpu-v5e-256x2.yaml").read_text())
    section = doc["multislice"]
    chips = math.prod(doc["chips_per_axis"]) * section["slices"]
    code, out, _ = run_cli(capsys, "describe", "topology", "tpu-v5e-256x2", "--json")
    assert code == 0
    ms = json.loads(out)["multislice"]
    assert ms["slices"] == section["slices"] == 2
    assert ms["dcn_GBps"] == pytest.approx(section["dcn_GBps"])
    assert ms["dcn_latency_us"] == pytest.approx(section["dcn_latency_us"])
    assert ms["chips"] == chips and ms["cores"] == chips * CHIPS[doc["chip"]]["cores_per_chip"]
    code, out, _ = run_cli(capsys, "describe", "topology", "tpu-v5e-256x2")
    assert code == 0 and "2 slices" in out and f"{chips:,} replicas" in out and "3.125 GB/s" in out
    # one slice: no multislice
    code, out, _ = run_cli(capsys, "describe", "topology", "tpu-v5e-256", "--json")
    assert json.loads(out)["multislice"] is None


@pytest.mark.parametrize("section, where", [
    ({"slices": 0}, "multislice.slices"),
    ({"dcn_GBps": 3}, "multislice"),
    ({"slices": 2, "dcn_GBps": 0}, "multislice.dcn_GBps"),
])
def test_describe_topology_checks_the_multislice_section(capsys, tmp_path, section, where):
    path = tmp_path / "ms.yaml"
    path.write_text(yaml.safe_dump({"chip": "tpu-v3", "chips_per_axis": [4, 4], "wraparound": True,
                                    "multislice": section}))
    code, _, err = run_cli(capsys, "describe", "topology", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"ms.yaml: {where}:" in err


@pytest.mark.parametrize("extra, key, words", [
    ("chips_per_axis: [100000, 100000]\n", "chips_per_axis", ["10,000,000,000", "65,536"]),
    ("chips_per_axis: [256, 256]\ncores_per_chip: 64\n", "cores_per_chip", ["4,194,304", "131,072"]),
])
def test_a_topology_file_over_a_size_limit_names_the_file_and_key(capsys, tmp_path, extra, key, words):
    """256 x 256 chips x 64 cores = 4,194,304 replicas; 10^5 x 10^5 = 10^10 chips."""
    path = tmp_path / "huge.yaml"
    path.write_text("name: huge\nchip: generic\nwraparound: true\n" + extra)
    assert main(["describe", "topology", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}: {key}: " in err and "over the limit" in err
    assert all(w in err for w in words)
