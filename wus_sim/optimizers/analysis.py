"""Static analysis of an optimizer program (Xu et al. 2020, "static analysis" of the update).

Everything is derived from the program; nothing is looked up in a table.

Cost model (the assumptions, in one place):

* **Fusion.** The update of one tensor is one fused kernel: ``w``, ``g`` and every
  slot are read from HBM once and ``w`` and every slot are written once;
  temporaries (``u``, ``m_hat``, a re-bound ``g``) stay on chip. A program with a
  whole-tensor reduction needs more than one pass over the tensor (LAMB: the
  norms, then the step); :attr:`CaseAnalysis.passes` reports how many, but the
  bytes assume the data is still on chip for the later passes (true for a
  sharded update whose shard fits on chip; an optimistic bound otherwise).
* **Flops.** Every arithmetic operation on a full tensor counts 1 flop per
  element: ``+ - * /``, unary minus, ``sqrt``, ``abs``, ``pow``/``**``,
  ``maximum``, ``minimum``, ``where`` and comparisons. A reduction costs 1 flop
  per input value (the add), 2 for a norm (square and add), plus 1 per output
  value for the final ``sqrt`` or division. The program is counted as written:
  no common-subexpression elimination, dead temporaries included (they are
  listed in ``unused``). Operations on scalars and on row/column vectors are
  counted apart (per tensor, per row, per column).
* **Sharding.** A sharded update gives each replica a slice of every tensor, in
  one of three layouts: ``flat`` (flattened, cut into equal pieces), ``rows``
  (whole rows of the matrix view) or ``cols`` (whole columns). A reduction whose
  input is split across replicas along an axis it reduces becomes a partial
  reduction on each shard plus a cross-replica all-reduce (a sum) of the small
  result: one value per tensor for a whole-tensor norm/sum/mean, a ``[rows]`` or
  ``[cols]`` vector for a row/column statistic, one value per step for a global
  reduction. Under ``rows``, row vectors are sharded with the tensor and column
  vectors are replicated (each replica holds and updates the whole vector);
  ``cols`` is the mirror image; ``flat`` cannot compute row/column statistics
  (a flat shard holds pieces of rows and columns), so it is not allowed for a
  program that has them.

Matrix view of a tensor: rank >= 2: ``rows = prod(shape[:-1])``, ``cols = shape[-1]``;
rank 0 and 1 tensors have no row/column statistics (the program language forbids them
in a case that can see such tensors).

One concept in ~500 lines, said so because it is long: the cost of an update, derived from its program. The cost
model, the sharding rules and the layout choice read the same dataflow facts.
"""

from dataclasses import dataclass, field
from functools import lru_cache
import math

from .dataflow import flow
from .language import COLS, FULL, REDUCTIONS, ROWS, SCALAR, kind_name, render
from .registry import load_optimizer

__all__ = ["Reduction", "ShardOption", "CaseAnalysis", "OptimizerAnalysis", "analyse",
           "LAYOUTS", "matrix_view"]

LAYOUTS = ("flat", "rows", "cols")
"""How a sharded update may cut a tensor: flattened, by whole rows, by whole columns."""

_SPLIT = {"flat": {FULL}, "rows": {FULL, ROWS}, "cols": {FULL, COLS}}
"""Kinds whose values are split across replicas under each layout (others are replicated)."""


def matrix_view(shape):
    """``(size, rows, cols)`` of a tensor shape; rows/cols are ``None`` below rank 2."""
    return _matrix_view(tuple(shape))


@lru_cache(maxsize=4096)  # a sweep asks for the same few hundred shapes at every point
def _matrix_view(shape):
    shape = tuple(int(d) for d in shape)
    size = math.prod(shape)
    if len(shape) < 2:
        return size, None, None
    return size, math.prod(shape[:-1]), shape[-1]


def _count(kind, shape):
    size, rows, cols = matrix_view(shape)
    if kind == FULL:
        return size
    if kind == ROWS:
        return rows
    if kind == COLS:
        return cols
    return 1


