"""The cylinder mesh generator and the DFG benchmark's force, dp, L_a and St evaluation."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import CaseError, load_case
from haloflow.mesh import from_case, quality
from haloflow.mesh.cylinder import CYLINDER_PATCHES, cylinder, spaced
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer
from haloflow.physics.bcs import build_boundary
from haloflow.post.cylinder import Cylinder, periodic, recirculation_length, reference

L, H, R, T = 2.2, 0.41, 0.05, 0.1


def polygon_area(n):
    """The cylinder as the mesh sees it: a regular n-gon inscribed in the circle."""
    return 0.5 * n * R * R * math.sin(2 * math.pi / n)


@pytest.fixture(scope="module")
def mesh32():
    return cylinder(32)


def test_mesh_is_closed_and_valid(mesh32):
    m = mesh32
    m.check_topology()
    assert [p.name for p in m.patches] == list(CYLINDER_PATCHES)
    assert [p.kind for p in m.patches] == ["patch", "patch", "wall", "wall", "empty", "empty"]
    g = m.geom()
    s = np.zeros((m.n_cells, 3))
    np.add.at(s, m.owner, g.face_areas)
    np.add.at(s, m.neighbour, -g.face_areas[: m.n_internal])
    assert np.abs(s).max() < 1e-15
    assert g.cell_volumes.min() > 0
    assert len(np.unique(m.face_nodes)) == len(m.points)  # every point used
    own, nbr = m.owner[: m.n_internal], m.neighbour
    assert np.all(np.diff(own) >= 0) and np.all((np.diff(own) > 0) | (np.diff(nbr) > 0))
    rep = quality.check(m)
    assert not rep.problems, rep.problems
    assert rep.problems == [] and "Mesh OK." in "\n".join(rep.lines())


def test_volume_and_patch_areas(mesh32):
    g = mesh32.geom()
    # straight faces: exactly the channel less the inscribed 32-gon
    assert g.cell_volumes.sum() == pytest.approx((L * H - polygon_area(32)) * T, rel=1e-12)
    area = {p.name: g.face_areas[p.start:p.start + p.size] for p in mesh32.patches}
    assert area["inlet"].sum(0) == pytest.approx([-H * T, 0, 0])
    assert area["outlet"].sum(0) == pytest.approx([H * T, 0, 0])
    assert np.abs(area["walls"].sum(0)).max() < 1e-14  # top and bottom cancel
    assert np.linalg.norm(area["walls"], axis=1).sum() == pytest.approx(2 * L * T)
    # the cylinder: a closed polygon (area vectors into the cylinder, out of the fluid)
    assert np.abs(area["cylinder"].sum(0)).max() < 1e-15
    perim = 32 * 2 * R * math.sin(math.pi / 32)
    assert np.linalg.norm(area["cylinder"], axis=1).sum() == pytest.approx(perim * T, rel=1e-12)
    fc = g.face_centres[mesh32.patch("cylinder").start:][:32]
    inward = np.einsum("ij,ij->i", area["cylinder"], fc - [0.2, 0.2, 0.05])
    assert np.all(inward < 0)
    assert area["front"].sum(0) == pytest.approx([0, 0, -(L * H - polygon_area(32))])


def test_refinement_family():
    """cells_around x 1.375..1.45 doubles the cells; the volume error falls like the polygon's."""
    cells, errs = [], []
    for n in (64, 88, 128):
        m = cylinder(n)
        cells.append(m.n_cells)
        errs.append(abs(m.geom().cell_volumes.sum() / ((L * H - math.pi * R * R) * T) - 1))
    assert 1.6 < cells[1] / cells[0] < 2.4 and 1.6 < cells[2] / cells[1] < 2.4, cells
    assert errs[0] > errs[1] > errs[2] and errs[2] < 1e-5, errs


def test_spacing_grows_smoothly():
    d = spaced(1.9, 0.006)
    s = np.diff(d)
    assert d[0] == 0 and d[-1] == 1.9
    assert s[0] == pytest.approx(0.006, rel=0.05)
    assert np.all(s[1:] / s[:-1] < 1.07) and np.all(s[1:] / s[:-1] > 0.999)
    assert s.max() == pytest.approx(5 * 0.006, rel=0.05)


