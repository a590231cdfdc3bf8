"""Validation data: measured step times that simulated ones are compared against.

* :mod:`.measured` -- Google's MLPerf v0.6 TPU-v3 step times (shipped CSV), :func:`load_measured`.
"""

from .measured import MeasuredRun, load_measured

__all__ = ["MeasuredRun", "load_measured"]
