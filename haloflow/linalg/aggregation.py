"""Plain aggregation by double pairwise matching (Notay's AGMG): aggregates of about four
rows, each row paired with its strongest negative coupling.

Why this way: the prolongation is piecewise constant, so the Galerkin coarse matrix is a sum
of fine coefficients (:mod:`.galerkin`) and a time step refreshes it with one scatter-add per
level.  The matching is greedy: couplings within a relative ``TIE`` count as equal and go to
the earliest row (the face coefficients' 1e-16 noise, or the 1-2 % modulation the velocity
gives 1/a_P, must not pick the partners), and every tentative pair passes AGMG's two-grid
quality test mu(G) <= ``KAPPA`` (Napov & Notay 2012), which turns the worst shapes (four
rows in a line, S and L shapes) back into pairs.  Rows are visited in the serial order, so
the aggregates do not depend on the partition (docs/design.md, "Pressure solve").
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .galerkin import _diagonal_positions, _galerkin_structure, _members, galerkin_refresh
from .matrix import IDX

STRENGTH = 0.25  # pair only with couplings at least this fraction of the row's strongest


TIE = 0.05  # couplings within this relative difference are equally strong (docstring)


KAPPA = 4.5  # refuse tentative aggregates whose two-grid quality mu(G) exceeds this


@nb.njit(cache=True)
def _abs_offdiag(indptr, indices, data, diag_pos, n):
    """Sum of |a_ij| over each row's off-diagonal entries (ghost columns included)."""
    out = np.zeros(n)
    for i in range(n):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            if k != diag_pos[i]:
                s += abs(data[k])
        out[i] = s
    return out


@nb.njit(cache=True)
def _coupling(indptr, indices, data, i, j):
    for k in range(indptr[i], indptr[i + 1]):
        if indices[k] == j:
            return data[k]
    return 0.0


@nb.njit(cache=True)
def _quality_ok(indptr, indices, data, diag_pos, absrow, g, m, kappa, w, dg):
    """Is mu(G) <= kappa for the rows g[:m]?  mu(G) = max v'D(I - P)v / v'A_G v, with D the
    diagonal, P the D-orthogonal projection on constants and A_G the aggregate's block with
    its couplings to the outside moved onto the diagonal (Napov & Notay 2012).  Equivalent
    to A_G - D/kappa + (D1)(D1)'/(kappa 1'D1) being positive semi-definite, checked by
    Gaussian elimination; when A_G has zero row sums its last pivot is zero by construction.
    ``w`` and ``dg`` are scratch arrays (at least m x m and m)."""
    zero_rowsum = True
    for p in range(m):
        i = g[p]
        dg[p] = data[diag_pos[i]]
        inner = 0.0
        for q in range(m):
            if q != p:
                a = 0.5 * (_coupling(indptr, indices, data, i, g[q])
                           + _coupling(indptr, indices, data, g[q], i))
                w[p, q] = a
                inner += abs(a)
        w[p, p] = dg[p] - (absrow[i] - inner)
        s = 0.0
        for q in range(m):
            s += w[p, q]
        if abs(s) > 1e-10 * dg[p]:
            zero_rowsum = False
    tot = 0.0
    scale = 0.0
    for p in range(m):
        tot += dg[p]
        scale = max(scale, dg[p])
    for p in range(m):
        for q in range(m):
            w[p, q] += dg[p] * dg[q] / (kappa * tot)
        w[p, p] -= dg[p] / kappa
    last = m - 1 if zero_rowsum else m
    for c in range(last):
        piv = w[c, c]
        if piv <= 1e-12 * scale:
            return False
        for r in range(c + 1, m):
            f = w[r, c] / piv
            for s in range(c + 1, m):
                w[r, s] -= f * w[c, s]
    return not (zero_rowsum and w[m - 1, m - 1] < -1e-8 * scale)


