"""Distributed AMG on 2-4 ranks agrees with the serial solve (see amg_check.py)."""

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("amg_check.py")


def _check(res):
    out = f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    assert res.returncode == 0, out
    assert res.stdout.strip().splitlines()[-1] == "OK", out


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_distributed_amg_matches_serial(mpirun, nranks):
    _check(mpirun(nranks, SCRIPT, timeout=180))


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_metis_partitions_keep_serial_iterations(mpirun, nranks):
    """Jagged METIS interfaces: at most ceil(1.2 x serial) + 1 iterations (2D, to 1e-6)."""
    _check(mpirun(nranks, SCRIPT, "--iterations", timeout=180))
