"""The optimizer program language: one assignment per statement, parsed with :mod:`ast`.

An optimizer is a short program run once per weight tensor per step. Each
statement is a Python-syntax assignment ``name = expression``; the text is parsed
with :func:`ast.parse` and only the safe subset below is accepted (nothing is ever
evaluated by Python)::

    m = b1*m + (1 - b1)*g
    u = m / (sqrt(v) + eps)
    w = w - lr*u

Names
    ``w`` (the weight tensor, read and written), ``g`` (its gradient; it may be
    re-bound, e.g. by a clipping prefix, but is never written back), ``t`` (the
    step number, 1 on the first step, a scalar), the optimizer's scalar
    hyper-parameters, and variables. A variable read before it is assigned is a
    *slot* (state kept across steps, e.g. Adam's ``m``); any other variable is a
    temporary.

Expressions
    numbers; ``+ - * / **`` and unary ``-``; comparisons ``> >= < <=`` (only as
    the condition of ``where``); the elementwise functions in
    :data:`ELEMENTWISE`; and the reductions in :data:`REDUCTIONS`.

Shapes
    Every value has a *kind*: a scalar, a full tensor (the weight's shape), or,
    for tensors of rank >= 2 seen as a matrix ``[rows, cols]`` with
    ``rows = prod(shape[:-1])`` and ``cols = shape[-1]``, a row vector
    (``[rows]``) or a column vector (``[cols]``). Elementwise operations
    broadcast: a row vector times a column vector is a full tensor (outer
    product). A kind is written as the set of matrix axes it spans, so
    broadcasting is set union.
"""

import ast
from dataclasses import dataclass
import math

from ..inputs.limits import MAX_EXPR_DEPTH, MAX_STATEMENT_CHARS
from ..inputs.text import short_repr

__all__ = [
    "Const", "Var", "Op", "Statement", "Reduce",
    "SCALAR", "ROWS", "COLS", "FULL", "kind_name",
    "INPUTS", "ELEMENTWISE", "REDUCTIONS", "BINARY", "COMPARE", "RESERVED",
    "parse_statement", "render", "walk", "names_read", "rename", "LanguageError",
]

SCALAR = frozenset()
"""Kind of a scalar (hyper-parameter, step number, result of a whole-tensor reduction)."""
ROWS = frozenset({"rows"})
"""Kind of a row vector ``[rows]``: one value per row of the matrix view."""
COLS = frozenset({"cols"})
"""Kind of a column vector ``[cols]``: one value per column of the matrix view."""
FULL = frozenset({"rows", "cols"})
"""Kind of a full tensor, shaped like the weight."""

_KIND_NAMES = {SCALAR: "scalar", ROWS: "rows", COLS: "cols", FULL: "full"}


def kind_name(kind):
    """``'scalar'``, ``'rows'``, ``'cols'`` or ``'full'``."""
    return _KIND_NAMES[kind]


INPUTS = {"w": FULL, "g": FULL, "t": SCALAR}
"""Names every program may read without assigning them first, with their kinds."""

BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
"""Arithmetic operators accepted, by ast node type."""

COMPARE = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}
"""Comparison operators accepted (single comparisons, e.g. ``norm_w > 0``)."""

ELEMENTWISE = {"sqrt": 1, "abs": 1, "pow": 2, "maximum": 2, "minimum": 2, "where": 3}
"""Elementwise functions and their argument counts; each costs 1 flop per output value."""


@dataclass(frozen=True)
class Reduce:
    """How a reduction function behaves: what it reduces and what it costs."""

    name: str
    over: str
    """``'all'`` (whole tensor), ``'cols'`` (each row, giving ``[rows]``),
    ``'rows'`` (each column, giving ``[cols]``) or ``'global'`` (all tensors)."""
    combine: str
    """What each value contributes: ``'square'`` (norm) or ``'value'`` (sum, mean)."""
    finish: str
    """Applied once to the combined sum: ``'sqrt'`` (norm), ``'divide'`` (mean) or ``''``."""

    @property
    def flops_per_input(self):
        """Flops per reduced value: one add, plus one multiply when squaring (norm)."""
        return 2 if self.combine == "square" else 1

    @property
    def result_kind(self):
        return {"all": SCALAR, "global": SCALAR, "cols": ROWS, "rows": COLS}[self.over]


