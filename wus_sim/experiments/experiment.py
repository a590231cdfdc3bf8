"""An experiment as data: its sweep axes, plots and points (what :func:`wus_sim.experiments.spec.parse_experiment` builds)."""

from dataclasses import dataclass, field
import itertools
import math

from ..inputs.config import Section, key_join
from ..inputs.errors import ConfigError
from ..inputs.limits import MAX_SWEEP_POINTS, check_limit

from ..training.parameters.params import complete_point, default_of

__all__ = ["Axis", "PlotSpec", "Experiment"]


# ---------------------------------------------------------------- experiments
@dataclass(frozen=True)
class Axis:
    """A sweep axis group: one key, or several keys that vary together (a zip group)."""

    keys: tuple
    values: tuple
    """One tuple of values per key, all the same length."""
    where: tuple
    """Key path of each key in the file (for error messages)."""

    def __len__(self):
        return len(self.values[0])

    def rows(self):
        """One ``{key: value}`` dict per position along the axis."""
        return [dict(zip(self.keys, combo)) for combo in zip(*self.values)]


@dataclass(frozen=True)
class PlotSpec:
    """A plot the experiment asks for; its options are checked by :mod:`wus_sim.plotting`."""

    kind: str
    name: str
    """File stem of the PNG/SVG written beside the results."""
    options: dict
    section: Section = field(repr=False, compare=False)
    """The YAML mapping it came from (for errors naming file and key path)."""


@dataclass(frozen=True)
class Experiment:
    """A validated experiment: fixed parameters, sweep axes, reduced-form filter and plots."""

    name: str
    description: str
    file: str
    """Source YAML path (``None`` when built from a mapping)."""
    base: dict
    """Fixed point parameters (validated, defaults not yet filled)."""
    axes: tuple
    """:class:`Axis` groups, outermost first; the sweep is their cartesian product."""
    reduce: dict = field(default_factory=dict)
    """``{key: [values]}``: the reduced form keeps only points whose value is listed."""
    plots: tuple = ()

    @property
    def num_points(self):
        """Points of the full sweep, counted without expanding it."""
        return math.prod(len(axis) for axis in self.axes)

    def _axis_rows(self, reduced):
        """Each axis's rows; with *reduced*, only rows the ``reduce`` filter keeps (each key
        lives on one axis, so filtering axis by axis keeps exactly the points it would)."""
        out = []
        for axis in self.axes:
            rows = axis.rows()
            if reduced:
                rows = [r for r in rows if all(r[k] in self.reduce[k] for k in r if k in self.reduce)]
            out.append(rows)
        return out

    def count(self, *, reduced=False, limit=None):
        """Points :meth:`points` would give, counted without expanding the sweep."""
        n = math.prod(len(rows) for rows in self._axis_rows(reduced))
        return n if limit is None else min(n, limit)

    def iter_points(self, *, reduced=False, limit=None):
        """Complete points in sweep order (first axis outermost), generated lazily."""
        combos = itertools.product(*self._axis_rows(reduced))
        for combo in itertools.islice(combos, limit):
            values = dict(self.base)
            for part in combo:
                values.update(part)
            yield complete_point(values)

    def points(self, *, reduced=False, limit=None):
        """Expanded, complete points in sweep order (first axis outermost), as a list.

        *reduced* applies the ``reduce`` filter; *limit* keeps the first N points. The
        count is checked against :data:`~wus_sim.inputs.limits.MAX_SWEEP_POINTS` before anything
        is expanded.
        """
        check_limit("the points to run", self.count(reduced=reduced, limit=limit), MAX_SWEEP_POINTS,
                    file=self.file, key_path="sweep", hint="use --limit N or --reduced, or sweep fewer values")
        return list(self.iter_points(reduced=reduced, limit=limit))

    def values_of(self, key, *, reduced=False, limit=None):
        """The distinct values point key *key* takes over the points :meth:`points` would give
        (its default where neither the base nor an axis sets it), found from the axes alone: a
        summary of a 100,000-point run need not expand the sweep again."""
        rows = self._axis_rows(reduced)
        n = math.prod(len(r) for r in rows)
        if limit is not None:
            n = min(n, limit)
        if n == 0:
            return set()
        for i, axis_rows in enumerate(rows):
            if key in axis_rows[0]:
                # the first n points (first axis outermost) reach this axis's positions 0..(n-1)//stride
                stride = math.prod(len(r) for r in rows[i + 1:])
                return {r[key] for r in axis_rows[:(n - 1) // stride + 1]}
        return {self.base.get(key, default_of(key))}

    def _check_cross(self):
        """per_replica_batch and global_batch never both set on one point (checked on the
        axes, not on the expanded sweep, so a 10^7-point sweep is checked at once)."""
        a, b = "per_replica_batch", "global_batch"

        def values(key):  # (axis index or None for base, values along it)
            if key in self.base:
                return None, [self.base[key]]
            for i, axis in enumerate(self.axes):
                if key in axis.keys:
                    return i, list(axis.values[axis.keys.index(key)])
            return None, [None]

        (ia, va), (ib, vb) = values(a), values(b)
        if ia is not None and ia == ib:
            pairs = [(x, y) for x, y in zip(va, vb) if x is not None and y is not None]
        else:
            # On different axes (or base) every value of one meets every value of the other.
            xs, ys = [x for x in va if x is not None], [y for y in vb if y is not None]
            pairs = [(xs[0], ys[0])] if xs and ys else []
        if pairs:
            x, y = pairs[0]
            raise ConfigError(
                "per_replica_batch and global_batch are both set for a point "
                f"({x} and {y}); give one of them",
                file=self.file, key_path=self._where(a))

    def _where(self, key):
        if key in self.base:
            return key_join("base", key)
        for axis in self.axes:
            if key in axis.keys:
                return axis.where[axis.keys.index(key)]
        return None

    def swept_keys(self):
        """Keys that take more than one value over the sweep, in axis order."""
        return [k for axis in self.axes if len(axis) > 1 for k in axis.keys]

    def resolved(self, *, reduced=False, limit=None):
        """A plain mapping of the experiment with every default spelled out (config.resolved.yaml)."""
        swept = {k for axis in self.axes for k in axis.keys}
        return {
            "name": self.name,
            "description": self.description,
            "source": self.file,
            "base": {k: v for k, v in complete_point(self.base).items() if k not in swept},
            "sweep": [{k: list(v) for k, v in zip(axis.keys, axis.values)} for axis in self.axes],
            "swept_keys": self.swept_keys(),
            "reduce": {k: list(v) for k, v in self.reduce.items()},
            "reduced": bool(reduced),
            "limit": limit,
            "num_points": self.count(reduced=reduced, limit=limit),
            "plots": [{"kind": p.kind, "name": p.name, **p.options} for p in self.plots],
        }
