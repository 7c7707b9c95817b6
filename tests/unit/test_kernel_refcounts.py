"""Face loops without numba's reference counting.

A helper that takes arrays and branches, called once per face, or an array iterated inside
a branch of a face loop, makes numba count references to those arrays with atomic
operations on every face (its pruning pass fails across the branches): on pitzDaily, whose
faces are half boundary ("empty") faces, the pressure system took 7x and the predicted
fluxes' boundary loop 14x their time without them.  These kernels compile with no
reference count at all; a helper of the old kind brought back would add some."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

from haloflow.physics import pressure


def _increfs(kernel, *args) -> int:
    """NRT_incref calls in a fresh compile of ``kernel`` (a cached one cannot be inspected)."""
    fresh = nb.njit(kernel.py_func)
    fresh(*args)
    return fresh.inspect_llvm(fresh.signatures[0]).count("call void @NRT_incref")


def _faces():
    """Six cells in a row, five internal and three boundary faces."""
    owner = np.array([0, 1, 2, 3, 4, 0, 1, 5], dtype=np.int32)
    neighbour = np.array([1, 2, 3, 4, 5], dtype=np.int32)
    return owner, neighbour, 6, 8, 5


def _kinds():
    return np.array([1, 2, 0], dtype=np.int64)  # zero gradient, empty, fixed: every branch


def test_predicted_fluxes_and_pressure_system_count_no_references():
    owner, neighbour, n, nf, ni = _faces()
    pre = (owner, neighbour, np.full(ni, 0.5), np.ones((nf, 3)), np.ones(nf), np.ones((3, n)),
           np.ones(n), _kinds(), np.ones((3, 3)), _kinds())
    phiH, g = np.zeros(nf), np.zeros(nf)
    assert _increfs(pressure.predicted_fluxes, *pre, phiH, g, 0, ni, True) == 0
    assert _increfs(pressure.pressure_system, owner, neighbour, phiH, g, _kinds(), np.ones(3),
                    n, np.zeros(n), np.zeros(n)) == 0
    assert phiH.any() and g.any()
    rhs = np.zeros(n)  # PISO's later correctors: the fluxes and the right-hand side alone
    assert _increfs(pressure.fluxes_and_rhs, *pre, np.ones(3), phiH, g, 2, n, rhs) == 0
    assert rhs.any()


@pytest.mark.parametrize("helper", ["_boundary_fluxes", "_boundary_system"])
def test_boundary_loops_count_no_references(helper):
    owner, neighbour, n, nf, ni = _faces()
    kind = _kinds()
    if helper == "_boundary_fluxes":
        args = (owner, ni, kind, np.ones((3, 3)), np.ones((3, n)), np.ones((nf, 3)),
                np.ones(nf), np.ones(n), kind, np.zeros(nf), np.zeros(nf))
    else:
        args = (owner, ni, np.ones(nf), np.ones(nf), kind, np.ones(3), np.zeros(n), np.zeros(n))
    assert _increfs(getattr(pressure, helper), *args) == 0


def _laplacian_1d(n):
    """Tridiagonal CSR, columns sorted, with its diagonal positions."""
    rows = [[j for j in (i - 1, i, i + 1) if 0 <= j < n] for i in range(n)]
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.uint32)
    indices = np.array([j for r in rows for j in r], dtype=np.uint32)
    data = np.array([2.0 if j == i else -1.0 for i, r in enumerate(rows) for j in r])
    diag_pos = np.array([indptr[i] + rows[i].index(i) for i in range(n)], dtype=np.int64)
    return indptr, indices, data, diag_pos


def test_presmoothing_rows_count_no_references():
    """The sweep from zero takes row i - 1's value from a register, chosen by selects:
    written as branches around array reads in its inlined row, numba counted references to
    every array on every row (6x the sweep's time)."""
    from haloflow.linalg import amg_kernels

    n = 6
    ip, ix, data, dp = _laplacian_1d(n)
    dinv, b = np.full(n, 0.5), np.ones(n)
    assert _increfs(amg_kernels.gs_from_zero, ip, ix, data, dp, dinv, b, np.zeros(n), n) == 0
    agg, rc = np.arange(n) // 2, np.zeros(3)
    assert _increfs(amg_kernels.gs_from_zero_restrict, ip, ix, data, dp, dinv, b, np.zeros(n), n,
                    agg, rc, 3) == 0
