"""The whole-solve compiled CPU target of :mod:`.flexible`'s methods: their operations over
the AMG hierarchy packed by :mod:`.kcycle`, preconditioned by the compiled cycle
(:mod:`.cycle`), the matrix-vector product fused with the dot products it feeds and the
reductions made from compiled code.  The context ``c`` is the tuple ``(h, d0, lu, ctl, cnt)``
of :class:`.kcycle.CompiledSolve`; a threaded rank runs the vector operations on its thread
blocks (:mod:`.blocks`).
"""

from __future__ import annotations

import numba as nb

from . import amg_kernels as ak
from . import blocks as tb
from . import cycle
from .cycle import H_PART, N, _blocks, _exchange, _level, _reduce, _sums


@nb.njit(cache=True)
def _rows(h):
    return h[8][0, N]


@nb.njit(cache=True)
def residual(ctx, x, b, r):
    """``DistMatrix.residual``: exchange, then r = b - A x."""
    h, d0, lu, ctl, cnt = ctx
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, x, True)
    nt = _blocks(h, 0)
    if nt:
        tb.residual(ip, ix, data, x, b, r, nt)
    else:
        ak.residual(ip, ix, data, x, b, r)


@nb.njit(cache=True)
def matvec(ctx, x, y):
    """``DistMatrix.matvec``: exchange, then y = A x."""
    h, d0, lu, ctl, cnt = ctx
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, x, True)
    nt = _blocks(h, 0)
    if nt:
        tb.spmv(ip, ix, data, x, y, nt)
    else:
        ak.spmv(ip, ix, data, x, y)


@nb.njit(cache=True)
def precondition(ctx, r, z):
    """z = the compiled cycle applied to r."""
    cycle.apply(ctx, r, z)


@nb.njit(cache=True)
def copy(ctx, src, dst):
    n = _rows(ctx[0])
    dst[:n] = src[:n]


@nb.njit(cache=True)
def dot2(ctx, a, b, d, e):
    """(a.b, d.e) over the owned rows of level 0."""
    h = ctx[0]
    n = _rows(h)
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]  # the row after the blocks' partials
        tb.dot2(a, b, d, e, n, nt, h[H_PART], sm)
        return sm[0], sm[1]
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        s1 += a[i] * b[i]
        s2 += d[i] * e[i]
    return s1, s2


@nb.njit(cache=True)
def dot(ctx, a, b):
    h = ctx[0]
    n = _rows(h)
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
def sum1(ctx, a):
    h, cnt = ctx[0], ctx[4]
    sm = _sums(h)
    sm[0] = a
    _reduce(h, cnt, 1, True)
    return sm[0]


@nb.njit(cache=True)
def sum2(ctx, a, b):
    h, cnt = ctx[0], ctx[4]
    sm = _sums(h)
    sm[0], sm[1] = a, b
    _reduce(h, cnt, 2, True)
    return sm[0], sm[1]


@nb.njit(cache=True)
def sum4(ctx, a, b, d, e):
    h, cnt = ctx[0], ctx[4]
    sm = _sums(h)
    sm[0], sm[1], sm[2], sm[3] = a, b, d, e
    _reduce(h, cnt, 4, True)
    return sm[0], sm[1], sm[2], sm[3]


@nb.njit(cache=True)
def sum5(ctx, a, b, d, e, f):
    h, cnt = ctx[0], ctx[4]
    sm = _sums(h)
    sm[0], sm[1], sm[2], sm[3], sm[4] = a, b, d, e, f
    _reduce(h, cnt, 5, True)
    return sm[0], sm[1], sm[2], sm[3], sm[4]


@nb.njit(cache=True)
def _spmv_dots4(ip, ix, data, p, q, r, n):
    """q = A p and (p.q, p.r, q.q, q.r) in one pass, the sums in ``dot2``'s order."""
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
def matvec_dots(ctx, p, q, r):
    """``matvec`` (q = A p), then (p.q, p.r, q.q, q.r); one region on thread blocks."""
    h, d0, lu, ctl, cnt = ctx
    n = _rows(h)
    nt = _blocks(h, 0)
    ip, ix, data, dp, dinv = _level(h, d0, 0)
    _exchange(h, cnt, 0, p, True)
    if not nt:
        return _spmv_dots4(ip, ix, data, p, q, r, n)
    sm = h[H_PART][nt]
    tb.spmv_dots4(ip, ix, data, p, q, r, nt, h[H_PART], sm)
    return sm[0], sm[1], sm[2], sm[3]


@nb.njit(cache=True)
def fcg_step(ctx, x, r, p, q, alpha):
    """x += alpha p; r -= alpha q; returns r.r."""
    h = ctx[0]
    n = _rows(h)
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
def fcg_direction(ctx, z, beta, p):
    """p = z - beta p."""
    h = ctx[0]
    n = _rows(h)
    nt = _blocks(h, 0)
    if nt:
        tb.direction(z, beta, p, n, nt)
        return
    for k in range(n):
        p[k] = z[k] - beta * p[k]


@nb.njit(cache=True)
def cg1_step_precondition(ctx, x, r, p, s, u, alpha):
    """x += alpha p; r -= alpha s; u = the cycle applied to r; returns (p.r, r.r)."""
    h = ctx[0]
    n = _rows(h)
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.cg1_step(x, r, p, s, alpha, n, nt, h[H_PART], sm)
        pr, rr = sm[0], sm[1]
    else:
        pr = 0.0
        rr = 0.0
        for k in range(n):
            x[k] += alpha * p[k]
            r[k] -= alpha * s[k]
            pr += p[k] * r[k]
            rr += r[k] * r[k]
    precondition(ctx, r, u)
    return pr, rr


@nb.njit(cache=True)
def cg1_dots(ctx, r, u, w, s):
    """(r.u, w.u, u.s)."""
    h = ctx[0]
    n = _rows(h)
    nt = _blocks(h, 0)
    if nt:
        sm = h[H_PART][nt]
        tb.cg1_dots(r, u, w, s, n, nt, h[H_PART], sm)
        return sm[0], sm[1], sm[2]
    return ak._kdots2(u, r, w, s, n)  # (u.r, u.w, u.s): the same products and order


@nb.njit(cache=True)
def cg1_directions(ctx, u, w, beta, p, s):
    """p = u + beta p; s = w + beta s."""
    h = ctx[0]
    n = _rows(h)
    nt = _blocks(h, 0)
    if nt:
        tb.cg1_directions(u, w, beta, p, s, n, nt)
        return
    for k in range(n):
        p[k] = u[k] + beta * p[k]
        s[k] = w[k] + beta * s[k]
