"""Forces of the fluid on a wall patch, summed face by face in compiled code: pressure from
the wall cell extrapolated to the face with a least-squares gradient, and the wall shear."""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(cache=True)
def wall_sums(cells, sf, dn, rf, uw, ptr, nbr, coef, U, p, nu, grad, out):
    """Per wall face k of owner ``cells[k]``: the least-squares pressure gradient from the
    cell's neighbours into ``grad[k]``; ``out`` = (pressure force from extrapolated face
    values (3), viscous force (3), pressure force from cell values (3))."""
    for i in range(9):
        out[i] = 0.0
    for k in range(len(cells)):
        c = cells[k]
        pc = p[c]
        gx = gy = gz = 0.0
        for j in range(ptr[k], ptr[k + 1]):
            d = p[nbr[j]] - pc
            gx += coef[j, 0] * d
            gy += coef[j, 1] * d
            gz += coef[j, 2] * d
        grad[k, 0] = gx
        grad[k, 1] = gy
        grad[k, 2] = gz
        pf = pc + gx * rf[k, 0] + gy * rf[k, 1] + gz * rf[k, 2]
        mag = math.sqrt(sf[k, 0] ** 2 + sf[k, 1] ** 2 + sf[k, 2] ** 2)
        un = 0.0
        for d in range(3):
            un += (U[d, c] - uw[k, d]) * sf[k, d] / mag
        for d in range(3):
            out[d] += pf * sf[k, d]
            out[6 + d] += pc * sf[k, d]
            ut = U[d, c] - uw[k, d] - un * sf[k, d] / mag
            out[3 + d] += nu * mag / dn[k] * ut


def lsq_stencil(lmesh, cells) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR (ptr, neighbour cells, vectors) of the least-squares gradient of each of
    ``cells`` from its internal-face neighbours (weights 1/|d|^2; pseudo-inverse, so the
    empty direction of a 2D mesh drops out)."""
    ni = lmesh.n_internal
    cc = lmesh.geometry.cell_centres
    own, nei = lmesh.owner[:ni], lmesh.neighbour
    ptr, nbr, coef = [0], [], []
    for c in cells:  # a few hundred wall cells, once
        others = np.concatenate([nei[own == c], own[nei == c]])
        d = cc[others] - cc[c]
        w = 1.0 / np.einsum("ij,ij->i", d, d)
        G = np.einsum("i,ij,ik->jk", w, d, d)
        coef.append(w[:, None] * (d @ np.linalg.pinv(G).T))
        nbr.append(others)
        ptr.append(ptr[-1] + len(others))
    if not coef:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros((0, 3))
    return (np.asarray(ptr, np.int64), np.concatenate(nbr).astype(np.int64),
            np.concatenate(coef))
