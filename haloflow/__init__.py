"""haloflow: a parallel finite-volume CFD solver that measures its own communication."""

import os

# A rank is one process per core.  A BLAS that starts threads of its own in every rank
# (OpenBLAS does, for the coarsest AMG level's dense LU) oversubscribes the cores: the 3D
# cavity at 32^3 on 2 ranks took 342 ms per step instead of 14.  Set before numpy loads it;
# a user's own setting wins.  numba's threads are haloflow's (--threads), not the BLAS's.
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
del _var


def numba_target_without_blas() -> None:
    """Load numba's CPU target with SciPy's BLAS hidden from it.  When the target first
    loads (a process's first kernel) numba checks for that BLAS (``numba/np/arraymath.py``),
    and the check imports the whole of scipy.linalg: 13 MB in every rank (a 2³ run's peak
    204 -> 191 MB, docs/performance.md) for a BLAS no haloflow kernel calls, their loops
    being their own.  Without it numba takes its own loop for a 1-D ``np.dot`` and imports
    the BLAS, as before, where a kernel needs more (``ensure_blas``).  Nothing happens once
    the target or the BLAS is loaded."""
    import sys

    blas = "scipy.linalg.cython_blas"
    if "numba.np.arraymath" in sys.modules or blas in sys.modules:
        return
    sys.modules[blas] = None  # an import of it now raises ImportError
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        del sys.modules[blas]
