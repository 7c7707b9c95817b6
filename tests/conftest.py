"""Set-up shared by every test directory.

Each pytest-xdist worker compiles into its own copy of numba's on-disk cache.  Numba's cache
is not safe for two processes adding signatures of the same function at once: each rewrites
the function's index from what it read, so one process's index can end up naming the other's
object code, and a later run that loads that entry crashes (seen here: a segmentation fault
in the compiled pressure solve after the one-process tests had compiled new kernels on two
workers).  ``make test`` compiles the common kernels serially first (``haloflow.warmup``);
the copies take whatever the workers still compile, and the shared cache is left as the
warm-up wrote it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def _private_numba_cache() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = os.environ.get("NUMBA_CACHE_DIR")
    if not worker or not shared or "numba" in sys.modules:
        return  # one process, no cache directory set, or too late to move it
    own = Path(f"{shared}.{worker}")
    shutil.rmtree(own, ignore_errors=True)
    if Path(shared).is_dir():
        shutil.copytree(shared, own)
    os.environ["NUMBA_CACHE_DIR"] = str(own)  # read by numba's import, and by subprocesses


_private_numba_cache()
