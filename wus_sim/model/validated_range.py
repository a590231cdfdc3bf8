"""Whether a point lies inside what its calibration was checked on.

A calibration file states the measured runs its fitted values were checked against as
``provenance.validated_range`` (written by ``wus-sim calibrate`` from the measured table)::

    validated_range:
      chips: [tpu-v3]
      software_stacks: [tf1-tpuestimator-2019]
      workloads:
        resnet50: {examples_per_core: [16, 128], cores: [32, 2048], kinds: [exact]}

A point is inside when its chip, software stack and workload were measured (as an exact step
time: a workload whose rows are all upper bounds, ``kinds: [bound]``, is outside, since a bound
states no error) and its examples per core and slice size lie within that workload's measured span. Outside, each dimension
that is outside gives one short reason; a step prints them instead of the model error its
calibration states, which was measured only inside.
"""

__all__ = ["outside_validated_range", "validated_range_record", "point_validated_range"]


def validated_range_record(inside, outside):
    """``{"inside": bool, "outside": [reasons]}``: what ``step --json`` reports."""
    return {"inside": bool(inside), "outside": list(outside)}


def _span(values):
    return f"{values[0]:g}-{values[1]:g}" if values[0] != values[1] else f"{values[0]:g}"


def outside_validated_range(calibration, *, chip, workload, examples_per_core, cores, stack=None):
    """Short reasons, one per dimension, why a point lies outside what *calibration* was checked
    on (empty: inside). *chip* is the chip's name (``tpu-v3``), *workload* the workload's name,
    *examples_per_core* the per-replica batch over the replica's cores, *cores* the slice's
    TensorCores, *stack* the software stack (``None``: the calibration's own)."""
    record = (calibration.provenance or {}).get("validated_range") if calibration is not None else None
    if not isinstance(record, dict):
        why = ("uncalibrated physics: not checked against measurements" if getattr(calibration, "id", None) == "none"
               else "the calibration states no validated range")
        return [why]
    out = []
    chips = record.get("chips") or []
    if chip not in chips:
        out.append(f"chip {chip}: checked on {', '.join(chips)} only")
    stacks = record.get("software_stacks") or []
    if stack is not None and stack not in stacks:
        out.append(f"software stack {stack}: checked on {', '.join(stacks)} only")
    workloads = record.get("workloads") or {}
    w = workloads.get(workload)
    if w is None:
        out.append(f"workload {workload}: not measured (measured: {', '.join(sorted(workloads))})")
        return out
    if w.get("kinds") and "exact" not in w["kinds"]:
        # an upper bound says the model is not too slow, not how far off it is: no error was measured
        out.append(f"workload {workload}: only upper bounds measured (eval inside every timed interval)")
    lo, hi = w["examples_per_core"]
    if not lo <= examples_per_core <= hi:
        out.append(f"{examples_per_core:g} examples per core: {workload} was checked at {_span((lo, hi))}")
    lo, hi = w["cores"]
    if not lo <= cores <= hi:
        out.append(f"{cores} cores: {workload} was checked on {_span((lo, hi))}")
    return out


def point_validated_range(calibration, topology, run, options):
    """``{"inside": bool, "outside": [reasons]}`` of a simulated point (:class:`StepRun` *run* on
    *topology*, one slice of it when several; or its meta dict): whether its chip, software stack, workload,
    examples per core and slice size lie inside what *calibration* was checked on
    (:mod:`wus_sim.model.validated_range`); several slices over the DCN were never checked."""
    if options.calibration_id == "explicit":
        return validated_range_record(False, ["compute parameters given explicitly: not a checked calibration"])
    meta = run if isinstance(run, dict) else run.meta()
    out = outside_validated_range(calibration, chip=topology.chip.name, workload=meta["plan"].workload.name,
                                  examples_per_core=meta["per_replica_batch"] / meta["spatial_ways"],
                                  cores=topology.num_cores, stack=options.software_stack)
    if (meta.get("slices") or 1) > 1:
        out.append(f"{meta['slices']} slices over the data-center network: checked on one slice")
    if getattr(options, "quantization", "none") != "none":  # the measured runs all ran bf16 matmuls
        out.append(f"quantization {options.quantization}: checked on bf16 matmuls only")
    return validated_range_record(not out, out)
