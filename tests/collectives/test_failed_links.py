"""Failed and slow links (issue 10, item 3): cables, detours, times derived by hand, the data
replay on a torus with a failed link, and the command line.

Hand derivations use the generic chip's inline slices: 100 GB/s per link and direction,
1 us per hop, one core per chip. On ``torus:4`` with ``S = 4 MB`` a ring step moves
``S/4 = 1 MB`` (unidirectional; ``s = 10 us`` on a link, ``tau = s + alpha = 11 us`` per hop).
"""

import json

import networkx as nx
import numpy as np
import pytest

from wus_sim.cli import main
from wus_sim.collectives import simulate_collective
from wus_sim.collectives.schedules.messages import compile_messages
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.collectives.engines.replay import replay_data
from wus_sim.collectives.engines.simpy_engine import run_schedule
from wus_sim.inputs.errors import ConfigError
from wus_sim.experiments.spec import check_point_value
from wus_sim.hardware.link_faults import cable_names, parse_cables
from wus_sim.hardware.topology_files import load_topology

US = 1e-6


# ------------------------------------------------------------------ cables
def test_a_cable_failure_takes_both_directions():
    t = load_topology("torus:8x8", failed_links="9+x")
    # chip 9 = (1, 1); its +x link goes to chip 10, whose -x link comes back
    plus, minus = int(t.link_id(9, 0, 1)), int(t.link_id(10, 0, -1))
    assert t.failed_links == tuple(sorted((plus, minus)))
    assert not t.link_up[plus] and not t.link_up[minus] and t.link_up.sum() == t.num_links - 2
    assert np.isnan(t.link_Bps[[plus, minus]]).all()
    # the same cable named from its other end
    assert load_topology("torus:8x8", failed_links="10-x") == t
    assert cable_names(t, t.failed_links) == ["9+x"]


def test_zero_failures_is_the_same_slice():
    base = load_topology("torus:8x8")
    for spec in (0, "0", None):
        t = load_topology("torus:8x8", failed_links=spec, seed=5)
        assert t == base and hash(t) == hash(base)
    assert load_topology("torus:8x8", failed_links="9+x") != base  # the failures are part of the value


def test_random_cables_are_distinct_and_follow_the_seed():
    a = load_topology("torus:8x8", failed_links=5, seed=7)
    b = load_topology("torus:8x8", failed_links=5, seed=7)
    c = load_topology("torus:8x8", failed_links=5, seed=8)
    assert a.failed_links == b.failed_links and len(a.failed_links) == 10  # 5 cables, 2 links each
    assert len(cable_names(a, a.failed_links)) == 5
    assert a.failed_links != c.failed_links
    # slow cables are drawn after the failed ones, among the others, both directions slowed
    s = load_topology("torus:8x8", failed_links=5, slow_links="3:4", seed=7)
    slow = {link for link, _ in s.link_Bps_override}
    assert len(slow) == 6 and not slow & set(s.failed_links)
    assert all(bw == pytest.approx(100e9 / 4) for _, bw in s.link_Bps_override)


def test_disconnecting_failures_are_an_error():
    with pytest.raises(ConfigError, match="disconnect"):
        load_topology("torus:4", failed_links="0+x,2+x")  # chips 1, 2 cut off from 0, 3
    with pytest.raises(ConfigError, match="disconnect"):
        load_topology("mesh:2x2", failed_links="0+x,0+y")  # chip 0's only two cables
    load_topology("torus:4", failed_links="0+x")  # one cut of a ring leaves a line


@pytest.mark.parametrize("spec", ["0+x,1+y", "27+y", 3])
def test_detours_are_shortest_paths_over_working_links(spec):
    """Every detour is a path of working links from the failed link's source to its destination,
    as long as networkx's shortest path in the graph of working links (an independent reference)."""
    t = load_topology("torus:8x8", failed_links=spec, seed=2)
    g = nx.DiGraph((s, d) for _, s, d, _, _ in t.links())
    for link in t.failed_links:
        path = t.detour(link)
        assert all(t.link_up[path])
        chips = [int(t.link_src[path[0]])] + [int(t.link_dst[k]) for k in path]
        assert chips[0] == t.link_src[link] and chips[-1] == t.link_dst[link]
        assert all(t.link_dst[a] == t.link_src[b] for a, b in zip(path, path[1:]))
        assert len(path) == nx.shortest_path_length(g, int(t.link_src[link]), int(t.link_dst[link]))


