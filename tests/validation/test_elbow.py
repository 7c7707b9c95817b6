"""OpenFOAM's icoFoam tutorial "elbow" on its own polyMesh (918 triangular prisms,
non-orthogonal up to 36 degrees, two velocity inlets), cell for cell against icoFoam's fields
after one step and at t = 1 (tests/data/elbow; its README says how they were made).

The first step checks how a fixed-velocity inlet enters the first momentum equation from a
flow at rest (its flux convects the inlet velocity into the cells next to it); t = 1 checks
that the two OpenFOAM discretisation choices (``solver.implicit_convection``,
``solver.ddt_corr``) reproduce icoFoam, and that haloflow's defaults differ from it by design.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from haloflow.case import CaseError, load_case
from tests import foam_reference

DATA = Path(__file__).resolve().parents[1] / "data" / "elbow"
OPENFOAM = ("solver.implicit_convection=true", "solver.ddt_corr=true")
TIMES = {1: "0.05", 20: "1"}  # steps: icoFoam's time directory


def run(steps: int, *overrides) -> tuple[np.ndarray, np.ndarray]:
    return foam_reference.run(DATA / "elbow.toml", steps, *overrides)


def reference(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """icoFoam's ``U[2, n]`` (x, y) and ``p[n]`` after ``steps`` steps."""
    return foam_reference.reference(DATA, TIMES[steps])


def differences(steps: int, *overrides) -> tuple[float, float, float]:
    """``max|dU| / max|U|``, the rms of ``|dU|`` over ``max|U|`` and ``max|dp|`` over the
    range of icoFoam's p."""
    U, p = run(steps, *overrides)
    Uf, pf = reference(steps)
    dU = np.linalg.norm(U[:2] - Uf, axis=0)
    top = np.linalg.norm(Uf, axis=0).max()
    return dU.max() / top, np.sqrt(np.mean(dU**2)) / top, np.abs(p - pf).max() / np.ptp(pf)


def test_first_step_matches_icofoam():
    """One step from rest, haloflow's defaults: 3.1e-11 of max|U| and p 4e-12 of its range,
    both codes' solvers to 1e-10 and below (the issue asks for 0.02; without the inlets'
    fluxes in the first step's convection it was 0.21, in the cells next to
    velocity-inlet-6)."""
    du_max, du_rms, dp = differences(1)
    assert du_max < 1e-9 and du_rms < 1e-9 and dp < 1e-9, (du_max, du_rms, dp)


def test_openfoam_discretisation_matches_icofoam_at_t1():
    """Linear convection in the matrix and ddtCorr, 20 steps: max 1.5e-9 and rms 8.7e-11 of
    max|U| (the issue asks for rms 0.01), p 1.1e-9 of its range: icoFoam to round-off on
    non-orthogonal triangles with two non-orthogonal correctors."""
    du_max, du_rms, dp = differences(20, *OPENFOAM)
    assert du_max < 1e-7 and du_rms < 1e-8 and dp < 1e-7, (du_max, du_rms, dp)


@pytest.mark.parametrize("overrides, low", [((), 0.03), (OPENFOAM[:1], 0.025),
                                            (OPENFOAM[1:], 0.015)])
def test_default_discretisation_differs_from_icofoam(overrides, low):
    """Each choice matters: haloflow's defaults are rms 0.035 of max|U| from icoFoam at
    t = 1, with implicit convection alone 0.032, with ddtCorr alone 0.018."""
    _, du_rms, _ = differences(20, *overrides)
    assert low < du_rms < 0.05, du_rms


@pytest.mark.parametrize("overrides, expected", [
    (("solver.implicit_convection=true", "solver.convection=upwind"),
     'solver.implicit_convection: needs convection = "linear" (not "upwind")'),
    (("solver.ddt_corr=true", "solver.time_scheme=backward"),
     'solver.ddt_corr: needs algorithm = "piso" and time_scheme = "euler" (not "piso", '
     '"backward")'),
    (("solver.ddt_corr=true", "solver.algorithm=simple"),
     'solver.ddt_corr: needs algorithm = "piso" and time_scheme = "euler" (not "simple", '
     '"euler")'),
])
def test_openfoam_options_say_what_they_need(overrides, expected):
    with pytest.raises(CaseError) as err:
        load_case(DATA / "elbow.toml", overrides)
    assert expected in str(err.value) and "\n" not in str(err.value), str(err.value)


if __name__ == "__main__":  # python -m tests.validation.test_elbow <icoFoam case>
    foam_reference.write_reference(Path(sys.argv[1]), DATA, TIMES.values(),
                                   "icoFoam (OpenFOAM v1912) elbow")
