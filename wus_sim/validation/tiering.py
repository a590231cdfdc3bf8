"""Today's LLM runs as measured: the rows of MaxText's tiering page, simulated from their recipes.

``wus_sim/data/validation/maxtext_tiering.csv`` holds the eight measured rows of MaxText's
"Optimized models tiering" page (AI-Hypercomputer/maxtext, docs/reference/models/tiering.md: MFU
and tokens/s/device on TPU v5p and v6e), each with its recipe's configuration (model, mesh inside
and across slices, per-device batch, sequence, remat policy, quantization, dtypes, XLA flag
bundles) and where every value was read (the data folder's README). :func:`tiering_rows` reads
them; :func:`simulate_tiering` runs each expressible one with the recipe's mesh and compares
tokens/s/device, the figure both MaxText's page and wus-sim state without a FLOP convention
(most of the page's MFUs count attention without the causal halving MaxText adopted later, PR
#1988; the error is therefore taken on throughput, and both MFUs are shown).

Each row states its step twice: its tokens/s and its MFU each give a step time, through MaxText's
FLOP count under the convention (attention in full, or causally halved) that makes them agree
best (:func:`measured_band`). On seven rows they agree within 1.3 %; on row 4 (Llama 3.1 405B) they
are 9.6 % apart, so the page's own figures leave that row's step uncertain by that much. Each
result therefore carries, beside its error against the tokens/s, its error against the *band*
between the two (:func:`band_error`: 0 inside it, else the distance to its nearer end).

A recipe's remat policy is run by its MaxText name (point key ``remat_policy``), a ``custom`` one
with the tensors the recipe offloads; its mesh with every axis it names (row 6's ``expert``) and
its MoE ``capacity_factor`` (point key ``capacity_factor``).

The expressible rows are measured rows of a software stack of their own (``maxtext-jax-2025``):
the shipped calibration is fitted to them beside the MLPerf TPU-v3 rows (:func:`tiering_fit_rows`;
``wus-sim calibrate``), and its provenance keeps each row's leave-one-model-out error, which
``wus-sim validate --tiering`` prints beside the fitted error.
"""

import csv
from dataclasses import asdict, dataclass, field
import math
import statistics

from pathlib import Path

from ..model.model_flops import model_flops

__all__ = ["TieringRow", "TieringResult", "tiering_rows", "tiering_fit_rows", "simulate_tiering", "tiering_summary",
           "TIERING_COLUMNS", "measured_band", "band_error", "FLOP_CONVENTIONS"]

@dataclass(frozen=True)
class TieringRow:
    """One measured row of the tiering page with its recipe (a row of maxtext_tiering.csv)."""

    row: int
    model: str
    model_name: str
    """MaxText's model_name."""
    workload: str
    """The wus-sim workload with the model's tensors at the recipe's sequence length."""
    chip: str
    topology: str
    slices: int
    megacore: bool
    mesh: str
    """The recipe's ici_* parallelism as a wus-sim mesh (devices: chips under megacore)."""
    dcn_mesh: str
    per_device_batch: int
    sequence: int
    remat_policy: str
    offloaded: str
    quantization: str
    attention: str
    weight_dtype: str
    opt_type: str
    moe: bool
    capacity_factor: str
    """MaxText's ``capacity_factor`` of the recipe (-1: dropless; > 0: padded expert buffers), empty for a
    model without experts (:meth:`capacity`)."""
    expressible: bool
    why_not: str
    measured_mfu_pct: float
    measured_tokens_per_s_per_device: float
    page_line: int
    config: str
    xla: str
    notes: str
    maxtext: str = ""
    """The recipe's MaxText command line (its KEY=VALUE words), which ``--maxtext`` reads."""

    # what the calibration fit and its leave-one-out read of a measured row (as of a MeasuredRun)
    round = "maxtext"
    """The rows' software stack is ``maxtext-jax-2025`` (:data:`~wus_sim.validation.measured.SOFTWARE_STACKS`)."""
    kind = "exact"
    """A training-only step time (MaxText's log line of a training step)."""
    framework = ""
    spatial_ways = 1

    @property
    def benchmark(self):
        return self.model_name

    @property
    def measured_step_s(self):
        """Seconds a step, from the page's tokens/s/device: per-device batch x sequence / that."""
        return self.per_device_batch * self.sequence / self.measured_tokens_per_s_per_device

    @property
    def per_replica_batch(self):
        return self.per_device_batch

    @property
    def cores(self):
        """TensorCores of every slice (a v5p slice's name counts them, a v6e's counts chips of one core)."""
        return int(self.topology.rsplit("-", 1)[1]) * self.slices

    @property
    def capacity(self):
        """:attr:`capacity_factor` as the point key takes it (MaxText's default -1, dropless, where empty)."""
        return float(self.capacity_factor) if self.capacity_factor.strip() else -1.0


