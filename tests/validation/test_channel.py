"""Plane Poiseuille flow: u(y) = 1.5 U (1 - (2y/H - 1)^2) between walls, 20 cells across.

A parabolic inlet makes the exact solution hold everywhere, so a short channel (2 H, 40 x 20
cells) tests the discretisation, not the development length.  Measured (max over a column at
x = 1.5 H of |u - u_exact| / u_max): uniform 0.25 % (the wall flux of a cell-centred scheme is
first order; 40 cells across: 0.06 %), graded 4:1 0.71 %, "checker" (interior points moved by
+-20 % of the spacing, 16 deg non-orthogonal, 21 deg face slopes) 0.23 % corrected against
1.28 % uncorrected, randomly moved points 0.5-0.75 %.  The same numbers with SIMPLE and with
PISO run to steady state.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case
from haloflow.post.channel import max_relative_error
from haloflow.run import run_case
from tests.fieldio import read_fields
from tests.unit.test_bcs_simple import perturb

CELLS = (40, 20, 1)
PISO = ["solver.algorithm=piso", "solver.dt=0.5", "solver.steady_tol=1e-6",
        "solver.n_nonorth_correctors=1"]
SIMPLE = ["solver.algorithm=simple", "solver.residual_tol=1e-6"]


def checker(mesh, cells, frac=0.2):
    """Move every point not on the inlet or outlet by +-``frac`` of the spacing in x,
    alternating like a checkerboard: trapezoidal cells whose slanted sides carry a share
    of the wall-normal diffusion that an uncorrected Laplacian misses."""
    nx, ny, nz = cells
    P = mesh.points.reshape(nz + 1, ny + 1, nx + 1, 3)
    i, j = np.meshgrid(np.arange(nx + 1), np.arange(ny + 1))
    shift = frac * np.diff(P[0, 0, :, 0]).min() * (-1.0) ** (i + j)
    shift[:, [0, -1]] = 0.0
    P[..., 0] += shift[None]
    mesh.geometry = None
    return mesh


def channel(kind, algorithm, *extra, cells=CELLS, length=2.0, max_steps=3000):
    """Solve the parabolic-inlet channel on a ``kind`` of mesh; (solver, error, steps)."""
    case = load_case("channel", [f"mesh.cells={list(cells)}", f"mesh.lengths=[{length},1,1]",
                                 "boundary.left.profile=parabolic",
                                 *(PISO if algorithm == "piso" else SIMPLE), *extra])
    m = case.mesh
    mesh = box(m.cells, m.lengths, m.origin, m.grading)
    if kind == "checker":
        checker(mesh, cells)
    elif kind == "random":
        perturb(mesh, cells)
    lm, s, steps = steady(mesh, case, f"{kind} {algorithm} {extra}", max_steps)
    nx, ny = cells[:2]
    ids = int(0.75 * nx) + nx * np.arange(ny)
    y = lm.geometry.cell_centres[ids, 1]
    return s, max_relative_error(y, s.U[0, ids], 0.0, 1.0, 1.0), steps


def steady(mesh, case, what: str, max_steps: int = 3000):
    """Serial solve of ``case`` on ``mesh`` until it converges: (local mesh, solver, steps);
    the test fails if it does not within ``max_steps``."""
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    comm = MPI.COMM_SELF
    s = solver_from_case(lm, case, halo.make("packed", lm, comm), comm)
    for steps in range(1, max_steps + 1):
        if s.converged(s.step()):
            return lm, s, steps
    pytest.fail(f"{what}: not steady after {max_steps} steps")


@pytest.mark.parametrize("algorithm", ["simple", "piso"])
@pytest.mark.parametrize("kind, extra, bound", [
    ("uniform", [], 0.003),
    ("graded", ["mesh.grading=[1,4,1]"], 0.008),
    ("checker", [], 0.003),
])
def test_poiseuille_within_one_percent(kind, extra, bound, algorithm):
    s, err, _ = channel(kind, algorithm, *extra)
    assert s.nonorth == (kind == "checker")
    assert err < bound, f"{kind} {algorithm}: max error {err:.5f}"


def test_nonorthogonal_correction_matters():
    """Without it the checker mesh misses by more than 1 %, five times the corrected error."""
    _, corrected, _ = channel("checker", "simple")
    s, uncorrected, _ = channel("checker", "simple", "solver.laplacian=uncorrected")
    assert not s.nonorth
    assert uncorrected > 0.01 and uncorrected > 5 * corrected, (uncorrected, corrected)


@pytest.mark.parametrize("algorithm, gradient", [("simple", "least-squares"), ("piso", "gauss")])
def test_randomly_moved_points(algorithm, gradient):
    _, err, _ = channel("random", algorithm, f"solver.gradient={gradient}")
    assert err < 0.01, err


def test_symmetry_plane_gives_the_full_channel():
    """A half channel with a symmetry plane on top converges to the lower half of the full
    one (a developing uniform inlet, so the flow is not trivially parallel)."""
    common = ["boundary.left.profile=uniform", "solver.residual_tol=1e-8"]
    full, _, _ = channel("uniform", "simple", *common, cells=(40, 20, 1))
    case = ["mesh.lengths=[2,0.5,1]", "boundary.top.type=symmetry"]
    half, _, _ = channel("uniform", "simple", *common, *case, cells=(40, 10, 1))
    uf = full.U[:, :800].reshape(3, 20, 40)[:, :10]
    uh = half.U[:, :400].reshape(3, 10, 40)
    assert np.abs(uf - uh).max() < 1e-6
    assert np.abs(full.p[:800].reshape(20, 40)[:10] - half.p[:400].reshape(10, 40)).max() < 1e-6
    assert np.abs(uh[1]).max() > 0.01  # the developing region has a real cross flow


def test_simplec_takes_fewer_iterations():
    """SIMPLEC (p unrelaxed) reaches plain SIMPLE's answer in fewer iterations: measured
    92 at U 0.8 against SIMPLE's 146 (2026-12-02; its iterations grow as U nears 1, as
    simpleFoam's do)."""
    _, err, n_simple = channel("uniform", "simple")
    _, err_c, n_simplec = channel("uniform", "simple", "solver.consistent=true",
                                  "solver.relaxation.U=0.8", "solver.relaxation.p=1")
    assert err_c == pytest.approx(err, abs=1e-5)
    assert n_simplec < 0.75 * n_simple, (n_simplec, n_simple)


