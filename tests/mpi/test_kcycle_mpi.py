"""The compiled pressure solve on 2-3 ranks (halo exchanges, spanning-aggregate transfers,
allreduces and the redundant level's allgatherv called from numba) against the Python path
(flexible.fcg / flexible.cg1 with AMG.apply) on the same distributed hierarchy: same iterations,
same answer to round-off, same counters; and both against the serial solve."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.linalg import flexible, kcycle
from haloflow.linalg import krylov as K
from haloflow.linalg import lowsync as L
from haloflow.linalg.amg import AMG
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.reduce import Reducer
from tests.mpi.conftest import require_c_mpi


def _counters(amg, exs):
    rd = [lev.next.redundant for lev in amg.levels if lev.next is not None
          and lev.next.redundant is not None]
    return (amg.red.stats.calls, [lev.calls for lev in amg.levels],
            [(ex.stats.calls, ex.stats.messages, ex.stats.bytes) for ex in exs],
            amg.allgathers, [r.rhs.calls for r in rd])


def _reset(amg, exs):
    amg.red.stats.calls = amg.allgathers = 0
    for lev in amg.levels:
        lev.calls = 0
        if lev.next is not None and lev.next.redundant is not None:
            lev.next.redundant.rhs.calls = 0
    for ex in exs:
        st = ex.stats
        st.calls = st.fields = st.messages = st.bytes = 0


@pytest.mark.parallel(ranks=[2, 3], timeout=300)
def test_compiled_solve_matches_python_path(nranks):
    comm = MPI.COMM_WORLD
    require_c_mpi()
    for cells, dirichlet in (((48, 40, 1), False), ((14, 12, 10), True),
                             ((20, 20, 20), False)):
        mesh = box(cells) if comm.rank == 0 else None
        parts = decompose(mesh, comm.size, "metis") if comm.rank == 0 else None
        lm = distribute(mesh, parts, comm)
        A = laplacian(lm, comm, fixed=("left", "bottom") if dirichlet else (),
                      strategy="aggregated")
        b = smooth_rhs(lm, Reducer(comm), zero_mean=not dirichlet)
        ws = K.Workspace(lm.n_cells, lm.n_owned, 8)
        ws.reserve(L.PIPECG_VECTORS)
        amg = AMG(A, lm, Reducer(comm), strategy="aggregated")
        exs = [A.ex] + amg.coarse_exchangers()
        for krylov in (flexible.fcg, flexible.cg1):
            _reset(amg, exs)
            x1 = np.zeros(lm.n_cells)
            i1 = krylov(A, b, x1, 1e-9, 200, amg.red, ws, amg.apply)
            c1 = _counters(amg, exs)
            fast = kcycle.compiled_solver(amg, krylov)
            assert fast is not None
            # the replicated coarsest level: the Cholesky, on both paths
            assert amg.levels[-1].chol and not fast.serial_hierarchy
            _reset(amg, exs)
            x2 = np.zeros(lm.n_cells)
            i2 = fast.solve(b, x2, 1e-9, 200, ws)
            assert _counters(amg, exs) == c1, (cells, krylov.__name__)
            assert i2.iters == i1.iters and i2.converged, (cells, krylov.__name__)
            n = lm.n_owned
            big = comm.allreduce(np.abs(x1[:n]).max(), op=MPI.MAX)
            diff = comm.allreduce(np.abs(x1[:n] - x2[:n]).max(), op=MPI.MAX)
            assert diff < 1e-11 * big, (cells, krylov.__name__, diff / big)
            fast.refresh()  # AMG.refresh of a parallel hierarchy, the Cholesky again
            x3 = np.zeros(lm.n_cells)
            assert fast.solve(b, x3, 1e-9, 200, ws).iters == i1.iters
            diff = comm.allreduce(np.abs(x3[:n] - x2[:n]).max(), op=MPI.MAX)
            assert diff < 1e-12 * big


@pytest.mark.parallel(ranks=[2, 4], timeout=300)
def test_coarse_cycles_match_serial_and_each_other(nranks):
    """K-cycle and AMLI coarse correction, compiled cg1 on 2 and 4 ranks: each converges
    in its serial iteration count +-1 to the serial answer (1e-8 relative), AMLI in the
    K-cycle's +-1 with one reduction per iteration."""
    comm = MPI.COMM_WORLD
    require_c_mpi()
    cells = (20, 20, 20)
    mesh = box(cells)
    lm = distribute(mesh if comm.rank == 0 else None,
                    decompose(mesh, comm.size, "metis") if comm.rank == 0 else None, comm)
    ls = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    its = {}
    for cycle in ("K", "A"):
        sol = []
        for m, c in ((lm, comm), (ls, MPI.COMM_SELF)):
            A = laplacian(m, c, fixed=("left",))
            b = smooth_rhs(m, Reducer(c))
            ws = K.Workspace(m.n_cells, m.n_owned, 8)
            amg = AMG(A, m, Reducer(c), cycle=cycle)
            fast = kcycle.compiled_solver(amg, flexible.cg1)
            amg.red.stats.calls = 0
            x = np.zeros(m.n_cells)
            info = fast.solve(b, x, 1e-11, 200, ws)
            assert info.converged, cycle
            sol.append((info.iters, amg.red.stats.calls, x[:m.n_owned],
                        np.asarray(m.global_cells[:m.n_owned])))
        (ip, rp, xp, gp), (i_s, _, xs, gs) = sol
        assert abs(ip - i_s) <= 1, (cycle, ip, i_s)
        ref = np.empty(len(xs))
        ref[gs] = xs
        err = comm.allreduce(np.abs(xp - ref[gp]).max(), op=MPI.MAX)
        assert err <= 1e-8 * np.abs(ref).max(), (cycle, err)
        its[cycle] = (ip, rp)
    assert abs(its["A"][0] - its["K"][0]) <= 1, its
    assert its["A"][1] == its["A"][0] + 1, its
