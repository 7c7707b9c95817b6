"""The host's operations for the methods of :mod:`.flexible` and :mod:`.bicgstab`, run from
Python: a :class:`Host` context (the distributed matrix, its reducer, the preconditioner) and the
vector kernels of :mod:`.krylov` and :mod:`.lowsync`, looked up at call time so that the
threaded builds bound by ``parallel.threads.use_threads`` are the ones that run."""

from __future__ import annotations

import numpy as np

from . import krylov as kr
from . import lockstep_kernels as lk
from . import lowsync as ls


class Host:
    """One host solve: ``A`` (``residual``, ``matvec``, its exchanges), ``red`` (the
    allreduce), ``precond(r, z)`` (None: Jacobi with the diagonal of ``A``)."""

    __slots__ = ("A", "red", "precond", "invd", "n")

    def __init__(self, A, red, ws, precond):
        self.A, self.red, self.precond = A, red, precond
        self.n = A.pattern.n_rows
        self.invd = ws.invd
        if precond is None:  # Jacobi's
            np.divide(1.0, A.diag, out=ws.invd)


def residual(ctx, x, b, r):
    ctx.A.residual(x, b, r)


def matvec(ctx, x, y):
    ctx.A.matvec(x, y)


def precondition(ctx, r, z):
    if ctx.precond is None:
        ls._jacobi(r, ctx.invd, z, ctx.n)
    else:
        ctx.precond(r, z)


def copy(ctx, src, dst):
    dst[:ctx.n] = src[:ctx.n]


def dot(ctx, a, b):
    return kr._dot(a, b, ctx.n)


def dot2(ctx, a, b, d, e):
    return kr._dot2(a, b, d, e, ctx.n)


def sum1(ctx, a):
    return ctx.red.sum(a)[0]


def sum2(ctx, a, b):
    return ctx.red.sum(a, b)


def sum4(ctx, a, b, d, e):
    return ctx.red.sum(a, b, d, e)


def sum5(ctx, a, b, d, e, f):
    return ctx.red.sum(a, b, d, e, f)


def matvec_dots(ctx, p, q, r):
    """q = A p; (p.q, p.r, q.q, q.r)."""
    ctx.A.matvec(p, q)
    return kr._fcg_sums(p, q, r, ctx.n)


def fcg_step(ctx, x, r, p, q, alpha):
    return kr._fcg_update(x, r, p, q, alpha, ctx.n)


def fcg_direction(ctx, z, beta, p):
    kr._fcg_direction(z, beta, p, ctx.n)


def cg1_step_precondition(ctx, x, r, p, s, u, alpha):
    """x += alpha p; r -= alpha s; u = M r; returns (p.r, r.r) of the new r (Jacobi in the
    same pass)."""
    if ctx.precond is None:
        return ls._cg1_update_jacobi(x, r, p, s, u, ctx.invd, alpha, ctx.n)
    sums = ls._cg1_update(x, r, p, s, alpha, ctx.n)
    ctx.precond(r, u)
    return sums


def cg1_dots(ctx, r, u, w, s):
    return ls._cg1_dots(r, u, w, s, ctx.n)


def cg1_directions(ctx, u, w, beta, p, s):
    ls._cg1_direction(u, w, beta, p, s, ctx.n)


def zero(ctx, a):
    a[:ctx.n] = 0.0


def sum3(ctx, a, b, d):
    return ctx.red.sum(a, b, d)


def axpy(ctx, alpha, a, y):
    kr._axpy(alpha, a, y, ctx.n)


def dot3(ctx, t, s):
    """(t.s, t.t, s.s)."""
    return kr._dot3(t, s, t, t, s, s, ctx.n)


def bicg_p(ctx, p, r, v, beta, omega, phat):
    """p = r + beta (p - omega v); phat = M p (Jacobi in the same pass)."""
    if ctx.precond is None:
        kr._bicg_p(p, r, v, beta, omega, ctx.invd, phat, ctx.n)
    else:
        kr._bicg_p_only(p, r, v, beta, omega, ctx.n)
        ctx.precond(p, phat)


def bicg_s(ctx, s, r, v, alpha, shat):
    """s = r - alpha v; shat = M s (Jacobi in the same pass)."""
    if ctx.precond is None:
        kr._bicg_s(s, r, v, alpha, ctx.invd, shat, ctx.n)
    else:
        kr._bicg_s_only(s, r, v, alpha, ctx.n)
        ctx.precond(s, shat)


def bicg_xr(ctx, x, phat, shat, r, s, t, alpha, omega, r0):
    """x += alpha phat + omega shat; r = s - omega t; returns (r0.r, r.r)."""
    return kr._bicg_xr(x, phat, shat, r, s, t, alpha, omega, r0, ctx.n)


# -- the lockstep BiCGStab of the velocity components (context: a HostMany)


class HostMany:
    """One host lockstep solve: ``A`` and ``red`` as :class:`Host`'s; the Jacobi diagonal
    in ``mws.invd``."""

    __slots__ = ("A", "red", "invd", "n")

    def __init__(self, A, red, mws):
        self.A, self.red, self.invd = A, red, mws.invd
        self.n = A.pattern.n_rows


def _matvec_many(A, X, Y, comps, act) -> None:
    """``Y = A X`` for the active components; their ghosts travel in one exchange
    (overlapped with the inner rows where the exchanger can)."""
    p = A.pattern
    fields = tuple(X[d] for d in comps if act[d])
    if A.overlap:
        with A.timers("halo_solve"):
            h = A.ex.start(fields)
        lk._spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.inner_runs)
        with A.timers("halo_solve"):
            A.ex.finish(h)
        lk._spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.outer_runs)
        return
    with A.timers("halo_solve"):
        A.ex.exchange(fields)
    lk._spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.all_runs)


def many_start(ctx, X, W, comps, rb):
    """D^-1; r = b - A x, r0 = r, p = v = 0 and the partial (r.r, b.b) of each component."""
    A = ctx.A
    p = A.pattern
    np.divide(1.0, A.diag, out=ctx.invd)
    lk._residual_many(p.indptr, p.indices, A.data, X, W[0], W[1], comps, p.all_runs)
    lk._bicg3_start(W[1], W[0], W[2], W[3], W[4], comps, ctx.n, rb)


def many_reduce(ctx, rb, k):
    rb[:k] = ctx.red.sum(*rb[:k])


def many_p(ctx, P, R, V, sc, PH, comps, act):
    lk._bicg3_p(P, R, V, sc[1], sc[2], ctx.invd, PH, comps, act, ctx.n)


def many_product_r0v(ctx, PH, V, R0, comps, act, na, rb):
    _matvec_many(ctx.A, PH, V, comps, act)
    lk._bicg3_r0v(R0, V, comps, act, ctx.n, rb)


def many_s(ctx, R, V, sc, SH, comps, act):
    lk._bicg3_s(R, R, V, sc[0], ctx.invd, SH, comps, act, ctx.n)


def many_product_dot3(ctx, SH, T, R, comps, act, na, rb):
    _matvec_many(ctx.A, SH, T, comps, act)
    lk._bicg3_dot3(T, R, comps, act, ctx.n, rb)


def many_xr(ctx, X, PH, SH, R, T, R0, sc, comps, act, rb):
    lk._bicg3_xr(X, PH, SH, R, R, T, sc[0], sc[2], R0, comps, act, ctx.n, rb)
