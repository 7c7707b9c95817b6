"""Heat transfer: the Boussinesq case keys, and a stratified fluid at rest staying at rest."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case
from tests.case_errors import error
from tests.unit.test_bcs_simple import perturb

SELF = MPI.COMM_SELF


@pytest.mark.parametrize("override, words", [
    ("physics.Ra=0", "physics.Ra: expected a positive number"),
    ("physics.Ra=-1e5", "physics.Ra: expected a positive number"),
    ("physics.Pr=0", "physics.Pr: expected a positive number"),
    ("physics.Pr=-0.7", "physics.Pr: expected a positive number"),
    ("physics.nu=0.1", "give nu or Ra, not both"),
    ("boundary.left.T_gradient=0", "give one temperature condition"),
    ("solver.convection_T=minmod", "solver.convection_T: expected \"upwind\""),
])
def test_bad_thermal_input(override, words):
    assert words in error("heated_cavity", [override])


def test_patch_without_temperature(tmp_path):
    text = load_case("heated_cavity").source.read_text()
    cut = text.replace("T_gradient = 0.0              # adiabatic\n", "")
    assert cut != text
    path = tmp_path / "c.toml"
    path.write_text(cut)
    assert "boundary.bottom: a wall patch needs a temperature condition" in error(path)


@pytest.mark.parametrize("override, key", [
    ("physics.Pr=0.71", "physics.Pr"), ("physics.Ra=1e5", "physics.Ra"),
    ("boundary.left.T=1", "boundary.left.T"),
    ("boundary.top.heat_flux=1", "boundary.top.heat_flux"),
    ("solver.convection_T=van-leer", "solver.convection_T"),
    ("solver.relaxation.T=0.9", "solver.relaxation.T")])
def test_thermal_key_on_incompressible_case(override, key):
    msg = error("cavity", [override])
    assert f": {key}: a thermal key" in msg and 'model = "boussinesq"' in msg


def test_ra_sets_nu_and_round_trips(tmp_path):
    case = load_case("heated_cavity", ["physics.Ra=1e4"])
    assert case.physics.nu == pytest.approx((0.71 / 1e4) ** 0.5, rel=1e-15)
    path = tmp_path / "again.toml"
    path.write_text(case.to_toml())
    assert load_case(path) == case


def stratified_case(tmp_path):
    """The heated cavity turned into a box cold below and warm above (stable), adiabatic
    sides."""
    text = load_case("heated_cavity").source.read_text()
    for old, new in [("T = 1.0 ", "T_gradient = 0.0 "), ("T = 0.0 ", "T_gradient = 0.0 "),
                     ("[boundary.bottom]\ntype = \"wall\"\nT_gradient", "[boundary.bottom]\n"
                      "type = \"wall\"\nT = 0.0\n#"),
                     ("[boundary.top]\ntype = \"wall\"\nT_gradient", "[boundary.top]\n"
                      "type = \"wall\"\nT = 1.0\n#")]:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "stratified.toml"
    path.write_text(text)
    return path


# Steady iterations on a stable stratification need buoyantBoussinesqSimpleFoam's kind of
# relaxation: with SIMPLEC and U 0.9 / T 1 round-off grows by ~15x per iteration (the steady
# temperature and momentum sub-problems feed each other with a gain above 1).
STRATIFIED_SIMPLE = ["solver.consistent=false", "solver.relaxation.U=0.3",
                     "solver.relaxation.p=0.7", "solver.relaxation.T=0.5"]


def _stratified(tmp_path, algorithm, mesh_kind="box"):
    """The stratified box on a graded mesh (``mesh_kind`` "skewed": points moved)."""
    extra = STRATIFIED_SIMPLE if algorithm == "simple" else []
    if algorithm == "piso-backward":
        algorithm, extra = "piso", ["solver.time_scheme=backward"]
    case = load_case(stratified_case(tmp_path), [*extra,
        "postprocess.heated_cavity=false", f"solver.algorithm={algorithm}", "solver.dt=0.1",
        "solver.end_time=1", "mesh.cells=[8,12,1]", "mesh.grading=[1,3,1]",
        "solver.pressure.tol=1e-14", "solver.momentum.tol=1e-14", "solver.pressure.rel_tol=0",
        "solver.momentum.rel_tol=0"])
    m = case.mesh
    mesh = box(m.cells, m.lengths, m.origin, m.grading)
    if mesh_kind == "skewed":
        perturb(mesh, m.cells)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    return solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)


@pytest.mark.parametrize("algorithm", ["piso", "piso-backward", "simple"])
def test_stratified_box_stays_at_rest(tmp_path, algorithm):
    """Buoyancy on faces balanced by p_rgh face by face: |U| below 1e-10 after 20 steps, while
    the reconstructed force is far from zero (the pressure does carry the weight)."""
    s = _stratified(tmp_path, algorithm)
    y = s.lm.geometry.cell_centres[:, 1]
    s.energy.T[:] = y
    state, _ = s.energy.state()
    assert state["T"][0] is s.energy.T  # the state is the live field
    assert ("T_old" in state) == (s.ts.__class__.__name__ == "BDF2")
    s._hydrostatic()  # the balance of this temperature, as at start-up from rest
    for _ in range(20):
        s.step()
    assert np.abs(s.U).max() < 1e-10
    assert np.abs(s.p).max() > 0.1  # the hydrostatic p_rgh
    assert np.allclose(s.energy.T, y, atol=1e-8)  # conduction keeps the linear profile


def test_conduction_from_uniform_temperature_stays_at_rest(tmp_path):
    """Started uniform, the temperature changes by conduction from the top and bottom walls
    only in y: the pressure balances each new stratification, the fluid stays at rest."""
    s = _stratified(tmp_path, "piso")
    s.energy.T[:] = 0.25
    for _ in range(3):
        s.step()
    assert np.ptp(s.energy.T) > 0.1
    assert np.abs(s.U).max() < 1e-12


class Spy:
    """An exchanger that records who exchanged how many fields (the linear solvers' own
    exchanges, from haloflow.linalg, are left out)."""

    def __init__(self, ex):
        self.ex, self.calls = ex, []
        self.overlaps = ex.overlaps

    def _log(self, fields):
        import sys

        f = sys._getframe(2)
        if "linalg" not in f.f_code.co_filename:
            self.calls.append((f.f_code.co_name, len(fields)))

    def exchange(self, fields):
        self._log(fields)
        return self.ex.exchange(fields)

    def start(self, fields):
        self._log(fields)
        return self.ex.start(fields)

    def __getattr__(self, name):
        return getattr(self.ex, name)


@pytest.mark.parametrize("scheme, grad", [("linear", 0), ("van-leer", 2)])
def test_temperature_rides_on_the_existing_exchanges(tmp_path, scheme, grad):
    """One PISO step exchanges at the same points as without heat transfer (each
    correction's H/A and V/A, p and U; the predictor's U travels inside the compiled
    momentum solve), T only as one more field of the first correction's H/A exchange, and a
    limited scheme's gradient of T (2 components) as more fields of the next U exchange."""
    case = load_case("heated_cavity", ["mesh.cells=[6,6,1]", "solver.algorithm=piso",
                                       "solver.dt=0.1", "solver.end_time=1",
                                       "postprocess.heated_cavity=false",
                                       f"solver.convection_T={scheme}"])
    mesh = box(case.mesh.cells)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    spy = Spy(halo.make("packed", lm, SELF))
    s = solver_from_case(lm, case, spy, SELF)
    for _ in range(2):
        spy.calls.clear()
        s.step()
        assert spy.calls == [("predict_fluxes", 4), ("_update_from_pressure", 1),
                             ("_update_from_pressure", 2 + grad), ("predict_fluxes", 2),
                             ("_update_from_pressure", 1), ("_update_from_pressure", 2)]


def test_limited_scheme_restarts_as_if_never_stopped():
    """van Leer's gradient of T is rebuilt from the restored T: 3 + 3 SIMPLE iterations
    through a checkpoint state give the 6 iterations' T bit for bit."""
    case = load_case("heated_cavity", ["mesh.cells=[8,8,1]", "solver.convection_T=van-leer",
                                       "postprocess.heated_cavity=false"])
    mesh = box(case.mesh.cells)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)

    def solver():
        return solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)

    a, b = solver(), solver()
    for _ in range(3):
        a.step()
    arrays, extra = a.checkpoint_state()
    b.restore_state({k: v.copy() for k, (v, _) in arrays.items()}, extra)
    for _ in range(3):
        a.step()
        b.step()
    assert np.ptp(a.energy.T) > 0.5 and np.array_equal(a.energy.T, b.energy.T)
    assert np.array_equal(a.U, b.U)
