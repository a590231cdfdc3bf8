"""Calibrated chip parameters: one declared file, with its provenance.

The physics of :mod:`wus_sim.model.compute` leaves a few chip figures that no datasheet
gives (matrix-unit efficiency, elementwise HBM traffic, fixed costs). ``wus-sim
calibrate`` fits some of them, and declares the others with their ranges, against the measured
runs (:mod:`wus_sim.validation`) and writes a calibration file; the shipped one,
``wus_sim/data/calibration/default.yaml``, is what every command uses unless told
``--calibration none`` (the uncalibrated physics: :class:`ComputeParams` defaults)
or given another file. Every output row names the calibration it ran with
(:attr:`Calibration.id`).

A calibration file::

    id: mlperf-v06-v07-tpu-v3-2026-12-02-4d131d  # named in every output row: date, hash of rows and values
    params: {mxu_efficiency: 0.61, elementwise_fwd_bytes: 3.39, elementwise_bwd_bytes: 5.65, host_loop_s: 0.001}
    stacks: {tf1-tpuestimator-2019: {op_overhead_s: 3.0e-05, step_overhead_s: 0.0}, ...}
    default_stack: tf-jax-2020
    provenance: {data: ..., rows: [...], rows_declared: true, fit_error: {...}, param_ranges: {...},
                 param_covariance: {...}, declared_ranges: {...}, leave_one_benchmark_out: {...},
                 date: ..., method: ..., validation: {...}, validated_range: {...}}

Only :class:`~wus_sim.model.compute.ComputeParams` fields may appear under ``params``.
``provenance.validation`` is the fitted values' error against the whole measured table
(held-out median and worst, bound rows kept); ``step`` and ``run`` print it beside their
numbers. A file without it still loads; its numbers are then printed without an error.
"""

from dataclasses import dataclass, field, fields
from pathlib import Path

from .compute import ComputeParams
from ..inputs.config import Section, is_file, load_yaml, present
from ..inputs.files import check_file
from ..inputs.door import checked, name
from ..inputs.errors import ConfigError
from ..inputs.memo import IdentityMemo, fixed_while_running

__all__ = [
    "Calibration", "load_calibration", "DEFAULT_CALIBRATION", "NO_CALIBRATION",
    "calibration_path", "STACK_PARAMS", "STACK_FITTED", "matrix_efficiency",
]

_SHIPPED = Path(__file__).resolve().parent.parent / "data" / "calibration"

DEFAULT_CALIBRATION = "default"
"""Name of the shipped calibration every command uses by default."""

NO_CALIBRATION = "none"
"""Name that selects the uncalibrated physics (no file)."""

_COMPUTE_FIELDS = tuple(f.name for f in fields(ComputeParams))

_COMPUTE_PARAMS = IdentityMemo()

STACK_PARAMS = ("op_overhead_s", "step_overhead_s")
"""The fixed costs a calibration fits once per software stack: what the program's ops and step cost
beyond their work depends on the compiler and runtime, not on the chip."""

STACK_FITTED = STACK_PARAMS + ("matmul_peak_fraction", "mxu_efficiency")
"""Every value a calibration's ``stacks`` may hold: the fixed costs, and, for a stack whose rows pin
it apart from the others, the share of the matrix units' peak its compiler gets out of a large matmul
(the TF and JAX of 2019-2020 on TPU v3 share one; MaxText on the JAX and XLA of 2025 has its own:
same op, other code). A stack without one runs at ``params``'."""


