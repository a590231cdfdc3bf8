"""Issue 45's API example of the importer: ``import_workload``'s arguments at the door.

Checked by class (a WusError) and by the argument the message names, not by whole strings."""

import os

import pytest

import wus_sim
from wus_sim import WusError

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "data", "hf_configs", "llama3-8b.json")


@pytest.mark.parametrize("out", [5, True, b"w.yaml", ""])
def test_import_workload_out_of_the_wrong_type(out):
    """``import_workload(cfg, out=5)`` was pathlib's TypeError after the import."""
    with pytest.raises(WusError) as err:
        wus_sim.import_workload(CONFIG, out=out)
    assert "out" in str(err.value)


@pytest.mark.parametrize("name", ["w.xyz", "w.json", "folder/"])
def test_import_workload_out_must_be_a_workload_yaml_to_write(tmp_path, name):
    with pytest.raises(WusError) as err:
        wus_sim.import_workload(CONFIG, out=tmp_path / name)
    assert "out" in str(err.value)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_import_workload_out_to_a_device_is_refused_before_the_import():
    with pytest.raises(WusError) as err:
        wus_sim.import_workload(CONFIG, out="/dev/full")
    assert "out" in str(err.value)


@pytest.mark.parametrize("arg, value", [("path", b"config.json"), ("path", None), ("sequence_length", True),
                                        ("sequence_length", "4096"), ("name", 5), ("name", b"x")])
def test_import_workload_arguments_are_named_when_wrong(arg, value):
    kwargs = {"path": CONFIG, arg: value}
    with pytest.raises(WusError) as err:
        wus_sim.import_workload(**kwargs)
    assert arg in str(err.value)


def test_import_workload_still_writes_a_yaml(tmp_path):
    w = wus_sim.import_workload(CONFIG, out=tmp_path / "w.yaml")
    assert (tmp_path / "w.yaml").is_file() and w.tensors
