"""The least-squares fit behind ``wus-sim calibrate``: simulate measured rows at a vector of
values, fit them, state the fitted values' covariance, refit without each benchmark, and say
what range of runs a calibration was checked on.

Exact (training-only) rows are residuals ``log(simulated / measured)``; bound rows, where eval
sits inside the measured interval, are inequalities, ``log(simulated / measured) <= -BOUND_MARGIN``:
the fit is the least squares of the residuals under those constraints (:meth:`Fitter.fit`). A value of one software stack (``name@stack``) acts only on
that stack's rows (:func:`~wus_sim.validation.measured.software_stack`).
"""

import math
import statistics

from ..model.calibration import NO_CALIBRATION, STACK_PARAMS
from ..model.compute import ComputeParams
from .measured import SOFTWARE_STACKS, software_stack
from .simulate import run_topology, simulate_run
from .validate import row_key

__all__ = ["INFEASIBLE_BOUND_WEIGHT", "BOUND_MARGIN", "ELEMENTWISE_BWD_PER_FWD", "Fitter", "expand", "stack_order", "validated_range"]

INFEASIBLE_BOUND_WEIGHT = 3.0
"""Where no values keep every bound row (links made ten times slower, a table of your own), each
bound's excess is a residual of this weight: the bounds are traded against the training-only
rows, as every fit did until 2026-12-01, rather than the rows sacrificed to bounds no values
keep."""

BOUND_MARGIN = 1e-3
"""Each bound row is held 0.1 % under its bound (the solver's constraint tolerance is far
smaller): the margin keeps a bound that binds on the right side of it in every printed figure."""


ELEMENTWISE_BWD_PER_FWD = 10 / 6
"""Backward over forward elementwise bytes when only the forward figure is fitted: the ratio of
the physics' declared 10 B and 6 B (:class:`~wus_sim.model.compute.ComputeParams`)."""


def stack_order(stack):
    order = list(SOFTWARE_STACKS.values())
    return (order.index(stack) if stack in order else len(order), stack)


def _base(name):
    return name.split("@")[0]


def expand(names, stacks):
    """The fitted values: each name, a stack's own (:data:`STACK_PARAMS`) once per stack, ``name@stack``."""
    out = []
    for n in names:
        out += [f"{n}@{s}" for s in stacks] if n in STACK_PARAMS else [n]
    return out


