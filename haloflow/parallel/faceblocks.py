"""A threaded rank's face loops: the cells in one contiguous block per thread, each face with
the thread of its owner's block.

Why: a face loop adds into both cells of a face, so two threads that share the faces at random
would add into one cell at once.  Here thread ``t`` adds only into the cells of its block
``[cells[t], cells[t + 1])``: first the faces whose neighbour lies in its block and whose
owner does not (``incoming``, recomputing those faces' values), then its own faces (owner in
the block), adding into the neighbour too where the neighbour is in the block.  Where the
faces are ordered by owner (the interior faces of every mesh here), all faces of a cell whose
owner lies in an earlier block come before the faces whose owner lies in the cell's own block,
so each owned cell receives its terms in the serial loop's order and its sums are the serial
loop's to the bit (ghost cells, and meshes whose faces are not ordered by owner: the same terms
in another order).  No two threads ever write one cell or one face.
"""

from __future__ import annotations

import numpy as np

from .threads import blocks


class FaceBlocks:
    """The cell blocks, each block's own faces and incoming faces (both in increasing face
    order, as CSR lists) of ``nt`` threads over the internal faces ``owner[:ni]``,
    ``neighbour``, cells ``0..n_cells-1``."""

    def __init__(self, owner: np.ndarray, neighbour: np.ndarray, n_cells: int, nt: int):
        ni = len(neighbour)
        self.nt = nt
        self.cells = np.array([n_cells * t // nt for t in range(nt + 1)], dtype=np.int64)
        own_block = np.searchsorted(self.cells, owner[:ni], side="right") - 1
        nb_block = np.searchsorted(self.cells, neighbour, side="right") - 1
        self.own_ptr, self.own = grouped(own_block, np.arange(ni, dtype=np.int64), nt)
        cross = np.flatnonzero(own_block != nb_block)
        self.in_ptr, self.incoming = grouped(nb_block[cross], cross, nt)

    def arrays(self) -> tuple:
        """What the threaded kernels take: cells, own_ptr, own, in_ptr, incoming."""
        return self.cells, self.own_ptr, self.own, self.in_ptr, self.incoming


def for_threads(have: FaceBlocks | None, owner, neighbour, n_cells: int) -> FaceBlocks | None:
    """The face blocks for the threads bound now (``have`` where it fits), or None while the
    serial kernels are bound."""
    nt = blocks()
    if nt == 1:
        return None
    if have is None or have.nt != nt:
        have = FaceBlocks(owner, neighbour, n_cells, nt)
    return have


def grouped(group: np.ndarray, items: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``items`` grouped by ``group`` (values ``0..n-1``) as CSR ``(ptr, items)``, each group
    in the items' order: what a loop that gathers per group, instead of scattering per
    item, needs to add in the scatter's order."""
    order = np.argsort(group, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(group, minlength=n), out=ptr[1:])
    return ptr, items[order]
