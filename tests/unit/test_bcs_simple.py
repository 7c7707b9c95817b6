"""Inflow/outflow boundary conditions, gradients on distorted meshes, SIMPLE settings, errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import CaseError, load_case
from haloflow.mesh.blocks import box
from haloflow.mesh.fv import face_coeffs
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case
from haloflow.physics.bcs import build_boundary, velocity_boundary_values
from haloflow.physics.patches import EMPTY, FIXED, SYMMETRY, ZERO_GRADIENT
from haloflow.physics.schemes import Gradient
from haloflow.physics.simple import SimpleSolver

SELF = MPI.COMM_SELF


def _local(mesh):
    return build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)


def _spec(**types):
    """Box patches: walls unless named; front/back empty (2D) unless given."""
    out = {p: SimpleNamespace(type="wall", U=(0.0, 0.0, 0.0), p=None)
           for p in ("left", "right", "bottom", "top")}
    out |= {p: SimpleNamespace(type="empty", U=None, p=None) for p in ("front", "back")}
    out |= types
    return out


def _inlet(U, profile="parabolic"):
    return SimpleNamespace(type="inlet", U=U, p=None, profile=profile)


def _faces(lm, name):
    p = lm.patch(name)
    return slice(p.start - lm.n_internal, p.start - lm.n_internal + p.size), p


def perturb(mesh, cells, frac=0.2, seed=3):
    """Move the points off the boundary by up to ``frac`` of the spacing in x and y, the same
    for every z layer (the mesh stays a valid one-cell-thick 2D mesh)."""
    nx, ny, nz = cells
    P = mesh.points.reshape(nz + 1, ny + 1, nx + 1, 3)
    hx, hy = np.diff(P[0, 0, :, 0]).min(), np.diff(P[0, :, 0, 1]).min()
    d = np.random.default_rng(seed).uniform(-frac, frac, (ny + 1, nx + 1, 2)) * [hx, hy]
    d[[0, -1]] = 0.0
    d[:, [0, -1]] = 0.0
    P[..., :2] += d[None]
    mesh.geometry = None
    return mesh


# -- inlet profiles ----------------------------------------------------------------------------

def test_parabolic_inlet_carries_the_mean_velocity():
    """Face-averaged parabola: the flow rate is exactly U times the area, the peak 1.5 U."""
    lm = _local(box((3, 20, 1), (1.0, 2.0, 0.1), (0.0, -1.0, 0.0)))
    bc = build_boundary(lm, _spec(left=_inlet((2.0, 0.0, 0.0))))
    sl, p = _faces(lm, "left")
    u = bc.u_value[sl]
    sf = lm.geometry.face_areas[p.start:p.start + p.size]
    assert np.all(bc.u_kind[sl] == FIXED) and np.all(bc.p_kind[sl] == ZERO_GRADIENT)
    assert -np.einsum("ij,ij->", u, sf) / np.abs(sf[:, 0]).sum() == pytest.approx(2.0, 1e-13)
    y = lm.geometry.face_centres[p.start:p.start + p.size, 1]
    exact = 3.0 * (1.0 - y**2)  # 1.5 U (1 - eta^2), eta = y on [-1, 1]
    assert np.abs(u[:, 0] - exact).max() < 3.0 * 0.1**2 / 3 + 1e-12  # face average vs centre
    assert u[:, 0].max() == pytest.approx(3.0 * (1.0 - 0.1**2 / 3))  # the mean over [0, 0.1]
    assert np.all(u[:, 1:] == 0.0)


def test_uniform_inlet_and_the_other_types():
    lm = _local(box((4, 4, 1)))
    spec = _spec(left=_inlet((1.0, 0.5, 0.0), "uniform"),
                 right=SimpleNamespace(type="outlet", U=None, p=2.0),
                 top=SimpleNamespace(type="symmetry", U=None, p=None),
                 bottom=SimpleNamespace(type="slip", U=None, p=None))
    bc = build_boundary(lm, spec)
    kinds = {}
    for name in ("left", "right", "top", "bottom", "front"):
        sl, _ = _faces(lm, name)
        kinds[name] = (set(bc.u_kind[sl]), set(bc.p_kind[sl]))
    assert kinds["left"] == ({FIXED}, {ZERO_GRADIENT})
    assert kinds["right"] == ({ZERO_GRADIENT}, {FIXED})
    assert kinds["top"] == kinds["bottom"] == ({SYMMETRY}, {ZERO_GRADIENT})
    assert kinds["front"] == ({EMPTY}, {EMPTY})
    assert np.all(bc.u_value[_faces(lm, "left")[0]] == [1.0, 0.5, 0.0])
    assert np.all(bc.p_value[_faces(lm, "right")[0]] == 2.0)


def test_parabolic_inlet_on_a_slanted_patch():
    """A sheared inlet: the profile runs along the patch, its coordinate scaled to [-1, 1]."""
    m = box((3, 10, 1))
    m.points[:, 0] += 0.3 * m.points[:, 1]
    m.geometry = None
    lm = _local(m)
    bc = build_boundary(lm, _spec(left=_inlet((1.0, 0.0, 0.0))))
    sl, p = _faces(lm, "left")
    sf = lm.geometry.face_areas[p.start:p.start + p.size]
    y = lm.geometry.face_centres[p.start:p.start + p.size, 1]
    assert -np.einsum("ij,ij->", bc.u_value[sl], sf) == pytest.approx(1.0 * 1.0 * 1.0, 1e-13)
    exact = 1.5 * (1.0 - (2.0 * y - 1.0) ** 2)
    assert np.abs(bc.u_value[sl, 0] - exact).max() < 1.5 * 4 * 0.1**2 / 12 + 1e-12


def test_duct_inlet_is_the_product_of_two_parabolas():
    """3D (no empty patches): both tangential directions, mean 1, peak (1.5)^2 U."""
    lm = _local(box((2, 8, 6), (1.0, 1.0, 0.5)))
    spec = _spec(left=_inlet((1.0, 0.0, 0.0)),
                 front=SimpleNamespace(type="wall", U=(0.0, 0.0, 0.0), p=None),
                 back=SimpleNamespace(type="wall", U=(0.0, 0.0, 0.0), p=None))
    bc = build_boundary(lm, spec)
    sl, p = _faces(lm, "left")
    area = np.abs(lm.geometry.face_areas[p.start:p.start + p.size, 0])
    u = bc.u_value[sl, 0]
    assert (u * area).sum() / area.sum() == pytest.approx(1.0, 1e-13)
    assert 2.0 < u.max() < 2.25
    fc = lm.geometry.face_centres[p.start:p.start + p.size]
    corner = np.argmin(fc[:, 1] + fc[:, 2])
    assert u[corner] < 0.3


def test_symmetry_face_value_drops_the_normal_part():
    lm = _local(box((2, 2, 1)))
    bc = build_boundary(lm, _spec(top=SimpleNamespace(type="symmetry", U=None, p=None)))
    U = np.zeros((3, lm.n_cells))
    U[:] = np.array([[1.0], [2.0], [0.0]])
    nb = lm.n_faces - lm.n_internal
    ub = np.zeros((3, nb))
    velocity_boundary_values(lm.owner, lm.geometry.face_areas, bc.u_kind, bc.u_value, U,
                             lm.n_internal, ub)
    top, _ = _faces(lm, "top")
    left, _ = _faces(lm, "left")
    assert np.allclose(ub[:, top].T, [1.0, 0.0, 0.0])  # v (normal) removed
    assert np.all(ub[:, left] == 0.0)  # wall


# -- gradients and non-orthogonality -----------------------------------------------------------

def _linear_gradient_error(scheme, mesh):
    lm = _local(mesh)
    fc = face_coeffs(lm)
    empty = np.zeros(lm.n_faces - lm.n_internal, dtype=bool)
    for p in lm.patches:
        if p.name in ("front", "back"):
            empty[p.start - lm.n_internal:p.start - lm.n_internal + p.size] = True
    grad = Gradient(lm, fc, scheme, empty, [0, 1])
    a = np.array([0.7, -1.3, 0.0])
    phi = lm.geometry.cell_centres @ a + 0.4
    kind = np.where(empty, EMPTY, FIXED).astype(np.int64)
    value = lm.geometry.face_centres[lm.n_internal:] @ a + 0.4
    out = np.zeros((3, lm.n_cells))
    grad(phi, kind, value, out)
    return np.abs(out[:, :lm.n_owned].T - a).max(), fc


def test_least_squares_gradient_is_exact_for_linear_fields_on_distorted_meshes():
    err, fc = _linear_gradient_error("least-squares", perturb(box((12, 10, 1)), (12, 10, 1)))
    assert err < 1e-11 and fc.nonorthogonal
    err, _ = _linear_gradient_error("gauss", perturb(box((12, 10, 1)), (12, 10, 1)))
    assert err > 1e-3  # Gauss with linear interpolation is not, on skewed cells
    err, fc = _linear_gradient_error("gauss", box((6, 5, 1), grading=(3.0, 0.5, 1.0)))
    assert err < 1e-12 and not fc.nonorthogonal  # graded boxes are orthogonal


# -- solver settings ---------------------------------------------------------------------------

def test_simple_case_needs_no_time_step():
    case = load_case("channel", ["mesh.cells=[8,4,1]"])
    assert case.solver.algorithm == "simple"
    case = load_case("cavity", ["solver.algorithm=simple"])
    assert case.solver.relaxation.U == 0.7 and case.solver.relaxation.p == 0.3
    text = case.to_toml()
    assert "[solver.relaxation]" in text
    lm = _local(box((6, 6, 1)))
    s = solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)
    assert isinstance(s, SimpleSolver) and s.algorithm == "simple" and s.n_corr == 1
    infos = [s.step() for _ in range(3)]
    assert s.time == 3.0 and all(i.continuity < 1e-8 for i in infos)
    assert infos[-1].residual < infos[0].residual


def test_piso_nonorthogonal_switches():
    case = load_case("channel", ["mesh.cells=[8,4,1]", "solver.algorithm=piso",
                                 "boundary.left.profile=parabolic"])
    lm = _local(box((8, 4, 1), (2.0, 1.0, 1.0)))
    s = solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)
    assert not s.nonorth and s.gradU is None  # a box: no extra work
    lm = _local(perturb(box((8, 4, 1), (2.0, 1.0, 1.0)), (8, 4, 1)))
    s = solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)
    assert s.nonorth and s.gradU is not None
    for _ in range(3):
        assert s.step().continuity < 1e-8
    case = load_case("channel", ["solver.algorithm=piso", "solver.laplacian=uncorrected"])
    assert not solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF).nonorth


# -- case errors -------------------------------------------------------------------------------

def _error(overrides, source="channel"):
    with pytest.raises(CaseError) as info:
        load_case(source, overrides)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("override, expected", [
    ("boundary.left.profile=cubic",
     'boundary.left.profile: expected "uniform", "parabolic" or "table", got "cubic"'),
    ("boundary.top.profile=parabolic",
     'boundary.top.profile: not allowed for a patch of type "wall" (only inlet patches take'),
    ("boundary.top.type=mirror", 'boundary.top.type: expected "wall", "inlet", "outlet", '
                                 '"symmetry", "slip" or "empty", got "mirror"'),
    ("solver.algorithm=simplec", 'solver.algorithm: expected "piso" or "simple", got "simplec"'),
    ("solver.relaxation.U=0", "solver.relaxation.U: expected a number from 1e-06 to 1, got 0"),
    ("solver.relaxation.p=1.5",
         "solver.relaxation.p: expected a number from 1e-06 to 1, got 1.5"),
    ("solver.gradient=green", 'solver.gradient: expected "gauss" or "least-squares"'),
    ("solver.laplacian=limited", 'expected "corrected" or "uncorrected", got "limited"'),
    ("solver.residual_tol=-1",
     "solver.residual_tol: expected a number >= 0, at most 1e+30, got -1"),
    ("solver.n_nonorth_correctors=-1", "expected an integer from 0 to 100, got -1"),
    ("postprocess.channel_x=0", "postprocess.channel_x: expected a number in (0, 1]"),
])
def test_case_errors_are_one_line(override, expected):
    msg = _error([override])
    assert msg.startswith(f"--set {override}: ") and expected in msg, msg


def test_channel_postprocessing_needs_one_inlet():
    msg = _error(["boundary.bottom.type=inlet", "boundary.bottom.U=[0,1,0]"])
    assert "postprocess.channel: needs exactly one inlet patch (its U is the mean velocity), " \
           "found 2" in msg


def test_simplec_needs_momentum_relaxation():
    msg = _error(["solver.consistent=true", "solver.relaxation.U=1"])
    assert "solver.relaxation.U: must be below 1 with consistent = true" in msg


def test_piso_still_needs_a_time_step(tmp_path):
    text = (load_case("channel").source.read_text().replace("dt = 0.1", "")
            .replace('algorithm = "simple"', 'algorithm = "piso"'))
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(CaseError, match="solver.dt: required key missing"):
        load_case(path)
    path.write_text(text.replace('algorithm = "piso"', 'algorithm = "simple"'))
    assert load_case(path).solver.dt is None


def test_empty_patches_last_are_left_out_of_the_face_loops():
    """A 2D box lists its empty front and back last: the kernels' faces end before them."""
    lm = _local(box((6, 4, 1)))
    bc = build_boundary(lm, _spec(left=_inlet((1.0, 0.0, 0.0)),
                                  right=SimpleNamespace(type="outlet", U=None, p=0.0)))
    owner = bc.visited_owner(lm)
    live = int((bc.u_kind != EMPTY).sum())
    assert live == 2 * (6 + 4) and len(owner) == lm.n_internal + live
    assert np.shares_memory(owner, lm.owner)
    bc.u_kind[-1] = FIXED  # a face that is not empty after them: every face is visited
    assert len(bc.visited_owner(lm)) == lm.n_faces


