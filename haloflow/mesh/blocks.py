"""Block-structured box generator (like a single-block ``blockMesh``).

A 2D case is a box one cell thick in z whose ``front`` and ``back`` patches get the ``empty``
boundary condition.  The six patches are named after the sides they cover.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .core import Mesh, Patch, index_dtype

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
    """Hexahedral box with ``cells = (nx, ny, nz)`` cells, its index arrays in 32 bits where
    the counts allow.  Internal faces are written straight into their places by one compiled
    loop: rank 0 builds the whole mesh of a parallel run, and array expressions over every
    face held several copies of the face lists at once (its peak memory on big boxes)."""
    nx, ny, nz = (int(c) for c in cells)
    xs = [graded_coords(n, float(L), float(g), float(o))
          for n, L, g, o in zip((nx, ny, nz), lengths, grading, origin, strict=True)]
    X, Y, Z = np.meshgrid(*xs, indexing="ij")  # (nx+1, ny+1, nz+1)
    points = np.stack([X.ravel(order="F"), Y.ravel(order="F"), Z.ravel(order="F")], axis=1)
    del X, Y, Z
    n_cells = nx * ny * nz
    n_internal = (nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1)
    sides = _box_sides(nx, ny, nz)
    n_faces = n_internal + sum(len(c) for c, _ in sides)
    node_t, cell_t = index_dtype(len(points)), index_dtype(n_cells)
    face_nodes = np.empty((n_faces, 4), dtype=node_t)
    owner = np.empty(n_faces, dtype=cell_t)
    neighbour = np.empty(n_internal, dtype=cell_t)
    _box_internal(nx, ny, nz, face_nodes, owner, neighbour)
    patches, start = [], n_internal
    for side, (c, nodes) in zip(SIDES, sides, strict=True):
        face_nodes[start:start + len(c)] = nodes
        owner[start:start + len(c)] = c
        patches.append(Patch(side, start, len(c)))
        start += len(c)
    return Mesh(
        points=points,
        face_ptr=np.arange(0, 4 * n_faces + 1, 4, dtype=index_dtype(4 * n_faces + 1)),
        face_nodes=face_nodes.reshape(-1),
        owner=owner,
        neighbour=neighbour,
        patches=patches,
        n_cells=n_cells,
    )


@nb.njit(cache=True)
def _box_internal(nx, ny, nz, face_nodes, owner, neighbour):
    """The box's internal faces: for each cell (ascending) its +x, +y, +z faces, so owner
    and then neighbour ascend (OpenFOAM's upper-triangular order); each quad's normal points
    from owner to neighbour."""
    px, pxy = nx + 1, (nx + 1) * (ny + 1)  # point id steps in j and k
    f = 0
    for k in range(nz):
        for j in range(ny):
            for i in range(nx):
                c = i + nx * (j + ny * k)
                p = i + px * j + pxy * k  # the cell's lowest corner
                if i < nx - 1:  # quad spanned by +y then +z at i + 1
                    q = p + 1
                    _quad(face_nodes, f, q, q + px, q + px + pxy, q + pxy)
                    owner[f], neighbour[f] = c, c + 1
                    f += 1
                if j < ny - 1:  # by +z then +x at j + 1
                    q = p + px
                    _quad(face_nodes, f, q, q + pxy, q + pxy + 1, q + 1)
                    owner[f], neighbour[f] = c, c + nx
                    f += 1
                if k < nz - 1:  # by +x then +y at k + 1
                    q = p + pxy
                    _quad(face_nodes, f, q, q + 1, q + 1 + px, q + px)
                    owner[f], neighbour[f] = c, c + nx * ny
                    f += 1


@nb.njit(cache=True)
def _quad(face_nodes, f, a, b, c, d):
    face_nodes[f, 0], face_nodes[f, 1], face_nodes[f, 2], face_nodes[f, 3] = a, b, c, d


EX, EY, EZ = (1, 0, 0), (0, 1, 0), (0, 0, 1)


def _lattice_quad(nx, ny, i, j, k, a, b):
    """Point ids of the quads of an (nx, ny, .) lattice of cells spanned by unit steps ``a``
    then ``b`` from points (i, j, k) (arrays): normals along a x b."""

    def pid(i, j, k):
        return i + (nx + 1) * (j + (ny + 1) * k)

    return np.stack([pid(i, j, k), pid(i + a[0], j + a[1], k + a[2]),
                     pid(i + a[0] + b[0], j + a[1] + b[1], k + a[2] + b[2]),
                     pid(i + b[0], j + b[1], k + b[2])], -1)


def _box_sides(nx, ny, nz) -> list:
    """(owner cells, quads) of each of the box's six sides in SIDES order, the cells in cell
    order, the quads' normals pointing out of the box."""

    def cells_on(d, at):
        """(i, j, k) of the cells with index ``at`` in direction d, in cell order."""
        n = [nx, ny, nz]
        free = [np.arange(m) for m in n]
        free[d] = np.array([at])
        return [a.ravel(order="F") for a in np.meshgrid(*free, indexing="ij")]

    out = []
    for d, (a, b) in enumerate(((EY, EZ), (EZ, EX), (EX, EY))):
        for s in (0, 1):
            i, j, k = cells_on(d, 0 if s == 0 else (nx, ny, nz)[d] - 1)
            c = i + nx * (j + ny * k)
            if s == 0:
                nodes = _lattice_quad(nx, ny, i, j, k, a, b)[:, ::-1]
            else:
                step = [i, j, k]
                step[d] = step[d] + 1
                nodes = _lattice_quad(nx, ny, *step, a, b)
            out.append((c, nodes))
    return out


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

    quads = [lambda i, j, k, a=a, b=b: _lattice_quad(nx, ny, i, j, k, a, b)
             for a, b in ((EY, EZ), (EZ, EX), (EX, EY))]
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
