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

A recipe's remat policy is run by its MaxText name (point key ``remat_policy``), a ``custom`` one
with the tensors the recipe offloads.
"""

import csv
from dataclasses import asdict, dataclass, field
import math

from pathlib import Path

from ..model.model_flops import model_flops

__all__ = ["TieringRow", "TieringResult", "tiering_rows", "simulate_tiering", "tiering_summary",
           "TIERING_COLUMNS"]

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
    peak_memory_GiB: float
    why: str = ""
    breakdown: dict = field(default_factory=dict)


TIERING_COLUMNS = tuple(f for f in TieringResult.__dataclass_fields__ if f != "breakdown")


def _options(row, calibration, compute=None):
    from ..training.step import StepOptions

    policy = row.remat_policy
    if policy == "custom":  # the recipe's offloaded tensors; every other one recomputed (MaxText's default)
        policy = "custom:" + ",".join(f"{name}=offload" for name in row.offloaded.split(","))
    options = StepOptions(calibration=calibration, compute=compute, quantization=row.quantization,
                          remat_policy=policy)
    return options, options.remat_policy


def simulate_one(row, calibration=None, compute=None):
    """Simulate *row* with its recipe; a :class:`TieringResult`. *compute*: explicit
    :class:`~wus_sim.model.compute.ComputeParams` in place of the calibration's (a fit's trial values)."""
    from ..hardware.mesh import Placement
    from ..hardware.topology_files import load_topology
    from ..model.workload_files import load_workload
    from ..training.parallelism.mesh_step import simulate_mesh

    nan = math.nan
    measured_step = row.per_device_batch * row.sequence / row.measured_tokens_per_s_per_device
    base = dict(row=row.row, model=row.model, chip=row.chip, topology=row.topology, slices=row.slices, mesh=row.mesh,
                dcn_mesh=row.dcn_mesh, per_device_batch=row.per_device_batch, sequence=row.sequence,
                global_batch=nan,
                remat_policy=row.remat_policy, measured_tokens_per_s_per_device=row.measured_tokens_per_s_per_device,
                measured_mfu=row.measured_mfu_pct / 100, measured_step_s=measured_step)
    if not row.expressible:
        return TieringResult(**base, remat_run="", status="not expressible", simulated_tokens_per_s_per_device=nan,
                             error=nan, simulated_mfu=nan, simulated_step_s=nan, peak_memory_GiB=nan, why=row.why_not)
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
    topo = load_topology(row.topology, megacore=row.megacore)
    if result.status == "infeasible":  # the run did fit: time it as if it did, and say it was refused
        step = _time_if_it_fit(row, topo, per_group, options)
    # the whole model's FLOPs (the plan's workload is a tensor group's 1/T share)
    mf = (model_flops(load_workload(row.workload), run.global_batch, devices, step, topo.peak_flops_per_replica)
          if step and step > 0 else None)
    sim_tps = mf.tokens_per_s_per_device if mf else nan
    base["global_batch"] = run.global_batch
    return TieringResult(**base, remat_run=remat_run, status=result.status,
                         simulated_tokens_per_s_per_device=sim_tps,
                         error=(step - measured_step) / measured_step if mf else nan,
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
    """Every tiering row simulated: a list of :class:`TieringResult`, in the table's order."""
    return [simulate_one(r, calibration) for r in (rows or tiering_rows())]


def tiering_summary(results):
    """Median and worst |error| over the rows simulated, how many within 10 % and 20 %, how many
    the simulation says do not fit (every measured run did), and ``by_chip``: the rows, median and
    worst |error| of each chip generation."""
    errs = sorted(abs(r.error) for r in results if not math.isnan(r.error))
    if not errs:
        return {"rows": 0}
    by_chip = {}
    for chip in sorted({getattr(r, "chip", "") for r in results if not math.isnan(r.error)}):
        own = sorted(abs(r.error) for r in results if getattr(r, "chip", "") == chip and not math.isnan(r.error))
        by_chip[chip] = {"rows": len(own), "median_abs_error": _median(own), "worst_abs_error": own[-1]}
    return {"rows": len(errs), "median_abs_error": _median(errs), "worst_abs_error": errs[-1],
            "within_10pct": sum(e <= 0.10 for e in errs), "within_20pct": sum(e <= 0.20 for e in errs),
            "infeasible": sum(r.status == "infeasible" for r in results),
            "not_expressible": sum(r.status == "not expressible" for r in results), "by_chip": by_chip}


def _median(sorted_values):
    n = len(sorted_values)
    return sorted_values[n // 2] if n % 2 else (sorted_values[n // 2 - 1] + sorted_values[n // 2]) / 2


def as_dicts(results):
    return [{k: v for k, v in asdict(r).items()} for r in results]
