"""Solver tolerances as OpenFOAM sets them: relTol on PISO's intermediate pressure solves,
the final tolerance on the last (p / pFinal); momentum by symmetric Gauss-Seidel sweeps;
the memory figures of summary.json."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.linalg import smoother
from haloflow.linalg.bicgstab import bicgstab
from haloflow.linalg.krylov import Workspace
from haloflow.linalg.lockstep_kernels import ManyWorkspace
from haloflow.linalg.matrix import DistMatrix, Pattern
from haloflow.linalg.smoother import sgs, sgs_many
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer
from haloflow.physics import solver_from_case
from haloflow.run import memory

COMM = MPI.COMM_SELF
TOL = 1e-8


def _solver(*overrides, name="cavity", n=12):
    case = load_case(name, [f"mesh.cells=[{n},{n},1]", *overrides])
    m = box(case.mesh.cells, case.mesh.lengths)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    return solver_from_case(lm, case, halo.make("packed", lm, COMM), COMM)


@pytest.mark.parametrize("method", ["amg-cg", "cg-jacobi"])
def test_last_corrector_solves_to_tol_the_others_to_rel_tol(method):
    """rel_tol 0.5 stops the first corrector's solve early; the last one goes to tol
    unless final_rel_tol says otherwise."""
    s = _solver(f"solver.pressure.method={method}", f"solver.pressure.tol={TOL}",
                "solver.pressure.rel_tol=0.5", "solver.n_correctors=3")
    for _ in range(3):
        first, middle, last = s.step().p_solves
        assert TOL < first.res <= 0.5 * first.res0
        assert TOL < middle.res <= 0.5 * middle.res0
        assert last.res <= TOL and last.converged
    s = _solver(f"solver.pressure.method={method}", f"solver.pressure.tol={TOL}",
                "solver.pressure.rel_tol=0.5", "solver.pressure.final_rel_tol=0.5")
    s.step()
    last = s.step().p_solves[-1]
    assert TOL < last.res <= 0.5 * last.res0


def test_final_rel_tol_applies_to_the_last_nonorthogonal_solve_only():
    """With non-orthogonal correctors (forced on a box, whose corrections are zero) only
    the last solve of the last corrector takes final_rel_tol."""
    s = _solver("solver.n_correctors=2", "solver.pressure.rel_tol=0.25",
                "solver.pressure.final_rel_tol=0.125")
    pr = s.pressure
    pr.nonorth, pr.n_nonorth, pr.phiH0 = True, 2, np.zeros(s.lm.n_faces)
    pr.fc.corr = np.zeros((s.lm.n_internal, 3))  # a box's are zero and not kept
    seen, solve = [], pr._solve
    pr._solve = lambda first, rel_tol, *last: seen.append(rel_tol) or solve(first, rel_tol,
                                                                             *last)
    s.step()
    assert seen == [0.25] * 5 + [0.125]


def test_simple_keeps_rel_tol_on_its_one_correction():
    """simpleFoam solves p to relTol, not pFinal: SIMPLE's correction is not a final one."""
    s = _solver("solver.pressure.rel_tol=0.5", f"solver.pressure.tol={TOL}",
                name="channel", n=12)
    assert s.algorithm == "simple"
    s.step()
    (info,) = s.step().p_solves
    assert TOL < info.res <= 0.5 * info.res0


def test_defaults_give_the_same_bits():
    """final_rel_tol 0 (the default) solves every corrector as before: identical fields."""
    a = _solver()
    b = _solver("solver.pressure.final_rel_tol=0.0", "solver.pressure.rel_tol=0.0")
    for _ in range(3):
        a.step()
        b.step()
    assert np.array_equal(a.U, b.U) and np.array_equal(a.p, b.p)


def _momentum_system():
    """A convection-diffusion matrix with a time term, as PISO's momentum equation."""
    m = box((9, 7, 4), (1.0, 0.8, 0.5))
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2.0, m.n_internal)
    c = rng.uniform(-0.8, 0.8, m.n_internal)
    lower, upper = -a * (1 + c), -a * (1 - c)
    diag = np.full(m.n_cells, 2.0)
    np.add.at(diag, m.owner[:m.n_internal], -upper)
    np.add.at(diag, m.neighbour, -lower)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    A = DistMatrix(Pattern(lm), halo.make("packed", lm, COMM))
    A.fill(diag, lower, upper)
    return lm, A, rng.standard_normal(m.n_cells)


