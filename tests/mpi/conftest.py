"""Launching real MPI jobs: the venv's own ``mpiexec`` (DESIGN.md section 8), with a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def find_mpiexec() -> Path | None:
    """The mpiexec installed next to this Python (the wrong launcher runs 1-rank jobs)."""
    exe = Path(sys.executable).parent / "mpiexec"
    return exe if exe.exists() else None


def mpi_env() -> dict[str, str]:
    """Environment for the ranks: the repo importable, one numba/OpenMP thread per rank."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["NUMBA_NUM_THREADS"] = "1"  # ranks >= cores: one numba thread per rank
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_mpi(exe: Path, n: int, script: Path | str, *args: str, timeout: float = 120):
    """Run ``script`` on ``n`` ranks; a job still running after ``timeout`` s is killed and fails.

    ``script`` may be ``"-m"`` followed by a module in ``args``.  The job gets its own process
    group so that a hang kills mpiexec and every rank with it.
    """
    cmd = [str(exe), "-n", str(n), sys.executable, str(script), *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=mpi_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} still running after {timeout} s, killed\n"
                    f"--- stdout ---\n{out}\n--- stderr ---\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture
def mpirun():
    """``mpirun(n, script, *args, timeout=120)`` -> CompletedProcess; skips without mpiexec."""
    exe = find_mpiexec()
    if exe is None:
        pytest.skip(f"no mpiexec next to {sys.executable}")

    def run(n: int, script: Path | str, *args: str, timeout: float = 120):
        return run_mpi(exe, n, script, *args, timeout=timeout)

    return run


@pytest.fixture
def haloflow_mpi(mpirun):
    """``haloflow_mpi(n, "run", ...)``: the haloflow command on ``n`` ranks."""

    def run(n: int, *args: str, timeout: float = 120):
        return mpirun(n, "-m", "haloflow", *args, timeout=timeout)

    return run