def test_wake_refinement_puts_more_rays_behind_the_cylinder():
    """w = 3 on 32 cells around: the downstream quarter has 24 of the cylinder's 48 faces
    (the others 8 each), the wake's 16 extra lines reach the outlet, and the mesh stays
    closed and valid; its volume is the channel less that polygon, exactly."""
    m = cylinder(32, wake_refinement=3)
    m.check_topology()
    rep = quality.check(m)
    assert not rep.problems, rep.problems
    g = m.geom()
    p = m.patch("cylinder")
    fc = g.face_centres[p.start:p.start + p.size]
    behind = np.abs(np.arctan2(fc[:, 1] - 0.2, fc[:, 0] - 0.2)) < 0.25 * math.pi
    assert p.size == 48 and behind.sum() == 24
    polygon = 24 * 0.5 * R * R * (math.sin(math.pi / 48) + math.sin(math.pi / 16))
    assert g.cell_volumes.sum() == pytest.approx((L * H - polygon) * T, rel=1e-12)
    assert m.patch("outlet").size == cylinder(32).patch("outlet").size + 16
    # the wake block's first column behind the square: 24 cells across, not 8
    for w, across in ((1, 8), (3, 24)):
        c = cylinder(32, wake_refinement=w).geom().cell_centres
        wake = c[(c[:, 0] > 0.3) & (np.abs(c[:, 1] - 0.2) < 0.1)]
        assert np.sum(np.isclose(wake[:, 0], wake[:, 0].min())) == across, w


@pytest.mark.parametrize("w", [0, 1.5])
def test_bad_wake_refinement(w):
    with pytest.raises(ValueError, match="wake_refinement must be a positive integer"):
        cylinder(32, wake_refinement=w)


@pytest.mark.parametrize("n", [30, 4])
def test_bad_cells_around(n):
    with pytest.raises(ValueError, match="multiple of 4"):
        cylinder(n)


@pytest.mark.parametrize("override, message", [
    ("mesh.cells_around=66", "mesh.cells_around: expected a multiple of 4"),
    ("mesh.cells_around=4", "mesh.cells_around: expected an integer from 8 to 1048576"),
    ("mesh.grading=0", "mesh.grading: expected a positive number"),
    ("mesh.wake_refinement=0", "mesh.wake_refinement: expected an integer from 1 to 8"),
    ("mesh.cells=[4,4,1]", 'mesh.cells: not a key of a mesh of type "cylinder"'),
    ("boundary.inlet.type=wall", "boundary.inlet.profile: not allowed"),
    ("boundary.left.type=wall", "boundary.left: the mesh has no patch 'left'"),
])
def test_case_errors(override, message):
    with pytest.raises(CaseError) as e:
        load_case("cylinder", [override])
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_postprocess_needs_the_cylinder_mesh():
    with pytest.raises(CaseError, match='postprocess.cylinder: needs mesh.type = "cylinder"'):
        load_case("channel", ["postprocess.cylinder=true"])


def test_builtin_cases_build():
    for name, re in (("cylinder", 20.0), ("cylinder_re100", 100.0)):
        case = load_case(name)
        assert case.mesh.type == "cylinder" and case.postprocess.cylinder
        u = case.boundary["inlet"].U[0]
        assert u * 0.1 / case.physics.nu == pytest.approx(re)
    assert (from_case(load_case("cylinder").mesh).n_cells
            == cylinder(128, wake_refinement=2).n_cells == 24588)


# -- forces on known fields --------------------------------------------------------------------

@pytest.fixture(scope="module")
def monitor32():
    case = load_case("cylinder", ["mesh.cells_around=32", "mesh.wake_refinement=1"])
    mesh = from_case(case.mesh)
    lm = build_local(mesh, np.zeros(mesh.n_cells, np.int64), 0)
    comm = MPI.COMM_SELF
    red = Reducer(comm)
    solver = SimpleNamespace(red=red, bc=build_boundary(lm, case.boundary, red),
                             algorithm="simple", time=0.0, U=np.zeros((3, lm.n_cells)),
                             p=np.zeros(lm.n_cells))
    return Cylinder(lm, case, solver, solver.red), solver, lm


def forces(mon, solver, p, U=None):
    solver.p[:] = p
    solver.U[:] = 0.0 if U is None else U
    mon.series.clear()
    mon.sample(solver)
    t, fx, fy, dp, fpx, fpy, fvx, fvy, fx_cell = mon.series[-1]
    return fx, fy, dp, fvx, fvy, fx_cell


