"""Experiments: YAML sweeps over point parameters, run in parallel, written as documented tables.

* :mod:`.spec` -- the point-parameter table, experiment YAML validation, sweep expansion;
* :mod:`.runner` -- runs points in processes (or on Dask), journals them for ``--resume``;
* :mod:`.results` -- the documented column table, CSV/Parquet/columns.md writing;
* :mod:`.display` -- how a point parameter's value reads in a figure or a run's summary.

Importing this package loads no heavy dependency.
"""

from .results import columns, read_results
from .spec import POINT_KEYS, Experiment, load_experiment, parse_experiment, point_hash

__all__ = ["POINT_KEYS", "Experiment", "load_experiment", "parse_experiment", "point_hash", "columns",
           "read_results"]
