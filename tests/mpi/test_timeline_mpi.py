"""``output.timeline`` on two ranks: rank 0 writes every rank's track, gathered, each with
its own steps and phases nested in them, on a common clock (both tracks' first step starts
at the barrier-aligned zero)."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_run_timeline import _tracks


@pytest.mark.mpi
def test_every_rank_has_its_track_on_a_common_clock(haloflow_mpi, tmp_path):
    out = tmp_path / "run"
    res = haloflow_mpi(2, "run", "cavity", "-o", str(out), "--quiet", "--steps", "3",
                       "--set", "mesh.cells=[8,8,1]", "--set", "output.plots=false",
                       "--set", "output.fields=false", "--set", "output.timeline=true")
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "timeline.json").read_text())
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {0: "rank 0", 1: "rank 1"}
    tracks = _tracks(doc)
    assert set(tracks) == {0, 1}
    for rank, evs in tracks.items():
        steps = [e for e in evs if e["cat"] == "step"]
        assert [e["name"] for e in steps] == ["step 1", "step 2", "step 3"], rank
        assert any(e["cat"] == "phase" for e in evs), rank
        for e in evs:
            if e["cat"] == "phase":
                step = next(s for s in steps if s["ts"] <= e["ts"] <= s["ts"] + s["dur"])
                assert step["name"] == f"step {e['args']['step']}", (rank, e)
    # the steps end with collectives: no rank's step 3 ends before the other's step 2 ends
    ends = {r: [s["ts"] + s["dur"] for s in evs if s["cat"] == "step"]
            for r, evs in tracks.items()}
    assert ends[0][2] >= ends[1][1] and ends[1][2] >= ends[0][1], ends