TIERING_FILE = "maxtext_tiering.csv"


def tiering_rows(path=None):
    """The rows of the shipped table (or of *path*, a CSV with the same columns)."""
    from ..inputs.files import read_text

    path = path or Path(__file__).resolve().parent.parent / "data" / "validation" / TIERING_FILE
    rows = []
    for rec in csv.DictReader(read_text(path).splitlines()):
        kw = {}
        for f in TieringRow.__dataclass_fields__.values():
            if f.name not in rec and f.name == "maxtext":  # a table of one's own may leave it out
                continue
            v = rec[f.name]
            if f.type in ("int", int):
                v = int(v)
            elif f.type in ("float", float):
                v = float(v)
            elif f.type in ("bool", bool):
                v = v.strip().lower() == "true"
            kw[f.name] = v
        rows.append(TieringRow(**kw))
    return rows


@dataclass(frozen=True)
class TieringResult:
    """A tiering row simulated (the ``--json`` row of ``wus-sim validate --tiering``)."""

    row: int
    model: str
    chip: str
    """The chip generation (``tpu-v5p``, ``tpu-v6e``): the summary's errors are given per generation too."""
    topology: str
    slices: int
    mesh: str
    dcn_mesh: str
    per_device_batch: int
    sequence: int
    global_batch: float
    """Sequences per step: MaxText's per_device_batch_size x every device (tensor groups share theirs)."""
    remat_policy: str
    remat_run: str
    """The remat policy the simulation ran (a custom one spelled out)."""
    status: str
    """``ok``, ``infeasible`` (the simulation says it does not fit, though it ran: its times are then
    those of the same step with HBM capacity lifted) or ``not expressible``."""
    measured_tokens_per_s_per_device: float
    simulated_tokens_per_s_per_device: float
    error: float
    """Step time (simulated - measured) / measured, from tokens/s/device; NaN when not simulated."""
    measured_mfu: float
    simulated_mfu: float
    """MaxText's current MFU (causal attention halved) of the simulated step."""
    simulated_step_s: float
    measured_step_s: float
    """Seconds a step, from the page's tokens/s/device."""
    measured_step_from_mfu_s: float
    """Seconds a step, from the page's MFU (:func:`measured_band`)."""
    mfu_convention: str
    """The FLOP convention under which the page's MFU agrees best with its tokens/s (:data:`FLOP_CONVENTIONS`)."""
    band_error: float
    """:func:`band_error` of the simulated step against the measured band (the two step times above)."""
    peak_memory_GiB: float
    why: str = ""
    role: str = "held-out"
    """``calibration`` when the calibration was fitted to this row (its ``provenance.rows``), else ``held-out``."""
    lomo_error: float = math.nan
    """The error of a fit that never saw this row's model (leave-one-model-out, from the calibration's
    provenance), NaN where the calibration has none for it."""
    lomo_band_error: float = math.nan
    """That fit's step against the measured band (:func:`band_error`)."""
    breakdown: dict = field(default_factory=dict)

    @property
    def measured_band_s(self):
        """``(lo, hi)``: the measured step times (from the tokens/s and from the MFU), in order."""
        return tuple(sorted((self.measured_step_s, self.measured_step_from_mfu_s)))

    @property
    def band_width(self):
        """How far apart the page's two figures are: ``hi / lo - 1`` of :attr:`measured_band_s`."""
        lo, hi = self.measured_band_s
        return hi / lo - 1 if lo > 0 else math.nan


TIERING_COLUMNS = tuple(f for f in TieringResult.__dataclass_fields__ if f != "breakdown")


FLOP_CONVENTIONS = {"attention in full": False, "causal attention halved": True}
"""MaxText's two FLOP counts of a training step (the ``causal`` word of
:func:`~wus_sim.model.model_flops.training_flops_per_example`): attention's score and context
matmuls in full before its PR #1988, halved for a causal mask since."""


def measured_band(row, workload, device_peak_flops):
    """``(from_tokens_s, from_mfu_s, convention)``: the seconds a step of *row* took as its
    tokens/s/device gives it (:attr:`TieringRow.measured_step_s`), and as its MFU gives it,
    ``per-device batch x model FLOPs per example / (MFU x peak)``, under the
    :data:`FLOP_CONVENTIONS` entry nearer to the first (*workload*: the row's, as MaxText counts
    its FLOPs; *device_peak_flops*: a device's bf16 peak, a chip under megacore).

    Why both: MaxText computes the two figures from one step time, so they agree exactly when the
    page copied them from one run under one convention; where they do not, neither is known to
    be the run's, and the step lies somewhere between."""
    from ..model.model_flops import training_flops_per_example

    from_tokens = row.measured_step_s
    best = None
    for name, causal in FLOP_CONVENTIONS.items():
        flops = row.per_device_batch * training_flops_per_example(workload, causal=causal)
        step = flops / (row.measured_mfu_pct / 100 * device_peak_flops)
        if best is None or abs(math.log(step / from_tokens)) < abs(math.log(best[0] / from_tokens)):
            best = (step, name)
    return from_tokens, best[0], best[1]