def test_linear_upwind_convection():
    _, err, _ = channel("checker", "simple", "solver.convection=linear-upwind")
    assert err < 0.003


def test_builtin_channel_case(tmp_path):
    """The shipped case: uniform inlet, L = 10 H, Re 20, SIMPLE; developed by the outlet."""
    out = tmp_path / "channel"
    s = run_case(load_case("channel"), out, MPI.COMM_SELF, quiet=True)
    assert s["algorithm"] == "simple" and s["converged"] and s["iterations"] == s["steps"] < 400
    assert s["final_residual"] < 1e-6
    c = s["channel"]
    assert c["re"] == pytest.approx(20.0) and c["x"] == pytest.approx(8.975)
    assert c["max_rel_error"] < 0.004, c
    assert json.loads((out / "summary.json").read_text())["channel"] == c
    for name in ("channel_profile.csv", "plots/channel_profile.png", "plots/velocity.png",
                 "fields/channel.pvtu"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    y, u, exact = np.loadtxt(out / "channel_profile.csv", delimiter=",", skiprows=1).T
    assert len(y) == 20 and np.abs(u - exact).max() / 1.5 == pytest.approx(c["max_rel_error"])
    _developed_channel_balance(read_fields(out, "channel"))


def _developed_channel_balance(f, nx=200, ny=20, length=10.0, nu=0.05, u_mean=1.0):
    """The shipped channel's fields (H = 1) against laminar channel flow: every column of
    cells carries the inlet's flow rate, and from x = 3 H on the pressure falls at the rate
    -dp/dx = 12 nu U / H^2 = 0.6 that balances the wall friction 6 nu U / H of Poiseuille
    flow on each wall.  Measured: the columns' flow rates 1 to 3e-8 (SIMPLE's residual_tol
    1e-6); the slope fitted over 3 <= x <= 9 is -0.59703 on every row, 0.50 % short of 0.6
    (the first-order wall flux of 20 cells across), and -0.62688 (4.5 % over) with the
    viscosity 5 % high: the band of 1 % leaves a viscosity, a wall flux or a pressure
    equation off by 1.5 % or more outside it."""
    dx, dy = length / nx, 1.0 / ny
    x = (np.arange(nx) + 0.5) * dx
    far = (x >= 3.0) & (x <= 9.0)
    flow = f["U"][:, 0].reshape(ny, nx)[:, far].sum(axis=0) * dy
    assert np.abs(flow - u_mean).max() < 1e-6, np.abs(flow - u_mean).max()
    p = f["p"].reshape(ny, nx)
    slopes = np.array([np.polyfit(x[far], row[far], 1)[0] for row in p])
    want = -12.0 * nu * u_mean
    err = np.abs(slopes / want - 1.0).max()
    assert err < 0.01, f"dp/dx {slopes.min():.5f}..{slopes.max():.5f}, Poiseuille {want}"


TRI_CASE = """\
[mesh]
type = "file"
file = "{mesh}"
[physics]
nu = 0.05
[boundary.inlet]
type = "inlet"
U = [1.0, 0.0, 0.0]
profile = "parabolic"
[boundary.outlet]
type = "outlet"
[boundary.walls]
type = "wall"
[boundary.front]
type = "empty"
[boundary.back]
type = "empty"
[solver]
algorithm = "simple"
residual_tol = 1e-6
gradient = "{gradient}"
n_nonorth_correctors = 1
"""


@pytest.mark.parametrize("gradient", ["least-squares", "gauss"])
def test_poiseuille_on_gmsh_triangle_prisms(tmp_path, gradient):
    """Unstructured triangles (Gmsh, 20 cells across, extruded into prisms): every cell in
    the second half of the channel within 1 % of the parabola at its own centre (measured
    0.65 % with least-squares gradients, 0.60 % with Gauss; 0.92 % over the whole channel)."""
    mesh = Path(__file__).parents[1] / "data" / "meshes" / "gmsh" / "channel_tri.msh"
    path = tmp_path / "tri.toml"
    path.write_text(TRI_CASE.format(mesh=mesh, gradient=gradient))
    case = load_case(path)
    from haloflow.mesh import from_case

    lm, s, _ = steady(from_case(case.mesh, []), case, f"triangle prisms, {gradient}")
    assert s.nonorth
    c = lm.geometry.cell_centres
    far = c[:, 0] > 1.0
    err = max_relative_error(c[far, 1], s.U[0, far], 0.0, 1.0, 1.0)
    assert err < 0.01, err


def test_simple_answer_does_not_depend_on_relaxation():
    """The relaxation-independent face flux (Majumdar's term): two relaxation factors reach
    the same converged field on a non-orthogonal mesh with a developing inlet."""
    common = ["boundary.left.profile=uniform", "solver.residual_tol=1e-8"]
    a, _, na = channel("checker", "simple", *common, "solver.relaxation.U=0.7")
    b, _, nb_ = channel("checker", "simple", *common, "solver.relaxation.U=0.5",
                        "solver.relaxation.p=0.2")
    assert nb_ > na  # really a different path to the answer
    du = np.abs(a.U - b.U).max() / np.abs(a.U).max()
    dphi = np.abs(a.phi - b.phi).max() / np.abs(a.phi).max()
    assert du < 1e-6 and dphi < 1e-6, (du, dphi)  # 1.4e-8 measured; 7.7e-3 without the term
