"""The cylinder benchmark on 2 and 3 ranks gives the serial coefficients.

SIMPLEC to residuals 1e-7 on a coarse O-grid (48 cells around the cylinder): the forces are
summed over the ranks' wall faces (the cylinder is cut between ranks by RCB), dp is taken on
the rank owning the wall cell at each point, and L_a from the gathered field, so they agree
with the serial run to the tolerance the solution is converged to.
"""

from __future__ import annotations

import json

import pytest

QUICK = ["--set", "mesh.cells_around=48", "--set", "output.plots=false",
         "--set", "output.fields=false", "--quiet"]
KEYS = ("cd_final", "cl_final", "dp_final", "la")


@pytest.mark.mpi
def test_coefficients_match_serial(haloflow_mpi, tmp_path):
    got = {}
    for n in (1, 2, 3):
        out = tmp_path / f"n{n}"
        res = haloflow_mpi(n, "run", "cylinder", "-o", str(out), *QUICK, timeout=240)
        assert res.returncode == 0, f"--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
        s = json.loads((out / "summary.json").read_text())
        assert s["ranks"] == n and s["converged"]
        got[n] = s["cylinder"]
    for n in (2, 3):
        for k in KEYS:
            assert got[n][k] == pytest.approx(got[1][k], rel=1e-6), (n, k, got[n][k], got[1][k])
    assert got[1]["cd_final"] == pytest.approx(5.58, rel=0.02)  # a real answer, not zeros