class Fitter:
    """The least-squares fit of calibrate(): simulate rows at a vector of values, fit, covariance,
    and the leave-one-benchmark-out refits (warm-started at the full fit)."""

    def __init__(self, rows, topologies, free, network, *, bounds, declared):
        import numpy as np

        self.rows, self.topologies, self.free, self.network = rows, topologies, free, network
        self.declared = declared
        """Declared values every simulation takes (fitted ones override them)."""
        self.lower = np.array([bounds[_base(n)][0] for n in free])
        self.upper = np.array([bounds[_base(n)][1] for n in free])
        self.start = np.array([bounds[_base(n)][2] for n in free])
        self.scale = np.where(self.upper > 0, self.upper, 1.0)

    def values(self, x):
        return {n: float(v) for n, v in zip(self.free, x * self.scale)}

    def compute(self, values, run):
        stack = software_stack(run)
        given = dict(self.declared)
        for n, v in values.items():
            base, _, own = n.partition("@")
            if not own or own == stack:
                given[base] = v
        if "elementwise_fwd_bytes" in values and "elementwise_bwd_bytes" not in values:
            given["elementwise_bwd_bytes"] = given["elementwise_fwd_bytes"] * ELEMENTWISE_BWD_PER_FWD
        return ComputeParams(**given)

    def simulated(self, x, rows):
        import numpy as np

        values = self.values(x)
        return np.array([self._step_s(r, self.compute(values, r)) for r in rows])

    def _step_s(self, row, compute):
        """*row*'s simulated step time: a tiering row by its recipe's mesh
        (:func:`~wus_sim.validation.tiering.simulate_one`), an MLPerf row as its run."""
        from .tiering import TieringRow, simulate_one

        if isinstance(row, TieringRow):
            return simulate_one(row, NO_CALIBRATION, compute=compute).simulated_step_s
        return simulate_run(row, NO_CALIBRATION, compute=compute, network=self.network,
                            topology=self.topologies[row_key(row)]).step_time_s

    def fit(self, rows=None, start=None, progress=None, max_nfev=80):
        """The values that fit *rows*' training-only step times best (least squares of the log
        ratios) while every bound row stays :data:`BOUND_MARGIN` under its bound: a constrained
        fit (SLSQP, the Jacobian by forward differences, one simulation of the rows per value).
        A penalty in a plain least-squares fit stalls where a bound binds (every step the solver
        tries along the bound costs more), so the bounds are constraints, not residuals. Where no
        values keep every bound, the fit falls back to penalties (:data:`INFEASIBLE_BOUND_WEIGHT`
        x each excess), which trade the bounds against the training-only rows.

        Returns an object with ``x`` (scaled values), ``fun`` (every row's log ratio of simulated
        to measured step time) and ``jac`` (their derivatives by the values, scaled)."""
        import numpy as np
        from scipy.optimize import least_squares, minimize
        from types import SimpleNamespace

        rows = self.rows if rows is None else rows
        measured = np.array([r.measured_step_s for r in rows])
        exact = np.array([r.kind == "exact" for r in rows])
        lo, hi = self.lower / self.scale, self.upper / self.scale
        logs_at, jacs_at = {}, {}

        def logs(x):
            key = x.tobytes()
            if key not in logs_at:
                if progress:
                    progress()
                logs_at[key] = np.log(self.simulated(x, rows) / measured)
            return logs_at[key]

        def jac(x):
            key = x.tobytes()
            if key not in jacs_at:
                f0, J = logs(x), np.empty((len(rows), len(x)))
                for i in range(len(x)):
                    y = x.copy()
                    h = 1e-3 * max(abs(x[i]), 1e-2)
                    y[i] = x[i] + h if x[i] + h <= hi[i] else x[i] - h
                    J[:, i] = (logs(y) - f0) / (y[i] - x[i])
                jacs_at[key] = J
            return jacs_at[key]

        def objective(x):
            return 0.5 * float(np.sum(logs(x)[exact] ** 2))

        def gradient(x):
            return jac(x)[exact].T @ logs(x)[exact]

        constraints = []
        if (~exact).any():
            constraints = [{"type": "ineq", "fun": lambda x: -(logs(x)[~exact] + BOUND_MARGIN),
                            "jac": lambda x: -jac(x)[~exact]}]
        x0 = np.clip(self.start / self.scale if start is None else np.asarray(start, dtype=float), lo, hi)
        res = minimize(objective, x0, jac=gradient, bounds=list(zip(lo, hi)), constraints=constraints,
                       method="SLSQP", options={"maxiter": max_nfev, "ftol": 1e-10})
        def penalised(x):
            r = logs(x)
            return np.where(exact, r, INFEASIBLE_BOUND_WEIGHT * np.maximum(r + BOUND_MARGIN, 0.0))

        x = np.clip(res.x, lo, hi)
        if (~exact).any() and np.max(logs(x)[~exact] + BOUND_MARGIN) > 1e-4:
            # no values keep every bound (a slice's links made far slower, a table of your own):
            # the least squares with each bound's excess as a residual instead, from where SLSQP
            # stopped and from the start
            tries = [least_squares(penalised, y, bounds=(lo, hi), x_scale="jac", diff_step=1e-3, xtol=1e-8,
                                   ftol=1e-8, max_nfev=max_nfev).x for y in (x, x0)]
            x = min([x, *tries], key=lambda y: float(np.sum(penalised(y) ** 2)))
        return SimpleNamespace(x=x, fun=logs(x), jac=jac(x))

    def covariance(self, result):
        """The fitted values' covariance, in their own units: s^2 (J'J)^-1 over the exact rows."""
        import numpy as np

        exact = np.array([r.kind == "exact" for r in self.rows])
        J = result.jac[exact]
        dof = max(1, int(exact.sum()) - len(self.free))
        s2 = float((result.fun[exact] ** 2).sum() / dof)
        cov_scaled = np.linalg.pinv(J.T @ J) * s2
        return cov_scaled * np.outer(self.scale, self.scale)

    def bound_limits(self, x, ranges, steps=12):
        """*ranges* (``{name: [low, high]}`` from the covariance) narrowed by the bound rows: for
        each value alone (the others at the fit *x*), how far it can move each way before a bound
        row the fit keeps goes over its bound (found by bisection). The covariance knows only the
        training-only rows; the bound rows are one-sided facts it cannot hold."""
        import numpy as np

        bounds = [r for r in self.rows if r.kind == "bound"]
        if not bounds:
            return dict(ranges)
        measured = np.array([r.measured_step_s for r in bounds])
        kept = self.simulated(x, bounds) <= measured

        def keeps(y):
            return bool(np.all((self.simulated(y, bounds) <= measured) | ~kept))

        out = {}
        values = self.values(x)
        for i, name in enumerate(self.free):
            low, high = ranges[name]
            ends = []
            for end in (low, high):
                y = x.copy()
                y[i] = end / self.scale[i]
                if keeps(y):
                    ends.append(end)
                    continue
                near, far = values[name], end   # near keeps the bounds, far does not
                for _ in range(steps):
                    mid = (near + far) / 2
                    y[i] = mid / self.scale[i]
                    near, far = (mid, far) if keeps(y) else (near, mid)
                ends.append(near)
            out[name] = ends
        return out

    def leave_one_benchmark_out(self, x, progress=None):
        """Per training-only row, the error of a fit that never saw its workload (every row of it
        left out, bound rows too), started from the full fit *x*. (Bound rows are constraints of
        the fit: as penalties, until 2026-12-02, a refit could stall at *x*, where a bound the full
        fit holds makes every step the solver tries cost more, and report the in-sample error.)"""
        per_row, refits = {}, {}
        for workload in sorted({r.workload for r in self.rows if r.kind == "exact"}):
            kept = [r for r in self.rows if r.workload != workload]
            held = [r for r in self.rows if r.workload == workload and r.kind == "exact"]
            result = self.fit(kept, start=x, progress=progress)
            sim = self.simulated(result.x, held)
            refits[workload] = self.values(result.x)
            for r, t in zip(held, sim):
                per_row[row_key(r)] = float(t / r.measured_step_s - 1)
        errors = sorted(abs(e) for e in per_row.values())
        return {"per_row": per_row, "rows": len(errors),
                "median_abs": statistics.median(errors) if errors else None,
                "worst_abs": errors[-1] if errors else None,
                "refits": refits,
                "method": "per workload with training-only rows: refit every value without any of that workload's "
                          "rows (training-only and bound), started from the full fit, then simulate the workload's "
                          "training-only rows"}


