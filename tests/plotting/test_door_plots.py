"""Issue 45's API examples of the plotting layer: plots and their folder at the door.

Checked by class (a WusError) and by the argument the message names, not by whole strings."""

import os

import pandas as pd
import pytest

import wus_sim
from wus_sim import WusError


@pytest.fixture(scope="module")
def plots():
    return wus_sim.default_plots(wus_sim.load_experiment("quickstart"))


@pytest.fixture(scope="module")
def results():
    row = wus_sim.simulate_point({"workload": "ncf", "topology": "tpu-v3-8"})
    return pd.DataFrame(row)


@pytest.mark.parametrize("value", [5, "speedup", None, [5], ["speedup"], b"x"])
def test_save_plots_of_what_is_not_a_list_of_plots(tmp_path, results, value):
    """``save_plots(5, ...)`` was a TypeError (an int is not iterable)."""
    with pytest.raises(WusError) as err:
        wus_sim.save_plots(value, results, tmp_path)
    assert "plots" in str(err.value)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_save_plots_to_dev_full_is_one_error_not_a_list_of_warnings(plots, results):
    """``save_plots(..., '/dev/full')`` skipped every plot with a warning and returned []."""
    with pytest.raises(WusError) as err:
        wus_sim.save_plots(plots, results, "/dev/full")
    assert "out_dir" in str(err.value)


@pytest.mark.parametrize("out_dir", ["missing/folder", b"out", 5])
def test_save_plots_folder_must_be_one(tmp_path, plots, results, out_dir):
    out_dir = tmp_path / out_dir if isinstance(out_dir, str) else out_dir
    with pytest.raises(WusError) as err:
        wus_sim.save_plots(plots, results, out_dir)
    assert "out_dir" in str(err.value)


@pytest.mark.parametrize("arg, value", [("on_skip", 5), ("df", [1, 2]), ("chosen", 5)])
def test_save_plots_other_arguments(tmp_path, plots, results, arg, value):
    kwargs = {**dict(plots=plots, df=results, out_dir=tmp_path), arg: value}
    with pytest.raises(WusError) as err:
        wus_sim.save_plots(**kwargs)
    assert arg in str(err.value)


def test_save_plots_still_draws_into_a_folder(tmp_path, plots, results):
    written = wus_sim.save_plots(list(plots), results, tmp_path, on_skip=lambda plot, why: None)
    assert all(p.exists() for p in written)
