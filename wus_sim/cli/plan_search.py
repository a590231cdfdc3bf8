"""``wus-sim plan WORKLOAD -t SLICE --search``: every mesh x strategy x remat, fastest first.

Text: a header (the slice, the one global batch every candidate runs and where it comes from,
the price a step is costed at and its source, what the search fixed and skipped), one line per
candidate that fits (rank, mesh, mesh across slices, strategy, remat, step time, what the step
and a million tokens cost, the step's parts, peak memory per device; ``!`` within the HBM
headroom; ``= #N`` in a tie with candidate N), a line per group of ties saying what differs, then
the infeasible ones counted by reason with each one's need. ``--json``: one document in the shape
of ``wus_sim/schemas/plan-search.v1.json``, ``candidates`` holding one object per candidate, in
the same order.

Every option of ``plan`` that a step reads reaches every candidate (the search ranks what
``step --mesh`` on each candidate's mesh prints): ``--quantization``, ``--activation-model``,
``--software-stack``, ``--bucket-MiB``, ``--grad-dtype``, ``--remat-policy``,
``--collective-matmul``, ``--capacity-factor``, ``--expert-load-imbalance``, ``--calibration``,
``--megacore``. Some narrow the search: ``--remat``
(that mode only; default every mode), ``--remat-policy`` (that policy only), ``--mesh`` and
``--dcn-mesh`` (fixed parts: the axes they name keep their sizes, the others are searched),
``--replicas`` (meshes with that many data-parallel groups, ``data x fsdp x expert``, per slice). The
options that shape only ``plan``'s own table (``--replica``, ``--replicate-below``,
``--max-padding-ratio``) and ``--spatial-ways`` above 1 (a mesh's tensor axis splits a layer,
spatial partitioning is not a mesh) are refused, not dropped. ``--check`` exits 2 when no
candidate fits.

Several ``-t``: one search per slice, every candidate at the same global batch (``--global-batch``,
else the workload's default on the first ``-t``; ``--per-replica-batch`` is refused: it gives each
slice its own batch), ranked together, each line naming its slice. ``--rank time`` (the default)
orders them as merging the slices' own searches would; ``--rank cost`` by what a step costs
(chips x step time x price per chip-hour / 3600: with one batch, the order of the cost per
million tokens), each slice's price and source in the header; a chip without a price is refused
in one line. ``--price-per-chip-hour`` sets every slice's price.

``--jobs N`` runs each search's meshes in N worker processes (default: the CPUs), a worker taking
the meshes of one tensor size at a time (what the step's memos share); the candidates come back
in the order one process gives, so the output is the same for every N.
"""

import argparse
from dataclasses import dataclass
import sys
import time

from ..inputs.strict_json import dumps_strict

__all__ = ["run_search", "PLAN_SEARCH_SCHEMA_VERSION", "DEFAULT_HBM_HEADROOM", "RANKS", "TopologyList", "Searched"]

PLAN_SEARCH_SCHEMA_VERSION = 1
"""Version of ``plan --search --json``'s shape (``wus_sim/schemas/plan-search.v{N}.json``)."""

DEFAULT_HBM_HEADROOM = 0.05
"""Fraction of a device's HBM a pick should leave free (``--hbm-headroom``). An assumption, not a
published figure: XLA holds HBM beside the program's buffers (OpenXLA's error E1000 page,
https://openxla.org/xla/errors/error_1000, lists the compiled binary, the runtime's reserved
system space, constants and compiler internals) but states no size, and the allocator's
fragmentation adds to it; a candidate over ``(1 - headroom) x`` HBM is marked, not dropped."""

PROGRESS_EVERY_S = 2.0
"""Seconds between progress lines on stderr."""

RANKS = ("time", "cost")
"""What ``--rank`` orders the candidates by: step time, or the cost of a step (of a million tokens)."""


class TopologyList(argparse.Action):
    """``-t`` given once or more: ``topology`` is the first (what every other part of ``plan``
    reads), ``topologies`` all of them in order (what ``--search`` searches)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = list(getattr(namespace, "topologies", None) or []) + [values]
        namespace.topologies = given
        namespace.topology = given[0]


@dataclass(frozen=True)
class Searched:
    """One ``-t``'s search and what its candidates are costed at."""

    search: object
    topology: object
    ms: object
    price: object
    """The :class:`~wus_sim.training.cost.Price` of the slice's chip (or ``--price-per-chip-hour``)."""
    chips: int
    """Chips billed: the slice's x its slices."""


_NOT_SEARCH = {"replica": "--replica", "replicate_below": "--replicate-below",
               "max_padding_ratio": "--max-padding-ratio"}
"""Options of ``plan``'s own table that no mesh step reads: refused with ``--search``."""