@dataclass(frozen=True)
class Calibration:
    """Fitted :class:`ComputeParams` values and where they came from."""

    id: str
    """Named in every output row: which calibration produced the numbers."""
    params: dict = field(default_factory=dict)
    """ComputeParams field -> fitted value."""
    provenance: dict = field(default_factory=dict)
    """Data commit, rows used, fit error, date, method (free-form, from the file)."""
    path: str = None

    stacks: dict = field(default_factory=dict)
    """Software stack -> its fitted values (:data:`STACK_FITTED`: the fixed cost per op, the
    unexplained fixed cost per step, and the stack's matmul peak fraction where fitted per stack);
    empty: ``params`` holds the one set of values."""
    default_stack: str = None
    """The stack a point runs on when it names none (the newest one measured)."""

    def __repr__(self):
        return f"<Calibration {self.id}: {len(self.params)} fitted values, {len(self.stacks)} stacks>"

    @checked(stack=name("a software stack name", nullable=True))
    def compute_params(self, stack=None, **overrides):
        """:class:`ComputeParams` with the fitted values (the fixed costs of *stack*, default
        :attr:`default_stack`), then *overrides* (not None) on top. A stack the calibration has no
        fitted values for (one the user names) runs at the default stack's values: its band moves
        them over :meth:`stack_cost_ranges` (:mod:`wus_sim.training.bands`) and says so."""
        params = dict(self.params)
        if self.stacks:
            params.update(self.stacks.get(stack) or self.stacks[self.default_stack])
        from ..inputs.api_args import check_keywords

        check_keywords(overrides, _COMPUTE_FIELDS, "compute_params (the fields of ComputeParams)")
        given = {k: v for k, v in overrides.items() if v is not None}
        aliased = params.get("compute_model") == "shape" and "mxu_efficiency" in given
        if aliased and "matmul_peak_fraction" not in given:
            # a point's MXU efficiency (point key, --mxu-efficiency) is what the matmuls reach of the
            # peak: under the shape model that is the fraction of the padded peak, which it would
            # otherwise leave unread
            given["matmul_peak_fraction"] = given.pop("mxu_efficiency")
        # one object per calibration and arguments (frozen): the points of a sweep then share
        # the layer times and band gradients memoized by it (wus_sim.inputs.memo)
        return _COMPUTE_PARAMS.get((self,), (stack, tuple(sorted(given.items()))),
                                   lambda: _compute_params({**params, **given}, aliased))

    def has_stack(self, stack):
        """Whether *stack* (``None``: the default one) has fitted fixed costs here."""
        if stack is None:
            return True
        checked = ((self.provenance or {}).get("validated_range") or {}).get("software_stacks") or []
        return stack in self.stacks or (not self.stacks and stack in checked)

    def stack_cost_ranges(self):
        """``{name: (low, high)}`` for each of :data:`STACK_PARAMS`: the declared range of a fixed
        cost on a stack or chip the calibration has no fitted value for, from 0 (a stack that
        removes it) to the largest value fitted on any measured stack (the slowest
        stack measured; the per-op and per-step costs trade against each other in the fit, so their
        own 95 % ranges are not added on top)."""
        out = {}
        for name in STACK_PARAMS:
            values = [float(own.get(name, 0.0)) for own in self.stacks.values()] + [float(self.params.get(name, 0.0))]
            out[name] = (0.0, max(values))
        return out


def _compute_params(values, aliased):
    """:class:`ComputeParams` of *values*; an error in a matmul_peak_fraction the caller gave as
    mxu_efficiency names what the caller wrote."""
    try:
        return ComputeParams(**values)
    except ConfigError as exc:
        if aliased and exc.key_path == "matmul_peak_fraction":
            raise ConfigError(exc.rule, key_path="mxu_efficiency", value=exc.value) from None
        raise


def matrix_efficiency(params):
    """The fraction of the matrix units' peak the matmuls of :class:`ComputeParams` *params* run at:
    ``mxu_efficiency`` (flops model) or ``matmul_peak_fraction`` of the padded peak (shape model)."""
    return params.matmul_peak_fraction if params.compute_model == "shape" else params.mxu_efficiency


