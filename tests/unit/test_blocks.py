"""Thread-block kernels (linalg/blocks.py): hybrid Gauss-Seidel is Gauss-Seidel inside each
block and Jacobi across blocks, and one block is the serial sweep."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.linalg import amg, blocks
from haloflow.linalg.poisson import laplacian
from haloflow.mesh.blocks import box
from haloflow.parallel.local import build_local


def _level():
    mesh = box((9, 8, 7))
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    A = laplacian(lm, MPI.COMM_SELF, fixed=("left",))
    p = A.pattern
    n = p.n_rows
    dinv = np.zeros(n)
    amg.l1_inverse(p.indptr, p.indices, A.data, p.diag_pos, n, dinv)
    rng = np.random.default_rng(3)
    return p, A.data, dinv, rng.random(n), rng.random(p.n_cols)


def _reference(p, data, dinv, b, x, nt, forward):
    """Gauss-Seidel in each block over its own rows, other blocks' values as before:
    x_i = (b_i - sum over j != i of a_ij x_j) / a_ii, summed in column order."""
    n = p.n_rows
    old = x.copy()
    for t in range(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        for i in (range(lo, hi) if forward else range(hi - 1, lo - 1, -1)):
            s = b[i]
            for k in range(p.indptr[i], p.indptr[i + 1]):
                j = p.indices[k]
                if k != p.diag_pos[i]:
                    s -= data[k] * (x[j] if lo <= j < hi or j >= n else old[j])
            x[i] = s / data[p.diag_pos[i]]
    return x


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("nt", [1, 3])
def test_gs_blocks(forward, nt):
    p, data, dinv, b, x0 = _level()
    n = p.n_rows
    bw = blocks.bandwidth(p.indptr, p.indices, n)
    assert bw == 72  # 9 x 8 cells a layer: the farthest coupling in natural order
    x = x0.copy()
    blocks.gs_blocks(p.indptr, p.indices, data, p.diag_pos, dinv, b, x, n, forward, nt, bw,
                     np.zeros(n))
    want = _reference(p, data, dinv, b, x0.copy(), nt, forward)
    np.testing.assert_allclose(x, want, rtol=1e-14, atol=0)
    if nt == 1:  # the serial sweep, to the bit
        y = x0.copy()
        amg.gs_sweep(p.indptr, p.indices, data, p.diag_pos, dinv, b, y, n, forward)
        np.testing.assert_array_equal(x, y)
    else:
        y = x0.copy()
        amg.gs_sweep(p.indptr, p.indices, data, p.diag_pos, dinv, b, y, n, forward)
        assert not np.allclose(x, y, rtol=1e-12, atol=0)
