"""The compiled kernels of one AMG level visit: l1 hybrid Gauss-Seidel sweeps (forward,
backward, on a row subset, from a zero start with the residual's restriction fused in), the
residual, restriction and prolongation of a plain aggregation, the small dense solves of
the coarsest level, and the K-cycle's fused vector updates.

Why these shapes: a pre-smoothing from zero reads only the lower half of each row (sorted
CSR, ghost columns last), so the residual it leaves is the upper half times x; sweeps keep
the inverse l1 diagonal and sum each row without a branch.  Rows are indexed with unsigned
integers (signed indices cost a bounds check per access).
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _l1_row(indptr, indices, data, diag_pos, i, n):
    """Row i's entry of :func:`l1_inverse`."""
    s = data[diag_pos[i]]
    for k in range(indptr[i], indptr[i + 1]):
        if indices[k] >= n:
            s += abs(data[k])
    return 1.0 / s


@nb.njit(cache=True)
def l1_inverse(indptr, indices, data, diag_pos, n, out):
    """1 / (a_ii + sum of |a_ij| over ghost columns): the inverse l1 hybrid Gauss-Seidel
    diagonal (Baker, Falgout, Kolev & Yang 2011), which keeps the rank-local smoother
    convergent however the mesh is cut; 1 / a_ii on one rank.  Kept inverted so that no
    division lies on the chain from one row of a sweep to the next."""
    for i in range(n):
        out[i] = _l1_row(indptr, indices, data, diag_pos, i, n)


@nb.njit(cache=True)
def l1_inverse_rows(indptr, indices, data, diag_pos, rows, n, out):
    """:func:`l1_inverse` reading each row's diagonal entry alone, and whole rows only where
    they have ghost columns (``rows``, sorted): the same values at half the memory traffic
    (a 64^3 Laplacian's rows: 1.6-1.9 -> 0.8-0.9 ms)."""
    for i in range(n):
        out[i] = 1.0 / data[diag_pos[i]]
    for t in range(len(rows)):
        i = rows[t]
        out[i] = _l1_row(indptr, indices, data, diag_pos, i, n)


@nb.njit(cache=True)
def split_at_diagonal(indptr, indices, diag_pos, n):
    """True if every row's columns before its diagonal are lower rows and those after it
    higher ones (ghost columns, numbered after the owned rows, among them): what the
    half-row kernels :func:`gs_from_zero` and :func:`upper_residual_restrict` rely on."""
    for i in range(n):
        for k in range(indptr[i], diag_pos[i]):
            if indices[k] >= i:
                return False
        for k in range(diag_pos[i] + 1, indptr[i + 1]):
            if indices[k] <= i:
                return False
    return True


@nb.njit(cache=True, inline="always")
def _gs_row(indptr, indices, data, dinv, b, x, i):
    """x_i += (b - A x)_i / l1_i, the row's sum over every column, the diagonal's included:
    no branch in the loop and no division on the chain from one row to the next (a
    quarter to a third faster per sweep than skipping the diagonal and dividing)."""
    s = b[i]
    for k in range(indptr[i], indptr[i + 1]):
        s -= data[k] * x[indices[k]]
    x[i] += s * dinv[i]


@nb.njit(cache=True)
def gs_sweep(indptr, indices, data, diag_pos, dinv, b, x, n, forward):
    """One Gauss-Seidel sweep over the owned rows (ghost values of x are held fixed)."""
    for t in range(n):
        _gs_row(indptr, indices, data, dinv, b, x, t if forward else n - 1 - t)


@nb.njit(cache=True)
def gs_rows(indptr, indices, data, diag_pos, dinv, b, x, rows, forward):
    """Gauss-Seidel on the listed rows only (the rows with ghost columns)."""
    m = len(rows)
    for t in range(m):
        _gs_row(indptr, indices, data, dinv, b, x, rows[t] if forward else rows[m - 1 - t])


