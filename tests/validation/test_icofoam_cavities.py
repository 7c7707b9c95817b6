"""OpenFOAM's icoFoam cavity tutorials on their own blockMesh meshes, cell for cell against
icoFoam's fields after one step and after 20 (tests/data/icofoam_cavities; its README says
how they were made): the square cavity (20 x 20), the graded one (four blocks graded
towards the walls, 0.5-2 cell size ratios), the clipped one (an L of three blocks) and the
square one made 3D (12^3, walls all round; after 1 and 10 steps).

With OpenFOAM's discretisation (``solver.implicit_convection``, ``solver.ddt_corr``) haloflow
is icoFoam to the solvers' tolerances on these orthogonal meshes; p is compared less its
mean (a closed cavity's pressure is defined up to a constant, which icoFoam fixes by a
reference cell).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tests import foam_reference

DATA = Path(__file__).resolve().parents[1] / "data" / "icofoam_cavities"
OPENFOAM = ("solver.implicit_convection=true", "solver.ddt_corr=true")
# icoFoam's time folder after so many steps
TIMES = {"cavity": {1: "0.005", 20: "0.1"}, "cavityGrade": {1: "0.0025", 20: "0.05"},
         "cavityClipped": {1: "0.005", 20: "0.1"}, "cavity3D": {1: "0.005", 10: "0.05"}}


def differences(name: str, steps: int, *overrides) -> tuple[float, float, float]:
    """``max|dU| / max|U|``, the rms of ``|dU|`` over ``max|U|`` and ``max|dp|`` over the
    range of icoFoam's p, each p less its mean."""
    U, p = foam_reference.run(DATA / name / f"{name}.toml", steps, *overrides)
    Uf, pf = foam_reference.reference(DATA / name, TIMES[name][steps])
    dU = np.linalg.norm(U[:len(Uf)] - Uf, axis=0)
    top = np.linalg.norm(Uf, axis=0).max()
    dp = np.abs((p - p.mean()) - (pf - pf.mean())).max() / np.ptp(pf)
    return dU.max() / top, np.sqrt(np.mean(dU**2)) / top, dp


@pytest.mark.parametrize("name", TIMES)
def test_openfoams_discretisation_is_icofoam_to_round_off(name):
    """After 1 and 20 steps: 5e-11 to 1.1e-10 of max|U| and 1.2e-11 to 2.7e-11 of p's
    range (both codes' solvers to 1e-10 and below; the bound leaves 10x for other machines'
    round-off, far below any discretisation difference, which is 5e-3 at 20 steps)."""
    for steps in TIMES[name]:
        du_max, du_rms, dp = differences(name, steps, *OPENFOAM)
        assert du_max < 1e-9 and du_rms < 1e-9 and dp < 1e-9, (steps, du_max, du_rms, dp)


@pytest.mark.parametrize("name", TIMES)
def test_haloflows_defaults_differ_from_icofoam_by_design(name):
    """The first step from rest has no convecting flux, so the defaults are icoFoam's too
    (6e-11); at 20 steps linear convection's explicit part and no ddtCorr put them 4.7e-3 to
    5.5e-3 of max|U| away (rms 5.3e-4 to 6.5e-4; the 3D cavity at 10 steps 1.1e-2, rms
    1.7e-3): the difference the two options remove."""
    du_max, _, _ = differences(name, 1)
    assert du_max < 1e-9, du_max
    du_max, du_rms, _ = differences(name, max(TIMES[name]))
    assert 2e-3 < du_max < 3e-2 and 2e-4 < du_rms < 3e-3, (du_max, du_rms)


if __name__ == "__main__":  # python -m tests.validation.test_icofoam_cavities <tutorials>
    for name, times in TIMES.items():
        foam_reference.write_reference(Path(sys.argv[1]) / name, DATA / name, times.values(),
                                       f"icoFoam (OpenFOAM v1912) {name}",
                                       dims=3 if name.endswith("3D") else 2)
