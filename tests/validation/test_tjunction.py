"""The 3D T-junction (hot and cold water mixing, Boussinesq, mesh from a blockMeshDict):
runs serial and on 2 ranks to the same answer, and mixes between its inlet temperatures."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case


@pytest.mark.filterwarnings("ignore:.*went to 'walls'")
def test_tjunction_mixes_within_the_inlet_temperatures():
    case = load_case("tjunction")
    mesh = from_case(case.mesh, [])
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, MPI.COMM_SELF), MPI.COMM_SELF)
    for _ in range(40):
        info = s.step()
    T = s.energy.T
    assert np.isfinite(T).all() and T.min() > -0.02 and T.max() < 1.02
    assert info.residual < 0.05
    # the outlet carries the inflow: cold 1 x 1, hot 0.5 x 1 (mean speeds times areas)
    out = lm.patch("outlet")
    q = s.phi[out.start:out.start + out.size].sum()
    assert q == pytest.approx(1.5, rel=1e-5)  # continuity to the pressure solves
    hot = s.energy.T[lm.owner[out.start:out.start + out.size]]
    assert 0.05 < (hot * s.phi[out.start:out.start + out.size]).sum() / q < 0.6
