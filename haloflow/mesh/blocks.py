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


# -- backward-facing step: a lattice with the block under the inlet channel removed ----------

STEP_PATCHES = ("inlet", "outlet", "lower", "upper", "front", "back")


def _lattice(xs, ys, zs, keep, classify, names) -> Mesh:
    """Hexahedra of the lattice ``xs x ys x zs`` where ``keep[i, j, k]``; the cells are
    numbered like the box's (i fastest) with the removed ones skipped.  A face between a kept
    cell and a removed one (or the outside) is a boundary face; ``classify(d, s, I, J, K)``
    gives the index into ``names`` of the patch of the faces of cells (I, J, K) on side ``s``
    (0: -, 1: +) of direction ``d``.  Unused points are dropped."""
    nx, ny, nz = keep.shape
    X, Y, Z = np.meshgrid(xs, ys, zs, indexing="ij")
    points = np.stack([X.ravel(order="F"), Y.ravel(order="F"), Z.ravel(order="F")], axis=1)
    flat = keep.ravel(order="F")
    cid_all = np.cumsum(flat) - 1  # compact id of every lattice cell (valid where kept)

    def pid(i, j, k):
        return i + (nx + 1) * (j + (ny + 1) * k)

    def span(i, j, k, a, b):
        return np.stack([pid(i, j, k), pid(i + a[0], j + a[1], k + a[2]),
                         pid(i + a[0] + b[0], j + a[1] + b[1], k + a[2] + b[2]),
                         pid(i + b[0], j + b[1], k + b[2])], -1)

    ex, ey, ez = (1, 0, 0), (0, 1, 0), (0, 0, 1)
    quads = (lambda i, j, k: span(i, j, k, ey, ez), lambda i, j, k: span(i, j, k, ez, ex),
             lambda i, j, k: span(i, j, k, ex, ey))
    I, J, K = np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")
    I, J, K = (a.ravel(order="F")[flat] for a in (I, J, K))  # kept cells, in cell order
    c = cid_all[flat]
    n = np.array([nx, ny, nz])

    def kept_next(d, step):
        """Whether the lattice neighbour of each kept cell in direction d (+-1) is kept."""
        idx = [I, J, K]
        nxt = idx[d] + step
        ok = (nxt >= 0) & (nxt < n[d])
        idx = [a.copy() for a in idx]
        idx[d] = np.where(ok, nxt, 0)
        ok &= keep[idx[0], idx[1], idx[2]]
        return ok

    int_nodes, own, nbr = [], [], []
    bnd = []  # (patch index, owner, nodes)
    for d in range(3):
        up = [0, 0, 0]
        up[d] = 1
        plus = kept_next(d, +1)
        m = plus
        int_nodes.append(quads[d](I[m] + up[0], J[m] + up[1], K[m] + up[2]))
        own.append(c[m])
        nbr.append(cid_all[(I[m] + up[0]) + nx * ((J[m] + up[1]) + ny * (K[m] + up[2]))])
        for s, open_ in ((0, ~kept_next(d, -1)), (1, ~plus)):
            ii, jj, kk = I[open_], J[open_], K[open_]
            if s == 0:
                nodes = quads[d](ii, jj, kk)[:, ::-1]
            else:
                nodes = quads[d](ii + up[0], jj + up[1], kk + up[2])
            bnd.append((np.asarray(classify(d, s, ii, jj, kk)), c[open_], nodes))
    owner = np.concatenate(own)
    neighbour = np.concatenate(nbr)
    order = np.lexsort((neighbour, owner))
    faces = [np.concatenate(int_nodes)[order]]
    owners = [owner[order]]
    pidx = np.concatenate([b[0] for b in bnd])
    bown = np.concatenate([b[1] for b in bnd])
    bnodes = np.concatenate([b[2] for b in bnd])
    border = np.lexsort((bown, pidx))
    faces.append(bnodes[border])
    owners.append(bown[border])
    counts = np.bincount(pidx, minlength=len(names))
    patches, start = [], len(owner)
    for name, size in zip(names, counts, strict=True):
        patches.append(Patch(name, start, int(size)))
        start += int(size)
    all_nodes = np.concatenate(faces).astype(np.int64)
    used = np.zeros(len(points), dtype=bool)
    used[all_nodes.ravel()] = True
    renum = np.cumsum(used) - 1
    n_faces = len(all_nodes)
    return Mesh(
        points=points[used],
        face_ptr=np.arange(0, 4 * n_faces + 1, 4, dtype=np.int64),
        face_nodes=renum[all_nodes.ravel()].astype(np.int64),
        owner=np.concatenate(owners).astype(np.int64),
        neighbour=neighbour[order].astype(np.int64),
        patches=patches,
        n_cells=int(flat.sum()),
    )


def step_keep(cells_x, cells_y) -> np.ndarray:
    """The lattice cells of :func:`step` that exist: all but the block under the inlet
    channel (``i < cells_x[0]`` and ``j < cells_y[0]``); shape (nx, ny, 1)."""
    nu, nd = (int(v) for v in cells_x)
    ns, nc = (int(v) for v in cells_y)
    keep = np.ones((nu + nd, ns + nc, 1), dtype=bool)
    keep[:nu, :ns] = False
    return keep


def step(inlet_height=1.0, step_height=0.9423, upstream_length=2.0, downstream_length=30.0,
         cells_x=(10, 150), cells_y=(10, 10), grading=1.0, depth=1.0) -> Mesh:
    """2D backward-facing step, one cell thick (``front``/``back`` take ``empty``).

    The step's corner is at the origin: the inlet channel (height ``h = inlet_height``)
    spans ``-upstream_length <= x <= 0``, ``S <= y <= S + h`` with ``S = step_height``; the
    downstream channel ``0 <= x <= downstream_length``, ``0 <= y <= H = S + h``.
    ``cells_x = (upstream, downstream)``, ``cells_y = (below the step, across the inlet
    channel)``; ``grading`` is the last/first cell size along the downstream channel.
    Patches: ``inlet`` (x = -upstream_length), ``outlet``, ``lower`` (the inlet channel's
    floor, the step face and the downstream floor), ``upper``, ``front``, ``back``.
    """
    nu, nd = (int(v) for v in cells_x)
    ns, nc = (int(v) for v in cells_y)
    S, h = float(step_height), float(inlet_height)
    xu = graded_coords(nu, float(upstream_length), 1.0, -float(upstream_length))
    xd = graded_coords(nd, float(downstream_length), float(grading), 0.0)
    xs = np.concatenate([xu[:-1], xd])
    ys = np.concatenate([graded_coords(ns, S, 1.0, 0.0)[:-1], graded_coords(nc, h, 1.0, S)])
    zs = np.array([0.0, float(depth)])
    keep = step_keep(cells_x, cells_y)
    nx, ny = nu + nd, ns + nc
    p = {name: i for i, name in enumerate(STEP_PATCHES)}

    def classify(d, s, I, J, K):
        if d == 2:
            return np.full(len(I), p["front"] if s == 0 else p["back"])
        if d == 0:
            if s == 1:
                return np.full(len(I), p["outlet"])  # only the last column opens to +x
            return np.where(I == 0, p["inlet"], p["lower"])  # the step face otherwise
        if s == 1:
            return np.full(len(I), p["upper"])
        return np.full(len(I), p["lower"])  # floors of both channels

    mesh = _lattice(xs, ys, zs, keep, classify, STEP_PATCHES)
    assert mesh.n_cells == nx * ny - nu * ns
    return mesh
