"""OpenFOAM's explicit laminar stress ``div(nu dev2(T(grad U)))`` (``solver.transpose_stress``,
``physics.schemes.transpose_stress_source``): against the continuum's ``nu/3 grad(div U)``
where that is exact, zero for a divergence-free field inside the domain, and the case key."""

from __future__ import annotations

import numpy as np
import pytest

from haloflow.case import CaseError, load_case
from haloflow.mesh.blocks import box
from haloflow.mesh.fv import face_coeffs
from haloflow.parallel.local import build_local
from haloflow.physics.patches import EMPTY, FIXED
from haloflow.physics.schemes import transpose_stress_source

NU = 0.01


def _squares(terms):
    """The velocity ``U_d = c x_e^2`` summed over ``terms`` (d, e, c), and its exact
    gradient ``[d, e] = dU_d / dx_e``, as functions of the points (n, 3)."""
    def field(x):
        U = np.zeros((3, len(x)))
        for d, e, c in terms:
            U[d] += c * x[:, e] ** 2
        return U

    def grad(x):
        g = np.zeros((3, 3, len(x)))
        for d, e, c in terms:
            g[d, e] += 2 * c * x[:, e]
        return g

    return field, grad


def _source(mesh, terms):
    """The term's cell integrals for the velocity of :func:`_squares` with its exact cell
    gradients, fixed boundary values on the x and y faces."""
    field, grad = _squares(terms)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    fcoef = face_coeffs(lm)
    g, ni = mesh.geom(), mesh.n_internal
    cc, fc, sf = g.cell_centres, g.face_centres, g.face_areas
    kind = np.where(np.abs(sf[ni:, 2]) > 0, EMPTY, FIXED).astype(np.int64)
    b = np.zeros((3, mesh.n_cells))
    transpose_stress_source(mesh.owner, mesh.neighbour, fcoef.weight, fcoef.gdiff, sf,
                            np.full(1, NU), kind, field(fc[ni:]), field(cc), grad(cc), (0, 1),
                            np.zeros((3, 3)), b)
    return b, g.cell_volumes


def test_a_quadratic_field_gives_a_third_of_nu_grad_div_u():
    """U = (x^2, 0): grad(div U) = (2, 0), and ``dev2(T(grad U))``'s divergence is
    ``grad(div U) - 2/3 grad(div U)``: ``nu 2/3`` per unit volume in x, exactly, in every
    cell whose faces are internal (linear face interpolation of an exact linear gradient)."""
    mesh = box((8, 6, 1), lengths=(1.0, 0.6, 0.1))
    b, vol = _source(mesh, [(0, 0, 1.0)])
    i, j = np.unravel_index(np.arange(mesh.n_cells), (8, 6, 1), order="F")[:2]
    inner = (i > 0) & (i < 7) & (j > 0) & (j < 5)
    assert np.abs(b[0, inner] / vol[inner] - NU * 2.0 / 3.0).max() < 1e-12
    assert np.abs(b[1, inner]).max() < 1e-14


def test_a_divergence_free_field_feels_nothing():
    """U = (y^2, x^2) has div U = 0 everywhere: the term vanishes to round-off in every
    cell, the walls' too (each component's normal derivative there comes from the boundary
    value, and this field's components do not vary along their own wall normals)."""
    mesh = box((7, 7, 1), lengths=(1.0, 1.0, 0.1))
    b, _ = _source(mesh, [(0, 1, 1.0), (1, 0, 1.0)])
    assert np.abs(b[:2]).max() < 1e-15


def test_the_walls_take_the_normal_derivative_from_the_boundary_value():
    """U = (0, y^2) on a box: inside, ``nu/3 grad(div U) = (0, nu 2/3)``; on the bottom wall
    the face's gradient has its normal part from ``(U_b - U_P) / (n . (x_f - x_P))``, as
    OpenFOAM's Gauss gradient corrects its boundary values: ``d(U_y)/dy = y_P`` there
    instead of the exact 0."""
    mesh = box((4, 4, 1), lengths=(1.0, 1.0, 0.1))
    b, vol = _source(mesh, [(1, 1, 1.0)])
    i, j = np.unravel_index(np.arange(mesh.n_cells), (4, 4, 1), order="F")[:2]
    inside = (j > 0) & (j < 3)
    assert np.abs(b[1, inside] / vol[inside] - NU * 2.0 / 3.0).max() < 1e-12  # nu/3 2
    # bottom row: the wall face's gradient d(U_y)/dy = (0 - y_P^2) / (0 - y_P) = y_P = 1/8
    # instead of 0; its face adds nu (S_y g_yy - 2/3 g_yy S_y) = nu/3 g_yy S_y, S_y = -0.1 dx
    dx, yp = 0.25, 0.125
    face = NU / 3.0 * yp * (-0.1 * dx)
    inner_face = NU / 3.0 * (2 * 0.25) * (0.1 * dx)  # the top face, linear interpolation
    assert np.allclose(b[1, j == 0], face + inner_face, rtol=1e-12, atol=0)


@pytest.mark.parametrize("override, message", [
    (["physics.model=\"les\"", "solver.transpose_stress=true"],
     "solver.transpose_stress: needs laminar flow"),
])
def test_case_errors(override, message):
    with pytest.raises(CaseError) as e:
        load_case("channel", override)
    assert message in str(e.value) and "\n" not in str(e.value)
