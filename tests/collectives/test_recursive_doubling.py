"""Recursive-doubling all-reduce (MPICH's short-message all-reduce; Thakur, Rabenseifner and
Gropp 2005): log2 P steps, member i exchanges its whole buffer with i XOR 2^k and sums it.

Every expected time below is derived by hand from the link model (:mod:`wus_sim.hardware.network`,
store-and-forward): a message of ``b`` bytes takes ``b/bw + lat`` per hop, a link serves
one message at a time in request order, and with ``reduce_Bps`` the last arrival of a step is
summed in ``piece / reduce_Bps`` before the next step (or the end). The contract suite
(tests/collectives/test_collectives_contract.py) checks the data it moves on every small slice.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from wus_sim.collectives.engines import fast_engine
from wus_sim.collectives import simulate_collective
from wus_sim.collectives.analytic import phase_times
from wus_sim.collectives.schedules.loads import contention, shared_link_streams
from wus_sim.collectives.schedules.messages import compile_messages
from wus_sim.collectives.schedules.plan import plan_collective
from wus_sim.collectives.engines.replay import replay_data
from wus_sim.collectives.engines.simpy_engine import run_schedule
from wus_sim.inputs.errors import ConfigError
from wus_sim.training.step import StepOptions, bidirectional_for
from wus_sim.inputs.units import KiB, MiB

from make_topology import make
from test_window_engine import _same, faulty_slices

RD, HD = "recursive-doubling", "halving-doubling"
REL = 1e-9
LAT, BW = 1e-6, 100e9  # make()'s defaults: 1 us per hop, 100 GB/s per link and direction


def test_the_plan_is_log2_p_exchanges_of_the_whole_buffer():
    plan = plan_collective(make((4, 4), True), "all-reduce", RD)
    (p,) = plan.passes
    assert (p.pattern, p.kind, p.steps, p.rs_steps) == ("rd", "ar", 4, 4)
    assert [p.step_fraction(k) for k in range(4)] == [1.0] * 4
    assert [p.step_partner_distance(k) for k in range(4)] == [1, 2, 4, 8]
    # two cores per chip: on-chip ring reduce-scatter, chips exchange, on-chip all-gather
    plan = plan_collective(make((4, 2), True, cores=2), "all-reduce", RD)
    assert [(p.level, p.pattern, p.kind) for p in plan.passes] == \
        [("core", "ring", "rs"), ("chip", "rd", "ar"), ("core", "ring", "ag")]


# ================================================================ two members, by hand
@pytest.mark.parametrize("red", [None, 400e9])
def test_two_neighbours_take_one_exchange_half_the_latency_of_halving_doubling(red):
    """Replicas 0 and 1 of a 4x4 torus are neighbouring chips along x. Recursive-doubling is
    one exchange of the whole buffer over one hop each way (two directed links, nothing
    shared): ``lat + S/bw``, plus ``S/reduce_Bps`` to sum it. Halving-doubling sends two
    halves one after the other: ``2 lat + S/bw``, plus ``S/2 / reduce_Bps`` (only its
    reduce-scatter step sums). S = 1 MiB: 11.48576 us against 12.48576 us; summing at
    400 GB/s adds 2.62144 us and 1.31072 us (14.10720 against 13.79648: the one latency
    saved costs more summing)."""
    topo = make((4, 4), True)
    S = MiB
    rd = simulate_collective(topo, "all-reduce", RD, S, group=[0, 1], reduce_Bps=red)
    hd = simulate_collective(topo, "all-reduce", HD, S, group=[0, 1], reduce_Bps=red)
    summing = S / red if red else 0.0
    assert rd.time_s == pytest.approx(LAT + S / BW + summing, rel=REL)
    assert hd.time_s == pytest.approx(2 * LAT + S / BW + summing / 2, rel=REL)
    assert rd.exact and rd.analytic_time_s == pytest.approx(rd.time_s, rel=REL)
    assert hd.time_s - rd.time_s == pytest.approx(LAT - summing / 2, rel=REL)
    # exact, but not ring phases a trace could draw one after the other
    assert phase_times(topo, "all-reduce", RD, S, group=[0, 1], reduce_Bps=red) is None


def test_a_two_chip_axis_with_pieces_and_summing_is_exact():
    """Axis x of a 2x4 torus at 50 GB/s: four pairs, each one exchange of S. With K = 3 pieces
    the pieces queue on the one hop: the last arrives at ``lat + 3 (S/3)/bw`` and its third of
    the buffer is summed in ``(S/3)/reduce_Bps``: 1 + 20.97152 + 0.87381 us for S = 1 MiB."""
    topo = make((2, 4), True, link_GBps=[50.0, 100.0])
    S, red = MiB, 400e9
    r = simulate_collective(topo, "all-reduce", RD, S, group="x", chunks=3, reduce_Bps=red)
    assert r.group_size == 2
    assert r.time_s == pytest.approx(LAT + S / 50e9 + S / 3 / red, rel=REL)
    assert r.exact and r.analytic_time_s == pytest.approx(r.time_s, rel=REL)


# ================================================================ four members on a line, by hand
def test_a_torus_of_four_by_hand():
    """torus:4, members 0..3. Step 0: 0<->1 and 2<->3, one hop each way, distinct links.
    Step 1: partners two hops apart, routed + on the tie (0->1->2, 1->2->3, 2->3->0, 3->0->1):
    link 1->2 carries 1's first hop and 0's second, so the schedule is contended (not exact).

    K = 1 (s = S/bw): every step-1 message leaves at ``T = s + lat``; 1's holds 1->2 over
    ``[T, T+s]``, 0's reaches chip 1 at ``T+s+lat`` and finds 1->2 free: nobody waits, and the
    time is the chain ``(s + lat) + 2 (s + lat) = 3 (s + lat)``, the closed form.

    K = 2 (s = S/2/bw, lat < s): step 0's pieces hold 0->1 over [0, s] and [s, 2s] and arrive
    at s+lat and 2s+lat. Step 1's pieces at 0 are ready then, but 0->1 is busy with step 0's
    second piece until 2s: they take [2s, 3s] and [3s, 4s]. On 1->2, 1's own step-1 pieces
    (ready first) take [2s, 4s]; 0's arrive at 3s+lat and 4s+lat and queue behind them:
    [4s, 5s], [5s, 6s]; the last reaches chip 2 at ``6s + lat``. The closed form is the chain
    with the pieces pipelined as if links were private, ``s + lat + 2 (s + lat) + s =
    4s + 3 lat``: it misses both waits (a member's step-1 pieces behind its own step 0 on
    its first link, the relayed pieces behind the relaying chip's own), ``2s - 2 lat``.
    With S = 8 MiB: 252.65824 us simulated, 170.77216 us closed form (one piece: 254.65824 us)."""
    topo = make((4,), True)
    S = 8 * MiB
    plan = plan_collective(topo, "all-reduce", RD)
    assert shared_link_streams(plan) > 0
    one = simulate_collective(topo, "all-reduce", RD, S)
    s = S / BW
    assert one.time_s == pytest.approx(3 * (s + LAT), rel=REL)
    assert one.analytic_time_s == pytest.approx(one.time_s, rel=REL) and not one.exact
    two = simulate_collective(topo, "all-reduce", RD, S, chunks=2)
    s = S / 2 / BW
    assert two.time_s == pytest.approx(6 * s + LAT, rel=REL)
    assert two.analytic_time_s == pytest.approx(4 * s + 3 * LAT, rel=REL)
    assert not two.exact


def test_steps_contend_with_each_other_even_when_no_step_shares_a_link():
    """Replicas 10, 12, 13, 9 of a 4x4 mesh (chip (x, y) = x + 4y: (2,2), (0,3), (1,3),
    (1,2)), routed x first. Step 0: 10<->12 take three hops (10->9->8->12, 12->13->14->10),
    13<->9 one. Step 1: 10<->13 and 12<->9 take two (10->9->13, 13->14->10, 12->13->9,
    9->8->12). No link carries two messages of one step, but steps meet: at ``s + lat``
    (s = S/bw) 12's step-0 message reaches 13 just as 13, having 9's buffer, sends its step 1
    on 13->14, and 10's reaches 9 as 9 sends on 9->8. Equal times go by sender rank: 12 goes
    before 13, but 9 before 10, so 10's step-0 message waits s at chip 9 and reaches 12 at
    ``4s + 3 lat``; 12's step 1 then takes two free hops: ``6s + 5 lat``. The closed form's
    chain (10 -> 12 in three hops, 12 -> 9 in two) is ``5 (s + lat)``, and the plan is not
    exact although no step shares a link. S = 1 MiB: 67.91456 us against 57.42880 us."""
    topo = make((4, 4), False)
    group = [10, 12, 13, 9]
    assert shared_link_streams(plan_collective(topo, "all-reduce", RD, group=group)) == 0
    r = simulate_collective(topo, "all-reduce", RD, MiB, group=group)
    s = MiB / BW
    assert r.time_s == pytest.approx(6 * s + 5 * LAT, rel=REL)
    assert r.analytic_time_s == pytest.approx(5 * (s + LAT), rel=REL)
    assert not r.exact


# ================================================================ latency-bound regime
@pytest.mark.parametrize("dims,hops", [((4, 4), [1, 2, 1, 2]), ((8, 8), [1, 2, 4, 1, 2, 4])])
def test_recursive_doubling_wins_on_small_buffers_and_loses_on_large_ones(dims, hops):
    """P = 16 or 64 chips of a torus, ranks row-major: the partner at XOR distance 2^k is
    ``h_k`` hops away along one axis (4x4: 1, 2, 1, 2; 8x8: 1, 2, 4, 1, 2, 4). With one piece
    every message of a step leaves at once and takes as many hops, so shared links serve them
    staggered and nobody waits (as in :func:`test_a_torus_of_four_by_hand`); the times are
    the chains, store-and-forward paying each hop:

    * recursive-doubling: ``sum_k h_k (lat + S/bw) = H lat + H S/bw``, ``H = sum h_k``;
    * halving-doubling: the same distances twice, carrying ``S/2^(m-k)`` at distance 2^k
      (``m = log2 P``) in each half: ``2 H lat + 2 sum_k h_k S/2^(m-k) / bw``.

    4x4: H = 6 and the halving-doubling bytes term is 3.125 S (8x8: 14 and 5.90625 S), so
    recursive-doubling is faster exactly when ``(6 - 3.125) S/bw < 6 lat``, S below about
    209 KB at 1 us and 100 GB/s (8x8: ``8.09375 S/bw < 14 lat``, 173 KB): 1 KiB is far below
    (6.06 us against 12.03 us), 64 MiB far above (4.03 ms against 2.11 ms)."""
    topo = make(dims, True)
    H = sum(hops)
    m = len(hops)
    hd_bytes = 2 * sum(h / 2 ** (m - k) for k, h in enumerate(hops))
    for S in (KiB, 64 * MiB):
        rd = simulate_collective(topo, "all-reduce", RD, S)
        hd = simulate_collective(topo, "all-reduce", HD, S)
        assert rd.time_s == pytest.approx(H * LAT + H * S / BW, rel=REL)
        assert hd.time_s == pytest.approx(2 * H * LAT + hd_bytes * S / BW, rel=REL)
    small = [simulate_collective(topo, "all-reduce", a, KiB).time_s for a in (RD, HD)]
    large = [simulate_collective(topo, "all-reduce", a, 64 * MiB).time_s for a in (RD, HD)]
    assert small[0] < small[1] and large[0] > large[1]


# ================================================================ engines
def test_the_fast_engine_refuses_it_and_the_window_engine_runs_it():
    topo = make((4, 4), True)
    plan = plan_collective(topo, "all-reduce", RD)
    assert "recursive-doubling partners" in contention(plan)
    assert not fast_engine.supports(topo, "all-reduce", RD)
    assert "recursive-doubling" in fast_engine.why_unsupported(topo, "all-reduce", RD)
    assert simulate_collective(topo, "all-reduce", RD, MiB).engine == "window"
    with pytest.raises(ConfigError, match="engine"):
        simulate_collective(topo, "all-reduce", RD, MiB, engine="fast")


@st.composite
def power_of_two_groups(draw):
    """A drawn slice (failed and slow cables, meshes, cores) and a power-of-two group of its
    replicas: the whole slice (if it is one), or an explicit list in a drawn order."""
    topo = draw(faulty_slices())
    if draw(st.booleans()):
        return topo, None
    size = draw(st.sampled_from([2, 4, 8, 16]))
    assume(size <= topo.num_replicas)
    order = draw(st.permutations(list(range(topo.num_replicas))))
    return topo, order[:size]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(case=power_of_two_groups(), chunks=st.integers(1, 3), red=st.sampled_from([None, 30e9, 400e9]),
       S=st.sampled_from([1e3, 3 * 2**20 + 7]))
def test_window_engine_equals_simpy_and_the_data_adds_up(case, chunks, red, S):
    """SimPy and the window engine agree to the last bit on random power-of-two groups, and
    the replay finds every replica holding the whole buffer summed exactly once (arrivals can
    come before the receiver's own send of that step: routes differ in length)."""
    topo, group = case
    try:
        plan = plan_collective(topo, "all-reduce", RD, group=group)
    except ConfigError:  # a whole slice of a non-power-of-two size
        assume(False)
    sched = compile_messages(plan, S, chunks=chunks, reduce_Bps=red, track=True)
    _same(sched)
    out = run_schedule(sched, record=True)
    rep = replay_data(sched, out.ready_t, out.deliver_t)
    assert rep["ok"], rep["problems"][:3]


# ================================================================ errors
def test_only_all_reduce_one_direction_and_power_of_two_groups():
    topo = make((4, 4), True)
    for op in ("reduce-scatter", "all-gather"):
        with pytest.raises(ConfigError, match="all-reduce algorithm .*halving-doubling"):
            simulate_collective(topo, op, RD, MiB)
    with pytest.raises(ConfigError, match="bidirectional.*recursive-doubling"):
        simulate_collective(topo, "all-reduce", RD, MiB, bidirectional=True)
    with pytest.raises(ConfigError, match="recursive-doubling needs a power-of-two group; this one has 3"):
        simulate_collective(topo, "all-reduce", RD, MiB, group=[0, 1, 2])
    with pytest.raises(ConfigError, match="recursive-doubling needs a power-of-two group; this one has 9 chips"):
        simulate_collective(make((3, 3), True), "all-reduce", RD, MiB)


def test_an_experiment_point_keeps_the_replicated_row_when_only_sharded_cannot_run():
    """``strategy: both`` with recursive doubling: the replicated update all-reduces and runs;
    the sharded one needs a reduce-scatter, so only its row is an error."""
    from wus_sim.experiments.records import simulate_point
    from wus_sim.training.step import simulate_step

    point = {"workload": "resnet50", "topology": "torus:4x4", "strategy": "both", "algorithm": RD}
    rows = {r["strategy"]: r for r in simulate_point(point)}
    assert rows["sharded"]["status"] == "error"
    assert "all-reduce algorithm" in rows["sharded"]["error"]
    alone = simulate_step("resnet50", "torus:4x4", strategy="replicated", options=StepOptions(algorithm=RD))
    assert rows["replicated"]["status"] == "ok"
    assert rows["replicated"]["step_time_s"] == pytest.approx(alone.step_time_s, rel=1e-12)
    with pytest.raises(ConfigError, match="all-reduce algorithm"):  # an error every strategy shares still raises
        simulate_point({**point, "strategy": "sharded"})


def test_the_step_model_runs_no_ring_direction_for_it():
    assert bidirectional_for(StepOptions(algorithm=RD, bidirectional=None)) is False
    assert bidirectional_for(StepOptions(algorithm=HD, bidirectional=None)) is False
    assert bidirectional_for(StepOptions(algorithm="2d", bidirectional=None)) is True


def test_an_exchange_can_arrive_before_the_receiver_has_sent_its_own():
    """Replicas 0, 7, 1, 2 of a mesh line of 8 as a group: step 0 pairs chips 0 and 7 (seven
    hops) and chips 1 and 2 (one hop); step 1 pairs chips 0 and 1. Chip 1's step-1 buffer
    reaches chip 0 (after 2 hops' time) long before chip 0 has its step-0 partner's buffer
    (7 hops) and sends its own step 1. The receiver must sum it only after that send (a
    separate receive buffer), else chip 1 would get its own data back: the replay holds the
    early arrival, and every replica still ends with each contribution once."""
    topo = make((8,), False)
    plan = plan_collective(topo, "all-reduce", RD, group=[0, 7, 1, 2])
    sched = compile_messages(plan, MiB, track=True)
    out = run_schedule(sched, record=True)
    node = sched.meta["node"]
    step, pos, dst = (sched.meta[x] for x in ("step", "pos", "dst"))
    from_1 = node[(step == 1) & (pos == 2) & (dst == 0)][0]
    own = node[(step == 1) & (pos == 0)][0]
    assert out.deliver_t[from_1] < out.ready_t[own]
    assert replay_data(sched, out.ready_t, out.deliver_t)["ok"]


def test_replayed_data_catches_a_member_that_sends_before_it_sums():
    """The replay is not vacuous for recursive-doubling: dropping the wait for the partner's
    previous step (a member sends its step-k buffer before adding step k-1) is caught."""
    topo = make((8,), True)
    plan = plan_collective(topo, "all-reduce", RD)
    sched = compile_messages(plan, MiB, track=True)
    sched.deps = [d for d in sched.deps if not np.all(d[2] == 0)]
    out = run_schedule(sched, record=True)
    assert not replay_data(sched, out.ready_t, out.deliver_t)["ok"]


@pytest.mark.parametrize("algorithm", [RD, HD])
def test_route_tables_are_shared_by_slices_that_differ_only_in_link_figures(algorithm):
    """The pairwise exchanges' routes depend on the slice's shape, wraparound, cores and failed
    links, not on its bandwidths or latencies: slices of a link-bandwidth sweep share one table,
    and each slice's closed form still uses its own link figures (the same as computed cold)."""
    from wus_sim.collectives import clear_caches
    from wus_sim.collectives import analytic_time
    from wus_sim.collectives.schedules.messages import hd_routes

    slow, fast = make((4, 4), True, link_GBps=25.0), make((4, 4), True, link_GBps=200.0, hop_latency_us=3.0)
    (p_slow,), (p_fast,) = (plan_collective(t, "all-reduce", algorithm).passes for t in (slow, fast))
    assert hd_routes(slow, p_slow) is hd_routes(fast, p_fast)
    other = make((4, 4), False)  # no wraparound: other routes
    assert hd_routes(other, plan_collective(other, "all-reduce", algorithm).passes[0]) is not hd_routes(slow, p_slow)

    nbytes = 64 * KiB
    warm = [analytic_time(t, "all-reduce", algorithm, nbytes) for t in (slow, fast)]
    cold = []
    for t in (fast, slow):
        clear_caches()
        cold.append(analytic_time(t, "all-reduce", algorithm, nbytes))
    assert warm == cold[::-1]
    # by hand (recursive doubling, one core per chip): 4 steps, distances 1, 2, 4, 8 over a 4x4
    # torus; each exchange of the whole buffer over a dimension-order route
    if algorithm == RD:
        hops = [1, 2, 1, 2]  # chip ids 0..15, x fastest: i ^ 1, ^2 on x; ^4, ^8 on y (2 hops: the ring's far side)
        for t, bw, lat in ((slow, 25e9, 1e-6), (fast, 200e9, 3e-6)):
            expected = sum(h * (nbytes / bw + lat) for h in hops)
            assert analytic_time(t, "all-reduce", RD, nbytes) == pytest.approx(expected, rel=REL)
