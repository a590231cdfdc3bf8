"""The cost columns of a results row and the point key price_usd_per_chip_hour (issue 47, item 5):
chips x step_time_s x price / 3600, the price being the point's or else the chip's."""

import math

import pytest

from wus_sim.experiments.records import simulate_point
from wus_sim.inputs.errors import ConfigError
from wus_sim.experiments.results import columns
from wus_sim.experiments.spec import parse_experiment

POINT = {"workload": "llama3-8b", "topology": "tpu-v5p-8", "megacore": True, "global_batch": 4, "strategy": "sharded"}


def test_a_row_costs_its_step_at_the_chips_price_by_default():
    (row,) = simulate_point(POINT)
    assert row["price_usd_per_chip_hour"] == pytest.approx(13440 / 3200)  # v5p, us-east5, typed in test_todays_tpus
    hand = 4 * row["step_time_s"] * row["price_usd_per_chip_hour"] / 3600  # 4 chips in a v5p-8
    assert row["cost_usd_per_step"] == pytest.approx(hand, rel=1e-9)
    assert row["cost_usd_per_million_tokens"] == pytest.approx(hand / (4 * 8192) * 1e6, rel=1e-9)
    assert row["cost_usd_per_thousand_examples"] == pytest.approx(hand / 4 * 1000, rel=1e-9)


def test_the_points_price_replaces_the_chips_and_changes_no_time():
    (base,) = simulate_point(POINT)
    (row,) = simulate_point({**POINT, "price_usd_per_chip_hour": 1.5})
    assert row["step_time_s"] == base["step_time_s"] and row["price_usd_per_chip_hour"] == 1.5
    assert row["cost_usd_per_step"] == pytest.approx(4 * row["step_time_s"] * 1.5 / 3600, rel=1e-9)


def test_no_price_leaves_the_cost_columns_empty():
    (row,) = simulate_point({"workload": "resnet50", "topology": "torus:4x4", "strategy": "sharded"})
    assert all(math.isnan(row[k]) for k in ("price_usd_per_chip_hour", "cost_usd_per_step",
                                             "cost_usd_per_thousand_examples", "cost_usd_per_million_tokens"))


def test_the_price_sweeps_and_the_columns_are_documented():
    exp = parse_experiment({"name": "prices", "workloads": ["resnet50"], "topologies": ["tpu-v3-32"],
                            "sweep": {"price_usd_per_chip_hour": [1.0, 2.0]}})
    assert [p["price_usd_per_chip_hour"] for p in exp.points()] == [1.0, 2.0]
    documented = {c.name: c for c in columns()}
    for name in ("cost_usd_per_step", "cost_usd_per_million_tokens", "cost_usd_per_thousand_examples"):
        assert documented[name].unit == "USD" and "3600" in documented["cost_usd_per_step"].meaning
    with pytest.raises(ConfigError) as err:
        simulate_point({**POINT, "price_usd_per_chip_hour": -1})
    assert "price_usd_per_chip_hour" in str(err.value)
