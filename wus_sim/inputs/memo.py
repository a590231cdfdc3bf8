"""Memos that let the points of a sweep share work: results of pure functions of inputs that
the points have in common (a loaded workload, an optimizer's analysis, a sharding plan, a
strategy's update work), kept per process.

Why: a what-if sweep varies scalars (link bandwidth, batch, MXU efficiency) over the same
few workloads, slices and optimizers; each point used to load, analyse and plan them again,
most of its time. The functions memoized here depend only on their arguments, and their
results are treated as read-only (frozen dataclasses), so a memoized result is the value a
point would compute itself: results do not move (tests/experiments/test_shared_work.py
compares a sweep with the point-by-point run, every memo cleared before each point).

Objects compare by identity (:class:`IdentityMemo`): a plan or an analysis is hashed by who
it is, not by its value, which would cost what the memo saves. The memo keeps a reference
to every object of a key, so an id is never reused while its entry lives; entries beyond
``maxsize`` go oldest first.
"""

from contextlib import contextmanager

__all__ = ["IdentityMemo", "clear_memos", "memos_off"]

_MEMOS = []
"""Every :class:`IdentityMemo`, for :func:`clear_memos`."""

_ON = [True]


class IdentityMemo:
    """Results of a pure function, keyed by some objects' identity and a hashable rest."""

    def __init__(self, maxsize=256):
        self.maxsize = maxsize
        self._entries = {}
        _MEMOS.append(self)

    def get(self, objects, key, compute):
        """``compute()``, or its result for the same *objects* (by identity) and *key* (by value)."""
        if not _ON[0]:
            return compute()
        k = (tuple(map(id, objects)), key)
        hit = self._entries.get(k)
        if hit is not None and all(a is b for a, b in zip(hit[0], objects)):
            return hit[1]
        value = compute()
        if len(self._entries) >= self.maxsize:
            self._entries.pop(next(iter(self._entries)))
        self._entries[k] = (tuple(objects), value)
        return value

    def clear(self):
        self._entries.clear()


def clear_memos():
    """Forget every memoized result (benchmarks and the point-by-point comparison start cold)."""
    for memo in _MEMOS:
        memo.clear()


@contextmanager
def memos_off():
    """Inside: every memoized function computes afresh and stores nothing (the reference that
    the shared results are compared with)."""
    _ON[0] = False
    try:
        yield
    finally:
        _ON[0] = True
