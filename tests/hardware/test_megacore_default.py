"""A device is what JAX counts (issue 47 item 2): on TPU v4 and v5p a chip by default (megacore, its
two TensorCores one device), ``--no-megacore`` (point key ``megacore: false``) for one per
TensorCore; elsewhere a TensorCore. The reference is JAX's own table of chips,
``jax.experimental.pallas.tpu.ChipVersion`` (docs.jax.dev, "Megacore support": v4 and v5p yes;
v2, v3, v5e, v6e, 7x no), typed here, not read from chips.yaml."""

import json

import pytest

from helpers.run_cli import run
from wus_sim.experiments.records import simulate_point
from wus_sim.hardware.topology_files import load_chips, load_topology
from wus_sim.inputs.errors import ConfigError

JAX_MEGACORE = {"tpu-v2": False, "tpu-v3": False, "tpu-v4": True, "tpu-v5e": False, "tpu-v5p": True,
                "tpu-v6e": False, "tpu7x": False}


@pytest.mark.parametrize("chip, megacore", sorted(JAX_MEGACORE.items()))
def test_chips_yaml_records_which_chips_jax_counts_as_one_device(chip, megacore):
    got = load_chips()[chip]
    assert got.megacore is megacore
    if megacore:
        assert got.cores_per_chip == 2 and "ChipVersion" in got.sources["megacore"]


@pytest.mark.parametrize("name, chips, cores", [("tpu-v5p-128", 64, 128), ("tpu-v4-32", 16, 32),
                                                ("tpu-v6e-256", 256, 256)])
def test_the_default_is_the_chips_device(name, chips, cores):
    # the API's load_topology keeps the slice's hardware (one replica per TensorCore) unless asked
    assert load_topology(name).num_replicas == cores
    assert load_topology(name, megacore=None).num_replicas == chips
    if chips != cores:
        assert load_topology(name, megacore=True).num_replicas == chips
        # cores_per_chip given: the file's cores decide, not the chip's default
        assert load_topology(name, megacore=None, cores_per_chip=2).num_replicas == cores


def test_megacore_still_refused_where_jax_has_none():
    with pytest.raises(ConfigError, match="separate devices"):
        load_topology("tpu7x-128", megacore=True)
    assert load_topology("tpu7x-128", megacore=None).num_replicas == load_topology("tpu7x-128").num_replicas


def _replicas(*args):
    rc, out, err = run("step", "llama3-8b", "-t", "tpu-v5p-128", "--global-batch", "256", "--json", *args)
    assert rc == 0, err
    return json.loads(out)["replicas"]


def test_step_counts_a_v5p_chip_as_one_device_unless_told_otherwise():
    # tpu-v5p-128: 64 chips of 2 TensorCores
    assert _replicas() == _replicas("--megacore") == 64
    assert _replicas("--no-megacore") == 128
    assert _replicas("--megacore", "--no-megacore") == 128  # the last one given wins


def test_a_point_without_megacore_takes_the_chips_default():
    base = {"workload": "transformer-big", "topology": "tpu-v4-32", "per_replica_batch": 8}
    rows = {m: simulate_point({**base, **({} if m is None else {"megacore": m})}) for m in (None, True, False)}
    replicas = {m: {r["replicas"] for r in rs} for m, rs in rows.items()}
    assert replicas == {None: {16}, True: {16}, False: {32}}
    assert [r["step_time_s"] for r in rows[None]] == [r["step_time_s"] for r in rows[True]]
    # the row says what ran: the chip's default written out
    assert {m: {r["megacore"] for r in rs} for m, rs in rows.items()} == {None: {True}, True: {True}, False: {False}}
