"""Momentum by symmetric Gauss-Seidel sweeps under real ``mpiexec``: couplings across ranks
are explicit, so the iterates depend on the partition, the steady field does not."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.fieldio import read_fields

QUICK = ["--set", "mesh.cells=[16,16,1]", "--set", "output.plots=false", "--quiet",
         "--set", "postprocess.cavity=false"]


def _run(haloflow_mpi, n, outdir, method):
    res = haloflow_mpi(n, "run", "cavity", "-o", str(outdir), *QUICK, "--set",
                       f"solver.momentum.method={method}", timeout=180)
    assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    s = json.loads((outdir / "summary.json").read_text())
    assert s["converged"] and s["u_solver"] == method
    return s, read_fields(outdir)


@pytest.fixture(scope="module")
def serial_runs(haloflow_mpi, tmp_path_factory):
    """Serial BiCGStab-Jacobi and serial SGS, run once for both rank counts below."""
    return (_run(haloflow_mpi, 1, tmp_path_factory.mktemp("bicgstab"), "bicgstab-jacobi")[1],
            _run(haloflow_mpi, 1, tmp_path_factory.mktemp("sgs1"), "sgs")[1])


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_sgs_steady_cavity_matches_serial_and_bicgstab(haloflow_mpi, tmp_path, serial_runs,
                                                       nranks):
    """Serial BiCGStab-Jacobi, serial SGS and SGS on ``nranks`` reach one steady field to
    1e-6 (the solvers' tolerances, not their iterates, decide it)."""
    ref, serial = serial_runs
    s, par = _run(haloflow_mpi, nranks, tmp_path / "sgsn", "sgs")
    assert s["ranks"] == nranks
    assert np.abs(serial["U"] - ref["U"]).max() < 1e-6
    assert np.abs(par["U"] - serial["U"]).max() < 1e-6
    assert np.abs(par["p"] - serial["p"]).max() < 1e-6
