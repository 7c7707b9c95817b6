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
from .lockstep import compiled_lockstep
from .lockstep_compiled import (
    C_NT,
    _many_exchange,
    _many_reduce,
    lockstep_results,
)
from .lockstep_kernels import ManyWorkspace, many_tolerances


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


# -- every velocity component in lockstep --------------------------------------------------

@nb.njit(cache=True, inline="always")
def _less_row3(indptr, indices, data, x0, x1, x2, i, s0, s1, s2):
    """``s - A[i] x`` for three components, the row read once."""
    for k in range(indptr[i], indptr[i + 1]):
        a = data[k]
        j = indices[k]
        s0 -= a * x0[j]
        s1 -= a * x1[j]
        s2 -= a * x2[j]
    return s0, s1, s2


@nb.njit(cache=True, inline="always")
def _less_row2(indptr, indices, data, x0, x1, i, s0, s1):
    """``s - A[i] x`` for two components, the row read once."""
    for k in range(indptr[i], indptr[i + 1]):
        a = data[k]
        j = indices[k]
        s0 -= a * x0[j]
        s1 -= a * x1[j]
    return s0, s1


@nb.njit(cache=True)
def _sweep3(indptr, indices, data, invd, b0, b1, b2, x0, x1, x2, n):
    """:func:`_symmetric_sweep` of three components reading each matrix row once, each
    component's arithmetic that of its own sweep."""
    for t in range(2 * n):
        i = t if t < n else 2 * n - 1 - t
        s0, s1, s2 = _less_row3(indptr, indices, data, x0, x1, x2, i, b0[i], b1[i], b2[i])
        x0[i] += s0 * invd[i]
        x1[i] += s1 * invd[i]
        x2[i] += s2 * invd[i]


@nb.njit(cache=True)
def _sweep2(indptr, indices, data, invd, b0, b1, x0, x1, n):
    """:func:`_sweep3` of two components."""
    for t in range(2 * n):
        i = t if t < n else 2 * n - 1 - t
        s0, s1 = _less_row2(indptr, indices, data, x0, x1, i, b0[i], b1[i])
        x0[i] += s0 * invd[i]
        x1[i] += s1 * invd[i]


@nb.njit(cache=True)
def _sweep_active(indptr, indices, data, invd, B, X, comps, act, n):
    """One symmetric sweep of every active component, the matrix read once; returns how
    many were swept."""
    c0 = c1 = c2 = 0
    na = 0
    for d in comps:
        if act[d]:
            if na == 0:
                c0 = d
            elif na == 1:
                c1 = d
            else:
                c2 = d
            na += 1
    if na == 3:
        _sweep3(indptr, indices, data, invd, B[c0], B[c1], B[c2], X[c0], X[c1], X[c2], n)
    elif na == 2:
        _sweep2(indptr, indices, data, invd, B[c0], B[c1], X[c0], X[c1], n)
    elif na == 1:
        _symmetric_sweep(indptr, indices, data, invd, B[c0], X[c0], n)
    return na


@nb.njit(cache=True)
def _residual_squares(indptr, indices, data, B, X, comps, act, rb, n, with_b):
    """Per active component j: ``rb[j] = |b - A x|^2`` (with ``with_b``, ``rb[2j]`` and
    ``rb[2j + 1] = |b|^2``); inactive components add zeros.  The matrix is read once for
    all of them; each component's sums are made in its own row order, so they are those
    of a pass of its own, to the bit."""
    m = len(comps)
    j0 = j1 = j2 = 0  # the active components' places in comps
    na = 0
    for j in range(m):
        rb[j] = 0.0
        if with_b:
            rb[2 * j] = 0.0
            rb[2 * j + 1] = 0.0
        if act[comps[j]]:
            if na == 0:
                j0 = j1 = j2 = j
            elif na == 1:
                j1 = j2 = j
            else:
                j2 = j
            na += 1
    if na == 0:
        return
    x0, x1, x2 = X[comps[j0]], X[comps[j1]], X[comps[j2]]
    b0, b1, b2 = B[comps[j0]], B[comps[j1]], B[comps[j2]]
    r0 = r1 = r2 = q0 = q1 = q2 = 0.0
    if na == 3:
        for i in range(n):
            s0, s1, s2 = _less_row3(indptr, indices, data, x0, x1, x2, i, b0[i], b1[i],
                                    b2[i])
            r0 += s0 * s0
            r1 += s1 * s1
            r2 += s2 * s2
            if with_b:
                q0 += b0[i] * b0[i]
                q1 += b1[i] * b1[i]
                q2 += b2[i] * b2[i]
    elif na == 2:
        for i in range(n):
            s0, s1 = _less_row2(indptr, indices, data, x0, x1, i, b0[i], b1[i])
            r0 += s0 * s0
            r1 += s1 * s1
            if with_b:
                q0 += b0[i] * b0[i]
                q1 += b1[i] * b1[i]
    else:
        for i in range(n):
            s0 = b0[i]
            for k in range(indptr[i], indptr[i + 1]):
                s0 -= data[k] * x0[indices[k]]
            r0 += s0 * s0
            if with_b:
                q0 += b0[i] * b0[i]
    _put(rb, j0, r0, q0, with_b)
    if na > 1:
        _put(rb, j1, r1, q1, with_b)
    if na > 2:
        _put(rb, j2, r2, q2, with_b)


