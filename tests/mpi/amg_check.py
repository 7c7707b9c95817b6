"""Run under mpiexec: distributed AMG-FCG equals the serial solve; prints OK on success.

Default: for a Dirichlet and an all-Neumann finite-volume Laplacian on a 2D and a 3D box, each
rank solves its part with the distributed AMG (coarse levels exchanged through the halo
interface, gathered onto rank 0 when small); rank 0 compares the gathered answer with the
serial AMG solve of the whole problem on COMM_SELF and with a direct solve, and checks that
the hierarchy has the serial run's level sizes (aggregates do not depend on the partition).

``--iterations``: on a 2D Laplacian cut by METIS (jagged interfaces), AMG-FCG to 1e-6 needs
at most ceil(1.2 x serial) + 1 iterations (rank-local aggregation needed 1.3-1.7x).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import scipy.sparse.linalg as spla
from mpi4py import MPI

from haloflow.io.probes import gather_cells
from haloflow.linalg import krylov as K
from haloflow.linalg.amg import AMG
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.reduce import Reducer


def system(lm, comm, dirichlet):
    A = laplacian(lm, comm, fixed=("left", "bottom") if dirichlet else ())
    return A, smooth_rhs(lm, Reducer(comm), zero_mean=not dirichlet)


def solve(lm, comm, dirichlet, tol=1e-10):
    A, b = system(lm, comm, dirichlet)
    amg = AMG(A, lm, Reducer(comm))
    amg.refresh()
    x = np.zeros(lm.n_cells)
    info = K.fcg(A, b, x, tol, 200, Reducer(comm), K.Workspace(lm.n_cells, lm.n_owned, 8),
                 amg.apply)
    if not dirichlet:
        x[: lm.n_owned] -= comm.allreduce(x[: lm.n_owned].sum()) / lm.n_cells_global
    return x, info, amg, A, b


def split(cells, comm):
    mesh = box(cells) if comm.rank == 0 else None
    parts = decompose(mesh, comm.size, "metis") if comm.rank == 0 else None
    return mesh, distribute(mesh, parts, comm)


def serial(mesh):
    return build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)


def check_answers(comm, fails):
    for cells in ((48, 40, 1), (12, 10, 9), (144, 120, 1)):
        mesh, lm = split(cells, comm)
        for dirichlet in (True, False):
            x, info, amg, A, b = solve(lm, comm, dirichlet)
            (xg,) = gather_cells(lm, comm, x)
            (bg,) = gather_cells(lm, comm, b)
            if comm.rank != 0:
                continue
            ls = serial(mesh)
            xs, info_s, amg_s, As, _ = solve(ls, MPI.COMM_SELF, dirichlet)
            err = np.abs(xg - xs[: ls.n_owned]).max() / np.abs(xs).max()
            what = f"{cells} dirichlet={dirichlet}"
            rows, rows_s = [lev.rows for lev in amg.levels], [lev.n for lev in amg_s.levels]
            print(f"{what}: iters {info.iters} (serial {info_s.iters}), rel. diff {err:.2e}, "
                  f"levels {rows}")
            if not info.converged or err > 1e-8:
                fails.append(f"{what}: not converged or differs ({err:.2e})")
            if rows != rows_s:
                fails.append(f"{what}: levels {rows}, serial {rows_s}")
            if info.iters > 1.2 * info_s.iters + 1:
                fails.append(f"{what}: {info.iters} iterations vs {info_s.iters} serial")
            if dirichlet:  # against a direct solve of the same (gathered, serial-order) matrix
                ref = spla.spsolve(As.to_scipy().tocsc(), bg)
                derr = np.abs(xg - ref).max() / np.abs(ref).max()
                if derr > 1e-8:
                    fails.append(f"{what}: differs from the direct solve ({derr:.2e})")


def check_iterations(comm, fails):
    for cells in ((128, 128, 1), (96, 96, 1)):
        mesh, lm = split(cells, comm)
        _, info, _, _, _ = solve(lm, comm, dirichlet=False, tol=1e-6)
        if comm.rank != 0:
            continue
        _, info_s, _, _, _ = solve(serial(mesh), MPI.COMM_SELF, dirichlet=False, tol=1e-6)
        limit = math.ceil(1.2 * info_s.iters) + 1
        print(f"{cells} METIS on {comm.size} ranks: {info.iters} iterations to 1e-6, serial "
              f"{info_s.iters} (limit {limit})")
        if not info.converged or info.iters > limit:
            fails.append(f"{cells}: {info.iters} iterations vs {info_s.iters} serial")


def main() -> None:
    comm = MPI.COMM_WORLD
    fails = []
    if "--iterations" in sys.argv:
        check_iterations(comm, fails)
    else:
        check_answers(comm, fails)
    fails = comm.bcast(fails, root=0)
    if fails:
        if comm.rank == 0:
            print("FAIL: " + "; ".join(fails))
        sys.stdout.flush()
        comm.Abort(1)
    if comm.rank == 0:
        print("OK")


if __name__ == "__main__":
    main()
