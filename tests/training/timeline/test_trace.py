"""Traces follow the Trace Event Format (the JSON Object Format that Perfetto and chrome://tracing read).

The rules checked here are the format's, written from its specification (Trace Event Format,
Google, "JSON Object Format", "Duration Events", "Complete Events", "Metadata Events"), not
read off :mod:`wus_sim.training.timeline.trace`: every event has ``ph``, ``pid``, ``tid`` and ``name``; every
event but metadata has a ``ts`` in microseconds; a complete event (``X``) has a ``dur``
(here > 0: a zero-length slice draws nothing); metadata events (``M``) are one of the
known names with their ``args``; plus what makes a trace readable: a named track for
each track with events and none other, slices of one track that do not overlap, and the
workload's own layer names on the compute slices.
"""

import json

import pytest

from wus_sim.cli import main
from wus_sim.training.timeline.timeline import TimelineBucket, StepProgram, run_timeline
from wus_sim.training.timeline.trace import trace_events
from wus_sim.model.workload_files import load_workload

METADATA_NAMES = {"process_name", "process_sort_index", "thread_name", "thread_sort_index", "process_labels"}
INSTANT_SCOPES = {"g", "p", "t"}


def check_trace_format(doc):
    """Fail on anything the Trace Event Format does not allow (or this project promises not to write)."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    json.dumps(doc, allow_nan=False)  # strict JSON: a NaN or infinity would not load in a viewer
    events = doc["traceEvents"]
    for e in events:
        for key in ("ph", "pid", "tid", "name"):
            assert key in e, (key, e)
        assert isinstance(e["name"], str) and e["name"]
        assert e["ph"] in {"X", "M", "i"}, e  # the phases this project writes
        # every event is timed, metadata too (the format lets metadata omit ts; some readers want it)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "M":
            assert e["name"] in METADATA_NAMES and isinstance(e["args"], dict), e
            continue
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] > 0, e
        if e["ph"] == "i":
            assert e.get("s", "t") in INSTANT_SCOPES, e
    with_events = {(e["pid"], e["tid"]) for e in events if e["ph"] != "M"}
    named = [(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(named) == len(set(named)), "a track named twice"
    assert set(named) == with_events, "named tracks must be exactly the tracks with events"
    processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {pid for pid, _ in with_events} <= processes
    # Slices of one track never overlap: the compute stream runs one thing at a time, the
    # network one collective at a time, and a collective's phases run back to back.
    by_track = {}
    for e in events:
        if e["ph"] == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track, slices in by_track.items():
        slices.sort(key=lambda e: e["ts"])
        for a, b in zip(slices, slices[1:]):
            assert b["ts"] >= a["ts"] + a["dur"] - 1e-6 * max(a["dur"], 1.0), (track, a, b)
    return events


@pytest.mark.parametrize("argv", [
    ["transformer-big", "-t", "tpu-v3-32", "-o", "adam"],
    ["resnet50", "-t", "tpu-v3-2048", "-o", "lars"],  # LARS: optimizer reductions on their own track
    ["ncf", "-t", "tpu-v3-8", "--strategy", "replicated"],  # no weight all-gather at all
])
def test_step_trace_is_in_the_trace_event_format(tmp_path, capsys, argv):
    path = tmp_path / "trace.json"
    assert main(["step", *argv, "--trace", str(path)]) == 0
    assert str(path) in capsys.readouterr().err  # the user is told where it went
    events = check_trace_format(json.loads(path.read_text()))
    # compute slices are named after the workload's layers, forward and backward; every layer with
    # matmul work appears (a layer that computes nothing, e.g. a norm the shape model times at 0,
    # is no slice: see the test below)
    w = load_workload(argv[0])
    compute = {e["name"] for e in events if e["ph"] == "X" and e.get("cat") in ("fwd", "bwd")}
    assert compute <= {f"{d} {name}" for d in ("fwd", "bwd") for name in w.layer_names}
    working = [name for name, flops in zip(w.layer_names, w.layer_fwd_flops) if flops > 0]
    assert {f"{d} {name}" for d in ("fwd", "bwd") for name in working} <= compute


def test_a_multislice_trace_names_the_dcn_phase_for_the_dcn(tmp_path, capsys):
    """Two slices: the cross-slice phase ran on a track named 'ICI phase: DCN all-reduce'."""
    path = tmp_path / "trace.json"
    assert main(["step", "ncf", "-t", "tpu-v3-8", "--slices", "2", "--trace", str(path)]) == 0
    events = check_trace_format(json.loads(path.read_text()))
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"DCN phase: all-reduce", "DCN phase: reduce-scatter", "DCN phase: all-gather"} <= tracks
    assert not [t for t in tracks if t.startswith("ICI phase: DCN")]
    assert "ICI phase: slice axis X reduce-scatter" in tracks
    # the collectives' own tracks cross both networks (they were named 'ICI: ...')
    assert {"ICI + DCN: gradient reduction", "ICI + DCN: weight all-gather"} <= tracks
    assert not [t for t in tracks if t.startswith("ICI: ")]


def test_activities_that_take_no_time_leave_no_slice_and_no_track():
    # layer 1 computes nothing and the only bucket's all-gather is free: neither may appear,
    # and the all-gather track (which would hold only that) must not be named
    program = StepProgram(strategy="sharded", fwd_layer_s=(1e-3, 0.0), bwd_layer_s=(2e-3, 0.0),
                          buckets=(TimelineBucket(name="b0", first_layer=0, layers=(0, 1), grad_op="reduce-scatter",
                                          grad_nbytes=1e6, grad_time_s=5e-4, gather_nbytes=1e6, gather_time_s=0.0),),
                          update_s=1e-4, layer_names=("dense", "relu"))
    result = run_timeline(program, steps=2)
    assert any(iv.end_s == iv.start_s for iv in result.intervals)  # the case is really there

    def phases(op, nbytes):  # a free first phase, then the whole time
        return [("on-chip", 0.0), ("axis X", 5e-4)]

    events = check_trace_format({"traceEvents": trace_events({"sharded update": result}, phases)})
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"fwd dense", "bwd dense"} <= names and not {"fwd relu", "bwd relu"} & names
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == {"compute (replica 0)", "ICI: gradient reduction", "ICI phase: axis X"}


def test_layer_names_must_match_the_layers():
    program = StepProgram(strategy="replicated", fwd_layer_s=(1e-3,), bwd_layer_s=(1e-3,), buckets=(),
                          update_s=0.0, layer_names=("a", "b"))
    with pytest.raises(ValueError, match="layer_names"):
        run_timeline(program)