@nb.njit(cache=True, inline="always")
def _put(rb, j, rr, bb, with_b):
    if with_b:
        rb[2 * j] = rr
        rb[2 * j + 1] = bb
    else:
        rb[j] = rr


@nb.njit(cache=True)
def _sgs_many_c(indptr, indices, data, diag, invd, X, B, comps, tol, rel_tol, max_iter,
                n_sweeps, act, sc, out, count, ctl, hnd, hb, cells, plan, rb, exchange_x,
                exchange_after):
    """:func:`sgs_many` as one compiled call (the lockstep BiCGStab's plan, scalars and
    counters: ``sc[5..8, d]`` tolerance, ||b||, residual, initial residual; ``out[d]``
    sweeps, ``out[3 + d]`` converged)."""
    n = len(diag)
    m = len(comps)
    if exchange_x:
        _many_exchange(ctl, hb, cells, plan, X, comps, count, m)
    for i in range(n):
        invd[i] = 1.0 / diag[i]
    for d in comps:
        act[d] = 1
    _residual_squares(indptr, indices, data, B, X, comps, act, rb, n, True)
    _many_reduce(ctl, hnd, rb, 2 * m, count)
    many_tolerances(comps, tol, rel_tol, act, sc, out, rb)
    sweeps = 0
    while sweeps < max_iter:
        na = 0
        for k in range(n_sweeps):
            if k:
                _many_exchange(ctl, hb, cells, plan, X, comps, count, na)
            na = _sweep_active(indptr, indices, data, invd, B, X, comps, act, n)
        if na == 0:
            break
        sweeps += n_sweeps
        _many_exchange(ctl, hb, cells, plan, X, comps, count, na)
        _residual_squares(indptr, indices, data, B, X, comps, act, rb, n, False)
        _many_reduce(ctl, hnd, rb, m, count)
        for j in range(m):
            d = comps[j]
            if act[d]:
                out[d] = sweeps
                sc[7, d] = np.sqrt(rb[j]) / sc[6, d]
                if sc[7, d] <= sc[5, d]:
                    act[d] = 0
    for d in comps:
        if act[d]:
            out[3 + d] = 0
    if exchange_after:
        _many_exchange(ctl, hb, cells, plan, X, comps, count, m)


def sgs_many(A, X, comps, tol, max_iter, red: Reducer, mws: ManyWorkspace,
             rel_tol: float = 0.0, n_sweeps: int = 1, ghosts_current: bool = False,
             exchange_after: bool = False) -> list[SolveInfo]:
    """:func:`sgs` for every component ``d`` in ``comps`` of ``A X[d] = mws.rhs[d]`` at once:
    a sweep reads the matrix once for all of them, and each residual check is one exchange
    and one fused sum for all.  Each component's sweeps, checks and result are those of
    :func:`sgs` alone.  Runs compiled (with the lockstep BiCGStab's communication plan)
    where that solve does, on one thread; otherwise component by component."""
    plan = compiled_lockstep(A, len(comps), red, mws)
    if plan is None or plan.ctl[C_NT] > 1:
        ws = mws.as_workspace(4)  # (sgs exchanges the ghosts first itself)
        ws.v = ws.v[3:]  # its residual after the right-hand sides' rows, not over them
        infos = [sgs(A, mws.rhs[d], X[d], tol, max_iter, red, ws, rel_tol, n_sweeps)
                 for d in comps]
        if exchange_after:
            with A.timers("halo_solve"):
                A.ex.exchange(tuple(X[d] for d in comps))
        return infos
    p = A.pattern
    c = mws.count
    c[:] = 0
    _sgs_many_c(p.indptr, p.indices, A.data, A.diag, mws.invd, X, mws.rhs, comps, tol,
                rel_tol, max_iter, n_sweeps, mws.act, mws.sc, mws.out, c, plan.ctl, plan.hnd,
                plan.hb, plan.cells, plan.plan, plan.rb, not ghosts_current, exchange_after)
    return lockstep_results(A, red, mws, plan, comps)
