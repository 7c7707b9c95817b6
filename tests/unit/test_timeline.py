"""``haloflow predict --engine simgrid --timeline``: the replay of a 2-rank, 2-step trace as
Chrome trace-event JSON.  Each rank has its named track; its events are the trace's actions
in order, nested or one after the other; the waits sit where the trace has them and last what
CM02 defines (a message of S bytes: latency + (S + 16) / bandwidth once both sides posted it);
each message is an arrow that ends where the receiving call ends.  Also: SimGrid's names kept,
with a warning, where the states do not match the trace; the one-line errors (exit 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from haloflow.study.simgrid import ENVELOPE
from haloflow.study.trace.timeline import State, name_states
from tests.simgrid_traces import gz_trace, hockney_out, predict, require_smpirun

LAT, BW = 50e-6, 100e6  # between the two nodes
SIZE, SMALL = 200_000, 1000  # the halo messages; one blocking send at the end
MS = 1e-3
STEP = [("compute 1000000", "compute 3000000"), ("compute 3000000", "compute 1000000")]


def rank_lines(r: int) -> list[str]:
    """Two steps, rank 1 slow in the first and rank 0 in the second; rank 0 starts with a
    waitall of nothing (no state in the replay), then a blocking send and an allreduce."""
    peer = 1 - r
    lines = ["waitall"] if r == 0 else []
    for step in STEP:
        lines += [step[r], f"isend {peer} 0 {SIZE}", f"irecv {peer} 0 {SIZE}", "waitall"]
    lines.append(f"send 1 7 {SMALL}" if r == 0 else f"recv 0 7 {SMALL}")
    return lines + ["allreduce 8 0"]


@pytest.fixture(scope="module")
def timeline(tmp_path_factory) -> tuple[dict, Path]:
    require_smpirun()
    tmp = tmp_path_factory.mktemp("timeline")
    trace = gz_trace(tmp / "tr", {r: rank_lines(r) for r in (0, 1)})
    net = hockney_out(tmp / "net.out", LAT, BW)
    shm = hockney_out(tmp / "shm.out", 1e-6, 2e9)
    out = tmp / "pred"
    r = predict(["--trace", str(trace), "--steps", "2", "--network", str(net), "--shm",
                 str(shm), "--cores-per-node", "1", "--timeline", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    assert "timeline.json" in r.stdout
    return json.loads((out / "timeline.json").read_text()), out


def tracks(doc: dict) -> dict[int, list[dict]]:
    """The complete events of each rank, in order of start (ties in the file's order: the
    replay's, outer before inner)."""
    by: dict[int, list[dict]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            by.setdefault(e["tid"], []).append(e)
    return {t: sorted(v, key=lambda e: e["ts"]) for t, v in by.items()}


def test_every_rank_has_a_named_track(timeline):
    doc, out = timeline
    assert doc["displayTimeUnit"] == "ms" and doc["otherData"]["warnings"] == []
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    names = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert names == {0: "rank 0", 1: "rank 1"}
    procs = [e["args"]["name"] for e in meta if e["name"] == "process_name"]
    assert procs == [f"SimGrid replay on {out.parent / 'net.out'}"]
    assert {e["pid"] for e in doc["traceEvents"]} == {1}
    assert set(tracks(doc)) == {0, 1}


def test_events_are_nested_or_in_sequence(timeline):
    eps = 1e-6  # microseconds
    for evs in tracks(timeline[0]).values():
        stack: list[float] = []  # ends of the enclosing events
        for e in evs:
            assert e["dur"] >= 0
            while stack and e["ts"] >= stack[-1] - eps:
                stack.pop()
            if stack:
                assert e["ts"] + e["dur"] <= stack[-1] + eps, e
            stack.append(e["ts"] + e["dur"])


def test_the_events_are_the_traces_actions(timeline):
    for r, evs in tracks(timeline[0]).items():
        lines = rank_lines(r)[1:] if r == 0 else rank_lines(r)  # not the waitall of nothing
        assert [e["args"]["action"] for e in evs] == ["init", *lines, "finalize"]
        assert [e["name"] for e in evs] == ["init", *(x.split()[0] for x in lines), "finalize"]
        assert {e["cat"] for e in evs if e["name"] == "compute"} == {"compute"}


def test_waits_last_what_the_network_defines(timeline):
    msg = LAT + (SIZE + ENVELOPE) / BW
    ev = tracks(timeline[0])

    def calls(r, name):
        return [(e["ts"] * 1e-6, e["dur"] * 1e-6) for e in ev[r] if e["name"] == name]

    def close(a, b):
        assert a == pytest.approx(b, rel=1e-3)

    # step 1: rank 0 computes 1 ms, rank 1 3 ms; both transfers start when rank 1 posts
    (c0, c0d), (c0b, c0bd) = calls(0, "compute")
    (c1, c1d), (c1b, c1bd) = calls(1, "compute")
    close(c0d, 1 * MS), close(c1d, 3 * MS), close(c0bd, 3 * MS), close(c1bd, 1 * MS)
    (w0, w0d), (w0b, w0bd) = calls(0, "waitall")
    (w1, w1d), (w1b, w1bd) = calls(1, "waitall")
    close(w0, 1 * MS), close(w0d, 2 * MS + msg)  # rank 0 waits for rank 1
    close(w1, 3 * MS), close(w1d, msg)
    t1 = 3 * MS + msg
    close(c0b, t1), close(c1b, t1)
    # step 2: the other way round
    close(w1b, t1 + 1 * MS), close(w1bd, 2 * MS + msg)  # rank 1 waits for rank 0
    close(w0b, t1 + 3 * MS), close(w0bd, msg)
    # the blocking receive of the small message, posted as the send leaves
    t2 = t1 + 3 * MS + msg
    ((rv, rvd),) = calls(1, "recv")
    close(rv, t2), close(rvd, LAT + (SMALL + ENVELOPE) / BW)
    ((a0, _),), ((a1, _),) = calls(0, "allreduce"), calls(1, "allreduce")
    assert a0 >= t2 * (1 - 1e-6) and a1 >= (rv + rvd) * (1 - 1e-6)


def test_messages_are_arrows_to_the_call_that_received_them(timeline):
    doc, _ = timeline
    ev = tracks(doc)
    starts = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "f"}
    assert set(starts) == set(ends) and len(starts) == 5  # 2 x 2 halo messages + 1 send
    for k, s in starts.items():
        f = ends[k]
        assert f["bp"] == "e" and f["tid"] == 1 - s["tid"] and f["ts"] >= s["ts"]
        sender = [e["name"] for e in ev[s["tid"]] if abs(e["ts"] - s["ts"]) < 1e-3]
        assert {"isend", "send"} & set(sender)
        ended = [e["name"] for e in ev[f["tid"]]
                 if abs(e["ts"] + e["dur"] - f["ts"]) < 1e-3 and e["name"] != "compute"]
        assert {"waitall", "recv"} & set(ended), (s, f)
    small = [k for k, s in starts.items() if s["tid"] == 0 and
             any(e["name"] == "send" and abs(e["ts"] - s["ts"]) < 1e-3 for e in ev[0])]
    assert len(small) == 1


def test_states_that_do_not_match_the_trace_keep_simgrids_names(tmp_path):
    trace = gz_trace(tmp_path / "tr", {0: ["compute 1000", "send 1 0 10"]})
    init = State(0.0, 0.0, "smpi_replay_run_init", 0)
    comp = State(0.0, 1e-6, "computing", 0)
    send = State(1e-6, 2e-6, "kernel", 0)
    fin = State(2e-6, 2e-6, "smpi_replay_run_finalize", 0)
    rows, warning = name_states([init, comp, send, fin], trace / "rank-0.txt.gz", 0)
    assert warning is None
    assert [(n, a) for _, n, a in rows] == [("init", "init"), ("compute", "compute 1000"),
                                            ("send", "send 1 0 10"), ("finalize", "finalize")]
    # a compute where the trace sends: the trace's names would be wrong, SimGrid's are kept
    rows, warning = name_states([init, comp, comp, fin], trace / "rank-0.txt.gz", 0)
    assert "rank 0" in warning and "send 1 0 10" in warning
    assert [n for _, n, _ in rows] == ["init", "compute", "compute", "finalize"]
    rows, warning = name_states([init, comp, send], trace / "rank-0.txt.gz", 0)
    assert "3 states" in warning and [n for _, n, _ in rows] == ["init", "compute", "MPI"]


def test_timeline_errors_are_one_line_exit_2(tmp_path):
    trace = gz_trace(tmp_path / "tr", {0: ["compute 10"]})
    shm = hockney_out(tmp_path / "shm.out", 1e-6, 2e9)
    args = ["--trace", str(trace), "--network", "gige-tcp", "--shm", str(shm), "--timeline"]
    r = predict(args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "-o OUTDIR" in r.stderr
    r = predict([*args, "-o", str(tmp_path / "model"), "--engine", "model"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--engine simgrid" in r.stderr
    bare = tmp_path / "bin"
    bare.mkdir()
    r = predict([*args, "-o", str(tmp_path / "out")], {**os.environ, "PATH": str(bare)})
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "SimGrid is not installed" in r.stderr
