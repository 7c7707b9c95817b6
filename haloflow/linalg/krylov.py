"""Distributed Krylov solvers: Jacobi-preconditioned CG and BiCGStab.

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

from ..parallel import mpicall, threads
from ..parallel.reduce import Reducer
from ..parallel.threads import kernel
from . import blocks as tb


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


# -- the momentum components in lockstep -------------------------------------------------------
#
# The velocity components share one matrix, so their BiCGStab solves run side by side: each
# vector kernel, product and exchange handles every component still iterating in one call,
# and their dot products travel in one allreduce.  Each component's arithmetic is exactly
# that of its own :func:`bicgstab` solve (Jacobi), so the iterates are the same to the bit;
# a component that has converged is left alone while the others go on.  These kernels are
# serial: numba's threaded build of a parallel loop inside the loop over components computed
# wrong values.  Threaded runs take the compiled solve on thread blocks instead (each phase
# one parallel region over row blocks, the components inside it: :mod:`.blocks`), or where
# it cannot run, solve the components one by one (:func:`bicgstab`).

@nb.njit(cache=True)
def _spmv_many(indptr, indices, data, X, Y, comps, act, runs):
    """``Y[d] = A X[d]`` for each active component ``d`` on the rows of ``runs``; each row
    summed as :func:`~haloflow.linalg.matrix.spmv` sums it.  Three active components share
    one pass over the matrix."""
    if len(comps) == 3 and act[0] and act[1] and act[2]:
        for q in range(len(runs) // 2):
            _rows_three(indptr, indices, data, X, Y, runs[2 * q], runs[2 * q + 1])
        return
    for d in comps:
        if not act[d]:
            continue
        for q in range(len(runs) // 2):
            _rows_one(indptr, indices, data, X[d], Y[d], runs[2 * q], runs[2 * q + 1])


@nb.njit(cache=True, inline="always")
def _rows_three(indptr, indices, data, X, Y, lo, hi):
    """``Y[0:3] = A X[0:3]`` on rows ``lo..hi-1``: one pass over the matrix for all three."""
    x0, x1, x2, y0, y1, y2 = X[0], X[1], X[2], Y[0], Y[1], Y[2]
    for i in range(lo, hi):
        s0, s1, s2 = tb.row3(indptr, indices, data, x0, x1, x2, i)
        y0[i] = s0
        y1[i] = s1
        y2[i] = s2


@nb.njit(cache=True, inline="always")
def _rows_one(indptr, indices, data, x, y, lo, hi):
    """``y = A x`` on rows ``lo..hi-1``, each row summed as ``matrix.spmv`` sums it."""
    for i in range(lo, hi):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s


@nb.njit(cache=True)
def _residual_many(indptr, indices, data, X, B, R, comps, runs):
    """``R[d] = B[d] - A X[d]`` on the rows of ``runs`` (as ``residual`` sums a row)."""
    for d in comps:
        x, b, r = X[d], B[d], R[d]
        for q in range(len(runs) // 2):
            for i in range(runs[2 * q], runs[2 * q + 1]):
                s = b[i]
                for k in range(indptr[i], indptr[i + 1]):
                    s -= data[k] * x[indices[k]]
                r[i] = s


@nb.njit(cache=True)
def _bicg3_start(R, B, R0, P, V, comps, n, out):
    """``out[2j], out[2j+1] = r.r, b.b`` of component ``comps[j]``; ``r0 = r``, ``p = v =
    0``."""
    for j in range(len(comps)):
        d = comps[j]
        r, b, r0, p, v = R[d], B[d], R0[d], P[d], V[d]
        rr = 0.0
        bb = 0.0
        for i in range(n):
            rr += r[i] * r[i]
            bb += b[i] * b[i]
            r0[i] = r[i]
            p[i] = 0.0
            v[i] = 0.0
        out[2 * j] = rr
        out[2 * j + 1] = bb


@nb.njit(cache=True)
def _bicg3_p(P, R, V, beta, omega, invd, PH, comps, act, n):
    """``p = r + beta (p - omega v)``, ``phat = D^-1 p`` (as :func:`_bicg_p`)."""
    for d in comps:
        if not act[d]:
            continue
        b, w = beta[d], omega[d]
        p, r, v, ph = P[d], R[d], V[d], PH[d]
        for i in range(n):
            p[i] = r[i] + b * (p[i] - w * v[i])
            ph[i] = invd[i] * p[i]


@nb.njit(cache=True)
def _bicg3_r0v(R0, V, comps, act, n, out):
    """``out[j] = r0.v`` of each active component (0 for the others)."""
    for j in range(len(comps)):
        d = comps[j]
        r0, v = R0[d], V[d]
        s = 0.0
        if act[d]:
            for i in range(n):
                s += r0[i] * v[i]
        out[j] = s


@nb.njit(cache=True)
def _bicg3_s(S, R, V, alpha, invd, SH, comps, act, n):
    for d in comps:
        if not act[d]:
            continue
        a = alpha[d]
        s, r, v, sh = S[d], R[d], V[d], SH[d]
        for i in range(n):
            s[i] = r[i] - a * v[i]
            sh[i] = invd[i] * s[i]


@nb.njit(cache=True)
def _bicg3_dot3(T, S, comps, act, n, out):
    """``out[3j:3j+3] = (t.s, t.t, s.s)`` of each active component."""
    for j in range(len(comps)):
        d = comps[j]
        t, s = T[d], S[d]
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        if act[d]:
            for i in range(n):
                s1 += t[i] * s[i]
                s2 += t[i] * t[i]
                s3 += s[i] * s[i]
        out[3 * j] = s1
        out[3 * j + 1] = s2
        out[3 * j + 2] = s3


@nb.njit(cache=True)
def _bicg3_xr(X, PH, SH, R, S, T, alpha, omega, R0, comps, act, n, out):
    """``x += alpha phat + omega shat; r = s - omega t``; ``out[2j:2j+2] = (r0.r, r.r)``.
    Components with ``act == 2`` stop here: ``x += alpha phat`` only (converged at s)."""
    for j in range(len(comps)):
        d = comps[j]
        a, w = alpha[d], omega[d]
        x, ph, sh, r, s, t, r0 = X[d], PH[d], SH[d], R[d], S[d], T[d], R0[d]
        s1 = 0.0
        s2 = 0.0
        if act[d] == 2:
            for i in range(n):
                x[i] += a * ph[i]
        elif act[d]:
            for i in range(n):
                x[i] += a * ph[i] + w * sh[i]
                r[i] = s[i] - w * t[i]
                s1 += r0[i] * r[i]
                s2 += r[i] * r[i]
        out[2 * j] = s1
        out[2 * j + 1] = s2


LOCKSTEP_SETS = 7  # the lockstep BiCGStab's rows of three vectors (see ManyWorkspace)


class ManyWorkspace:
    """The vectors of the lockstep BiCGStab, ``(sets, 3, n_cells)``: the right-hand sides (whose
    rows the solve reuses for ``t`` once the residual is formed) and six Krylov vectors per
    component.  Its rows also serve as a :class:`Workspace`'s vectors (``as_workspace``),
    since the momentum and pressure solves never overlap.  Where the velocity is solved
    otherwise (symmetric Gauss-Seidel: the right-hand sides and a residual), ``sets`` = 4
    rows of three are enough: the pressure's 4 vectors and its AMG's levels fit in 12
    (an AMG that needs more allocates its own), 72 bytes per cell less than 21."""

    def __init__(self, n_cells, n_rows, sets: int = LOCKSTEP_SETS):
        self.w = np.zeros((sets, 3, n_cells))
        self.invd = np.zeros(n_rows)
        self.red_out = np.zeros(9)  # per-component partial sums, 3 at most per component
        self.act = np.zeros(3, dtype=np.int64)
        self.scal = np.zeros((4, 3))  # alpha, beta, omega, rho per component
        # the compiled solve's scalars per component: alpha, beta, omega, rho, rho_new,
        # tolerance, norm of b, residual, initial residual
        self.sc = np.zeros((9, 3))
        self.out = np.zeros(6, dtype=np.int64)  # its iterations and convergence flags
        self.count = np.zeros(3, dtype=np.int64)  # its allreduces, exchanges, fields
        self.plan = None  # its LockstepPlan (None: the Python path), made on first use
        self.plan_key = None  # (exchanger id, components) the plan was made for

    @property
    def rhs(self) -> np.ndarray:
        return self.w[0]

    def as_workspace(self, count: int) -> Workspace:
        """A :class:`Workspace` whose first vectors are rows of this one (``count`` at
        least; more are added as its own)."""
        ws = Workspace.__new__(Workspace)
        flat = self.w.reshape(-1, self.w.shape[2])
        ws.v = list(flat)
        ws.invd = self.invd
        ws.rows = flat
        ws.reserve(count)
        return ws


def _matvec_many(A, X, Y, comps, act, fields) -> None:
    """``Y = A X`` for the active components; their ghosts travel in one exchange
    (overlapped with the inner rows where the exchanger can).  ``fields``: the rows of ``X``
    of every component, sent as they are while all are active."""
    p = A.pattern
    if not act[comps].all():
        fields = tuple(X[d] for d in comps if act[d])
    if A.overlap:
        with A.timers("halo_solve"):
            h = A.ex.start(fields)
        _spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.inner_runs)
        with A.timers("halo_solve"):
            A.ex.finish(h)
        _spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.outer_runs)
        return
    with A.timers("halo_solve"):
        A.ex.exchange(fields)
    _spmv_many(p.indptr, p.indices, A.data, X, Y, comps, act, p.all_runs)


def bicgstab_many(A, X, comps, tol, max_iter, red: Reducer, mws: ManyWorkspace,
                  rel_tol: float = 0.0, ghosts_current: bool = False,
                  exchange_after: bool = False) -> list[SolveInfo]:
    """Solve ``A X[d] = mws.rhs[d]`` in place for each ``d`` in ``comps`` (an int64 array) by
    Jacobi-preconditioned BiCGStab, all components in lockstep: per iteration two exchanges
    and three allreduces in all, not per component.  Returns one :class:`SolveInfo` per
    component, each what :func:`bicgstab` would return for that component alone.
    ``ghosts_current``: the ghost values of ``X`` are up to date (no exchange first);
    ``exchange_after``: exchange the solution's ghosts at the end (inside the compiled call
    where it runs, which saves a Python exchange per solve)."""
    if mws.w.shape[0] < LOCKSTEP_SETS:
        raise ValueError(f"the lockstep BiCGStab needs a workspace of {LOCKSTEP_SETS} sets")
    plan = compiled_lockstep(A, len(comps), red, mws)
    if plan is not None:
        return _compiled_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current,
                              plan, exchange_after)
    infos = _python_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current)
    if exchange_after:
        with A.timers("halo_solve"):
            A.ex.exchange(tuple(X[d] for d in comps))
    return infos


def compiled_lockstep(A, m: int, red: Reducer, mws: ManyWorkspace) -> LockstepPlan | None:
    """The plan of the compiled lockstep solve of ``m`` components (made once per exchanger
    and count), or None where :func:`bicgstab_many` runs from Python."""
    key = (id(A.ex), m, threads.blocks())
    if mws.plan_key != key:
        mws.plan, mws.plan_key = lockstep_plan(A, m, red), key
    return mws.plan


def _python_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current):
    """:func:`bicgstab_many` phase by phase from Python (threads, or no compiled MPI)."""
    n = A.pattern.n_rows
    p_ = A.pattern
    B, R, R0, P, V, PH, SH = mws.w  # (a lockstep workspace: LOCKSTEP_SETS rows)
    T = B  # the right-hand side is not read after the residual
    S = R  # s = r - alpha v overwrites r, which the update then rebuilds from s
    m = len(comps)
    out, act = mws.red_out, mws.act
    alpha, beta, omega, rho = mws.scal
    xf = tuple(X[d] for d in comps)
    phf = tuple(PH[d] for d in comps)
    shf = tuple(SH[d] for d in comps)
    np.divide(1.0, A.diag, out=mws.invd)
    if not ghosts_current:
        with A.timers("halo_solve"):
            A.ex.exchange(xf)
    _residual_many(p_.indptr, p_.indices, A.data, X, B, R, comps, p_.all_runs)
    _bicg3_start(R, B, R0, P, V, comps, n, out)
    sums = red.sum(*out[: 2 * m])
    infos, tols, bnorms, rho_new = [], [], [], [0.0] * 3
    act[:] = 0
    for j in range(m):
        info, t, bn = initial_info(sums[2 * j], sums[2 * j + 1], tol, rel_tol)
        infos.append(info)
        tols.append(t)
        bnorms.append(bn)
        d = comps[j]
        act[d] = info.res0 > t
        rho[d] = alpha[d] = omega[d] = 1.0
        rho_new[d] = sums[2 * j]
    for it in range(1, max_iter + 1):
        if not act.any():
            return infos
        for d in comps:
            beta[d] = (rho_new[d] / rho[d]) * (alpha[d] / omega[d]) if act[d] else 0.0
            rho[d] = rho_new[d]
        _bicg3_p(P, R, V, beta, omega, mws.invd, PH, comps, act, n)
        _matvec_many(A, PH, V, comps, act, phf)
        _bicg3_r0v(R0, V, comps, act, n, out)
        r0v = red.sum(*out[:m])
        for j in range(m):
            d = comps[j]
            if act[d]:
                if r0v[j] == 0.0:
                    act[d] = 0
                    infos[j].converged = infos[j].res <= tols[j]
                else:
                    alpha[d] = rho[d] / r0v[j]
        _bicg3_s(S, R, V, alpha, mws.invd, SH, comps, act, n)
        _matvec_many(A, SH, T, comps, act, shf)
        _bicg3_dot3(T, S, comps, act, n, out)
        dots = red.sum(*out[: 3 * m])
        for j in range(m):
            d = comps[j]
            if not act[d]:
                continue
            ts, tt, ss = dots[3 * j: 3 * j + 3]
            infos[j].iters = it
            if np.sqrt(ss) / bnorms[j] <= tols[j] or tt == 0.0:
                act[d] = 2  # converged at s: x += alpha phat, then stop
                infos[j].res = np.sqrt(ss) / bnorms[j]
            else:
                omega[d] = ts / tt
        _bicg3_xr(X, PH, SH, R, S, T, alpha, omega, R0, comps, act, n, out)
        more = any(act[d] == 1 for d in comps)
        sums = red.sum(*out[: 2 * m]) if more else ()
        for j in range(m):
            d = comps[j]
            if act[d] == 2:
                act[d] = 0
            elif act[d]:
                info = infos[j]
                rho_new[d] = sums[2 * j]
                info.res = np.sqrt(sums[2 * j + 1]) / bnorms[j]
                if info.res <= tols[j]:
                    act[d] = 0
                elif omega[d] == 0.0 or rho_new[d] == 0.0:
                    act[d] = 0
                    info.converged = False
    for j in range(m):
        if act[comps[j]]:
            infos[j].converged = infos[j].res <= tols[j]
    return infos


@nb.njit(cache=True)
def _spmv_rows(indptr, indices, data, X, Y, act, m, comps):
    """``Y[d] = A X[d]`` on every row for the active components (three together)."""
    nr = len(indptr) - 1
    if tb.all_three(comps, act):
        _rows_three(indptr, indices, data, X, Y, 0, nr)
        return
    for d in comps:
        if act[d] == 1:
            _rows_one(indptr, indices, data, X[d], Y[d], 0, nr)


# slots of the int64 control array of the compiled lockstep solve (``LockstepPlan.ctl``)
(C_PAR, C_STARTALL, C_WAITALL, C_ALLREDUCE, C_STATUSES, C_REQS, C_NREQ, C_NN, C_NSEND,
 C_NRECV, C_FIRST, C_NT) = range(12)  # C_NT: thread blocks (1: the serial kernels)
N_C = 12
RBM = 9  # room for one fused sum of the lockstep solve: three scalars per component


@nb.njit(cache=True)
def _many_exchange(ctl, hb, cells, plan, X, comps, count, na):
    """The ghosts of ``X[comps]`` in one message per neighbour (``pack``'s layout for
    ``len(comps)`` fields, every component sent), on the plan's persistent requests; counted
    as an exchange of the ``na`` fields the Python path would send."""
    count[1] += 1
    count[2] += na
    if ctl[C_PAR] == 0 or ctl[C_NREQ] == 0:
        return
    m = len(comps)
    nn = ctl[C_NN]
    ns = m * ctl[C_NSEND]
    for k in range(nn):
        lo = plan[k]
        n = plan[k + 1] - lo
        for j in range(m):
            f = X[comps[j]]
            o = m * lo + j * n
            for i in range(n):
                hb[o + i] = f[cells[lo + i]]
    rc = mpicall.call_ip(ctl[C_STARTALL], ctl[C_NREQ], ctl[C_REQS])
    if rc == 0:
        rc = mpicall.call_ipp(ctl[C_WAITALL], ctl[C_NREQ], ctl[C_REQS], ctl[C_STATUSES])
    if rc != 0:
        raise RuntimeError("MPI error in the compiled momentum solve")
    rp = plan[nn + 1:]
    for k in range(nn):
        lo = rp[k]
        n = rp[k + 1] - lo
        g = ctl[C_FIRST] + lo
        for j in range(m):
            f = X[comps[j]]
            o = ns + m * lo + j * n
            for i in range(n):
                f[g + i] = hb[o + i]


@nb.njit(cache=True)
def _many_reduce(ctl, hnd, rb, k, count):
    """Sum ``rb[:k]`` over the ranks in place: one MPI_Allreduce where the run is parallel,
    counted always."""
    count[0] += 1
    if ctl[C_PAR] == 0:
        return
    a = rb.ctypes.data
    rc = mpicall.call_allreduce(ctl[C_ALLREDUCE], a, a + 8 * RBM, k, hnd[1], hnd[2], hnd[0])
    if rc != 0:
        raise RuntimeError("MPI error in the compiled momentum solve")
    for t in range(k):
        rb[t] = rb[RBM + t]


@nb.njit(cache=True)
def _many_start(indptr, indices, data, diag, invd, X, W, comps, rb):
    """``D^-1``, the residuals and the partial sums ``rb[2j], rb[2j+1] = r.r, b.b`` of
    component ``comps[j]``; ``r0 = r``, ``p = v = 0`` (as :func:`bicgstab_many`)."""
    n = len(diag)
    B, R, R0, P, V = W[0], W[1], W[2], W[3], W[4]
    for i in range(n):
        invd[i] = 1.0 / diag[i]
    for j in range(len(comps)):
        d = comps[j]
        x, b, r = X[d], B[d], R[d]
        for i in range(n):
            s = b[i]
            for k in range(indptr[i], indptr[i + 1]):
                s -= data[k] * x[indices[k]]
            r[i] = s
    _bicg3_start(R, B, R0, P, V, comps, n, rb)


@nb.njit(cache=True)
def _many_tolerances(comps, tol, rel_tol, act, sc, out, rb):
    """Each component's initial residual and stopping tolerance from the summed ``rb``, as
    :func:`initial_info` sets them."""
    for j in range(len(comps)):
        d = comps[j]
        rr, bb = rb[2 * j], rb[2 * j + 1]
        bnorm = np.sqrt(bb) if bb > 0.0 else 1.0
        res0 = np.sqrt(rr) / bnorm
        sc[8, d] = res0
        sc[7, d] = res0
        sc[6, d] = bnorm
        sc[5, d] = max(tol, rel_tol * res0)
        act[d] = 1 if res0 > sc[5, d] else 0
        sc[0, d] = sc[2, d] = sc[3, d] = 1.0
        sc[4, d] = rr
        out[d] = 0
        out[3 + d] = 1


@nb.njit(cache=True)
def _many_beta(comps, act, sc):
    """beta of each active component; returns the active count."""
    na = 0
    for d in comps:
        if act[d]:
            na += 1
            sc[1, d] = (sc[4, d] / sc[3, d]) * (sc[0, d] / sc[2, d])
            sc[3, d] = sc[4, d]
    return na


@nb.njit(cache=True)
def _many_p(R, P, V, PH, invd, comps, act, sc, n):
    """beta, ``p = r + beta (p - omega v)``, ``phat = D^-1 p``; returns the active count."""
    na = _many_beta(comps, act, sc)
    _bicg3_p(P, R, V, sc[1], sc[2], invd, PH, comps, act, n)
    return na


@nb.njit(cache=True)
def _many_r0v(R0, V, comps, act, rb, n):
    _bicg3_r0v(R0, V, comps, act, n, rb)


@nb.njit(cache=True)
def _many_alpha(comps, act, sc, out, rb):
    """alpha from the summed ``r0.v`` (a component with ``r0.v = 0`` stops); returns the
    active count."""
    na = 0
    for j in range(len(comps)):
        d = comps[j]
        if act[d]:
            if rb[j] == 0.0:
                act[d] = 0
                out[3 + d] = 1 if sc[7, d] <= sc[5, d] else 0
            else:
                sc[0, d] = sc[3, d] / rb[j]
                na += 1
    return na


@nb.njit(cache=True)
def _many_s(R, V, SH, invd, comps, act, sc, n):
    """``s = r - alpha v`` (over ``r``), ``shat = D^-1 s``."""
    _bicg3_s(R, R, V, sc[0], invd, SH, comps, act, n)


@nb.njit(cache=True)
def _many_dot3(T, R, comps, act, rb, n):
    _bicg3_dot3(T, R, comps, act, n, rb)


@nb.njit(cache=True)
def _many_omega(comps, act, sc, out, rb, it):
    """omega from the summed (t.s, t.t, s.s); a component converged at ``s`` gets
    ``act = 2``."""
    for j in range(len(comps)):
        d = comps[j]
        if act[d]:
            s1, s2, s3 = rb[3 * j], rb[3 * j + 1], rb[3 * j + 2]
            out[d] = it
            if np.sqrt(s3) / sc[6, d] <= sc[5, d] or s2 == 0.0:
                act[d] = 2
                sc[7, d] = np.sqrt(s3) / sc[6, d]
            else:
                sc[2, d] = s1 / s2


@nb.njit(cache=True)
def _many_xr(X, PH, SH, R, T, R0, comps, act, sc, rb, n):
    """``x += alpha phat + omega shat; r = s - omega t`` with partial (r0.r, r.r) in
    ``rb``; ``x += alpha phat`` only for ``act == 2``.  Returns whether any goes on."""
    _bicg3_xr(X, PH, SH, R, R, T, sc[0], sc[2], R0, comps, act, n, rb)
    return _many_more(comps, act)


@nb.njit(cache=True)
def _many_more(comps, act):
    """Components converged at ``s`` (``act == 2``) stop; returns whether any goes on."""
    more = False
    for d in comps:
        if act[d] == 2:  # converged at s: done
            act[d] = 0
        elif act[d] == 1:
            more = True
    return more


@nb.njit(cache=True)
def _many_update(comps, act, sc, out, rb):
    for j in range(len(comps)):
        d = comps[j]
        if act[d] == 1:
            w = sc[2, d]
            sc[4, d] = rb[2 * j]
            sc[7, d] = np.sqrt(rb[2 * j + 1]) / sc[6, d]
            if sc[7, d] <= sc[5, d]:
                act[d] = 0
            elif w == 0.0 or rb[2 * j] == 0.0:
                act[d] = 0
                out[3 + d] = 0


@nb.njit(cache=True)
def _bicgstab_many_c(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                     act, sc, out, count, ctl, hnd, hb, cells, plan, rb, part, exchange_x,
                     exchange_after):
    """:func:`bicgstab_many` as one compiled call: the same operations in the same order
    (so the same iterates to the bit), its exchanges and fused sums made from here
    (``ctl[C_PAR]``) or only counted (one rank without neighbours).  ``sc[0..8, d]``:
    alpha, beta, omega, rho, rho_new, tolerance, ||b||, residual, initial residual;
    ``out[d]``: iterations, ``out[3 + d]``: converged; ``count``: allreduces, exchanges and
    exchanged fields.  ``exchange_after``: the solution's ghosts exchanged at the end.
    ``ctl[C_NT] > 1``: on that many thread blocks (``part``: their partial sums)."""
    m = len(comps)
    if exchange_x:
        _many_exchange(ctl, hb, cells, plan, X, comps, count, m)
    if ctl[C_NT] > 1:
        _many_iterate_blocks(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol,
                             max_iter, act, sc, out, count, ctl, hnd, hb, cells, plan, rb, part)
    else:
        _many_iterate(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                      act, sc, out, count, ctl, hnd, hb, cells, plan, rb)
    if exchange_after:
        _many_exchange(ctl, hb, cells, plan, X, comps, count, m)


@nb.njit(cache=True)
def _many_iterate(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                  act, sc, out, count, ctl, hnd, hb, cells, plan, rb):
    """The iterations of :func:`_bicgstab_many_c` (ghosts of ``X`` current)."""
    n = len(diag)
    m = len(comps)
    R, R0, P, V, PH, SH = W[1], W[2], W[3], W[4], W[5], W[6]
    T = W[0]  # the right-hand side is not read after the residual
    _many_start(indptr, indices, data, diag, invd, X, W, comps, rb)
    _many_reduce(ctl, hnd, rb, 2 * m, count)
    _many_tolerances(comps, tol, rel_tol, act, sc, out, rb)
    for it in range(1, max_iter + 1):
        na = _many_p(R, P, V, PH, invd, comps, act, sc, n)
        if na == 0:
            return
        _many_exchange(ctl, hb, cells, plan, PH, comps, count, na)
        _spmv_rows(indptr, indices, data, PH, V, act, m, comps)
        _many_r0v(R0, V, comps, act, rb, n)
        _many_reduce(ctl, hnd, rb, m, count)
        na = _many_alpha(comps, act, sc, out, rb)
        _many_s(R, V, SH, invd, comps, act, sc, n)
        _many_exchange(ctl, hb, cells, plan, SH, comps, count, na)
        _spmv_rows(indptr, indices, data, SH, T, act, m, comps)
        _many_dot3(T, R, comps, act, rb, n)
        _many_reduce(ctl, hnd, rb, 3 * m, count)
        _many_omega(comps, act, sc, out, rb, it)
        if _many_xr(X, PH, SH, R, T, R0, comps, act, sc, rb, n):
            _many_reduce(ctl, hnd, rb, 2 * m, count)
            _many_update(comps, act, sc, out, rb)
    for d in comps:
        if act[d]:
            out[3 + d] = 1 if sc[7, d] <= sc[5, d] else 0


@nb.njit(cache=True)
def _many_iterate_blocks(indptr, indices, data, diag, invd, X, W, comps, tol, rel_tol, max_iter,
                         act, sc, out, count, ctl, hnd, hb, cells, plan, rb, part):
    """:func:`_many_iterate` on ``ctl[C_NT]`` thread blocks (:mod:`.blocks`): the same
    phases, each one parallel region for every active component, a product fused with the
    dot products that follow it."""
    n = len(diag)
    m = len(comps)
    nt = ctl[C_NT]
    R, R0, P, V, PH, SH = W[1], W[2], W[3], W[4], W[5], W[6]
    T = W[0]
    tb.many_start(indptr, indices, data, diag, invd, X, W, comps, nt, part, rb)
    _many_reduce(ctl, hnd, rb, 2 * m, count)
    _many_tolerances(comps, tol, rel_tol, act, sc, out, rb)
    for it in range(1, max_iter + 1):
        na = _many_beta(comps, act, sc)
        if na == 0:
            return
        tb.many_p(P, R, V, sc[1], sc[2], invd, PH, comps, act, n, nt)
        _many_exchange(ctl, hb, cells, plan, PH, comps, count, na)
        tb.many_product_r0v(indptr, indices, data, PH, V, R0, comps, act, nt, part, rb)
        _many_reduce(ctl, hnd, rb, m, count)
        na = _many_alpha(comps, act, sc, out, rb)
        tb.many_s(R, V, sc[0], invd, SH, comps, act, n, nt)
        _many_exchange(ctl, hb, cells, plan, SH, comps, count, na)
        tb.many_product_dot3(indptr, indices, data, SH, T, R, comps, act, nt, part, rb)
        _many_reduce(ctl, hnd, rb, 3 * m, count)
        _many_omega(comps, act, sc, out, rb, it)
        tb.many_xr(X, PH, SH, R, T, sc[0], sc[2], R0, comps, act, n, nt, part, rb)
        if _many_more(comps, act):
            _many_reduce(ctl, hnd, rb, 2 * m, count)
            _many_update(comps, act, sc, out, rb)
    for d in comps:
        if act[d]:
            out[3 + d] = 1 if sc[7, d] <= sc[5, d] else 0


TAG_MANY = 7441


class LockstepPlan:
    """What :func:`_bicgstab_many_c` sends: the exchanger's pack layout for ``m`` fields on
    persistent requests of our own over one buffer, the collective handles, and the control
    array with the MPI function addresses.  A serial plan only counts."""

    def __init__(self, A, m: int, comm=None, addresses=None):
        self.ctl = np.zeros(N_C, dtype=np.int64)
        self.rb = np.zeros(2 * RBM)
        nt = threads.blocks() if A.pattern.n_rows >= threads.LEVEL_MIN_ROWS else 1
        self.ctl[C_NT] = nt
        self.part = np.zeros((nt, RBM))  # the thread blocks' partial sums
        self.messages = self.nbytes = 0
        self._reqs = None
        if comm is None:
            self.hb = np.zeros(1)
            self.cells = np.zeros(1, dtype=A.pattern.indices.dtype)
            self.plan = np.zeros(2, dtype=np.int64)
            self.hnd = _self_handles_or_zeros()
            return
        from ..parallel import cplan

        ex = A.ex
        sp, rp = ex.send_ptr, ex.recv_ptr
        nn = len(ex.neighbours)
        ns = m * ex.n_send
        self.hb = np.zeros(max(1, ns + m * ex.n_recv))
        self.cells = np.asarray(ex.send_cells)
        self.plan = np.concatenate([sp, rp]).astype(np.int64)
        self.hnd = cplan.collective_handles(comm)
        reqs = cplan.Requests(comm)
        hb = self.hb
        first, nreq = reqs.add(
            [(q, hb[m * sp[k]:m * sp[k + 1]]) for k, q in enumerate(ex.neighbours)],
            [(q, hb[ns + m * rp[k]:ns + m * rp[k + 1]]) for k, q in enumerate(ex.neighbours)],
            TAG_MANY)
        reqs.close()
        self._reqs = reqs
        c = self.ctl
        c[C_PAR] = 1
        for name, slot in (("startall", C_STARTALL), ("waitall", C_WAITALL),
                           ("allreduce", C_ALLREDUCE)):
            c[slot] = addresses[name]
        c[C_STATUSES], c[C_REQS], c[C_NREQ] = reqs.status_address, reqs.address(first), nreq
        c[C_NN], c[C_NSEND], c[C_NRECV], c[C_FIRST] = nn, ex.n_send, ex.n_recv, ex.n_owned
        self.messages, self.nbytes = nn, 8 * ns


def _self_handles_or_zeros() -> np.ndarray:
    """Handles a serial plan passes on and never uses (without MPI: zeros)."""
    try:
        from ..parallel import cplan
    except ImportError:
        return np.zeros(3, dtype=np.int64)
    return cplan.self_handles()


def lockstep_plan(A, m: int, red: Reducer) -> LockstepPlan | None:
    """The compiled lockstep solve's plan for matrix ``A`` and ``m`` components, or None
    where the Python path must run: no C MPI functions, device-resident
    fields or an exchanger without a pack layout.  Every rank of a parallel run decides the
    same (one set-up collective)."""
    if not red.parallel and not A.ex.neighbours:
        return LockstepPlan(A, m)
    ex = A.ex
    ok = (hasattr(ex, "send_cells")
          and not getattr(getattr(ex, "space", None), "on_device", False))
    addr = mpicall.addresses() if ok else None
    ok = addr is not None and red.parallel
    if red.parallel:
        from ..parallel import transfer

        ok = transfer.total(red.comm, 0 if ok else 1) == 0
    return LockstepPlan(A, m, red.comm, addr) if ok else None


def _compiled_many(A, X, comps, tol, max_iter, red, mws, rel_tol, ghosts_current, plan,
                   exchange_after):
    """:func:`bicgstab_many` as one compiled call, then the Python path's counters: at 512
    cells the Python loop cost more than its arithmetic, and on parallel runs each of its
    phases paid Python-side MPI calls."""
    p = A.pattern
    c = mws.count
    c[:] = 0
    _bicgstab_many_c(p.indptr, p.indices, A.data, A.diag, mws.invd, X, mws.w, comps,
                     tol, rel_tol, max_iter, mws.act, mws.sc, mws.out, c, plan.ctl, plan.hnd,
                     plan.hb, plan.cells, plan.plan, plan.rb, plan.part, not ghosts_current,
                     exchange_after)
    return lockstep_results(A, red, mws, plan, comps)


def lockstep_results(A, red, mws: ManyWorkspace, plan: LockstepPlan, comps) -> list[SolveInfo]:
    """After a compiled lockstep solve: its reductions and exchanges (``mws.count``) added
    to the counters the Python path keeps, and one :class:`SolveInfo` per component."""
    c = mws.count
    st = red.stats
    st.calls += int(c[0])
    st = A.ex.stats
    st.calls += int(c[1])
    st.fields += int(c[2])
    if plan.ctl[C_PAR]:
        red.stats.compiled += int(c[0])
        st.compiled += int(c[1])
        st.messages += int(c[1]) * plan.messages
        st.bytes += int(c[1]) * plan.nbytes
        ph = A.timers("halo_solve")
        if hasattr(ph, "calls"):  # (untimed: a null phase)
            ph.calls += int(c[1])
    sc, out = mws.sc, mws.out
    return [SolveInfo(iters=int(out[d]), res0=float(sc[8, d]), res=float(sc[7, d]),
                      converged=bool(out[3 + d])) for d in comps]