REDUCTIONS = {r.name: r for r in (
    Reduce("norm", "all", "square", "sqrt"),
    Reduce("sum", "all", "value", ""),
    Reduce("mean", "all", "value", "divide"),
    Reduce("row_sum", "cols", "value", ""),
    Reduce("row_mean", "cols", "value", "divide"),
    Reduce("col_sum", "rows", "value", ""),
    Reduce("col_mean", "rows", "value", "divide"),
    Reduce("global_norm", "global", "square", "sqrt"),
    Reduce("global_sum", "global", "value", ""),
)}
"""Reductions: ``norm``/``sum``/``mean`` over one whole tensor (scalar result);
``row_sum``/``row_mean`` over the columns of each row (``[rows]``) and
``col_sum``/``col_mean`` over the rows of each column (``[cols]``), for tensors of
rank >= 2 only; ``global_norm``/``global_sum`` over every tensor of the model
(one scalar per step)."""

RESERVED = set(ELEMENTWISE) | set(REDUCTIONS)
"""Names that cannot be variables or hyper-parameters."""


@dataclass(frozen=True)
class Const:
    """A number literal."""

    value: float


@dataclass(frozen=True)
class Var:
    """A name: input, hyper-parameter, slot or temporary."""

    name: str


@dataclass(frozen=True)
class Op:
    """An operation: an operator symbol (``'+'``, ``'neg'``, ``'>'``) or a function name."""

    op: str
    args: tuple


@dataclass(frozen=True)
class Statement:
    """``target = expr``, with where it came from for error messages."""

    target: str
    expr: object
    text: str = ""
    """The statement as written (or as rendered, for generated statements)."""
    key_path: str = ""
    """Key path in its file, e.g. ``'program[2]'``."""

    def __str__(self):
        return f"{self.target} = {render(self.expr)}"


class LanguageError(ValueError):
    """A statement outside the language; the loader turns it into a ConfigError."""


_CONSTRUCTS = {
    ast.Attribute: "attribute access", ast.Subscript: "indexing", ast.Lambda: "lambda",
    ast.BoolOp: "and/or", ast.IfExp: "if-else expressions (use where)",
    ast.Starred: "star arguments", ast.JoinedStr: "f-strings",
    ast.ListComp: "comprehensions", ast.GeneratorExp: "comprehensions",
    ast.List: "lists", ast.Tuple: "tuples", ast.Dict: "dicts", ast.Set: "sets",
    ast.NamedExpr: ":=", ast.Await: "await", ast.Yield: "yield",
}


def parse_statement(text):
    """Parse ``'name = expression'`` into a :class:`Statement` (key path left empty).

    Raises :class:`LanguageError` with the rule that is broken.
    """
    if not isinstance(text, str):
        raise LanguageError("must be a string 'name = expression' (quote it in YAML if it contains ': ' or '#')")
    if len(text) > MAX_STATEMENT_CHARS:
        raise LanguageError(f"is {len(text):,} characters long; the limit is {MAX_STATEMENT_CHARS:,} per statement")
    try:
        tree = ast.parse(text.strip(), mode="exec")
    except SyntaxError as exc:
        raise LanguageError(f"is not a valid statement ({exc.msg})") from None
    except (RecursionError, MemoryError, ValueError):  # parser limits: nesting, huge literals
        raise LanguageError("is too deeply nested or too large to parse") from None
    depth = _depth(tree)
    if depth > MAX_EXPR_DEPTH:
        # Checked before the recursive walks below (and the analyser's) can overflow the stack.
        raise LanguageError(f"nests {depth} levels deep; the limit is {MAX_EXPR_DEPTH} "
                            "(split it into several statements)")
    if len(tree.body) != 1:
        raise LanguageError("must be exactly one statement 'name = expression'")
    node = tree.body[0]
    if isinstance(node, ast.AugAssign):
        raise LanguageError("augmented assignment is not supported; write 'x = x + ...'")
    if not isinstance(node, ast.Assign):
        raise LanguageError("must be an assignment 'name = expression'")
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        raise LanguageError("must assign exactly one plain name")
    target = node.targets[0].id
    _check_name(target)
    return Statement(target, _expr(node.value), text=text.strip())


