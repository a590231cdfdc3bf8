"""The step timeline against closed forms and its own invariants."""

import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.training.timeline.timeline import BREAKDOWN_PARTS, TimelineBucket, StepProgram, run_timeline

times = st.floats(1e-6, 1e-2)


@st.composite
def programs(draw, strategy=None):
    nlayers = draw(st.integers(1, 8))
    fwd = tuple(draw(st.lists(times, min_size=nlayers, max_size=nlayers)))
    bwd = tuple(draw(st.lists(times, min_size=nlayers, max_size=nlayers)))
    strategy = strategy or draw(st.sampled_from(["replicated", "sharded"]))
    # partition layers into contiguous buckets
    cuts = sorted(set(draw(st.lists(st.integers(1, nlayers), max_size=3)) + [nlayers]))
    buckets, lo = [], 0
    for hi in cuts:
        layers = tuple(range(lo, hi))
        if not layers:
            continue
        sharded = strategy == "sharded"
        buckets.append(TimelineBucket(
            name=f"b{lo}", first_layer=lo, layers=layers,
            grad_op="reduce-scatter" if sharded else "all-reduce",
            grad_nbytes=1.0, grad_time_s=draw(times),
            gather_nbytes=1.0 if sharded else 0.0, gather_time_s=draw(times) if sharded else 0.0))
        lo = hi
    extra = tuple(draw(st.lists(times, max_size=2))) if strategy == "sharded" else ()
    return StepProgram(strategy=strategy, fwd_layer_s=fwd, bwd_layer_s=bwd, buckets=tuple(buckets),
                       update_s=draw(times), extra_reduction_s=extra,
                       overlap_grad_reduce=draw(st.booleans()), overlap_all_gather=draw(st.booleans()))


@settings(max_examples=80, deadline=None)
@given(programs())
def test_breakdown_adds_up_and_compute_is_all_there(prog):
    res = run_timeline(prog, steps=3)
    assert sum(res.breakdown[p] for p in BREAKDOWN_PARTS) == pytest.approx(res.step_time_s, rel=1e-9)
    assert res.breakdown["fwd_s"] == pytest.approx(sum(prog.fwd_layer_s), rel=1e-9)
    assert res.breakdown["bwd_s"] == pytest.approx(sum(prog.bwd_layer_s), rel=1e-9)
    assert res.breakdown["update_s"] == pytest.approx(prog.update_s, rel=1e-9)
    assert res.breakdown["idle_s"] == pytest.approx(0.0, abs=1e-12)
    # never faster than the compute, never slower than doing everything in sequence
    compute = sum(prog.fwd_layer_s) + sum(prog.bwd_layer_s) + prog.update_s
    comm = sum(b.grad_time_s + b.gather_time_s for b in prog.buckets) + sum(prog.extra_reduction_s)
    assert compute * (1 - 1e-12) <= res.step_time_s <= (compute + comm) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(programs())
