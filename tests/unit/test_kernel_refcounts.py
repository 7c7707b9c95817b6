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
                    n, np.zeros(n), np.zeros(ni), np.zeros(ni), np.zeros(n)) == 0
    assert phiH.any() and g.any()


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
