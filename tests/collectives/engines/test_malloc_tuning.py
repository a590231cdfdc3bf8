"""malloc_tuning: set once per process, a no-op elsewhere than glibc, and no time changes."""

import platform

import pytest

from wus_sim.collectives.engines import malloc_tuning


def test_set_once_and_idempotent():
    first = malloc_tuning.keep_freed_memory()
    assert malloc_tuning.keep_freed_memory() is first  # a second call changes nothing
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert first is True  # glibc accepts both thresholds (mallopt returns 1)


def test_other_libraries_do_nothing(monkeypatch):
    monkeypatch.setattr(malloc_tuning, "_state", {"done": False})
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("musl", "1.2"))
    assert malloc_tuning.keep_freed_memory() is False


@pytest.mark.parametrize("threshold", [malloc_tuning.MMAP_THRESHOLD_BYTES, malloc_tuning.TRIM_THRESHOLD_BYTES])
def test_thresholds_fit_mallopt_int(threshold):
    assert 0 < threshold < 2**31  # mallopt takes an int
