"""FCG(1) and single-reduction CG in compiled code, preconditioned by the compiled cycle
(:mod:`.cycle`): the pressure solve's outer Krylov iteration, with the same arithmetic as
:func:`.krylov.fcg` and :func:`.lowsync.cg1` and the matrix-vector product fused with the
dot products it feeds.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from . import blocks as tb
from .amg_kernels import (
    residual,
    spmv,
)
from .cycle import H_PART, N, _apply, _blocks, _exchange, _level, _reduce, _sums
from .krylov import foreseen_converged


@nb.njit(cache=True)
def _dot2(h, a, b, c, d, n):
    """(a.b, c.d) over the owned rows of level 0."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]  # the row after the blocks' partials
        tb.dot2(a, b, c, d, n, nt, h[H_PART], sm)
        return sm[0], sm[1]
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        s1 += a[i] * b[i]
        s2 += c[i] * d[i]
    return s1, s2


@nb.njit(cache=True)
def _dot1(h, a, b, n):
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.dot(a, b, n, nt, h[H_PART], sm)
        return sm[0]
    s = 0.0
    for k in range(n):
        s += a[k] * b[k]
    return s


@nb.njit(cache=True)
def _fcg_step(h, x, r, p, q, alpha, n):
    """x += alpha p; r -= alpha q; returns r.r."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.fcg_step(x, r, p, q, alpha, n, nt, h[H_PART], sm)
        return sm[0]
    rr = 0.0
    for k in range(n):
        x[k] += alpha * p[k]
        r[k] -= alpha * q[k]
        rr += r[k] * r[k]
    return rr


@nb.njit(cache=True)
def _fcg_direction(h, z, beta, p, n):
    nt = _blocks(h, 0)
    if nt:
        tb.direction(z, beta, p, n, nt)
        return
    for k in range(n):
        p[k] = z[k] - beta * p[k]


@nb.njit(cache=True)
def _top_matvec(h, d0, cnt, x, y):
    """``DistMatrix.matvec``: exchange, then y = A x."""
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, x, True)
    nt = _blocks(h, 0)
    if nt:
        tb.spmv(ip, ix, data, x, y, nt)
    else:
        spmv(ip, ix, data, x, y)


@nb.njit(cache=True)
def _spmv_dots4(ip, ix, data, p, q, r, n):
    """q = A p and (p.q, p.r, q.q, q.r) in one pass, the sums in ``_dot2``'s order."""
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    s4 = 0.0
    for i in range(n):
        qi = 0.0
        for k in range(ip[i], ip[i + 1]):
            qi += data[k] * p[ix[k]]
        q[i] = qi
        s1 += p[i] * qi
        s2 += p[i] * r[i]
        s3 += qi * qi
        s4 += qi * r[i]
    return s1, s2, s3, s4


@nb.njit(cache=True)
def _top_matvec_dots(h, d0, cnt, p, q, r, n):
    """``_top_matvec`` (q = A p), then (p.q, p.r, q.q, q.r); one region on thread
    blocks."""
    nt = _blocks(h, 0)
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, p, True)
    if not nt:
        return _spmv_dots4(ip, ix, data, p, q, r, n)
    sm = h[H_PART][nt]
    tb.spmv_dots4(ip, ix, data, p, q, r, nt, h[H_PART], sm)
    return sm[0], sm[1], sm[2], sm[3]


@nb.njit(cache=True)
def _top_residual(h, d0, cnt, x, b, r):
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, x, True)
    nt = _blocks(h, 0)
    if nt:
        tb.residual(ip, ix, data, x, b, r, nt)
    else:
        residual(ip, ix, data, x, b, r)


@nb.njit(cache=True)
def _sum1(h, cnt, a):
    sm = _sums(h)
    sm[0] = a
    _reduce(h, cnt, 1, True)
    return sm[0]


@nb.njit(cache=True)
def _sum2(h, cnt, a, b):
    sm = _sums(h)
    sm[0] = a
    sm[1] = b
    _reduce(h, cnt, 2, True)
    return sm[0], sm[1]


@nb.njit(cache=True)
def _sum4(h, cnt, a, b, c, d):
    sm = _sums(h)
    sm[0], sm[1], sm[2], sm[3] = a, b, c, d
    _reduce(h, cnt, 4, True)
    return sm[0], sm[1], sm[2], sm[3]


@nb.njit(cache=True)
def _initial(rr, bb, tol, rel_tol, out):
    """``krylov.initial_info``: out = (iters, res0, res, converged); returns (tol, ||b||)."""
    bnorm = np.sqrt(bb) if bb > 0.0 else 1.0
    out[0] = 0.0
    out[1] = np.sqrt(rr) / bnorm
    out[2] = out[1]
    out[3] = 1.0
    return max(tol, rel_tol * out[1]), bnorm


