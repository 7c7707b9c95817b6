"""Jacobi-preconditioned CG, and the host's vector kernels of the methods written once for
every target (:mod:`.flexible`, :mod:`.bicgstab`).

Vectors hold owned + ghost values (length ``n_cells``); dot products run over owned entries
and are summed with one fused allreduce per synchronisation point: CG does two per iteration,
BiCGStab three.  Each update is one numba pass that also returns the partial dot products it
needs, so no vector is read twice per phase.  The solvers are exact algebraic
restatements of the serial algorithm, so iterates on any rank count agree with serial up to
the summation order of the reductions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ..parallel.reduce import Reducer
from ..parallel.threads import kernel


@dataclass
class SolveInfo:
    iters: int = 0
    res0: float = 0.0  # initial residual, relative to ||b||
    res: float = 0.0  # final residual, relative to ||b||
    converged: bool = True


def initial_info(rr: float, bb: float, tol: float, rel_tol: float):
    """``(info, tol, ||b||)`` of a solve starting at residual norm² ``rr`` with ``||b||² =
    bb``: every solver reports residuals relative to ``||b||`` and stops at the larger of
    ``tol`` and ``rel_tol`` times the initial one (OpenFOAM's relTol)."""
    bnorm = np.sqrt(bb) if bb > 0.0 else 1.0
    info = SolveInfo(res0=np.sqrt(rr) / bnorm)
    info.res = info.res0
    return info, max(tol, rel_tol * info.res0), bnorm


@kernel
def _dot(a, b, n):
    s = 0.0
    for i in nb.prange(n):
        s += a[i] * b[i]
    return s


@kernel
def _axpy(alpha, x, y, n):
    for i in nb.prange(n):
        y[i] += alpha * x[i]


@kernel
def _dot2(a, b, c, d, n):
    s1 = 0.0
    s2 = 0.0
    for i in nb.prange(n):
        s1 += a[i] * b[i]
        s2 += c[i] * d[i]
    return s1, s2


@kernel
def _fcg_sums(p, q, r, n):
    """(p.q, p.r, q.q, q.r): FCG's sums after its product, p.q and p.r as ``_dot2``'s."""
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    s4 = 0.0
    for i in nb.prange(n):
        s1 += p[i] * q[i]
        s2 += p[i] * r[i]
        s3 += q[i] * q[i]
        s4 += q[i] * r[i]
    return s1, s2, s3, s4


@kernel
def _dot3(a, b, c, d, e, f, n):
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for i in nb.prange(n):
        s1 += a[i] * b[i]
        s2 += c[i] * d[i]
        s3 += e[i] * f[i]
    return s1, s2, s3


@kernel
def _precondition(r, invd, z, n):
    """z = D^-1 r, returning (r.z, r.r)."""
    rz = 0.0
    rr = 0.0
    for i in nb.prange(n):
        z[i] = invd[i] * r[i]
        rz += r[i] * z[i]
        rr += r[i] * r[i]
    return rz, rr


@kernel
def _cg_update(x, r, z, p, q, invd, alpha, n):
    """x += alpha p; r -= alpha q; z = D^-1 r; returns (r.z, r.r)."""
    rz = 0.0
    rr = 0.0
    for i in nb.prange(n):
        x[i] += alpha * p[i]
        r[i] -= alpha * q[i]
        z[i] = invd[i] * r[i]
        rz += r[i] * z[i]
        rr += r[i] * r[i]
    return rz, rr


@kernel
def _xpby(z, beta, p, n):
    for i in nb.prange(n):
        p[i] = z[i] + beta * p[i]


class Workspace:
    """Scratch vectors for one problem size, allocated once per solver."""

    def __init__(self, n_cells, n_rows, count):
        self.v = [np.zeros(n_cells) for _ in range(count)]
        self.invd = np.zeros(n_rows)
        self.out = np.zeros(4)  # a solve's (iterations, initial and final residual, converged)
        self.rows = None  # (k, n_cells) array whose rows are the first k vectors, if any

    def spare(self, count: int) -> np.ndarray | None:
        """The vectors after the first ``count`` as one flat array, where they are rows of
        one buffer (a :class:`ManyWorkspace`'s), else None: scratch for a solver's own work
        vectors (the AMG's levels) while the solve using the first ``count`` runs."""
        if self.rows is None or count >= len(self.rows):
            return None
        return self.rows[count:].reshape(-1)

    def reserve(self, count: int) -> list:
        """The first ``count`` vectors, adding the missing ones (once: call it when a solver
        is set up, so that no solve allocates)."""
        n_cells = len(self.v[0])
        self.v += [np.zeros(n_cells) for _ in range(count - len(self.v))]
        return self.v[:count]


def pcg(A, b, x, tol, max_iter, red: Reducer, ws: Workspace, rel_tol: float = 0.0
        ) -> SolveInfo:
    """Solve A x = b (A symmetric positive (semi-)definite) in place; Jacobi preconditioner.

    Stops at ``||b - A x|| / ||b|| <= max(tol, rel_tol * initial)`` (every solver here:
    ``rel_tol`` is OpenFOAM's ``relTol``, for outer iterations that need no exact solve)."""
    n = A.pattern.n_rows
    r, z, p, q = ws.v[:4]
    np.divide(1.0, A.diag, out=ws.invd)
    A.residual(x, b, r)
    rz, rr = _precondition(r, ws.invd, z, n)
    rz, rr, bb = red.sum(rz, rr, _dot(b, b, n))
    info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
    if info.res0 <= tol:
        return info
    p[:n] = z[:n]
    for it in range(1, max_iter + 1):
        A.matvec(p, q)
        pq = red.sum(_dot(p, q, n))[0]
        if pq <= 0.0:  # converged to machine precision on a semi-definite system
            info.iters = it
            break
        alpha = rz / pq
        rz_new, rr = red.sum(*_cg_update(x, r, z, p, q, ws.invd, alpha, n))
        info.iters = it
        info.res = np.sqrt(rr) / bnorm
        if info.res <= tol:
            return info
        _xpby(z, rz_new / rz, p, n)
        rz = rz_new
    info.converged = info.res <= tol
    return info


@kernel
def _bicg_p(p, r, v, beta, omega, invd, phat, n):
    for i in nb.prange(n):
        p[i] = r[i] + beta * (p[i] - omega * v[i])
        phat[i] = invd[i] * p[i]


@kernel
def _bicg_s(s, r, v, alpha, invd, shat, n):
    for i in nb.prange(n):
        s[i] = r[i] - alpha * v[i]
        shat[i] = invd[i] * s[i]


@kernel
def _bicg_xr(x, phat, shat, r, s, t, alpha, omega, r0, n):
    """x += alpha phat + omega shat; r = s - omega t; returns (r0.r, r.r)."""
    a = 0.0
    b = 0.0
    for i in nb.prange(n):
        x[i] += alpha * phat[i] + omega * shat[i]
        r[i] = s[i] - omega * t[i]
        a += r0[i] * r[i]
        b += r[i] * r[i]
    return a, b


@kernel
def _bicg_p_only(p, r, v, beta, omega, n):
    for i in nb.prange(n):
        p[i] = r[i] + beta * (p[i] - omega * v[i])


@kernel
def _bicg_s_only(s, r, v, alpha, n):
    for i in nb.prange(n):
        s[i] = r[i] - alpha * v[i]


@kernel
def _fcg_update(x, r, p, q, alpha, n):
    """x += alpha p; r -= alpha q; returns r.r."""
    rr = 0.0
    for i in nb.prange(n):
        x[i] += alpha * p[i]
        r[i] -= alpha * q[i]
        rr += r[i] * r[i]
    return rr


@kernel
def _fcg_direction(z, beta, p, n):
    for i in nb.prange(n):
        p[i] = z[i] - beta * p[i]