def test_the_detour_on_a_2d_torus_steps_to_the_next_line_and_back():
    t = load_topology("torus:8x8", failed_links="9+x")
    # (1,1) -> (1,2) along +y, -> (2,2) along +x, -> (2,1) along -y
    assert t.detour(t.link_id(9, 0, 1)) == [t.link_id(9, 1, 1), t.link_id(17, 0, 1), t.link_id(18, 1, -1)]
    # a dimension-order route over the failed cable takes the detour for that hop only
    assert t.route(8, 11) == [t.link_id(8, 0, 1), *t.detour(t.link_id(9, 0, 1)), t.link_id(10, 0, 1)]


def test_cable_list_errors_name_the_key_and_the_rule():
    t = load_topology("torus:4x4")
    for text, rule in (("16+x", "names no chip"), ("0+z", "names no chip"), ("1x", "CHIP\\+AXIS"),
                       ("0+x,,1+y", "CHIP\\+AXIS")):
        with pytest.raises(ConfigError, match=rule) as exc:
            parse_cables(t, text)
        assert str(exc.value).startswith("failed_links: ")
    with pytest.raises(ConfigError, match="names no cable"):
        parse_cables(load_topology("mesh:4x4"), "3+x")  # the mesh edge has no +x link
    with pytest.raises(ConfigError, match="count from 0 to 32"):
        load_topology("torus:4x4", failed_links=33)


# ------------------------------------------------------------ hand-derived times
def test_ring_of_four_with_one_failed_cable_by_hand():
    """torus:4, cable 0-1 down: ring edge 0 -> 1 detours 0 -> 3 -> 2 -> 1 over the '-' links the
    '+' ring leaves free, so no link carries two streams: an edge costs tau = 11 us, the detour
    3 tau. Member i's step k+1 waits for step k's arrival; the longest chain of steps crosses the
    slow edge as often as it can. All-reduce, 6 steps: edges 0->1, 1->2, 2->3, 3->0, 0->1, 1->2
    = 3+1+1+1+3+1 = 10 tau = 110 us (without the failure 6 tau = 66 us). Reduce-scatter, 3
    steps: 3+1+1 = 5 tau = 55 us (33 us)."""
    t = load_topology("torus:4", failed_links="0+x")
    for op, want, base in (("all-reduce", 110 * US, 66 * US), ("reduce-scatter", 55 * US, 33 * US)):
        for engine in ("fast", "simpy"):
            r = simulate_collective(t, op, "ring", 4e6, engine=engine)
            assert r.time_s == pytest.approx(want, rel=1e-12)
        assert r.exact and r.analytic_time_s == pytest.approx(want, rel=1e-12)
        assert simulate_collective("torus:4", op, "ring", 4e6).time_s == pytest.approx(base, rel=1e-12)
    # the failed links carry nothing; the three '-' links carry the 6 steps of 1 MB once each
    r = simulate_collective(t, "all-reduce", "ring", 4e6)
    assert (r.link_bytes[list(t.failed_links)] == 0).all()
    assert r.link_bytes[[t.link_id(c, 0, -1) for c in (0, 3, 2)]] == pytest.approx([6e6] * 3)


def test_contended_detours_by_hand():
    """Bidirectional reduce-scatter on torus:4 with cable 0-1 down: two rings of 2 MB, a step
    moves 0.5 MB (s = 5 us, tau = 6 us). Each ring's detour runs over the other ring's links,
    so links carry two streams and an event engine (window, or SimPy) runs it. Followed message by message (FIFO links, ties
    by sender then sequence, the '+' ring's message first), the last arrival is at 35 us: the
    '-' ring's step 2 from chip 3 to chip 2, sent at 29 us when its step 1 (which had queued at
    link 0->3 behind the '+' ring's detour) arrived. Uncontended, the closed form gives 30 us."""
    for engine in ("auto", "simpy"):
        r = simulate_collective(load_topology("torus:4", failed_links="0+x"), "reduce-scatter", "ring", 4e6,
                                bidirectional=True, engine=engine)
        assert r.engine == ("window" if engine == "auto" else "simpy") and not r.exact
        assert r.time_s == pytest.approx(35 * US, rel=1e-12)
        assert r.analytic_time_s == pytest.approx(30 * US, rel=1e-12)


