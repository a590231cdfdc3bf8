"""Grouping rows by the parameters that vary, a missing value included (plotting.labels._groups)."""

import math

import pandas as pd

from wus_sim.plotting.labels import _groups


def test_one_key_with_a_missing_value_is_a_group_of_its_own_in_sweep_order():
    """A price-less chip beside a priced one (price_usd_per_chip_hour 3.22 and empty): pandas 2.2, the
    oldest allowed, cannot iterate df.groupby(["price"], dropna=False), so these groups are made by hand."""
    df = pd.DataFrame({"price": [3.22, math.nan, 3.22, math.nan, 1.2], "step": [1, 2, 3, 4, 5]})
    got = [(k, list(g["step"])) for k, g in _groups(df, ["price"])]
    assert [k[0] for k, _ in got][0] == 3.22 and math.isnan(got[1][0][0]) and got[2][0] == (1.2,)
    assert [steps for _, steps in got] == [[1, 3], [2, 4], [5]]
    # two keys, and none: pandas' own grouping (the same shape)
    df["chip"] = ["v4", "generic", "v4", "generic", "v5e"]
    assert [list(g["step"]) for _, g in _groups(df, ["chip", "price"])] == [[1, 3], [2, 4], [5]]
    assert [(k, list(g["step"])) for k, g in _groups(df, [])] == [((), [1, 2, 3, 4, 5])]