def search_from_args(args, placement, spec=None, global_batch=None):
    """The :class:`~wus_sim.training.parallelism.mesh_search.Search` of a command line (errors name
    the options) and the slice it runs on: *spec*'s (default ``-t``'s first), at *global_batch*
    (default the command line's)."""
    from ..hardware.multislice import load_multislice
    from ..inputs.errors import ConfigError
    from ..model.calibration import load_calibration
    from ..model.layer_stack import check_remat_policy
    from ..training.parallelism.mesh_search import Search
    from ..hardware.mesh import Mesh
    from ..training.parallelism.context_parallel import check_context_mesh
    from ..training.parallelism.expert_parallel import check_expert_mesh
    from ..training.parallelism.tensor_parallel import check_tensor_heads
    from ..training.parameters.params import POINT_KEYS
    from ..model.importers.maxtext_model import resolve_workload as load_workload  # NAME@TOKENS too
    from .options import placement_option_errors, software_stack_value
    from .step_mesh import mesh_option_errors

    for dest, option in _NOT_SEARCH.items():
        if getattr(args, dest, None) is not None:
            raise ConfigError("shapes plan's own table, which a search does not print; give it without --search",
                              key_path=option, value=getattr(args, dest))
    if placement.spatial_ways not in (None, 1):
        raise ConfigError("is not a mesh: a search splits a layer over devices by its tensor axis (--mesh "
                          "tensor=K fixes it); step --spatial-ways runs spatial partitioning",
                          key_path="--spatial-ways", value=placement.spatial_ways)
    with placement_option_errors():
        topology, ms = load_multislice(spec or args.topology, slices=placement.slices, megacore=args.megacore)
    calibration = load_calibration(args.calibration)
    stack = software_stack_value(args)
    if not calibration.has_stack(stack):
        raise ConfigError(f"has no fitted costs in calibration {calibration.id} (known: "
                          f"{', '.join(sorted(calibration.stacks)) or 'its default only'}); a search ranks "
                          "fitted stacks only", key_path="--software-stack", value=stack)
    remat = args.remat
    with placement_option_errors():
        check_remat_policy(remat or "none", args.remat_policy)
    options = _options(args, calibration, stack)
    workload = load_workload(args.workload)
    with mesh_option_errors():
        if placement.mesh is not None:  # a fixed tensor beyond the heads: one line, nothing runs
            check_tensor_heads(workload, placement.mesh)
            check_context_mesh(workload, placement.mesh)
        # a fixed expert axis (in the slice or across) a model's experts cannot take: the same
        check_expert_mesh(workload, placement.mesh or Mesh(), placement.dcn_mesh)
    remats = POINT_KEYS["remat"].choices if remat is None else (remat,)
    with mesh_option_errors(), placement_option_errors(), _replicas_errors():
        search = Search(workload, ms or topology, args.optimizer, global_batch=global_batch or args.global_batch,
                        per_replica_batch=None if global_batch else args.per_replica_batch, options=options, remats=remats,
                        mesh=placement.mesh, mesh_axes=_named_axes(args.mesh), dcn_mesh=placement.dcn_mesh,
                        dcn_axes=_named_axes(args.dcn_mesh), replicas=args.replicas)
    return search, topology, ms


def _replicas_errors():
    """Re-raise the search's ``replicas`` error under ``--replicas``."""
    from contextlib import contextmanager

    from ..inputs.errors import ConfigError

    @contextmanager
    def errors():
        try:
            yield
        except ConfigError as exc:
            if exc.key_path != "replicas" or exc.file:
                raise
            raise ConfigError(exc.rule, key_path="--replicas", value=exc.value) from None

    return errors()


def _named_axes(text):
    """The axes a ``--mesh`` text names (its sizes already checked by the Placement)."""
    if text is None:
        return None
    return [item.split("=", 1)[0].strip() for item in text.split(",")]


def _options(args, calibration, stack):
    """The :class:`~wus_sim.training.step.StepOptions` every candidate runs with: step's defaults
    and the options ``plan`` shares with ``step`` (as ``step``'s command line builds them)."""
    from ..inputs.units import MiB, grad_dtype_short
    from ..training.step import StepOptions
    from ..training.update.planner import DEFAULT_BUCKET_BYTES

    return StepOptions(
        grad_dtype=grad_dtype_short(args.grad_dtype) if args.grad_dtype else None,
        bucket_bytes=DEFAULT_BUCKET_BYTES if args.bucket_MiB is None else int(args.bucket_MiB * MiB),
        quantization=args.quantization, remat_policy=args.remat_policy, collective_matmul=args.collective_matmul,
        capacity_factor=args.capacity_factor, expert_load_imbalance=args.expert_load_imbalance,
        pipeline_microbatches=args.pipeline_microbatches, pipeline_layers_per_stage=args.pipeline_layers_per_stage,
        pipeline_schedule=args.pipeline_schedule,
        activation_model=args.activation_model, calibration=calibration, software_stack=stack,
        compute=calibration.compute_params(stack=stack))


