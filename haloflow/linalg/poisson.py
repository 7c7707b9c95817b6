"""The finite-volume Laplacian of a LocalMesh as a DistMatrix: the model pressure problem.

Couplings |S|^2/(S.d) as in the pressure equation; ``fixed`` patches add a Dirichlet
(fixed-value) term, otherwise the operator is all-Neumann and singular like the cavity's
pressure matrix.  Used by the solver benchmarks and the linear-algebra tests, so all of them
exercise the same operator.
"""

from __future__ import annotations

import numpy as np

from ..mesh.fv import face_coeffs
from ..parallel import halo
from ..parallel.reduce import Reducer
from .matrix import DistMatrix, Pattern


def laplacian(lmesh, comm, fixed=(), strategy: str = "packed") -> DistMatrix:
    fc = face_coeffs(lmesh)
    ni = lmesh.n_internal
    g = fc.gdiff[:ni]
    diag = np.zeros(lmesh.n_cells)
    np.add.at(diag, lmesh.owner[:ni], g)
    np.add.at(diag, lmesh.neighbour, g)
    for p in lmesh.patches:
        if p.name in fixed:
            f = np.arange(p.start, p.start + p.size)
            np.add.at(diag, lmesh.owner[f], fc.gdiff[f])
    A = DistMatrix(Pattern(lmesh), halo.make(strategy, lmesh, comm))
    A.fill(diag, -g, -g)
    return A


def smooth_rhs(lmesh, red: Reducer, zero_mean: bool = False) -> np.ndarray:
    """A smooth right-hand side (volume-weighted); zero global sum if ``zero_mean``, which
    makes the all-Neumann problem consistent.  Ghost entries are zero."""
    n = lmesh.n_owned
    c = lmesh.geometry.cell_centres[:n]
    b = np.zeros(lmesh.n_cells)
    b[:n] = np.sin(3 * c[:, 0] + 1) * np.cos(2 * c[:, 1] + c[:, 2]) * \
        lmesh.geometry.cell_volumes[:n]
    if zero_mean:
        b[:n] -= red.sum(b[:n].sum())[0] / lmesh.n_cells_global
    return b
