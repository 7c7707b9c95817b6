"""A fault that one rank meets mid-run (a file it cannot write) ends the two-rank job with
that rank's one line on stderr and exit 2: no second line from MPICH (``MPI_Abort``'s own
report, or a rank that finds its peer gone), whichever rank it is."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.mpi.conftest import LAUNCH, mpi_env, require_mpiexec


def _faulty_job(tmp_path, plant, *args):
    """The cavity on two ranks into ``tmp_path/R``; ``plant(folder)`` once the run has taken
    the folder (its log.txt is there)."""
    exe = require_mpiexec()
    out = tmp_path / "R"
    cmd = [str(exe), "-n", "2", sys.executable, str(LAUNCH), "2", "-m", "haloflow", "run",
           "cavity", "-o", str(out), "--set", "mesh.cells=[8,8,1]", "--steps", "30", "--quiet",
           "--set", "solver.steady_tol=0", *args]
    job = subprocess.Popen(cmd, env=mpi_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    try:
        t0 = time.monotonic()
        while not (out / "log.txt").exists() and time.monotonic() - t0 < 60:
            time.sleep(0.002)
        plant(out)
        t1 = time.monotonic()
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            import os
            import signal

            os.killpg(job.pid, signal.SIGKILL)
    assert time.monotonic() - t1 < 60
    return job.returncode, err


def _one_line(rc, err) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, f"exit {rc}, expected 2 and one line\n{err}"
    return lines[0]


@pytest.mark.mpi
def test_rank_1_alone_cannot_write_its_field_piece(tmp_path):
    def plant(out):
        (out / "fields" / "cavity_1.vtu.tmp" / "x").mkdir(parents=True)  # a folder in its way

    line = _one_line(*_faulty_job(tmp_path, plant))
    assert line == (f"haloflow: error on rank 1: {tmp_path / 'R' / 'fields' / 'cavity_1.vtu.tmp'}"
                    ": cannot write (Is a directory)"), line


@pytest.mark.mpi
def test_rank_0_alone_cannot_rename_its_checkpoint(tmp_path):
    final = "step-000000002.ckpt"

    def plant(out):
        (out / "checkpoint" / final / "x").mkdir(parents=True)  # a folder in its way

    line = _one_line(*_faulty_job(tmp_path, plant, "--set", "output.checkpoint_every=1"))
    assert line.startswith(f"haloflow: error: {tmp_path / 'R' / 'checkpoint' / final}: "
                           "cannot write the checkpoint ("), line
