"""A run's results frame, assembled from its journal entries in point order: each simulated row
with the run's columns (experiment, point index and hash, the point's wall time) in front and
the slice's columns filled where the simulator did not report them.

Why a module: a sweep's 200,000 rows were first copied into 200,000 new dicts of a hundred keys
each (a gigabyte of allocations) only to be read once by pandas; the rows are now read as they
are and the run's columns set as whole columns, with the same values and types (tested against
the row-by-row assembly, which stays for rows that carry a run column themselves)."""

from .results import to_frame

__all__ = ["RUN_KEYS", "SLICE_KEYS", "results_frame"]

RUN_KEYS = ("experiment", "point_index", "point_hash", "wall_s")
"""Columns the runner puts in front of every row (a row's own value wins)."""

SLICE_KEYS = ("replicas", "cores", "chips", "chip", "dims", "ndim", "wrap")
"""The slice's columns (:func:`~wus_sim.experiments.records.slice_columns`), filled from the
point's topology where a row has none (an error row, an older journal's row)."""


def results_frame(name, hashes, points, done, slice_columns):
    """The results frame of experiment *name*: for each point (*hashes*, *points*, in order) the
    rows of its journal entry ``done[hash]``; *slice_columns(point, cache)* gives the slice's
    columns of a point (``{}`` where its topology does not load)."""
    import pandas as pd

    from .results import _as_dtype, _cells_as_text, column

    entries = [done[h] for h in hashes]
    rows = [row for entry in entries for row in entry["rows"]]
    if not all(row.__class__ is dict and row.keys().isdisjoint(RUN_KEYS) for row in rows):
        return to_frame(_full_rows(name, hashes, points, entries, slice_columns))
    counts = [len(entry["rows"]) for entry in entries]
    cache, fills = {}, {}  # slice key -> {row position: value} where a row has none
    position = 0
    for point, count in zip(points, counts):
        for offset in range(count):
            row = rows[position + offset]
            missing = [k for k in SLICE_KEYS if row.get(k) is None]
            if missing:
                info = slice_columns(point, cache)
                for k in missing:
                    if k in info:
                        fills.setdefault(k, {})[position + offset] = info[k]
        position += count
    frame = to_frame(rows)
    run = {"experiment": [name] * len(rows),
           "point_index": [i for i, count in enumerate(counts) for _ in range(count)],
           "point_hash": [h for h, count in zip(hashes, counts) for _ in range(count)],
           "wall_s": [entry["wall_s"] for entry in entries for _ in entry["rows"]]}
    for key, values in run.items():
        frame[key] = _as_dtype(pd.Series(values), column(key).dtype).array
    for key, at in fills.items():
        # typed again from the cells the row-by-row frame holds (the row's own, the slice's where
        # the row has none), as pandas reads them: filling in a column already typed from the rows
        # alone differs where pandas read it otherwise (an int 0 among missing cells is 0.0 and
        # its text '0.0'; beside the slice's text it stays 0, '0')
        cells = [{key: at[i]} if i in at else {key: row[key]} if key in row else {} for i, row in enumerate(rows)]
        frame[key] = _as_dtype(_cells_as_text(pd.DataFrame(cells, columns=[key])[key]), column(key).dtype).array
    return frame


def _full_rows(name, hashes, points, entries, slice_columns):
    """Every row as one new dict: the run's columns, the row, the slice's columns where the row
    has none (the assembly :func:`results_frame` matches)."""
    rows, cache = [], {}
    for index, (h, point, entry) in enumerate(zip(hashes, points, entries)):
        slice_info = slice_columns(point, cache)
        for row in entry["rows"]:
            full = {"experiment": name, "point_index": index, "point_hash": h, "wall_s": entry["wall_s"], **row}
            for k, v in slice_info.items():
                if full.get(k) is None:
                    full[k] = v
            rows.append(full)
    return rows
