"""The PISO solver in one process: conservation, steadiness, divergence handling."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh.blocks import box
from haloflow.mpiutil import fail_fast
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import DivergenceError, solver_from_case
from haloflow.run import DivergedError


def _solver(n=12, *overrides):
    case = load_case("cavity", [f"mesh.cells=[{n},{n},1]", *overrides])
    m = box(case.mesh.cells, case.mesh.lengths)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    comm = MPI.COMM_SELF
    return solver_from_case(lm, case, halo.make("packed", lm, comm), comm)


def test_fluxes_are_divergence_free_and_walls_impermeable():
    """After every step each cell's net outflow is at the pressure solver's tolerance."""
    s = _solver(12)
    for _ in range(5):
        info = s.step()
        assert info.continuity < 1e-9
    lm = s.lm
    div = np.zeros(lm.n_cells)
    np.add.at(div, lm.owner, s.phi)
    np.add.at(div, lm.neighbour, -s.phi[: lm.n_internal])
    assert np.abs(div).max() < 1e-8 * np.abs(s.phi).max()
    assert np.all(s.phi[lm.n_internal:] == 0.0)  # walls and empty faces carry no flux


def test_2d_case_solves_two_components_and_keeps_w_zero():
    s = _solver(8)
    assert list(s.comps) == [0, 1]
    s.step()
    assert np.all(s.U[2] == 0.0)
    assert np.abs(s.U[0]).max() > 0.01


def test_steady_measure_decays_to_tolerance():
    """The relative change per unit time falls monotonically once the flow has developed."""
    s = _solver(10, "solver.dt=0.1")
    changes = [s.step().change for _ in range(120)]
    assert changes[-1] < 1e-3
    assert all(b < a for a, b in zip(changes[40:], changes[41:], strict=False))


def test_blow_up_raises_divergence_error():
    """Speeds far beyond a thousand times the lid speed, or NaN, stop the run."""
    s = _solver(8)
    s.step()
    s.U[0, :] = 1e6
    with pytest.raises(DivergenceError, match="diverged"):
        s.step()
    s = _solver(8)
    s.U[1, 3] = np.nan
    with pytest.raises(DivergenceError):
        s.step()


def test_divergence_exits_with_code_3(capsys):
    with pytest.raises(SystemExit) as e, fail_fast(MPI.COMM_WORLD, (DivergedError,)):
        raise DivergedError("solution diverged at t = 1")
    assert e.value.code == 3
    assert capsys.readouterr().err.strip() == "haloflow: error: solution diverged at t = 1"
