"""``output.timeline``: timeline.json holds each rank's timed phases of the first steps as
Chrome trace events, whose per-phase totals are profile.json's phase seconds."""

from __future__ import annotations

import json

import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.parallel.timers import Timeline, Timers, _Phase, _RecordingPhase

QUICK = ["mesh.cells=[8,8,1]", "solver.max_steps=3", "output.plots=false",
         "output.fields=false"]
# the compiled K-cycle adds its own clock's seconds and calls to these, with no block to show
COMPILED = ("halo_solve", "amg_replicated")
OUTSIDE = ("setup", "io")  # phases profile.json keeps whole, the first step's included


def _run(tmp_path, name, *extra):
    from haloflow.run import run_case

    out = tmp_path / name
    run_case(load_case("cavity", [*QUICK, *extra]), out, MPI.COMM_SELF, quiet=True)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("timeline")
    return {"on": _run(tmp, "on", "output.timeline=true"),
            "off": _run(tmp, "off"),
            "two": _run(tmp, "two", "output.timeline=true", "output.timeline_steps=2")}


def _tracks(doc):
    tracks = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            assert e["pid"] == 0
            tracks.setdefault(e["tid"], []).append(e)
    return tracks


def test_timeline_is_a_trace_with_a_track_per_rank_and_nested_events(runs):
    doc = json.loads((runs["on"] / "timeline.json").read_text())
    assert doc["displayTimeUnit"] == "ms"
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {0: "rank 0"}
    tracks = _tracks(doc)
    assert set(tracks) == {0}
    evs = tracks[0]
    steps = [e for e in evs if e["cat"] == "step"]
    assert [e["name"] for e in steps] == ["step 1", "step 2", "step 3"]
    assert all(set(e["args"]) == {"halo_wait_s", "allreduce_s"} for e in steps)
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in evs)
    # ordered by start; every event lies inside the ones still open when it starts
    open_: list[dict] = []
    for e in evs:
        assert not open_ or e["ts"] >= open_[-1]["ts"]
        while open_ and e["ts"] >= open_[-1]["ts"] + open_[-1]["dur"]:
            open_.pop()
        if open_:
            parent = open_[-1]
            assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + 1e-3, (e, parent)
        else:
            assert e["cat"] == "step", e  # every phase is inside its step
        if e["cat"] == "phase":
            step = next(s for s in steps if s["ts"] <= e["ts"] <= s["ts"] + s["dur"])
            assert step["name"] == f"step {e['args']['step']}"
        open_.append(e)


def test_phase_totals_are_the_profiles_seconds(runs):
    """profile.json counts the steps after the first: the timeline's steps 2 and 3 add up
    to its loop phases' seconds (to 1 microsecond: a nanosecond per event's rounding) and
    calls; set-up and I/O, which profile.json keeps whole, are not compared, and the phases
    compiled code adds to hold at most profile.json's figures."""
    doc = json.loads((runs["on"] / "timeline.json").read_text())
    prof = json.loads((runs["on"] / "profile.json").read_text())
    total: dict[str, float] = {}
    calls: dict[str, int] = {}
    for e in _tracks(doc)[0]:
        if e["cat"] == "phase" and e["args"]["step"] >= 2 and e["name"] not in OUTSIDE:
            total[e["name"]] = total.get(e["name"], 0.0) + e["dur"] * 1e-6
            calls[e["name"]] = calls.get(e["name"], 0) + 1
    loop = {k: v for k, v in prof["phases"].items() if k not in OUTSIDE}
    assert {"assemble", "solve_p", "solve_U"} <= set(total)
    assert set(total) <= set(loop)
    for name, ph in loop.items():
        if name in COMPILED:
            assert total.get(name, 0.0) <= ph["per_rank"][0] + 1e-6, name
            assert calls.get(name, 0) <= ph["calls"][0], name
            continue
        assert total.get(name, 0.0) == pytest.approx(ph["per_rank"][0], abs=1e-6), name
        assert calls.get(name, 0) == ph["calls"][0], name


def test_timeline_off_writes_nothing_and_steps_bound_it(runs):
    assert not (runs["off"] / "timeline.json").exists()
    doc = json.loads((runs["two"] / "timeline.json").read_text())
    evs = _tracks(doc)[0]
    assert [e["name"] for e in evs if e["cat"] == "step"] == ["step 1", "step 2"]
    assert {e["args"]["step"] for e in evs if e["cat"] == "phase"} == {1, 2}


def test_phases_swap_class_only_while_recording():
    timers = Timers()
    outer = timers("outer")
    tl = Timeline(timers, 1)
    tl.start(0.0)
    with outer, timers("inner"):
        pass
    assert type(outer) is _RecordingPhase and type(timers("inner")) is _RecordingPhase
    first = outer.seconds
    tl.step_done(1, 0.0, 1e9, {})
    assert not tl.recording and type(outer) is _Phase and type(timers("new")) is _Phase
    with outer:  # not recorded
        pass
    rows = tl.rows()
    assert [e[0] for e in rows["events"]] == ["inner", "outer"]
    (_, a0, b0, _), (_, a1, b1, _) = rows["events"]
    assert a1 <= a0 <= b0 <= b1
    assert b1 - a1 == pytest.approx(first, rel=1e-12, abs=1e-15)
    assert outer.calls == 2 and len(rows["events"]) == 2


def test_timeline_steps_is_validated():
    with pytest.raises(Exception, match="timeline_steps"):
        load_case("cavity", ["output.timeline_steps=0"])
