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
import functools
from operator import is_

__all__ = ["IdentityMemo", "clear_memos", "files_fixed", "fixed_while_running", "memos_off", "memos_on"]

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
        """``compute()``, or its result for the same *objects* (by identity) and *key* (by value);
        a *key* that cannot be hashed (a malformed argument) is computed afresh, not kept."""
        if not _ON[0]:
            return compute()
        k = (tuple(map(id, objects)), key)
        try:
            hit = self._entries.get(k)
        except TypeError:  # unhashable: compute() says what is wrong with it, or works uncached
            return compute()
        # (map over operator.is_: no generator frame; a sweep point makes about a hundred lookups)
        if hit is not None and all(map(is_, hit[0], objects)):
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


def memos_on():
    """Whether memoized results may be kept and reused (not inside :func:`memos_off`)."""
    return _ON[0]


@contextmanager
def memos_off():
    """Inside: every memoized function computes afresh and stores nothing (the reference that
    the shared results are compared with)."""
    _ON[0] = False
    try:
        yield
    finally:
        _ON[0] = True


_FIXED = [None]
"""While :func:`files_fixed` is in force: ``{(loader, arguments): result}``; else ``None``."""

_MISSING = object()


@contextmanager
def files_fixed():
    """Inside: a named input (a slice, workload, optimizer or calibration file) loaded once is not
    looked up again: a loader wrapped by :func:`fixed_while_running` and called again with the same
    arguments returns what it returned the first time, without the file-system calls that find
    and check the file (a search of every folder, a stat, a resolve: about a sixth of a what-if
    point). A sweep runs its points under it, a chunk of points at a time: the run's inputs are
    the files as they were when it started (the journal's model fingerprint hashes them then),
    so an edit in the middle of a run is not half-seen. Forgotten when the outermost one ends."""
    outer = _FIXED[0]
    if outer is None:
        _FIXED[0] = {}
    try:
        yield
    finally:
        if outer is None:
            _FIXED[0] = None


def fixed_while_running(loader):
    """Decorator: *loader*'s results are kept while :func:`files_fixed` is in force, for calls
    whose first argument is a name or path (text) or ``None`` and whose arguments are hashable
    (a loaded object passed in, or a list, goes straight to *loader*). Errors are not kept."""

    @functools.wraps(loader)
    def wrapper(*args, **kwargs):
        table = _FIXED[0]
        if table is None or not _ON[0] or (args and not (args[0] is None or isinstance(args[0], str))):
            return loader(*args, **kwargs)
        key = (loader, args, tuple(sorted(kwargs.items())))
        try:
            hit = table.get(key, _MISSING)
        except TypeError:  # an unhashable override (a per-axis list): not kept
            return loader(*args, **kwargs)
        if hit is _MISSING:
            hit = table[key] = loader(*args, **kwargs)
        return hit

    return wrapper
