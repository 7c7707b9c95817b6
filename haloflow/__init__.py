"""haloflow: a parallel finite-volume CFD solver that measures its own communication."""

import os

# A rank is one process per core.  A BLAS that starts threads of its own in every rank
# (OpenBLAS does, for the coarsest AMG level's dense LU) oversubscribes the cores: the 3D
# cavity at 32^3 on 2 ranks took 342 ms per step instead of 14.  Set before numpy loads it;
# a user's own setting wins.  numba's threads are haloflow's (--threads), not the BLAS's.
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
del _var


# numba's cache, keyed by these sources: a kernel cached against other versions of the
# kernels it calls must never load (kernel_cache.py).  Before any module imports numba.
from .kernel_cache import key_numba_cache  # noqa: E402

key_numba_cache()
del key_numba_cache