def band_error(simulated_step_s, a, b):
    """The signed relative error of *simulated_step_s* against the interval between *a* and *b*
    (either order): 0 inside it, ``(sim - hi) / hi`` above it, ``(sim - lo) / lo`` below it."""
    lo, hi = min(a, b), max(a, b)
    if simulated_step_s > hi:
        return (simulated_step_s - hi) / hi
    if simulated_step_s < lo:
        return (simulated_step_s - lo) / lo
    return 0.0 if simulated_step_s == simulated_step_s else math.nan


def _options(row, calibration, compute=None):
    from ..training.step import StepOptions

    from ..model.calibration import load_calibration
    from .measured import software_stack

    policy = row.remat_policy
    if policy == "custom":  # the recipe's offloaded tensors; every other one recomputed (MaxText's default)
        policy = "custom:" + ",".join(f"{name}=offload" for name in row.offloaded.split(","))
    cal = load_calibration(calibration)
    stack = software_stack(row)  # its own fitted values where the calibration has them, else the default's
    options = StepOptions(calibration=cal, compute=compute, quantization=row.quantization, remat_policy=policy,
                          software_stack=stack if stack in cal.stacks else None, capacity_factor=row.capacity,
                          custom_mesh=_custom_mesh(row))
    return options, options.remat_policy


def _custom_mesh(row):
    """The MaxText ring layout the recipe's mesh takes (its ``custom_mesh``, where MaxText uses it), or ``None``."""
    from ..training.parameters.maxtext import custom_mesh_used
    from ..training.parameters.maxtext_keys import maxtext_input

    return custom_mesh_used(maxtext_input(words=[row.maxtext]), row.slices) if row.maxtext.strip() else None


def simulate_one(row, calibration=None, compute=None):
    """Simulate *row* with its recipe; a :class:`TieringResult`. *compute*: explicit
    :class:`~wus_sim.model.compute.ComputeParams` in place of the calibration's (a fit's trial values)."""
    from ..hardware.mesh import Placement
    from ..hardware.topology_files import load_topology
    from ..model.workload_files import load_workload
    from ..training.parallelism.mesh_step import simulate_mesh

    nan = math.nan
    measured_step = row.measured_step_s
    base = dict(row=row.row, model=row.model, chip=row.chip, topology=row.topology, slices=row.slices, mesh=row.mesh,
                dcn_mesh=row.dcn_mesh, per_device_batch=row.per_device_batch, sequence=row.sequence,
                global_batch=nan,
                remat_policy=row.remat_policy, measured_tokens_per_s_per_device=row.measured_tokens_per_s_per_device,
                measured_mfu=row.measured_mfu_pct / 100, measured_step_s=measured_step)
    topo = load_topology(row.topology, megacore=row.megacore)
    workload = load_workload(row.workload)
    _, from_mfu, convention = measured_band(row, workload, topo.peak_flops_per_replica)
    base.update(measured_step_from_mfu_s=from_mfu, mfu_convention=convention)
    if not row.expressible:
        return TieringResult(**base, remat_run="", status="not expressible", simulated_tokens_per_s_per_device=nan,
                             error=nan, band_error=nan, simulated_mfu=nan, simulated_step_s=nan, peak_memory_GiB=nan,
                             why=row.why_not)
    options, remat_run = _options(row, calibration, compute)
    placement = Placement(megacore=row.megacore, slices=row.slices, mesh=row.mesh, dcn_mesh=row.dcn_mesh or None)
    # MaxText's per_device_batch_size sets the global batch (x every device); the T devices of a
    # tensor group share their examples, so a data-parallel group runs T x that many
    per_group = row.per_device_batch * placement.mesh.tensor
    run = simulate_mesh(row.workload, row.topology, row.opt_type, ("fully-sharded",), per_replica_batch=per_group,
                        options=options, placement=placement)
    (result,) = run.results.values()
    devices = run.devices
    step = result.step_time_s
    if result.status == "infeasible":  # the run did fit: time it as if it did, and say it was refused
        step = _time_if_it_fit(row, topo, per_group, options)
    # the whole model's FLOPs (the plan's workload is a tensor group's 1/T share)
    mf = (model_flops(workload, run.global_batch, devices, step, topo.peak_flops_per_replica)
          if step and step > 0 else None)
    sim_tps = mf.tokens_per_s_per_device if mf else nan
    base["global_batch"] = run.global_batch
    return TieringResult(**base, remat_run=remat_run, status=result.status,
                         simulated_tokens_per_s_per_device=sim_tps,
                         error=(step - measured_step) / measured_step if mf else nan,
                         band_error=band_error(step, measured_step, from_mfu) if mf else nan,
                         simulated_mfu=mf.mfu if mf else nan, simulated_step_s=step,
                         peak_memory_GiB=result.memory.peak / 2**30 if result.memory is not None else nan,
                         why=result.error, breakdown=dict(result.breakdown))


