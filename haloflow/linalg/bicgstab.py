"""BiCGStab, written once for every target (:mod:`.targets`): for one field
(:func:`bicgstab_iterations`: the host from Python, :mod:`.host_ops`, the binding in this
module, and the device, :class:`.device_bicgstab.DeviceBiCGStabOps`), and for the velocity
components in lockstep (:func:`lockstep_iterations`: the host from Python and the whole solve
compiled, :mod:`.lockstep_compiled`).

Right-preconditioned: Jacobi, fused by the target into the updates that make the
directions, unless the host is given a preconditioner ``precond(r, z)``.  Three fused
allreduces per iteration: r0.v, then (t.s, t.t, s.s), then (r0.r, r.r).  Where s is already
small enough the iteration ends there, with x += alpha phat.
"""

from __future__ import annotations

import numpy as np

from . import host_ops as ops
from . import lockstep_kernels as lk
from .flexible import start
from .krylov import SolveInfo
from .targets import solve_info

BICGSTAB_VECTORS = 8


def bicgstab_iterations(ctx, b, x, tol, max_iter, rel_tol, r, r0, p, v, phat, s, shat, t,
                        out):
    """BiCGStab: x improved in place towards A x = b."""
    rr, tol, bnorm = start(ctx, b, x, r, tol, rel_tol, out)
    if out[1] <= tol:
        return
    ops.copy(ctx, r, r0)
    ops.zero(ctx, p)
    ops.zero(ctx, v)
    rho = alpha = omega = 1.0
    rho_new = rr
    for it in range(1, max_iter + 1):
        beta = (rho_new / rho) * (alpha / omega)
        rho = rho_new
        ops.bicg_p(ctx, p, r, v, beta, omega, phat)  # p = r + beta (p - omega v); phat = M p
        ops.matvec(ctx, phat, v)
        r0v = ops.sum1(ctx, ops.dot(ctx, r0, v))
        if r0v == 0.0:
            break
        alpha = rho / r0v
        ops.bicg_s(ctx, s, r, v, alpha, shat)  # s = r - alpha v; shat = M s
        ops.matvec(ctx, shat, t)
        ts, tt, ss = ops.dot3(ctx, t, s)
        ts, tt, ss = ops.sum3(ctx, ts, tt, ss)
        out[0] = it
        if np.sqrt(ss) / bnorm <= tol or tt == 0.0:
            ops.axpy(ctx, alpha, phat, x)
            out[2] = np.sqrt(ss) / bnorm
            return
        omega = ts / tt
        rho_new, rr = ops.bicg_xr(ctx, x, phat, shat, r, s, t, alpha, omega, r0)
        rho_new, rr = ops.sum2(ctx, rho_new, rr)
        out[2] = np.sqrt(rr) / bnorm
        if out[2] <= tol:
            return
        if omega == 0.0 or rho_new == 0.0:
            break
    out[3] = 1.0 if out[2] <= tol else 0.0


HELPERS = (start,)  # copied with the methods for each target (targets.for_target)


def bicgstab(A, b, x, tol, max_iter, red, ws, precond=None,
             rel_tol: float = 0.0) -> SolveInfo:
    """Solve A x = b in place on the host, Jacobi-preconditioned unless ``precond(r, z)``
    is given; the first 8 vectors of the :class:`.krylov.Workspace` as scratch."""
    bicgstab_iterations(ops.Host(A, red, ws, precond), b, x, tol, max_iter,
                        rel_tol, *ws.v[:BICGSTAB_VECTORS], ws.out)
    return solve_info(ws.out)


def lockstep_iterations(ctx, X, W, comps, tol, rel_tol, max_iter, act, sc, out, rb):
    """BiCGStab-Jacobi of ``A X[d] = W[0][d]`` for each component ``d`` of ``comps``, side
    by side: each phase handles every component still iterating in one pass and their sums
    travel in one reduction (``rb``), and each component's arithmetic is that of
    :func:`bicgstab_iterations` for it alone.  ``W``: the rows of the work vectors
    (``ManyWorkspace.w``); ``act[d]``: 1 iterating, 2 converged at s, 0 done; ``sc[0..8,
    d]``: alpha, beta, omega, rho, rho_new, tolerance, ||b||, residual, initial residual;
    ``out[d]``: iterations, ``out[3 + d]``: converged."""
    m = len(comps)
    R, R0, P, V, PH, SH = W[1], W[2], W[3], W[4], W[5], W[6]
    T = W[0]  # the right-hand side is not read after the residual; s overwrites r
    ops.many_start(ctx, X, W, comps, rb)
    ops.many_reduce(ctx, rb, 2 * m)
    lk.many_tolerances(comps, tol, rel_tol, act, sc, out, rb)
    for it in range(1, max_iter + 1):
        na = lk.many_beta(comps, act, sc)
        if na == 0:
            return
        ops.many_p(ctx, P, R, V, sc, PH, comps, act)
        ops.many_product_r0v(ctx, PH, V, R0, comps, act, na, rb)
        ops.many_reduce(ctx, rb, m)
        na = lk.many_alpha(comps, act, sc, out, rb)
        ops.many_s(ctx, R, V, sc, SH, comps, act)
        ops.many_product_dot3(ctx, SH, T, R, comps, act, na, rb)
        ops.many_reduce(ctx, rb, 3 * m)
        lk.many_omega(comps, act, sc, out, rb, it)
        ops.many_xr(ctx, X, PH, SH, R, T, R0, sc, comps, act, rb)
        if lk.many_more(comps, act):
            ops.many_reduce(ctx, rb, 2 * m)
            lk.many_update(comps, act, sc, out, rb)
    for d in comps:
        if act[d]:
            out[3 + d] = 1 if sc[7, d] <= sc[5, d] else 0
