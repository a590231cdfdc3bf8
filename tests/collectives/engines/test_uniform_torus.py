"""The plain-Python collectives on a uniform torus (wus_sim.collectives.engines.uniform_torus), which
``wus-sim collective --json`` runs before numpy loads: the same record, bit for bit, as the fast
engine through simulate_collective on many shapes, ops, algorithms, groups, sizes, chunks and
both routings; the SimPy reference's times; the textbook ring formulas; numpy's summation."""

import math
import random

import numpy as np
import pytest

from wus_sim.collectives import simulate_collective
from wus_sim.collectives.engines import uniform_torus
from wus_sim.hardware.topology_files import load_topology

OPS = ("reduce-scatter", "all-gather", "all-reduce")
SHAPES = ("torus:2", "torus:3", "torus:8", "torus:1x6", "torus:2x2", "torus:3x5", "torus:4x4", "torus:16x8",
          "torus:7x1x3", "torus:2x3x4", "torus:3x3x3", "torus:4x4x4", "torus:5x2", "torus:2x2x2", "torus:3x1x4")
KEYS = ("group_size", "time_s", "analytic_time_s", "exact", "events", "max_link_bytes", "total_link_bytes")


def _lean(spec, gbps, us, op, alg, S, group=None, bidirectional=False, chunks=1):
    dims = load_topology(spec).dims
    axis = None if group is None else "xyz".index(group)
    return uniform_torus.run(dims, gbps * 1e9, us * 1e-6, op, alg, S, axis=axis, bidirectional=bidirectional,
                             chunks=chunks)


def _general(spec, gbps, us, op, alg, S, group=None, bidirectional=False, chunks=1, routing="cut-through",
             engine="auto"):
    topo = load_topology(spec, link_GBps=gbps, hop_latency_us=us)
    return simulate_collective(topo, op, alg, S, group=group, bidirectional=bidirectional, chunks=chunks,
                               routing=routing, engine=engine)


def _cases(seed, count):
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        spec = rng.choice(SHAPES)
        ndim = spec.count("x") + 1
        group = rng.choice([None, None, *"xyz"[:ndim]])
        alg = rng.choice(["ring", "bidir-ring", "2d"])
        out.append((spec, rng.choice([100.0, 37.5, 0.3, 1234.5]), rng.choice([1.0, 0.0, 2.7, 0.013]),
                    rng.choice(OPS), alg, rng.choice([64 * 2**20, 1000.0, 12345678.0, 3.0]), group,
                    rng.random() < 0.4, rng.choice([1, 1, 2, 3, 8])))
    return out


@pytest.mark.parametrize("case", _cases(0, 160), ids=lambda c: "-".join(map(str, c)))
def test_the_same_record_as_the_fast_engine_bit_for_bit(case):
    lean = _lean(*case)
    spec, *_, group, _, _ = case
    dims = load_topology(spec).dims
    if group is not None and dims["xyz".index(group)] == 1:  # a group of one chip
        assert lean is None
        return
    assert lean is not None
    for routing in ("cut-through", "store-and-forward"):
        r = _general(*case, routing=routing)
        assert r.engine == "fast"
        full = r.to_dict()
        for key in KEYS:
            assert lean[key] == full[key] and type(lean[key]) is type(full[key]), (key, lean[key], full[key])


@pytest.mark.parametrize("spec", ["torus:32x32", pytest.param("torus:256x256", marks=pytest.mark.slow),
                                  pytest.param("torus:64x32x32", marks=pytest.mark.slow), "torus:1024", "torus:33x17",
                                  "torus:2x3x5", "torus:9x9x9", "torus:64x64",
                                  pytest.param("torus:128x128", marks=pytest.mark.slow)])
def test_large_slices_bit_for_bit(spec):
    dims = load_topology(spec).dims
    # the fast engine runs a whole-slice ring's every member, one step at a time: minutes at 65,536
    snake = math.prod(dims) <= 16384 and sum(d > 1 for d in dims) > 1
    for op, alg, bidir, K, group in (("all-reduce", "2d", False, 1, None), ("all-reduce", "2d", True, 4, None),
                                     ("reduce-scatter", "2d", False, 2, None), ("all-gather", "ring", True, 1, "x"),
                                     *([("all-reduce", "ring", False, 1, None),
                                        ("reduce-scatter", "bidir-ring", False, 2, None)] if snake else [])):
        lean = _lean(spec, 100.0, 1.0, op, alg, 64 * 2**20, group=group, bidirectional=bidir, chunks=K)
        full = _general(spec, 100.0, 1.0, op, alg, 64 * 2**20, group=group, bidirectional=bidir, chunks=K).to_dict()
        assert {k: lean[k] for k in KEYS} == {k: full[k] for k in KEYS}


