"""Symmetric Gauss-Seidel iterated to a tolerance: the momentum solver OpenFOAM uses.

A momentum matrix is strongly diagonally dominant at the time steps PISO takes, so a few
forward-and-backward sweeps reach the residual a Krylov method would (OpenFOAM's smoothSolver
with symGaussSeidel), with one halo exchange and one reduction per residual check.  A sweep
is sequential, so it is not the cheaper solver everywhere: on the 3D cavity at 24^3 cells and
Courant number 0.5 it needs as many sweeps as BiCGStab-Jacobi needs iterations and takes
1.4x its time per solve on one rank (docs/case-reference.md).  Couplings to other ranks
are explicit, as across OpenFOAM's processor patches: ghost values are exchanged before each
sweep and held fixed during it, so the iterates depend on the partition but the converged
solution does not.  The residual is checked every ``n_sweeps`` sweeps, relative to ``||b||``
as the Krylov solvers (:mod:`.krylov`) measure it, so ``tol`` and ``rel_tol`` mean the same
there and here.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..parallel.reduce import Reducer
from .krylov import SolveInfo, Workspace, initial_info


@nb.njit(cache=True)
def _symmetric_sweep(indptr, indices, data, invd, b, x, n):
    """Gauss-Seidel forward then backward over the owned rows, ghost values held fixed:
    ``x_i += (b - A x)_i / a_ii`` with the latest values.  The row sum runs over every
    column, the diagonal's included, and multiplies by the inverse diagonal: no branch and
    no division on the chain from one row to the next (with the AMG's ``gs_sweep``, which
    has both, a momentum solve takes a third longer)."""
    for i in range(n):
        s = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        x[i] += s * invd[i]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        x[i] += s * invd[i]


@nb.njit(cache=True)
def _squares(r, b, n):
    """(r.r, b.b) over the owned rows."""
    rr = 0.0
    bb = 0.0
    for i in range(n):
        rr += r[i] * r[i]
        bb += b[i] * b[i]
    return rr, bb


@nb.njit(cache=True)
def _square(r, n):
    s = 0.0
    for i in range(n):
        s += r[i] * r[i]
    return s


def sgs(A, b, x, tol, max_iter, red: Reducer, ws: Workspace, rel_tol: float = 0.0,
        n_sweeps: int = 1) -> SolveInfo:
    """Solve A x = b in place by symmetric Gauss-Seidel sweeps (``iters`` counts sweeps).

    Stops at ``||b - A x|| / ||b|| <= max(tol, rel_tol * initial)``, checked every
    ``n_sweeps`` sweeps, or after ``max_iter`` sweeps."""
    p = A.pattern
    n = p.n_rows
    r = ws.v[0]
    A.residual(x, b, r)  # also brings the ghost values of x up to date for the first sweep
    rr, bb = red.sum(*_squares(r, b, n))
    info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
    if info.res0 <= tol:
        return info
    np.divide(1.0, A.diag, out=ws.invd)
    while info.iters < max_iter:
        for k in range(n_sweeps):
            if k:  # the residual just computed exchanged them before the first
                with A.timers("halo_solve"):
                    A.ex.exchange([x])
            _symmetric_sweep(p.indptr, p.indices, A.data, ws.invd, b, x, n)
        info.iters += n_sweeps
        A.residual(x, b, r)
        info.res = np.sqrt(red.sum(_square(r, n))[0]) / bnorm
        if info.res <= tol:
            return info
    info.converged = False
    return info