def validated_range(runs, topologies=None):
    """What a calibration checked against *runs* was checked on (``provenance.validated_range``,
    :mod:`wus_sim.model.validated_range`): chips, software stacks, and per workload the span of
    examples per core and of slice sizes, and the kinds of row (``exact``, ``bound``) behind it."""
    topologies = topologies or [run_topology(r) for r in runs]
    workloads = {}
    for r in runs:
        w = workloads.setdefault(r.workload, {"examples_per_core": [math.inf, -math.inf],
                                              "cores": [math.inf, -math.inf], "kinds": set()})
        per_core = r.per_replica_batch / r.spatial_ways
        w["examples_per_core"] = [min(w["examples_per_core"][0], per_core), max(w["examples_per_core"][1], per_core)]
        w["cores"] = [min(w["cores"][0], r.cores), max(w["cores"][1], r.cores)]
        w["kinds"].add(r.kind)
    for w in workloads.values():
        w["examples_per_core"] = [float(v) for v in w["examples_per_core"]]
        w["cores"] = [int(v) for v in w["cores"]]
        w["kinds"] = sorted(w["kinds"])
    return {"chips": sorted({t.chip.name for t in topologies}),
            "software_stacks": sorted({software_stack(r) for r in runs}),
            "workloads": dict(sorted(workloads.items()))}
