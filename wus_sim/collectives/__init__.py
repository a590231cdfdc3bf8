"""Collectives over TPU slices: reduce-scatter, all-gather, all-reduce.

(Public names are filled in as the modules land.)
"""

__all__ = []
