"""Issue 45's API example of the collectives layer: a collective's arguments at the door.

Checked by class (a WusError) and by the argument the message names, not by whole strings."""

import numpy as np
import pytest

import wus_sim
from wus_sim import WusError

API = ["collective_time", "analytic_time", "simulate_collective"]


@pytest.fixture(scope="module")
def topo():
    return wus_sim.load_topology("tpu-v3-8")


@pytest.mark.parametrize("fn", API)
@pytest.mark.parametrize("value", ["yes", "true", 1, None, b"yes"])
def test_bidirectional_must_be_a_bool(topo, fn, value):
    """``collective_time(..., bidirectional='yes')`` ran one direction or both on the text's truth."""
    with pytest.raises(WusError) as err:
        getattr(wus_sim, fn)(topo, "all-reduce", "2d", 2**20, bidirectional=value)
    assert "bidirectional" in str(err.value)


@pytest.mark.parametrize("fn", API)
@pytest.mark.parametrize("arg, value", [("nbytes", True), ("nbytes", b"64MiB"), ("chunks", True), ("chunks", 1.5),
                                        ("op", 5), ("algorithm", b"2d"), ("routing", 5), ("topology", 5),
                                        ("reduce_Bps", float("inf"))])
def test_each_argument_is_named_when_wrong(topo, fn, arg, value):
    kwargs = {**dict(topology=topo, op="all-reduce", algorithm="2d", nbytes=2**20), arg: value}
    with pytest.raises(WusError) as err:
        getattr(wus_sim, fn)(**kwargs)
    assert arg in str(err.value)


def test_numpy_scalars_follow_their_value(topo):
    plain = wus_sim.collective_time(topo, "all-reduce", "2d", 2**20, bidirectional=True, chunks=2)
    numpy = wus_sim.collective_time(topo, "all-reduce", "2d", np.uint32(2**20), bidirectional=np.bool_(True),
                                    chunks=np.uint8(2))
    assert numpy == plain
