"""pitzdaily on 2 ranks: the first SIMPLEC iterations give the serial residuals.

The linear solves run to ``tol`` here (``rel_tol = 0``): with the case's ``rel_tol = 0.1``
each solve stops after a few AMG cycles, whose smoother differs between 1 and 2 ranks, so
the iterates would differ by the solver's stopping point (3e-4) rather than by rounding."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.unit.test_blockmesh import _residuals

QUICK = ["--steps", "8", "--quiet", "--set", "output.fields=false",
         "--set", "output.plots=false", "--set", "solver.pressure.rel_tol=0",
         "--set", "solver.momentum.rel_tol=0"]


@pytest.mark.mpi
@pytest.mark.parametrize("transpose", [False, True])
def test_pitzdaily_first_iterations_match_serial(haloflow_mpi, tmp_path, transpose):
    """Also with OpenFOAM's transpose stress, whose face gradients read the ghost cells'."""
    res = {}
    extra = ["--set", "solver.transpose_stress=true"] if transpose else []
    for n in (1, 2):
        out = tmp_path / f"n{n}"
        run = haloflow_mpi(n, "run", "pitzdaily", "-o", str(out), *QUICK, *extra,
                           timeout=180)
        assert run.returncode == 0, f"--- stdout ---\n{run.stdout}\n--- stderr ---\n{run.stderr}"
        s = json.loads((out / "summary.json").read_text())
        assert s["ranks"] == n and s["iterations"] == 8 and s["cells"] == 12225
        res[n] = _residuals(out)
    assert res[1][-1].max() < 0.5 * res[1][1].max()  # the run is going somewhere
    np.testing.assert_allclose(res[2], res[1], rtol=1e-6, atol=0)  # measured: 2e-9
