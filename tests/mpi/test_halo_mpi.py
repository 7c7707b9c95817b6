"""Real ``mpiexec`` jobs: ghosts equal owners' values, exact counters, parallel == serial solves."""

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("halo_check.py")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_halo_exchange_and_solvers(mpirun, nranks):
    """halo_check.py passes on N ranks for metis and rcb, 2D and 3D boxes (see its docstring)."""
    res = mpirun(nranks, SCRIPT, timeout=120)
    out = f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    assert res.returncode == 0, out
    assert res.stdout.strip().splitlines()[-1] == "OK", out
    # every decomposition reported both solvers
    assert res.stdout.count(" iters ") == 2 * 2 * 2, out
