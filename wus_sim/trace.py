"""Chrome trace-event JSON of simulated steps (opens in Perfetto and chrome://tracing).

Format: the JSON Object Format of the Trace Event Format (``{"traceEvents": [...]}``),
complete events (``"ph": "X"``) with ``ts``/``dur`` in microseconds, plus metadata
events (``"ph": "M"``) naming processes and threads. One process per simulated
strategy; in it one track (thread) for the replica's compute and one per kind
of collective on the network (gradient reduction, optimizer reductions, weight
all-gather). Every replica of a synchronous data-parallel step runs the same
timeline, so one replica's tracks stand for all.
"""

import json

__all__ = ["trace_events", "write_trace"]

_TRACKS = {
    ("core", "fwd"): (1, "compute (replica 0)"),
    ("core", "bwd"): (1, "compute (replica 0)"),
    ("core", "update"): (1, "compute (replica 0)"),
    ("net", "grad"): (2, "ICI: gradient reduction"),
    ("net", "extra"): (3, "ICI: optimizer reductions"),
    ("net", "gather"): (4, "ICI: weight all-gather"),
}


def trace_events(timelines):
    """Trace events for ``{label: TimelineResult}``; returns a list of dicts."""
    events = []
    for pid, (label, result) in enumerate(timelines.items(), start=1):
        events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": label}})
        events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}})
        for (_, _), (tid, tname) in sorted(set(_TRACKS.items()), key=lambda kv: kv[1][0]):
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": tname}})
        for iv in result.intervals:
            tid, _ = _TRACKS[(iv.track, iv.kind)]
            args = {"step": iv.step, **{k: (float(v) if isinstance(v, (int, float)) else v)
                                        for k, v in iv.args.items()}}
            events.append({
                "ph": "X", "pid": pid, "tid": tid, "name": iv.name, "cat": iv.kind,
                "ts": iv.start_s * 1e6, "dur": (iv.end_s - iv.start_s) * 1e6, "args": args,
            })
        for i, t in enumerate(result.step_starts_s):
            events.append({"ph": "i", "s": "p", "pid": pid, "tid": 1, "name": f"step {i} start",
                           "ts": t * 1e6})
    return events


def write_trace(path, timelines):
    """Write ``{label: TimelineResult}`` as trace-event JSON to *path*."""
    doc = {"traceEvents": trace_events(timelines), "displayTimeUnit": "ms",
           "otherData": {"generator": "wus-sim"}}
    with open(path, "w") as fh:
        json.dump(doc, fh)
    return path
