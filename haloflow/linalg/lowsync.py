"""Pipelined CG, and the host's vector kernels of single-reduction CG (the method itself:
:func:`.flexible.cg1_iterations`).

On many ranks an allreduce is a latency on the critical path of every iteration; classic
preconditioned CG (:func:`.krylov.pcg`, :func:`.flexible.fcg`) makes two per iteration,
single-reduction CG one.

* :func:`pipecg` (Ghysels & Vanroose 2014) starts a non-blocking allreduce of
  ``(r, u), (w, u), (r, r)`` and hides it behind the preconditioner and the SpMV of the
  next step (``m = M w``, ``n = A m``); all vectors then follow by recurrences.  The
  recurrence ``u = u - alpha M s`` assumes a LINEAR preconditioner: exact for Jacobi, only
  approximate for the AMG K-cycle, whose inner Krylov iterations make it nonlinear.  The
  recurrences drift from the true residual, so the true residual ``b - A x`` replaces the
  recursive one every ``replace_every`` iterations and whenever the recursive one says
  "converged"; the solve only stops on a true residual below tolerance.

Iteration counts (tests/unit/test_lowsync.py, model Poisson problems): Jacobi variants equal classic
CG within one iteration; with the AMG, ``cg1`` equals FCG within one iteration and
``pipecg`` needs more (docs/performance.md, "Reductions").
Same interface and stopping rule as :func:`.krylov.pcg`: ``precond(r, z)`` (None: Jacobi
fused into the vector kernels), tolerance relative to ``||b||``, ``rel_tol`` as OpenFOAM's
relTol; scratch vectors from the :class:`.krylov.Workspace` (``reserve`` them once).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..parallel.reduce import Reducer
from ..parallel.threads import kernel
from .krylov import SolveInfo, Workspace, initial_info

PIPECG_VECTORS = 9


@kernel
def _jacobi(r, invd, z, n):
    for i in nb.prange(n):
        z[i] = invd[i] * r[i]


@kernel
def _cg1_update(x, r, p, s, alpha, n):
    """x += alpha p; r -= alpha s; returns (p.r, r.r) of the new r."""
    pr = 0.0
    rr = 0.0
    for i in nb.prange(n):
        x[i] += alpha * p[i]
        r[i] -= alpha * s[i]
        pr += p[i] * r[i]
        rr += r[i] * r[i]
    return pr, rr


@kernel
def _cg1_update_jacobi(x, r, p, s, u, invd, alpha, n):
    """``_cg1_update`` and u = D^-1 r in the same pass."""
    pr = 0.0
    rr = 0.0
    for i in nb.prange(n):
        x[i] += alpha * p[i]
        r[i] -= alpha * s[i]
        u[i] = invd[i] * r[i]
        pr += p[i] * r[i]
        rr += r[i] * r[i]
    return pr, rr


@kernel
def _cg1_dots(r, u, w, s, n):
    """(r.u, w.u, u.s)."""
    ru = 0.0
    wu = 0.0
    us = 0.0
    for i in nb.prange(n):
        ru += r[i] * u[i]
        wu += w[i] * u[i]
        us += u[i] * s[i]
    return ru, wu, us


@kernel
def _cg1_direction(u, w, beta, p, s, n):
    """p = u + beta p; s = w + beta s (= A p)."""
    for i in nb.prange(n):
        p[i] = u[i] + beta * p[i]
        s[i] = w[i] + beta * s[i]


@kernel
def _dots_rb(r, b, n):
    rr = 0.0
    bb = 0.0
    for i in nb.prange(n):
        rr += r[i] * r[i]
        bb += b[i] * b[i]
    return rr, bb


@kernel
def _pipecg_update(x, r, u, w, p, s, q, z, m, nv, alpha, beta, n):
    """The Ghysels-Vanroose recurrences in one pass; returns (r.u, w.u, r.r) of the new
    vectors, the scalars of the next iteration's reduction."""
    ru = 0.0
    wu = 0.0
    rr = 0.0
    for i in nb.prange(n):
        z[i] = nv[i] + beta * z[i]
        q[i] = m[i] + beta * q[i]
        s[i] = w[i] + beta * s[i]
        p[i] = u[i] + beta * p[i]
        x[i] += alpha * p[i]
        r[i] -= alpha * s[i]
        u[i] -= alpha * q[i]
        w[i] -= alpha * z[i]
        ru += r[i] * u[i]
        wu += w[i] * u[i]
        rr += r[i] * r[i]
    return ru, wu, rr