@dataclass(frozen=True)
class Reduction:
    """A cross-replica all-reduce that a sharded update adds (partial sums, then a sum)."""

    what: str
    """The reduction as written, e.g. ``'norm(w)'``, ``'col_mean(g2)'``, ``'global_norm(g)'``."""
    scope: str
    """``'per_tensor'`` (every tensor contributes its own result) or ``'global'`` (one for the step)."""
    values_per_tensor: int | None
    """Per-tensor scope: values each tensor all-reduces (1 for a scalar; ``None`` for a
    vector, whose length is given by :attr:`vector`). ``None`` for global scope."""
    values_total: int | None
    """Global scope: values all-reduced for the whole step (1). ``None`` for per-tensor scope."""
    dtype_bytes: int
    """Bytes per value (partial sums are kept in fp32 by default)."""
    vector: str | None = None
    """``'rows'`` or ``'cols'``: each tensor all-reduces a vector of that many values."""
    statement: str = field(default="", compare=False)
    """The statement the reduction is in."""
    at: tuple = field(default=(), compare=False)
    """(statement index, node position) in its case's program, for the reference interpreter."""

    def values(self, shape=None):
        """Values all-reduced for one tensor of *shape* (per-tensor) or for the step (global)."""
        if self.scope == "global":
            return self.values_total
        if self.vector is None:
            return self.values_per_tensor
        if shape is None:
            raise ValueError(f"{self.what}: a [{self.vector}] vector needs the tensor shape")
        return _count(ROWS if self.vector == "rows" else COLS, shape)

    def to_dict(self):
        size = self.vector if self.vector else (self.values_total if self.scope == "global" else self.values_per_tensor)
        return {"what": self.what, "scope": self.scope, "values_per_tensor": self.values_per_tensor,
                "values_total": self.values_total, "vector": self.vector, "size": size,
                "dtype_bytes": self.dtype_bytes, "statement": self.statement}


@dataclass(frozen=True)
class ShardOption:
    """What sharding a tensor in one layout implies for this program."""

    layout: str
    """One of :data:`LAYOUTS`."""
    allowed: bool
    reason: str
    """Why not, or what it costs, in words."""
    reductions: tuple = ()
    """Cross-replica reductions needed under this layout."""
    replicated_slots: tuple = ()
    """Slots every replica holds whole under this layout (vector or scalar slots)."""

    def to_dict(self):
        return {"layout": self.layout, "allowed": self.allowed, "reason": self.reason,
                "reductions": [r.to_dict() for r in self.reductions],
                "replicated_slots": list(self.replicated_slots)}


@dataclass(frozen=True)
class CaseAnalysis:
    """The analysis of one case (the program for one range of tensor ranks)."""

    label: str
    min_rank: int
    max_rank: int | None
    program: tuple
    """The statements, as text."""
    slot_kinds: dict
    """Slot name -> ``'full'``, ``'rows'``, ``'cols'`` or ``'scalar'``."""
    reads_w: bool
    reads_g: bool
    bytes_read_per_element: float
    bytes_written_per_element: float
    flops_per_element: float
    flops_per_row: float
    """Flops on ``[rows]`` vectors, per row."""
    flops_per_col: float
    flops_per_tensor: float
    """Flops on scalars, per tensor (hyper-parameter arithmetic, norm square roots)."""
    non_elementwise: tuple
    """One description per reduction in the program."""
    layouts: tuple
    """:class:`ShardOption` for each layout that applies (``flat`` only, below rank 2)."""
    preferred_layout: str
    passes: int
    """Passes over the full tensor: 1 + the depth of whole-tensor reductions in the data flow."""
    unused: tuple
    """Temporaries assigned and never read (dead code; still counted)."""
    weight_bytes: int
    grad_bytes: int
    slot_bytes: int

    @property
    def slot_names(self):
        return tuple(self.slot_kinds)

    @property
    def slots(self):
        """Full-tensor slots: state values per weight element."""
        return sum(1 for k in self.slot_kinds.values() if k == "full")

    @property
    def factored_slots(self):
        """Row/column (and scalar) slots, whose size does not grow with the element count."""
        return tuple(n for n, k in self.slot_kinds.items() if k != "full")

    @property
    def cross_replica_reductions(self):
        return self.layout(self.preferred_layout).reductions

    @property
    def shard_constraints(self):
        """Every layout with its consequences, if the layout matters; ``()`` if any layout works alike."""
        rows_or_cols = any(k in ("rows", "cols") for k in self.slot_kinds.values()) or \
            any(not o.allowed for o in self.layouts) or \
            len({o.reductions for o in self.layouts}) > 1
        return self.layouts if rows_or_cols else ()

    def layout(self, name):
        for o in self.layouts:
            if o.layout == name:
                return o
        raise ValueError(f"layout {name!r} does not apply to {self.label}; options: "
                         f"{', '.join(o.layout for o in self.layouts)}")

    def slot_elements(self, shape):
        return sum(_count(_KIND[k], shape) for k in self.slot_kinds.values())

    def bytes_read(self, shape):
        size = matrix_view(shape)[0]
        return (self.weight_bytes * self.reads_w + self.grad_bytes * self.reads_g) * size \
            + self.slot_bytes * self.slot_elements(shape)

    def bytes_written(self, shape):
        size = matrix_view(shape)[0]
        return self.weight_bytes * size + self.slot_bytes * self.slot_elements(shape)

    def flops(self, shape):
        size, rows, cols = matrix_view(shape)
        return (self.flops_per_element * size + self.flops_per_row * (rows or 0)
                + self.flops_per_col * (cols or 0) + self.flops_per_tensor)

    def to_dict(self):
        return {
            "label": self.label, "min_rank": self.min_rank, "max_rank": self.max_rank,
            "program": list(self.program), "slots": self.slots, "slot_names": list(self.slot_names), "slot_kinds": dict(self.slot_kinds),
            "bytes_read_per_element": self.bytes_read_per_element,
            "bytes_written_per_element": self.bytes_written_per_element,
            "flops_per_element": self.flops_per_element, "flops_per_row": self.flops_per_row,
            "flops_per_col": self.flops_per_col, "flops_per_tensor": self.flops_per_tensor,
            "passes": self.passes, "non_elementwise": list(self.non_elementwise),
            "preferred_layout": self.preferred_layout,
            "cross_replica_reductions": [r.to_dict() for r in self.cross_replica_reductions],
            "layouts": [o.to_dict() for o in self.layouts], "unused": list(self.unused),
        }


