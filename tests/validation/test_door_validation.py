"""Issue 45's API example of the validation layer: the validation plot's file at the door.

Checked by class (a WusError) and by the argument the message names, not by whole strings."""

import os

import pytest

import wus_sim
from wus_sim import WusError
from wus_sim.validation.measured import load_measured


@pytest.fixture(scope="module")
def rows():
    return wus_sim.validate(runs=load_measured()[:2])


@pytest.mark.parametrize("name", ["v.xyz", "v.svg", "v", "v.png.tmp"])
def test_plot_validation_to_a_file_it_does_not_write_is_refused(tmp_path, rows, name):
    """``plot_validation(rows, 'v.xyz')`` wrote a PNG under a name that says otherwise."""
    with pytest.raises(WusError) as err:
        wus_sim.plot_validation(rows, tmp_path / name)
    assert "path" in str(err.value)
    assert not (tmp_path / name).exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("path", ["/dev/full", b"v.png", 5])
def test_plot_validation_path_must_be_a_file_to_write(rows, path):
    with pytest.raises(WusError) as err:
        wus_sim.plot_validation(rows, path)
    assert "path" in str(err.value)


def test_plot_validation_writes_a_png(tmp_path, rows):
    wus_sim.plot_validation(rows, tmp_path / "v.PNG")
    assert (tmp_path / "v.PNG").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("arg, value", [("runs", 5), ("runs", [5]), ("measured", b"x.csv"), ("network", 5),
                                        ("calibration", 5), ("topology_overrides", "x")])
def test_validate_arguments_are_named_when_wrong(arg, value):
    with pytest.raises(WusError) as err:
        wus_sim.validate(**{arg: value})
    assert arg in str(err.value)
