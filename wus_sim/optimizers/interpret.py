"""A reference interpreter: run an optimizer program with numpy, replicated or sharded.

It exists to check the analysis against arithmetic. Run sharded, each replica holds
its slice of every tensor (in the layout the analysis chose) and computes a
reduction *locally* unless the analysis listed it as a cross-replica reduction, in
which case the replicas' partial results are summed, as an all-reduce would. If
the analysis missed a reduction that crosses replicas, the sharded result differs
from the replicated one; the tests compare them.

Use::

    new_w, new_state, log = run_step("adam", weights, grads, step=1)
    new_w, new_state, log = run_step("lamb", weights, grads, shards=4)

``weights`` and ``grads`` map tensor names to arrays; ``state`` (``None`` = all zeros)
maps tensor names to ``{slot: array}`` with row/column slots as 1-D arrays of
length rows/cols. ``log`` lists every cross-replica all-reduce performed as
``(tensor name or None for global, what, values)``.
"""

import numpy as np

from .analysis import _KIND, _SPLIT, analyse, matrix_view
from .dataflow import flow
from .language import COLS, FULL, REDUCTIONS, ROWS, SCALAR, Const, Var, kind_name, render
from .registry import load_optimizer

__all__ = ["run_step"]

_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "**": np.power,
           ">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal,
           "maximum": np.maximum, "minimum": np.minimum, "pow": np.power}
_UNARY = {"neg": np.negative, "sqrt": np.sqrt, "abs": np.abs}


def run_step(optimizer, weights, grads, state=None, *, step=1, hyper=None, shards=1, layouts=None,
             all_reduce=True):
    """One update step of every tensor; see the module docstring.

    ``all_reduce=False`` computes every reduction on the local shard only: what a
    sharded update without the analysis's extra collectives would do (wrong as
    soon as the program has a reduction that crosses replicas).

    *layouts*: a layout name for every tensor, a ``{name: layout}`` mapping, or
    ``None`` for the analysis's choice for *shards* replicas. Tensors must divide
    evenly (no padding: padded zeros would change means).
    """
    opt = load_optimizer(optimizer)
    analysis = analyse(opt)
    params = dict(opt.hyper)
    for k, v in (hyper or {}).items():
        if k not in params:
            raise KeyError(f"{opt.name} has no hyper-parameter {k!r}; it has {', '.join(params)}")
        params[k] = float(v)
    state = state or {}
    tensors = {}
    gens = {}
    for name, w in weights.items():
        w = np.asarray(w, dtype=float)
        g = np.asarray(grads[name], dtype=float)
        case = opt.case_for(w.ndim)
        ca = analysis.case_for(w.shape)
        if isinstance(layouts, str):
            layout = layouts
        elif isinstance(layouts, dict) and name in layouts:
            layout = layouts[name]
        else:
            layout = analysis.choose_layout(w.shape, shards)
        if layout not in [o.layout for o in ca.layouts]:
            layout = "flat"
        option = ca.layout(layout)
        if not option.allowed:
            raise ValueError(f"{name}: layout {layout!r} not allowed: {option.reason}")
        cut = _Cut(w.shape, layout, shards, check=all_reduce)
        slots = {s: _KIND[k] for s, k in ca.slot_kinds.items()}
        init = {s: cut.from_canonical(kind, state.get(name, {}).get(s)) for s, kind in slots.items()}
        crossing = {r.at for r in option.reductions} if all_reduce else set()
        arg_kinds = {(i.index, i.position): i.arg_kinds[0]
                     for i in flow(case.statements, opt.hyper, min_rank=case.min_rank).nodes}
        tensors[name] = (cut, slots)
        for r in range(shards):
            env = {"w": cut.split(FULL, cut.base(w), r), "g": cut.split(FULL, cut.base(g), r),
                   "t": float(step), **params}
            env.update({s: cut.split(slots[s], v, r) for s, v in init.items()})
            gens[name, r] = _program(case.statements, env, _Ctx(crossing, arg_kinds, cut))
    log = []
    results = _drive(gens, tensors, shards, log)
    new_w, new_state = {}, {}
    for name, (cut, slots) in tensors.items():
        envs = [results[name, r] for r in range(shards)]
        new_w[name] = cut.join(FULL, [e["w"] for e in envs], name, "w").reshape(cut.shape)
        new_state[name] = {s: cut.to_canonical(k, cut.join(k, [e[s] for e in envs], name, s))
                           for s, k in slots.items()}
    return new_w, new_state, log


