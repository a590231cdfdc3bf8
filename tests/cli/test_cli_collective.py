"""``wus-sim collective``: JSON and table output, one-line errors, every shipped slice answers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wus_sim.cli import collective as cli_collective, main
from wus_sim.collectives import ALGORITHMS, ALLTOALL_ALGORITHMS, OPS
from wus_sim.hardware.topology_files import known_topologies, load_topology

KEYS = {"time_s", "analytic_time_s", "algbw_GBps", "busbw_GBps", "events", "engine", "wall_s", "nbytes",
        "group_size", "topology", "op", "algorithm"}


def run(capsys, *argv):
    code = main(["collective", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_json_has_the_documented_keys_and_units(capsys):
    d = run_json(capsys, "torus:8x8", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB")
    assert KEYS <= d.keys()
    assert d["nbytes"] == 64 * 2**20 and d["group_size"] == 64 and d["topology"] == "torus:8x8"
    assert d["algbw_GBps"] == pytest.approx(d["nbytes"] / d["time_s"] / 1e9)
    assert d["busbw_GBps"] == pytest.approx(d["algbw_GBps"] * 2 * 63 / 64)
    assert d["time_s"] == pytest.approx(d["analytic_time_s"], rel=1e-9) and d["exact"]
    assert d["events"] == 64 * (2 * 7 + 2 * 7)


def test_options_change_the_answer(capsys):
    base = ["torus:8x8", "--op", "all-reduce", "--algorithm", "2d", "--size", "1.5GB"]
    t0 = run_json(capsys, *base)["time_s"]
    assert run_json(capsys, *base, "--link-GBps", "50")["time_s"] > t0
    assert run_json(capsys, *base, "--hop-latency-us", "20")["time_s"] > t0
    assert run_json(capsys, *base, "--bidirectional")["time_s"] < t0
    assert run_json(capsys, *base, "--reduce")["time_s"] > t0
    assert run_json(capsys, *base, "--chunks", "4", "--hop-latency-us", "20")["time_s"] < \
        run_json(capsys, *base, "--hop-latency-us", "20")["time_s"]
    assert run_json(capsys, *base, "--engine", "simpy")["engine"] == "simpy"
    g = run_json(capsys, *base, "--group", "y")
    assert g["group_size"] == 8 and g["time_s"] < t0
    lst = run_json(capsys, "torus:4x4", "--op", "all-gather", "--algorithm", "ring", "--size", "1MiB",
                   "--group", "0,5,10,15")
    assert lst["group_size"] == 4 and lst["engine"] in ("fast", "simpy")


def test_alltoall(capsys):
    """``--op all-to-all``: the default algorithm per shape when ``--algorithm`` is left out (the
    other ops still require it), the same keys, NCCL's (N-1)/N bus factor, and the 8x8 torus's
    2d-split by hand: 2 x (4 x 1 us + 8 x (S/2) / (8 x 100 GB/s)) for S = 64 MiB."""
    S = 64 * 2**20
    d = run_json(capsys, "torus:8x8", "--op", "all-to-all", "--size", "64MiB")
    assert KEYS <= d.keys() and d["op"] == "all-to-all" and d["algorithm"] == "2d-split"
    assert d["time_s"] == pytest.approx(2 * (4e-6 + S / 2 / 100e9), rel=1e-9) and d["exact"]
    assert d["busbw_GBps"] == pytest.approx(d["algbw_GBps"] * 63 / 64)
    assert run_json(capsys, "torus:8x8", "--op", "all-to-all", "--size", "1MiB", "--group", "x")["algorithm"] == "ring"
    p = run_json(capsys, "torus:8x8", "--op", "all-to-all", "--algorithm", "pairwise", "--size", "1MiB",
                 "--routing", "cut-through")
    assert p["engine"] == "window" and not p["exact"] and p["time_s"] > p["analytic_time_s"]
    code, out, _ = run(capsys, "torus:8x8", "--op", "all-to-all", "--size", "1MiB")
    assert code == 0 and "one direction" not in out
    code, _, err = run(capsys, "torus:8x8", "--op", "all-reduce", "--size", "1MiB")
    assert code == 2 and "--algorithm" in err and "required" in err
    code, _, err = run(capsys, "torus:8x8", "--op", "all-to-all", "--algorithm", "bidir-ring", "--size", "1MiB")
    assert code == 2 and "pairwise" in err


def test_help_lists_the_packages_ops_and_algorithms():
    """The CLI keeps its own copies (no numpy on ``--help``); they must not drift."""
    assert cli_collective._OPS == OPS and cli_collective._ALGORITHMS == ALGORITHMS
    assert cli_collective._ALLTOALL_ALGORITHMS == ALLTOALL_ALGORITHMS


def test_table_output_says_when_a_ring_runs_one_way_unlike_a_step(capsys):
    """A step runs both directions of each link by default; the collective command runs one
    unless --bidirectional, and says so where that changes the time (not for pairwise
    exchanges, nor for 2d on a slice whose every axis is a mesh of folded rings)."""
    note = "one direction (steps run both by default; --bidirectional to match)"
    cases = [("tpu-v3-2048", "2d", True), ("tpu-v3-32", "ring", True), ("tpu-v3-32", "2d", False),
             ("tpu-v3-2048", "halving-doubling", False)]
    for topology, algorithm, said in cases:
        code, out, _ = run(capsys, topology, "--op", "all-reduce", "--algorithm", algorithm, "--size", "1MiB")
        line = next(line for line in out.splitlines() if line.startswith("collective"))
        assert code == 0 and (note in line) == said, (topology, algorithm, line)
        if said:  # and it does change the time
            times = []
            for extra in ((), ("--bidirectional",)):
                assert main(["collective", topology, "--op", "all-reduce", "--algorithm", algorithm, "--size",
                             "1MiB", "--json", *extra]) == 0
                times.append(json.loads(capsys.readouterr().out)["time_s"])
            assert times[1] < times[0]
    code, out, _ = run(capsys, "tpu-v3-2048", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB",
                       "--bidirectional")
    assert "all-reduce, 2d, bidirectional\n" in out


def test_table_output(capsys):
    code, out, err = run(capsys, "tpu-v3-32", "--op", "reduce-scatter", "--algorithm", "ring", "--size", "67108864")
    assert code == 0 and not err
    for label in ("topology", "time", "closed form", "algbw", "busbw", "engine"):
        assert any(line.startswith(label) for line in out.splitlines())
    # the time says what it was checked against: the closed form, not a measurement
    checked = next(line for line in out.splitlines() if line.startswith("checked"))
    assert "closed form only" in checked and "wus-sim describe topology tpu-v3-32" in checked


@pytest.mark.parametrize("argv,needle", [
    (["nope", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB"], "tpu-v3-2048"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "12parsecs"], "--size"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "-3"], "--size"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "tree", "--size", "1MiB"], "known: 2d, 2d-split"),
    (["torus:4x4", "--op", "gather", "--algorithm", "ring", "--size", "1MiB"], "reduce-scatter"),
    (["torus:3x3", "--op", "all-reduce", "--algorithm", "halving-doubling", "--size", "1MiB"], "power-of-two"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB", "--engine", "gpu"], "engine"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB", "--group", "q"], "group"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB", "--chunks", "0"], "chunks"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB", "--link-GBps", "0"], "link"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "halving-doubling", "--size", "1MiB",
      "--bidirectional"], "bidirectional"),
    (["torus:4x4", "--op", "reduce-scatter", "--algorithm", "recursive-doubling", "--size", "1MiB"],
     "recursive-doubling is an all-reduce algorithm"),
    (["torus:4x4", "--op", "all-reduce", "--algorithm", "recursive-doubling", "--size", "1MiB",
      "--group", "0,1,2"], "recursive-doubling needs a power-of-two group"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("wus-sim collective: error:")


def test_whole_command_in_a_fresh_interpreter_without_simpy():
    """The quick path: a 32x32 slice answers from the fast engine without importing SimPy
    (the < 0.5 s wall target is a benchmark figure, see ``wus-sim bench``)."""
    code = ("import sys; from wus_sim.cli import main; "
            "rc = main(['collective', 'tpu-v3-2048', '--op', 'all-reduce', '--algorithm', '2d', "
            "'--size', '64MiB', '--json']); "
            "assert rc == 0 and 'simpy' not in sys.modules, sorted(m for m in sys.modules if 'simpy' in m)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    d = json.loads(out.stdout)
    assert d["engine"] == "fast" and d["group_size"] == 2048
    bad = subprocess.run([sys.executable, "-m", "wus_sim", "collective", "torus:3x3", "--op", "all-reduce",
                          "--algorithm", "halving-doubling", "--size", "1MiB"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


# halving-doubling runs on SimPy: tpu-v4-8192 (368,640 message hops) takes about 1.5 s.
# 2d-split on the non-square multipods runs on SimPy (its halves contend): tpu-v3-4096 simulates
# in about 4 s; tpu-v3-8192 would take 4.65 million message hops, over the SimPy limit
# (wus_sim/inputs/limits.py), so it is refused with the estimate instead of running for half a minute.
REFUSED_CASES = {("tpu-v3-8192", "2d-split")}
NOT_POWER_OF_TWO = {("tpu-v5p-3072", "halving-doubling"), ("tpu-v5p-3072", "recursive-doubling")}
"""1,536 chips (8x12x16): no power-of-two group for the exchange algorithms."""
FILES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "topologies").glob("*.yaml")
               if p.stem != "chips")
"""Every topology file; the Cloud TPU names built from a shape (cloud_slices) are checked by shape
below, one algorithm each, and every algorithm on their whole pods (the slices' extremes)."""
CLOUD_PODS = ["tpu-v5p-17920", "tpu7x-18432", "tpu-v4-1536", "tpu-v5e-1"]
CASES = [(name, alg) for name in FILES for alg in ALGORITHMS
         if (name, alg) not in REFUSED_CASES | NOT_POWER_OF_TWO]


@pytest.fixture
def cold_caches():
    """Forget the memoized plans and times after the case: 200 cases over every shipped slice
    (up to 8,192 replicas) would otherwise keep every plan, and the test process's size is what
    tests/inputs/test_fuzz.py's children inherit as their peak memory (fork copies it)."""
    yield
    from wus_sim.collectives import analytic, api
    from wus_sim.collectives.engines import fast_engine
    from wus_sim.collectives.schedules import loads

    api.clear_caches()
    for module in (analytic, fast_engine, loads):
        for value in vars(module).values():
            if hasattr(value, "cache_clear"):
                value.cache_clear()


@pytest.mark.parametrize("name,alg", CASES)
def test_every_shipped_topology_and_algorithm_answers(capsys, name, alg, cold_caches):
    d = run_json(capsys, name, "--op", "all-reduce", "--algorithm", alg, "--size", "1MiB")
    topo = load_topology(name)
    assert d["group_size"] == topo.num_replicas and d["time_s"] > 0 and d["events"] > 0
    assert d["time_s"] >= d["analytic_time_s"] * (1 - 1e-9)


@pytest.mark.parametrize("name", sorted(set(known_topologies()) - set(FILES)))
def test_every_cloud_slice_name_answers(capsys, name, cold_caches):
    d = run_json(capsys, name, "--op", "all-reduce", "--algorithm", "2d", "--size", "1MiB")
    assert d["group_size"] == load_topology(name).num_replicas and d["time_s"] >= 0


@pytest.mark.parametrize("name,alg", [(n, a) for n in CLOUD_PODS for a in ALGORITHMS])
def test_cloud_pods_answer_or_refuse_in_one_line(capsys, name, alg, cold_caches):
    """Every algorithm on the extremes: a whole pod (not a power of two; too large for SimPy's
    schedules), a 768-chip v4 slice, one chip."""
    code, out, err = run(capsys, name, "--op", "all-reduce", "--algorithm", alg, "--size", "1MiB", "--json")
    replicas = load_topology(name).num_replicas
    if code == 0:
        d = json.loads(out)
        assert d["group_size"] == replicas and d["time_s"] >= d["analytic_time_s"] * (1 - 1e-9)
        assert d["time_s"] > 0 or replicas == 1
    else:
        assert code == 2 and not out and len(err.strip().splitlines()) == 1
        pow2 = replicas & (replicas - 1) == 0
        assert ("power-of-two" in err and not pow2) or "over the limit" in err, err


@pytest.mark.parametrize("name,alg", sorted(NOT_POWER_OF_TWO))
def test_exchange_algorithms_refuse_a_group_not_a_power_of_two(capsys, name, alg):
    code, out, err = run(capsys, name, "--op", "all-reduce", "--algorithm", alg, "--size", "1MiB")
    assert code == 2 and not out
    assert "power-of-two" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("name,alg", sorted(REFUSED_CASES))
def test_too_large_simpy_runs_are_refused_with_the_estimate(capsys, name, alg):
    code, out, err = run(capsys, name, "--op", "all-reduce", "--algorithm", alg, "--size", "1MiB")
    assert code == 2 and not out
    assert "message hops" in err and "over the limit" in err and len(err.splitlines()) == 1


def test_2d_all_reduce_on_the_v3_8192_multipod_by_hand(capsys):
    """64 MiB 2d all-reduce on 128 x 32 chips (x a mesh, y a torus), 2 cores per chip, 100 GB/s
    links, 1 us hops, 200 GB/s on chip (topologies/chips.yaml), store-and-forward, one direction:

    * on chip: reduce-scatter then all-gather, each (c-1)/c S / onchip_bw;
    * y goes first: its one-hop torus ring moves 100 GB/s per member, x's folded ring (two-hop
      edges) half that, and the faster line should take the whole buffer. y reduce-scatters S per
      chip in 31 hops of (1 us + (S/32)/bw) and all-gathers it back in 31 more;
    * x, a folded ring of d = 128 (126 two-hop edges, 2 one-hop edges 63 edges apart), all-reduces
      S/32: the 2(d-1) steps cross the whole ring (2d-2 hops) and d-2 more edges, which hold at
      least one one-hop edge (2d-5 hops): 4d-7 = 505 hops of (1 us + (S/32/128)/bw).
    """
    S, bw, lat = 64 * 2**20, 100e9, 1e-6
    expect = 2 * (1 / 2) * S / 200e9 + 2 * 31 * (lat + S / 32 / bw) + 505 * (lat + S / 32 / 128 / bw)
    d = run_json(capsys, "tpu-v3-8192", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB",
                 "--routing", "store-and-forward")
    assert d["group_size"] == 8192 and d["exact"]
    assert d["time_s"] == pytest.approx(expect, rel=1e-9)


def test_a_multislice_topology_says_the_collective_ran_in_one_slice(capsys, tmp_path):
    # tpu-v5e-256x2 is two 16x16 slices over the DCN; `collective` simulates the ICI of one of
    # them and must say so, not print "all: 256 replicas" as if that were the whole topology.
    argv = ("tpu-v5e-256x2", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB")
    d = run_json(capsys, *argv)
    assert d["group_size"] == 16 * 16 and d["multislice"]["slices"] == 2
    assert run_json(capsys, "tpu-v5e-256", *argv[1:])["multislice"] is None
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "one of its 2 slices" in out
    bad = tmp_path / "ms.yaml"
    bad.write_text("chip: tpu-v5e\nchips_per_axis: [4, 4]\nwraparound: true\nmultislice: {slices: 0}\n")
    code, _, err = run(capsys, str(bad), *argv[1:])
    assert code == 2 and "ms.yaml: multislice.slices: 0" in err and err.count("\n") == 1


@pytest.mark.parametrize("group,rule", [
    ("z", "'z' must be all, x, y or at least 2 comma-separated replica ids"),   # offered 'an axis number < 2'
    ("1", "'1' must be all, x, y or at least 2 comma-separated replica ids (a group of one replica moves nothing)"),
    ("", "'' must be all, x, y or at least 2 comma-separated replica ids"),
    ("0,0,1", "'0,0,1' lists a replica twice"),
    ("0,99", "'0,99' must hold replica ids 0..15"),
])
def test_a_bad_group_is_the_options_error(capsys, group, rule):
    """--group's errors name the option and offer only what the option takes: the API's message
    offered axis numbers, but '--group 1' is replica 1, a one-replica group that ran in 0 s
    ('algbw inf GB/s') instead of the second axis."""
    code, out, err = run(capsys, "torus:4x4", "--op", "all-reduce", "--algorithm", "ring", "--size", "1MiB",
                         "--group", group)
    assert code == 2 and not out
    assert err.strip() == f"wus-sim collective: error: --group: {rule}"
