"""Block-structured box generator (like a single-block ``blockMesh``).

A 2D case is a box one cell thick in z whose ``front`` and ``back`` patches get the ``empty``
boundary condition.  The six patches are named after the sides they cover.
"""

from __future__ import annotations

import numpy as np

from .core import Mesh, Patch

SIDES = ("left", "right", "bottom", "top", "front", "back")  # -x, +x, -y, +y, -z, +z


def graded_coords(n: int, length: float, ratio: float, start: float = 0.0) -> np.ndarray:
    """``n + 1`` node coordinates whose last/first cell size is ``ratio`` (blockMesh grading)."""
    if n < 1:
        raise ValueError("a block needs at least one cell in every direction")
    if ratio <= 0.0:
        raise ValueError("grading ratios must be positive")
    q = ratio ** (1.0 / (n - 1)) if n > 1 else 1.0
    sizes = q ** np.arange(n)
    x = np.concatenate([[0.0], np.cumsum(sizes)])
    x = start + length * x / x[-1]
    x[-1] = start + length
    return x


def box(cells, lengths=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), grading=(1.0, 1.0, 1.0)) -> Mesh:
    """Hexahedral box with ``cells = (nx, ny, nz)`` cells."""
    nx, ny, nz = (int(c) for c in cells)
    xs = [graded_coords(n, float(L), float(g), float(o))
          for n, L, g, o in zip((nx, ny, nz), lengths, grading, origin, strict=True)]
    X, Y, Z = np.meshgrid(*xs, indexing="ij")  # (nx+1, ny+1, nz+1)
    points = np.stack([X.ravel(order="F"), Y.ravel(order="F"), Z.ravel(order="F")], axis=1)

    def pid(i, j, k):
        return i + (nx + 1) * (j + (ny + 1) * k)

    def cid(i, j, k):
        return i + nx * (j + ny * k)

    # Quads with normals along +x, +y, +z given the lower corner (i, j, k) of the face.
    def span(i, j, k, a, b):
        """Quad spanned by unit steps ``a`` then ``b`` from (i, j, k): normal along a x b."""
        return np.stack([pid(i, j, k), pid(i + a[0], j + a[1], k + a[2]),
                         pid(i + a[0] + b[0], j + a[1] + b[1], k + a[2] + b[2]),
                         pid(i + b[0], j + b[1], k + b[2])], -1)

    ex, ey, ez = (1, 0, 0), (0, 1, 0), (0, 0, 1)

    def quad_x(i, j, k):
        return span(i, j, k, ey, ez)

    def quad_y(i, j, k):
        return span(i, j, k, ez, ex)

    def quad_z(i, j, k):
        return span(i, j, k, ex, ey)

    I, J, K = np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")
    I, J, K = (a.ravel(order="F") for a in (I, J, K))  # cell order
    c = cid(I, J, K)

    # Internal faces: for each cell (ascending) its +x, +y, +z faces, so owner and then
    # neighbour ascend (OpenFOAM's upper-triangular order).
    blocks_nodes, blocks_own, blocks_nbr, blocks_key = [], [], [], []
    for d, (mask, quad, step) in enumerate((
        (I < nx - 1, quad_x, 1),
        (J < ny - 1, quad_y, nx),
        (K < nz - 1, quad_z, nx * ny),
    )):
        ii, jj, kk, cc = I[mask], J[mask], K[mask], c[mask]
        if d == 0:
            nodes = quad(ii + 1, jj, kk)
        elif d == 1:
            nodes = quad(ii, jj + 1, kk)
        else:
            nodes = quad(ii, jj, kk + 1)
        blocks_nodes.append(nodes)
        blocks_own.append(cc)
        blocks_nbr.append(cc + step)
        blocks_key.append(cc * 3 + d)
    key = np.concatenate(blocks_key)
    order = np.argsort(key, kind="stable")
    int_nodes = np.concatenate(blocks_nodes)[order]
    owner = np.concatenate(blocks_own)[order]
    neighbour = np.concatenate(blocks_nbr)[order]

    # Boundary faces, patch by patch, normals pointing out of the domain.
    bnd_nodes, bnd_owner, patches = [], [], []
    start = len(owner)
    for side in SIDES:
        if side == "left":
            m = I == 0
            nodes = quad_x(I[m], J[m], K[m])[:, ::-1]
        elif side == "right":
            m = I == nx - 1
            nodes = quad_x(I[m] + 1, J[m], K[m])
        elif side == "bottom":
            m = J == 0
            nodes = quad_y(I[m], J[m], K[m])[:, ::-1]
        elif side == "top":
            m = J == ny - 1
            nodes = quad_y(I[m], J[m] + 1, K[m])
        elif side == "front":
            m = K == 0
            nodes = quad_z(I[m], J[m], K[m])[:, ::-1]
        else:
            m = K == nz - 1
            nodes = quad_z(I[m], J[m], K[m] + 1)
        bnd_nodes.append(nodes)
        bnd_owner.append(c[m])
        patches.append(Patch(side, start, int(m.sum())))
        start += int(m.sum())

    all_nodes = np.concatenate([int_nodes] + bnd_nodes).astype(np.int64)
    n_faces = len(all_nodes)
    mesh = Mesh(
        points=points,
        face_ptr=np.arange(0, 4 * n_faces + 1, 4, dtype=np.int64),
        face_nodes=all_nodes.ravel(),
        owner=np.concatenate([owner] + bnd_owner).astype(np.int64),
        neighbour=neighbour.astype(np.int64),
        patches=patches,
        n_cells=nx * ny * nz,
    )
    return mesh
