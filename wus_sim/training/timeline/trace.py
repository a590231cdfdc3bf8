"""Chrome trace-event JSON of simulated steps (opens in Perfetto and chrome://tracing).

Format: the JSON Object Format of the Trace Event Format (``{"traceEvents": [...]}``),
complete events (``"ph": "X"``) with ``ts``/``dur`` in microseconds, plus metadata
events (``"ph": "M"``) naming processes and threads. One process per simulated
strategy; in it one track (thread) for the replica's compute and one per kind
of collective on the network (gradient reduction, optimizer reductions, weight
all-gather), and, where the collective's phases run back to back (every
uncontended single-buffer schedule), one track per phase (``axis X
reduce-scatter``, ``on-chip all-gather``, ...) showing each collective split
into its phases. Every replica of a synchronous data-parallel step runs the
same timeline, so one replica's tracks stand for all. Compute slices carry the
workload's layer names (``fwd encoder/layer_0/ffn``), collectives their bucket; under
``fully-sharded`` the weight all-gather track holds every bucket's gather for its forward
and for its backward (``all-gather bucket 3 for backward``).
"""


__all__ = ["trace_events", "write_trace"]

_TRACKS = {
    ("core", "overhead"): (1, "compute (replica 0)"),
    ("core", "host"): (1, "compute (replica 0)"),
    ("core", "fwd"): (1, "compute (replica 0)"),
    ("core", "bwd"): (1, "compute (replica 0)"),
    ("core", "bn"): (1, "compute (replica 0)"),
    ("core", "update"): (1, "compute (replica 0)"),
    ("net", "grad"): (2, "{network}: gradient reduction"),
    ("net", "extra"): (3, "{network}: optimizer reductions"),
    ("net", "gather"): (4, "{network}: weight all-gather"),
}
"""(track, kind) of a timeline interval -> (thread id, track name) in the trace; ``{network}``
is the network the collectives cross (``ICI``, or ``ICI + DCN`` over several slices)."""
_COMPUTE_TID = 1
_FIRST_PHASE_TID = 10
"""Phase tracks are numbered from here, in the order phases first appear."""


def trace_events(timelines, phases=None, *, network="ICI"):
    """Trace events for ``{label: TimelineResult}``; returns a list of dicts.

    *phases*: ``(op, nbytes) -> [(phase label, seconds), ...] or None`` (see
    :func:`wus_sim.collectives.phase_times`); phase slices are drawn only where they
    add up to the collective's duration. *network* names the collectives' tracks: ``"ICI"``
    within one slice, ``"ICI + DCN"`` for a multislice's hierarchical collectives.

    Only activities that take time become events (a zero-length slice is invisible in a
    viewer but still a row to search), and a track is named only if it has events (an
    empty named track is a row that shows nothing: no weight all-gather under a
    replicated update, no optimizer reductions for Adam).
    """
    events = []
    for pid, (label, result) in enumerate(timelines.items(), start=1):
        body = []
        phase_tids = {}
        for iv in result.intervals:
            if not iv.end_s > iv.start_s:
                continue
            tid, _ = _TRACKS[(iv.track, iv.kind)]
            args = {"step": iv.step, **{k: (float(v) if isinstance(v, (int, float)) else v)
                                        for k, v in iv.args.items()}}
            body.append({
                "ph": "X", "pid": pid, "tid": tid, "name": iv.name, "cat": iv.kind,
                "ts": iv.start_s * 1e6, "dur": (iv.end_s - iv.start_s) * 1e6, "args": args,
            })
            if phases is not None and iv.kind in ("grad", "gather", "extra") and "op" in iv.args:
                body.extend(_phase_events(pid, iv, phases(iv.args["op"], iv.args["nbytes"]), phase_tids))
        for i, t in enumerate(result.step_starts_s):
            body.append({"ph": "i", "s": "p", "pid": pid, "tid": _COMPUTE_TID, "name": f"step {i} start",
                         "ts": t * 1e6})
        used = {e["tid"] for e in body}
        names = {tid: name.format(network=network) for tid, name in _TRACKS.values()}
        names.update({tid: _phase_track(name) for name, tid in phase_tids.items()})
        # metadata events carry ts 0: the format lets them omit it, but some readers want every event timed
        events.append({"ph": "M", "pid": pid, "tid": 0, "ts": 0, "name": "process_name", "args": {"name": label}})
        events.append({"ph": "M", "pid": pid, "tid": 0, "ts": 0, "name": "process_sort_index",
                       "args": {"sort_index": pid}})
        for tid in sorted(used):
            events.append({"ph": "M", "pid": pid, "tid": tid, "ts": 0, "name": "thread_name",
                           "args": {"name": names[tid]}})
        events.extend(body)
    return events


def _phase_track(phase):
    """Track name of a phase: a multislice's cross-slice phase (``DCN all-reduce``) runs on the
    data-center network, not on the ICI the other phase tracks name."""
    if phase.startswith("DCN "):
        return f"DCN phase: {phase[len('DCN '):]}"
    return f"ICI phase: {phase}"


def _phase_events(pid, iv, phase_list, phase_tids):
    """The phases of one collective interval, back to back from its start (phases that take no time are left out)."""
    if not phase_list:
        return []
    duration = iv.end_s - iv.start_s
    if abs(sum(t for _, t in phase_list) - duration) > 1e-9 * max(duration, 1e-12):
        return []  # the interval is not this schedule's exact time: draw no phases
    out, t0 = [], iv.start_s
    for name, t_s in phase_list:
        if t_s > 0:
            tid = phase_tids.setdefault(name, _FIRST_PHASE_TID + len(phase_tids))
            out.append({"ph": "X", "pid": pid, "tid": tid, "name": f"{name} ({iv.name})", "cat": "phase",
                        "ts": t0 * 1e6, "dur": t_s * 1e6, "args": {"step": iv.step, "phase": name}})
        t0 += t_s
    return out


def write_trace(path, timelines, phases=None, *, network="ICI"):
    """Write ``{label: TimelineResult}`` as trace-event JSON to *path* (see :func:`trace_events`)."""
    doc = {"traceEvents": trace_events(timelines, phases, network=network), "displayTimeUnit": "ms",
           "otherData": {"generator": "wus-sim"}}
    from ...inputs.strict_json import dumps_strict
    from ...inputs.writes import write_atomic

    write_atomic(path, dumps_strict(doc), what="trace file", named_by="--trace")
    return path
