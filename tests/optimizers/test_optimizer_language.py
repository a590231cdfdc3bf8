"""The optimizer program language: strict parsing, error messages, and properties of the analysis."""

import json

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from wus_sim.inputs.errors import ConfigError
from wus_sim.optimizers import analyse, load_optimizer, parse_optimizer
from wus_sim.optimizers.language import (Const, Op, Var, names_read, parse_statement, render, rename)

ALL = ("sgd", "momentum", "nesterov", "adam", "adamw", "lamb", "lars", "adafactor",
       "adam+clip", "lamb+clip", "lars+clip", "adafactor+clip")


def load_text(tmp_path, text, name="bad.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return load_optimizer(str(path))


def program(*lines, hyper="{lr: 0.1, b: 0.9}"):
    body = "\n".join(f"  - {json.dumps(line)}" for line in lines)  # JSON strings are YAML strings
    return f"hyper: {hyper}\nprogram:\n{body}\n"


# --- malformed programs: ConfigError naming file, key path, value and rule ------------------
@pytest.mark.parametrize("line, rule", [
    ("w = w - lr*sqrtt(g)", "unknown function 'sqrtt'"),
    ("w = w - lr*q", "undefined name 'q'"),
    ("w = w - lr*g.T", "attribute access"),
    ("w = __import__('os').system('true')", "calls only named functions"),
    ("w = w - (lambda x: x)(g)", "calls only named functions"),
    ("w = w[0]", "indexing"),
    ("w = w - lr*'g'", "only real numbers"),
    ("w = sqrt(g, 2)", "takes 1"),
    ("w = maximum(g, y=2)", "keyword arguments"),
    ("w -= lr*g", "augmented assignment"),
    ("w, m = g, g", "exactly one plain name"),
    ("w = w - lr*g; m = g", "exactly one statement"),
    ("import os", "must be an assignment"),
    ("w = w - lr*g if b else w", "if-else"),
    ("w = w - lr*(g and w)", "and/or"),
    ("w = w - lr*g +", "not a valid statement"),
    ("w = w % g", "operator Mod"),
    ("sqrt = g", "function name"),
    ("w = w - lr*(g > 0)", "outside the condition of where"),
    ("lr = 2", "hyper-parameter 'lr'"),
    ("t = 2", "step number"),
    ("w = norm(w)", "w must stay a full tensor"),
    ("w = w - lr*row_mean(g)", "rank >= 2"),
    ("w = w - lr*mean(lr)", "reductions need a tensor"),
])
def test_malformed_program_is_a_located_config_error(tmp_path, line, rule):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, program("m = b*m + g", line))
    e = err.value
    assert e.file and e.file.endswith("bad.yaml")
    assert e.key_path == "program[1]", e
    assert rule in str(e)
    assert line.split("=")[0].strip() in str(e)  # the statement is quoted


@pytest.mark.parametrize("text, key_path, rule", [
    ("hyper: {lr: 0.1}\nprogram: [w = w - lr*g]\nslots: [m]\n", "slots", "not a known key"),
    ("hyper: {lr: 0.1}\n", None, "exactly one of 'program'"),
    ("hyper: {lr: fast}\nprogram: [w = w - lr*g]\n", "hyper.lr", "must be a number"),
    ("hyper: {g: 1}\nprogram: [w = w - g]\n", "hyper.g", "an input"),
    ("hyper: {lr: 0.1}\nprogram: [m = lr*g]\n", "program", "never assigns 'w'"),
    ("hyper: {lr: 0.1}\nprogram: []\n", "program", "at least one statement"),
    ("kind: sgd\nprogram: [w = w - g]\n", "kind", "must be one of"),
    ("hyper: {lr: 0.1}\ncases:\n  - {min_rank: 2, program: [w = w - lr*g]}\n", "cases", "rank 0 match no case"),
    ("hyper: {lr: 0.1}\ncases:\n  - {program: [w = w - lr*g]}\n  - {min_rank: 2, program: [w = w - g]}\n",
     "cases", "rank 2 match cases[0], cases[1]"),
    ("hyper: {lr: 0.1}\ncases:\n  - {max_rank: 1, program: [w = w - lr*row_sum(g)]}\n"
     "  - {min_rank: 2, program: [w = w - g]}\n", "cases[0].program[0]", "rank >= 2"),
    ("hyper: {lr: 0.1}\nprogram:\n  - s = row_mean(g) + 0*s\n  - w = w - lr*g\n", "program[0]", "rank >= 2"),
])
def test_malformed_file_is_a_located_config_error(tmp_path, text, key_path, rule):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, text)
    assert err.value.key_path == key_path, err.value
    assert rule in str(err.value)