@pytest.mark.parametrize("case, sets", [
    ("channel", ["mesh.cells=[12,6,1]"]),
    ("channel", ["mesh.cells=[12,6,1]", "solver.algorithm=piso", "solver.dt=0.05",
                 "solver.convection=linear-upwind", "solver.gradient=least-squares"]),
    ("cavity", ["mesh.cells=[8,8,1]", "solver.algorithm=simple"])])
def test_leaving_empty_faces_out_changes_no_bit(case, sets, monkeypatch):
    """Every kernel that ends before the empty faces gives what it gave visiting them all."""
    def run():
        c = load_case(case, sets)
        lm = _local(box(tuple(c.mesh.cells), tuple(c.mesh.lengths)))
        s = solver_from_case(lm, c, halo.make("packed", lm, SELF), SELF)
        for _ in range(6):
            s.step()
        return s

    a = run()
    with monkeypatch.context() as mp:
        from haloflow.physics import bcs, schemes

        def every_face(lm, empty=None):
            return lm.owner

        mp.setattr(bcs, "visited_owner", every_face)
        mp.setattr(schemes, "visited_owner", every_face)
        b = run()
    assert len(a.momentum.owner) < len(b.momentum.owner) == a.lm.n_faces
    assert np.array_equal(a.U, b.U) and np.array_equal(a.p, b.p)
    assert np.array_equal(a.phi, b.phi)