def run_search(args, placement):
    from ..inputs.errors import ConfigError, InfeasibleError
    from .options import placement_option_errors
    from .plan_search_text import build_report

    headroom = args.hbm_headroom
    if not 0 <= headroom < 1:
        raise ConfigError("must be a fraction from 0 to below 1", key_path="--hbm-headroom", value=headroom)
    if args.time_limit is not None and not args.time_limit > 0:
        raise ConfigError("must be > 0 seconds", key_path="--time-limit", value=args.time_limit)
    jobs = search_jobs(args)
    searched = slices_from_args(args, placement)
    progress = _Progress(searched, args.progress if args.progress is not None else sys.stderr.isatty())
    found, stopped = [], None  # (index of the slice's search, candidate)
    start = time.monotonic()
    try:
        with placement_option_errors():
            for k, one in enumerate(searched):
                for c in one.search.candidates(jobs=jobs):
                    found.append((k, c))
                    progress.tick(k, c, len(found))
                    if args.time_limit is not None and time.monotonic() - start > args.time_limit:
                        stopped = "time-limit"
                        break
                if stopped:
                    break
    except KeyboardInterrupt:  # the best so far, then main's one line and 130
        _print(build_report(args, searched, found, headroom, "interrupted"), args)
        raise
    report = build_report(args, searched, found, headroom, stopped)
    _print(report, args)
    if not report["feasible"]:
        if args.check:
            raise InfeasibleError("no candidate fits (--check)" + ("" if stopped is None else
                                                                   f"; stopped by --time-limit {args.time_limit:g} s"),
                                  what="hbm")
        print("wus-sim plan: no candidate fits", file=sys.stderr)
    return 0


def search_jobs(args):
    """``--jobs``: the worker processes a search runs in (default the CPUs)."""
    import os
    from ..inputs.api_args import check_int

    jobs = getattr(args, "jobs", None)
    return (os.cpu_count() or 1) if jobs is None else check_int(jobs, "--jobs", minimum=1, maximum=1024)


def slices_from_args(args, placement):
    """One :class:`Searched` per ``-t``, all at one global batch (the first's), each with its price;
    ``--rank cost`` refuses a chip without a price, naming it."""
    from ..inputs.errors import ConfigError
    from ..training.cost import billed_chips
    from .cost_lines import run_price

    specs = list(getattr(args, "topologies", None) or [args.topology])
    rank = getattr(args, "rank", "time")
    if len(specs) > 1 and args.per_replica_batch is not None:
        raise ConfigError("gives each slice its own global batch (x its devices); several -t compare one: give "
                          "--global-batch", key_path="--per-replica-batch", value=args.per_replica_batch)
    if len(set(specs)) < len(specs):
        raise ConfigError("names a slice twice", key_path="-t", value=", ".join(specs))
    out, batch = [], None
    for spec in specs:
        search, topology, ms = search_from_args(args, placement, spec, global_batch=batch)
        batch = search.global_batch
        price = run_price(args, topology.chip)
        if rank == "cost" and not price.known:
            raise ConfigError(f"has no price: chip {topology.chip.name} of {topology.name} has no "
                              "price_usd_per_chip_hour in chips.yaml; give --price-per-chip-hour USD, or --rank time",
                              key_path="--rank cost", value=spec)
        out.append(Searched(search, topology, ms, price, billed_chips(topology, 1 if ms is None else ms.slices)))
    return out


def _print(report, args):
    """The report as JSON or text, with the MaxText run it came from (if any) and its batch's source."""
    from .maxtext_options import report_maxtext, with_maxtext_lines
    from .plan_search_text import text

    got = getattr(args, "_maxtext", None)
    if got is not None and "global_batch" in got[0].sources:
        report["global_batch_source"] = "maxtext"
    if args.json:
        print(dumps_strict(report_maxtext(report, args), indent=1), flush=True)
        return
    print(with_maxtext_lines(text(report), args), flush=True)


class _Progress:
    """A line on stderr every :data:`PROGRESS_EVERY_S`: meshes done, candidates, the fastest so far."""

    def __init__(self, searched, on):
        self.searched, self.on = searched, on
        self.next = time.monotonic() + PROGRESS_EVERY_S
        self.best = None

    def tick(self, k, c, found):
        if c.status == "ok" and (self.best is None or c.step_time_s < self.best[1].step_time_s):
            self.best = (k, c)
        if not self.on or time.monotonic() < self.next:
            return
        from ..inputs.units import format_time

        self.next = time.monotonic() + PROGRESS_EVERY_S
        searches = [one.search for one in self.searched]
        where = f" on {self.searched[self.best[0]].topology.name}" if self.best and len(searches) > 1 else ""
        best = ("none fits yet" if self.best is None else
                f"best so far {format_time(self.best[1].step_time_s)} ({self.best[1].mesh} "
                f"{self.best[1].strategy} {self.best[1].remat}{where})")
        print(f"  plan --search: {sum(s.meshes_done for s in searches)} of {sum(len(s.meshes) for s in searches)} "
              f"meshes, {found} of {sum(s.size for s in searches)} candidates; {best}", file=sys.stderr, flush=True)
