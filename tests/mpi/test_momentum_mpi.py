"""The lockstep momentum BiCGStab on 2-3 ranks: the compiled solve (exchanges and fused sums
called from numba) gives the Python path's iterates to the bit, with the same iteration
counts, the same allreduce and exchange counts and the same ghosts after (the solution's
exchange made inside the call), under every halo strategy; and it reproduces the serial
solve of the same system."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.io.probes import gather_cells
from haloflow.linalg import lockstep
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.decompose import decompose
from haloflow.parallel.halo import STRATEGIES
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.reduce import Reducer
from haloflow.physics import solver_from_case

SETTINGS = ["mesh.cells=[7,6,5]", "boundary.front.type=wall", "boundary.back.type=wall",
            "solver.dt=0.05", "solver.convection=linear", "solver.momentum.tol=1e-9"]


def _assembled(lm, comm, strategy):
    """A 3D cavity after two steps, its momentum system assembled (convection in it)."""
    case = load_case("cavity", SETTINGS)
    s = solver_from_case(lm, case, halo.make(strategy, lm, comm), comm)
    for _ in range(2):
        s.step()
    s.ts.begin_step(s.U)
    s._assemble_momentum()
    return s


def _solve(s, python: bool, monkeypatch):
    """The lockstep solve of this state's momentum system from the current velocity, by
    the Python path or the compiled one; (velocity, infos, allreduces, exchanges, fields,
    compiled allreduces)."""
    mo, cfg = s.momentum, s.momentum.cfg
    n = s.lm.n_owned
    with monkeypatch.context() as mp:
        if python:
            mp.setattr(lockstep, "lockstep_plan", lambda *a: None)
        mo.mws.plan_key = None
        mo.mws.rhs[:] = 0.0
        mo.mws.rhs[:, :n] = mo.b0[:, :n] - mo.vol[:n] * s.grad[:, :n]
        U = s.U.copy()
        def counts():  # (the exchanger folds counters kept in compiled code on reading)
            st, rs = mo.M.ex.stats, s.red.stats
            return rs.calls, st.calls, st.fields, rs.compiled

        c0 = counts()
        infos = lockstep.bicgstab_many(mo.M, U, mo.comps, cfg.tol, cfg.max_iter, s.red, mo.mws,
                                     cfg.rel_tol, exchange_after=True)
        c1 = counts()
    return U, infos, *(b - a for a, b in zip(c0, c1, strict=True))


@pytest.mark.parallel(ranks=[2, 3], timeout=300)
def test_compiled_lockstep_equals_python_and_serial(nranks, monkeypatch):
    comm = MPI.COMM_WORLD
    mesh = box((7, 6, 5), (1.0, 1.0, 1.0)) if comm.rank == 0 else None
    parts = decompose(mesh, nranks, "metis") if comm.rank == 0 else None
    lm = distribute(mesh, parts, comm)
    first = None
    for strategy in STRATEGIES:
        s = _assembled(lm, comm, strategy)
        Uc, ic, *cc = _solve(s, False, monkeypatch)
        Up, ip, *cp = _solve(s, True, monkeypatch)
        assert np.array_equal(Uc, Up), strategy  # owned and ghost values
        for a, b in zip(ic, ip, strict=True):
            assert (a.iters, a.res0, a.res, a.converged) == (b.iters, b.res0, b.res,
                                                             b.converged), strategy
        assert cc[:3] == cp[:3] and cc[3] == cc[0] > 0 and cp[3] == 0, (strategy, cc, cp)
        if first is None:
            first = Uc, s
        else:  # every strategy: the same answer to the bit
            assert np.array_equal(Uc, first[0]), strategy
    Uc, s = first
    got = gather_cells(lm, Reducer(comm), *Uc[s.momentum.comps])
    if comm.rank == 0:  # the serial run of the same steps and solve
        ls = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
        ss = _assembled(ls, MPI.COMM_SELF, "aggregated")
        Us = _solve(ss, False, monkeypatch)[0]
        for d, g in zip(ss.momentum.comps, got, strict=True):
            ref = Us[d, :ls.n_owned]
            err = np.abs(g - ref).max() / np.abs(ref).max()
            assert err < 1e-6, (d, err)