@nb.njit(cache=True)
def gs_from_zero(indptr, indices, data, diag_pos, dinv, b, x, n):
    """A forward sweep from x = 0 (the cycle's pre-smoothing): the higher columns multiply
    zeros, so only the lower half of each row is read, (L + D_l1) x = b.  Needs
    :func:`split_at_diagonal`."""
    xp = 0.0
    for i in range(n):
        xp = _from_zero_row(indptr, indices, data, diag_pos, dinv, b, x, i, xp)
        x[i] = xp


@nb.njit(cache=True, inline="always")
def _from_zero_row(indptr, indices, data, diag_pos, dinv, b, x, i, xp):
    """Row i of :func:`gs_from_zero` given row i - 1's new value ``xp``.  The row's last
    lower column, row i - 1 on a banded ordering, is read from that register instead of
    the memory just written: the same sums, without a store and a reload on the chain from
    one row to the next (per sweep 0.73x on pitzDaily's top level, 0.89x on the 64^3
    cavity's, where memory shares the bill; docs/performance.md, ninth pass)."""
    d = diag_pos[i]
    k0 = indptr[i]
    s = b[i]
    for k in range(k0, d - 1):
        s -= data[k] * x[indices[k]]
    # the last lower column (a row without one: its diagonal times zero), as selects: a
    # branch here makes numba count references to every array, per row (6x the time)
    q = d - 1 if d > k0 else d
    j = indices[q]
    v = xp if j == i - 1 or d == k0 else x[j]  # (never x_i: not swept yet, maybe NaN)
    a = data[q] if d > k0 else 0.0
    return (s - a * v) * dinv[i]


