"""Checkpoint on N ranks, restart on M: the same rank count goes on bit for bit, another
within 1e-10 of the uninterrupted run on M ranks (its own reductions round differently
from N's); the BDF2 case carries its old time level.  A SIGTERM to mpiexec ends the job
within seconds with a checkpoint that restarts."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import numpy as np
import pytest

from haloflow.io.checkpoint import read_arrays
from tests.mpi.conftest import LAUNCH, mpi_env, require_mpiexec

CASES = {
    "cavity": ["--set", "mesh.cells=[20,20,1]", "--set", "solver.dt=0.02"],
    # runs on different rank counts differ by what the solver tolerances leave: tight ones
    "taylor_green": ["--set", "mesh.cells=[16,16,1]", "--set", "solver.dt=0.05",
                     "--set", "parallel.decomposition=rcb", "--set", "solver.pressure.tol=1e-12",
                     "--set", "solver.momentum.tol=1e-12"],
    "heated_cavity": ["--set", "mesh.cells=[16,16,1]", "--set", "physics.Ra=1e4",
                      "--set", "solver.pressure.tol=1e-12", "--set", "solver.momentum.tol=1e-12",
                      "--set", "solver.pressure.rel_tol=0", "--set", "solver.momentum.rel_tol=0"],
}
COMMON = ["--quiet", "--set", "output.plots=false", "--set", "output.fields=false"]
# (checkpoint ranks, restart ranks, halo strategy of the restart)
PAIRS = {"cavity": [(1, 1, "aggregated"), (2, 2, "aggregated"), (1, 3, "perfield"),
                    (3, 2, "neighbor")],
         "taylor_green": [(2, 2, "overlap"), (4, 1, "aggregated"), (2, 4, "packed")],
         "heated_cavity": [(2, 2, "aggregated"), (1, 3, "overlap")]}


def _ok(res):
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"


def _final(d):
    return read_arrays(str(d / "checkpoint" / "step-000000008.ckpt"))


@pytest.mark.mpi
@pytest.mark.parametrize("case", sorted(CASES))
def test_restart_on_any_rank_count(haloflow_mpi, tmp_path, case):
    ref = {}
    for n in sorted({r for pair in PAIRS[case] for r in pair[:2]}):
        d = tmp_path / f"ref{n}"
        _ok(haloflow_mpi(n, "run", case, "-o", str(d), *CASES[case], *COMMON, "--steps", "8",
                         "--set", "output.checkpoint_every=4", timeout=180))
        ref[n] = d
    # a run directory restarts from its newest checkpoint (step 8: nothing left to do)
    n, m, halo = PAIRS[case][-1]
    d = tmp_path / "newest"
    _ok(haloflow_mpi(m, "run", "--restart", str(ref[n]), "-o", str(d), "--steps", "8",
                     "--halo", halo, "--quiet", timeout=180))
    s = json.loads((d / "summary.json").read_text())
    assert (s["status"], s["start_step"], s["steps"]) == ("completed", 8, 8), s
    for n, m, halo in PAIRS[case]:  # from step 4 of a run on n ranks, on m ranks
        d = tmp_path / f"restart{n}to{m}"
        _ok(haloflow_mpi(m, "run", "--restart",
                         str(ref[n] / "checkpoint" / "step-000000004.ckpt"), "-o", str(d),
                         "--steps", "8", "--halo", halo, "--quiet", timeout=180))
        s = json.loads((d / "summary.json").read_text())
        assert (s["status"], s["start_step"], s["steps"], s["ranks"]) == ("completed", 4, 8, m)
        assert s["case"] == case
        ck, got = _final(d)
        _, want = _final(ref[m])
        assert ck.step == 8 and set(got) == set(want)
        if case == "taylor_green":
            assert "U_old" in got  # BDF2's U^(n-1)
        if case == "heated_cavity":
            assert "T" in got and np.ptp(got["T"]) > 0.9
        for name in want:
            if n == m:
                assert np.array_equal(got[name], want[name]), (name, n, m)
            else:  # (PISO's last change is a difference of pressures: on p's scale)
                base = want["p" if name == "p_last_change" else name]
                scale = max(np.abs(base).max(), 1e-30)
                assert np.abs(got[name] - want[name]).max() <= 1e-10 * scale, (name, n, m)
        assert np.abs(want["U"]).max() > 0.1  # a flow, not a field at rest


@pytest.mark.mpi
def test_sigterm_ends_the_job_with_a_checkpoint_that_restarts(haloflow_mpi, tmp_path):
    exe = require_mpiexec()
    d = tmp_path / "long"
    cmd = [str(exe), "-n", "2", __import__("sys").executable, str(LAUNCH), "2", "-m",
           "haloflow", "run", "cavity", "-o", str(d), "--set", "mesh.cells=[48,48,1]",
           "--set", "solver.steady_tol=0", "--set", "solver.end_time=1e6",
           "--set", "output.log_every=1", *COMMON]
    job = subprocess.Popen(cmd, env=mpi_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        log = d / "log.txt"
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120 and not (log.exists() and "step     20" in
                                                   log.read_text()):
            time.sleep(0.2)
        assert job.poll() is None, job.communicate()
        job.send_signal(signal.SIGTERM)
        t_sig = time.monotonic()
        out, err = job.communicate(timeout=30)
        took = time.monotonic() - t_sig
    finally:
        if job.poll() is None:
            job.kill()
    assert took < 10, f"the job took {took:.1f} s to end"
    assert job.returncode == 128 + signal.SIGTERM, err
    s = json.loads((d / "summary.json").read_text())
    assert s["status"] == "interrupted" and s["signal"] == "SIGTERM"
    assert s["last_checkpoint"].endswith(f"step-{s['steps']:09d}.ckpt")
    d2 = tmp_path / "resumed"
    _ok(haloflow_mpi(1, "run", "--restart", str(d), "-o", str(d2), "--steps",
                     str(s["steps"] + 3), "--quiet", timeout=120))
    s2 = json.loads((d2 / "summary.json").read_text())
    assert (s2["status"], s2["start_step"], s2["steps"]) == ("completed", s["steps"],
                                                             s["steps"] + 3)
