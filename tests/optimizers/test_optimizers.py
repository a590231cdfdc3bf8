"""Optimizer analysis: what the analyser derives from each shipped program.

Expected values are counts by hand from the program text (shown in comments), not
copies of the analyser's output.
"""

import json
import math

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import ConfigError, UnknownNameError
from wus_sim.optimizers import (LAYOUTS, analyse, describe_text, known_optimizers, known_prefixes,
                                load_optimizer, optimizer_dirs)

SHIPPED = ("sgd", "momentum", "nesterov", "adam", "adamw", "lamb", "lars", "adafactor")


def test_every_optimizer_the_issue_names_ships():
    assert set(SHIPPED) <= set(known_optimizers())
    assert known_prefixes() == ["clip"]
    for name in SHIPPED:
        assert load_optimizer(name).name == name


# --- bytes per element, counted by hand ---------------------------------------------
# The fused update reads w, g and every full slot once and writes w and every full slot
# once. (wb, gb, sb) = weight, gradient, slot bytes.
HAND_BYTES = {
    # sgd: w = w - lr*g                      read w,g            write w
    "sgd": lambda wb, gb, sb: (wb + gb, wb),
    # momentum: m = mu*m + g; w = w - lr*m   read w,g,m          write w,m
    "momentum": lambda wb, gb, sb: (wb + gb + sb, wb + sb),
    "nesterov": lambda wb, gb, sb: (wb + gb + sb, wb + sb),
    # adam: m, v updated; w stepped          read w,g,m,v        write w,m,v
    "adam": lambda wb, gb, sb: (wb + gb + 2 * sb, wb + 2 * sb),
    "adamw": lambda wb, gb, sb: (wb + gb + 2 * sb, wb + 2 * sb),
    "lamb": lambda wb, gb, sb: (wb + gb + 2 * sb, wb + 2 * sb),
    # lars: momentum slot m                  read w,g,m          write w,m
    "lars": lambda wb, gb, sb: (wb + gb + sb, wb + sb),
    # adafactor (matrices): vr, vc are [rows]/[cols], not per element: read w,g  write w
    "adafactor": lambda wb, gb, sb: (wb + gb, wb),
}


def test_adam_fp32_bytes_by_hand():
    a = analyse("adam")
    assert a.bytes_read_per_element == 16  # read w, g, m, v = 4 x 4 B
    assert a.bytes_written_per_element == 12  # write w, m, v = 3 x 4 B


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("sizes", [(4, 4, 4), (4, 2, 4), (4, 2, 2), (2, 2, 2)])
def test_bytes_per_element_match_hand_count(name, sizes):
    wb, gb, sb = sizes
    a = analyse(name, weight_bytes=wb, grad_bytes=gb, slot_bytes=sb)
    assert (a.bytes_read_per_element, a.bytes_written_per_element) == HAND_BYTES[name](wb, gb, sb)


@pytest.mark.parametrize("name", SHIPPED)
def test_clipping_changes_no_bytes(name):
    # the clipped gradient is a temporary: clipping adds no HBM traffic under the fusion assumption
    a, c = analyse(name), analyse(name + "+clip")
    assert (c.bytes_read_per_element, c.bytes_written_per_element) == \
        (a.bytes_read_per_element, a.bytes_written_per_element)


def test_flops_per_element_by_hand():
    # sgd: w - lr*g -> mul, sub = 2
    assert analyse("sgd").flops_per_element == 2
    # momentum: mu*m, +g = 2; lr*m, w- = 2
    assert analyse("momentum").flops_per_element == 4
    # adam: m: b1*m, (1-b1)*g, + = 3; v: b2*v, (1-b2)*g, *g, + = 4; lr_t is a scalar;
    #       u: sqrt, +eps, / = 3; w: lr_t*u, - = 2  -> 12
    assert analyse("adam").flops_per_element == 12
    # lamb: m 3, v 4, m_hat 1, v_hat 1, u: sqrt, +eps, /, wd*w, + = 5,
    #       norm(w) 2 (square, add), norm(u) 2, w: (lr*ratio scalar)*u, - = 2  -> 20
    assert analyse("lamb").flops_per_element == 20
    # clip adds global_norm(g) 2 and g*scale 1 = 3
    assert analyse("adam+clip").flops_per_element == 12 + 3


# --- slots ----------------------------------------------------------------------------
@pytest.mark.parametrize("name, slots, names", [
    ("sgd", 0, ()), ("momentum", 1, ("m",)), ("nesterov", 1, ("m",)), ("adam", 2, ("m", "v")),
    ("adamw", 2, ("m", "v")), ("lamb", 2, ("m", "v")), ("lars", 1, ("m",)), ("adafactor", 0, ("vr", "vc")),
])
def test_slots(name, slots, names):
    a = analyse(name)
    assert a.slots == slots
    assert a.slot_names == names
    assert a.slot_elements((64, 32)) == slots * 64 * 32 + (64 + 32 if name == "adafactor" else 0)