def _time_if_it_fit(row, topo, per_group, options):
    """The step time of *row* on its slice *topo* with HBM capacity lifted (everything else the same)."""
    from dataclasses import replace

    from ..hardware.multislice import load_multislice
    from ..training.parallelism.mesh_step import simulate_mesh

    unbounded = replace(topo, chip=replace(topo.chip, hbm_bytes=topo.chip.hbm_bytes * 1e3))
    spec = load_multislice(unbounded, slices=row.slices)
    run = simulate_mesh(row.workload, spec[1] or spec[0], row.opt_type, ("fully-sharded",), mesh=row.mesh,
                        dcn_mesh=row.dcn_mesh or None, per_replica_batch=per_group, options=options)
    (result,) = run.results.values()
    return result.step_time_s


def simulate_tiering(calibration=None, rows=None):
    """Every tiering row simulated: a list of :class:`TieringResult`, in the table's order, each with its
    role in *calibration*'s fit and its leave-one-model-out error where the calibration states one."""
    from dataclasses import replace

    from ..model.calibration import load_calibration
    from .measured import run_key

    cal = load_calibration(calibration)
    prov = cal.provenance or {}
    fitted = set(prov.get("rows") or ())
    lomo = (prov.get("leave_one_model_out") or {}).get("per_row") or {}
    out = []
    for r in rows or tiering_rows():
        key = run_key(r)
        res = simulate_one(r, cal)
        err = float(lomo.get(key, math.nan))  # the refit's step is the measured one x (1 + its error)
        out.append(replace(res, role="calibration" if key in fitted else "held-out", lomo_error=err,
                           lomo_band_error=band_error(res.measured_step_s * (1 + err), res.measured_step_s,
                                                      res.measured_step_from_mfu_s)))
    return out


def tiering_fit_rows():
    """The rows a calibration may be fitted to: the expressible ones."""
    return [r for r in tiering_rows() if r.expressible]


def tiering_summary(results):
    """Median and worst |error| over the rows simulated, how many within 10 % and 20 %, how many
    the simulation says do not fit (every measured run did), and ``by_chip``: the rows, median and
    worst |error| of each chip generation; ``against_band``: the same spread of the errors against
    each row's measured band (:func:`band_error`), under ``leave_one_model_out`` too."""
    errs = sorted(abs(r.error) for r in results if not math.isnan(r.error))
    if not errs:
        return {"rows": 0}
    out = {"rows": len(errs), **_spread(errs), "infeasible": sum(r.status == "infeasible" for r in results),
           "not_expressible": sum(r.status == "not expressible" for r in results),
           "by_chip": _by_chip(results, "error")}
    band = _abs_errors(results, "band_error")
    if band:
        out["against_band"] = {"rows": len(band), **_spread(band)}
    lomo = _abs_errors(results, "lomo_error")
    if lomo:
        out["leave_one_model_out"] = {"rows": len(lomo), **_spread(lomo), "by_chip": _by_chip(results, "lomo_error")}
        band = _abs_errors(results, "lomo_band_error")
        if band:
            out["leave_one_model_out"]["against_band"] = {"rows": len(band), **_spread(band)}
    return out


def _abs_errors(results, attr):
    return sorted(abs(getattr(r, attr)) for r in results if not math.isnan(getattr(r, attr, math.nan)))


def _spread(errs):
    """Median and worst of the sorted |errors| *errs*, and how many are within 10 % and 20 %."""
    return {"median_abs_error": statistics.median(errs), "worst_abs_error": errs[-1],
            "within_10pct": sum(e <= 0.10 for e in errs), "within_20pct": sum(e <= 0.20 for e in errs)}


def _by_chip(results, attr):
    out = {}
    for chip in sorted({getattr(r, "chip", "") for r in results if not math.isnan(getattr(r, attr, math.nan))}):
        own = sorted(abs(getattr(r, attr)) for r in results
                     if getattr(r, "chip", "") == chip and not math.isnan(getattr(r, attr, math.nan)))
        out[chip] = {"rows": len(own), "median_abs_error": statistics.median(own), "worst_abs_error": own[-1]}
    return out


def as_dicts(results):
    return [{k: v for k, v in asdict(r).items()} for r in results]