def test_unquoted_colon_gives_a_hint(tmp_path):
    with pytest.raises(ConfigError, match="quote it"):
        load_text(tmp_path, "program:\n  - w = w - (lambda x: x)(g)\n")


def test_yaml_syntax_error_names_file(tmp_path):
    with pytest.raises(ConfigError, match="bad.yaml.*not valid YAML"):
        load_text(tmp_path, "program: [w = w - g\n")


def test_missing_file():
    with pytest.raises(ConfigError, match="file not found"):
        load_optimizer("no/such/optimizer.yaml")


def test_slot_is_what_is_read_before_it_is_assigned(tmp_path):
    opt = load_text(tmp_path, program("u = b*g", "m = b*m + u", "w = w - lr*m - lr*u"), "ok.yaml")
    a = analyse(opt)
    assert a.slot_names == ("m",)  # u is assigned before it is read: a temporary


def test_dead_temporaries_are_reported(tmp_path):
    opt = load_text(tmp_path, program("junk = g*g", "w = w - lr*g"), "ok.yaml")
    assert analyse(opt).primary.unused == ("junk",)


# --- printing -------------------------------------------------------------------------------
leaf = st.one_of(st.sampled_from([Var("w"), Var("g"), Var("lr")]),
                 st.floats(-1e6, 1e6, allow_nan=False).map(Const))


def _ops(children):
    binary = st.tuples(st.sampled_from(["+", "-", "*", "/", "**"]), children, children).map(
        lambda t: Op(t[0], (t[1], t[2])))
    unary = st.tuples(st.sampled_from(["neg", "sqrt", "abs"]), children).map(lambda t: Op(t[0], (t[1],)))
    funcs = st.tuples(st.sampled_from(["maximum", "minimum", "pow"]), children, children).map(
        lambda t: Op(t[0], (t[1], t[2])))
    where = st.tuples(st.sampled_from([">", "<=", ">=", "<"]), children, children, children, children).map(
        lambda t: Op("where", (Op(t[0], (t[1], t[2])), t[3], t[4])))
    reduce = st.tuples(st.sampled_from(["norm", "mean", "row_sum", "global_norm"]), children).map(
        lambda t: Op(t[0], (t[1],)))
    return st.one_of(binary, unary, funcs, where, reduce)