@pytest.mark.parametrize("n_sweeps", [1, 3])
def test_sgs_converges_to_tol_and_matches_bicgstab(n_sweeps):
    lm, A, b = _momentum_system()
    ws = Workspace(lm.n_cells, lm.n_owned, 8)
    x = np.zeros(lm.n_cells)
    info = sgs(A, b, x, 1e-10, 1000, Reducer(COMM), ws, n_sweeps=n_sweeps)
    assert info.converged and info.res <= 1e-10 and info.iters % n_sweeps == 0
    r = np.zeros(lm.n_cells)
    A.residual(x, b, r)
    assert np.linalg.norm(r) / np.linalg.norm(b) == pytest.approx(info.res, rel=1e-9)
    y = np.zeros(lm.n_cells)
    bicgstab(A, b, y, 1e-12, 1000, Reducer(COMM), ws)
    assert np.abs(x - y).max() <= 1e-8 * np.abs(y).max()
    x2 = np.zeros(lm.n_cells)  # rel_tol stops early, max_iter stops unconverged
    rel = sgs(A, b, x2, 1e-12, 1000, Reducer(COMM), ws, rel_tol=1e-3)
    assert 1e-12 < rel.res <= 1e-3 * rel.res0 and rel.iters < info.iters
    capped = sgs(A, b, np.zeros(lm.n_cells), 1e-14, 2, Reducer(COMM), ws)
    assert not capped.converged and capped.iters == 2


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize(("comps", "n_sweeps"), [((0, 1, 2), 1), ((0, 1), 2), ((2,), 1)])
def test_lockstep_sgs_is_each_components_sgs(comps, n_sweeps, compiled, monkeypatch):
    """sgs_many sweeps every component reading the matrix once: each component's sweeps,
    residuals and answer are its own sgs solve's, to the bit, including components that
    converge at different sweeps (different right-hand side scales and a converged start)."""
    lm, A, b = _momentum_system()
    n = lm.n_cells
    mws = ManyWorkspace(n, lm.n_owned)
    X = np.zeros((3, n))
    comps = np.array(comps, dtype=np.int64)
    rng = np.random.default_rng(2)
    for j, d in enumerate(comps):
        mws.rhs[d] = b * 10.0 ** j + rng.standard_normal(n)
    if len(comps) == 3:  # the last one starts at its answer
        x = np.zeros(n)
        sgs(A, mws.rhs[2].copy(), x, 1e-12, 1000, Reducer(COMM), Workspace(n, lm.n_owned, 8))
        X[2] = x
    want, infos = X.copy(), []
    for d in comps:
        infos.append(sgs(A, mws.rhs[d].copy(), want[d], 1e-7, 1000, Reducer(COMM),
                         Workspace(n, lm.n_owned, 8), n_sweeps=n_sweeps))
    red = Reducer(COMM)
    if not compiled:  # as on a threaded rank: component by component from Python
        monkeypatch.setattr(smoother, "compiled_lockstep", lambda *a: None)
    got = sgs_many(A, X, comps, 1e-7, 1000, red, mws, n_sweeps=n_sweeps)
    assert got == infos
    np.testing.assert_array_equal(X[comps], want[comps])
    if len(comps) == 3:
        assert infos[2].iters == 0 < infos[0].iters
    if compiled:  # one fused sum per check for all components
        assert red.stats.calls == 1 + max(i.iters for i in infos) // n_sweeps
    else:
        assert red.stats.calls == sum(1 + i.iters // n_sweeps for i in infos)


def test_sgs_momentum_reaches_the_same_steady_cavity():
    """The cavity to steady state with either momentum solver: the same field to 1e-6."""
    fields = []
    for method in ("bicgstab-jacobi", "sgs"):
        s = _solver(f"solver.momentum.method={method}", n=16)
        for _ in range(2000):
            info = s.step()
            if s.converged(info):
                break
        assert s.converged(info)
        assert all(u.res <= s.momentum.cfg.tol for u in info.u_solves)
        fields.append(s.U.copy())
    assert np.abs(fields[0] - fields[1]).max() < 1e-6


def test_memory_figures():
    """The peak is at least the current RSS (the kernel updates its high-water mark
    lazily, so ``ru_maxrss`` alone may trail it by a little) and at least the base; the
    per-cell figure takes the worst rank."""
    now, peak = memory.rss_bytes(), memory.peak_rss_bytes()
    assert 0 < now <= peak and peak > 10 << 20
    s = memory.summary([(100 << 20, 300 << 20, 1000), (50 << 20, 100 << 20, 10)])
    assert s["base_rss_mb"] == 100 and s["peak_rss_mb"] == 300
    assert s["rss_bytes_per_cell"] == (50 << 20) / 10  # the second rank: fewer cells
    # a base read above a lagging high-water mark: the peak is the base, not below it
    s = memory.summary([(458 << 20, (458 << 20) - 400_000, 64)])
    assert s["peak_rss_mb"] == s["base_rss_mb"] == 458 and s["rss_bytes_per_cell"] == 0


def test_summary_reports_memory(tmp_path):
    """A run's summary.json carries the memory figures, consistent with each other."""
    from haloflow.run import run_case

    case = load_case("cavity", ["mesh.cells=[8,8,1]", "solver.max_steps=2",
                                "output.plots=false", "output.fields=false"])
    s = run_case(case, tmp_path / "run", COMM, quiet=True)
    assert 10 < s["base_rss_mb"] <= s["peak_rss_mb"] < 10_000
    per_cell = s["rss_bytes_per_cell"]
    assert per_cell == pytest.approx((s["peak_rss_mb"] - s["base_rss_mb"]) * memory.MIB / 64)
