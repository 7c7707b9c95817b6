"""Distributed AMG-FCG on 2-4 ranks equals the serial solve (bodies run under mpiexec).

For a Dirichlet and an all-Neumann finite-volume Laplacian on a 2D and a 3D box, each rank
solves its part with the distributed AMG (coarse levels exchanged through the halo interface,
replicated on every rank when small); rank 0 compares the gathered answer with the serial AMG
solve of the whole problem on COMM_SELF and with a direct solve, and checks that the
hierarchy has the serial run's level sizes (aggregates do not depend on the partition).

On a 2D Laplacian cut by METIS (jagged interfaces), AMG-FCG to 1e-6 needs at most
ceil(1.2 x serial) + 1 iterations (rank-local aggregation needed 1.3-1.7x).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from mpi4py import MPI

from haloflow.io.probes import gather_cells
from haloflow.linalg import flexible
from haloflow.linalg import krylov as K
from haloflow.linalg.amg import AMG
from haloflow.linalg.amg_kernels import l1_inverse
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.reduce import Reducer


def _solve(lm, comm, dirichlet, tol=1e-10):
    A = laplacian(lm, comm, fixed=("left", "bottom") if dirichlet else ())
    b = smooth_rhs(lm, Reducer(comm), zero_mean=not dirichlet)
    amg = AMG(A, lm, Reducer(comm))
    amg.refresh()
    x = np.zeros(lm.n_cells)
    info = flexible.fcg(A, b, x, tol, 200, K.Reducer(comm), K.Workspace(lm.n_cells, lm.n_owned, 8),
                 amg.apply)
    if not dirichlet:
        x[: lm.n_owned] -= comm.allreduce(x[: lm.n_owned].sum()) / lm.n_cells_global
    return x, info, amg, A, b


def _split(cells, comm):
    mesh = box(cells) if comm.rank == 0 else None
    parts = decompose(mesh, comm.size, "metis") if comm.rank == 0 else None
    return mesh, distribute(mesh, parts, comm)


def _serial(mesh):
    return build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)


@pytest.mark.parallel(ranks=[2, 3, 4], timeout=180)
def test_distributed_amg_matches_serial(nranks):
    comm = MPI.COMM_WORLD
    assert comm.size == nranks
    for cells in ((48, 40, 1), (12, 10, 9), (144, 120, 1)):
        mesh, lm = _split(cells, comm)
        for dirichlet in (True, False):
            x, info, amg, _, b = _solve(lm, comm, dirichlet)
            for lev in amg.levels:  # refreshed reading whole rows only where they have ghosts
                full = np.zeros(lev.n)
                l1_inverse(lev.indptr, lev.indices, lev.data, lev.diag_pos, lev.n, full)
                assert np.array_equal(lev.dinv[: lev.n], full)
            (xg,) = gather_cells(lm, comm, x)
            (bg,) = gather_cells(lm, comm, b)
            if comm.rank != 0:
                continue
            what = f"{cells} dirichlet={dirichlet}"
            ls = _serial(mesh)
            xs, info_s, amg_s, As, _ = _solve(ls, MPI.COMM_SELF, dirichlet)
            err = np.abs(xg - xs[: ls.n_owned]).max() / np.abs(xs).max()
            assert info.converged and err <= 1e-8, (what, info, err)
            assert [lev.rows for lev in amg.levels] == [lev.n for lev in amg_s.levels], what
            assert info.iters <= 1.2 * info_s.iters + 1, (what, info.iters, info_s.iters)
            if dirichlet:  # against a direct solve of the same (gathered, serial-order) matrix
                ref = spla.spsolve(As.to_scipy().tocsc(), bg)
                assert np.abs(xg - ref).max() / np.abs(ref).max() <= 1e-8, what


@pytest.mark.parallel(ranks=[2, 3], timeout=180)
def test_metis_partitions_keep_serial_iterations(nranks):
    """Jagged METIS interfaces: at most ceil(1.2 x serial) + 1 iterations (2D, to 1e-6)."""
    comm = MPI.COMM_WORLD
    assert comm.size == nranks
    for cells in ((128, 128, 1), (96, 96, 1)):
        mesh, lm = _split(cells, comm)
        _, info, _, _, _ = _solve(lm, comm, dirichlet=False, tol=1e-6)
        if comm.rank != 0:
            continue
        _, info_s, _, _, _ = _solve(_serial(mesh), MPI.COMM_SELF, dirichlet=False, tol=1e-6)
        assert info.converged, cells
        assert info.iters <= math.ceil(1.2 * info_s.iters) + 1, (cells, info.iters, info_s.iters)


@pytest.mark.parallel(ranks=[2, 3, 4], timeout=240)
def test_redundant_coarse_solve_is_the_same_on_every_rank(nranks):
    """Every rank holds the whole coarse level and solves it: the same right-hand side and
    solution bit for bit on every rank, one allgather per visit (as many as a serial run
    counts), the serial run's level sizes and answer, whether the replicated level is the
    coarsest (default) or has serial levels below it (``gather_below`` 1000), and with
    rank-local aggregation."""
    comm = MPI.COMM_WORLD
    assert comm.size == nranks
    for cells in ((48, 40, 1), (14, 12, 10)):
        mesh, lm = _split(cells, comm)
        A = laplacian(lm, comm)
        b = smooth_rhs(lm, Reducer(comm), zero_mean=True)
        for kw in ({}, {"gather_below": 1000}, {"aggregation": "local"}):
            what = f"{cells} {kw}"
            amg = AMG(A, lm, Reducer(comm), **kw)
            amg.refresh()
            x = np.zeros(lm.n_cells)
            info = flexible.fcg(A, b, x, 1e-8, 200, K.Reducer(comm),
                         K.Workspace(lm.n_cells, lm.n_owned, 8), amg.apply)
            fr = amg.first_redundant
            red = amg.levels[fr]
            assert red.ex is None and red.n == red.rows, what
            for v in (red.b[: red.n], red.x[: red.n], red.data):
                first = comm.bcast(v if comm.rank == 0 else None, root=0)
                assert np.array_equal(v, first), what  # identical on every rank
            rd = amg.levels[fr - 1].next.redundant
            assert rd.rhs.calls == amg.allgathers > 0, what
            assert list(rd.rhs.counts) == comm.allgather(rd.n), what
            assert comm.allgather(amg.profile()) == [amg.profile()] * nranks, what
            x[: lm.n_owned] -= comm.allreduce(x[: lm.n_owned].sum()) / lm.n_cells_global
            (xg,) = gather_cells(lm, comm, x)
            if comm.rank != 0:
                continue
            ls = _serial(mesh)
            As = laplacian(ls, MPI.COMM_SELF)
            bs = smooth_rhs(ls, Reducer(MPI.COMM_SELF), zero_mean=True)
            amg_s = AMG(As, ls, Reducer(MPI.COMM_SELF), **kw)
            amg_s.refresh()
            xs = np.zeros(ls.n_cells)
            info_s = flexible.fcg(As, bs, xs, 1e-8, 200, K.Reducer(MPI.COMM_SELF),
                           K.Workspace(ls.n_cells, ls.n_owned, 8), amg_s.apply)
            xs -= xs[: ls.n_owned].mean()
            assert info.converged and np.abs(xg - xs[: ls.n_owned]).max() <= \
                1e-6 * np.abs(xs).max(), what
            if "aggregation" not in kw:  # partition-independent hierarchy
                assert [lev.rows for lev in amg.levels] == [lev.n for lev in amg_s.levels], what
                assert amg_s.first_redundant == fr, what
                assert info.iters <= info_s.iters + 1, (what, info.iters, info_s.iters)
