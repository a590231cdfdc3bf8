"""Issue 45's API examples of the experiments layer: experiments, points and runs at the door.

Checked by class (a WusError) and by the argument the message names, not by whole strings."""

import numpy as np
import pytest

import wus_sim
from wus_sim import WusError

POINT = {"workload": "ncf", "topology": "tpu-v3-8", "strategy": "replicated"}


@pytest.mark.parametrize("path", [b"quickstart", None, 5, True, ""])
def test_load_experiment_of_what_is_not_a_name_or_path(path):
    """``load_experiment(b'quickstart')`` and ``load_experiment(None)`` were pathlib's TypeError."""
    with pytest.raises(WusError) as err:
        wus_sim.load_experiment(path)
    assert "path" in str(err.value)


def test_simulate_point_takes_numpy_unsigned_integers_as_their_value():
    """``simulate_point(pt('bucket_MiB', np.uint8(25)))`` overflowed (25 * 2^20 in a uint8): it is 25."""
    rows = wus_sim.simulate_point({**POINT, "bucket_MiB": np.uint8(25)})
    assert rows == wus_sim.simulate_point({**POINT, "bucket_MiB": 25})
    assert rows[0]["bucket_MiB"] == 25


@pytest.mark.parametrize("key, value", [("per_replica_batch", np.uint16(8)), ("steps", np.int8(3)),
                                        ("link_GBps", np.float32(50)), ("megacore", np.bool_(False))])
def test_simulate_point_numpy_scalars_are_their_values(key, value):
    assert wus_sim.simulate_point({**POINT, key: value}) == wus_sim.simulate_point({**POINT, key: value.item()})


@pytest.fixture(scope="module")
def quickstart():
    return wus_sim.load_experiment("quickstart")


@pytest.mark.parametrize("arg", ["on_results", "point_fn"])
@pytest.mark.parametrize("value", [5, "print", True])
def test_run_experiment_callbacks_must_be_callable(tmp_path, quickstart, arg, value):
    """``run_experiment(..., on_results=5)`` ran the whole sweep, then failed calling 5."""
    with pytest.raises(WusError) as err:
        wus_sim.run_experiment(quickstart, tmp_path / "out", **{arg: value})
    assert arg in str(err.value)
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.parametrize("arg, value", [("jobs", True), ("jobs", np.float64(1.5)), ("resume", "yes"),
                                        ("limit", b"1"), ("scheduler", 5), ("out_dir", b"out"),
                                        ("progress", "no")])
def test_run_experiment_arguments_are_named_when_wrong(tmp_path, quickstart, arg, value):
    kwargs = {"out_dir": tmp_path / "out", arg: value}
    with pytest.raises(WusError) as err:
        wus_sim.run_experiment(quickstart, **kwargs)
    assert arg in str(err.value)
