"""Thread-block kernels for the compiled solvers (:mod:`.kcycle`, the lockstep BiCGStab).

Why: numba's threaded builds of single vector operations (:mod:`..parallel.threads`) made the
compiled solvers step aside, so a threaded rank ran its solves from Python and paid a
parallel launch for every small operation.  Here each kernel splits the rows into ``nt``
contiguous blocks, one per thread (block ``t``: rows ``n t / nt`` to ``n (t + 1) / nt``,
the same rows in every kernel, so a thread keeps touching the memory it touched before),
and a fused phase (a whole lockstep update for all three velocity components, a product
with its dot products) is one parallel region.  Reductions go through per-block partial
sums added in block order, never atomics, so a result depends on the thread count only,
not on scheduling.

Gauss-Seidel is sequential, so across blocks it is Jacobi (hybrid Gauss-Seidel, as hypre's
hybrid smoothers): each block sweeps its own rows in order, reading the other blocks' values
as they were before the sweep (a snapshot of the rows within the matrix's bandwidth of a
block boundary), exactly as a rank holds its ghost values fixed during a sweep.  Threaded
results therefore differ from one thread's to within the solver tolerance, deterministically.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .matrix import row_product

# The compiled solvers call these kernels from compiled code.  Loaded from numba's cache, such
# a caller links against the parallel runtime, which only a parallel compile or a thread
# query loads: without it the link fails ("Symbol not found: allocate_sched") or the call
# crashes.  One query here loads it before any caller can run.
nb.get_num_threads()


@nb.njit(cache=True)
def bandwidth(indptr, indices, n) -> int:
    """max |i - j| over the entries of the owned rows with owned columns (set-up)."""
    bw = 0
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = np.int64(indices[k])
            if j < n:
                bw = max(bw, abs(j - i))
    return bw


@nb.njit(cache=True, inline="always")
def _x_of(x, xo, j, lo, hi, n):
    """x_j as block [lo, hi) sees it: other blocks' owned rows from the snapshot."""
    return xo[j] if j < lo or (j >= hi and j < n) else x[j]


@nb.njit(cache=True, parallel=True)
def gs_blocks(indptr, indices, data, diag_pos, dinv, b, x, n, forward, nt, bw, xo):
    """``amg.gs_sweep`` with the rows in ``nt`` blocks swept side by side, each reading the
    other blocks' rows from the snapshot ``xo`` (taken here, rows within ``bw`` of a
    boundary); each row summed as ``amg._gs_row`` sums it, so one block is that sweep to
    the bit.  Rows more than ``bw`` inside their block have every owned column in it and
    read ``x`` without the test (a fifth of a sweep's time on one block)."""
    for t in range(1, nt):
        c = n * t // nt
        for i in range(max(c - bw, 0), min(c + bw + 1, n)):
            xo[i] = x[i]
    for t in nb.prange(nt):
        lo = n * t // nt
        hi = n * (t + 1) // nt
        for q in range(hi - lo):
            i = lo + q if forward else hi - 1 - q
            s = b[i]
            if lo + bw <= i < hi - bw:
                for k in range(indptr[i], indptr[i + 1]):
                    s -= data[k] * x[indices[k]]
            else:
                for k in range(indptr[i], indptr[i + 1]):
                    s -= data[k] * _x_of(x, xo, indices[k], lo, hi, n)
            x[i] += s * dinv[i]


@nb.njit(cache=True, parallel=True)
def gs_from_zero(indptr, indices, data, diag_pos, b, x, n, nt, bw, dinv):
    """A forward :func:`gs_blocks` from x = 0 (the cycle's pre-smoothing) on a level whose
    rows split at the diagonal: the higher columns multiply zeros, and so do the earlier
    blocks' rows (the snapshot a sweep from zero takes), so only a row's lower columns in
    its own block are read: the same ``x`` as zeroing it and :func:`gs_blocks`, to the bit,
    in about half the reads.  Ghost entries of ``x`` are not touched."""
    for t in nb.prange(nt):
        lo = n * t // nt
        hi = n * (t + 1) // nt
        for i in range(lo, hi):
            s = b[i]
            if i >= lo + bw:  # every lower column in the block
                for k in range(indptr[i], diag_pos[i]):
                    s -= data[k] * x[indices[k]]
            else:
                for k in range(indptr[i], diag_pos[i]):
                    j = indices[k]
                    if j >= lo:
                        s -= data[k] * x[j]
            x[i] = s * dinv[i]


