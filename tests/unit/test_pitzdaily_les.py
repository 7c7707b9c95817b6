"""pitzdaily_les: the built-in case is the tutorial's mesh extruded to 244 500 cells; the
inlet's random fluctuations are deterministic, zero-mean, of the set rms and replayed alike
after a restart; van Driest's width follows its formula and only ever narrows the filter;
and a few steps of the coarse case conserve mass through inlet and outlet, give kEqn's
SGS energy and viscosity of a reference run, and Smagorinsky's viscosity at the k
equation's local equilibrium from the run's own strain rate."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.mesh.blockmesh import blockmesh_patch_names
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case
from haloflow.physics.closures.vandriest import damped_delta
from haloflow.physics.inflow import Inflow, fluctuate, uniform01
from tests.case_errors import error as case_error
from tests.pitzdaily_les import CELLS, DICT, KEQN_REFERENCE, TIGHT, coarse_case

SELF = MPI.COMM_SELF


def test_builtin_case_is_the_tutorial_setup_on_the_extruded_mesh():
    case = load_case("pitzdaily_les")
    assert blockmesh_patch_names(DICT) == ["inlet", "outlet", "upperWall", "lowerWall"]
    p, b = case.physics, case.boundary["inlet"]
    assert (p.model, p.closure, p.nu, p.Ck, p.Ce, p.k_inlet) == ("les", "kEqn", 1e-5, 0.094,
                                                                  1.048, 2e-5)
    assert not p.van_driest and (p.Aplus, p.kappa, p.Cdelta) == (26.0, 0.41, 0.158)
    assert b.U == (10.0, 0.0, 0.0) and b.fluctuation == (0.02, 0.01, 0.01)
    assert b.fluctuation_alpha == 0.1
    s = case.solver
    assert (s.dt, s.time_scheme, s.n_correctors) == (1e-5, "backward", 2)
    mesh = from_case(case.mesh)
    assert mesh.n_cells == 12225 * 20
    assert np.allclose(mesh.geom().cell_centres[:, 2].min(), -0.0127 + 0.000635)


@pytest.mark.parametrize("override, words", [
    ("boundary.upperWall.fluctuation=[0.1,0,0]", "only inlet"),
    ("boundary.inlet.fluctuation=[-0.1,0,0]", "boundary.inlet.fluctuation"),
    ("boundary.inlet.fluctuation_alpha=0", "boundary.inlet.fluctuation_alpha"),
    ('solver.algorithm="simple"', 'needs solver.algorithm = "piso"'),
    ("physics.Aplus=-1", "physics.Aplus"),
])
def test_bad_inflow_and_damping_input(override, words):
    assert words in case_error("pitzdaily_les", [override])


def test_seed_needs_a_fluctuation():
    msg = case_error("channel", ["boundary.left.seed=3"])
    assert "boundary.left.seed: needs boundary.left.fluctuation" in msg


def test_random_numbers_depend_on_every_key_alone():
    r = np.array([[uniform01(7, s, f, d) for d in range(3) for f in range(200)]
                  for s in range(1, 51)])
    assert r.min() >= 0.0 and r.max() < 1.0
    assert abs(r.mean() - 0.5) < 0.01 and abs(r.var() - 1 / 12) < 0.003
    assert uniform01(7, 3, 11, 1) == uniform01(7, 3, 11, 1)
    others = {uniform01(8, 3, 11, 1), uniform01(7, 4, 11, 1), uniform01(7, 3, 12, 1),
              uniform01(7, 3, 11, 2), uniform01(7, 3, 11, 1)}
    assert len(others) == 5
    # neighbouring faces and steps are uncorrelated
    assert abs(np.corrcoef(r[:-1].ravel(), r[1:].ravel())[0, 1]) < 0.02


def test_fluctuations_are_zero_mean_with_the_set_rms():
    m, steps, alpha = 400, 3000, 0.1
    ref = np.tile([10.0, 0.0, 0.0], (m, 1))
    scale = np.array([0.02, 0.01, 0.005])
    value = ref.copy()
    gf = np.arange(1000, 1000 + m, dtype=np.int64)
    fluctuate(value, ref, gf, scale, alpha, 5, 1, 200)  # the filter forgets its start
    samples = []
    for s in range(201, steps, 10):  # 10 steps apart: nearly independent (0.9^10 = 0.35)
        fluctuate(value, ref, gf, scale, alpha, 5, s, s + 9)
        samples.append(value - ref)
    u = np.array(samples).reshape(-1, 3)
    rms = np.sqrt((u ** 2).mean(axis=0))
    assert np.allclose(rms, 10.0 * scale, rtol=0.03)
    assert np.all(np.abs(u.mean(axis=0)) < 0.03 * 10.0 * scale)


def test_inflow_is_deterministic_and_a_restart_replays_it():
    lm = SimpleNamespace(n_internal=0, global_faces=np.arange(5) + 40,
                         patches=[SimpleNamespace(name="in", start=0, size=3),
                                  SimpleNamespace(name="wall", start=3, size=2)])
    spec = {"in": SimpleNamespace(type="inlet", fluctuation=(0.1, 0.05, 0.05),
                                  fluctuation_alpha=0.3, seed=9),
            "wall": SimpleNamespace(type="wall")}
    base = np.zeros((5, 3))
    base[:3, 0] = 2.0
    a, b = base.copy(), base.copy()
    ia, ib = Inflow(lm, spec, a), Inflow(lm, spec, b)
    for step in range(1, 8):
        ia.advance(a, step)
    ib.advance(b, 7)  # a restart at step 7: replayed from the mean
    assert np.array_equal(a, b) and np.all(a[3:] == 0.0)
    assert not np.allclose(a[:3], base[:3])
    c = base.copy()
    Inflow(lm, spec | {"in": SimpleNamespace(**{**vars(spec["in"]), "seed": 10})},
           c).advance(c, 7)
    assert not np.allclose(a[:3], c[:3])


def test_van_driest_width_is_the_damped_mixing_length_capped_by_the_cell():
    y = np.array([1e-5, 1e-4, 1e-3, 1e-2, 0.02])
    ystar = np.array([2e-5, 1e-3])
    where = np.array([0, 0, 0, 1, -1])
    geometric = np.full(5, 1e-3)
    out = np.zeros(5)
    damped_delta(geometric, y, ystar, where, 0.41, 0.158, 26.0, 5, out)
    for c in range(4):
        want = min(1e-3, 0.41 / 0.158 * (1 - math.exp(-y[c] / ystar[where[c]] / 26)) * y[c])
        assert out[c] == pytest.approx(want, rel=1e-12)
    assert out[0] < 1e-6 and out[2] == 1e-3 and out[4] == 1e-3


def _coarse_solver(folder, extra=()):
    case = coarse_case(extra, folder)
    mesh = from_case(case.mesh)
    assert mesh.n_cells == CELLS
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    return solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)


def _conserves_mass(s, rel=1e-12):
    """The inlet's flux is its (fluctuating) velocity through its faces, to round-off, and
    leaves through the outlet to ``rel`` of it (measured: 1e-15 with every solve to round-off,
    9e-11 with the case's pressure tolerance 1e-6); nothing crosses the walls."""
    lm, flux = s.lm, {}
    for p in lm.patches:
        faces = slice(p.start, p.start + p.size)
        flux[p.name] = s.phi[faces].sum()
        if p.name == "inlet":
            u = s.bc.u_value[p.start - lm.n_internal:][:p.size]
            given = np.einsum("ij,ij->", u, lm.geometry.face_areas[faces])
    assert given < -6e-3 and abs(flux["inlet"] - given) < 1e-12 * abs(given), (flux, given)
    assert abs(flux["inlet"] + flux["outlet"]) < rel * abs(given), flux
    assert flux["upperWall"] == flux["lowerWall"] == 0.0, flux


def _strain_rate(c, n):
    """``|S| = sqrt(2 devD:D)`` of the closure's velocity gradient, in numpy."""
    g = c.gradU[:, :, :n]
    d = 0.5 * (g + g.transpose(1, 0, 2))
    tr = np.trace(g)
    return np.sqrt(np.maximum(2.0 * ((d * d).sum(axis=(0, 1)) - tr * tr / 3.0), 0.0))


def keqn_statistics(folder=None, extra=()):
    """(mean k, mean nut, max nut) of the coarse kEqn run, and its solver."""
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp()) if folder is None else folder
    s = _coarse_solver(folder, [*TIGHT, *extra])
    for _ in range(4):
        s.step()
    n, c = s.lm.n_owned, s.closure
    vol = s.lm.geometry.cell_volumes[:n]
    mean = (float(np.sum(vol * c.k[:n]) / vol.sum()), float(np.sum(vol * c.nut[:n]) / vol.sum()))
    return (*mean, float(c.nut[:n].max())), s


