"""Distributed Krylov solvers: Jacobi-preconditioned CG and BiCGStab, and flexible CG (FCG)
with any preconditioner (the AMG's cycle).

Vectors hold owned + ghost values (length ``n_cells``); dot products run over owned entries
and are summed with one fused allreduce per synchronisation point: CG does two per iteration,
BiCGStab three.  Each update is one numba pass that also returns the partial dot products it
needs, so no vector is read twice per phase.  Both solvers are exact algebraic
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


def bicgstab(A, b, x, tol, max_iter, red: Reducer, ws: Workspace, precond=None,
             rel_tol: float = 0.0) -> SolveInfo:
    """Solve A x = b in place with right-preconditioned BiCGStab: Jacobi (fused into the
    vector kernels) unless ``precond(r, z)`` is given."""
    n = A.pattern.n_rows
    r, r0, p, v, phat, s, shat, t = ws.v[:8]
    np.divide(1.0, A.diag, out=ws.invd)
    A.residual(x, b, r)
    rr, bb = red.sum(*_dot2(r, r, b, b, n))
    info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
    if info.res0 <= tol:
        return info
    r0[:n] = r[:n]
    p[:n] = 0.0
    v[:n] = 0.0
    rho = alpha = omega = 1.0
    rho_new = rr
    for it in range(1, max_iter + 1):
        beta = (rho_new / rho) * (alpha / omega)
        rho = rho_new
        if precond is None:
            _bicg_p(p, r, v, beta, omega, ws.invd, phat, n)
        else:
            _bicg_p_only(p, r, v, beta, omega, n)
            precond(p, phat)
        A.matvec(phat, v)
        r0v = red.sum(_dot(r0, v, n))[0]
        if r0v == 0.0:
            break
        alpha = rho / r0v
        if precond is None:
            _bicg_s(s, r, v, alpha, ws.invd, shat, n)
        else:
            _bicg_s_only(s, r, v, alpha, n)
            precond(s, shat)
        A.matvec(shat, t)
        ts, tt, ss = red.sum(*_dot3(t, s, t, t, s, s, n))
        info.iters = it
        if np.sqrt(ss) / bnorm <= tol or tt == 0.0:
            _axpy(alpha, phat, x, n)
            info.res = np.sqrt(ss) / bnorm
            return info
        omega = ts / tt
        rho_new, rr = red.sum(*_bicg_xr(x, phat, shat, r, s, t, alpha, omega, r0, n))
        info.res = np.sqrt(rr) / bnorm
        if info.res <= tol:
            return info
        if omega == 0.0 or rho_new == 0.0:
            break
    info.converged = info.res <= tol
    return info


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


@nb.njit(cache=True)
def foreseen_converged(rr, alpha, qq, qr, limit) -> bool:
    """Whether FCG's step ``r -= alpha q`` is foreseen to bring ||r|| to ``limit``:
    ``|r - alpha q|^2 = r.r - 2 alpha q.r + alpha^2 q.q`` from sums already reduced.  Only
    a forecast (it cancels where the residual falls far): the step's own r.r decides."""
    return rr - 2.0 * alpha * qr + alpha * alpha * qq <= limit * limit


def fcg(A, b, x, tol, max_iter, red: Reducer, ws: Workspace, precond,
        rel_tol: float = 0.0) -> SolveInfo:
    """Flexible CG (Notay's FCG(1)) for a variable preconditioner such as an AMG K-cycle.

    Each new direction is made A-orthogonal to the previous one explicitly, so the method
    stays a descent method when the preconditioner changes from one iteration to the next.
    Two fused allreduces per iteration: (p.q, p.r, q.q, q.r) and (r.r, z.q).  The last
    iteration needs no preconditioner: where the first sums foresee convergence
    (:func:`foreseen_converged`), r.r is reduced on its own and checked before the cycle,
    which is then skipped (a K-cycle costs most of an iteration); the iterates, iterations
    and residuals are those of checking after it.
    """
    n = A.pattern.n_rows
    r, z, p, q = ws.v[:4]
    A.residual(x, b, r)
    rr, bb = red.sum(*_dot2(r, r, b, b, n))
    info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
    if info.res0 <= tol:
        return info
    precond(r, z)
    p[:n] = z[:n]
    for it in range(1, max_iter + 1):
        A.matvec(p, q)
        pq, pr, qq, qr = red.sum(*_fcg_sums(p, q, r, n))
        info.iters = it
        if pq <= 0.0:
            break
        alpha = pr / pq
        local = _fcg_update(x, r, p, q, alpha, n)
        if foreseen_converged(rr, alpha, qq, qr, tol * bnorm):
            rr = red.sum(local)[0]
            info.res = np.sqrt(rr) / bnorm
            if info.res <= tol:
                return info
            precond(r, z)
            zq = red.sum(_dot(z, q, n))[0]
        else:
            precond(r, z)
            rr, zq = red.sum(local, _dot(z, q, n))
            info.res = np.sqrt(rr) / bnorm
            if info.res <= tol:
                return info
        _fcg_direction(z, zq / pq, p, n)
    info.converged = info.res <= tol
    return info
