"""Flexible CG, written once for every target (:mod:`.targets`): FCG(1) and single-reduction
CG.

The targets: the host from Python (:mod:`.host_ops`, the binding in this module), the
whole-solve compiled CPU path (:mod:`.compiled_krylov`) and the device
(:class:`.device_solve.DeviceOps`).  A target fuses what it can inside an operation (a
matrix-vector product with the dot products it feeds, an update with Jacobi's
preconditioner).

* :func:`fcg_iterations`: Notay's FCG(1), for a variable preconditioner such as an AMG
  K-cycle.  Each new direction is made A-orthogonal to the previous one explicitly, so the
  method stays a descent method when the preconditioner changes from one iteration to the
  next.  Two fused allreduces per iteration: (p.q, p.r, q.q, q.r) and (r.r, z.q).  The last
  iteration needs no preconditioner: where the first sums foresee convergence
  (:func:`foreseen_converged`), r.r is reduced on its own and checked before the cycle, which
  is then skipped (a K-cycle costs most of an iteration); the iterates, iterations and
  residuals are those of checking after it.
* :func:`cg1_iterations`: Chronopoulos & Gear's single-reduction CG with Notay's flexible
  coefficient ``beta = -(u, A p) / (p, A p)``: every inner product of an iteration is taken
  after the preconditioner and the SpMV, so they travel in one allreduce of five scalars;
  ``A p`` follows by the recurrence ``s = w + beta s`` and ``(p, r)``, ``(p, A p)`` by theirs.
  It is FCG(1) rewritten, safe with the K-cycle; with a fixed preconditioner it equals PCG in
  exact arithmetic.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import host_ops as ops
from .krylov import SolveInfo
from .targets import initial, solve_info

CG1_VECTORS = 5
FCG_VECTORS = 4


@nb.njit(cache=True)
def foreseen_converged(rr, alpha, qq, qr, limit) -> bool:
    """Whether FCG's step ``r -= alpha q`` is foreseen to bring ||r|| to ``limit``:
    ``|r - alpha q|^2 = r.r - 2 alpha q.r + alpha^2 q.q`` from sums already reduced.  Only
    a forecast (it cancels where the residual falls far): the step's own r.r decides."""
    return rr - 2.0 * alpha * qr + alpha * alpha * qq <= limit * limit


def start(ctx, b, x, r, tol, rel_tol, out):
    """r = b - A x; out's initial residual; returns (r.r, the tolerance the solve stops at,
    ||b||)."""
    ops.residual(ctx, x, b, r)
    rr, bb = ops.dot2(ctx, r, r, b, b)
    rr, bb = ops.sum2(ctx, rr, bb)
    tol, bnorm = initial(rr, bb, tol, rel_tol, out)
    return rr, tol, bnorm


def fcg_iterations(ctx, b, x, tol, max_iter, rel_tol, r, z, p, q, out):
    """FCG(1): x improved in place towards A x = b, preconditioned by ``ops.precondition``."""
    rr, tol, bnorm = start(ctx, b, x, r, tol, rel_tol, out)
    if out[1] <= tol:
        return
    ops.precondition(ctx, r, z)
    ops.copy(ctx, z, p)
    for it in range(1, max_iter + 1):
        pq, pr, qq, qr = ops.matvec_dots(ctx, p, q, r)
        pq, pr, qq, qr = ops.sum4(ctx, pq, pr, qq, qr)
        out[0] = it
        if pq <= 0.0:  # converged to machine precision on a semi-definite system
            break
        alpha = pr / pq
        local = ops.fcg_step(ctx, x, r, p, q, alpha)
        if foreseen_converged(rr, alpha, qq, qr, tol * bnorm):
            rr = ops.sum1(ctx, local)
            out[2] = np.sqrt(rr) / bnorm
            if out[2] <= tol:
                return
            ops.precondition(ctx, r, z)
            zq = ops.sum1(ctx, ops.dot(ctx, z, q))
        else:
            ops.precondition(ctx, r, z)
            rr, zq = ops.sum2(ctx, local, ops.dot(ctx, z, q))
            out[2] = np.sqrt(rr) / bnorm
            if out[2] <= tol:
                return
        ops.fcg_direction(ctx, z, zq / pq, p)
    out[3] = 1.0 if out[2] <= tol else 0.0


def cg1_iterations(ctx, b, x, tol, max_iter, rel_tol, r, u, w, p, s, out):
    """Single-reduction flexible CG: one allreduce of five scalars per iteration."""
    ops.residual(ctx, x, b, r)
    ops.precondition(ctx, r, u)
    ops.matvec(ctx, u, w)
    ru, wu = ops.dot2(ctx, r, u, w, u)
    rr, bb = ops.dot2(ctx, r, r, b, b)
    ru, wu, rr, bb = ops.sum4(ctx, ru, wu, rr, bb)
    tol, bnorm = initial(rr, bb, tol, rel_tol, out)
    if out[1] <= tol:
        return
    ops.copy(ctx, u, p)
    ops.copy(ctx, w, s)
    ps, pr = wu, ru
    for it in range(1, max_iter + 1):
        out[0] = it
        if ps <= 0.0:  # converged to machine precision on a semi-definite system
            break
        pr_old, rr = ops.cg1_step_precondition(ctx, x, r, p, s, u, pr / ps)
        ops.matvec(ctx, u, w)
        ru, wu, us = ops.cg1_dots(ctx, r, u, w, s)
        ru, wu, us, pr_old, rr = ops.sum5(ctx, ru, wu, us, pr_old, rr)
        out[2] = np.sqrt(rr) / bnorm
        if out[2] <= tol:
            return
        beta = -us / ps
        ops.cg1_directions(ctx, u, w, beta, p, s)
        ps = wu + beta * (2.0 * us + beta * ps)  # (p, A p) of the new p
        pr = ru + beta * pr_old  # (p, r) of the new p
    out[3] = 1.0 if out[2] <= tol else 0.0


HELPERS = (start,)  # copied with the methods for each target (targets.for_target)


def fcg(A, b, x, tol, max_iter, red, ws, precond, rel_tol: float = 0.0) -> SolveInfo:
    """Solve A x = b in place by FCG(1) with ``precond(r, z)`` (e.g. ``AMG.apply``) on the
    host; scratch vectors from the :class:`.krylov.Workspace`."""
    r, z, p, q = ws.reserve(FCG_VECTORS)
    fcg_iterations(ops.Host(A, red, ws, precond), b, x, tol, max_iter, rel_tol, r, z, p, q,
                   ws.out)
    return solve_info(ws.out)


def cg1(A, b, x, tol, max_iter, red, ws, precond=None, rel_tol: float = 0.0) -> SolveInfo:
    """Solve A x = b in place by single-reduction CG with ``precond(r, z)`` (None: Jacobi,
    fused into the update) on the host; ``ws.reserve(CG1_VECTORS)`` once beforehand."""
    r, u, w, p, s = ws.reserve(CG1_VECTORS)
    cg1_iterations(ops.Host(A, red, ws, precond), b, x, tol, max_iter, rel_tol, r, u, w, p,
                   s, ws.out)
    return solve_info(ws.out)
