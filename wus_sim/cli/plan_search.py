"""``wus-sim plan WORKLOAD -t SLICE --search``: every mesh x strategy x remat, fastest first.

Text: a header (the slice, the one global batch every candidate runs and where it comes from,
what the search fixed and skipped), one line per candidate that fits (rank, mesh, mesh across
slices, strategy, remat, step time, its parts, peak memory per device; ``!`` within the HBM
headroom; ``= #N`` in a tie with candidate N), a line per group of ties saying what differs, then
the infeasible ones counted by reason with each one's need. ``--json``: one document in the shape
of ``wus_sim/schemas/plan-search.v1.json``, ``candidates`` holding one object per candidate, in
the same order.

Every option of ``plan`` that a step reads reaches every candidate (the search ranks what
``step --mesh`` on each candidate's mesh prints): ``--quantization``, ``--activation-model``,
``--software-stack``, ``--bucket-MiB``, ``--grad-dtype``, ``--remat-policy``,
``--collective-matmul``, ``--calibration``, ``--megacore``. Some narrow the search: ``--remat``
(that mode only; default every mode), ``--remat-policy`` (that policy only), ``--mesh`` and
``--dcn-mesh`` (fixed parts: the axes they name keep their sizes, the others are searched),
``--replicas`` (meshes with that many data-parallel groups, ``data x fsdp``, per slice). The
options that shape only ``plan``'s own table (``--replica``, ``--replicate-below``,
``--max-padding-ratio``) and ``--spatial-ways`` above 1 (a mesh's tensor axis splits a layer,
spatial partitioning is not a mesh) are refused, not dropped. ``--check`` exits 2 when no
candidate fits.
"""

import sys
import time

from ..inputs.strict_json import dumps_strict

__all__ = ["run_search", "PLAN_SEARCH_SCHEMA_VERSION", "DEFAULT_HBM_HEADROOM"]

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

_NOT_SEARCH = {"replica": "--replica", "replicate_below": "--replicate-below",
               "max_padding_ratio": "--max-padding-ratio"}
"""Options of ``plan``'s own table that no mesh step reads: refused with ``--search``."""


def search_from_args(args, placement):
    """The :class:`~wus_sim.training.parallelism.mesh_search.Search` of a command line (errors name
    the options) and the slice it runs on."""
    from ..hardware.multislice import load_multislice
    from ..inputs.errors import ConfigError
    from ..model.calibration import load_calibration
    from ..model.layer_stack import check_remat_policy
    from ..training.parallelism.mesh_search import Search
    from ..training.parallelism.tensor_parallel import check_tensor_heads
    from ..training.parameters.params import POINT_KEYS
    from ..model.workload_files import load_workload
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
        topology, ms = load_multislice(args.topology, slices=placement.slices, megacore=args.megacore)
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
    remats = POINT_KEYS["remat"].choices if remat is None else (remat,)
    with mesh_option_errors(), placement_option_errors(), _replicas_errors():
        search = Search(workload, ms or topology, args.optimizer, global_batch=args.global_batch,
                        per_replica_batch=args.per_replica_batch, options=options, remats=remats,
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
    search, topology, ms = search_from_args(args, placement)
    progress = _Progress(search, args.progress if args.progress is not None else sys.stderr.isatty())
    found, stopped = [], None
    start = time.monotonic()
    try:
        with placement_option_errors():
            for c in search.candidates():
                found.append(c)
                progress.tick(found)
                if args.time_limit is not None and time.monotonic() - start > args.time_limit:
                    stopped = "time-limit"
                    break
    except KeyboardInterrupt:  # the best so far, then main's one line and 130
        _print(build_report(args, search, topology, ms, found, headroom, "interrupted"), args)
        raise
    report = build_report(args, search, topology, ms, found, headroom, stopped)
    _print(report, args)
    if not report["feasible"]:
        if args.check:
            raise InfeasibleError("no candidate fits (--check)" + ("" if stopped is None else
                                                                   f"; stopped by --time-limit {args.time_limit:g} s"),
                                  what="hbm")
        print("wus-sim plan: no candidate fits", file=sys.stderr)
    return 0


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
    """A line on stderr every :data:`PROGRESS_EVERY_S`: meshes done, candidates, the best so far."""

    def __init__(self, search, on):
        self.search, self.on = search, on
        self.next = time.monotonic() + PROGRESS_EVERY_S
        self.best = None

    def tick(self, found):
        c = found[-1]
        if c.status == "ok" and (self.best is None or c.step_time_s < self.best.step_time_s):
            self.best = c
        if not self.on or time.monotonic() < self.next:
            return
        from ..inputs.units import format_time

        self.next = time.monotonic() + PROGRESS_EVERY_S
        best = ("none fits yet" if self.best is None else
                f"best so far {format_time(self.best.step_time_s)} ({self.best.mesh} {self.best.strategy} "
                f"{self.best.remat})")
        print(f"  plan --search: {self.search.meshes_done} of {len(self.search.meshes)} meshes, {len(found)} of "
              f"{self.search.size} candidates; {best}", file=sys.stderr, flush=True)
