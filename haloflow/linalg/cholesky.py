"""The coarsest AMG level's sparse Cholesky, in the factor format ``amg.lu_solve`` reads.

The coarsest level is symmetric positive definite (or all-Neumann, made so by pinning its
last unknown), so a Cholesky factorisation solves it with half of an LU's work and no
pivoting.  Its ordering (minimum degree on A + A', :func:`minimum_degree`: within 4 % of
SuperLU's multiple minimum degree in the factor's entries on the coarsest levels of
pitzDaily and the 2D and 3D cavities, and no scipy.sparse in the process) and symbolic
pattern are found once per run; the numeric factorisation is a numba kernel, so the
refresh at every new matrix calls no scipy (a SuperLU refactorisation costs 0.3-0.8 ms of
Python and library overhead however small the level) and a visit reads only the factors'
nonzeros (a dense LU reads n^2).  Every code path (serial or parallel, compiled or Python)
uses these same factors, so they all give the same answers bit for bit; on a parallel run
the replicated level has the same entries on every rank, so every rank gets the same
factors.

The factors are kept while the level's entries stay within ``reuse`` of those they were made
from: a steady or slowly changing flow refreshes the matrix at every step, but an entry
that moved by 1 % changes the coarse solve by far less than the cycle's own error (pitzDaily:
277 of 456 factorisations saved, the same 4.75 pressure iterations per solve).  Every rank
sees the same entries, so every rank makes the same choice.
"""

from __future__ import annotations

from types import SimpleNamespace

import numba as nb
import numpy as np

from .matrix import IDX

MAX_OWN_ORDER = 4096  # rows: the dense graph of minimum_degree then takes at most 16 MB


@nb.njit(cache=True)
def _pinned_unknown(ip, ix, data, n):
    """``AMG._factor_coarsest``'s test: the last unknown if every row sums to zero (an
    all-Neumann matrix), else -1."""
    big = 0.0
    dmax = 0.0
    for i in range(n):
        s = 0.0
        for k in range(ip[i], ip[i + 1]):
            s += data[k]
            if ix[k] == i:
                dmax = max(dmax, abs(data[k]))
        big = max(big, abs(s))
    return n - 1 if big <= 1e-10 * dmax else -1


@nb.njit(cache=True)
def numeric(ip, ix, data, n, order, inv, lw, lp, li, rp, rk, rpos, x, lx, ud):
    """Numeric sparse Cholesky L L' = A[order][:, order] of the symmetric coarsest level
    (CSR ``ip, ix, data``) into ``lw`` on the pattern found once by :func:`symbolic`;
    the pinned unknown's row and column are replaced by the identity as
    ``AMG._factor_coarsest`` does.  Written out in the form ``amg.lu_solve`` takes for
    symmetric factors: A = P' L1 D L1' P, L1 = L diag(L)^-1 unit lower (``lx``), D =
    diag(L)^2 (``ud``); U = D L1' is not stored (``lu_solve`` reads it from L1).  Returns
    the pinned unknown (-1: none), or -2 if a pivot is not positive."""
    pinned = _pinned_unknown(ip, ix, data, n)
    for j in range(n):
        for p in range(lp[j], lp[j + 1]):
            x[li[p]] = 0.0
        oj = order[j]
        if oj == pinned:
            x[j] = 1.0
        else:
            for k in range(ip[oj], ip[oj + 1]):
                c = ix[k]
                if c != pinned and inv[c] >= j:
                    x[inv[c]] += data[k]
        for t in range(rp[j], rp[j + 1]):  # columns k < j with L[j, k] != 0
            q0 = rpos[t]
            ljk = lw[q0]
            for q in range(q0, lp[rk[t] + 1]):
                x[li[q]] -= lw[q] * ljk
        if not x[j] > 0.0:
            return -2
        d = np.sqrt(x[j])
        lw[lp[j]] = d
        for p in range(lp[j] + 1, lp[j + 1]):
            lw[p] = x[li[p]] / d
    for j in range(n):
        d = lw[lp[j]]
        ud[j] = d * d
        lx[lp[j]] = 1.0
        for p in range(lp[j] + 1, lp[j + 1]):
            lx[p] = lw[p] / d
    return pinned


@nb.njit(cache=True)
def moved(data, basis, fraction):
    """Whether some entry of ``data`` differs from ``basis`` by more than ``fraction`` of
    the latter."""
    for k in range(len(data)):
        if abs(data[k] - basis[k]) > fraction * abs(basis[k]):
            return True
    return False


@nb.njit(cache=True)
def minimum_degree(indptr, indices, n):
    """Elimination order by minimum degree on the pattern of A + A': the unknown with the
    fewest uneliminated neighbours first (the lowest index among equals), its neighbours
    then joined into a clique, as its elimination fills them in.  The graph is held as a
    dense n x n byte matrix (the coarsest level is small: ``MAX_OWN_ORDER`` rows at most),
    and each step costs O(n + degree^2)."""
    adj = np.zeros((n, n), dtype=np.uint8)
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = np.int64(indices[k])
            if j != i and j < n:
                adj[i, j] = 1
                adj[j, i] = 1
    deg = np.zeros(n, dtype=np.int64)
    for i in range(n):
        for j in range(n):
            deg[i] += adj[i, j]
    alive = np.ones(n, dtype=np.bool_)
    order = np.empty(n, dtype=np.int64)
    nbrs = np.empty(n, dtype=np.int64)
    for step in range(n):
        v, best = -1, n + 1
        for u in range(n):
            if alive[u] and deg[u] < best:
                v, best = u, deg[u]
        order[step] = v
        alive[v] = False
        m = 0
        for u in range(n):
            if adj[v, u] and alive[u]:
                nbrs[m] = u
                m += 1
        for a in range(m):  # v leaves the graph; its neighbours become a clique
            ua = nbrs[a]
            adj[ua, v] = 0
            deg[ua] -= 1
            for b in range(m):
                ub = nbrs[b]
                if ub != ua and adj[ua, ub] == 0:
                    adj[ua, ub] = 1
                    deg[ua] += 1
    return order