@nb.njit(cache=True)
def fcg(h, d0, lu, ctl, cnt, b, x, tol, max_iter, rel_tol, r, z, p, q, out):
    """``krylov.fcg`` (FCG(1)) with the K-cycle preconditioner, operation for operation
    (the last iteration's cycle skipped where the residual it foresees is converged)."""
    n = h[8][0, N]
    _top_residual(h, d0, cnt, x, b, r)
    rr, bb = _dot2(h, r, r, b, b, n)
    rr, bb = _sum2(h, cnt, rr, bb)
    tol, bnorm = _initial(rr, bb, tol, rel_tol, out)
    if out[1] <= tol:
        return
    _apply(h, d0, lu, ctl, cnt, r, z)
    p[:n] = z[:n]
    for it in range(1, max_iter + 1):
        pq, pr, qq, qr = _top_matvec_dots(h, d0, cnt, p, q, r, n)
        pq, pr, qq, qr = _sum4(h, cnt, pq, pr, qq, qr)
        out[0] = it
        if pq <= 0.0:
            break
        alpha = pr / pq
        local = _fcg_step(h, x, r, p, q, alpha, n)
        if foreseen_converged(rr, alpha, qq, qr, tol * bnorm):
            rr = _sum1(h, cnt, local)
            out[2] = np.sqrt(rr) / bnorm
            if out[2] <= tol:
                return
            _apply(h, d0, lu, ctl, cnt, r, z)
            zq = _sum1(h, cnt, _dot1(h, z, q, n))
        else:
            _apply(h, d0, lu, ctl, cnt, r, z)
            rr, zq = _sum2(h, cnt, local, _dot1(h, z, q, n))
            out[2] = np.sqrt(rr) / bnorm
            if out[2] <= tol:
                return
        _fcg_direction(h, z, zq / pq, p, n)
    out[3] = 1.0 if out[2] <= tol else 0.0


@nb.njit(cache=True)
def _cg1_step(h, x, r, p, s, alpha, n):
    """x += alpha p; r -= alpha s; returns (p.r, r.r)."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.cg1_step(x, r, p, s, alpha, n, nt, h[H_PART], sm)
        return sm[0], sm[1]
    pr = 0.0
    rr = 0.0
    for k in range(n):
        x[k] += alpha * p[k]
        r[k] -= alpha * s[k]
        pr += p[k] * r[k]
        rr += r[k] * r[k]
    return pr, rr


@nb.njit(cache=True)
def _cg1_dots(h, r, u, w, s, n):
    """(r.u, w.u, u.s)."""
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.cg1_dots(r, u, w, s, n, nt, h[H_PART], sm)
        return sm[0], sm[1], sm[2]
    ru = 0.0
    wu = 0.0
    us = 0.0
    for k in range(n):
        ru += r[k] * u[k]
        wu += w[k] * u[k]
        us += u[k] * s[k]
    return ru, wu, us


@nb.njit(cache=True)
def _cg1_directions(h, u, w, beta, p, s, n):
    """p = u + beta p; s = w + beta s."""
    nt = _blocks(h, 0)
    if nt:
        tb.cg1_directions(u, w, beta, p, s, n, nt)
        return
    for k in range(n):
        p[k] = u[k] + beta * p[k]
        s[k] = w[k] + beta * s[k]


@nb.njit(cache=True)
def cg1(h, d0, lu, ctl, cnt, b, x, tol, max_iter, rel_tol, r, u, w, p, s, out):
    """``lowsync.cg1`` (single-reduction flexible CG) with the K-cycle, op for op."""
    n = h[8][0, N]
    _top_residual(h, d0, cnt, x, b, r)
    _apply(h, d0, lu, ctl, cnt, r, u)
    _top_matvec(h, d0, cnt, u, w)
    ru, wu = _dot2(h, r, u, w, u, n)
    rr, bb = _dot2(h, r, r, b, b, n)
    sm = _sums(h)
    sm[0], sm[1], sm[2], sm[3] = ru, wu, rr, bb
    _reduce(h, cnt, 4, True)
    ru, wu, rr, bb = sm[0], sm[1], sm[2], sm[3]
    tol, bnorm = _initial(rr, bb, tol, rel_tol, out)
    if out[1] <= tol:
        return
    p[:n] = u[:n]
    s[:n] = w[:n]
    ps, pr = wu, ru
    for it in range(1, max_iter + 1):
        out[0] = it
        if ps <= 0.0:
            break
        pr_old, rr = _cg1_step(h, x, r, p, s, pr / ps, n)
        _apply(h, d0, lu, ctl, cnt, r, u)
        _top_matvec(h, d0, cnt, u, w)
        ru, wu, us = _cg1_dots(h, r, u, w, s, n)
        sm[0], sm[1], sm[2], sm[3], sm[4] = ru, wu, us, pr_old, rr
        _reduce(h, cnt, 5, True)
        ru, wu, us, pr_old, rr = sm[0], sm[1], sm[2], sm[3], sm[4]
        out[2] = np.sqrt(rr) / bnorm
        if out[2] <= tol:
            return
        beta = -us / ps
        _cg1_directions(h, u, w, beta, p, s, n)
        ps = wu + beta * (2.0 * us + beta * ps)
        pr = ru + beta * pr_old
    out[3] = 1.0 if out[2] <= tol else 0.0
