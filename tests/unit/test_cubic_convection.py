"""Cubic convection (``solver.convection = "cubic"``): the deferred correction beyond linear
interpolation is the Hermite cubic through both cells' values and gradients, fourth order on
a uniform mesh with central-difference gradients, exact for cubics on any spacing; and a
periodic vortex converges as it does with linear interpolation."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.physics.schemes import cubic_source
from haloflow.run import run_case


def _face_values(x, u, g):
    """The face values a chain of cells ``x`` (values ``u``, gradients ``g``) convects with
    a unit flux: linear plus the cubic correction, read back out of the right-hand side
    (face ``f`` joins cells ``f`` and ``f + 1``; ``b[c] = s_(c-1) - s_c``)."""
    n = len(x)
    owner, neighbour = np.arange(n - 1), np.arange(1, n)
    xf = 0.5 * (x[:-1] + x[1:])
    w = (x[1:] - xf) / (x[1:] - x[:-1])  # the owner's weight
    d = np.zeros((n - 1, 3))
    d[:, 0] = x[1:] - x[:-1]
    U = np.zeros((3, n))
    U[0] = u
    grad = np.zeros((3, 3, n))
    grad[0, 0] = g
    b = np.zeros((3, n))
    cubic_source(owner, neighbour, w, np.ones(n - 1), d, U, grad, (0,), b)
    s = -np.cumsum(b[0])[:-1]
    return xf, w * u[:-1] + (1.0 - w) * u[1:] + s


def test_cubic_values_are_exact_for_a_cubic_on_any_spacing():
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.uniform(0.5, 2.0, 12))
    f = lambda t: 0.3 * t**3 - t**2 + 2.0 * t - 1.0  # noqa: E731
    xf, uf = _face_values(x, f(x), 0.9 * x**2 - 2.0 * x + 2.0)
    assert np.abs(uf - f(xf)).max() < 1e-10 * np.abs(f(xf)).max()


def test_cubic_face_values_are_fourth_order_with_central_gradients():
    errors = []
    for n in (32, 64):
        h = 1.0 / n
        x = (np.arange(n + 2) - 0.5) * h
        u = np.sin(2 * np.pi * x)
        g = np.gradient(u, h)  # central in the interior
        xf, uf = _face_values(x, u, g)
        inner = slice(1, -1)  # faces whose both cells have central gradients
        errors.append(np.abs(uf[inner] - np.sin(2 * np.pi * xf[inner])).max())
        lin = 0.5 * (u[:-1] + u[1:])
        errors.append(np.abs(lin[inner] - np.sin(2 * np.pi * xf[inner])).max())
    cubic_order = np.log2(errors[0] / errors[2])
    linear_order = np.log2(errors[1] / errors[3])
    assert cubic_order > 3.7 and 1.8 < linear_order < 2.2
    assert errors[2] < errors[3] / 50


def _taylor_green_errors(convection, n, tmp_path):
    case = load_case("taylor_green", [f"mesh.cells=[{n},{n},1]", "output.plots=false",
                                      f'solver.convection="{convection}"', "output.fields=false"])
    out = run_case(case, tmp_path / f"{convection}{n}", MPI.COMM_SELF, quiet=True)
    return out["taylor_green"]["u_l2_error"]


def test_periodic_vortex_converges_as_with_linear(tmp_path):
    """The 2D Taylor-Green vortex (BDF2, both directions periodic, so the correction crosses
    periodic pairs): second order in the velocity, as close to the exact vortex as linear."""
    lin = [_taylor_green_errors("linear", n, tmp_path) for n in (16, 32)]
    cub = [_taylor_green_errors("cubic", n, tmp_path) for n in (16, 32)]
    assert 3.6 < cub[0] / cub[1] < 4.8
    for a, b in zip(cub, lin, strict=True):
        assert abs(a / b - 1.0) < 0.1