def test_slow_cable_by_hand():
    """torus:4, cable 0-1 at 100/2 GB/s: link 0->1 takes 2 s = 20 us per 1 MB step. Member 0's
    next step is always ready before the link frees (the three fast edges bring it back in
    3 tau = 33 us < 2 * 20 us), so the link sends its 6 all-reduce steps back to back: 6 * 20 us
    + one hop latency = 121 us."""
    t = load_topology("torus:4", slow_links="0+x:2")
    r = simulate_collective(t, "all-reduce", "ring", 4e6)
    assert r.exact and r.time_s == pytest.approx(121 * US, rel=1e-12)
    assert simulate_collective(t, "all-reduce", "ring", 4e6, engine="simpy").time_s == pytest.approx(121 * US)


# ------------------------------------------------------------ the 8x8 torus
def _replay(topo, op, alg, S, chunks, bidir):
    plan = plan_collective(topo, op, alg, bidirectional=bidir)
    sched = compile_messages(plan, S, chunks=chunks, track=True)
    out = run_schedule(sched, record=True)
    return out, replay_data(sched, out.ready_t, out.deliver_t)


@pytest.mark.parametrize("bidir", [False, True])
def test_2d_all_reduce_on_8x8_with_one_failed_link(bidir):
    base = load_topology("torus:8x8")
    t = load_topology("torus:8x8", failed_links="27+x")
    S = 8 * 2**20
    before = simulate_collective(base, "all-reduce", "2d", S, bidirectional=bidir)
    after = simulate_collective(t, "all-reduce", "2d", S, bidirectional=bidir)
    assert after.time_s > before.time_s
    assert after.time_s >= after.analytic_time_s  # the uncontended closed form stays a lower bound
    assert (after.link_bytes[list(t.failed_links)] == 0).all()
    # every byte arrives: the data replay of the SimPy run, with pieces
    out, rep = _replay(t, "all-reduce", "2d", 3e6 + 7, 2, bidir)
    assert rep["ok"], rep["problems"][:3]
    assert out.time_s > 0


@pytest.mark.parametrize("alg", ["2d", "ring", "bidir-ring", "halving-doubling"])
@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather", "all-reduce"])
def test_every_algorithm_delivers_every_byte_around_random_failures(op, alg):
    t = load_topology("torus:8x8", failed_links=3, seed=1)
    _, rep = _replay(t, op, alg, 2e6 + 3, 1, alg == "2d")
    assert rep["ok"], rep["problems"][:3]


def test_zero_failed_links_leave_every_time_unchanged():
    for alg in ("2d", "ring", "halving-doubling"):
        a = simulate_collective("torus:8x8", "all-reduce", alg, 2**20, bidirectional=alg == "2d")
        b = simulate_collective(load_topology("torus:8x8", failed_links=0, slow_links="0:3", seed=9), "all-reduce",
                                alg, 2**20, bidirectional=alg == "2d")
        assert (a.time_s, a.engine, a.events) == (b.time_s, b.engine, b.events)


