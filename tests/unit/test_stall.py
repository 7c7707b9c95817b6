"""A transient run whose time step cannot carry the flow ends as diverged (exit 3) instead
of running on to a wrong answer with exit 0; a large but resolved time step runs on.

The 64^2 cavity at dt = 1 (lid Courant number 64) settles into a state whose velocity
changes by 150 % of itself every step, with speeds of 2.5-3 times the lid's, and never
blows up: before the stall check it ended with exit 0.  At dt = 0.4 (Courant number 25.6)
the same mesh converges to steady flow."""

from __future__ import annotations

import json

import pytest

from haloflow.physics.monitor import STALL_CHANGE, STALL_STEPS, DivergenceError, StepMonitor
from tests.limited import haloflow

CAVITY = ["--set", "mesh.cells=[64,64,1]", "--quiet", "--set", "output.plots=false",
          "--set", "output.fields=false", "--steps", "60"]


def test_a_time_step_the_flow_cannot_follow_ends_the_run_as_diverged(tmp_path):
    out = tmp_path / "run"
    res = haloflow("run", "cavity", "-o", out, *CAVITY, "--set", "solver.dt=1.0")
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not resolve the flow" in lines[0], res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "diverged" and "solver.dt" in s["message"]
    # stopped once STALL_STEPS unresolved steps followed the impulsive start, not at the end
    assert f"each of the last {STALL_STEPS} steps" in s["message"]
    assert "t = 60" not in s["message"]


def test_a_large_resolved_time_step_runs_to_the_end(tmp_path):
    out = tmp_path / "run"
    res = haloflow("run", "cavity", "-o", out, *CAVITY, "--set", "solver.dt=0.4")
    assert res.returncode == 0, res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "completed" and s["steps"] == 60


class _Monitor(StepMonitor):
    """The judgement alone, on given sums (no mesh)."""

    def __init__(self, stall_steps):
        self.total_volume, self.u_ref, self.advice = 1.0, 1.0, "try a smaller solver.dt"
        self.stall_steps, self.unresolved = stall_steps, 0


def _step(m, per_step):
    # sum V |U - U_old|^2 = per_step^2 * sum V |U|^2, with dt = 1
    return m.judge(0.0, per_step ** 2, 1.0, 1.0, 0.0)


def test_only_unbroken_runs_of_unresolved_steps_count():
    m = _Monitor(3)
    for change in (0.9, 0.9, 0.1, 0.9, 0.9, STALL_CHANGE):  # broken twice: never 3 in a row
        _step(m, change)
    with pytest.raises(DivergenceError):
        for _ in range(3):
            _step(m, 0.6)
    steady = _Monitor(0)  # a steady solve: its iterations are not judged so
    for _ in range(10):
        _step(steady, 5.0)
