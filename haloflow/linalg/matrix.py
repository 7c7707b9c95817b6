"""Distributed CSR matrix assembled from faces: owned rows, owned + ghost columns.

The sparsity pattern comes from the LocalMesh once; coefficients are refilled every step from
per-face ``lower``/``upper`` arrays and a diagonal, with the CSR slot of every face
coefficient precomputed, so assembly is one pass with no searching.  SpMV exchanges the
ghost values of ``x`` through the halo interface and then multiplies locally; with an
exchanger that ``overlaps``, the rows that touch no ghost are multiplied while the messages
are in flight and the others after, each row summed in the same order, so the product is
bitwise the same either way.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..mesh.core import index_dtype
from ..parallel.threads import kernel
from ..parallel.timers import NULL_TIMERS

IDX = np.uint32  # unsigned column indices: no negative-index checks in the hot loop


class Pattern:
    """CSR structure of a face-based operator on one rank."""

    def __init__(self, lmesh):
        n, ni = lmesh.n_owned, lmesh.n_internal
        own, nbr = lmesh.owner[:ni], lmesh.neighbour
        cell_t, face_t = index_dtype(lmesh.n_cells), index_dtype(ni)
        rows = np.concatenate([np.arange(n, dtype=cell_t), own, nbr]).astype(cell_t, copy=False)
        cols = np.concatenate([np.arange(n, dtype=cell_t), nbr, own]).astype(cell_t, copy=False)
        kind = np.concatenate([np.zeros(n, np.int8), np.ones(ni, np.int8), np.full(ni, 2, np.int8)])
        face = np.concatenate([np.full(n, -1, face_t), np.arange(ni, dtype=face_t),
                               np.arange(ni, dtype=face_t)])
        keep = rows < n  # rows of ghost cells belong to another rank
        order = np.flatnonzero(keep)
        order = order[np.lexsort((cols[order], rows[order]))]
        del keep
        rows, cols, kind, face = rows[order], cols[order], kind[order], face[order]
        del order
        self.n_rows = n
        self.n_cols = lmesh.n_cells
        self.indptr = np.searchsorted(rows, np.arange(n + 1)).astype(IDX)
        self.indices = cols.astype(IDX)
        slot_t = index_dtype(len(rows))
        self.diag_pos = np.flatnonzero(kind == 0).astype(np.int64)  # int64: as the AMG's levels
        # per internal face, its CSR slot or -1: 32-bit where the entries allow
        self.upper_pos = np.full(ni, -1, dtype=slot_t)  # (owner row, neighbour column)
        self.lower_pos = np.full(ni, -1, dtype=slot_t)  # (neighbour row, owner column)
        up, lo = kind == 1, kind == 2
        self.upper_pos[face[up]] = np.flatnonzero(up)
        self.lower_pos[face[lo]] = np.flatnonzero(lo)
        # rows computable before the ghosts arrive, and the rest, as runs of consecutive rows
        touches = np.zeros(n, dtype=bool)
        touches[rows[cols >= n]] = True
        self.inner_runs = _runs(~touches)
        self.outer_runs = _runs(touches)
        self.all_runs = np.concatenate([self.inner_runs, self.outer_runs])  # inner, then outer

    @property
    def nnz(self) -> int:
        return len(self.indices)


RUN = 4096  # longest run of rows, so that prange over runs keeps every thread busy


def _runs(mask: np.ndarray) -> np.ndarray:
    """Flat ``[start0, end0, start1, end1, ...]`` of the runs of True in ``mask``."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    out = []
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        cuts = list(range(a, b, RUN)) + [b]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            out += [lo, hi]
    return np.asarray(out, dtype=IDX)


@kernel
def _fill(data, diag, lower, upper, diag_pos, lower_pos, upper_pos, scale):
    """The CSR values from the face coefficients times ``scale`` (1, or -1 where the
    pressure Laplacian's couplings ``g`` are both: the assembly then writes no face arrays
    for them), every entry written once, so a threaded rank shares the faces among its
    threads."""
    for i in nb.prange(len(diag_pos)):
        data[diag_pos[i]] = diag[i]
    for f in nb.prange(len(upper_pos)):
        if upper_pos[f] >= 0:
            data[upper_pos[f]] = scale * upper[f]
        if lower_pos[f] >= 0:
            data[lower_pos[f]] = scale * lower[f]


@nb.njit(cache=True, inline="always")
def row_product(indptr, indices, data, x, i):
    """Row i of A x, summed in the row's order (every product here sums so)."""
    s = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        s += data[k] * x[indices[k]]
    return s


@nb.njit(cache=True, inline="always")
def row_products(indptr, indices, data, x, y, i):
    """Row i of A x and of A y, the row read once, each summed as :func:`row_product`."""
    sx = 0.0
    sy = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        a = data[k]
        j = indices[k]
        sx += a * x[j]
        sy += a * y[j]
    return sx, sy


