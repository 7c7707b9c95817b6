"""Finite-volume face geometry: interpolation weights and diffusion coefficients per face.

Pure geometry of a (local) mesh, computed once.  The diffusion coefficient is the
over-relaxed one, ``|S|^2 / (S . d)``: the face normal gradient is
``gdiff (phi_N - phi_P) + k . grad(phi)_f`` with ``k = S - gdiff d``, the first part implicit
and the second (zero on orthogonal meshes) a deferred correction from the cell gradients.
Boundary faces use the distance from the cell centre to the face and take no correction, as
OpenFOAM does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core import neighbour_centres

NONORTH_TOL = 1e-8  # |k| / |S| below this on every face: the mesh is orthogonal


@dataclass
class FaceCoeffs:
    weight: np.ndarray  # (n_internal,) owner weight of linear interpolation
    gdiff: np.ndarray  # (n_faces,) |S|^2 / (S . d); d to the neighbour centre or the face centre
    corr: np.ndarray  # (n_internal, 3) non-orthogonal part k = S - gdiff d
    nonorthogonal: bool = False  # some local internal face has |k| > NONORTH_TOL |S|


def face_coeffs(lmesh) -> FaceCoeffs:
    """The :class:`FaceCoeffs` of a mesh (periodic neighbours seen next to the face)."""
    g = lmesh.geometry
    ni = lmesh.n_internal
    sf, fc, cc = g.face_areas, g.face_centres, g.cell_centres
    own = lmesh.owner
    magsf = np.linalg.norm(sf, axis=1)
    n = sf / magsf[:, None]
    cn = neighbour_centres(lmesh)  # periodic neighbours: their images next to the face
    do = np.abs(np.einsum("ij,ij->i", n[:ni], fc[:ni] - cc[own[:ni]]))
    dn = np.abs(np.einsum("ij,ij->i", n[:ni], cn - fc[:ni]))
    weight = dn / (do + dn)
    d = np.empty_like(sf)
    d[:ni] = cn - cc[own[:ni]]
    d[ni:] = fc[ni:] - cc[own[ni:]]
    gdiff = magsf**2 / np.einsum("ij,ij->i", sf, d)
    corr = sf[:ni] - gdiff[:ni, None] * d[:ni]
    nonorth = bool(np.any(np.linalg.norm(corr, axis=1) > NONORTH_TOL * magsf[:ni]))
    return FaceCoeffs(weight=weight, gdiff=gdiff, corr=corr, nonorthogonal=nonorth)
