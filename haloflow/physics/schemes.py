"""Face interpolation weights, diffusion coefficients and the Gauss gradient.

Everything here is face-based and works on any polyhedral mesh.  The diffusion coefficient is
the orthogonal part ``|S|^2 / (S . d)`` (exact on orthogonal meshes; the non-orthogonal
correction comes with general meshes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from .bcs import EMPTY, FIXED


@dataclass
class FaceCoeffs:
    weight: np.ndarray  # (n_internal,) owner weight of linear interpolation
    gdiff: np.ndarray  # (n_faces,) |S|^2 / (S . d); d to the neighbour centre or the face centre


def face_coeffs(lmesh) -> FaceCoeffs:
    g = lmesh.geometry
    ni = lmesh.n_internal
    sf, fc, cc = g.face_areas, g.face_centres, g.cell_centres
    own = lmesh.owner
    magsf = np.linalg.norm(sf, axis=1)
    n = sf / magsf[:, None]
    do = np.abs(np.einsum("ij,ij->i", n[:ni], fc[:ni] - cc[own[:ni]]))
    dn = np.abs(np.einsum("ij,ij->i", n[:ni], cc[lmesh.neighbour] - fc[:ni]))
    weight = dn / (do + dn)
    d = np.empty_like(sf)
    d[:ni] = cc[lmesh.neighbour] - cc[own[:ni]]
    d[ni:] = fc[ni:] - cc[own[ni:]]
    gdiff = magsf**2 / np.einsum("ij,ij->i", sf, d)
    return FaceCoeffs(weight=weight, gdiff=gdiff)


@nb.njit(cache=True)
def gauss_gradient_part(owner, neighbour, weight, sf, vol, phi, bkind, bvalue, grad, n_interior,
                        first):
    """Half of the Gauss gradient, so that it can overlap a halo exchange of ``phi``.

    ``first``: zero ``grad`` and sum the interior faces (both cells owned: no ghost value
    needed).  Otherwise: the interface and boundary faces, then divide by the volume.  The
    two halves visit the faces in the same order as one pass, so the result is bitwise the
    same whether or not the exchange was overlapped.
    """
    ni = len(neighbour)
    if first:
        grad[:, :] = 0.0
        f0, f1 = 0, n_interior
    else:
        f0, f1 = n_interior, ni
    for f in range(f0, f1):
        o = owner[f]
        n = neighbour[f]
        pf = weight[f] * phi[o] + (1.0 - weight[f]) * phi[n]
        for d in range(3):
            grad[d, o] += pf * sf[f, d]
            grad[d, n] -= pf * sf[f, d]
    if first:
        return
    for f in range(ni, len(owner)):
        b = f - ni
        k = bkind[b]
        if k == EMPTY:
            continue
        o = owner[f]
        pf = bvalue[b] if k == FIXED else phi[o]
        for d in range(3):
            grad[d, o] += pf * sf[f, d]
    for c in range(len(vol)):
        iv = 1.0 / vol[c]
        for d in range(3):
            grad[d, c] *= iv


def gauss_gradient(owner, neighbour, weight, sf, vol, phi, bkind, bvalue, grad):
    """grad (3, n_cells) of the cell scalar ``phi``; rows of ghost cells are meaningless."""
    args = (owner, neighbour, weight, sf, vol, phi, bkind, bvalue, grad, len(neighbour))
    gauss_gradient_part(*args, True)
    gauss_gradient_part(*args, False)
