"""Serial and threaded kernel builds: the right one is bound, and both compute the same."""

from __future__ import annotations

import numpy as np

from haloflow.linalg import krylov, matrix
from haloflow.parallel import threads


def test_use_threads_binds_threaded_builds_only_when_they_pay():
    try:
        assert not threads.use_threads(1, 10 * threads.MIN_ROWS)
        serial = krylov._dot2
        assert not threads.use_threads(2, threads.MIN_ROWS - 1)
        assert krylov._dot2 is serial
        assert threads.use_threads(2, threads.MIN_ROWS)
        assert krylov._dot2 is not serial and matrix.spmv is not None
        assert krylov._dot2.targetoptions.get("parallel") is True
        assert not serial.targetoptions.get("parallel")
    finally:
        threads.use_threads(1, 0)
    assert krylov._dot2 is serial


def test_both_builds_agree():
    rng = np.random.default_rng(1)
    n = 5000
    a, b = rng.random(n), rng.random(n)
    indptr = np.arange(0, 3 * n + 1, 3, dtype=np.uint32)
    indices = rng.integers(0, n, 3 * n).astype(np.uint32)
    data = rng.random(3 * n)
    results = []
    try:
        for on in (False, True):
            threads.use_threads(2 if on else 1, threads.MIN_ROWS if on else 0)
            y = np.zeros(n)
            matrix.spmv(indptr, indices, data, a, y)
            results.append((krylov._dot2(a, b, a, a, n), y))
    finally:
        threads.use_threads(1, 0)
    (d0, y0), (d1, y1) = results
    np.testing.assert_allclose(d0, d1, rtol=1e-12)
    np.testing.assert_array_equal(y0, y1)  # rows are independent: bitwise equal
