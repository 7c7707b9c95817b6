"""Rank-local preconditioners with an ``apply(r, z)`` method (z ~ A^-1 r on owned rows).

Jacobi is fused into the Krylov kernels (``krylov.py``, ``lowsync.py``) and needs no
object.  Symmetric Gauss-Seidel here sweeps the owned rows forward then backward with ghost
values held at zero (block Jacobi between ranks) and the l1 diagonal, which adds |a_ij| of
the dropped ghost couplings so that the rank-local smoother stays convergent however the
mesh is cut.
On the cavity's momentum equation at Courant number 12.8 it cuts BiCGStab iterations
threefold against Jacobi, but each sweep is sequential and costs about an SpMV, so a step is
no faster there (docs/performance.md); it pays where Jacobi struggles more.
"""

from __future__ import annotations

import numpy as np

from .amg_kernels import gs_sweep, l1_inverse


class SymmetricGaussSeidel:
    """One forward and one backward Gauss-Seidel sweep from zero."""

    def __init__(self, A):
        self.A = A
        p = A.pattern
        self.dinv = np.zeros(p.n_rows)
        self.z0 = np.zeros(p.n_cols)

    def refresh(self) -> None:
        """Call after the matrix coefficients change."""
        p = self.A.pattern
        l1_inverse(p.indptr, p.indices, self.A.data, p.diag_pos, p.n_rows, self.dinv)

    def apply(self, r, z):
        p = self.A.pattern
        z[:] = 0.0
        gs_sweep(p.indptr, p.indices, self.A.data, p.diag_pos, self.dinv, r, z, p.n_rows, True)
        gs_sweep(p.indptr, p.indices, self.A.data, p.diag_pos, self.dinv, r, z, p.n_rows, False)
        return z
