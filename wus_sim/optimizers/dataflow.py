"""Data flow of one program: which names are slots, the kind (shape) of every value.

This is the part of the analysis that also validates a program, so the loader runs
it and turns its :class:`FlowError` into a ConfigError that names the statement.

Rules (documented in :mod:`wus_sim.optimizers.language`):

* a name read before any assignment is an input (``w``, ``g``, ``t``), a
  hyper-parameter, or a *slot*, which must then be assigned later in the program;
  anything else is an undefined name;
* hyper-parameters and ``t`` cannot be assigned; ``w`` must be;
* a slot's kind is found by fixed-point iteration (its value at the start of a
  step has the kind it is given at the end), starting from "unknown"; a slot
  that never meets a tensor is a per-tensor scalar; a slot that is ever
  combined with a tensor is a tensor (``r = norm(g) + 0*r`` makes ``r`` full);
* row/column reductions need a full tensor and a case whose tensors have rank >= 2;
  whole-tensor and global reductions need a non-scalar argument; comparisons
  appear only as the first argument of ``where``.
"""

from dataclasses import dataclass, field

from ..inputs.text import short_repr
from .language import FULL, INPUTS, REDUCTIONS, SCALAR, Const, Op, Var, kind_name, names_read

__all__ = ["Flow", "FlowError", "flow", "NodeInfo"]

_COMPARISONS = {">", ">=", "<", "<="}


class FlowError(ValueError):
    """A program that breaks a data-flow rule; ``index`` is the statement (or None)."""

    def __init__(self, message, index=None):
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class NodeInfo:
    """One operation of the program, with the kinds the analysis needs."""

    index: int
    """Statement index."""
    position: int
    """Pre-order position of the node inside the statement's expression."""
    node: Op
    kind: frozenset
    """Kind of the result."""
    arg_kinds: tuple
    level: int
    """How many passes over full tensors must finish before this value exists."""


@dataclass
class Flow:
    """Result of the data-flow pass over one program."""

    slots: dict
    """Slot name -> kind, in order of first appearance."""
    temporaries: list
    """Assigned names that are not slots (``w`` and ``g`` excluded)."""
    unused: list
    """Temporaries assigned and never read afterwards (dead code; counted, but reported)."""
    reads_w: bool
    reads_g: bool
    nodes: list = field(default_factory=list)
    """Every :class:`Op` in the program with its kind, in program order."""
    final_kinds: dict = field(default_factory=dict)
    """Kind of every name at the end of the program."""


def flow(statements, hyper, *, min_rank=0, require_w=True):
    """Run the data-flow pass; raise :class:`FlowError` if a rule is broken.

    *hyper* is the collection of hyper-parameter names; *min_rank* the smallest
    tensor rank the program runs on (row/column reductions need 2);
    *require_w* is False for a gradient prefix, which need not update ``w``.
    """
    hyper = set(hyper)
    assigned_anywhere = {s.target for s in statements}
    for i, s in enumerate(statements):
        if s.target in hyper:
            raise FlowError(f"assigns the hyper-parameter {short_repr(s.target)}; hyper-parameters are constants", i)
        if s.target == "t":
            raise FlowError("assigns 't', the step number, which is an input", i)
    if require_w and "w" not in assigned_anywhere:
        raise FlowError("never assigns 'w': an optimizer program must update the weight")

    # Which names are slots: read before any assignment, and not an input or hyper-parameter.
    slots, seen = [], set()
    for i, s in enumerate(statements):
        for name in names_read(s.expr):
            if name in seen or name in INPUTS or name in hyper or name in slots:
                continue
            if name not in assigned_anywhere:
                raise FlowError(
                    f"uses undefined name {short_repr(name)}: not an input (w, g, t), a hyper-parameter "
                    f"({', '.join(sorted(hyper)) or 'none'}), or a variable the program assigns", i)
            slots.append(name)
        seen.add(s.target)

    slot_kinds = dict.fromkeys(slots)  # None = not known yet
    for _ in range(8):  # kinds only grow in a 4-element lattice: this settles in <= 3 rounds
        result = _pass(statements, hyper, slot_kinds, min_rank, strict=False)
        grown = {n: _join(slot_kinds[n], result.final_kinds[n]) for n in slots}
        if grown == slot_kinds:
            break
        slot_kinds = grown
    slot_kinds = {n: (SCALAR if k is None else k) for n, k in slot_kinds.items()}
    result = _pass(statements, hyper, slot_kinds, min_rank, strict=True)
    # Kinds are monotone in the slots' starting kinds, so the fixed point gives every slot
    # the same kind at the start and the end of a step.
    assert all(result.final_kinds[n] == slot_kinds[n] for n in slots), (slot_kinds, result.final_kinds)
    if "w" in assigned_anywhere and result.final_kinds["w"] != FULL:
        last = max(i for i, s in enumerate(statements) if s.target == "w")
        raise FlowError(f"assigns w a {kind_name(result.final_kinds['w'])} value; w must stay a full tensor", last)

    temporaries = [n for n in dict.fromkeys(s.target for s in statements) if n not in slot_kinds and n not in ("w", "g")]
    unused = []
    for i, s in enumerate(statements):
        if s.target in temporaries and not any(s.target in names_read(x.expr) for x in statements[i + 1:]):
            unused.append(s.target)
    return Flow(slots=slot_kinds, temporaries=temporaries, unused=list(dict.fromkeys(unused)),
                reads_w=result.reads_w, reads_g=result.reads_g, nodes=result.nodes,
                final_kinds=result.final_kinds)


