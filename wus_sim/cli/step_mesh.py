"""The mesh parts of ``step``, ``plan`` and ``describe topology``: the text lines of
``--mesh``/``--dcn-mesh`` (the mesh, where its axes lie on the torus, which devices form one
group, each axis's traffic) and their errors."""

from ..inputs.units import format_bytes, format_time

__all__ = ["mesh_lines", "mesh_option_errors", "layout_report", "layout_lines"]


def mesh_option_errors():
    """Re-raise a mesh key's ConfigError under its option's name (``--mesh``, ``--dcn-mesh``)."""
    from contextlib import contextmanager

    from ..inputs.errors import ConfigError

    @contextmanager
    def errors():
        try:
            yield
        except ConfigError as exc:
            if exc.key_path not in ("mesh", "dcn_mesh") or exc.file:
                raise
            raise ConfigError(exc.rule, key_path="--" + exc.key_path.replace("_", "-"), value=exc.value) from None

    return errors()


def mesh_lines(mesh):
    """The mesh, where its axes lie, which devices form group 0 of each axis, and per-axis traffic."""
    m = mesh["mesh"]
    dcn = mesh.get("dcn_mesh")
    # data, fsdp and tensor always, an expert or context axis where it is above 1
    shown = [a for a in m if a in ("data", "fsdp", "tensor") or m[a] > 1]
    lines = ["  mesh " + " x ".join(f"{a}={m[a]}" for a in shown)
             + (f", across slices " + " x ".join(f"{a}={v}" for a, v in dcn.items() if a in ("data", "fsdp") or v > 1)
                if dcn else "")
             + ("" if mesh["path"] == "mesh" else " (today's step runs it: pure data or fsdp)")]
    lines.append("    on the torus: " + "; ".join(mesh["layout"]))
    device = mesh.get("device", "device")
    if mesh.get("pipeline"):
        p = mesh["pipeline"]
        lines.append(f"    pipeline: {p['stages']} stages, {p['microbatches']} microbatches, {p['schedule']} schedule "
                     f"({p['repeats']} repeats of {p['layers_per_stage']} blocks a stage), bubble "
                     f"{p['bubble_fraction']:.2%} of the busy time, {p['in_flight_microbatches']} microbatches in flight")
    for axis in ("expert", "tensor", "context", "fsdp", "pipeline"):
        g = mesh.get("groups", {}).get(axis) or []
        if len(g) > 1:
            shown = ", ".join(map(str, g[:16])) + (", ..." if len(g) > 16 else "")
            lines.append(f"    one {axis} group: {device}s {shown}")
    for axis, c in mesh["comm"].items():
        if c["collectives"]:
            busy = "" if c["busy_s"] is None else f", {format_time(c['busy_s'])} busy"
            what = {"expert": "all-to-alls (the MoE layers' dispatch and combine)",
                    "context": "collectives (each attention layer's K/V all-gathers and gradient reduce-scatter)",
                    "pipeline": "collective-permutes (stage to stage) and embedding/head gradient all-reduce"
                    }.get(axis, "collectives")
            lines.append(f"    {axis} {what}: {c['collectives']} per step, {format_bytes(c['nbytes'])}{busy}")
        if c.get("dcn_collectives"):
            lines.append(f"    {axis} over the DCN: {c['dcn_collectives']} cross-slice phases per step, "
                         f"{format_bytes(c['dcn_nbytes'])} a device, {format_time(c['dcn_busy_s'])} busy")
    return lines


def layout_report(topology, mesh, custom_mesh=None):
    """Where each axis of *mesh* lies on *topology* (MaxText's *custom_mesh* ring layout, if given)
    and the devices of group 0 of each axis, as JSON-ready data (errors name ``--mesh``)."""
    from ..hardware.mesh import layout, shown_axes
    from ..inputs.errors import ConfigError

    try:
        lay = layout(topology, mesh, custom_mesh=custom_mesh)
    except ConfigError as exc:
        where = "--mesh" if exc.key_path in (None, "mesh") else exc.key_path
        raise ConfigError(exc.rule, key_path=where, value=exc.value) from None
    return {"mesh": mesh.to_dict(), "layout": lay.describe(),
            "groups": {a: lay.members(a) for a in shown_axes(mesh)[::-1]},
            "device": "TensorCore" if topology.cores_per_chip > 1 else "chip"}


def layout_lines(report, most=32):
    """Text lines of :func:`layout_report`."""
    lines = ["  mesh " + ",".join(f"{a}={v}" for a, v in report["mesh"].items() if a in report["groups"])
             + " on the torus: " + "; ".join(report["layout"])]
    for axis in report["groups"]:
        g = report["groups"][axis]
        if len(g) > 1:
            lines.append(f"    one {axis} group: {report['device']}s " + ", ".join(map(str, g[:most]))
                         + (", ..." if len(g) > most else ""))
    return lines