@pytest.mark.parametrize("case", _cases(1, 24), ids=lambda c: "-".join(map(str, c)))
def test_against_the_simpy_reference(case):
    """SimPy runs every message; its times equal the fast engine's to rounding, its events and
    link bytes exactly."""
    lean = _lean(*case)
    if lean is None:
        return
    for routing in ("cut-through", "store-and-forward"):
        ref = _general(*case, routing=routing, engine="simpy").to_dict()
        assert math.isclose(lean["time_s"], ref["time_s"], rel_tol=1e-12)
        assert lean["events"] == ref["events"]
        assert math.isclose(lean["total_link_bytes"], ref["total_link_bytes"], rel_tol=1e-12)
        assert lean["max_link_bytes"] == pytest.approx(ref["max_link_bytes"], rel=1e-12)


@pytest.mark.parametrize("X,Y", [(32, 32), (3, 5), (8, 2), (6, 1)])
@pytest.mark.parametrize("bidir", [False, True])
def test_2d_all_reduce_is_the_textbook_sum_of_its_rings(X, Y, bidir):
    """Reduce-scatter along X, all-reduce along Y on S/X, all-gather along X: a ring of n
    members on a buffer B takes (n-1)(alpha + B/(n bw)) per half (Thakur et al. 2005); both
    directions carry half the buffer each."""
    S, bw, alpha = 64 * 2**20, 100e9, 1e-6
    dirs = 2 if bidir else 1

    def ring(n, B, halves):
        return halves * (n - 1) * (alpha + B / dirs / n / bw) if n > 1 else 0.0

    expected = ring(X, S, 2) + ring(Y, S / X, 2) if Y > 1 else ring(X, S, 2)
    lean = _lean(f"torus:{X}x{Y}", 100.0, 1.0, "all-reduce", "2d", S, bidirectional=bidir)
    assert lean["time_s"] == pytest.approx(expected, rel=1e-12)
    assert lean["analytic_time_s"] == pytest.approx(expected, rel=1e-12)
    # every chip sends on one edge per direction at each of the 2(X-1) + 2(Y-1) steps
    assert lean["events"] == X * Y * dirs * (2 * (X - 1) + (2 * (Y - 1) if Y > 1 else 0))
    # an X link carries 2(X-1) pieces of S/(X dirs): (X-1)/X of S each way, twice
    assert lean["max_link_bytes"] == pytest.approx(max(2 * (X - 1) * S / X / dirs,
                                                       2 * (Y - 1) * S / X / Y / dirs), rel=1e-12)


def test_chunks_pipeline_a_ring_pass():
    """K pieces queue back to back on each link: a reduce-scatter over n members with a piece
    time s = B/(n K bw) and alpha per hop takes (n-2) max(K s, s + alpha) + K s + alpha."""
    n, S, bw, alpha, K = 8, 2**20, 100e9, 1e-6, 4
    s = S / n / K / bw
    expected = (n - 2) * max(K * s, s + alpha) + K * s + alpha
    lean = _lean(f"torus:{n}", 100.0, 1.0, "reduce-scatter", "ring", S, chunks=K)
    assert lean["time_s"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("dims,op,alg,kwargs", [
    ((4, 4), "all-reduce", "2d-split", {}),
    ((4, 4), "all-reduce", "halving-doubling", {}),
    ((4, 1), "all-reduce", "2d", {"axis": 1}),     # a group of one chip
    ((4, 4), "all-reduce", "2d", {"axis": 2}),     # no such axis
    ((1,), "all-reduce", "2d", {}),                # nothing to do
    ((4, 4), "broadcast", "2d", {}),
    ((4, 4), "all-reduce", "2d", {"chunks": 0}),
])
def test_what_it_does_not_run(dims, op, alg, kwargs):
    assert uniform_torus.run(dims, 1e11, 1e-6, op, alg, 2.0**20, **kwargs) is None


@pytest.mark.parametrize("n,period", [(1, 1), (7, 3), (8, 4), (9, 4), (127, 6), (128, 4), (129, 6), (4096, 4),
                                      (8193, 6), (262144, 4), (393216, 6), (65536, 1)])
def test_pairwise_sum_is_numpys(n, period):
    rng = np.random.default_rng(n)
    values = (rng.random(period) * 10.0 ** rng.uniform(-3, 12, period)).tolist()
    x = np.array([values[i % period] for i in range(n)])
    assert uniform_torus.pairwise_sum(values.__getitem__, n, period) == float(np.sum(x))
