"""LES closures: their case keys, zero eddy viscosity where the velocity is uniform, the 3D
Taylor-Green vortex decaying under each, a kEqn restart equal to the run it continues, and
the closure fields riding the existing exchanges."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case
from haloflow.physics.closures.transport import INLET_OUTLET, Transport
from tests.case_errors import error as case_error
from tests.unit.test_energy import Spy

SELF = MPI.COMM_SELF
CLOSURES = ("smagorinsky", "wale", "kEqn", "dynamicSmagorinsky")


def tgv(closure, cells=8, extra=(), spy=False):
    """A serial solver of the 3D Taylor-Green case on ``cells``^3 (``closure`` None:
    laminar)."""
    les = [f'physics.closure="{closure}"'] if closure else ['physics.model="incompressible"']
    case = load_case("taylor_green_3d", [f"mesh.cells=[{cells},{cells},{cells}]", *les,
                                         "solver.dt=0.1", *extra])
    mesh = from_case(case.mesh)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    ex = halo.make("packed", lm, SELF)
    if spy:
        ex = Spy(ex)
    return solver_from_case(lm, case, ex, SELF), ex


def error(overrides, source="taylor_green_3d"):
    return case_error(source, overrides)


@pytest.mark.parametrize("override, words", [
    ('physics.closure="smagorinski"',
     'physics.closure: expected "smagorinsky", "wale", "kEqn" or "dynamicSmagorinsky"'),
    ("physics.Ck=0", "physics.Ck: expected a positive number"),
    ("physics.Ce=-1", "physics.Ce: expected a positive number"),
    ("physics.Cw=true", "physics.Cw: expected a positive number"),
    ("physics.k_init=-1e-3", "physics.k_init: expected a number >= 0"),
    ("physics.Pr=0.7", 'physics.Pr: a thermal key, not used by physics.model = "les"'),
    ("mesh.lengths=[6.0,6.0,3.0]", 'initial.type: "taylor_green_3d" needs mesh.type = "box" '
                                   "with three equal lengths"),
    ("postprocess.average_from=-1", "postprocess.average_from: expected a number >= 0"),
])
def test_bad_les_input(override, words):
    assert words in error([override])


def test_switching_the_model_drops_the_files_closure_keys():
    """The TGV case names its closure; --set physics.model takes it off, unless --set gave
    an LES key itself."""
    lam = load_case("taylor_green_3d", ['physics.model="incompressible"'])
    assert lam.physics.model == "incompressible" and not hasattr(lam.physics, "closure")
    assert load_case("taylor_green_3d", ['physics.model="les"']).physics.closure == \
        "dynamicSmagorinsky"
    assert "physics.closure: an LES key" in error(['physics.model="incompressible"',
                                                   'physics.closure="wale"'])


def test_les_key_on_a_laminar_case_and_the_exit_status():
    assert 'physics.Ck: an LES key, not used by physics.model = "incompressible"' in \
        error(["physics.Ck=0.1"], "cavity")
    assert "postprocess.averaging: not with parallel.balance" in \
        error(["postprocess.averaging=true", 'parallel.balance="time"'])
    res = subprocess.run([sys.executable, "-m", "haloflow", "run", "taylor_green_3d", "--set",
                          'physics.closure="les"'], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "physics.closure: expected" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("closure", CLOSURES)
def test_uniform_flow_has_no_eddy_viscosity(closure):
    """A uniform stream has no velocity gradient: nut, k and the eddy part of nu_face are
    zero (to the round-off of the Gauss gradient's face sums) at the start and after steps,
    and the flow stays uniform."""
    s, _ = tgv(closure, 4, ['initial.type="uniform"', "initial.U=[1.0,0.5,-0.25]",
                            "postprocess.taylor_green_3d=false"])
    c = s.closure
    for _ in range(3):
        assert c.nut.min() >= 0.0 and c.nut.max() <= 1e-12 * c.nu
        assert c.k.min() >= 0.0 and c.k.max() <= 1e-24
        assert np.abs(c.nu_face - c.nu).max() <= 1e-12 * c.nu
        s.step()
    assert np.abs(s.U[0] - 1.0).max() < 1e-8


@pytest.mark.parametrize("closure", CLOSURES)
def test_taylor_green_3d_energy_decays(closure):
    """At 16^3 the kinetic energy decays monotonically step by step (t to 2.4), faster than
    without the closure, whose eddy viscosity is positive and never negative."""
    s, _ = tgv(closure, 16, ["solver.dt=0.2"])
    vol = s.lm.geometry.cell_volumes

    def energy():
        return 0.5 * float(np.sum(vol * (s.U ** 2).sum(axis=0)) / vol.sum())

    e = [energy()]
    for _ in range(12):
        s.step()
        e.append(energy())
        assert s.closure.nut.min() >= 0.0 and s.closure.k.min() >= 0.0
    assert np.all(np.diff(e) < 0.0), e
    assert s.closure.nut.max() > 1e-4  # the closure does act
    lam, _ = tgv(None, 16, ["solver.dt=0.2"])
    assert lam.closure.name == "laminar"
    for _ in range(12):
        lam.step()
    assert e[-1] < 0.5 * float(np.sum(vol * (lam.U ** 2).sum(axis=0)) / vol.sum())


def _dynamic_coefficient(cells, velocity):
    """``<L:M> / <M:M>`` of the dynamic model on a box of ``cells`` for the velocity
    ``velocity(x, y, z)`` (its exact strain rate), and ``<M:M>``."""
    from haloflow.mesh.blocks import box
    from haloflow.physics.closures import dynamic as D

    m = box(cells)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    x, y, z = lm.geometry.cell_centres.T
    u, grad = velocity(x, y, z)
    S = np.zeros((6, lm.n_cells))
    D.strain_rate(grad, lm.n_owned, S)
    n = lm.n_owned
    a, b = D.germano_sums(lm.owner, lm.neighbour, n, u, S, lm.geometry.cell_volumes,
                          np.cbrt(lm.geometry.cell_volumes), D.ALPHA ** 2,
                          D.filter_counts(lm.owner, lm.neighbour, n), np.zeros((n, 21)),
                          np.zeros((2, 6)))
    return a / b, b


def test_dynamic_coefficient_vanishes_without_small_scales():
    """Germano's identity sees no subgrid stress in a uniform shear u = (a y, 0, 0) (the
    resolved stress L has no xy part, so L:M is zero) nor in the Taylor-Green vortex's
    single large-scale mode at t = 0; once the vortex has broken down (16^3, t = 5) the
    coefficient is positive and of the classical size, Cs between 0.1 and 0.2."""
    def shear(x, y, z):
        u = np.zeros((3, len(x)))
        u[0] = 3.0 * y
        g = np.zeros((3, 3, len(x)))
        g[0, 1] = 3.0
        return u, g

    cs2, mm = _dynamic_coefficient((6, 6, 6), shear)
    assert mm > 0.0 and abs(cs2) < 1e-12
    s, _ = tgv("dynamicSmagorinsky", 16, ["solver.dt=0.2"])
    assert abs(s.closure.cs2) < 1e-12 and s.closure.nut.max() < 1e-12
    for _ in range(25):
        s.step()
    assert 0.1 ** 2 < s.closure.cs2 < 0.2 ** 2, np.sqrt(s.closure.cs2)


@pytest.mark.parametrize("closure, state", [
    ("kEqn", {"k", "k_old", "nut", "nu_face"}),
    # the strain rate and velocity its next coefficient filters
    ("dynamicSmagorinsky", {"strain_rate", "strain_velocity", "nut", "nu_face"}),
])
def test_restart_equals_the_uninterrupted_run(closure, state):
    """Stop a run after 4 BDF2 steps, restore its state into a fresh solver: 4 more steps
    give bit for bit the fields of 8 uninterrupted ones (the closure's included)."""
    bdf2 = ['solver.time_scheme="backward"']
    a, _ = tgv(closure, 8, bdf2)
    for _ in range(4):
        a.step()
    arrays, extra = a.checkpoint_state()
    assert state <= set(arrays)
    saved = {name: np.array(v, copy=True) for name, (v, _) in arrays.items()}
    for _ in range(4):
        a.step()
    b, _ = tgv(closure, 8, bdf2)
    b.restore_state(saved, dict(extra))
    for _ in range(4):
        b.step()
    if closure == "kEqn":  # the closure acts
        assert np.abs(a.closure.k).max() > 1e-5
    else:
        assert a.closure.cs2 > 1e-3 and a.closure.cs2 == b.closure.cs2
    for name in ("U", "p", "phi"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name in ("k", "nut", "nu_face"):
        assert np.array_equal(getattr(a.closure, name), getattr(b.closure, name)), name


@pytest.mark.parametrize("closure", ("laminar", *CLOSURES))
def test_closure_fields_ride_the_existing_exchanges(closure):
    """A step exchanges at the same points with any closure: nut (and k) are more fields of
    the first correction's H/A exchange, never a message of their own."""
    s, spy = tgv(None if closure == "laminar" else closure, 4, spy=True)
    ride = len(s.closure.ghosts)
    assert ride == {"laminar": 0, "kEqn": 2, "dynamicSmagorinsky": 9}.get(closure, 1)
    for _ in range(2):
        spy.calls.clear()
        s.step()
        # the case's cubic convection exchanges the velocity gradient at the assembly
        assert spy.calls == [("_explicit", 9), ("predict_fluxes", 4 + ride), ("correct", 1),
                             ("correct", 3), ("predict_fluxes", 3), ("correct", 1),
                             ("correct", 3)]


def test_transport_keeps_a_scalar_bounded_and_conserved():
    """A transported scalar in the Taylor-Green flow, no source, periodic box: its total is
    conserved to solver tolerance, it stays within its initial bounds under the hybrid
    scheme, and the inlet-outlet kind is what scalar_boundary gives an outlet."""
    s, _ = tgv("wale", 8)
    lm = s.lm
    x0 = 1.0 + np.sin(lm.geometry.cell_centres[:, 0])
    t = Transport("c", lm, s.fc, s.momentum.M.pattern, s.ex, s.red, s.momentum.ws,
                  s.momentum, s.timers, kind=np.zeros(0, dtype=np.int64), value=np.zeros(0),
                  settings=s.momentum.cfg, lower_bound=-1.0)
    t.x[:] = x0
    t.gamma[:] = 1e-4
    vol = lm.geometry.cell_volumes
    for _ in range(5):
        s.step()
        t.solve(s.phi, s.dt)
        s.ex.exchange(t.ghosts)
    assert abs(np.dot(vol, t.x) - np.dot(vol, x0)) < 1e-6 * np.dot(vol, x0)
    assert t.x.min() >= x0.min() - 1e-9 and t.x.max() <= x0.max() + 1e-9
    assert np.abs(t.x - x0).max() > 1e-3
    from haloflow.physics.closures.transport import scalar_boundary

    case = load_case("backward_step")
    mesh = from_case(case.mesh)
    lmb = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    kind, value = scalar_boundary(lmb, case.boundary, {"inlet": 2.0, "outlet": 3.0})
    out = next(p for p in lmb.patches if p.name == "outlet")
    b = out.start - lmb.n_internal
    assert kind[b] == INLET_OUTLET and value[b] == 3.0


def test_taylor_green_3d_outputs_and_time_averages(tmp_path):
    """A short run writes dissipation.csv (the energy falling, the rate its derivative), the
    summary entry beside the reference, and the time averages in the field file: means
    between the first and last values, rms of a decaying field positive, k and nut too."""
    import json

    from haloflow.run import run_case
    from tests.fieldio import read_fields

    case = load_case("taylor_green_3d", ["mesh.cells=[6,6,6]", "solver.dt=0.2",
                                         "solver.end_time=1", 'physics.closure="kEqn"',
                                         "postprocess.averaging=true",
                                         "postprocess.average_from=0.4", "output.plots=false"])
    out = tmp_path / "run"
    run_case(case, out, SELF, quiet=True)
    table = np.loadtxt(out / "dissipation.csv", delimiter=",", skiprows=1)
    assert table.shape == (5, 3) and np.allclose(table[:, 0], [0.2, 0.4, 0.6, 0.8, 1.0])
    assert np.all(np.diff(table[:, 1]) < 0) and np.all(table[:, 2] > 0)
    assert np.allclose(table[1:-1, 2], -(table[2:, 1] - table[:-2, 1]) / 0.4)
    s = json.loads((out / "summary.json").read_text())
    t = s["taylor_green_3d"]
    assert t["epsilon_max"] == pytest.approx(table[:, 2].max(), rel=1e-9)
    assert "epsilon_max_error" not in t  # the run stopped before the peak
    assert t["reference"]["epsilon_max"] == pytest.approx(0.012857528)
    assert t["reference"]["t_epsilon_max"] == pytest.approx(8.97)
    assert s["averaging"]["from"] == pytest.approx(0.4) and s["averaging"]["span"] == \
        pytest.approx(0.6)
    f = read_fields(out, "taylor_green_3d")
    for name in ("U_mean", "U_rms", "p_mean", "p_rms", "k_mean", "k_rms", "nut_mean",
                 "nut_rms", "k", "nut"):
        assert name in f, name
    assert np.all(f["U_rms"] >= 0) and f["U_rms"].max() > 1e-4
    assert np.all(np.abs(f["U_mean"]) <= np.abs(f["U"]).max() * 1.5 + 1e-12)
    assert f["nut_mean"].max() > 0


def test_averages_of_a_steady_field():
    """Constant fields average to themselves with zero rms, weighted by the time steps."""
    from haloflow.post.averaging import accumulate

    n = 5
    U, p = np.arange(15.0).reshape(3, n), np.full(n, 2.0)
    s1, s2 = np.zeros((6, n)), np.zeros((6, n))
    k = nut = np.ones(n)
    for dt in (0.1, 0.3):
        accumulate(U, p, k, nut, True, dt, n, s1, s2)
    mean = s1 / 0.4
    assert np.allclose(mean[:3], U) and np.allclose(mean[3], 2.0) and np.allclose(mean[4:], 1)
    assert np.allclose(s2 / 0.4 - mean ** 2, 0.0, atol=1e-12)


def test_builtin_taylor_green_3d_is_the_workshop_case():
    """64^3 cells in a cube of side 2 pi L, Re = V0 L / nu = 1600, the dynamic closure with
    cubic convection at Courant 0.125; the initial field is the workshop's, kinetic energy
    V0^2/8 on the cell centres."""
    from haloflow.physics.initial import taylor_green_3d

    case = load_case("taylor_green_3d")
    m, ph = case.mesh, case.physics
    assert m.cells == (64, 64, 64) and len(set(m.lengths)) == 1 and len(m.periodic) == 3
    L = m.lengths[0] / (2.0 * np.pi)
    assert case.initial.amplitude * L / ph.nu == pytest.approx(1600.0)
    assert ph.model == "les" and ph.closure == "dynamicSmagorinsky"
    s = case.solver
    assert s.convection == "cubic" and s.time_scheme == "backward"
    assert s.dt == 0.0125  # Courant number V0 dt / dx 0.127
    assert case.solver.end_time == 20.0 and case.postprocess.taylor_green_3d
    x = (np.arange(8) + 0.5) * 2.0 * np.pi / 8 - np.pi
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    u, v, w, _ = taylor_green_3d(X, Y, Z, 1.0, 2.0 * np.pi, (-np.pi, -np.pi, -np.pi))
    assert np.mean(0.5 * (u * u + v * v + w * w)) == pytest.approx(0.125, rel=1e-12)
    assert np.allclose(u, np.sin(X) * np.cos(Y) * np.cos(Z), atol=1e-12)


def _box_fields(mesh, nut_of):
    """Face viscosity ``nu + nut`` at the face centres and the cells' velocity gradient of a
    solid-body rotation about z, ``u = (-y, x, 0)``: exact for linear ``nut``."""
    g = mesh.geom()
    nu = 1e-3
    nu_face = nu + nut_of(g.face_centres)
    gradU = np.zeros((3, 3, mesh.n_cells))
    gradU[0, 1] = -1.0  # d u_x / d y
    gradU[1, 0] = 1.0   # d u_y / d x
    return nu, nu_face, gradU


def test_transposed_stress_is_the_exact_cell_integral_for_linear_fields():
    from haloflow.mesh.blocks import box
    from haloflow.physics.schemes import transposed_stress

    mesh = box((5, 4, 3), lengths=(1.0, 2.0, 0.5), grading=(2.0, 1.0, 0.5))
    a = np.array([0.3, -0.2, 0.7])
    nu, nu_face, gradU = _box_fields(mesh, lambda x: 0.01 + x @ a)
    gradU[2, 0] = 0.4  # any velocity gradient: the stress is grad(nut) . d u / d x_d
    n = mesh.n_cells
    stress, gnut = np.zeros((3, n)), np.zeros((3, n))
    transposed_stress(mesh.owner, mesh.neighbour, mesh.geom().face_areas, nu_face, nu,
                      gradU, n, gnut, stress)
    vol = mesh.geom().cell_volumes
    expected = vol * np.einsum("i,idc->dc", a, gradU)
    assert np.abs(stress - expected).max() < 1e-12 * np.abs(expected).max()


def test_a_solid_body_rotation_feels_no_eddy_stress():
    """``div(nut (grad U + T(grad U)))`` vanishes for a rigid rotation whatever ``nut``: the
    laplacian's face sums and the explicit transposed part cancel (the laplacian alone
    would brake the rotation where ``nut`` varies)."""
    from haloflow.mesh.blocks import box
    from haloflow.physics.schemes import transposed_stress

    mesh = box((6, 6, 2))
    nu, nu_face, gradU = _box_fields(mesh, lambda x: 0.02 * (1.0 + x[:, 0] + 2.0 * x[:, 1]))
    g, n, ni = mesh.geom(), mesh.n_cells, mesh.n_internal
    cc = g.cell_centres
    U = np.stack([-cc[:, 1], cc[:, 0], 0.0 * cc[:, 0]])
    o, nb = mesh.owner[:ni], mesh.neighbour
    gdiff = np.einsum("ij,ij->i", g.face_areas[:ni], g.face_areas[:ni]) / np.einsum(
        "ij,ij->i", g.face_areas[:ni], cc[nb] - cc[o])
    lap = np.zeros((3, n))  # the eddy part of the laplacian, internal faces
    flux = (nu_face[:ni] - nu) * gdiff * (U[:, nb] - U[:, o])
    for d in range(3):
        np.add.at(lap[d], o, flux[d])
        np.subtract.at(lap[d], nb, flux[d])
    stress, gnut = np.zeros((3, n)), np.zeros((3, n))
    transposed_stress(mesh.owner, mesh.neighbour, g.face_areas, nu_face, nu, gradU, n, gnut,
                      stress)
    i, j = np.unravel_index(np.arange(n), (6, 6, 2), order="F")[:2]
    inner = (i > 0) & (i < 5) & (j > 0) & (j < 5)  # cells whose faces are all internal in x, y
    assert np.abs(lap[:2, inner]).max() > 4e-4  # the laplacian alone brakes it (V 0.02 2)
    assert np.abs(lap[:, inner] + stress[:, inner]).max() < 1e-12


@pytest.mark.parametrize("nonorth", [True, False])
def test_transport_diffuses_a_linear_field_exactly_on_a_skewed_mesh(nonorth):
    """Steady diffusion between fixed boundary values of a linear field on a mesh distorted
    inside (its boundary cells rectangles: boundary faces have no correction, as in the
    momentum equation): with the deferred non-orthogonal part (least-squares gradient) the
    solution is the linear field; without it, it is not (so the correction does act)."""
    from haloflow.mesh.blocks import box
    from haloflow.physics.patches import EMPTY, FIXED

    case = load_case("cavity", ['solver.gradient="least-squares"', "mesh.cells=[12,10,1]",
                                "solver.momentum.tol=1e-13", "solver.momentum.rel_tol=0"])
    mesh = box((12, 10, 1))
    P = mesh.points.reshape(2, 11, 13, 3)
    d = np.random.default_rng(3).uniform(-0.25, 0.25, (11, 13, 2)) * [1 / 12, 1 / 10]
    d[[0, 1, -2, -1]] = 0.0
    d[:, [0, 1, -2, -1]] = 0.0
    P[..., :2] += d[None]
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)
    assert s.fc.nonorthogonal
    ni = lm.n_internal
    a = np.array([0.7, -1.3, 0.0])
    kind = np.where(s.bc.u_kind == EMPTY, EMPTY, FIXED).astype(np.int64)
    value = lm.geometry.face_centres[ni:] @ a + 0.4
    t = Transport("c", lm, s.fc, s.momentum.M.pattern, s.ex, s.red, s.momentum.ws,
                  s.momentum, s.timers, kind=kind, value=value, convection="upwind",
                  steady=True, settings=s.momentum.cfg, lower_bound=-10.0,
                  gradient=s.gradient, nonorth=nonorth)
    t.gamma[:] = 1.0
    phi = np.zeros(lm.n_faces)
    for _ in range(40):
        t.refresh_gradient()
        assert len(t.take_pending()) == (3 if nonorth else 0)
        t.solve(phi, 1.0)
    err = np.abs(t.x - (lm.geometry.cell_centres @ a + 0.4)).max()
    assert err < 1e-9 if nonorth else err > 1e-3, err
