"""Spalart-Allmaras: its functions, zero eddy viscosity where nu-tilde is zero, a few SIMPLE
iterations on a small flat plate, and its case keys (one-line errors)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case
from haloflow.physics.closures.spalart_allmaras import (
    COEFFICIENTS,
    cw1_of,
    eddy_viscosity,
    sa_sources,
)
from tests.case_errors import error
from tests.limited import haloflow, one_line

NU = 2e-7


def small_plate(tmp_path, x_up=4, x_plate=12, y=16):
    """The flat_plate case's blockMeshDict with fewer cells (a path to it)."""
    src = load_case("flat_plate").source.parent / "flat_plate" / "blockMeshDict"
    text = src.read_text()
    for key, old, new in (("xUp", 24, x_up), ("xPlate", 96, x_plate), ("yCells", 80, y)):
        assert f"{key:<9}{old};" in text
        text = text.replace(f"{key:<9}{old};", f"{key:<9}{new};")
    path = tmp_path / "blockMeshDict"
    path.write_text(text)
    return path


def test_fv1_and_eddy_viscosity():
    nt = np.array([0.0, -1e-6, NU * 7.1, NU * 1e4, NU])
    nut = np.empty(5)
    eddy_viscosity(nt, NU, 7.1, nut)
    assert nut[0] == 0.0 and nut[1] == 0.0  # none where nu-tilde is zero, never negative
    assert np.isclose(nut[2], 0.5 * nt[2], rtol=1e-14)  # fv1(chi = cv1) = 1/2
    assert np.isclose(nut[3], nt[3], rtol=1e-9)  # fv1 -> 1 far from walls
    assert np.isclose(nut[4], NU / (1.0 + 7.1**3), rtol=1e-14)  # chi^3 / (chi^3 + cv1^3)
    assert np.isclose(cw1_of(COEFFICIENTS), 0.1355 / 0.41**2 + 1.622 / (2.0 / 3.0))


def test_sources_vanish_with_nu_tilde():
    n = 3
    gradU = np.zeros((3, 3, n))
    gradU[0, 1] = [10.0, 100.0, 1e4]  # du/dy: vorticity 10, 100, 1e4
    c = COEFFICIENTS
    coef = np.array([c["cb1"], c["cb2"], c["sigma"], c["kappa"], cw1_of(c), c["cw2"], c["cw3"],
                     c["cv1"]])
    Sp, Su = np.empty(n), np.empty(n)
    d = np.array([1e-3, 1e-2, 0.1])
    sa_sources(np.zeros(n), d, gradU, np.zeros((3, n)), NU, coef, n, Sp, Su)
    assert np.array_equal(Sp, np.zeros(n)) and np.array_equal(Su, np.zeros(n))
    nt = np.full(n, 3 * NU)
    sa_sources(nt, d, gradU, np.zeros((3, n)), NU, coef, n, Sp, Su)
    assert (Su > 0).all() and (Sp < 0).all()
    # production cb1 S~ nt with S~ = Omega + nt fv2 / (kappa d)^2
    chi = 3.0
    fv1 = chi**3 / (chi**3 + 7.1**3)
    st = np.array([10.0, 100.0, 1e4]) + 3 * NU * (1 - chi / (1 + chi * fv1)) / (0.41 * d) ** 2
    assert np.allclose(Su, 0.1355 * st * 3 * NU, rtol=1e-12)


def _solver(tmp_path, steps):
    case = load_case("flat_plate", [f"mesh.file={small_plate(tmp_path)}"])
    mesh = from_case(case.mesh)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("aggregated", lm, MPI.COMM_SELF), MPI.COMM_SELF)
    for _ in range(steps):
        s.step()
    return s, lm


def test_a_few_iterations_on_a_small_plate(tmp_path):
    s, lm = _solver(tmp_path, 5)
    sa = s.closure
    assert sa.name == "spalart_allmaras"
    assert (sa.nt >= 0).all() and (sa.nut >= 0).all() and sa.nt.max() > 3 * NU
    plate = lm.patch("plate")
    wall = slice(plate.start, plate.start + plate.size)
    assert np.array_equal(sa.nu_face[wall], np.full(plate.size, NU))  # no eddy viscosity
    assert (sa.nu_face >= NU).all()
    y = lm.geometry.cell_centres[:, 1]
    x = lm.geometry.cell_centres[:, 0]
    on = x > 0  # above the plate: the distance is the height
    assert np.allclose(sa.d[on], y[on], rtol=1e-12)
    arrays, _ = s.checkpoint_state()
    assert {"nu_tilde", "nu_face"} <= set(arrays)
    sa.nt[:] = 0.0
    sa.refresh()
    inlet = lm.patch("inlet")
    given = np.zeros(lm.n_faces, dtype=bool)  # the inflow's nu-tilde, 3 nu, stays given
    given[inlet.start:inlet.start + inlet.size] = True
    assert np.array_equal(sa.nu_face[~given], np.full((~given).sum(), NU))
    assert np.allclose(sa.nu_face[given], NU * (1 + 3 * 27 / (27 + 7.1**3)), rtol=1e-14)


def test_restart_from_the_state_equals_the_uninterrupted_run(tmp_path):
    """A solver restored from another's checkpoint state after 3 iterations goes on exactly
    as the original (the face viscosity of the lagged eddy viscosity included)."""
    a, _ = _solver(tmp_path, 3)
    arrays, extra = a.checkpoint_state()
    saved = {name: v.copy() for name, (v, _kind) in arrays.items()}  # ghosts included
    extra = dict(extra)
    for _ in range(3):
        a.step()
    b, _ = _solver(tmp_path, 0)
    b.restore_state(saved, extra)
    for _ in range(3):
        b.step()
    for name, (v, _kind) in a.checkpoint_state()[0].items():
        assert np.array_equal(b.checkpoint_state()[0][name][0], v), name
    assert np.abs(a.closure.nt).max() > 3 * NU


@pytest.mark.parametrize("override, words", [
    ("physics.cb1=-0.1", "physics.cb1: expected a positive number"),
    ("physics.sigma=0", "physics.sigma: expected a positive number"),
    ("physics.cv1=\"big\"", "physics.cv1: expected a positive number"),
    ("physics.nu_tilde_ratio=-3", "physics.nu_tilde_ratio: expected a positive number"),
    ("physics.closure=\"wale\"", 'physics.closure: expected "spalart_allmaras"'),
    ("physics.Ck=0.1", 'physics.Ck: not a key of physics.model = "rans"'),
    ("solver.relaxation.nu_tilde=1.5", "solver.relaxation.nu_tilde"),
    ("boundary.plate.type=\"slip\"", 'postprocess.flat_plate: needs a patch "plate"'),
])
def test_bad_rans_input(override, words):
    assert words in error("flat_plate", [override])


def test_rans_needs_a_wall():
    msg = error("flat_plate", ['boundary.plate.type="slip"', "postprocess.flat_plate=false"])
    assert 'physics.model = "rans": the Spalart-Allmaras closure needs a patch of type "wall"' \
        in msg


def test_rans_keys_need_the_rans_model():
    assert 'physics.cb1: a RANS key, not used by physics.model = "incompressible"' in error(
        "cavity", ["physics.cb1=0.2"])


def test_bad_key_on_the_command_line_is_one_line():
    line = one_line(haloflow("run", "flat_plate", "--set", "physics.kappa=0", "--quiet"))
    assert "physics.kappa" in line