# ------------------------------------------------------------ command line and point keys
def _run(capsys, *argv):
    # store-and-forward: the hand derivations above are its times (a detour's hops each whole)
    code = main(["collective", "torus:4", "--op", "all-reduce", "--algorithm", "ring", "--size", "4MB",
                 "--routing", "store-and-forward", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_options(capsys):
    code, out, _ = _run(capsys, "--failed-links", "0+x", "--json")
    d = json.loads(out)
    assert code == 0 and d["time_s"] == pytest.approx(110 * US) and d["failed_links"] == "0+x"
    code, out, _ = _run(capsys, "--slow-links", "0+x:2", "--json")
    assert json.loads(out)["time_s"] == pytest.approx(121 * US) and json.loads(out)["slow_links"] == "0+x"
    code, out, _ = _run(capsys, "--failed-links", "1", "--seed", "3", "--json")
    assert code == 0 and len(json.loads(out)["failed_links"].split(",")) == 1
    code, out, _ = _run(capsys, "--failed-links", "0+x")
    assert "failed cables  0+x" in out


@pytest.mark.parametrize("argv, words", [
    (["--failed-links", "0+x,2+x"], "--failed-links: ['0+x', '2+x'] disconnect the slice"),
    (["--failed-links", "9+x"], "--failed-links: '9+x' names no chip"),
    (["--failed-links", "abc"], "--failed-links: 'abc' must be comma-separated cables"),
    (["--failed-links", "5"], "--failed-links: 5 must be a count from 0 to 4"),
    (["--slow-links", "0+x"], "--slow-links: '0+x' must be LIST:FACTOR"),
    (["--slow-links", "0+x:0.5"], "FACTOR >= 1"),
    (["--seed", "-1", "--failed-links", "1"], "--seed: -1 must be a whole number >= 0"),
])
def test_cli_errors_exit_2_with_one_line(capsys, argv, words):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1


def test_point_keys():
    assert check_point_value("failed_links", 3) == 3
    assert check_point_value("failed_links", "2") == 2
    assert check_point_value("failed_links", " 12+x,40-y ") == "12+x,40-y"
    assert check_point_value("slow_links", "12+x:4") == "12+x:4"
    assert check_point_value("seed", 7) == 7
    for key, value, rule in (("failed_links", "12+w", "CHIP\\+AXIS"), ("failed_links", -1, "count"),
                             ("failed_links", 1.5, "count K"), ("slow_links", "12+x", "LIST:FACTOR"),
                             ("slow_links", "1x:2", "CHIP\\+AXIS"), ("seed", -3, ">= 0")):
        with pytest.raises(ConfigError, match=rule) as exc:
            check_point_value(key, value, file="e.yaml", key_path=f"base.{key}")
        assert str(exc.value).startswith(f"e.yaml: base.{key}: ")


def test_a_step_point_with_failed_links_is_no_faster():
    from wus_sim.experiments.spec import complete_point
    from wus_sim.experiments.records import simulate_point

    point = {"workload": "resnet50", "topology": "torus:4x4", "per_replica_batch": 32}
    base = {r["strategy"]: r["step_time_s"] for r in simulate_point(complete_point(point))}
    hurt = simulate_point(complete_point({**point, "failed_links": 2, "seed": 1}))
    assert {r["failed_links"] for r in hurt} == {2}
    for r in hurt:
        assert r["step_time_s"] >= base[r["strategy"]] * (1 - 1e-12)


def test_step_cli_takes_the_fault_options(capsys):
    """`wus-sim step` takes --failed-links/--slow-links/--seed like `collective`: zero failures
    give the baseline step exactly, a failed or slowed cable a slower one, bad values exit 2."""
    base = ["step", "resnet50", "--topology", "torus:4x4", "--per-replica-batch", "8", "--json"]

    def step_time(*extra):
        assert main(base + list(extra)) == 0
        return json.loads(capsys.readouterr().out)["strategies"]["sharded"]["step_time_s"]

    t0 = step_time()
    assert step_time("--failed-links", "0") == t0
    # a detour and a slower cable both lengthen the exposed gradient collectives here
    assert step_time("--failed-links", "0+x") > t0
    assert step_time("--slow-links", "0+x:4") > t0
    for bad in (["--failed-links", "1+q"], ["--seed", "-1"], ["--slow-links", "0+x:0.5"]):
        assert main(base + bad) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and bad[0] in err


def test_collective_command_says_which_side_of_the_time_the_closed_form_is(capsys):
    """With detours the closed form takes each pass's slowest ring, so it is not always a lower
    bound (tpu-v3-128 with cables 4+y and 48+x down: 3.516 ms estimated, 3.488 ms simulated);
    the command says which side it falls on instead of calling it a bound."""
    base = ["collective", "tpu-v3-128", "--op", "all-reduce", "--algorithm", "2d", "--size", "64MiB",
            "--routing", "store-and-forward"]
    assert main(base + ["--failed-links", "4+y,48+x", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert not rec["exact"] and rec["time_s"] < rec["analytic_time_s"]
    assert main(base + ["--failed-links", "4+y,48+x"]) == 0
    assert "above the time here" in capsys.readouterr().out
    # contended (2d-split's halves share links on a non-square slice): above its estimate
    assert main(["collective", "torus:4x8", "--op", "all-reduce", "--algorithm", "2d-split",
                 "--size", "1MiB"]) == 0
    assert "(uncontended estimate; a lower bound here)" in capsys.readouterr().out
    # a detour ring that is not contended: the estimate is the time (to rounding), and says so
    assert main(["collective", "tpu-v3-32", "--op", "all-reduce", "--algorithm", "ring", "--size", "1MiB",
                 "--failed-links", "1", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert not rec["exact"] and rec["time_s"] == pytest.approx(rec["analytic_time_s"], rel=1e-9)
    assert main(["collective", "tpu-v3-32", "--op", "all-reduce", "--algorithm", "ring", "--size", "1MiB",
                 "--failed-links", "1"]) == 0
    assert "(uncontended estimate; the same as the time here)" in capsys.readouterr().out
