"""DFG 1995 cylinder benchmark 2D-1 (Re = 20) against Schäfer & Turek (1996).

Reference values (FEATFLOW's, computed by V. John and G. Matthies on fine Q2 meshes, restated
on TU Dortmund's DFG benchmark page): c_D 5.57953523384, c_L 0.010618948146, dp 0.11752016697,
L_a 0.08473; Schäfer & Turek's ranges: c_D 5.57-5.59, c_L 0.0104-0.0110, dp 0.1172-0.1176,
L_a 0.0842-0.0852.

The case as shipped (128 cells around, the wake refined 2x, least-squares gradients; 24 588
cells) has c_D 5.5801, dp 0.11732 and L_a 0.0844 inside the published ranges, and c_L
0.01129, 6.3 % above the reference value: the test holds the first three to the ranges and
c_L to 8 % (docs/cylinder.md).  With Gauss gradients on the same mesh L_a is 0.0825, outside.
simpleFoam on the same mesh with the same schemes gives L_a 0.0840, c_D 5.5754 and c_L 0.01117:
the test holds haloflow to 1 %, 0.5 % and 3 % of them.

The uniform family (``wake_refinement`` 1, Gauss gradients; SIMPLE to residuals 1e-7, linear
convection; benchmarks/cylinder.py) is where OpenFOAM's simpleFoam was run on the same mesh:

| cells around | cells  | c_D    | c_L     | dp      | L_a    |
|--------------|--------|--------|---------|---------|--------|
| 64           | 4 707  | 5.5729 | 0.01175 | 0.11703 | 0.0733 |
| 88           | 8 819  | 5.5788 | 0.01145 | 0.11724 | 0.0776 |
| 128          | 18 828 | 5.5817 | 0.01108 | 0.11737 | 0.0805 |
| 176          | 35 447 | 5.5822 | 0.01091 | 0.11743 | 0.0820 |

At 64 cells around c_D is 0.12 % and dp 0.42 % below the reference values; the tolerances,
0.3 % and 0.6 %, are about the width of the published ranges (c_D 5.57-5.59 is 0.36 % wide,
dp 0.34 %) and no more than half again those errors: a lost viscous force (a third of c_D),
a wrong depth or sign, or a pressure taken a cell away is far outside them.  L_a there is
checked against simpleFoam's on the same mesh (0.0733, docs/cylinder.md), and one refinement
step must move every quantity towards the reference values; at 176 cells around c_D, c_L and
dp are inside the ranges and L_a, which converges like h^1.6 in this family, is judged by
Richardson extrapolation from 64, 88 and 176 cells around (the slow test).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpi4py import MPI
from scipy.optimize import brentq

from haloflow.case import load_case
from haloflow.run import run_case

# FEATFLOW reference values (John & Matthies), and Schäfer & Turek's ranges
REF = {"cd": 5.57953523384, "cl": 0.010618948146, "dp": 0.11752016697, "la": 0.08473}
RANGE = {"cd": (5.57, 5.59), "cl": (0.0104, 0.0110), "dp": (0.1172, 0.1176),
         "la": (0.0842, 0.0852)}
CL_TOL_SHIPPED = 0.08  # relative to REF["cl"]; the shipped case is 6.3 % above it
# simpleFoam (plain SIMPLE, the case's relaxation, bounded Gauss linear convection,
# leastSquares gradients) on the shipped mesh (benchmarks/simplefoam_case.py cylinder,
# 2026-12-03): L_a from its U on haloflow's cell centres as haloflow samples it, c_D and c_L
# from its ``forces`` (haloflow: 0.0844, 5.5801, 0.01129)
SIMPLEFOAM_SHIPPED = {"la": 0.08398, "cd": 5.5754, "cl": 0.01117}
TOL_SIMPLEFOAM_SHIPPED = {"la": 0.01, "cd": 0.005, "cl": 0.03}
TOL = {"cd": 0.003, "dp": 0.006}  # relative, on the uniform 64 mesh
LA_SIMPLEFOAM_64 = 0.0733  # simpleFoam (SIMPLEC, Gauss linear) on the uniform 64 mesh
# simpleFoam (plain SIMPLE, the case's relaxation, Gauss linear) on the uniform 64 mesh with
# haloflow's inlet (benchmarks/simplefoam_case.py cylinder), its ``forces`` on the wall:
# total, pressure and viscous x-force 1.112418e-3, 7.168591e-4 and 3.955590e-4 per unit
# density over the 0.1 span: c_D 5.5621 (haloflow 0.19 % above), a viscous share of 0.3556
# (haloflow's 0.3488, 1.9 % below: its wall friction is 1.7 % smaller, its pressure drag
# 1.2 % larger; the two codes' wall gradients on the O-grid's graded cells)
CD_SIMPLEFOAM_64 = 5.5621
VISCOUS_SIMPLEFOAM_64 = 0.3556
QUIET = ["output.fields=false", "output.plots=false"]
# the uniform family of meshes, with the Gauss gradients simpleFoam was run with
UNIFORM = ["mesh.wake_refinement=1", "solver.gradient=gauss"]


def coefficients(c):
    return {"cd": c["cd_final"], "cl": c["cl_final"], "dp": c["dp_final"], "la": c["la"]}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    out = tmp_path_factory.mktemp("cylinder") / "run"
    return run_case(load_case("cylinder", ["output.fields=false"]), out, MPI.COMM_SELF,
                    quiet=True), out


@pytest.fixture(scope="module")
def builtin(tmp_path_factory):
    """The uniform 64 mesh, where simpleFoam was run."""
    out = tmp_path_factory.mktemp("cylinder64") / "run"
    return run_case(load_case("cylinder", ["mesh.cells_around=64", *UNIFORM, *QUIET]), out,
                    MPI.COMM_SELF, quiet=True), out


@pytest.fixture(scope="module")
def refined(tmp_path_factory):
    """``refined(cells_around)``: the coefficients of a run on a finer uniform mesh, run once."""
    done = {}

    def run(n):
        if n not in done:
            out = tmp_path_factory.mktemp(f"cylinder{n}") / "run"
            s = run_case(load_case("cylinder", [f"mesh.cells_around={n}", *UNIFORM, *QUIET]),
                         out, MPI.COMM_SELF, quiet=True)
            assert s["converged"], n
            done[n] = coefficients(s["cylinder"])
        return done[n]

    return run


def test_shipped_case_inside_the_published_ranges(shipped):
    s, out = shipped
    assert s["converged"] and s["cells"] == 24588 and s["iterations"] < 700
    c = s["cylinder"]
    assert c["re"] == pytest.approx(20.0)
    got = coefficients(c)
    for k in ("cd", "dp", "la"):
        lo, hi = RANGE[k]
        assert lo <= got[k] <= hi, (k, got)
    assert got["cl"] == pytest.approx(REF["cl"], rel=CL_TOL_SHIPPED), got
    for k, ref in SIMPLEFOAM_SHIPPED.items():  # OpenFOAM on the same mesh and schemes
        assert got[k] == pytest.approx(ref, rel=TOL_SIMPLEFOAM_SHIPPED[k]), (k, got)
    assert c["cd_pressure"] + c["cd_viscous"] == pytest.approx(c["cd_final"], rel=1e-9)
    assert c["st"] is None and c["reference"]["cd"] == [5.57, 5.59]
    # files: the series per iteration, the same in summary.json and forces.csv
    assert json.loads((out / "summary.json").read_text())["cylinder"] == c
    t, cd, cl, dp, fx, fy = np.loadtxt(out / "forces.csv", delimiter=",", skiprows=1).T
    assert len(t) == s["iterations"] == c["samples"] == len(c["cd"])
    assert cd[-1] == pytest.approx(c["cd_final"], rel=1e-9) and c["cd"] == pytest.approx(cd)
    assert fx[-1] * 2 / (0.2 ** 2 * 0.1) == pytest.approx(cd[-1])  # per unit depth
    assert (out / "plots" / "cylinder_forces.png").stat().st_size > 0
    # the log reports the computed c_D beside the published range (not a recorded value)
    assert (f"cylinder, Re = 20: c_D {c['cd_final']:.4f} [5.57, 5.59]"
            in (out / "log.txt").read_text())
    assert s["phases_s"]["monitor"][0] < 0.1 * s["loop_s"]


def test_uniform_64_mesh_against_simplefoam(builtin):
    s, _ = builtin
    assert s["converged"] and s["cells"] == 4707 and s["iterations"] < 300
    c = s["cylinder"]
    got = coefficients(c)
    for k, tol in TOL.items():
        assert got[k] == pytest.approx(REF[k], rel=tol), (k, got)
    assert got["la"] == pytest.approx(LA_SIMPLEFOAM_64, rel=0.01), got
    # the drag is pressure plus friction, split as simpleFoam splits it on this mesh
    assert c["cd_pressure"] + c["cd_viscous"] == pytest.approx(c["cd_final"], rel=1e-9)
    assert c["cd_final"] == pytest.approx(CD_SIMPLEFOAM_64, rel=0.005)
    assert c["cd_viscous"] / c["cd_final"] == pytest.approx(VISCOUS_SIMPLEFOAM_64, rel=0.03)


def test_refinement_moves_towards_the_benchmark(builtin, refined):
    coarse = coefficients(builtin[0]["cylinder"])
    fine = refined(88)
    for k in REF:
        assert abs(fine[k] - REF[k]) < abs(coarse[k] - REF[k]), (k, coarse, fine)
    assert fine["cd"] == pytest.approx(REF["cd"], rel=0.003)
    assert fine["dp"] == pytest.approx(REF["dp"], rel=0.003)


def richardson(n, v):
    """Extrapolated value and observed order from three meshes with ``n`` cells around
    (h ~ 1 / n) and values ``v``: v = v_inf - C h^p through all three."""
    h = 1.0 / np.asarray(n, dtype=float)
    ratio = (v[1] - v[0]) / (v[2] - v[1])
    p = brentq(lambda q: (h[0] ** q - h[1] ** q) / (h[1] ** q - h[2] ** q) - ratio, 0.2, 6.0)
    c = (v[2] - v[1]) / (h[1] ** p - h[2] ** p)
    return v[2] + c * h[2] ** p, p


@pytest.mark.slow
def test_fine_mesh_reaches_the_published_ranges(builtin, refined):
    """176 cells around (35 447 cells, uniform): c_D, c_L and dp inside Schäfer & Turek's
    ranges.
    L_a extrapolated from 64, 88 and 176 cells around (observed order about 1.6): 0.0842,
    0.6 % below the reference value, at the lower end of the range (whose half-width is
    0.6 %); checked to 1 % of the reference value."""
    fine = refined(176)
    for k in ("cd", "cl", "dp"):
        lo, hi = RANGE[k]
        assert lo <= fine[k] <= hi, (k, fine)
    la = [builtin[0]["cylinder"]["la"], refined(88)["la"], fine["la"]]
    la_inf, order = richardson([64, 88, 176], la)
    assert 1.0 < order < 2.5, (la, order)
    assert la_inf == pytest.approx(REF["la"], rel=0.01), (la, la_inf, order)


def test_unsteady_run_records_every_step(tmp_path):
    """PISO at Re = 100 for a few steps: a sample per step, no Strouhal number yet."""
    case = load_case("cylinder_re100", ["mesh.cells_around=32", "solver.max_steps=30",
                                        *QUIET])
    s = run_case(case, tmp_path / "re100", MPI.COMM_SELF, quiet=True)
    c = s["cylinder"]
    assert c["samples"] == 30 and c["time_axis"] == "time"
    assert c["time"][-1] == pytest.approx(30 * case.solver.dt)
    assert c["st"] is None and c["periods"] < 3 and c["re"] == pytest.approx(100.0)
    assert 1.0 < c["cd_final"] < 10.0  # impulsive start: drag well above the periodic 3.2


# -- 2D-2 (Re = 100): periodic shedding -----------------------------------------------------------

# Schäfer & Turek's ranges for 2D-2, and OpenFOAM's pimpleFoam on the same 64 mesh with the same
# scheme (backward in time, Gauss linear, 2 PISO correctors; docs/cylinder.md)
RANGE_2D2 = {"st": (0.295, 0.305), "cd_max": (3.22, 3.24), "cl_max": (0.99, 1.01)}
PIMPLEFOAM_64 = {"st": 0.2759, "cd_max": 3.1625, "cl_max": 1.0271}
TOL_PIMPLEFOAM = {"st": 0.02, "cd_max": 0.01, "cl_max": 0.03}
TOL_RANGE_64 = {"st": 0.08, "cd_max": 0.03, "cl_max": 0.05}


@pytest.mark.slow
def test_re100_shedding_against_the_benchmark(tmp_path):
    """The built-in cylinder_re100 case (64 cells around, dt 0.002) from rest to t = 7, as in
    docs/cylinder.md's table: 3 500 BDF2 PISO steps, shedding periodic from about t = 3, the
    values over the last 6 periods (St 0.2778, c_D,max 3.1624, c_L,max 1.0435 measured).

    Against pimpleFoam on the same mesh and scheme (0.2759, 3.1625, 1.0271): St within 2 %,
    c_D,max 1 %, c_L,max 3 % (measured 0.7 %, 0.0 %, 1.6 %).  Against the middle of Schäfer &
    Turek's ranges this coarse mesh is 7.4 % low in St, 2.1 % in c_D,max and 4.4 % high in
    c_L,max (all three inside at 176 cells around); bands 8 %, 3 %, 5 %.  Convecting with the
    extrapolated flux 2 phi^n - phi^(n-1), a defect found once, damped c_L,max to 0.84: far
    outside both."""
    case = load_case("cylinder_re100", ["solver.end_time=7", *QUIET])
    s = run_case(case, tmp_path / "re100", MPI.COMM_SELF, quiet=True)
    c = s["cylinder"]
    assert s["steps"] == 3500 and c["re"] == pytest.approx(100.0) and c["periods"] == 6
    for k, ref in PIMPLEFOAM_64.items():
        assert c[k] == pytest.approx(ref, rel=TOL_PIMPLEFOAM[k]), (k, c[k])
        mid = 0.5 * sum(RANGE_2D2[k])
        assert c[k] == pytest.approx(mid, rel=TOL_RANGE_64[k]), (k, c[k])
