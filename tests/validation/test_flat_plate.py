"""Turbulent flat plate, Spalart-Allmaras, against the NASA Turbulence Modeling Resource.

The built-in case's geometry on a coarser mesh (12 + 48 cells along x, 56 wall-normal with
the same first cells: 2 mm at the leading edge, 5e-6 at the wall; 3360 cells, about 200
SIMPLEC iterations, a few seconds): cf along the plate within 3 % of TMR's published SA
result (CFL3D, 545 x 385 grid) over x = 0.1..1.95.  Measured: cf(0.97) = 0.002737 (+1.2 %),
largest difference 1.66 %; the built-in 120 x 80 mesh gives 0.002734 (+1.04 %) and 1.43 %
(docs/validation.md).  The remaining +1 % is mostly the incompressible run against TMR's
Mach 0.2 computations.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from haloflow.post.flat_plate import reference
from tests.limited import REPO, haloflow

sys.path.insert(0, str(REPO / "benchmarks"))
from flat_plate import mesh_with  # noqa: E402  (the benchmark's mesh of other cell counts)

TOL = 0.03


def test_reference_data_is_the_published_table():
    ref = reference()
    assert ref.shape == (447, 3)
    assert np.all(np.diff(ref[:, 0]) > 0)
    # TMR's grid-convergence table: cf(0.97) on the finest grid, CFL3D 0.00270562
    assert abs(np.interp(0.97, ref[:, 0], ref[:, 1]) / 0.00270562 - 1) < 2e-3


def test_skin_friction_within_3_percent(tmp_path):
    out = tmp_path / "run"
    res = haloflow("run", "flat_plate", "-o", out, "--quiet", "--set",
                   f"mesh.file={mesh_with((12, 48, 56), tmp_path)}", "--set",
                   "output.fields=false", "--set", "output.plots=false", timeout=300)
    assert res.returncode == 0, res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["converged"] and s["cells"] == 3360
    fp = s["flat_plate"]
    assert fp["n_compared"] > 25
    assert fp["max_rel_error"] < TOL, fp
    assert abs(fp["cf_097_rel_error"]) < TOL, fp
    cf = np.loadtxt(out / "cf.csv", delimiter=",", skiprows=1)
    assert np.all(np.diff(cf[cf[:, 0] > 0.01, 1]) < 0)  # falls monotonically along the plate
