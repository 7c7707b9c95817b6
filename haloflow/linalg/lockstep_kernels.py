"""The kernels and work vectors of the lockstep BiCGStab (:mod:`.lockstep`): every vector
update and product handles all components still iterating in one pass, and returns the
partial dot products the next reduction needs.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import blocks as tb
from .krylov import Workspace


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


@nb.njit(cache=True)
def many_tolerances(comps, tol, rel_tol, act, sc, out, rb):
    """Each component's initial residual and stopping tolerance from the summed ``rb``, as
    ``targets.initial`` sets them."""
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
def many_beta(comps, act, sc):
    """beta of each active component; returns the active count."""
    na = 0
    for d in comps:
        if act[d]:
            na += 1
            sc[1, d] = (sc[4, d] / sc[3, d]) * (sc[0, d] / sc[2, d])
            sc[3, d] = sc[4, d]
    return na


@nb.njit(cache=True)
def many_alpha(comps, act, sc, out, rb):
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
def many_omega(comps, act, sc, out, rb, it):
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
def many_more(comps, act):
    """Components converged at ``s`` (``act == 2``) stop; returns whether any goes on."""
    more = False
    for d in comps:
        if act[d] == 2:  # converged at s: done
            act[d] = 0
        elif act[d] == 1:
            more = True
    return more


@nb.njit(cache=True)
def many_update(comps, act, sc, out, rb):
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
        ws.out = np.zeros(4)
        ws.rows = flat
        ws.reserve(count)
        return ws