def _depth(tree):
    """Nesting depth of an AST, walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check_name(name):
    if name in RESERVED:
        raise LanguageError(f"uses the function name {short_repr(name)} as a variable")
    if name.startswith("_"):
        raise LanguageError(f"name {short_repr(name)} must not start with '_'")


def _expr(node):
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise LanguageError(f"contains the literal {short_repr(node.value)}; only real numbers are allowed")
        try:
            value = float(node.value)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise LanguageError(f"contains the literal {short_repr(node.value)}, which is not a finite number")
        return Const(value)
    if isinstance(node, ast.Name):
        _check_name(node.id)
        return Var(node.id)
    if isinstance(node, ast.BinOp):
        sym = BINARY.get(type(node.op))
        if sym is None:
            raise LanguageError(f"uses the operator {type(node.op).__name__}; allowed: + - * / **")
        return Op(sym, (_expr(node.left), _expr(node.right)))
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub):
            inner = _expr(node.operand)
            return Const(-inner.value) if isinstance(inner, Const) else Op("neg", (inner,))
        if isinstance(node.op, ast.UAdd):
            return _expr(node.operand)
        raise LanguageError(f"uses the operator {type(node.op).__name__}; allowed: unary -")
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1 or type(node.ops[0]) not in COMPARE:
            raise LanguageError("comparisons must be single and one of > >= < <=")
        return Op(COMPARE[type(node.ops[0])], (_expr(node.left), _expr(node.comparators[0])))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise LanguageError("calls only named functions (no attribute or computed calls)")
        name = node.func.id
        if node.keywords:
            raise LanguageError(f"passes keyword arguments to {name}(); only positional ones are allowed")
        if name in ELEMENTWISE:
            arity = ELEMENTWISE[name]
        elif name in REDUCTIONS:
            arity = 1
        else:
            known = ", ".join(sorted(RESERVED))
            raise LanguageError(f"calls unknown function {short_repr(name)}; known functions: {known}")
        if len(node.args) != arity:
            raise LanguageError(f"calls {name}() with {len(node.args)} arguments; it takes {arity}")
        return Op(name, tuple(_expr(a) for a in node.args))
    what = _CONSTRUCTS.get(type(node), type(node).__name__)
    raise LanguageError(f"uses {what}, which is outside the optimizer language")


# Printing: precedence climbing so that render() output parses back to the same tree.
_PREC = {">": 0, ">=": 0, "<": 0, "<=": 0, "+": 1, "-": 1, "*": 2, "/": 2, "neg": 3, "**": 4}


def render(expr):
    """The expression as program text; ``parse_statement`` of it gives the same tree."""
    return _render(expr, 0)


def _render(e, outer):
    if isinstance(e, Const):
        v = e.value
        text = repr(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)
        return f"({text})" if v < 0 and outer > 0 else text
    if isinstance(e, Var):
        return e.name
    if e.op in ELEMENTWISE or e.op in REDUCTIONS:
        return f"{e.op}({', '.join(_render(a, 0) for a in e.args)})"
    p = _PREC[e.op]
    if e.op == "neg":
        text = "-" + _render(e.args[0], p + 1)
    elif e.op == "**":  # right-associative, binds tighter than unary minus on its left
        text = f"{_render(e.args[0], p + 1)} ** {_render(e.args[1], p)}"
    else:  # left-associative
        text = f"{_render(e.args[0], p)} {e.op} {_render(e.args[1], p + 1)}"
    return f"({text})" if p < outer else text


def walk(expr):
    """Every node of *expr*, parents before children (pre-order)."""
    yield expr
    if isinstance(expr, Op):
        for a in expr.args:
            yield from walk(a)


def names_read(expr):
    """Names *expr* reads, in order of first appearance."""
    return list(dict.fromkeys(n.name for n in walk(expr) if isinstance(n, Var)))


def rename(expr, mapping):
    """*expr* with names replaced through *mapping* (names not in it are kept)."""
    if isinstance(expr, Var):
        return Var(mapping.get(expr.name, expr.name))
    if isinstance(expr, Op):
        return Op(expr.op, tuple(rename(a, mapping) for a in expr.args))
    return expr