@nb.njit(cache=True)
def upper_residual_restrict(indptr, indices, data, diag_pos, dinv, x, n, agg, rc, nc):
    """rc = R (b - A x) right after :func:`gs_from_zero` (and the exchange of x): there
    b - (L + D_l1) x = 0, so b - A x = (D_l1 - D) x - U x reads the upper half of each row
    (ghost columns included) and no residual vector is written."""
    for i in range(nc):
        rc[i] = 0.0
    for i in range(n):
        d = diag_pos[i]
        s = (1.0 / dinv[i] - data[d]) * x[i]
        for k in range(d + 1, indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        rc[agg[i]] += s


@nb.njit(cache=True)
def gs_from_zero_restrict(indptr, indices, data, diag_pos, dinv, b, x, n, agg, rc, nc):
    """:func:`gs_from_zero` and :func:`upper_residual_restrict` in one pass, for a level
    without ghost columns (l1_i = a_ii, so b - A x = -U x): a row's residual is taken as
    soon as the sweep has passed its last column, a bandwidth behind (a 64^3 cube's 4 096
    rows: its rows are still in the core's cache), so the matrix streams in once."""
    for i in range(nc):
        rc[i] = 0.0
    j = 0  # the next row whose residual is due
    xp = 0.0
    for i in range(n):
        xp = _from_zero_row(indptr, indices, data, diag_pos, dinv, b, x, i, xp)
        x[i] = xp
        while j <= i and indices[indptr[j + 1] - 1] <= i:
            s = 0.0
            for k in range(diag_pos[j] + 1, indptr[j + 1]):
                s -= data[k] * x[indices[k]]
            rc[agg[j]] += s
            j += 1


@nb.njit(cache=True)
def residual_restrict(indptr, indices, data, x, b, n, agg, rc, nc):
    """rc = R (b - A x) without writing the residual."""
    for i in range(nc):
        rc[i] = 0.0
    for i in range(n):
        s = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        rc[agg[i]] += s


@nb.njit(cache=True)
def spmv(indptr, indices, data, x, y):
    """Serial y = A x: coarse levels are too small to amortise a threaded launch."""
    for i in range(len(indptr) - 1):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s


@nb.njit(cache=True)
def residual(indptr, indices, data, x, b, r):
    for i in range(len(indptr) - 1):
        s = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            s -= data[k] * x[indices[k]]
        r[i] = s


@nb.njit(cache=True)
def restrict(agg, r, n, rc, nc):
    for i in range(nc):
        rc[i] = 0.0
    for i in range(n):
        rc[agg[i]] += r[i]


@nb.njit(cache=True)
def prolong_add(agg, e, n, x):
    for i in range(n):
        x[i] += e[agg[i]]


@nb.njit(cache=True)
def lu_solve(perm_r, perm_c, lp, li, lx, up, ui, ux, ud, pinned, b, x, y):
    """x = A^-1 b from SuperLU's factors of the coarsest level, Pr A Pc = L U (L unit lower,
    U upper, both CSC; ``ud`` U's diagonal); ``y`` scratch of n.  The pinned unknown of a
    singular matrix (its row and column replaced by the identity) is set to zero.  Without
    U (``up`` empty: a Cholesky's, :mod:`.cholesky`) U = diag(ud) L', read from L."""
    if len(up) == 0:
        _symmetric_solve(perm_r, lp, li, lx, ud, pinned, b, x, y)
        return
    n = len(perm_r)
    for i in range(n):
        y[perm_r[i]] = b[i]
    for j in range(n):
        yj = y[j]
        for k in range(lp[j], lp[j + 1]):
            if li[k] > j:
                y[li[k]] -= lx[k] * yj
    for j in range(n - 1, -1, -1):
        yj = y[j] / ud[j]
        y[j] = yj
        for k in range(up[j], up[j + 1]):
            if ui[k] < j:
                y[ui[k]] -= ux[k] * yj
    for i in range(n):
        x[i] = y[perm_c[i]]
    if pinned >= 0:
        x[pinned] = 0.0


@nb.njit(cache=True)
def _symmetric_solve(perm, lp, li, lx, ud, pinned, b, x, y):
    """``lu_solve`` for P A P' = L D L' (L unit lower, CSC with each column's diagonal
    first; D = ``ud``): the backward solve with U = D L' reads L's columns as U's rows, so
    a visit streams one factor, not two (the 62^3 cavity's 257-row level: 32 against
    54 us from a cold cache)."""
    n = len(perm)
    for i in range(n):
        y[perm[i]] = b[i]
    for j in range(n):
        yj = y[j]
        for k in range(lp[j] + 1, lp[j + 1]):
            y[li[k]] -= lx[k] * yj
    for j in range(n - 1, -1, -1):
        s = y[j] / ud[j]
        for k in range(lp[j] + 1, lp[j + 1]):
            s -= lx[k] * y[li[k]]
        y[j] = s
    for i in range(n):
        x[i] = y[perm[i]]
    if pinned >= 0:
        x[pinned] = 0.0


@nb.njit(cache=True)
def _perm_of_swaps(piv, perm_r):
    """LAPACK's row interchanges (row i swapped with piv[i], in turn) as ``lu_solve``'s
    perm_r: the row of P A that row i of A becomes."""
    n = len(piv)
    rowof = np.arange(n)  # rowof[k]: the row of A now at position k
    for i in range(n):
        p = piv[i]
        t = rowof[i]
        rowof[i] = rowof[p]
        rowof[p] = t
    for k in range(n):
        perm_r[rowof[k]] = k


@nb.njit(cache=True)
def _kdots1(c, v, b, n):
    """c.v, c.b, b.b, v.v, b.v for the first K-cycle step."""
    cv = cb = bb = vv = bv = 0.0
    for i in range(n):
        cv += c[i] * v[i]
        cb += c[i] * b[i]
        bb += b[i] * b[i]
        vv += v[i] * v[i]
        bv += b[i] * v[i]
    return cv, cb, bb, vv, bv


@nb.njit(cache=True)
def _kdots2(d, v, w, r2, n):
    """d.v, d.w, d.r2 for the second K-cycle step (and single-reduction CG's u.r, u.w,
    u.s)."""
    dv = dw = dr = 0.0
    for i in range(n):
        dv += d[i] * v[i]
        dw += d[i] * w[i]
        dr += d[i] * r2[i]
    return dv, dw, dr


@nb.njit(cache=True)
def _axpy_into(out, b, a, v, n):
    for i in range(n):
        out[i] = b[i] - a * v[i]


@nb.njit(cache=True)
def _combine(x, a, c, b, d, n):
    for i in range(n):
        x[i] = a * c[i] + b * d[i]


@nb.njit(cache=True)
def _scale_into(x, a, c, n):
    for i in range(n):
        x[i] = a * c[i]
