"""The velocity components solved in lockstep give each component's own BiCGStab solve to the
bit: compiled on one rank (sums only counted), compiled as a parallel run makes it (its
allreduces called from numba, on COMM_SELF), and on the Python path (the fallback where
compiled MPI is not available)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.linalg import lockstep, lockstep_compiled
from haloflow.linalg.bicgstab import bicgstab
from haloflow.linalg.lockstep import bicgstab_many
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case


@pytest.fixture(scope="module")
def cavity():
    """A 3D cavity after a few steps: a momentum matrix with convection in it."""
    case = load_case("cavity", ["mesh.cells=[7,6,5]", "boundary.front.type=wall",
                                "boundary.back.type=wall", "solver.dt=0.05",
                                "solver.convection=linear", "solver.momentum.tol=1e-9"])
    m = box(case.mesh.cells, case.mesh.lengths)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("aggregated", lm, MPI.COMM_SELF), MPI.COMM_SELF)
    for _ in range(3):
        s.step()
    s.ts.begin_step(s.U)
    s._assemble_momentum()
    return s


def _one_by_one(s, rhs, U0):
    mo, cfg = s.momentum, s.momentum.cfg
    U = U0.copy()
    infos = []
    for d in mo.comps:
        mo.rhs[:] = rhs[d]
        infos.append(bicgstab(mo.M, mo.rhs, U[d], cfg.tol, cfg.max_iter, mo.red, mo.ws, None,
                              cfg.rel_tol))
    return U, infos


@pytest.mark.parametrize("compiled", ["serial", "parallel", "python"])
@pytest.mark.parametrize("zero_rhs", [None, 1])
def test_lockstep_equals_each_component_alone(cavity, monkeypatch, compiled, zero_rhs):
    """Same iterates, residuals, iteration counts and allreduce count as three separate
    solves; a component that starts converged (zero right-hand side) is left alone."""
    s = cavity
    mo, cfg = s.momentum, s.momentum.cfg
    if compiled != "serial":  # the paths a parallel run takes (allreduces on COMM_SELF)
        monkeypatch.setattr(s.red, "parallel", True)
    if compiled == "python":
        monkeypatch.setattr(lockstep, "lockstep_plan", lambda *a: None)
    mo.mws.plan_key = None
    compiled_before = s.red.stats.compiled
    rhs = np.zeros_like(s.U)
    n = s.lm.n_owned
    rhs[:, :n] = mo.b0[:, :n] - mo.vol[:n] * s.grad[:, :n]
    U0 = s.U.copy()
    if zero_rhs is not None:
        rhs[zero_rhs] = 0.0
        U0[zero_rhs] = 0.0
    else:  # w starts near its solution: the components finish at different iterations
        sol = _one_by_one(s, rhs, U0)[0]
        U0[2] = sol[2] + 1e-3 * (U0[2] - sol[2])
    U_ref, ref = _one_by_one(s, rhs, U0)
    assert len({i.iters for i in ref}) > 1
    mo.mws.rhs[:] = rhs
    U = U0.copy()
    before = s.red.n_calls
    infos = bicgstab_many(mo.M, U, mo.comps, cfg.tol, cfg.max_iter, s.red, mo.mws,
                          cfg.rel_tol)
    calls = s.red.n_calls - before
    made = s.red.stats.compiled - compiled_before
    assert made == (calls if compiled == "parallel" else 0)
    assert (mo.mws.plan is None) == (compiled == "python")
    assert np.array_equal(U[:, :n], U_ref[:, :n])
    for a, b in zip(infos, ref, strict=True):
        assert (a.iters, a.res0, a.res, a.converged) == (b.iters, b.res0, b.res, b.converged)
    assert a.converged
    # one allreduce to start, then r0.v, (t.s, t.t, s.s) and (r0.r, r.r) per iteration while
    # a component goes on (the last only if one is left after the s check)
    assert 1 + 2 * max(i.iters for i in ref) <= calls <= 1 + 3 * max(i.iters for i in ref)


@pytest.mark.parametrize("parallel", [False, True])
def test_lockstep_on_thread_blocks_equals_each_component_alone(cavity, monkeypatch, parallel):
    """The compiled lockstep solve on 3 thread blocks (``linalg/blocks.py``; their arithmetic
    does not depend on how many threads run them): the partial sums add in block order, so
    the iterates equal the separate solves' to round-off, with the same iterations and as
    many allreduces as on one block."""
    s = cavity
    mo, cfg = s.momentum, s.momentum.cfg
    monkeypatch.setattr(s.red, "parallel", parallel)
    monkeypatch.setattr(lockstep_compiled.threads, "blocks", lambda: 3)
    monkeypatch.setattr(lockstep_compiled.threads, "LEVEL_MIN_ROWS", 1)
    mo.mws.plan_key = None
    rhs = np.zeros_like(s.U)
    n = s.lm.n_owned
    rhs[:, :n] = mo.b0[:, :n] - mo.vol[:n] * s.grad[:, :n]
    U0 = s.U.copy()
    U_ref, ref = _one_by_one(s, rhs, U0)
    mo.mws.rhs[:] = rhs
    U = U0.copy()
    before = s.red.n_calls
    infos = bicgstab_many(mo.M, U, mo.comps, cfg.tol, cfg.max_iter, s.red, mo.mws,
                          cfg.rel_tol)
    calls = s.red.n_calls - before
    assert mo.mws.plan.ctl[lockstep_compiled.C_NT] == 3
    assert not np.array_equal(U[:, :n], U_ref[:, :n])  # the sums' order differs
    assert np.abs(U[:, :n] - U_ref[:, :n]).max() < 1e-12 * np.abs(U_ref).max()
    for a, b in zip(infos, ref, strict=True):
        assert a.iters == b.iters and a.converged and b.converged
        assert a.res == pytest.approx(b.res, rel=1e-6)
    assert 1 + 2 * max(i.iters for i in ref) <= calls <= 1 + 3 * max(i.iters for i in ref)
    mo.mws.plan_key = None  # the next test makes its own plan
