"""Run under mpiexec: distributed AMG-FCG equals the serial solve; prints OK on success.

For a Dirichlet and an all-Neumann finite-volume Laplacian on a 2D and a 3D box, each rank
solves its part with the distributed AMG (coarse levels exchanged through the halo interface,
gathered onto rank 0 when small); rank 0 compares the gathered answer with the serial AMG
solve of the whole problem on COMM_SELF.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from haloflow.io.probes import gather_cells
from haloflow.linalg import krylov as K
from haloflow.linalg.amg import AMG
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute


def system(lm, comm, dirichlet):
    A = laplacian(lm, comm, fixed=("left", "bottom") if dirichlet else ())
    return A, smooth_rhs(lm, comm, zero_mean=not dirichlet)


def solve(lm, comm, dirichlet):
    A, b = system(lm, comm, dirichlet)
    amg = AMG(A, lm, comm)
    amg.refresh()
    x = np.zeros(lm.n_cells)
    info = K.fcg(A, b, x, 1e-10, 200, K.Reducer(comm), K.Workspace(lm.n_cells, lm.n_owned, 8),
                 amg.apply)
    if not dirichlet:
        x[: lm.n_owned] -= comm.allreduce(x[: lm.n_owned].sum()) / lm.n_cells_global
    return x, info


def main() -> None:
    comm = MPI.COMM_WORLD
    fails = []
    for cells in ((48, 40, 1), (12, 10, 9)):
        mesh = box(cells) if comm.rank == 0 else None
        parts = decompose(mesh, comm.size, "metis") if comm.rank == 0 else None
        lm = distribute(mesh, parts, comm)
        for dirichlet in (True, False):
            x, info = solve(lm, comm, dirichlet)
            (xg,) = gather_cells(lm, comm, x)
            if comm.rank == 0:
                ls = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
                xs, info_s = solve(ls, MPI.COMM_SELF, dirichlet)
                err = np.abs(xg - xs[: ls.n_owned]).max() / np.abs(xs).max()
                what = f"{cells} dirichlet={dirichlet}"
                print(f"{what}: iters {info.iters} (serial {info_s.iters}), rel. diff {err:.2e}")
                if not info.converged or err > 1e-8:
                    fails.append(f"{what}: not converged or differs ({err:.2e})")
                if info.iters > 1.6 * info_s.iters + 1:
                    fails.append(f"{what}: {info.iters} iterations vs {info_s.iters} serial")
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
