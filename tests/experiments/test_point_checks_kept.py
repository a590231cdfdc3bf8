"""A sweep's point checks reuse the last point's passed values (records._check_keys): a value
that changed, or the same number as another type, is checked again, whatever passed before."""

import pytest

from wus_sim.experiments.records import _check_keys
from wus_sim.inputs.errors import ConfigError
from wus_sim.inputs.memo import memos_off

GOOD = {"workload": "resnet50", "topology": "tpu-v3-32", "per_replica_batch": 32, "link_GBps": 100.0,
        "wraparound": True}


@pytest.mark.parametrize("key, bad", [("per_replica_batch", True), ("per_replica_batch", 1.5),
                                      ("per_replica_batch", -3), ("link_GBps", -1.0), ("link_GBps", "100"),
                                      ("wraparound", 1)])
def test_a_value_that_failed_fails_after_a_point_that_passed(key, bad):
    assert _check_keys(GOOD)[key] == GOOD[key]
    with pytest.raises(ConfigError) as err:
        _check_keys({**GOOD, key: bad})
    assert err.value.key_path == key


def test_a_whole_float_batch_is_an_int_after_an_int_batch_too():
    # 32.0 equals 32 but is another type: checked again, and returned as the int the check makes
    assert _check_keys(GOOD)["per_replica_batch"].__class__ is int
    out = _check_keys({**GOOD, "per_replica_batch": 32.0})
    assert out["per_replica_batch"] == 32 and out["per_replica_batch"].__class__ is int


def test_with_memos_off_every_value_is_checked(monkeypatch):
    from wus_sim.training.parameters import param_checks

    calls = []
    real = param_checks._check_param
    monkeypatch.setattr(param_checks, "_check_param", lambda *a: calls.append(a[0].name) or real(*a))
    _check_keys(GOOD)
    _check_keys(GOOD)
    calls.clear()
    with memos_off():
        _check_keys(GOOD)
    assert calls.count("per_replica_batch") == 1 and calls.count("link_GBps") == 1