expressions = st.recursive(leaf, _ops, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(expressions)
def test_render_parses_back_to_the_same_tree(expr):
    if isinstance(expr, Op) and expr.op == "neg" and isinstance(expr.args[0], Const):
        return  # the parser folds -<number> into a constant
    assert parse_statement(f"x = {render(expr)}").expr == _fold(expr)


def _fold(e):
    # the parser turns -(number) into a negative number
    if isinstance(e, Op):
        args = tuple(_fold(a) for a in e.args)
        if e.op == "neg" and isinstance(args[0], Const):
            return Const(-args[0].value)
        return Op(e.op, args)
    return e


# --- properties of the analysis ---------------------------------------------------------------
def _numbers(a):
    """Everything in an analysis that must not depend on names or statement order."""
    out = []
    for c in a.cases:
        out.append((c.label, c.slots, sorted(c.slot_kinds.values()), c.bytes_read_per_element,
                    c.bytes_written_per_element, c.flops_per_element, c.flops_per_row, c.flops_per_col,
                    c.flops_per_tensor, c.passes, c.preferred_layout,
                    [(o.layout, o.allowed, sorted(((r.scope, r.vector, r.values_per_tensor, r.values_total)
                                                   for r in o.reductions), key=repr), len(o.replicated_slots))
                     for o in c.layouts]))
    return out


def _statement_list(case_doc):
    return [parse_statement(s) for s in case_doc["program"]]


def _cases(doc):
    return doc["cases"] if "cases" in doc else [doc]


def _topological_order(stmts, data):
    """A random order of the statements that keeps every data dependency."""
    n = len(stmts)
    reads = [set(names_read(s.expr)) for s in stmts]
    before = {j: {i for i in range(j) if stmts[i].target in reads[j] or stmts[j].target in reads[i]
                  or stmts[i].target == stmts[j].target} for j in range(n)}
    order, placed = [], set()
    while len(order) < n:
        ready = [j for j in range(n) if j not in placed and before[j] <= placed]
        j = data.draw(st.sampled_from(ready))
        order.append(j)
        placed.add(j)
    return order


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ALL), data=st.data())
def test_analysis_is_invariant_to_renaming_and_reordering(name, data):
    opt = load_optimizer(name)
    doc = opt.to_doc()
    keep = {"w", "g", "t"}
    names = sorted({n for c in _cases(doc) for s in _statement_list(c) for n in [s.target, *names_read(s.expr)]}
                   | set(doc["hyper"]))
    names = [n for n in names if n not in keep]
    fresh = data.draw(st.permutations([f"v{i}" for i in range(len(names))]))
    mapping = dict(zip(names, fresh))
    doc["hyper"] = {mapping[k]: v for k, v in doc["hyper"].items()}
    for case in _cases(doc):
        stmts = _statement_list(case)
        stmts = [stmts[i] for i in _topological_order(stmts, data)]
        case["program"] = [f"{mapping.get(s.target, s.target)} = {render(rename(s.expr, mapping))}" for s in stmts]
    other = parse_optimizer(doc, name="renamed")
    a, b = analyse(opt), analyse(other)
    assert _numbers(a) == _numbers(b)
    # the slots are the same, under their new names
    assert [mapping[n] for n in a.slot_names] == list(b.slot_names) or \
        sorted(mapping[n] for n in a.slot_names) == sorted(b.slot_names)
    whats = sorted(render(rename(parse_statement("x = " + r.what).expr, mapping)) for r in a.cross_replica_reductions)
    assert whats == sorted(r.what for r in b.cross_replica_reductions)


def _with_duplicates(doc, case_index, stmt_index, k):
    doc = yaml.safe_load(yaml.safe_dump(doc))
    case = _cases(doc)[case_index]
    text = case["program"][stmt_index]
    expr = text.split("=", 1)[1].strip()
    case["program"][stmt_index:stmt_index] = [f"dup{j} = {expr}" for j in range(k)]
    return parse_optimizer(doc, name="dup")


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ALL), data=st.data())
def test_duplicating_a_statement_into_temporaries_scales_linearly(name, data):
    opt = load_optimizer(name)
    doc = opt.to_doc()
    cases = _cases(doc)
    ci = data.draw(st.integers(0, len(cases) - 1))
    choices = [i for i, s in enumerate(cases[ci]["program"]) if len(cases) == 1 or "global_" not in s]
    si = data.draw(st.sampled_from(choices))
    k = data.draw(st.integers(2, 5))

    def figures(o):
        c = analyse(o).cases[ci]
        return (c.flops_per_element, c.flops_per_row, c.flops_per_col, c.flops_per_tensor,
                len(c.non_elementwise), len(c.cross_replica_reductions))

    f0 = figures(opt)
    f1 = figures(_with_duplicates(doc, ci, si, 1))
    fk = figures(_with_duplicates(doc, ci, si, k))
    assert fk == tuple(x0 + k * (x1 - x0) for x0, x1 in zip(f0, f1))
    if isinstance(parse_statement(cases[ci]["program"][si]).expr, Op):
        assert f1 != f0  # an operation costs something
    # a temporary adds no state and no HBM traffic
    a0, ak = analyse(opt).cases[ci], analyse(_with_duplicates(doc, ci, si, k)).cases[ci]
    assert (ak.slot_kinds, ak.bytes_read_per_element, ak.bytes_written_per_element) == \
        (a0.slot_kinds, a0.bytes_read_per_element, a0.bytes_written_per_element)
    assert set(ak.unused) == {f"dup{j}" for j in range(k)}
