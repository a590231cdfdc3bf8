"""Packaging: the wheel holds every shipped data file, and user files add to the shipped ones.

The top-level topologies/ and experiments/ folders are the source of truth; pyproject.toml maps
them into the wheel. The fast tests read pyproject.toml's own configuration and match it against
the files on disk; one test builds the wheel and compares its contents byte for byte. .ci/run
installs that wheel in a fresh venv outside the checkout and runs commands from there.
"""

import copy
from fnmatch import fnmatch
from pathlib import Path
import subprocess
import sys
import tomllib
import zipfile

import pytest
import yaml

from wus_sim.inputs.errors import UnknownNameError
from wus_sim.experiments.spec import find_experiment, known_experiments, load_experiment
from wus_sim.inputs.shipped import shipped_dir
from wus_sim.hardware.topology_files import TOPOLOGY_PATH_ENV, known_topologies, load_chips, load_topology
from wus_sim.inputs.units import GB

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
MAPPED = {"wus_sim.data.topologies": "topologies", "wus_sim.data.experiments": "experiments",
          "wus_sim.data.formats": "docs/formats"}


def package_dir(package):
    """Source folder of *package* under pyproject.toml's package-dir mapping."""
    mapped = CONFIG.get("package-dir", {}).get(package)
    return ROOT / (mapped if mapped is not None else package.replace(".", "/"))


def shipped_by_config(package, rel):
    """Whether pyproject.toml's package-data for *package* includes the file at *rel* (posix)."""
    return any(fnmatch(rel, pattern) or fnmatch(rel, pattern.replace("**/", ""))
               for pattern in CONFIG["package-data"].get(package, []))


def test_topologies_and_experiments_are_mapped_into_the_package():
    for package, folder in MAPPED.items():
        assert package in CONFIG["packages"]
        assert package_dir(package) == ROOT / folder


@pytest.mark.parametrize("folder", sorted(MAPPED.values()))
def test_package_data_covers_every_file_of_the_mapped_folders(folder):
    package = next(p for p, f in MAPPED.items() if f == folder)
    files = [p for p in (ROOT / folder).rglob("*") if p.is_file()]
    assert files
    missing = [str(p.relative_to(ROOT)) for p in files
               if not shipped_by_config(package, p.relative_to(ROOT / folder).as_posix())]
    assert missing == []


def test_package_data_covers_every_data_file_inside_the_package():
    files = [p for p in (ROOT / "wus_sim" / "data").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    missing = [str(p.relative_to(ROOT)) for p in files
               if not shipped_by_config("wus_sim", p.relative_to(ROOT / "wus_sim").as_posix())]
    assert missing == []


def test_every_python_package_is_listed():
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "wus_sim").rglob("__init__.py")}
    assert found == set(CONFIG["packages"]) - set(MAPPED)


def test_a_checkout_reads_the_top_level_folders():
    # the wheel's copies exist only in an installed package; a checkout must not grow stale ones
    assert shipped_dir("topologies") == ROOT / "topologies"
    assert shipped_dir("experiments") == ROOT / "experiments"
    assert shipped_dir("formats") == ROOT / "docs" / "formats"


def test_the_wheel_holds_exactly_the_shipped_files(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(tmp_path), str(ROOT)], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = tmp_path.glob("wus_sim-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        held = {name: zf.read(name) for name in zf.namelist()}
    for package, folder in MAPPED.items():
        prefix = package.replace(".", "/") + "/"
        in_wheel = {n[len(prefix):]: data for n, data in held.items() if n.startswith(prefix)}
        on_disk = {p.relative_to(ROOT / folder).as_posix(): p.read_bytes()
                   for p in (ROOT / folder).rglob("*") if p.is_file()}
        assert in_wheel == on_disk, folder
    for p in (ROOT / "wus_sim" / "data").rglob("*"):
        if p.is_file():
            assert held[p.relative_to(ROOT).as_posix()] == p.read_bytes()
    for p in (ROOT / "wus_sim" / "schemas").glob("*.json"):
        assert held[p.relative_to(ROOT).as_posix()] == p.read_bytes()
    assert not any(n.startswith(("topologies/", "experiments/", "tests/", "docs/")) for n in held)


# ------------------------------------------------------------ user files
V3 = yaml.safe_load((ROOT / "topologies" / "chips.yaml").read_text())["tpu-v3"]


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A WUS_SIM_TOPOLOGY_PATH folder: a new chip, a shipped chip with other figures, a new
    topology on the new chip, and a topology of a shipped name."""
    d = tmp_path / "mine"
    d.mkdir()
    chips = {"my-chip": {**copy.deepcopy(V3), "description": "test chip", "link_GBps": 7.0},
             "tpu-v3": {**copy.deepcopy(V3), "link_GBps": 25.0}}  # copies: no YAML anchors
    (d / "chips.yaml").write_text(yaml.safe_dump(chips))
    (d / "my-slice.yaml").write_text(yaml.safe_dump(
        {"chip": "my-chip", "chips_per_axis": [2, 3], "wraparound": [True, False]}))
    (d / "tpu-v3-8.yaml").write_text(yaml.safe_dump(
        {"chip": "tpu-v3", "chips_per_axis": [4, 1], "wraparound": False}))
    monkeypatch.setenv(TOPOLOGY_PATH_ENV, str(d))
    import wus_sim.inputs.shipped

    monkeypatch.setattr(wus_sim.inputs.shipped, "_NOTED", set())
    return d


def test_user_chips_add_to_the_shipped_ones(user_dir, capsys):
    chips = load_chips()
    shipped = yaml.safe_load((ROOT / "topologies" / "chips.yaml").read_text())
    assert set(chips) == set(shipped) | {"my-chip"}
    assert chips["my-chip"].link_Bps == 7.0 * GB
    assert chips["tpu-v3"].link_Bps == 25.0 * GB  # the user's entry wins...
    assert chips["tpu-v2"].link_Bps == shipped["tpu-v2"]["link_GBps"] * GB  # ...and only it changes
    err = capsys.readouterr().err
    assert "chip 'tpu-v3'" in err and "overrides the shipped one" in err and "my-chip" not in err
    load_chips()
    assert capsys.readouterr().err == ""  # said once


def test_user_topologies_add_to_the_shipped_ones(user_dir, capsys):
    names = known_topologies()
    assert "my-slice" in names and "tpu-v3-2048" in names
    mine = load_topology("my-slice")
    assert (mine.chip.name, mine.dims, mine.wrap) == ("my-chip", (2, 3), (True, False))
    assert "topology" not in capsys.readouterr().err  # a new name overrides nothing
    over = load_topology("tpu-v3-8")
    assert over.dims == (4, 1)
    err = capsys.readouterr().err
    assert "topology 'tpu-v3-8'" in err and str(user_dir) in err
    assert load_topology("tpu-v3-32").dims == (4, 4)  # shipped, on the user's tpu-v3 figures
    assert load_topology("tpu-v3-32").chip.link_Bps == 25.0 * GB


def test_chips_file_is_not_a_topology():
    with pytest.raises(UnknownNameError):
        load_topology("chips")


# ------------------------------------------------------------ experiments by name
def test_shipped_experiments_load_by_name():
    names = known_experiments()
    assert names == sorted(p.stem for p in (ROOT / "experiments").glob("*.yaml"))
    assert find_experiment("quickstart") == ROOT / "experiments" / "quickstart.yaml"
    assert load_experiment("quickstart").name == load_experiment(ROOT / "experiments" / "quickstart.yaml").name


def test_unknown_experiment_name_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match="quickstart"):
        find_experiment("quickstrat")