def test_keqn_eddy_viscosity_against_its_constants_and_a_reference_run(tmp_path):
    """nut = Ck Delta sqrt(k) in every cell; the SGS energy and viscosity the k equation
    (production 2 nut devD:D, dissipation Ce k^1.5 / Delta) builds in 4 steps equal the
    reference run's; mass conserved."""
    got, s = keqn_statistics(tmp_path)
    n, c = s.lm.n_owned, s.closure
    assert (c.Ck, c.Ce) == (0.094, 1.048)
    want = c.Ck * c.delta[:n] * np.sqrt(c.k[:n])
    assert np.abs(c.nut[:n] - want).max() <= 1e-12 * want.max()
    np.testing.assert_allclose(got, KEQN_REFERENCE, rtol=1e-6)
    _conserves_mass(s)


def test_smagorinsky_eddy_viscosity_is_the_equilibrium_of_the_k_equation(tmp_path):
    """The Smagorinsky closure with kEqn's constants: k in local equilibrium (production =
    dissipation: 2 nut devD:D = Ce k^1.5 / Delta) gives nut = (Cs Delta)^2 |S| with
    Cs^2 = sqrt(Ck^3 / Ce) = 0.028152 (Cs 0.1678), in every cell of the 4-step run whose
    strain rate is above 1e-6 of its largest (measured to 1e-15), from the run's own
    velocity gradient."""
    s = _coarse_solver(tmp_path, [*TIGHT, 'physics.closure="smagorinsky"'])
    for _ in range(4):
        s.step()
    n, c = s.lm.n_owned, s.closure
    strain = _strain_rate(c, n)
    live = strain > 1e-6 * strain.max()
    assert live.sum() > 0.5 * n
    cs2 = c.nut[:n][live] / (c.delta[:n][live] ** 2 * strain[live])
    assert np.abs(cs2 / 0.0281521222 - 1.0).max() < 1e-8, (cs2.min(), cs2.max())
    assert np.allclose(c.k[:n], c.nut[:n] ** 2 / (c.Ck * c.delta[:n]) ** 2, rtol=1e-12,
                       atol=1e-300)
    _conserves_mass(s)