_KIND = {"full": FULL, "rows": ROWS, "cols": COLS, "scalar": SCALAR}


@dataclass(frozen=True)
class OptimizerAnalysis:
    """What an optimizer program costs, per element and per tensor, replicated and sharded.

    The per-element figures (``slots``, ``bytes_*_per_element``, ``flops_per_element``,
    ``cross_replica_reductions``, ...) are those of the *primary case*, the program run
    on matrices (rank 2), where almost all parameters live; the methods taking a
    ``shape`` pick the right case and are exact for any tensor.
    """

    name: str
    description: str
    cases: tuple
    """:class:`CaseAnalysis` per case, in file order."""
    primary: CaseAnalysis
    weight_bytes: int
    grad_bytes: int
    slot_bytes: int
    reduction_bytes: int
    hyper: dict = field(default_factory=dict)
    """Hyper-parameter defaults (the analysis does not depend on their values)."""
    sources: dict = field(default_factory=dict, compare=False)

    def __repr__(self):
        return f"<OptimizerAnalysis {self.name}: {len(self.cases)} case(s), {self.slot_bytes} B per slot element>"

    # --- the fields `describe optimizer --json` promises, from the primary case -------------------------------------
    @property
    def slots(self):
        """Full-tensor slots per weight element (Adam 2; Adafactor 0, its state is factored)."""
        return self.primary.slots

    @property
    def slot_names(self):
        """Slot names of the primary case, in program order."""
        return self.primary.slot_names

    @property
    def slot_kinds(self):
        return self.primary.slot_kinds

    @property
    def factored_slots(self):
        return self.primary.factored_slots

    @property
    def bytes_read_per_element(self):
        return self.primary.bytes_read_per_element

    @property
    def bytes_written_per_element(self):
        return self.primary.bytes_written_per_element

    @property
    def flops_per_element(self):
        return self.primary.flops_per_element

    @property
    def non_elementwise(self):
        return self.primary.non_elementwise

    @property
    def cross_replica_reductions(self):
        """Reductions a sharded update adds, primary case, preferred layout."""
        return self.primary.cross_replica_reductions

    @property
    def shard_constraints(self):
        """:class:`ShardOption` per layout when the layout matters (Adafactor), else ``()``."""
        return self.primary.shard_constraints

    @property
    def preferred_layout(self):
        return self.primary.preferred_layout

    @property
    def passes(self):
        return self.primary.passes

    # --- exact, per tensor shape --------------------------------------------------------
    def case_for(self, shape):
        """The :class:`CaseAnalysis` for a tensor of this shape (by its rank)."""
        rank = len(tuple(shape))
        for c in self.cases:
            if c.min_rank <= rank and (c.max_rank is None or rank <= c.max_rank):
                return c
        raise AssertionError(f"no case for rank {rank}")

    def slot_elements(self, shape):
        """Slot values kept for one tensor of *shape* (Adafactor matrix: rows + cols)."""
        return self.case_for(shape).slot_elements(shape)

    def bytes_read(self, shape):
        """HBM bytes the update of one whole tensor reads (fusion assumption, see module doc)."""
        return self.case_for(shape).bytes_read(shape)

    def bytes_written(self, shape):
        return self.case_for(shape).bytes_written(shape)

    def flops(self, shape):
        """Flops of the update of one whole tensor, vector and scalar work included."""
        return self.case_for(shape).flops(shape)

    def reductions_for(self, shape, layout=None):
        """``[(Reduction, values)]`` a sharded update of one tensor of *shape* all-reduces.

        *layout* defaults to the case's preferred layout (``flat``, or ``rows`` for a
        factored program; :meth:`choose_layout` picks one for a replica count).
        Below rank 2 every layout is a flat cut. Global reductions are listed with
        their step total (1): count them once per step, not once per tensor.
        """
        case = self.case_for(shape)
        name = layout or case.preferred_layout
        if name not in [o.layout for o in case.layouts]:
            name = "flat"  # below rank 2 there are no rows or columns: every cut is a flat cut
        option = case.layout(name)
        if not option.allowed:
            raise ValueError(f"{self.name}: layout {name!r} is not allowed for {case.label}: {option.reason}")
        return [(r, r.values(shape)) for r in option.reductions]

    def choose_layout(self, shape, replicas):
        """The allowed layout for *shape* over *replicas* that pads least, then all-reduces least.

        ``flat`` pads ``size`` up to a multiple of *replicas*; ``rows`` pads rows and
        ``cols`` pads columns (padding a whole row costs ``cols`` elements).
        """
        case = self.case_for(shape)
        size, rows, cols = matrix_view(shape)

        def padding(layout):
            if layout == "flat":
                return -size % replicas
            if layout == "rows":
                return (-rows % replicas) * cols
            return (-cols % replicas) * rows

        def cost(o):
            return (padding(o.layout), sum(r.values(shape) for r in o.reductions if r.scope == "per_tensor"),
                    LAYOUTS.index(o.layout))

        options = [o for o in case.layouts if o.allowed]
        return min(options, key=cost).layout

    def to_dict(self):
        """JSON-ready; the documented keys at top level (primary case), every case under ``cases``."""
        p = self.primary
        return {
            "name": self.name, "description": self.description, "hyper": dict(self.hyper),
            "sources": dict(self.sources),
            "dtype_bytes": {"weight": self.weight_bytes, "grad": self.grad_bytes,
                            "slot": self.slot_bytes, "reduction": self.reduction_bytes},
            "primary_case": p.label,
            "slots": p.slots, "slot_names": list(p.slot_names), "slot_kinds": dict(p.slot_kinds),
            "bytes_read_per_element": p.bytes_read_per_element,
            "bytes_written_per_element": p.bytes_written_per_element,
            "flops_per_element": p.flops_per_element, "passes": p.passes,
            "non_elementwise": list(p.non_elementwise),
            "preferred_layout": p.preferred_layout,
            "cross_replica_reductions": [r.to_dict() for r in p.cross_replica_reductions],
            "shard_constraints": [o.to_dict() for o in p.shard_constraints],
            "cases": [c.to_dict() for c in self.cases],
        }


