"""Initial conditions (``[initial]``): at rest, a uniform velocity, or Taylor-Green vortices
(2D, or the 3D vortex that turns turbulent).

The Taylor-Green vortices are an exact solution of the 2D Navier-Stokes equations in a
square periodic box of side ``L`` (wavenumber ``k = 2 pi / L``), decaying as
``exp(-2 nu k^2 t)`` (pressure as its square); the nonlinear term is balanced by the
pressure gradient alone, so errors come from the discretisation only.
"""

from __future__ import annotations

import math

import numpy as np


def taylor_green(x, y, t, amplitude, length, nu, origin=(0.0, 0.0)):
    """Velocity ``(u, v)`` and pressure of the decaying vortices at points ``x, y``."""
    k = 2.0 * math.pi / length
    decay = math.exp(-2.0 * nu * k * k * t)
    X, Y = k * (np.asarray(x) - origin[0]), k * (np.asarray(y) - origin[1])
    u = -amplitude * np.cos(X) * np.sin(Y) * decay
    v = amplitude * np.sin(X) * np.cos(Y) * decay
    p = -0.25 * amplitude**2 * (np.cos(2.0 * X) + np.cos(2.0 * Y)) * decay**2
    return u, v, p


def taylor_green_3d(x, y, z, amplitude, length, origin=(0.0, 0.0, 0.0)):
    """Velocity ``(u, v, w)`` and pressure of the 3D Taylor-Green vortex at t = 0 in a cube of
    side ``length = 2 pi L`` (the high-order workshop's case C3.5, its box ``[-pi L, pi L]^3``
    placed at ``origin``): ``u = V0 sin(x/L) cos(y/L) cos(z/L)``, ``v = -V0 cos sin cos``,
    ``w = 0``, ``p = V0^2/16 (cos(2x/L) + cos(2y/L)) (cos(2z/L) + 2)``."""
    L = length / (2.0 * math.pi)
    X, Y, Z = ((np.asarray(c) - o) / L - math.pi for c, o in zip((x, y, z), origin,
                                                                 strict=True))
    u = amplitude * np.sin(X) * np.cos(Y) * np.cos(Z)
    v = -amplitude * np.cos(X) * np.sin(Y) * np.cos(Z)
    p = amplitude**2 / 16.0 * (np.cos(2.0 * X) + np.cos(2.0 * Y)) * (np.cos(2.0 * Z) + 2.0)
    return u, v, np.zeros_like(u), p


def initial_fields(initial, mesh, nu: float,
                   centres: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``U[3, n]`` and ``p[n]`` at the cell ``centres`` at t = 0 from the ``[initial]`` table
    (``mesh``: the ``[mesh]`` table, whose box the Taylor-Green vortices fill); None for a
    flow at rest."""
    n = len(centres)
    if initial.type == "rest":
        return None
    U, p = np.zeros((3, n)), np.zeros(n)
    if initial.type == "uniform":
        U[:] = np.asarray(initial.U, dtype=float)[:, None]
    elif initial.type == "taylor_green_3d":  # the validator made the mesh a cube
        c = centres
        U[0], U[1], U[2], p[:] = taylor_green_3d(c[:, 0], c[:, 1], c[:, 2], initial.amplitude,
                                                 mesh.lengths[0], mesh.origin)
    else:  # taylor_green: the validator made the mesh a square box
        U[0], U[1], p[:] = taylor_green(centres[:, 0], centres[:, 1], 0.0, initial.amplitude,
                                        mesh.lengths[0], nu, mesh.origin[:2])
    return U, p
