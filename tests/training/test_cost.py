"""What a step costs (wus_sim/training/cost.py): chips x seconds x US dollars per chip-hour / 3600,
per million tokens for the workloads counted in tokens, per 1,000 examples for every workload."""

import math

from hypothesis import given, settings, strategies as st
import pytest

from wus_sim.hardware.topology_files import load_chips, load_topology
from wus_sim.inputs.errors import ConfigError
from wus_sim.model.workload_files import load_workload
from wus_sim.training.cost import Price, billed_chips, chip_price, cost_columns, step_cost_usd

LLAMA = load_workload("llama3-8b")   # 8,192 tokens a sequence (its max_target_length)
RESNET = load_workload("resnet50")   # images: no tokens


@settings(max_examples=60, deadline=None)
@given(chips=st.integers(1, 20_000), t=st.floats(1e-6, 1e4), price=st.floats(0.01, 100), batch=st.integers(1, 2**16))
def test_a_step_costs_chips_times_seconds_times_the_hourly_price(chips, t, price, batch):
    cols = cost_columns(Price("x", price, "typed"), chips, t, batch, LLAMA)
    hand = chips * t * price / 3600  # a chip-hour is 3,600 chip-seconds
    assert cols["cost_usd_per_step"] == pytest.approx(hand, rel=1e-12)
    assert cols["cost_usd_per_million_tokens"] == pytest.approx(hand / (batch * 8192) * 1e6, rel=1e-12)
    assert cols["cost_usd_per_thousand_examples"] == pytest.approx(hand / batch * 1000, rel=1e-12)


def test_a_workload_not_counted_in_tokens_has_a_cost_per_example_only():
    cols = cost_columns(Price("x", 2.0, "typed"), 16, 0.5, 1024, RESNET)
    assert cols["cost_usd_per_step"] == pytest.approx(16 * 0.5 * 2.0 / 3600)
    assert cols["cost_usd_per_million_tokens"] is None
    assert cols["cost_usd_per_thousand_examples"] == pytest.approx(16 * 0.5 * 2.0 / 3600 / 1024 * 1000)


@pytest.mark.parametrize("price,t", [(None, 1.0), (2.0, math.nan), (2.0, None)])
def test_no_price_or_no_time_is_no_cost_never_an_invented_one(price, t):
    assert set(cost_columns(Price("x", price, "none"), 4, t, 8, LLAMA).values()) == {None}
    assert step_cost_usd(4, t, price) is None


def test_the_price_is_the_chips_own_unless_a_run_sets_one():
    v5p = load_chips()["tpu-v5p"]
    own = chip_price(v5p)
    assert own.usd_per_chip_hour == v5p.price_usd_per_chip_hour and own.source == v5p.sources["price_usd_per_chip_hour"]
    mine = chip_price(v5p, 2.5, override_by="--price-per-chip-hour")
    assert mine.usd_per_chip_hour == 2.5 and mine.source == "--price-per-chip-hour 2.5"
    none = chip_price(load_chips()["generic"])
    assert not none.known and "generic" in none.source


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True, "4"])
def test_a_price_that_is_no_price_is_refused_naming_its_option(bad):
    with pytest.raises(ConfigError) as err:
        chip_price(load_chips()["tpu-v5p"], bad, override_by="--price-per-chip-hour")
    assert err.value.key_path == "--price-per-chip-hour"


def test_every_chip_of_every_slice_is_billed_whatever_the_devices():
    # v5p-8: 4 chips of 2 TensorCores (Cloud TPU v5p docs), megacore or not
    assert billed_chips(load_topology("tpu-v5p-8")) == 4 == billed_chips(load_topology("tpu-v5p-8", megacore=True))
    assert billed_chips(load_topology("tpu-v6e-8"), 3) == 24
