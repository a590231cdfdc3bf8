"""The programs compute the published update rules, and the analysis's reductions are exactly
what a sharded update needs: run sharded with them, the result equals the replicated update;
run sharded without them, it does not."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wus_sim.optimizers import analyse, load_optimizer
from wus_sim.optimizers.interpret import run_step

ALL = ("sgd", "momentum", "nesterov", "adam", "adamw", "lamb", "lars", "adafactor",
       "adam+clip", "lamb+clip", "lars+clip", "adafactor+clip")
NEEDS_REDUCTIONS = ("lamb", "lars", "adafactor", "adam+clip", "lamb+clip", "lars+clip", "adafactor+clip")


def model(rng, shapes):
    w = {f"t{i}": rng.normal(size=s) for i, s in enumerate(shapes)}
    g = {k: rng.normal(size=v.shape) for k, v in w.items()}
    return w, g


def hp(name):
    return load_optimizer(name).hyper


# --- the programs are the published rules ------------------------------------------------------
def test_adam_two_steps_match_kingma_ba():
    rng = np.random.default_rng(1)
    (w, g), g2 = model(rng, [(6, 5)]), rng.normal(size=(6, 5))
    h = hp("adam")
    new, state, log = run_step("adam", w, g, step=1)
    new, state, _ = run_step("adam", new, {"t0": g2}, state, step=2)
    x, m, v = w["t0"], 0, 0
    for t, grad in ((1, g["t0"]), (2, g2)):
        m = h["b1"] * m + (1 - h["b1"]) * grad
        v = h["b2"] * v + (1 - h["b2"]) * grad ** 2
        lr_t = h["lr"] * np.sqrt(1 - h["b2"] ** t) / (1 - h["b1"] ** t)
        x = x - lr_t * m / (np.sqrt(v) + h["eps"])
    np.testing.assert_allclose(new["t0"], x, rtol=1e-12)
    np.testing.assert_allclose(state["t0"]["m"], m, rtol=1e-12)
    assert log == []


@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adamw"])
def test_simple_rules(name):
    rng = np.random.default_rng(2)
    w, g = model(rng, [(4, 3)])
    h = hp(name)
    x, grad = w["t0"], g["t0"]
    m0 = rng.normal(size=x.shape)
    state = {"t0": {"m": m0}} if name in ("momentum", "nesterov") else None
    new, _, _ = run_step(name, w, g, state, step=3)
    if name == "sgd":
        want = x - h["lr"] * grad
    elif name == "momentum":
        want = x - h["lr"] * (h["mu"] * m0 + grad)
    elif name == "nesterov":
        want = x - h["lr"] * (grad + h["mu"] * (h["mu"] * m0 + grad))
    else:  # adamw from zero state at t = 3
        m, v = (1 - h["b1"]) * grad, (1 - h["b2"]) * grad ** 2
        lr_t = h["lr"] * np.sqrt(1 - h["b2"] ** 3) / (1 - h["b1"] ** 3)
        want = x - lr_t * m / (np.sqrt(v) + h["eps"]) - h["lr"] * h["wd"] * x
    np.testing.assert_allclose(new["t0"], want, rtol=1e-12)


def test_lamb_matches_you_et_al():
    rng = np.random.default_rng(3)
    w, g = model(rng, [(8, 4)])
    h = hp("lamb")
    new, _, _ = run_step("lamb", w, g, step=1)
    x, grad = w["t0"], g["t0"]
    m_hat = (1 - h["b1"]) * grad / (1 - h["b1"])
    v_hat = (1 - h["b2"]) * grad ** 2 / (1 - h["b2"])
    u = m_hat / (np.sqrt(v_hat) + h["eps"]) + h["wd"] * x
    want = x - h["lr"] * np.linalg.norm(x) / np.linalg.norm(u) * u
    np.testing.assert_allclose(new["t0"], want, rtol=1e-12)


def test_lars_matches_you_gitman_ginsburg_and_skips_vectors():
    rng = np.random.default_rng(4)
    w, g = model(rng, [(3, 3, 2, 4), (4,)])
    h = hp("lars")
    new, _, _ = run_step("lars", w, g)
    x, grad = w["t0"], g["t0"]
    trust = h["eta"] * np.linalg.norm(x) / (np.linalg.norm(grad) + h["wd"] * np.linalg.norm(x))
    np.testing.assert_allclose(new["t0"], x - h["lr"] * trust * (grad + h["wd"] * x), rtol=1e-12)
    np.testing.assert_allclose(new["t1"], w["t1"] - h["lr"] * g["t1"], rtol=1e-12)


def test_adafactor_factored_second_moment_matches_shazeer_stern():
    rng = np.random.default_rng(5)
    w, g = model(rng, [(6, 4), (5,)])
    h = hp("adafactor")
    new, state, _ = run_step("adafactor", w, g, step=1)
    # step 1: beta2 = 1 - 1^-0.8 = 0, so R = row sums, C = column sums of G^2 + eps1 (Algorithm 4)
    x, grad = w["t0"], g["t0"]
    g2 = grad ** 2 + h["eps1"]
    r, c = g2.sum(axis=1), g2.sum(axis=0)
    v_hat = np.outer(r, c) / r.sum()
    u = grad / np.sqrt(v_hat)
    u = u / max(1.0, np.sqrt(np.mean(u ** 2)) / h["d"])
    step = min(h["rho_max"], 1.0) * max(h["eps2"], np.sqrt(np.mean(x ** 2)))
    np.testing.assert_allclose(new["t0"], x - step * u, rtol=1e-10)
    assert state["t0"]["vr"].shape == (6,) and state["t0"]["vc"].shape == (4,)
    np.testing.assert_allclose(state["t0"]["vr"], g2.mean(axis=1), rtol=1e-12)
    # the vector keeps a full second moment (Algorithm 5)
    assert state["t1"]["v"].shape == (5,)
    np.testing.assert_allclose(state["t1"]["v"], g["t1"] ** 2 + h["eps1"], rtol=1e-12)


def test_clip_scales_every_gradient_by_one_global_norm():
    rng = np.random.default_rng(6)
    w, g = model(rng, [(5, 3), (7,), ()])
    norm = np.sqrt(sum(np.sum(v ** 2) for v in g.values()))
    assert norm > 1  # clip_norm is 1: clipping is active
    clipped = {k: v / norm for k, v in g.items()}
    a, _, _ = run_step("adam+clip", w, g, step=2)
    b, _, _ = run_step("adam", w, clipped, step=2)
    for k in w:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-12)


# --- sharded with the analysis's reductions == replicated -----------------------------------
shapes = st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(0, 2)), min_size=1, max_size=3)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(ALL), n=st.sampled_from([2, 3, 4]), dims=shapes,
       layout=st.sampled_from([None, "flat", "rows", "cols"]), seed=st.integers(0, 2**16))
def test_sharded_update_with_reported_reductions_equals_replicated(name, n, dims, layout, seed):
    # every dimension a multiple of n, so each layout cuts evenly; ranks 1..3
    tensor_shapes = [tuple(n * d for d in (a, b, c)[: 1 + (k % 3)]) for k, (a, b, c) in enumerate(dims)]
    tensor_shapes = [tuple(d for d in s if d) or (n,) for s in tensor_shapes]
    rng = np.random.default_rng(seed)
    w, g = model(rng, tensor_shapes)
    analysis = analyse(name)
    if layout == "flat" and any(not analysis.case_for(s).layout("flat").allowed for s in tensor_shapes):
        with pytest.raises(ValueError, match="factoring"):
            run_step(name, w, g, shards=n, layouts=layout)
        return
    ref, ref_state, _ = run_step(name, w, g, step=2)
    out, state, log = run_step(name, w, g, step=2, shards=n, layouts=layout)
    for k in w:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-9, atol=1e-12)
        for slot in ref_state[k]:
            np.testing.assert_allclose(state[k][slot], ref_state[k][slot], rtol=1e-9, atol=1e-12)
    # the all-reduces performed are the ones the analysis lists, with the sizes it gives
    expected = []
    for k, v in w.items():
        lay = layout or analysis.choose_layout(v.shape, n)
        expected += [(k, r.what, count) for r, count in analysis.reductions_for(v.shape, lay)
                     if r.scope == "per_tensor"]
    globals_ = {r.what for c in analysis.cases for r in c.cross_replica_reductions if r.scope == "global"}
    expected += [(None, what, 1) for what in globals_]
    assert sorted(log, key=repr) == sorted(expected, key=repr)


@pytest.mark.parametrize("name", ALL)
def test_without_the_extra_all_reduces_a_sharded_update_is_wrong(name):
    rng = np.random.default_rng(7)
    w, g = model(rng, [(8, 12), (12,)])
    ref, _, _ = run_step(name, w, g, step=2)
    local, _, log = run_step(name, w, g, step=2, shards=4, all_reduce=False)
    assert log == []
    same = all(np.allclose(local[k], ref[k], rtol=1e-9) for k in w)
    # exactly the programs with cross-replica reductions need them
    assert same == (name not in NEEDS_REDUCTIONS)
    assert (analyse(name).cross_replica_reductions == ()) == (name not in NEEDS_REDUCTIONS)


def test_replicated_statistics_stay_identical_across_replicas():
    # under the rows layout each replica updates the whole [cols] statistic vc; the
    # interpreter checks that all copies agree (it raises otherwise)
    rng = np.random.default_rng(8)
    w, g = model(rng, [(8, 6)])
    _, state, log = run_step("adafactor", w, g, shards=4, layouts="rows")
    assert state["t0"]["vc"].shape == (6,)
    assert ("t0", "col_mean(g2)", 6) in log
