"""Arrays of vector components whose rows do not fall on the same place in a page.

A field such as ``U[d, cell]`` is stored row by row, so component ``d + 1`` of a cell lies
``n`` doubles after component ``d``.  Where ``8 n`` bytes is (close to) a multiple of the
4 KiB page, the two share their address bits below 4 KiB, and an x86 core that stores to
one and then loads the other stalls on a false dependence (4K aliasing).  Face loops do
exactly that: the Gauss gradient adds into ``grad[0, o]``, ``grad[1, o]``, ``grad[2, o]``.
On the 64³ cavity's half on 2 ranks (135 168 cells, 33 pages a row) that loop took 22-28
ns per face instead of 6, and the 1-rank 64³ cavity (64 pages a row) lost about a fifth of
its momentum assembly's and solve's time.

So the solver's vector fields are views of a wider block: each row starts at least 512
bytes away, in the page, from where the previous one starts.  Always at least 8 doubles
wider, so every such array is a strided view and each kernel has one compiled variant for
it.  (The momentum solver's lockstep workspace stays one block: the AMG keeps its coarse
levels' vectors in its rows as one contiguous piece, ``ManyWorkspace.as_workspace``.)
"""

from __future__ import annotations

import numpy as np

PAGE = 4096  # bytes: the address bits a store and a load are compared on
APART = 512  # bytes: how far apart in a page consecutive rows start, at least
STEP = 8  # doubles: rows widen a cache line at a time


def row_stride(n: int) -> int:
    """Doubles from one row's start to the next's for rows of ``n`` doubles."""
    stride = n + STEP
    while not APART <= stride * 8 % PAGE <= PAGE - APART:
        stride += STEP
    return stride


def components(*shape: int) -> np.ndarray:
    """Zeros of ``shape`` (the last axis the cells), rows laid out as the module says."""
    *lead, n = shape
    return np.zeros((*lead, row_stride(n)))[..., :n]