def calibration_path(name):
    """Path of a calibration given by shipped name or file path."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or present(path):
        if not present(path):
            raise ConfigError("calibration file not found", key_path="calibration", value=name)
        check_file(path, what="calibration file", named_by="calibration")  # a folder, FIFO, device, loop
        return path
    shipped = _SHIPPED / f"{name}.yaml"
    if not is_file(shipped):  # False, not OSError, for a name too long
        known = sorted(p.stem for p in _SHIPPED.glob("*.yaml")) + [NO_CALIBRATION]
        raise ConfigError(f"unknown calibration; known: {', '.join(known)} (or a path to a calibration YAML)",
                          key_path="calibration", value=name)
    return shipped


@fixed_while_running
def load_calibration(name=None):
    """The calibration named *name* (``None`` = the shipped default, ``'none'`` = none)."""
    if isinstance(name, Calibration):
        return name
    name = DEFAULT_CALIBRATION if name is None else name
    if not isinstance(name, str) or not name:
        raise ConfigError("must be a calibration name or a path to a calibration YAML", key_path="calibration",
                          value=name)
    if name == NO_CALIBRATION:
        return Calibration(id=NO_CALIBRATION)
    return _load_file(str(calibration_path(name)))


_CACHE = {}

VALIDATION_KEYS = {"held_out_rows": int, "held_out_median_abs": float, "held_out_worst_abs": float,
                   "bound_rows": int, "bound_rows_within": int, "over_bound": list}
OPTIONAL_VALIDATION_KEYS = {"leave_one_benchmark_out_rows": int, "leave_one_benchmark_out_median_abs": float,
                            "leave_one_benchmark_out_worst_abs": float, "leave_one_model_out_rows": int,
                            "leave_one_model_out_median_abs": float, "leave_one_model_out_worst_abs": float}
"""``provenance.validation``: what ``step`` and ``run`` print as the model's error."""


def _check_validation(record, path):
    """A calibration's stored validation is printed beside every number: check it on load."""
    if not isinstance(record, dict):
        raise ConfigError("must be a mapping (held_out_rows, held_out_median_abs, ...)", file=path,
                          key_path="provenance.validation", value=record)
    for key, kind in {**VALIDATION_KEYS, **OPTIONAL_VALIDATION_KEYS}.items():
        value = record.get(key)
        if value is None and kind is float and record.get("held_out_rows") == 0:
            continue  # no held-out row: no error to state
        if value is None and key in OPTIONAL_VALIDATION_KEYS:
            continue
        ok = (isinstance(value, list) and all(isinstance(v, str) for v in value) if kind is list
              else isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 2**53
              and (kind is float or float(value).is_integer()))
        if not ok:
            rule = {int: "must be a whole number >= 0", float: "must be a number >= 0",
                    list: "must be a list of row names"}[kind]
            raise ConfigError(rule, file=path, key_path=f"provenance.validation.{key}", value=value)


def _is_real(v):
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_span(v):
    return isinstance(v, list) and len(v) == 2 and all(_is_real(x) for x in v) and v[0] <= v[1]