def test_adafactor_state_is_factored():
    a = analyse("adafactor")
    assert a.slot_kinds == {"vr": "rows", "vc": "cols"}
    assert a.factored_slots == ("vr", "vc")


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 50), min_size=0, max_size=4))
def test_adafactor_slot_elements(shape):
    a = analyse("adafactor")
    size = math.prod(shape)
    if len(shape) >= 2:
        # rank >= 2: leading axes merge into rows; stats [rows] + [cols]
        assert a.slot_elements(shape) == math.prod(shape[:-1]) + shape[-1]
    else:
        # rank 0 and 1: a full second moment
        assert a.slot_elements(shape) == size


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(SHIPPED), shape=st.lists(st.integers(1, 40), min_size=0, max_size=4))
def test_whole_tensor_figures_agree_with_per_element_ones(name, shape):
    a = analyse(name)
    c = a.case_for(shape)
    size = math.prod(shape)
    small = c.slot_elements(shape) - c.slots * size  # row/column/scalar state
    assert a.bytes_read(shape) == c.bytes_read_per_element * size + a.slot_bytes * small
    assert a.bytes_written(shape) == c.bytes_written_per_element * size + a.slot_bytes * small
    assert a.flops(shape) >= c.flops_per_element * size


# --- cross-replica reductions ---------------------------------------------------------
@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adam", "adamw"])
def test_elementwise_optimizers_need_no_reduction(name):
    a = analyse(name)
    assert a.cross_replica_reductions == ()
    assert a.non_elementwise == ()
    assert a.shard_constraints == ()
    assert a.passes == 1


@pytest.mark.parametrize("name, norms", [("lamb", ["norm(w)", "norm(u)"]), ("lars", ["norm(w)", "norm(g)"])])
def test_trust_ratio_optimizers_need_two_scalars_per_tensor(name, norms):
    a = analyse(name)
    reds = a.cross_replica_reductions
    assert [r.what for r in reds] == norms
    assert all(r.scope == "per_tensor" and r.values_per_tensor == 1 and r.vector is None for r in reds)
    assert sum(r.values((1024, 1024)) for r in reds) == 2
    assert a.passes == 2  # the norms, then the step


def test_lars_skips_vectors_like_the_mlperf_code():
    a = analyse("lars")
    assert a.reductions_for((1000,)) == []  # biases and batch-norm parameters: plain momentum
    assert len(a.reductions_for((3, 3, 64, 64))) == 2
    assert a.slot_elements((1000,)) == 1000


@pytest.mark.parametrize("name", SHIPPED)
def test_clipping_adds_exactly_one_global_reduction(name):
    base, clipped = analyse(name), analyse(name + "+clip")
    extra = [r for r in clipped.cross_replica_reductions if r not in base.cross_replica_reductions]
    assert len(extra) == 1
    (r,) = extra
    assert r.scope == "global" and r.values_total == 1 and r.what == "global_norm(g)"
    assert len(clipped.cross_replica_reductions) == len(base.cross_replica_reductions) + 1
    for case in clipped.cases:  # every rank case runs the clip first
        assert sum(x.scope == "global" for x in case.cross_replica_reductions) == 1


def test_adafactor_sharding_constraints():
    a = analyse("adafactor")
    options = {o.layout: o for o in a.shard_constraints}
    assert set(options) == set(LAYOUTS)
    assert not options["flat"].allowed and "factoring" in options["flat"].reason
    rows, cols = options["rows"], options["cols"]
    assert rows.allowed and cols.allowed
    shape = (300, 40)  # rows 300, cols 40
    # sharded by rows: each replica has whole rows, row stats stay local; the column
    # statistic needs a [cols] all-reduce and vc is held whole by every replica
    vec = [r for r in rows.reductions if r.vector]
    assert [(r.what, r.values(shape)) for r in vec] == [("col_mean(g2)", 40)]
    assert rows.replicated_slots == ("vc",)
    vec = [r for r in cols.reductions if r.vector]
    assert [(r.what, r.values(shape)) for r in vec] == [("row_mean(g2)", 300)]
    assert cols.replicated_slots == ("vr",)
    # rms(u) and rms(w) are per-tensor scalars under any layout
    for o in (rows, cols):
        assert {"mean(u * u)", "mean(w * w)"} <= {r.what for r in o.reductions if not r.vector}