def analyse(optimizer, *, weight_bytes=4, grad_bytes=4, slot_bytes=4, reduction_bytes=4):
    """Derive an :class:`OptimizerAnalysis` from an optimizer program (or its name).

    Sizes are bytes per value: *weight_bytes* (fp32 master weights), *grad_bytes*
    (4, or 2 for bf16 gradients), *slot_bytes* (optimizer state), *reduction_bytes*
    (partial sums all-reduced by a sharded update; fp32).
    """
    from ..inputs.api_args import check_int

    # bytes per element of a dtype: 1 (int8, fp8) to 8 (float64); -1 or 2.5 bytes is no dtype
    weight_bytes, grad_bytes, slot_bytes, reduction_bytes = (
        check_int(v, k, minimum=1, maximum=8) for k, v in (("weight_bytes", weight_bytes), ("grad_bytes", grad_bytes),
                                                         ("slot_bytes", slot_bytes),
                                                         ("reduction_bytes", reduction_bytes)))
    opt = load_optimizer(optimizer)
    sizes = dict(weight_bytes=int(weight_bytes), grad_bytes=int(grad_bytes), slot_bytes=int(slot_bytes))
    cases = tuple(_analyse_case(opt, c, sizes, int(reduction_bytes)) for c in opt.cases)
    primary = cases[opt.cases.index(opt.primary_case)]
    return OptimizerAnalysis(name=opt.name, description=opt.description, cases=cases, primary=primary,
                             reduction_bytes=int(reduction_bytes), hyper=dict(opt.hyper),
                             sources=dict(opt.sources), **sizes)