class _Cut:
    """How one tensor is laid out (flat vector or [rows, cols] matrix) and cut into shards."""

    def __init__(self, shape, layout, shards, check=True):
        self.check = check
        """Check that replicated values agree across replicas (they need not without all-reduces)."""
        self.shape = tuple(shape)
        self.layout = layout
        self.shards = shards
        self.size, self.rows, self.cols = matrix_view(shape)
        self.axis = {"flat": 0, "rows": 0, "cols": 1}[layout]
        length = self.size if layout == "flat" else (self.rows if layout == "rows" else self.cols)
        if length % shards:
            raise ValueError(f"tensor of shape {self.shape} does not divide into {shards} {layout} shards")

    def base(self, a):
        a = np.asarray(a, dtype=float)
        return a.reshape(-1) if self.layout == "flat" else a.reshape(self.rows, self.cols)

    def kind_shape(self, kind):
        if kind == FULL:
            return (self.size,) if self.layout == "flat" else (self.rows, self.cols)
        return {ROWS: (self.rows, 1), COLS: (1, self.cols), SCALAR: ()}[kind]

    def split_kinds(self):
        return _SPLIT[self.layout]

    def from_canonical(self, kind, value):
        if value is None:
            return np.zeros(self.kind_shape(kind))
        return np.asarray(value, dtype=float).reshape(self.kind_shape(kind))

    def to_canonical(self, kind, value):
        if kind == FULL:
            return value.reshape(self.shape)
        if kind == SCALAR:
            return float(value)
        return value.reshape(-1)

    def split(self, kind, value, r):
        if kind not in self.split_kinds():
            return np.array(value, copy=True)
        return np.split(value, self.shards, axis=self.axis)[r]

    def join(self, kind, parts, name, slot):
        if kind in self.split_kinds():
            return np.concatenate(parts, axis=self.axis)
        for p in parts[1:] if self.check else ():  # a replicated value must be the same on every replica
            if not np.allclose(p, parts[0], rtol=1e-12, atol=0, equal_nan=True):
                raise AssertionError(f"{name}: replicated {kind_name(kind)} value {slot!r} differs between replicas")
        return parts[0]

    def reduced_count(self, red, arg_shape_kind):
        """How many values one reduction combines in the unsharded tensor (for means)."""
        if red.over in ("all", "global"):
            return {FULL: self.size, ROWS: self.rows, COLS: self.cols}[arg_shape_kind]
        return self.cols if red.over == "cols" else self.rows


class _Ctx:
    def __init__(self, crossing, arg_kinds, cut):
        self.crossing = crossing
        """(statement, position) of the reductions to all-reduce across replicas."""
        self.arg_kinds = arg_kinds
        """(statement, position) -> kind of a reduction's argument."""
        self.cut = cut


def _program(statements, env, ctx):
    for index, s in enumerate(statements):
        value, _ = yield from _eval(s.expr, env, index, 0, ctx)
        env[s.target] = value
    return env


def _eval(e, env, index, position, ctx):
    if isinstance(e, Const):
        return e.value, position + 1
    if isinstance(e, Var):
        return env[e.name], position + 1
    me = position
    position += 1
    args = []
    for a in e.args:
        v, position = yield from _eval(a, env, index, position, ctx)
        args.append(v)
    red = REDUCTIONS.get(e.op)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if red is None:
            if e.op == "where":
                return np.where(np.asarray(args[0]) != 0, args[1], args[2]), position
            if e.op in _UNARY:
                return _UNARY[e.op](args[0]), position
            return _BINARY[e.op](args[0], args[1]), position
        x = np.asarray(args[0], dtype=float)
        arg_kind = ctx.arg_kinds[index, me]
        x = x * x if red.combine == "square" else x
        if red.over in ("all", "global"):
            partial = np.sum(x)
        else:
            partial = np.sum(x, axis=1 if red.over == "cols" else 0, keepdims=True)
        if (index, me) in ctx.crossing:
            total = yield ("global" if red.over == "global" else "tensor", (index, me, render(e)), partial)
        else:
            total = partial
        if red.finish == "sqrt":
            total = np.sqrt(total)
        elif red.finish == "divide":
            total = total / ctx.cut.reduced_count(red, arg_kind)
        return total, position


def _drive(gens, tensors, shards, log):
    """Advance every (tensor, replica) program, doing the all-reduces they ask for."""
    pending, done = {}, {}

    def resume(key, value):
        try:
            pending[key] = gens[key].send(value)
        except StopIteration as stop:
            done[key] = stop.value
            pending.pop(key, None)

    for key in gens:
        resume(key, None)
    while pending:
        progressed = False
        for name in tensors:
            keys = [(name, r) for r in range(shards)]
            if all(k in pending and pending[k][0] == "tensor" for k in keys):
                what = {pending[k][1] for k in keys}
                assert len(what) == 1, f"{name}: replicas disagree on the reduction order"
                total = sum(pending[k][2] for k in keys)
                log.append((name, pending[keys[0]][1][2], int(np.size(total))))
                for k in keys:
                    resume(k, total)
                progressed = True
        if progressed:
            continue
        if all(req[0] == "global" for req in pending.values()) and len(pending) == len(gens) - len(done) \
                and not done:
            # Match by statement text: global statements are identical in every case.
            what = {req[1][2] for req in pending.values()}
            assert len(what) == 1, "tensors disagree on the global reduction order"
            total = sum(req[2] for req in pending.values())
            log.append((None, what.pop(), 1))
            for k in list(pending):
                resume(k, total)
            continue
        raise RuntimeError("programs are stuck: a global reduction is not reached by every tensor")
    return done
