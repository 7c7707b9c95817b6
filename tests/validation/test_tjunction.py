"""The 3D T-junction (hot and cold water mixing, Boussinesq, mesh from a blockMeshDict):
converges, conserves mass and heat, and its bounded temperature schemes keep T between the
inlet temperatures where linear interpolation overshoots."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case


def solve(*overrides, iterations=None):
    """The T-junction's solver after ``iterations`` SIMPLE iterations, or to convergence."""
    case = load_case("tjunction", overrides)
    mesh = from_case(case.mesh, [])
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, MPI.COMM_SELF), MPI.COMM_SELF)
    for _ in range(iterations or case.solver.max_iterations):
        info = s.step()
        if iterations is None and info.residual < case.solver.residual_tol:
            break
    return s, lm, info


@pytest.mark.filterwarnings("ignore:.*went to 'walls'")
@pytest.mark.parametrize("scheme", ["van-leer", "limited-linear"])
def test_tjunction_bounded_between_the_inlet_temperatures(scheme):
    """Converged (van Leer, the default, in 78 iterations; limitedLinear in 148) with T in
    [0, 1] to 1e-6; the outlet carries the inflow (cold 1 x 1, hot 0.5 x 1: mean speeds times
    areas) and its mixed temperature 0.5 / 1.5, the heat that came in."""
    s, lm, info = solve(f"solver.convection_T={scheme}")
    assert info.residual < 1e-5 and s.time < 200
    T = s.energy.T[:lm.n_owned]
    assert np.isfinite(T).all() and T.min() > -1e-6 and T.max() < 1.0 + 1e-6, (
        T.min(), T.max())
    out = lm.patch("outlet")
    sl = slice(out.start, out.start + out.size)
    q = s.phi[sl].sum()
    assert q == pytest.approx(1.5, rel=1e-5)  # continuity to the pressure solves
    mixed = (s.energy.T[lm.owner[sl]] * s.phi[sl]).sum() / q
    assert mixed == pytest.approx(1.0 / 3.0, abs=1e-3)


@pytest.mark.filterwarnings("ignore:.*went to 'walls'")
def test_linear_temperature_overshoots_here():
    """What the limiters prevent: linear (central) T is 30 % above the hot inlet after 40
    iterations (and stays there)."""
    s, lm, _ = solve("solver.convection_T=linear", iterations=40)
    assert s.energy.T[:lm.n_owned].max() > 1.1