def _pipeline_start(A, b, x, red, ws, precond, r, u, w, m, nv, n, extra=()):
    """From the true residual: r = b - A x, u = M r, w = A u, and, while the sums of
    (r.u, w.u, r.r, *extra) travel, m = M w, n = A m."""
    A.residual(x, b, r)
    _apply(precond, r, ws.invd, u, n)
    A.matvec(u, w)
    ru, wu, _ = _cg1_dots(r, u, w, w, n)
    pending = red.start_sum(ru, wu, _dots_rb(r, r, n)[0], *extra)
    _apply(precond, w, ws.invd, m, n)
    A.matvec(m, nv)
    return pending.wait()


def _apply(precond, r, invd, z, n):
    if precond is None:
        _jacobi(r, invd, z, n)
    else:
        precond(r, z)


def _replace(A, b, x, ws, precond, r, u, w, p, s, q, z, n):
    """Residual replacement: the recursive vectors recomputed from x and p (r = b - A x,
    u = M r, w = A u, s = A p, q = M s, z = A q); the Krylov directions are kept."""
    A.residual(x, b, r)
    _apply(precond, r, ws.invd, u, n)
    A.matvec(u, w)
    A.matvec(p, s)
    _apply(precond, s, ws.invd, q, n)
    A.matvec(q, z)


def pipecg(A, b, x, tol, max_iter, red: Reducer, ws: Workspace, precond=None,
           rel_tol: float = 0.0, replace_every: int = 50) -> SolveInfo:
    """Pipelined CG: one non-blocking allreduce per iteration, in flight during the
    preconditioner and the SpMV.  Residual replacement every ``replace_every`` iterations
    and when the recursive residual says "converged" but the true one (one SpMV, one
    allreduce) does not; a breakdown (``alpha <= 0``, the variable AMG) restarts from the
    true residual."""
    n = A.pattern.n_rows
    r, u, w, p, s, q, z, m, nv = ws.reserve(PIPECG_VECTORS)
    np.divide(1.0, A.diag, out=ws.invd)
    bb = _dots_rb(b, b, n)[0]
    gamma, delta, rr, bb = _pipeline_start(A, b, x, red, ws, precond, r, u, w, m, nv, n,
                                           (bb,))
    info, tol, bnorm = initial_info(rr, bb, tol, rel_tol)
    if info.res0 <= tol:
        return info
    fresh = True  # a new direction: beta = 0
    alpha = gamma_old = 1.0
    for it in range(1, max_iter + 1):
        info.iters = it
        if fresh:
            beta, alpha = 0.0, gamma / delta
        else:
            beta = gamma / gamma_old
            alpha = gamma / (delta - beta * gamma / alpha)
        if not alpha > 0.0 or not np.isfinite(alpha):
            if fresh:  # machine precision on a semi-definite system
                break
            gamma, delta, rr = _pipeline_start(A, b, x, red, ws, precond, r, u, w, m, nv, n)
            beta, alpha, fresh = 0.0, gamma / delta, True
            if not alpha > 0.0:
                break
        fresh = False
        gamma_old = gamma
        pending = red.start_sum(*_pipecg_update(x, r, u, w, p, s, q, z, m, nv, alpha, beta,
                                                n))
        _apply(precond, w, ws.invd, m, n)  # m = M w, n = A m while the sums travel
        A.matvec(m, nv)
        gamma, delta, rr = pending.wait()
        info.res = np.sqrt(rr) / bnorm
        replace = it % replace_every == 0
        if info.res <= tol:  # stop on the true residual only
            A.residual(x, b, r)
            info.res = np.sqrt(red.sum(_dots_rb(r, r, n)[0])[0]) / bnorm
            if info.res <= tol:
                return info
            replace = True
        if replace:
            _replace(A, b, x, ws, precond, r, u, w, p, s, q, z, n)
            ru, wu, _ = _cg1_dots(r, u, w, w, n)
            pending = red.start_sum(ru, wu, _dots_rb(r, r, n)[0])
            _apply(precond, w, ws.invd, m, n)
            A.matvec(m, nv)
            gamma, delta, rr = pending.wait()
    info.converged = info.res <= tol
    return info
