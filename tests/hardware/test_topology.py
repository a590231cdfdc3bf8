"""Invariants of the static torus/mesh structure (no SimPy)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import ConfigError, UnknownNameError
from wus_sim.hardware.topology import Topology
from wus_sim.hardware.topology_files import known_topologies, load_chips, load_topology

shapes = st.lists(st.integers(1, 9), min_size=1, max_size=3)


def make(dims, wrap):
    return Topology("t", load_chips()["generic"], dims=tuple(dims), wrap=tuple(wrap))


@settings(max_examples=60, deadline=None)
@given(dims=shapes, data=st.data())
def test_link_counts_and_degrees(dims, data):
    wrap = data.draw(st.lists(st.booleans(), min_size=len(dims), max_size=len(dims)))
    t = make(dims, wrap)
    # a line of d chips has d-1 cables, a ring of d>1 chips has d; each cable is 2 directed links
    expected = 0
    for axis, d in enumerate(dims):
        lines = t.num_chips // d
        cables = (d if (wrap[axis] and d > 1) else d - 1) * lines
        expected += 2 * cables
    assert t.num_links == expected
    # every existing link's reverse exists: links are full duplex
    for link, src, dst, axis, direction in t.links():
        back = int(t.link_id(dst, axis, -direction))
        assert t.link_exists[back] and t.link_dst[back] == src


@settings(max_examples=60, deadline=None)
@given(dims=shapes, data=st.data())
def test_routes_are_shortest_dimension_order(dims, data):
    wrap = data.draw(st.lists(st.booleans(), min_size=len(dims), max_size=len(dims)))
    t = make(dims, wrap)
    src = data.draw(st.integers(0, t.num_chips - 1))
    dst = data.draw(st.integers(0, t.num_chips - 1))
    path = t.route(src, dst)
    cur = src
    for link in path:
        assert t.link_exists[link] and t.link_src[link] == cur
        cur = t.link_dst[link]
    assert cur == dst
    cs, cd = t.coords[src], t.coords[dst]
    expect = 0
    for axis, d in enumerate(dims):
        delta = abs(int(cd[axis] - cs[axis]))
        expect += min(delta, d - delta) if wrap[axis] else delta
    assert len(path) == expect
    axes = [t.link_axis[l] for l in path]
    assert axes == sorted(axes)


def test_axis_rings_are_lines_of_neighbours():
    t = make((4, 3, 2), (True, False, True))
    for axis in range(3):
        rings = t.axis_rings(axis)
        assert rings.shape == (t.num_chips // t.dims[axis], t.dims[axis])
        assert sorted(rings.ravel()) == list(range(t.num_chips))
        for ring in rings:
            for a, b in zip(ring[:-1], ring[1:]):
                assert t.neighbor(a, axis, +1) == b


def test_networkx_export_is_a_torus():
    nx = pytest.importorskip("networkx")
    t = make((5, 4), (True, True))
    g = nx.Graph(t.to_networkx())
    assert nx.is_isomorphic(g, nx.grid_2d_graph(5, 4, periodic=True))


def test_every_shipped_topology_loads_and_is_consistent():
    names = known_topologies()
    assert "tpu-v3-2048" in names and "tpu-v4-4096" in names
    for name in names:
        t = load_topology(name)
        assert t.num_replicas == t.num_chips * t.cores_per_chip
    pod = load_topology("tpu-v3-2048")
    assert pod.dims == (32, 32) and pod.wrap == (True, True) and pod.num_replicas == 2048
    # v3-N means N cores
    for n in (8, 32, 128, 256, 512, 1024, 2048, 4096, 8192):
        assert load_topology(f"tpu-v3-{n}").num_cores == n


@pytest.mark.parametrize("name,host_bounds,chips_per_host", [
    # MLPerf v0.7 run scripts (mlcommons/training_results_v0.7): deepsea_host_bounds (x, y, z)
    # times deepsea_chips_per_host_bounds, deepsea_wrap=false,true,false
    ("tpu-v3-4096", (16, 16, 1), (4, 2, 1)),   # Google/benchmarks/ssd/tpu-v3-4096-JAX
    ("tpu-v3-8192", (32, 16, 1), (4, 2, 1)),   # Google/benchmarks/bert/tpu-v3-8192-JAX
])
def test_v3_multipods_follow_the_mlperf_v07_flags(name, host_bounds, chips_per_host):
    t = load_topology(name)
    chips = tuple(h * c for h, c in zip(host_bounds, chips_per_host))[:2]  # z is 1
    assert t.dims == chips and t.wrap == (False, True)  # only the pod-wide 32-chip axis wraps
    hosts = host_bounds[0] * host_bounds[1]
    # 8 chips per host; Google/systems/*.json: 256 (512) nodes x 8 accelerators
    assert t.num_chips == hosts * 8 == {"tpu-v3-4096": 256, "tpu-v3-8192": 512}[name] * 8
    # v3-N counts cores: 2 per chip, one replica each (ResNet v0.7 TF: num_replicas=8192)
    assert t.num_cores == t.num_replicas == 2 * t.num_chips == int(name.rsplit("-", 1)[1])
    # a mesh axis has no wraparound link: 2 * (dx - 1) * dy directed links on x, 2 * dx * dy on y
    dx, dy = chips
    assert t.num_links == 2 * (dx - 1) * dy + 2 * dx * dy


def test_inline_and_overrides():
    t = load_topology("torus:4x4x4", link_GBps=50, hop_latency_us=2)
    assert t.dims == (4, 4, 4) and all(t.wrap) and t.cores_per_chip == 1
    assert np.allclose(t.axis_link_Bps, 50e9) and t.hop_latency_s == pytest.approx(2e-6)
    m = load_topology("mesh:8x8")
    assert not any(m.wrap)
    w = load_topology("tpu-v3-32", wraparound=True)
    assert w.wrap == (True, True)


def test_bad_names_are_clear():
    with pytest.raises(UnknownNameError, match="tpu-v3-2048"):
        load_topology("tpu-v9-1")
    with pytest.raises(ConfigError, match="torus:32x32"):
        load_topology("torus:32x")


def test_slow_link_override():
    t = load_topology("torus:4x4")
    slow = t.with_link_bandwidth([0], 1e9)
    assert slow.link_Bps[0] == 1e9 and t.link_Bps[0] == 100e9


def test_topologies_are_equal_and_hash_by_value():
    """Slices built separately are one cache key; their words (sources, description) are not
    part of the value, every figure is."""
    from dataclasses import replace

    from wus_sim.inputs.memo import memos_off

    a = load_topology("tpu-v3-32")
    assert load_topology("tpu-v3-32") is a  # a sweep's points share the slice read from its file
    with memos_off():
        b = load_topology("tpu-v3-32")
    assert a is not b and a == b and hash(a) == hash(b) and len({a, b}) == 1
    worded = replace(a, sources={"shape": "another citation"}, description="other words")
    assert worded == a and hash(worded) == hash(a)
    for changed in (load_topology("tpu-v3-32", link_GBps=50), load_topology("tpu-v3-32", hop_latency_us=2),
                    load_topology("tpu-v3-32", wraparound=True), a.with_link_bandwidth([0], 1e9),
                    load_topology("tpu-v3-128")):
        assert changed != a


@pytest.mark.parametrize("key, value", [("wraparound", [True]), ("wraparound", [True, False, True]),
                                        ("link_GBps", [100.0]), ("link_GBps", [100.0, 50.0, 25.0])])
def test_a_per_axis_override_names_every_axis_or_none(key, value):
    """An override list shorter or longer than the slice's axes is an error naming the rule
    (it was spread over the axes, or a numpy broadcast traceback), not a silent guess."""
    with pytest.raises(ConfigError, match=rf"{key}: .* must be one value for every axis or a list of 2 "
                                          r"\(one per axis of tpu-v3-32, 4x4\)"):
        load_topology("tpu-v3-32", **{key: value})


def test_per_axis_overrides_apply_axis_by_axis():
    topo = load_topology("tpu-v3-32", wraparound=[True, False], link_GBps=[100.0, 50.0])
    assert topo.wrap == (True, False) and topo.axis_link_Bps == (100e9, 50e9)
    assert load_topology("tpu-v3-32", wraparound=True, link_GBps=70).wrap == (True, True)


@pytest.mark.parametrize("written,shown", [("-100", "-100"), ("fast", "'fast'"), (".inf", "inf"), (".nan", "nan"),
                                           ("[100, -1]", "[100, -1]"), ("[100, 100, 100]", "[100, 100, 100]")])
def test_a_bad_link_bandwidth_in_a_file_is_quoted_as_written(tmp_path, written, shown):
    """The error quotes the file's value: a scalar -100 was shown as [-100, -100], a list
    the user never wrote; inf and nan get the same rule as any other bad bandwidth."""
    path = tmp_path / "mine.yaml"
    path.write_text(f"chip: tpu-v3\nchips_per_axis: [4, 4]\nwraparound: false\nlink_GBps: {written}\n")
    with pytest.raises(ConfigError) as err:
        load_topology(str(path))
    assert str(err.value) == f"{path}: link_GBps: {shown} must be a number >= 0.001 and <= 1e+06 or a list of 2 of them"


def test_a_topology_file_error_quotes_booleans_as_the_yaml_has_them(tmp_path):
    """The file says ``[true, false, true]``; the error said Python's ``[True, False, True]``."""
    path = tmp_path / "odd.yaml"
    path.write_text("chip: tpu-v3\nchips_per_axis: [4, 4]\nwraparound: [true, false, true]\n")
    with pytest.raises(ConfigError) as info:
        load_topology(str(path))
    assert "wraparound: [true, false, true] must be" in str(info.value)
    with pytest.raises(ConfigError, match=r"wraparound: \[null\] must be"):
        path.write_text("chip: tpu-v3\nchips_per_axis: [4, 4]\nwraparound: [~]\n")
        load_topology(str(path))
