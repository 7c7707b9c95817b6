"""Thread-block kernels (linalg/blocks.py): hybrid Gauss-Seidel is Gauss-Seidel inside each
block and Jacobi across blocks, and one block is the serial sweep."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.linalg import amg_kernels, blocks
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
    amg_kernels.l1_inverse(p.indptr, p.indices, A.data, p.diag_pos, n, dinv)
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
        amg_kernels.gs_sweep(p.indptr, p.indices, data, p.diag_pos, dinv, b, y, n, forward)
        np.testing.assert_array_equal(x, y)
    else:
        y = x0.copy()
        amg_kernels.gs_sweep(p.indptr, p.indices, data, p.diag_pos, dinv, b, y, n, forward)
        assert not np.allclose(x, y, rtol=1e-12, atol=0)


def _three_vectors():
    p, data, _, _, _ = _level()
    rng = np.random.default_rng(5)
    return p, data, [rng.random((3, p.n_cols)) for _ in range(2)]


@pytest.mark.parametrize("nt", [1, 3])
def test_lockstep_products_three_in_one_pass(nt):
    """With all three velocity components active the lockstep products read the matrix once
    for the three: each row as the one-vector product sums it (to the bit), and the fused
    sums those of the written vectors, added block by block in block order."""
    p, data, (X, Q) = _three_vectors()
    n = p.n_rows
    comps = np.arange(3)
    rows = [(n * t // nt, n * (t + 1) // nt) for t in range(nt)]
    want = np.zeros((3, n))
    for d in range(3):
        blocks.spmv(p.indptr, p.indices, data, X[d], want[d], 1)

    def blockwise(a, b):
        return sum(float(np.dot(a[lo:hi], b[lo:hi])) for lo, hi in rows)

    for act in (np.ones(3, dtype=np.int64), np.array([1, 0, 1])):
        Y = np.zeros((3, p.n_cols))
        out = np.zeros(9)
        blocks.many_product_r0v(p.indptr, p.indices, data, X, Y, Q, comps, act, nt,
                                np.zeros((nt, 9)), out)
        for d in np.flatnonzero(act):
            np.testing.assert_array_equal(Y[d, :n], want[d])
            assert out[d] == pytest.approx(blockwise(Q[d, :n], Y[d, :n]), rel=1e-13)
        assert act[1] or not Y[1].any()  # an inactive component is left alone
        T = np.zeros((3, p.n_cols))
        blocks.many_product_dot3(p.indptr, p.indices, data, X, T, Q, comps, act, nt,
                                 np.zeros((nt, 9)), out)
        for d in np.flatnonzero(act):
            np.testing.assert_array_equal(T[d, :n], want[d])
            t, s = T[d, :n], Q[d, :n]
            got = out[3 * d: 3 * d + 3]
            np.testing.assert_allclose(got, [blockwise(t, s), blockwise(t, t), blockwise(s, s)],
                                       rtol=1e-13)


@pytest.mark.parametrize("nt", [1, 3])
def test_sweep_from_zero_and_gathered_restriction(nt):
    """The threaded pre-smoothing from zero is zeroing x and the hybrid sweep, to the bit,
    and the gathered restriction sums each aggregate's residuals as the serial scatter does."""
    p, data, dinv, b, x0 = _level()
    n = p.n_rows
    assert amg_kernels.split_at_diagonal(p.indptr, p.indices, p.diag_pos, n)
    bw = blocks.bandwidth(p.indptr, p.indices, n)
    want = np.zeros(p.n_cols)
    blocks.gs_blocks(p.indptr, p.indices, data, p.diag_pos, dinv, b, want, n, True, nt, bw,
                     np.zeros(n))
    x = x0.copy()  # anything before: the sweep from zero never reads a row it has not swept
    blocks.gs_from_zero(p.indptr, p.indices, data, p.diag_pos, b, x, n, nt, bw, dinv)
    np.testing.assert_array_equal(x[:n], want[:n])
    agg = np.random.default_rng(7).integers(0, n // 3, n)  # scattered aggregates, some empty
    nc = n // 3 + 2
    ptr = np.zeros(nc + 1, dtype=np.int64)
    np.cumsum(np.bincount(agg, minlength=nc), out=ptr[1:])
    rows = np.argsort(agg, kind="stable").astype(p.indices.dtype)
    rc_want, rc = np.zeros(nc), np.full(nc, np.nan)
    amg_kernels.residual_restrict(p.indptr, p.indices, data, x, b, n, agg, rc_want, nc)
    blocks.residual_restrict(p.indptr, p.indices, data, x, b, ptr, rows, rc, nc, nt)
    np.testing.assert_array_equal(rc, rc_want)