@nb.njit(cache=True)
def _match(ip, ix, d, dp, n, order, key, mptr, mem, fip, fix, fd, fdp, absrow, beta, tie,
           kappa):
    """Greedy pairwise matching of the n rows of (ip, ix, d), visited in ``order``.

    Each unmatched row is paired with its strongest unmatched negative coupling (at least
    ``beta`` times its strongest; couplings within ``tie`` of each other count as equal and
    the smallest ``key`` wins) whose union passes the quality test, else the next strongest.
    Row I stands for the fine rows mem[mptr[I]:mptr[I+1]] of (fip, fix, fd), on which the
    test is made.  Columns >= n (ghosts) count for the strongest coupling, never as partners.
    Aggregates are numbered in the order they are created."""
    agg = np.full(n, -1, dtype=np.int64)
    nagg = 0
    g = np.zeros(16, dtype=np.int64)
    w = np.zeros((16, 16))
    dg = np.zeros(16)
    tried = np.zeros(64, dtype=np.int64)
    for t in range(n):
        i = order[t]
        if agg[i] >= 0:
            continue
        amax = 0.0
        for k in range(ip[i], ip[i + 1]):
            if k != dp[i] and -d[k] > amax:
                amax = -d[k]
        best = -1
        ntried = 0
        while amax > 0.0 and ntried < 64:
            umax = 0.0
            for k in range(ip[i], ip[i + 1]):
                j = ix[k]
                if j < n and k != dp[i] and agg[j] < 0 and -d[k] > umax:
                    free = True
                    for s in range(ntried):
                        if tried[s] == j:
                            free = False
                    if free:
                        umax = -d[k]
            if umax <= 0.0 or umax < beta * amax:
                break
            cand = -1
            for k in range(ip[i], ip[i + 1]):
                j = ix[k]
                if j < n and k != dp[i] and agg[j] < 0 and -d[k] >= umax * (1.0 - tie):
                    free = True
                    for s in range(ntried):
                        if tried[s] == j:
                            free = False
                    if free and (cand < 0 or key[j] < key[cand]):
                        cand = j
            m = 0
            for s in range(mptr[i], mptr[i + 1]):
                g[m] = mem[s]
                m += 1
            for s in range(mptr[cand], mptr[cand + 1]):
                g[m] = mem[s]
                m += 1
            if _quality_ok(fip, fix, fd, fdp, absrow, g, m, kappa, w, dg):
                best = cand
                break
            tried[ntried] = cand
            ntried += 1
        agg[i] = nagg
        if best >= 0:
            agg[best] = nagg
        nagg += 1
    return agg, nagg


def pairwise(indptr, indices, data, diag_pos, n, beta=STRENGTH, key=None, kappa=KAPPA):
    """One pass of pairwise matching (see ``_match``), rows visited in ``key`` order."""
    order = np.arange(n) if key is None else np.argsort(key, kind="stable")
    key = np.arange(n) if key is None else np.asarray(key, dtype=np.int64)
    ident = np.arange(n + 1, dtype=np.int64)
    absrow = _abs_offdiag(indptr, indices, data, diag_pos, n)
    return _match(indptr, indices, data, diag_pos, n, order, key, ident, ident, indptr,
                  indices, data, diag_pos, absrow, beta, TIE, kappa)


def _aggregate(indptr, indices, data, diag_pos, n, key=None, order=None):
    """Double pairwise aggregation of the owned block: aggregates of up to four rows, visited
    in ``key`` order (row order if None; ``order``: the argsort of ``key`` if known),
    numbered in the order they are created."""
    absrow = _abs_offdiag(indptr, indices, data, diag_pos, n)
    if key is None:
        key = order = np.arange(n)
    elif order is None:
        order = np.argsort(key, kind="stable")
    ident = np.arange(n + 1, dtype=np.int64)
    agg1, n1 = _match(indptr, indices, data, diag_pos, n, order, np.asarray(key, np.int64),
                      ident, ident, indptr, indices, data, diag_pos, absrow, STRENGTH, TIE,
                      KAPPA)
    del ident
    ncols = int(indices.max(initial=0)) + 1 if len(indices) else 1
    cagg = agg1  # no ghost columns (a whole level on rank 0): the aggregates as they are
    if ncols > n:
        cagg = np.full(ncols, -1, dtype=np.int64)
        cagg[:n] = agg1  # ghost columns dropped: pairs are made of owned rows
    mptr, mem = _members(agg1, n1)
    ip1, ix1, slot1 = _galerkin_structure(indptr, indices, mptr, mem, cagg, n1, n1)
    del cagg
    dp1 = _diagonal_positions(ip1, ix1, n1)
    d1 = np.zeros(len(ix1))
    galerkin_refresh(slot1, data, d1)
    del slot1  # (pass 1's coarse values are made once)
    seq = np.arange(n1)  # pass-1 aggregates were created in key order
    agg2, n2 = _match(ip1.astype(IDX), ix1.astype(IDX), d1, dp1, n1, seq, seq, mptr, mem,
                      indptr, indices, data, diag_pos, absrow, STRENGTH, TIE, KAPPA)
    return agg2[agg1], n2
