"""The Galerkin coarse matrix of a plain aggregation: its sparsity found once, its
coefficients refreshed by one scatter-add of the fine entries per level at every time step.

Why: a piecewise-constant prolongation makes every coarse entry a sum of fine ones, so the
refresh streams the fine matrix once and never forms a triple product; aggregates that span
ranks send the partial rows of the cells held elsewhere to the aggregate's owner.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .matrix import IDX


@nb.njit(cache=True)
def _entries_by_owner(indptr, indices, foreign_row, ncols):
    """Columns used by the rows whose aggregate is owned here; the entries (and their rows)
    of the rows whose aggregate is owned elsewhere."""
    used = np.zeros(ncols, dtype=np.bool_)
    m = 0
    for i in range(len(foreign_row)):
        if foreign_row[i]:
            m += indptr[i + 1] - indptr[i]
    rows = np.empty(m, dtype=np.int64)
    entries = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(len(foreign_row)):
        for k in range(indptr[i], indptr[i + 1]):
            if foreign_row[i]:
                rows[m] = i
                entries[m] = k
                m += 1
            else:
                used[indices[k]] = True
    return used, rows, entries


@nb.njit(cache=True)
def _members(agg, nc):
    """Rows of each aggregate as CSR (pointer, rows ascending; rows with a negative
    aggregate left out): a counting sort."""
    ptr = np.zeros(nc + 1, dtype=np.int64)
    for i in range(len(agg)):
        if agg[i] >= 0:
            ptr[agg[i] + 1] += 1
    for a in range(nc):
        ptr[a + 1] += ptr[a]
    fill = ptr[:-1].copy()
    mem = np.empty(ptr[nc], dtype=np.int64)
    for i in range(len(agg)):
        if agg[i] >= 0:
            mem[fill[agg[i]]] = i
            fill[agg[i]] += 1
    return ptr, mem


@nb.njit(cache=True)
def _find_diagonal(indptr, indices, n):
    pos = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] == i:
                pos[i] = k
    return pos


@nb.njit(cache=True)
def _first_rows(agg, order, nc):
    """Each aggregate's first row in visiting order (the row that created it)."""
    seed = np.full(nc, -1, dtype=np.int64)
    for t in range(len(order)):
        i = order[t]
        if seed[agg[i]] < 0:
            seed[agg[i]] = i
    return seed


@nb.njit(cache=True)
def _galerkin_structure(indptr, indices, mptr, mem, cagg, nc, ncols):
    """CSR structure of P^T A P (columns ascending in each row) for the aggregates
    mem[mptr[I]:mptr[I+1]], walking each aggregate's rows in turn; column j of A goes to
    coarse column cagg[j] (dropped if negative).  slot[k]: the coarse position of entry k."""
    marker = np.full(ncols, -1, dtype=np.int64)
    cip = np.zeros(nc + 1, dtype=np.int64)
    cix = np.empty(indptr[len(indptr) - 1], dtype=np.int32)  # 32-bit: a rank's entries
    slot = np.full(indptr[len(indptr) - 1], -1, dtype=np.int32)  # (kept for every refresh)
    pos = 0
    for a in range(nc):
        first = pos
        for t in range(mptr[a], mptr[a + 1]):
            i = mem[t]
            for k in range(indptr[i], indptr[i + 1]):
                c = cagg[indices[k]]
                if c >= 0 and marker[c] < first:
                    marker[c] = pos
                    cix[pos] = c
                    pos += 1
        for t in range(first + 1, pos):  # insertion sort: rows are short
            c = cix[t]
            u = t - 1
            while u >= first and cix[u] > c:
                cix[u + 1] = cix[u]
                u -= 1
            cix[u + 1] = c
        for t in range(first, pos):
            marker[cix[t]] = t
        for t in range(mptr[a], mptr[a + 1]):
            i = mem[t]
            for k in range(indptr[i], indptr[i + 1]):
                c = cagg[indices[k]]
                if c >= 0:
                    slot[k] = marker[c]
        cip[a + 1] = pos
    return cip, cix[:pos].copy(), slot


@nb.njit(cache=True)
def galerkin_refresh(slot, fine, coarse):
    """Coarse coefficients of a piecewise-constant prolongation: sums of fine ones."""
    coarse[:] = 0.0
    for k in range(len(slot)):
        if slot[k] >= 0:
            coarse[slot[k]] += fine[k]


@nb.njit(cache=True)
def _sum_entries(entries, slot, fine, out):
    """out[slot[t]] = sum of fine[entries[t]] (out zeroed first)."""
    out[:] = 0.0
    for t in range(len(entries)):
        out[slot[t]] += fine[entries[t]]


@nb.njit(cache=True)
def _scatter_add(slot, vals, out):
    for k in range(len(slot)):
        out[slot[k]] += vals[k]


def galerkin_pattern(indptr, indices, n_rows, ragg, cagg, nc_rows, nc_cols):
    """CSR structure of P^T A P for piecewise-constant P, and each fine entry's coarse slot.

    ``cagg[j] < 0`` drops column j (used to build a rank's owned block only).
    """
    mptr, mem = _members(np.asarray(ragg, dtype=np.int64)[:n_rows], int(nc_rows))
    cip, cix, slot = _galerkin_structure(indptr, indices, mptr, mem,
                                         np.asarray(cagg, dtype=np.int64), int(nc_rows),
                                         int(nc_cols))
    return (cip.astype(IDX), cix.astype(IDX), _diagonal_positions(cip, cix, nc_rows), slot)


def _diagonal_positions(indptr, indices, n):
    diag_pos = _find_diagonal(indptr, indices, n)
    if n and diag_pos.min() < 0:
        raise RuntimeError("AMG: a coarse row lost its diagonal")
    return diag_pos