def symbolic(indptr, indices, n, order):
    """Symbolic Cholesky of A[order][:, order] (once per run): L's columns (CSC, the
    diagonal first, then rows ascending) and each row's (column, position) list."""
    inv = np.empty(n, dtype=np.int64)
    inv[order] = np.arange(n)
    rows = np.repeat(np.arange(n), np.diff(indptr).astype(np.int64))
    bi, bj = inv[rows], inv[indices.astype(np.int64)]
    low = bi > bj
    cols = [[] for _ in range(n)]
    for i, j in zip(bi[low].tolist(), bj[low].tolist(), strict=True):
        cols[j].append(i)
    children = [[] for _ in range(n)]
    pattern = []
    for j in range(n):  # L's column j: A's, and its children's in the elimination tree
        s = set(cols[j])
        for c in children[j]:
            s |= pattern[c]
        s.discard(j)
        pattern.append(s)
        if s:
            children[min(s)].append(j)
    lp = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(s) + 1 for s in pattern], out=lp[1:])
    li = np.empty(lp[-1], dtype=np.int64)
    by_row = [[] for _ in range(n)]
    for j, s in enumerate(pattern):
        li[lp[j]] = j
        li[lp[j] + 1:lp[j + 1]] = sorted(s)
        for p in range(lp[j] + 1, lp[j + 1]):
            by_row[li[p]].append((j, p))
    rp = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(r) for r in by_row], out=rp[1:])
    rk = np.array([k for r in by_row for k, _ in r], dtype=np.int64)
    rpos = np.array([p for r in by_row for _, p in r], dtype=np.int64)
    return inv, lp, li, rp, rk, rpos


def ordering(indptr, indices, n) -> np.ndarray:
    """The elimination order (``order[k]``: the unknown eliminated k-th): our own minimum
    degree up to ``MAX_OWN_ORDER`` rows, so that a run loads no scipy.sparse for it (3.6 MB
    of a rank's resident set: numba loads scipy.linalg itself); above, SuperLU's."""
    if n <= MAX_OWN_ORDER:
        return minimum_degree(indptr, indices, n)
    return superlu_order(indptr, indices, n)


def superlu_order(indptr, indices, n) -> np.ndarray:
    """SuperLU's multiple minimum degree on A + A', in :func:`ordering`'s form; it only needs
    the pattern, so it is asked of a strictly diagonally dominant matrix on it."""
    import scipy.sparse as sp  # a coarsest level this large is rare: set-up only
    import scipy.sparse.linalg as spla

    counts = np.diff(indptr.astype(np.int64)).astype(float)
    A = sp.csc_matrix((-np.ones(len(indices)), indices.astype(np.int64),
                       indptr.astype(np.int64)), shape=(n, n)) + sp.diags(2.0 * counts + 1.0)
    return np.argsort(spla.splu(A, permc_spec="MMD_AT_PLUS_A").perm_c.astype(np.int64))


class Cholesky:
    """Ordering and pattern of a level's matrix (set up once), factors at every refresh."""

    def __init__(self, lev):
        n = lev.n
        self.order = ordering(lev.indptr, lev.indices, n)
        self.inv, lp, li, self.rp, self.rk, self.rpos = symbolic(lev.indptr, lev.indices, n,
                                                                 self.order)
        self.x, self.lw = np.zeros(max(n, 1)), np.zeros(len(li))
        self.basis = None  # the entries the factors were made from
        self.reused = 0  # factorisations saved by ``reuse``
        # the factors' indices as lu_solve reads them; the numeric kernel reads the same.
        # No U (empty ``up``): lu_solve takes it as D L1' from L1's own columns
        self.f = SimpleNamespace(perm_r=self.inv, perm_c=self.inv, lp=lp,
                                 li=li.astype(IDX), lx=np.zeros(len(li)),
                                 up=np.zeros(0, dtype=np.int64), ui=np.zeros(0, dtype=IDX),
                                 ux=np.zeros(0), ud=np.zeros(n), y=np.zeros(max(n, 1)))

    def factor(self, lev, reuse: float = 0.0) -> bool:
        """``lev.lu`` and ``lev.pinned`` from ``lev``'s current entries; False (and nothing
        set) if a pivot is not positive.  ``reuse`` > 0: keep the factors while no entry has
        moved by more than this fraction of itself since they were made (the coarse solve
        of a preconditioner, which the outer Krylov method corrects)."""
        if reuse > 0.0 and self.basis is not None and not moved(lev.data, self.basis, reuse):
            self.reused += 1
            return True
        f = self.f
        pinned = numeric(lev.indptr, lev.indices, lev.data, lev.n, self.order, self.inv,
                         self.lw, f.lp, f.li, self.rp, self.rk, self.rpos, self.x, f.lx,
                         f.ud)
        if pinned == -2:
            self.basis = None
            return False
        if self.basis is None:
            self.basis = lev.data.copy()
        else:
            self.basis[:] = lev.data
        lev.lu, lev.pinned = f, pinned
        return True

    def refactor_next(self) -> None:
        """Factor at the next call whatever the entries (a restart from a checkpoint taken
        now factors afresh; so does the run that goes on, and the two stay alike)."""
        self.basis = None
