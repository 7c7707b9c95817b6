"""Distributed AMG on 2-4 ranks agrees with the serial solve (see amg_check.py)."""

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("amg_check.py")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_distributed_amg_matches_serial(mpirun, nranks):
    res = mpirun(nranks, SCRIPT, timeout=180)
    out = f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    assert res.returncode == 0, out
    assert res.stdout.strip().splitlines()[-1] == "OK", out