def _join(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a | b


class _Pass:
    def __init__(self):
        self.nodes = []
        self.final_kinds = {}
        self.reads_w = False
        self.reads_g = False


def _pass(statements, hyper, slot_kinds, min_rank, strict):
    out = _Pass()
    env = {name: (kind, 0) for name, kind in INPUTS.items()}
    env.update({h: (SCALAR, 0) for h in hyper})
    # Slots start at level 0: their value comes from the previous step.
    env.update({n: (k, 0) for n, k in slot_kinds.items()})
    for i, s in enumerate(statements):
        if strict and isinstance(s.expr, Op) and s.expr.op in _COMPARISONS:
            raise FlowError(f"uses the comparison '{s.expr.op}' outside the condition of where()", i)
        kind, level = _infer(s.expr, env, i, 0, min_rank, strict, out.nodes)[:2]
        env[s.target] = (kind, level)
    # w and g are read from memory only if their value at the start of the step is read
    # (a clipping prefix re-binds g; later reads see the clipped temporary).
    out.reads_g = _reads_initial("g", statements)
    out.reads_w = _reads_initial("w", statements)
    out.final_kinds = {n: k for n, (k, _) in env.items()}
    return out


def _reads_initial(name, statements):
    """Whether the value *name* has at the start of the step is read."""
    for s in statements:
        if name in names_read(s.expr):
            return True
        if s.target == name:
            return False
    return False


def _infer(e, env, index, position, min_rank, strict, nodes):
    """(kind, level, next position) of expression *e*; records each Op in *nodes*."""
    if isinstance(e, Const):
        return SCALAR, 0, position + 1
    if isinstance(e, Var):
        kind, level = env[e.name]
        return kind, level, position + 1
    my_position = position
    position += 1
    kinds, levels = [], []
    for j, a in enumerate(e.args):
        if isinstance(a, Op) and a.op in _COMPARISONS and not (e.op == "where" and j == 0) and strict:
            raise FlowError(f"uses the comparison '{a.op}' outside the condition of where()", index)
        k, lv, position = _infer(a, env, index, position, min_rank, strict, nodes)
        kinds.append(k)
        levels.append(lv)
    known = [k for k in kinds if k is not None]
    level = max(levels, default=0)
    if e.op in REDUCTIONS:
        red = REDUCTIONS[e.op]
        arg = kinds[0]
        if red.over in ("rows", "cols"):
            if strict and min_rank < 2:
                raise FlowError(
                    f"uses {e.op}(), which needs tensors of rank >= 2; put it in a case with min_rank: 2", index)
            if strict and arg != FULL:
                raise FlowError(f"applies {e.op}() to a {kind_name(arg)} value; it needs a full tensor", index)
        elif strict and arg == SCALAR:
            raise FlowError(f"applies {e.op}() to a scalar; reductions need a tensor or vector", index)
        kind = red.result_kind
        # A reduction of a full tensor needs a complete pass over it first.
        level += 1 if arg == FULL else 0
    else:
        # Elementwise: broadcasting is the union of the argument kinds.
        kind = None
        for k in known:
            kind = _join(kind, k)
        if kind is None and (strict or not kinds):
            kind = SCALAR  # constants only (unknown slot kinds stay unknown until the last pass)
    nodes.append(NodeInfo(index, my_position, e, kind, tuple(kinds), level))
    return kind, level, position
