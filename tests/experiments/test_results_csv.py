"""results.csv is written column by column (results.csv_text), not by DataFrame.to_csv: the text
must be pandas' own, byte for byte, for every kind of column a results table has and any value
(floats written as pandas writes them: the shortest text that reads back as the same double)."""

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from wus_sim.experiments.results import csv_text

floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, -0.0, 1e-05, 1e-4, 1e16, 1e15, 0.1 + 0.2, 5e-324, 1 / 3, 100.0]))
texts = st.one_of(st.none(), st.text(max_size=12),
                  st.sampled_from(["", "a,b", 'say "hi"', "two\nlines", "cr\rhere", " padded ", "ünï", "F,F"]))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_csv_text_is_what_pandas_writes(data):
    n = data.draw(st.integers(0, 6))
    frame = pd.DataFrame({
        "x": pd.Series(data.draw(st.lists(floats, min_size=n, max_size=n)), dtype="float64"),
        "count": pd.Series(data.draw(st.lists(st.one_of(st.none(), st.integers(-2**40, 2**40)), min_size=n,
                                              max_size=n)), dtype="Int64"),
        "flag": pd.Series(data.draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)),
                          dtype="boolean"),
        "name": pd.Series(data.draw(st.lists(texts, min_size=n, max_size=n)), dtype="string"),
        "inferred text": pd.Series(data.draw(st.lists(st.one_of(st.text(max_size=5), st.just(math.nan)), min_size=n,
                                                      max_size=n)), dtype="str"),
    })
    assert csv_text(frame) == frame.to_csv(index=False)


def test_a_column_of_another_kind_is_written_by_pandas():
    frame = pd.DataFrame({"x": [1.5, np.nan], "when": pd.to_datetime(["2026-12-02", None]), "i": np.array([1, 2])})
    assert csv_text(frame) == frame.to_csv(index=False)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_long_columns_of_few_values_are_what_pandas_writes(data):
    # a sweep's columns: hundreds of rows drawing from a handful of values (each value's text is
    # then made once and shared), with NaN, -0.0 beside 0.0, and text that needs quotes
    n = data.draw(st.integers(65, 400))
    few_floats = data.draw(st.lists(floats, min_size=1, max_size=6))
    few_texts = data.draw(st.lists(texts, min_size=1, max_size=4))
    pick = st.integers(0, 10**6)
    frame = pd.DataFrame({
        "x": pd.Series([few_floats[data.draw(pick) % len(few_floats)] for _ in range(n)], dtype="float64"),
        "y": pd.Series(np.linspace(0.0, 1.0, n), dtype="float64"),  # every value its own
        "name": pd.Series([few_texts[data.draw(pick) % len(few_texts)] for _ in range(n)], dtype="string"),
    })
    assert csv_text(frame) == frame.to_csv(index=False)


@given(st.lists(st.one_of(st.none(), texts), max_size=5))
def test_a_one_column_frame_is_what_pandas_writes(values):
    frame = pd.DataFrame({"name": pd.Series(values, dtype="string")})
    assert csv_text(frame) == frame.to_csv(index=False)