def _is_names(v):
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _check_provenance_tables(prov, path):
    """The provenance tables that step, run and the bands read (``declared_ranges``,
    ``validated_range``, ``param_covariance``): a damaged one is one line naming its key,
    not a traceback where it is first read."""
    def bad(key, rule, value):
        return ConfigError(rule, file=path, key_path=f"provenance.{key}", value=value)

    rows = prov.get("rows")
    if rows is not None and not _is_names(rows):  # validate marks each row fitted or held out by these keys
        raise bad("rows", "must be a list of row keys (the measured rows the fit used)", rows)
    ranges = prov.get("declared_ranges")
    if ranges is not None and not (isinstance(ranges, dict) and all(isinstance(k, str) and _is_span(v)
                                                                     for k, v in ranges.items())):
        raise bad("declared_ranges", "must map parameter names to [low, high] (finite numbers, low <= high)", ranges)
    record = prov.get("validated_range")
    if record is not None:
        if not isinstance(record, dict):
            raise bad("validated_range", "must be a mapping (chips, software_stacks, workloads)", record)
        for key in ("chips", "software_stacks"):
            if record.get(key) is not None and not _is_names(record[key]):
                raise bad(f"validated_range.{key}", "must be a list of names", record[key])
        workloads = record.get("workloads") or {}
        if not isinstance(workloads, dict):
            raise bad("validated_range.workloads", "must map workload names to their measured spans", workloads)
        for name, w in workloads.items():
            if not (isinstance(name, str) and isinstance(w, dict) and _is_span(w.get("examples_per_core"))
                    and _is_span(w.get("cores")) and (w.get("kinds") is None or _is_names(w["kinds"]))):
                raise bad(f"validated_range.workloads.{name}", "must hold examples_per_core and cores, each "
                          "[low, high] (and kinds, a list of names)", w)
    cov = prov.get("param_covariance")
    if cov is not None:
        names = cov.get("names") if isinstance(cov, dict) else None
        matrix = cov.get("matrix") if isinstance(cov, dict) else None
        if not (_is_names(names) and isinstance(matrix, list) and len(matrix) == len(names)
                and all(isinstance(row, list) and len(row) == len(names) and all(_is_real(x) for x in row)
                        for row in matrix)):
            raise bad("param_covariance", "must hold names (a list) and matrix (a square list of lists of "
                      "finite numbers, one row per name)", cov if not isinstance(cov, dict) else names)


def _load_file(path):
    if path not in _CACHE:
        doc = Section(load_yaml(path), file=path)
        doc.check_keys(required={"id", "params", "provenance"}, optional={"stacks", "default_stack"})
        params = doc.section("params")
        params.check_keys(optional=set(_COMPUTE_FIELDS))
        values = {k: params.get(k) for k in params.keys()}
        try:
            ComputeParams(**values)  # the same range checks as any other source of these values
        except ConfigError as exc:
            raise ConfigError(exc.rule, file=path, key_path=f"params.{exc.key_path}", value=exc.value) from None
        provenance = doc.get("provenance")
        if not isinstance(provenance, dict):
            raise doc.error("provenance", "must be a mapping (data, rows, fit_error, date, method)", provenance)
        if "validation" in provenance:
            _check_validation(provenance["validation"], path)
        _check_provenance_tables(provenance, path)
        stacks = doc.get("stacks") or {}
        rule = (f"must map stack names to their {' and '.join(STACK_PARAMS)} (seconds, >= 0 and < 1) and "
                f"optionally {' or '.join(STACK_FITTED[len(STACK_PARAMS):])} (a fraction, > 0 and <= 1)")
        if not isinstance(stacks, dict):
            raise doc.error("stacks", rule, stacks)
        for name, own in stacks.items():
            if not (isinstance(name, str) and isinstance(own, dict) and set(own) <= set(STACK_FITTED)
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                            and (0 <= v < 1 if k in STACK_PARAMS else 0 < v <= 1) for k, v in own.items())):
                raise doc.error(f"stacks.{name}", rule, own)
        measured = ((provenance.get("validated_range") or {}).get("software_stacks")) or []
        if measured and stacks and not set(stacks) <= set(measured):
            # a stack's fixed costs are fitted on its own rows: a name no row has is a typo
            odd = sorted(set(stacks) - set(measured))[0]
            raise doc.error(f"stacks.{odd}", "must be a software stack the fit measured (provenance.validated_range."
                            f"software_stacks: {', '.join(measured)})", odd)
        default_stack = doc.get("default_stack")
        if stacks and (not isinstance(default_stack, str) or default_stack not in stacks):
            raise doc.error("default_stack", f"must be one of the stacks: {', '.join(sorted(stacks))}",
                            default_stack)
        _CACHE[path] = Calibration(id=doc.string("id"), params=values, provenance=provenance, path=path,
                                   stacks=dict(stacks), default_stack=default_stack)
    return _CACHE[path]
