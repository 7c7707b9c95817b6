"""Wavefronts of a Gauss-Seidel sweep: the rows a sweep may update at once.

Row ``i`` of a forward sweep reads the new values of the rows before it that it couples to
and the old values of those after it.  Put every row one wavefront after the latest row it
must follow (a coupled earlier row, in either direction: row ``j < i`` reading the old
``x_i`` must be done before ``x_i`` changes) and the rows of one wavefront touch no row of
theirs: updated together, in any order, they give the sequential sweep's values bit for
bit, each row summed in its own order.  The backward sweep visits the same wavefronts in
reverse.  So a device sweeps like the host, with one launch per wavefront (level scheduling,
as GPU triangular solves do); a structured mesh's wavefronts are its diagonals (2 n - 1 on
an n x n grid, 3 n - 2 on n^3).  Ghost columns are held fixed during a sweep and order
nothing.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _levels(indptr, indices, n, level):
    """``level[i]``: the wavefront of row i (0 first); returns how many there are."""
    after = np.zeros(n, dtype=np.int64)  # the earliest wavefront a row may join
    top = 0
    for i in range(n):
        li = after[i]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j < i and level[j] + 1 > li:
                li = level[j] + 1
        level[i] = li
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if i < j < n and after[j] < li + 1:  # j reads x_i after i wrote it
                after[j] = li + 1
        if li + 1 > top:
            top = li + 1
    return top


def wavefronts(indptr, indices, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, ptr)``: the rows of wavefront w are ``rows[ptr[w]:ptr[w + 1]]``, in
    increasing order (a forward sweep takes w = 0, 1, ...; a backward one the reverse)."""
    level = np.zeros(n, dtype=np.int64)
    count = _levels(indptr, indices, n, level) if n else 0
    rows = np.argsort(level, kind="stable").astype(np.int64)
    ptr = np.searchsorted(level[rows], np.arange(count + 1)).astype(np.int64)
    return rows, ptr
