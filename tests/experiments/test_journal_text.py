"""A worker writes its points' journal JSON (rundir.journal_text) and the parent only the head:
the line must be the one the parent writes alone, byte for byte, and read back as the entry."""

import json
import math

from hypothesis import given, settings, strategies as st

from wus_sim.experiments.rundir import _Journal, journal_text, read_journal

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=8))
rows = st.lists(st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=6).map(
    lambda r: {**r, "status": "ok"}), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(point=st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=6), rows=rows,
       wall_s=st.floats(0, 10), index=st.integers(0, 10**6))
def test_a_line_from_a_workers_text_is_the_parents_own(tmp_path_factory, point, rows, wall_s, index):
    folder = tmp_path_factory.mktemp("journal")
    outcome = {"rows": rows, "wall_s": wall_s}
    entry = {"hash": "0123456789abcdef", "index": index, "model": "sim:feedface", "point": point, **outcome}
    alone, shared = _Journal(folder / "alone.jsonl", fresh=True), _Journal(folder / "shared.jsonl", fresh=True)
    alone.append(entry)
    shared.append(entry, journal_text(point, outcome))
    alone.close()
    shared.close()
    line = (folder / "alone.jsonl").read_text()
    assert (folder / "shared.jsonl").read_text() == line
    # and the line is the entry, whatever the parent's head holds: json's own text of it
    assert line == json.dumps(entry, separators=(",", ":")) + "\n"
    back = read_journal(folder / "shared.jsonl")["0123456789abcdef"]
    assert back["index"] == index and back["point"].keys() == point.keys()
    assert all(math.isnan(v) if isinstance(v, float) and v != v else back["point"][k] == v for k, v in point.items())