def test_adafactor_layout_choice_follows_shape():
    a = analyse("adafactor")
    assert a.choose_layout((33708, 1024), 32) == "cols"  # rows not a multiple of 32: cols pads nothing
    assert a.choose_layout((4096, 1024), 32) == "rows"  # both divide; a [1024] all-reduce < [4096]
    assert a.choose_layout((1024, 4096), 32) == "cols"
    assert a.choose_layout((1024,), 32) == "flat"  # vectors: full second moment, any cut
    assert analyse("adam").choose_layout((1024, 4096), 32) == "flat"


# --- names, files, composition ---------------------------------------------------------
def test_unknown_name_lists_known_names():
    with pytest.raises(UnknownNameError) as err:
        load_optimizer("adamm")
    msg = str(err.value)
    for name in SHIPPED:
        assert name in msg
    assert "+clip" in msg
    # a part after '+' is a gradient prefix: the error names the whole composition and the prefixes
    with pytest.raises(ConfigError, match=r"'adam\+clipp' has an unknown gradient prefix 'clipp' after '\+'; "
                                          r"known prefixes: clip \(e\.g\. adam\+clip\)"):
        load_optimizer("adam+clipp")
    with pytest.raises(UnknownNameError):  # an unknown base is still an unknown optimizer
        load_optimizer("adamm+clip")


def test_composition_errors():
    with pytest.raises(ConfigError, match="prefix"):
        load_optimizer("clip")
    with pytest.raises(ConfigError, match="not a prefix"):
        load_optimizer("adam+sgd")
    with pytest.raises(ConfigError, match="twice"):
        load_optimizer("adam+clip+clip")


def test_composition_renames_clashing_names():
    # lars and clip both use the name g_norm: the prefix's copy is renamed
    opt = load_optimizer("lars+clip")
    targets = [s.target for s in opt.primary_case.statements]
    assert targets[:2] == ["clip_g_norm", "g"]
    assert "g_norm" in targets[2:]
    assert opt.parts == ("clip", "lars")


RMSPROP = """
description: RMSprop, a user-defined optimizer
hyper:
  lr: 1e-3     # PyYAML reads this as a string; accepted as a number
  rho: 0.9
  eps: 1.0e-7
program:
  - v = rho*v + (1 - rho)*g*g
  - w = w - lr*g/(sqrt(v) + eps)
"""


def test_user_yaml_optimizer(tmp_path):
    path = tmp_path / "rmsprop.yaml"
    path.write_text(RMSPROP)
    a = analyse(str(path))
    assert a.name == "rmsprop" and a.slot_names == ("v",)
    assert (a.bytes_read_per_element, a.bytes_written_per_element) == (12, 8)  # w,g,v ; w,v
    clipped = analyse(f"{path}+clip")
    assert [r.scope for r in clipped.cross_replica_reductions] == ["global"]


def test_user_directory_via_environment(tmp_path, monkeypatch):
    (tmp_path / "rmsprop.yaml").write_text(RMSPROP)
    monkeypatch.setenv("WUS_SIM_OPTIMIZER_PATH", str(tmp_path))
    assert optimizer_dirs()[0] == tmp_path
    assert "rmsprop" in known_optimizers()
    assert analyse("rmsprop+clip").slots == 1


@pytest.mark.parametrize("name", [*SHIPPED, "adam+clip", "adafactor+clip", "lars+clip"])
def test_program_round_trips_through_yaml(name, tmp_path):
    opt = load_optimizer(name)
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(opt.to_doc(), sort_keys=False))
    again = load_optimizer(str(path))
    assert again.to_doc() == opt.to_doc()
    assert analyse(again).to_dict() == analyse(opt).to_dict()


# --- output ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [*SHIPPED, "adam+clip", "adafactor+clip"])
def test_to_dict_is_json_with_the_documented_keys(name):
    d = json.loads(json.dumps(analyse(name).to_dict()))
    for key in ("slots", "bytes_read_per_element", "bytes_written_per_element", "flops_per_element",
                "cross_replica_reductions"):
        assert key in d
    for r in d["cross_replica_reductions"]:
        assert r["scope"] in ("per_tensor", "global") and r["what"]
        assert (r["values_total"] if r["scope"] == "global" else (r["values_per_tensor"] or r["vector"]))


def test_describe_text_reports_the_analysis():
    text = describe_text(analyse("lamb+clip"))
    assert "read 16" in text and "write 12" in text
    assert "norm(w)" in text and "norm(u)" in text and "global_norm(g)" in text
    text = describe_text(analyse("adafactor"))
    assert "NOT allowed" in text and "[cols] vector" in text and "rank <= 1" in text


def test_bf16_gradients_shrink_reads_only():
    a32, a16 = analyse("adam"), analyse("adam", grad_bytes=2)
    assert a32.bytes_read_per_element - a16.bytes_read_per_element == 2
    assert a32.bytes_written_per_element == a16.bytes_written_per_element