_DESCRIBE_OVER = {
    "all": "whole-tensor reduction -> one scalar per tensor",
    "cols": "reduces each row (over its columns) -> [rows] vector",
    "rows": "reduces each column (over its rows) -> [cols] vector",
    "global": "reduction over every tensor of the model -> one scalar per step",
}


def _analyse_case(opt, case, sizes, reduction_bytes):
    f = flow(case.statements, opt.hyper, min_rank=case.min_rank)
    full_slots = sum(1 for k in f.slots.values() if k == FULL)
    read = sizes["weight_bytes"] * f.reads_w + sizes["grad_bytes"] * f.reads_g + sizes["slot_bytes"] * full_slots
    written = sizes["weight_bytes"] + sizes["slot_bytes"] * full_slots

    flops = {FULL: 0, ROWS: 0, COLS: 0, SCALAR: 0}
    reductions = []  # (NodeInfo, Reduce)
    for info in f.nodes:
        red = REDUCTIONS.get(info.node.op)
        if red is None:
            flops[info.kind] += 1
        else:
            flops[info.arg_kinds[0]] += red.flops_per_input
            flops[info.kind] += 1 if red.finish else 0
            reductions.append((info, red))
    reductions.sort(key=lambda ir: (ir[0].index, ir[0].position))

    non_elementwise = tuple(f"{render(i.node)}: {_DESCRIBE_OVER[r.over]}" for i, r in reductions)
    factored = any(r.over in ("rows", "cols") for _, r in reductions) or \
        any(k in (ROWS, COLS) for k in f.slots.values())
    names = LAYOUTS if case.min_rank >= 2 else ("flat",)
    layouts = tuple(_layout(name, reductions, f, case, reduction_bytes) for name in names)
    preferred = "rows" if factored else "flat"
    passes = 1 + max((i.level for i in f.nodes if i.kind == FULL), default=0)
    return CaseAnalysis(
        label=case.label, min_rank=case.min_rank, max_rank=case.max_rank,
        program=tuple(str(s) for s in case.statements),
        slot_kinds={n: kind_name(k) for n, k in f.slots.items()},
        reads_w=f.reads_w, reads_g=f.reads_g,
        bytes_read_per_element=float(read), bytes_written_per_element=float(written),
        flops_per_element=float(flops[FULL]), flops_per_row=float(flops[ROWS]),
        flops_per_col=float(flops[COLS]), flops_per_tensor=float(flops[SCALAR]),
        non_elementwise=non_elementwise, layouts=layouts, preferred_layout=preferred,
        passes=passes, unused=tuple(f.unused), **sizes)


def _layout(layout, reductions, f, case, reduction_bytes):
    split = _SPLIT[layout]
    blocked = [render(i.node) for i, r in reductions if r.over in ("rows", "cols") and layout == "flat"]
    if blocked:
        return ShardOption(layout, False,
                           f"a flat shard holds pieces of rows and columns, so {', '.join(blocked)} cannot be "
                           "computed from partial sums; flattening breaks the factoring", (), ())
    needed = []
    for info, red in reductions:
        arg = info.arg_kinds[0]
        if arg not in split:
            continue  # the argument is whole on every replica: the reduction is local
        if red.over in ("all", "global"):
            crossing = True
        else:  # "cols" reduces the cols axis, "rows" the rows axis: crossing if that axis is cut
            crossing = red.over == layout
        if not crossing:
            continue
        stmt = case.statements[info.index]
        vector = {ROWS: "rows", COLS: "cols"}.get(info.kind)
        scope = "global" if red.over == "global" else "per_tensor"
        needed.append(Reduction(
            what=render(info.node), scope=scope,
            values_per_tensor=None if (scope == "global" or vector) else 1,
            values_total=1 if scope == "global" else None,
            dtype_bytes=reduction_bytes, vector=vector, statement=str(stmt),
            at=(info.index, info.position)))
    replicated = tuple(n for n, k in f.slots.items() if k not in split)
    if layout == "flat":
        reason = "any layout works alike" if not needed else "partial sums on each shard, then all-reduce"
    else:
        local = [render(i.node) for i, r in reductions if r.over in ("rows", "cols") and
                 not any(x.at == (i.index, i.position) for x in needed)]
        parts = []
        if local:
            parts.append(f"{', '.join(local)} stay local")
        vec = [x.what for x in needed if x.vector]
        if vec:
            parts.append(f"{', '.join(vec)} need a cross-replica all-reduce of a vector")
        if replicated:
            parts.append(f"slots {', '.join(replicated)} are replicated")
        reason = "; ".join(parts) or "partial sums on each shard, then all-reduce"
    return ShardOption(layout, True, reason, tuple(needed), replicated)