@nb.njit(cache=True, inline="always")
def _row_residual(indptr, indices, data, x, b, i):
    """Row i of b - A x, subtracted in the row's order."""
    s = b[i]
    for k in range(indptr[i], indptr[i + 1]):
        s -= data[k] * x[indices[k]]
    return s


@kernel
def spmv(indptr, indices, data, x, y):
    for i in nb.prange(len(indptr) - 1):
        y[i] = row_product(indptr, indices, data, x, i)


@kernel
def residual(indptr, indices, data, x, b, r):
    """r = b - A x on owned rows."""
    for i in nb.prange(len(indptr) - 1):
        r[i] = _row_residual(indptr, indices, data, x, b, i)


@kernel
def spmv_runs(indptr, indices, data, x, y, runs):
    """``spmv`` on the rows of ``runs`` only; each row summed exactly as ``spmv`` does."""
    for r in nb.prange(len(runs) // 2):
        for i in range(runs[2 * r], runs[2 * r + 1]):
            y[i] = row_product(indptr, indices, data, x, i)


@kernel
def residual_runs(indptr, indices, data, x, b, r, runs):
    """``residual`` on the rows of ``runs`` only, same per-row order."""
    for q in nb.prange(len(runs) // 2):
        for i in range(runs[2 * q], runs[2 * q + 1]):
            r[i] = _row_residual(indptr, indices, data, x, b, i)


@kernel
def off_diagonal_product(indptr, indices, data, diag_pos, x, y):
    """y = (A - D) x: the neighbour sum of a row, used by PISO's H operator."""
    for i in nb.prange(len(indptr) - 1):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            if k != diag_pos[i]:
                s += data[k] * x[indices[k]]
        y[i] = s


class DistMatrix:
    """A square operator on a LocalMesh's cells, coefficients refilled in place."""

    def __init__(self, pattern: Pattern, exchanger, timers=NULL_TIMERS):
        self.pattern = pattern
        self.ex = exchanger
        self.overlap = bool(getattr(exchanger, "overlaps", False))
        self.timers = timers
        self.data = np.zeros(pattern.nnz)
        self.diag = np.zeros(pattern.n_rows)

    def fill(self, diag, lower, upper) -> None:
        """Set coefficients: ``diag`` per owned row, ``lower``/``upper`` per internal face."""
        p = self.pattern
        self.diag[:] = diag[: p.n_rows]
        _fill(self.data, self.diag, lower, upper, p.diag_pos, p.lower_pos, p.upper_pos, 1.0)

    def fill_symmetric(self, diag, coupling) -> None:
        """:meth:`fill` with ``lower = upper = -coupling`` per internal face."""
        p = self.pattern
        self.diag[:] = diag[: p.n_rows]
        _fill(self.data, self.diag, coupling, coupling, p.diag_pos, p.lower_pos, p.upper_pos,
              -1.0)

    def matvec(self, x, y) -> None:
        """y[:n_owned] = A x; refreshes the ghost values of x first."""
        p = self.pattern
        if self.overlap:
            with self.timers("halo_solve"):
                h = self.ex.start([x])
            spmv_runs(p.indptr, p.indices, self.data, x, y, p.inner_runs)
            with self.timers("halo_solve"):
                self.ex.finish(h)
            spmv_runs(p.indptr, p.indices, self.data, x, y, p.outer_runs)
            return
        with self.timers("halo_solve"):
            self.ex.exchange([x])
        spmv(p.indptr, p.indices, self.data, x, y)

    def residual(self, x, b, r) -> None:
        """r[:n_owned] = b - A x; refreshes the ghost values of x first."""
        p = self.pattern
        if self.overlap:
            with self.timers("halo_solve"):
                h = self.ex.start([x])
            residual_runs(p.indptr, p.indices, self.data, x, b, r, p.inner_runs)
            with self.timers("halo_solve"):
                self.ex.finish(h)
            residual_runs(p.indptr, p.indices, self.data, x, b, r, p.outer_runs)
            return
        with self.timers("halo_solve"):
            self.ex.exchange([x])
        residual(p.indptr, p.indices, self.data, x, b, r)

    def off_diagonal(self, x, y) -> None:
        """y = (A - D) x, assuming the ghost values of x are current."""
        p = self.pattern
        off_diagonal_product(p.indptr, p.indices, self.data, p.diag_pos, x, y)

    def to_scipy(self):
        """The local block as a scipy CSR matrix (n_owned x n_cells), for tests and debugging."""
        import scipy.sparse as sp

        p = self.pattern
        return sp.csr_matrix((self.data.copy(), p.indices.astype(np.int64), p.indptr),
                             shape=(p.n_rows, p.n_cols))