def test_uniform_pressure_gives_no_force(monitor32):
    mon, solver, lm = monitor32
    fx, fy, dp, *_ = forces(mon, solver, np.full(lm.n_cells, 3.0))
    assert abs(fx) < 1e-15 and abs(fy) < 1e-15 and abs(dp) < 1e-13


def test_linear_pressure_gives_buoyancy_like_force(monitor32):
    """p = a x + b y pushes the cylinder down the gradient: F = -grad p x (volume of the
    polygon), exact with the extrapolated wall pressure; dp = p(front) - p(back) = -0.1 a."""
    mon, solver, lm = monitor32
    x, y = lm.geometry.cell_centres[:, 0], lm.geometry.cell_centres[:, 1]
    a, b = 2.0, -0.5
    fx, fy, dp, fvx, fvy, fx_cell = forces(mon, solver, a * x + b * y)
    vol = polygon_area(32) * T
    assert fx == pytest.approx(-a * vol, rel=1e-10)
    assert fy == pytest.approx(-b * vol, rel=1e-10)
    assert dp == pytest.approx(-0.1 * a, rel=1e-10)
    assert fvx == 0.0 and fvy == 0.0
    # the wall cells' own values are a first-order estimate: visibly off
    assert abs(fx_cell / (-a * vol) - 1) > 0.01  # 3 % on this 32-cell ring


def test_viscous_force_is_the_wall_shear(monitor32):
    """A uniform stream past the wall cells drags the cylinder downstream with the wall
    shear nu u_t / d_n; the O-grid is symmetric about y = 0.2, so no lift."""
    mon, solver, lm = monitor32
    u0 = 0.3
    U = np.zeros((3, lm.n_cells))
    U[0] = u0
    fx, fy, dp, fvx, fvy, _ = forces(mon, solver, np.zeros(lm.n_cells), U)
    p = lm.patch("cylinder")
    sf = lm.geometry.face_areas[p.start:p.start + p.size]
    d = lm.geometry.face_centres[p.start:p.start + p.size] - \
        lm.geometry.cell_centres[lm.owner[p.start:p.start + p.size]]
    mag = np.linalg.norm(sf, axis=1)
    nx = sf[:, 0] / mag
    dn = np.abs(np.einsum("ij,ij->i", d, sf)) / mag
    expect = 1e-3 * u0 * np.sum(mag * (1 - nx * nx) / dn)
    assert fx == fvx and fvx > 0
    assert fvx == pytest.approx(expect, rel=1e-12)
    assert abs(fvy) < 1e-12 * fvx


# -- L_a and the periodic analysis -------------------------------------------------------------

def test_recirculation_length_of_a_linear_wake():
    X, Y = np.meshgrid(np.linspace(0.26, 1.5, 200), np.linspace(0.1, 0.3, 21))
    cc = np.column_stack([X.ravel(), Y.ravel()])
    uc = np.column_stack([X.ravel() - 0.25 - 0.0847, np.zeros(X.size)])
    assert recirculation_length(cc, uc, None, None) == pytest.approx(0.0847, abs=1e-9)
    assert recirculation_length(cc, np.abs(uc), None, None) is None


def test_strouhal_and_maxima_of_a_periodic_signal():
    f, D, U = 3.0, 0.1, 1.0
    t = np.arange(0.0, 4.0, 1e-3)
    cl = 0.9 * np.sin(2 * np.pi * f * t) + 0.02
    cd = 3.2 + 0.01 * np.sin(4 * np.pi * f * t)
    dp = 2.5 + 0.1 * np.cos(2 * np.pi * f * t)  # at t0 + T/2 (phase 3 pi / 2): 2.5
    out = periodic(t, cd, cl, dp, D, U)
    assert out["st"] == pytest.approx(D * f / U, rel=1e-6)
    assert out["periods"] == 6
    assert out["cl_max"] == pytest.approx(0.92, abs=1e-5)
    assert out["cd_max"] == pytest.approx(3.21, abs=1e-5)
    assert out["dp_half_period"] == pytest.approx(2.5, abs=1e-3)
    short = t < 2.5 / f  # two periods only: no Strouhal number
    assert periodic(t[short], cd[short], cl[short], dp[short], D, U)["st"] is None
    assert periodic(t, cd, np.full(len(t), 0.1), dp, D, U)["st"] is None


def test_reference_ranges():
    assert reference(20.0)["cd"] == [5.57, 5.59]
    assert reference(100.0)["st"] == [0.295, 0.305]
    assert reference(50.0) is None