@nb.njit(cache=True, parallel=True)
def residual_restrict(indptr, indices, data, x, b, mptr, midx, rc, nc, nt):
    """rc = R (b - A x), without writing the residual: each coarse row gathers the residuals
    of its aggregate's rows (``midx[mptr[c]:mptr[c + 1]]``, in increasing order, so summed
    as ``amg.residual_restrict`` adds them), the coarse rows in ``nt`` blocks, so no two
    threads add into one entry."""
    for t in nb.prange(nt):
        for c in range(nc * t // nt, nc * (t + 1) // nt):
            s = 0.0
            for m in range(mptr[c], mptr[c + 1]):
                i = midx[m]
                r = b[i]
                for k in range(indptr[i], indptr[i + 1]):
                    r -= data[k] * x[indices[k]]
                s += r
            rc[c] = s


@nb.njit(cache=True, parallel=True)
def spmv(indptr, indices, data, x, y, nt):
    """y = A x on the owned rows."""
    n = len(indptr) - 1
    for t in nb.prange(nt):
        for i in range(n * t // nt, n * (t + 1) // nt):
            y[i] = row_product(indptr, indices, data, x, i)


@nb.njit(cache=True, parallel=True)
def spmv_dots4(indptr, indices, data, p, q, r, nt, part, out):
    """q = A p, then out[:4] = (p.q, p.r, q.q, q.r) in the same region (FCG's product and
    sums)."""
    n = len(indptr) - 1
    for t in nb.prange(nt):
        s0 = s1 = s2 = s3 = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            qi = row_product(indptr, indices, data, p, i)
            q[i] = qi
            s0 += p[i] * qi
            s1 += p[i] * r[i]
            s2 += qi * qi
            s3 += qi * r[i]
        part[t, 0], part[t, 1], part[t, 2], part[t, 3] = s0, s1, s2, s3
    _total(part, nt, 4, out)


@nb.njit(cache=True, parallel=True)
def spmv_kdots1(indptr, indices, data, c, v, b, nt, part, out):
    """v = A c, then ``kdots1``'s five sums in the same region."""
    n = len(indptr) - 1
    for t in nb.prange(nt):
        s0 = s1 = s2 = s3 = s4 = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            vi = row_product(indptr, indices, data, c, i)
            v[i] = vi
            s0 += c[i] * vi
            s1 += c[i] * b[i]
            s2 += b[i] * b[i]
            s3 += vi * vi
            s4 += b[i] * vi
        part[t, 0], part[t, 1], part[t, 2], part[t, 3], part[t, 4] = s0, s1, s2, s3, s4
    _total(part, nt, 5, out)


@nb.njit(cache=True, parallel=True)
def spmv_kdots2(indptr, indices, data, d, w, v, r2, nt, part, out):
    """w = A d, then ``kdots2``'s three sums in the same region."""
    n = len(indptr) - 1
    for t in nb.prange(nt):
        s0 = s1 = s2 = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            wi = row_product(indptr, indices, data, d, i)
            w[i] = wi
            s0 += d[i] * v[i]
            s1 += d[i] * wi
            s2 += d[i] * r2[i]
        part[t, 0], part[t, 1], part[t, 2] = s0, s1, s2
    _total(part, nt, 3, out)


@nb.njit(cache=True, parallel=True)
def residual(indptr, indices, data, x, b, r, nt):
    """r = b - A x on the owned rows."""
    n = len(indptr) - 1
    for t in nb.prange(nt):
        for i in range(n * t // nt, n * (t + 1) // nt):
            s = b[i]
            for k in range(indptr[i], indptr[i + 1]):
                s -= data[k] * x[indices[k]]
            r[i] = s


@nb.njit(cache=True, parallel=True)
def prolong_add(agg, e, n, x, nt):
    for t in nb.prange(nt):
        for i in range(n * t // nt, n * (t + 1) // nt):
            x[i] += e[agg[i]]


@nb.njit(cache=True)
def _total(part, nt, k, out):
    """out[:k] = the block partials summed in block order."""
    for m in range(k):
        s = 0.0
        for t in range(nt):
            s += part[t, m]
        out[m] = s


@nb.njit(cache=True, parallel=True)
def dot(a, b, n, nt, part, out):
    """out[0] = a.b."""
    for t in nb.prange(nt):
        s = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            s += a[i] * b[i]
        part[t, 0] = s
    _total(part, nt, 1, out)


@nb.njit(cache=True, parallel=True)
def dot2(a, b, c, d, n, nt, part, out):
    """out[:2] = (a.b, c.d)."""
    for t in nb.prange(nt):
        s0 = s1 = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            s0 += a[i] * b[i]
            s1 += c[i] * d[i]
        part[t, 0], part[t, 1] = s0, s1
    _total(part, nt, 2, out)


@nb.njit(cache=True, parallel=True)
def axpy_into(out, b, a, v, n, nt):
    for t in nb.prange(nt):
        for i in range(n * t // nt, n * (t + 1) // nt):
            out[i] = b[i] - a * v[i]


@nb.njit(cache=True, parallel=True)
def combine(x, a, c, b, d, n, nt):
    for t in nb.prange(nt):
        for i in range(n * t // nt, n * (t + 1) // nt):
            x[i] = a * c[i] + b * d[i]


@nb.njit(cache=True, parallel=True)
def fcg_step(x, r, p, q, alpha, n, nt, part, out):
    """x += alpha p; r -= alpha q; out[0] = r.r."""
    for t in nb.prange(nt):
        s = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            x[i] += alpha * p[i]
            r[i] -= alpha * q[i]
            s += r[i] * r[i]
        part[t, 0] = s
    _total(part, nt, 1, out)


@nb.njit(cache=True, parallel=True)
def direction(z, beta, p, n, nt):
    """p = z - beta p (FCG's new direction)."""
    for t in nb.prange(nt):
        for i in range(n * t // nt, n * (t + 1) // nt):
            p[i] = z[i] - beta * p[i]


@nb.njit(cache=True, parallel=True)
def cg1_step(x, r, p, s, alpha, n, nt, part, out):
    """x += alpha p; r -= alpha s; out[:2] = (p.r, r.r)."""
    for t in nb.prange(nt):
        s0 = s1 = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            x[i] += alpha * p[i]
            r[i] -= alpha * s[i]
            s0 += p[i] * r[i]
            s1 += r[i] * r[i]
        part[t, 0], part[t, 1] = s0, s1
    _total(part, nt, 2, out)


@nb.njit(cache=True, parallel=True)
def cg1_dots(r, u, w, s, n, nt, part, out):
    """out[:3] = (r.u, w.u, u.s)."""
    for t in nb.prange(nt):
        s0 = s1 = s2 = 0.0
        for i in range(n * t // nt, n * (t + 1) // nt):
            s0 += r[i] * u[i]
            s1 += w[i] * u[i]
            s2 += u[i] * s[i]
        part[t, 0], part[t, 1], part[t, 2] = s0, s1, s2
    _total(part, nt, 3, out)


@nb.njit(cache=True, parallel=True)
def cg1_directions(u, w, beta, p, s, n, nt):
    """p = u + beta p; s = w + beta s."""
    for t in nb.prange(nt):
        for i in range(n * t // nt, n * (t + 1) // nt):
            p[i] = u[i] + beta * p[i]
            s[i] = w[i] + beta * s[i]


# -- the lockstep BiCGStab of the velocity components (bicgstab.lockstep_iterations) -----
# Each phase handles every active component in one region; ``out`` gets the same layout of
# partial sums as the serial ``lockstep_kernels._bicg3_*`` kernels give, ``part`` holds the
# blocks'.

@nb.njit(cache=True, parallel=True)
def many_start(indptr, indices, data, diag, invd, X, W, comps, nt, part, out):
    """``lockstep_compiled._many_start``: D^-1, r = b - A x, r0 = r, p = v = 0, (r.r, b.b) per
    component into ``out[2j:2j+2]``."""
    n = len(diag)
    m = len(comps)
    B, R, R0, P, V = W[0], W[1], W[2], W[3], W[4]
    for t in nb.prange(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        for i in range(lo, hi):
            invd[i] = 1.0 / diag[i]
        for j in range(m):
            d = comps[j]
            x, b, r, r0, p, v = X[d], B[d], R[d], R0[d], P[d], V[d]
            rr = 0.0
            bb = 0.0
            for i in range(lo, hi):
                s = b[i]
                for k in range(indptr[i], indptr[i + 1]):
                    s -= data[k] * x[indices[k]]
                r[i] = s
                r0[i] = s
                p[i] = 0.0
                v[i] = 0.0
                rr += s * s
                bb += b[i] * b[i]
            part[t, 2 * j] = rr
            part[t, 2 * j + 1] = bb
    _total(part, nt, 2 * m, out)


@nb.njit(cache=True, parallel=True)
def many_p(P, R, V, beta, omega, invd, PH, comps, act, n, nt):
    """``lockstep_kernels._bicg3_p``: p = r + beta (p - omega v), phat = D^-1 p."""
    for t in nb.prange(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        for d in comps:
            if act[d]:
                b, w = beta[d], omega[d]
                p, r, v, ph = P[d], R[d], V[d], PH[d]
                for i in range(lo, hi):
                    p[i] = r[i] + b * (p[i] - w * v[i])
                    ph[i] = invd[i] * p[i]


@nb.njit(cache=True)
def _product_rows(indptr, indices, data, X, Y, comps, act, lo, hi):
    """Y[d] = A X[d] on rows lo..hi-1 for the active components."""
    for d in comps:
        if act[d] == 1:
            x, y = X[d], Y[d]
            for i in range(lo, hi):
                s = 0.0
                for k in range(indptr[i], indptr[i + 1]):
                    s += data[k] * x[indices[k]]
                y[i] = s


@nb.njit(cache=True, inline="always")
def all_three(comps, act) -> bool:
    """Three components, all active: their products share one pass over the matrix, as
    ``lockstep_compiled._spmv_rows`` shares it (the matrix read once, not three times)."""
    return len(comps) == 3 and act[0] == 1 and act[1] == 1 and act[2] == 1


@nb.njit(cache=True, inline="always")
def row3(indptr, indices, data, x0, x1, x2, i):
    """Row ``i`` of ``A x`` for three vectors, each summed as ``_row`` sums it (the serial
    lockstep solve's rows too, ``lockstep_kernels._rows_three``)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        a = data[k]
        j = indices[k]
        s0 += a * x0[j]
        s1 += a * x1[j]
        s2 += a * x2[j]
    return s0, s1, s2


@nb.njit(cache=True, parallel=True)
def many_product_r0v(indptr, indices, data, PH, V, R0, comps, act, nt, part, out):
    """v = A phat, then ``out[j] = r0.v`` (``lockstep_compiled._spmv_rows`` and
    ``_bicg3_r0v``); with all three components active, one pass over the block's rows does
    both."""
    n = len(indptr) - 1
    m = len(comps)
    three = all_three(comps, act)
    for t in nb.prange(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        if three:
            x0, x1, x2, v0, v1, v2 = PH[0], PH[1], PH[2], V[0], V[1], V[2]
            r0, r1, r2 = R0[0], R0[1], R0[2]
            a0 = a1 = a2 = 0.0
            for i in range(lo, hi):
                s0, s1, s2 = row3(indptr, indices, data, x0, x1, x2, i)
                v0[i] = s0
                v1[i] = s1
                v2[i] = s2
                a0 += r0[i] * s0
                a1 += r1[i] * s1
                a2 += r2[i] * s2
            part[t, 0], part[t, 1], part[t, 2] = a0, a1, a2
            continue
        _product_rows(indptr, indices, data, PH, V, comps, act, lo, hi)
        for j in range(m):
            d = comps[j]
            s = 0.0
            if act[d]:
                r0, v = R0[d], V[d]
                for i in range(lo, hi):
                    s += r0[i] * v[i]
            part[t, j] = s
    _total(part, nt, m, out)


@nb.njit(cache=True, parallel=True)
def many_s(R, V, alpha, invd, SH, comps, act, n, nt):
    """``lockstep_kernels._bicg3_s`` over r: s = r - alpha v, shat = D^-1 s."""
    for t in nb.prange(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        for d in comps:
            if act[d]:
                a = alpha[d]
                s, v, sh = R[d], V[d], SH[d]
                for i in range(lo, hi):
                    s[i] = s[i] - a * v[i]
                    sh[i] = invd[i] * s[i]


@nb.njit(cache=True, parallel=True)
def many_product_dot3(indptr, indices, data, SH, T, S, comps, act, nt, part, out):
    """t = A shat, then ``out[3j:3j+3] = (t.s, t.t, s.s)`` (``lockstep_kernels._bicg3_dot3``); with
    all three components active, one pass over the block's rows does both."""
    n = len(indptr) - 1
    m = len(comps)
    three = all_three(comps, act)
    for t in nb.prange(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        if three:
            _product_dot3_three(indptr, indices, data, SH, T, S, lo, hi, part[t])
            continue
        _product_rows(indptr, indices, data, SH, T, comps, act, lo, hi)
        for j in range(m):
            d = comps[j]
            s1 = s2 = s3 = 0.0
            if act[d]:
                tt, s = T[d], S[d]
                for i in range(lo, hi):
                    s1 += tt[i] * s[i]
                    s2 += tt[i] * tt[i]
                    s3 += s[i] * s[i]
            part[t, 3 * j], part[t, 3 * j + 1], part[t, 3 * j + 2] = s1, s2, s3
    _total(part, nt, 3 * m, out)


@nb.njit(cache=True, inline="always")
def _product_dot3_three(indptr, indices, data, SH, T, S, lo, hi, sums):
    """:func:`many_product_dot3`'s block for three active components in one pass."""
    x0, x1, x2, t0, t1, t2 = SH[0], SH[1], SH[2], T[0], T[1], T[2]
    q0, q1, q2 = S[0], S[1], S[2]
    a0 = b0 = c0 = a1 = b1 = c1 = a2 = b2 = c2 = 0.0
    for i in range(lo, hi):
        s0, s1, s2 = row3(indptr, indices, data, x0, x1, x2, i)
        t0[i] = s0
        t1[i] = s1
        t2[i] = s2
        a0 += s0 * q0[i]
        b0 += s0 * s0
        c0 += q0[i] * q0[i]
        a1 += s1 * q1[i]
        b1 += s1 * s1
        c1 += q1[i] * q1[i]
        a2 += s2 * q2[i]
        b2 += s2 * s2
        c2 += q2[i] * q2[i]
    sums[0], sums[1], sums[2] = a0, b0, c0
    sums[3], sums[4], sums[5] = a1, b1, c1
    sums[6], sums[7], sums[8] = a2, b2, c2


@nb.njit(cache=True, parallel=True)
def many_xr(X, PH, SH, R, T, alpha, omega, R0, comps, act, n, nt, part, out):
    """``lockstep_kernels._bicg3_xr`` with s in r: x += alpha phat + omega shat, r = s - omega t,
    ``out[2j:2j+2] = (r0.r, r.r)``; ``act == 2``: x += alpha phat only."""
    m = len(comps)
    for t in nb.prange(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        for j in range(m):
            d = comps[j]
            a, w = alpha[d], omega[d]
            x, ph, sh, r, tt, r0 = X[d], PH[d], SH[d], R[d], T[d], R0[d]
            s1 = s2 = 0.0
            if act[d] == 2:
                for i in range(lo, hi):
                    x[i] += a * ph[i]
            elif act[d]:
                for i in range(lo, hi):
                    x[i] += a * ph[i] + w * sh[i]
                    r[i] = r[i] - w * tt[i]
                    s1 += r0[i] * r[i]
                    s2 += r[i] * r[i]
            part[t, 2 * j], part[t, 2 * j + 1] = s1, s2
    _total(part, nt, 2 * m, out)