@pytest.mark.parametrize("van_driest", [False, True])
def test_coarse_case_runs_with_a_nonnegative_eddy_viscosity(van_driest, tmp_path):
    s = _coarse_solver(tmp_path, [f"physics.van_driest={str(van_driest).lower()}"])
    inlet = next(p for p in s.lm.patches if p.name == "inlet")
    sl = slice(inlet.start - s.lm.n_internal, inlet.start - s.lm.n_internal + inlet.size)
    for _ in range(4):
        s.step()
    n, c = s.lm.n_owned, s.closure
    assert np.all(np.isfinite(s.U)) and np.all(np.isfinite(s.p))
    assert c.nut[:n].min() >= 0.0 and c.k[:n].min() >= 0.0 and c.nut[:n].max() > 0.0
    _conserves_mass(s, 1e-8)
    u_in = s.bc.u_value[sl]
    assert np.all(np.abs(u_in[:, 0] - 10.0) < 1.0) and np.abs(u_in[:, 2]).max() > 0.0
    geometric = np.cbrt(s.lm.geometry.cell_volumes[:n])
    if not van_driest:
        assert np.array_equal(c.delta[:n], geometric)
        return
    y = c.damping.y[:n]
    assert np.all(c.delta[:n] <= geometric) and np.all(c.delta[:n] > 0.0)
    near = y < 2e-4  # the cells by the walls: narrowed
    assert near.any() and np.all(c.delta[:n][near] < geometric[near])


def test_restart_replays_the_inflow_and_equals_the_uninterrupted_run(tmp_path):
    """Stop after 3 steps, restore into a fresh solver: 2 more steps give the fields of 5
    uninterrupted ones bit for bit (the inlet's filter replayed, van Driest's width rebuilt)."""
    on = ["physics.van_driest=true"]
    a = _coarse_solver(tmp_path, on)
    for _ in range(3):
        a.step()
    arrays, extra = a.checkpoint_state()
    saved = {name: np.array(v, copy=True) for name, (v, _) in arrays.items()}
    for _ in range(2):
        a.step()
    b = _coarse_solver(tmp_path, on)
    b.restore_state(saved, dict(extra))
    for _ in range(2):
        b.step()
    for name in ("U", "p", "phi"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.bc.u_value, b.bc.u_value)
    assert np.array_equal(a.closure.k, b.closure.k)
    assert np.array_equal(a.closure.delta, b.closure.delta)