def test_no_overlap_is_the_sum_of_its_parts(prog):
    from dataclasses import replace

    serial = replace(prog, overlap_grad_reduce=False, overlap_all_gather=False)
    res = run_timeline(serial, steps=3)
    expect = (sum(prog.fwd_layer_s) + sum(prog.bwd_layer_s) + prog.update_s
              + sum(b.grad_time_s + b.gather_time_s for b in prog.buckets) + sum(prog.extra_reduction_s))
    assert res.step_time_s == pytest.approx(expect, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(programs())
def test_overlap_never_hurts(prog):
    from dataclasses import replace

    serial = run_timeline(replace(prog, overlap_grad_reduce=False, overlap_all_gather=False)).step_time_s
    both = run_timeline(replace(prog, overlap_grad_reduce=True, overlap_all_gather=True)).step_time_s
    assert both <= serial * (1 + 1e-12)


def test_overlapped_gradient_reduction_hides_under_backward():
    # one bucket per layer; each reduction is shorter than the backward of the layer below it,
    # so all but the last bucket's reduction hide: exposed = the first layer's bucket only.
    n = 4
    buckets = tuple(TimelineBucket(f"b{i}", i, (i,), "all-reduce", 1.0, 0.5e-3) for i in range(n))
    prog = StepProgram("replicated", (1e-3,) * n, (2e-3,) * n, buckets, update_s=1e-3)
    res = run_timeline(prog)
    assert res.breakdown["exposed_comm_s"] == pytest.approx(0.5e-3, rel=1e-9)
    assert res.step_time_s == pytest.approx(n * 1e-3 + n * 2e-3 + 0.5e-3 + 1e-3, rel=1e-9)


def test_gather_overlapping_next_forward_is_steady_state():
    # sharded, one bucket for all layers: with overlap the first forward layer waits for the
    # whole gather anyway, so overlap saves nothing; with one bucket per layer it hides.
    n = 3
    one = (TimelineBucket("all", 0, tuple(range(n)), "reduce-scatter", 1.0, 1e-3, 1.0, 2e-3),)
    per_layer = tuple(TimelineBucket(f"b{i}", i, (i,), "reduce-scatter", 1.0, 1e-3 / n, 1.0, 2e-3 / n)
                      for i in range(n))
    base = dict(strategy="sharded", fwd_layer_s=(1e-3,) * n, bwd_layer_s=(1e-3,) * n, update_s=1e-4,
                overlap_grad_reduce=False)
    t_one = run_timeline(StepProgram(buckets=one, overlap_all_gather=True, **base)).step_time_s
    t_one_serial = run_timeline(StepProgram(buckets=one, overlap_all_gather=False, **base)).step_time_s
    assert t_one == pytest.approx(t_one_serial, rel=1e-9)
    t_split = run_timeline(StepProgram(buckets=per_layer, overlap_all_gather=True, **base)).step_time_s
    # gathers of layers 1 and 2 hide under the forward of layers 0 and 1
    assert t_split == pytest.approx(t_one_serial - 2 * (2e-3 / n), rel=1e-9)


def test_steps_must_be_at_least_two():
    prog = StepProgram("replicated", (1e-3,), (1e-3,), (), update_s=1e-3)
    with pytest.raises(ValueError):
        run_timeline(prog, steps=1)


@settings(max_examples=60, deadline=None)
@given(programs(), st.data())
def test_batch_norm_all_reduces_are_a_part_of_their_own_on_the_critical_path(prog, data):
    """The per-layer batch-norm all-reduces run on the core, after a layer's forward and
    before its backward: the step is exactly the one with them folded into the layers'
    times, and the breakdown moves them from forward/backward into batch_norm_s."""
    from dataclasses import replace

    n = len(prog.fwd_layer_s)
    fbn = tuple(data.draw(st.lists(st.sampled_from([0.0, 1e-5, 3e-4]), min_size=n, max_size=n)))
    bbn = tuple(data.draw(st.lists(st.sampled_from([0.0, 2e-5, 5e-4]), min_size=n, max_size=n)))
    split = run_timeline(replace(prog, fwd_batch_norm_s=fbn, bwd_batch_norm_s=bbn), steps=3)
    folded = run_timeline(replace(prog, fwd_layer_s=tuple(a + b for a, b in zip(prog.fwd_layer_s, fbn)),
                                  bwd_layer_s=tuple(a + b for a, b in zip(prog.bwd_layer_s, bbn))), steps=3)
    assert split.step_time_s == pytest.approx(folded.step_time_s, rel=1e-12)
    assert split.breakdown["batch_norm_s"] == pytest.approx(sum(fbn) + sum(bbn), rel=1e-9, abs=1e-15)
    assert split.breakdown["fwd_s"] == pytest.approx(sum(prog.fwd_layer_s), rel=1e-9)
    assert split.breakdown["bwd_s"] == pytest.approx(sum(prog.bwd_layer_s), rel=1e-9)
    assert sum(split.breakdown[p] for p in BREAKDOWN_PARTS) == pytest.approx(split.step_time_s, rel=1e-9)
    # forward: layer, then its all-reduce; backward: the all-reduce, then the layer
    core = [iv for iv in split.intervals if iv.track == "core" and iv.step == 1]
    names = [iv.name for iv in core]
    for layer, (f, b) in enumerate(zip(fbn, bbn)):
        if f > 0:
            i = names.index(f"batch-norm all-reduce L{layer}")
            assert names[i - 1] == f"fwd L{layer}"
        if b > 0:
            i = len(names) - 1 - names[::-1].index(f"batch-norm all-reduce L{layer}")
            assert names[i + 1] == f"bwd L{layer}"


def test_batch_norm_times_need_one_per_layer():
    prog = StepProgram("replicated", (1e-3, 1e-3), (1e-3, 1e-3), (), update_s=0.0, fwd_batch_norm_s=(1e-5,))
    with pytest.raises(ValueError, match="one time per layer"):
        run_timeline(prog)


@pytest.mark.parametrize("field,value", [
    ("fwd_layer_s", (1e-3, -1e-6)), ("bwd_layer_s", (-1e-3, 1e-3)), ("update_s", -1e-9),
    ("extra_reduction_s", (-1.0,)), ("host_loop_s", -1e-6),
    ("buckets", (TimelineBucket("b", 0, (0, 1), "all-reduce", 1.0, -1e-6),))])
def test_a_negative_duration_is_a_bug_not_a_result(field, value):
    # a split or subtraction gone wrong upstream crashes here rather than printing a negative time
    base = dict(strategy="replicated", fwd_layer_s=(1e-3, 1e-3), bwd_layer_s=(2e-3, 2e-3), buckets=(), update_s=1e-3)
    with pytest.raises(AssertionError, match=f"StepProgram.{field} has a negative duration"):
        StepProgram(**{**base, field: value})
    assert run_timeline(StepProgram(**base)).step_time_s == pytest.approx(2e-3 + 4e-3 + 1e-3, rel=1e-9)
