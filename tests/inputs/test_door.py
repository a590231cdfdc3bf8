"""The door's mechanism (wus_sim/inputs/door.py), on functions of its own: how a call is bound
and what each rule takes and refuses. Errors checked by class and by the argument named."""

import math
import os
from dataclasses import dataclass

import numpy as np
import pytest

from wus_sim.inputs import door
from wus_sim.inputs.errors import ConfigError


@door.checked(n=door.whole(1, 10), x=door.number(positive=True, nullable=True), on=door.flag(),
              label=door.name(nullable=True), fn=door.callback())
def f(n, x=None, *, on=False, label=None, fn=None):
    return n, x, on, label, fn


def test_values_pass_numpy_scalars_become_their_python_value():
    n, x, on, label, _ = f(np.uint8(7), np.float32(0.5), on=np.bool_(True), label=np.str_("a"))
    assert (n, x, on, label) == (7, 0.5, True, "a")
    assert type(n) is int and type(x) is float and type(on) is bool and type(label) is str


@pytest.mark.parametrize("arg, value", [("n", True), ("n", "3"), ("n", 1.5), ("n", 11), ("n", b"3"),
                                        ("x", math.inf), ("x", True), ("x", -1), ("on", 1), ("on", "yes"),
                                        ("label", b"a"), ("label", 5), ("label", ""), ("fn", 5), ("fn", "print")])
def test_a_wrong_value_is_one_config_error_naming_the_argument(arg, value):
    kwargs = {"n": 3, arg: value}
    with pytest.raises(ConfigError) as err:
        f(**kwargs)
    assert err.value.key_path == arg and "\n" not in str(err.value)


def test_a_long_value_is_cut_short():
    with pytest.raises(ConfigError) as err:
        f(3, label=b"x" * 10_000)
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("call, named", [(lambda: f(), "n"), (lambda: f(3, nn=1), "nn"),
                                         (lambda: f(3, 1.0, 2), "f"), (lambda: f(3, n=3), "f")])
def test_a_call_the_signature_cannot_take_is_one_config_error(call, named):
    with pytest.raises(ConfigError) as err:
        call()
    assert named in str(err.value)


def test_a_class_door_checks_its_fields():
    @door.checked(size=door.whole(1))
    @dataclass(frozen=True)
    class Thing:
        size: int = 1

    assert Thing(np.int64(4)).size == 4 and Thing().size == 1
    with pytest.raises(ConfigError, match="size"):
        Thing(size=True)
    assert door.rules_of(Thing).keys() == {"size"}


def test_open_and_closed_keywords():
    def g(a, **kw):
        return kw

    assert door.checked(g, b=door.flag())(1, b=True, c=5) == {"b": True, "c": 5}
    closed = door.checked(g, closed_keywords=True, b=door.flag())
    with pytest.raises(ConfigError, match="c"):
        closed(1, c=5)
    with pytest.raises(ConfigError, match="b"):
        closed(1, b="yes")


def test_out_file_rule(tmp_path):
    rule = door.out_file((".png",), what="figure")
    assert rule(tmp_path / "a.PNG", "path") == tmp_path / "a.PNG"
    for bad in (tmp_path / "a.xyz", tmp_path / "missing" / "a.png", tmp_path, b"a.png", 5):
        with pytest.raises(ConfigError) as err:
            rule(bad, "path")
        assert "path" in str(err.value)
    if os.path.exists("/dev/full"):
        with pytest.raises(ConfigError, match="path"):
            door.out_file()("/dev/full", "path")


def test_names_items_either_size():
    strategies = door.names(("a", "b"), "strategies")
    assert strategies(["a", np.str_("b")], "s") == ("a", "b")
    for bad in ([], "a", ["a", "a"], ["c"], [1], None):
        with pytest.raises(ConfigError):
            strategies(bad, "s")
    assert door.items(door.whole(0), "ids", empty=True)(np.array([1, 2]), "ids") == (1, 2)
    size = door.size(2**50)
    assert size("64MiB", "nbytes") == "64MiB" and size(np.uint32(5), "nbytes") == 5
    for bad in (True, "64M", 0, 2**51, math.nan, b"1"):
        with pytest.raises(ConfigError, match="nbytes"):
            size(bad, "nbytes")
