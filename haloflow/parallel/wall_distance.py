"""Distance from every local cell centre to the nearest wall face of the whole mesh.

Turbulence closures need it (the Spalart-Allmaras destruction term, van Driest damping), and
the nearest wall may lie on another rank, so the wall is gathered: each rank cuts the wall
faces it holds into triangles (a fan about the face's average point, as the face geometry
is computed), one ``Allgatherv`` gives every rank every triangle, and a compiled bounding-
volume hierarchy answers the nearest-triangle query for each local cell.  The distance is
to the face polygon itself (its interior, edges or corners), not to its centre, so a cell
beside a coarse wall face is not placed too far from it.

The result is the same bit for bit on any rank count: every triangle is cut from the same
points in the same way, each point-triangle distance is computed alone, and a minimum does
not depend on the order of its terms (the hierarchy only prunes boxes no nearer than the
best found).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..mesh.core import face_average

LEAF = 4  # triangles per leaf of the hierarchy


@nb.njit(cache=True)
def _fan_triangles(points, face_ptr, face_nodes, faces, out):
    """Triangles of each face in ``faces``: (average point, node k, node k+1), in order."""
    t = 0
    for f in faces:
        a, b = face_ptr[f], face_ptr[f + 1]
        n = b - a
        px, py, pz = face_average(points, face_nodes, a, b)
        for k in range(n):
            i = face_nodes[a + k]
            j = face_nodes[a + (k + 1) % n]
            out[t, 0, 0] = px
            out[t, 0, 1] = py
            out[t, 0, 2] = pz
            for d in range(3):
                out[t, 1, d] = points[i, d]
                out[t, 2, d] = points[j, d]
            t += 1


def wall_faces(lmesh, wall_patches) -> np.ndarray:
    """This rank's faces on the patches named ``wall_patches``, in patch order."""
    faces = [np.arange(p.start, p.start + p.size, dtype=np.int64)
             for p in lmesh.patches if p.name in set(wall_patches)]
    return np.concatenate(faces) if faces else np.zeros(0, dtype=np.int64)


def wall_triangles(lmesh, wall_patches) -> np.ndarray:
    """``(m, 3, 3)`` triangles of this rank's faces on the patches named ``wall_patches``."""
    if lmesh.points is None:
        raise RuntimeError("wall distance needs the mesh points (compute it at set-up)")
    faces = wall_faces(lmesh, wall_patches)
    counts = np.diff(lmesh.face_ptr)[faces] if len(faces) else np.zeros(0, dtype=np.int64)
    out = np.zeros((int(counts.sum()), 3, 3))
    _fan_triangles(lmesh.points, lmesh.face_ptr, lmesh.face_nodes, faces, out)
    return out


def gather_triangles(tris: np.ndarray, comm) -> np.ndarray:
    """Every rank's triangles on every rank, in rank order: one ``Allgatherv`` (after one
    ``allgather`` of the counts).  ``comm`` None or of size 1: ``tris`` itself."""
    if comm is None or comm.size == 1:
        return tris
    counts = np.asarray(comm.allgather(tris.size), dtype=np.int64)
    out = np.empty(int(counts.sum()))
    displ = np.concatenate([[0], np.cumsum(counts)[:-1]])
    comm.Allgatherv(np.ascontiguousarray(tris).reshape(-1), [out, counts, displ, _double()])
    return out.reshape(-1, 3, 3)


def gather_values(values: np.ndarray, comm) -> np.ndarray:
    """Every rank's 1-D float64 ``values`` on every rank, in rank order (one ``Allgatherv``
    after one ``allgather`` of the counts); ``comm`` None or of size 1: ``values`` itself."""
    if comm is None or comm.size == 1:
        return values
    counts = np.asarray(comm.allgather(values.size), dtype=np.int64)
    out = np.empty(int(counts.sum()))
    displ = np.concatenate([[0], np.cumsum(counts)[:-1]])
    comm.Allgatherv(np.ascontiguousarray(values, dtype=np.float64), [out, counts, displ,
                                                                     _double()])
    return out


def _double():
    from mpi4py import MPI

    return MPI.DOUBLE


# -- the hierarchy -----------------------------------------------------------------------------

@nb.njit(cache=True)
def build_hierarchy(tris, leaf):
    """A bounding-volume hierarchy over ``tris``: per node its box ``lo``, ``hi`` (n, 3), its
    children (``-1`` for a leaf) and its range ``start:end`` of ``order`` (triangle ids).
    Nodes split at the median centroid along their longest centroid extent."""
    m = tris.shape[0]
    cap = 2 * m + 1  # a binary tree with at most m leaves
    lo = np.empty((cap, 3))
    hi = np.empty((cap, 3))
    left = np.full(cap, -1, dtype=np.int64)
    right = np.full(cap, -1, dtype=np.int64)
    start = np.zeros(cap, dtype=np.int64)
    end = np.zeros(cap, dtype=np.int64)
    order = np.arange(m)
    cen = np.empty((m, 3))
    for t in range(m):
        for d in range(3):
            cen[t, d] = (tris[t, 0, d] + tris[t, 1, d] + tris[t, 2, d]) / 3.0
    n_nodes = 1
    start[0], end[0] = 0, m
    stack = np.empty(cap, dtype=np.int64)
    top = 0
    stack[0] = 0
    while top >= 0:
        node = stack[top]
        top -= 1
        s, e = start[node], end[node]
        clo = np.full(3, np.inf)
        chi = np.full(3, -np.inf)
        for d in range(3):
            lo[node, d] = np.inf
            hi[node, d] = -np.inf
        for k in range(s, e):
            t = order[k]
            for d in range(3):
                for v in range(3):
                    lo[node, d] = min(lo[node, d], tris[t, v, d])
                    hi[node, d] = max(hi[node, d], tris[t, v, d])
                clo[d] = min(clo[d], cen[t, d])
                chi[d] = max(chi[d], cen[t, d])
        if e - s <= leaf:
            continue
        axis = 0
        for d in range(1, 3):
            if chi[d] - clo[d] > chi[axis] - clo[axis]:
                axis = d
        seg = order[s:e].copy()
        keys = np.empty(e - s)
        for k in range(e - s):
            keys[k] = cen[seg[k], axis]
        idx = np.argsort(keys, kind="mergesort")
        for k in range(e - s):
            order[s + k] = seg[idx[k]]
        mid = s + (e - s) // 2
        left[node], right[node] = n_nodes, n_nodes + 1
        start[n_nodes], end[n_nodes] = s, mid
        start[n_nodes + 1], end[n_nodes + 1] = mid, e
        stack[top + 1] = n_nodes
        stack[top + 2] = n_nodes + 1
        top += 2
        n_nodes += 2
    return lo[:n_nodes], hi[:n_nodes], left[:n_nodes], right[:n_nodes], start[:n_nodes], \
        end[:n_nodes], order


@nb.njit(cache=True)
def _segment_dist2(px, py, pz, ax, ay, az, bx, by, bz):
    ex, ey, ez = bx - ax, by - ay, bz - az
    den = ex * ex + ey * ey + ez * ez
    s = 0.0
    if den > 0.0:
        s = ((px - ax) * ex + (py - ay) * ey + (pz - az) * ez) / den
        s = min(1.0, max(0.0, s))
    dx, dy, dz = px - ax - s * ex, py - ay - s * ey, pz - az - s * ez
    return dx * dx + dy * dy + dz * dz


@nb.njit(cache=True)
def triangle_dist2(p, tri):
    """Squared distance from point ``p`` to the triangle ``tri`` (3, 3): to its plane where
    the foot lies inside it, else to the nearest of its edges (degenerate ones included)."""
    px, py, pz = p[0], p[1], p[2]
    a, b, c = tri[0], tri[1], tri[2]
    ux, uy, uz = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    vx, vy, vz = c[0] - a[0], c[1] - a[1], c[2] - a[2]
    nx, ny, nz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
    nn = nx * nx + ny * ny + nz * nz
    if nn > 0.0:
        inside = True
        for k in range(3):
            q = tri[k]
            r = tri[(k + 1) % 3]
            ex, ey, ez = r[0] - q[0], r[1] - q[1], r[2] - q[2]
            wx, wy, wz = px - q[0], py - q[1], pz - q[2]
            cx, cy, cz = ey * wz - ez * wy, ez * wx - ex * wz, ex * wy - ey * wx
            if cx * nx + cy * ny + cz * nz < 0.0:
                inside = False
        if inside:
            h = (px - a[0]) * nx + (py - a[1]) * ny + (pz - a[2]) * nz
            return h * h / nn
    d = _segment_dist2(px, py, pz, a[0], a[1], a[2], b[0], b[1], b[2])
    d = min(d, _segment_dist2(px, py, pz, b[0], b[1], b[2], c[0], c[1], c[2]))
    return min(d, _segment_dist2(px, py, pz, c[0], c[1], c[2], a[0], a[1], a[2]))


@nb.njit(cache=True)
def _box_dist2(p, lo, hi):
    s = 0.0
    for d in range(3):
        if p[d] < lo[d]:
            s += (lo[d] - p[d]) ** 2
        elif p[d] > hi[d]:
            s += (p[d] - hi[d]) ** 2
    return s


def distance_to_triangles(points: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Distance from each of ``points`` (k, 3) to the nearest of ``tris`` (m, 3, 3)."""
    out, tag = np.empty(len(points)), np.empty(len(points), dtype=np.int64)
    tree = build_hierarchy(np.ascontiguousarray(tris, dtype=np.float64), LEAF)
    nearest_tagged(np.ascontiguousarray(points, dtype=np.float64), tris,
                   np.zeros(len(tris), dtype=np.int64), *tree, out, tag)
    return out


def wall_distance(lmesh, comm, wall_patches) -> np.ndarray:
    """Distance from every local cell centre (owned and ghost) to the nearest face, on any
    rank, of the patches named ``wall_patches``: float64 over ``lmesh.n_cells``, inf where
    the whole mesh has no such face.  Collective over ``comm`` (an mpi4py communicator, or
    None for a serial run); call it at set-up, while the mesh points are held."""
    tris = gather_triangles(wall_triangles(lmesh, wall_patches), comm)
    return distance_to_triangles(lmesh.geometry.cell_centres, tris)


@nb.njit(cache=True)
def nearest_tagged(points, tris, tags, lo, hi, left, right, start, end, order, dist, tag):
    """``dist[i]``: the distance from ``points[i]`` to the nearest triangle (inf if none),
    depth-first, the nearer child first, boxes farther than the best skipped; ``tag[i]``:
    the ``tags`` entry of that triangle, the smallest tag among equally near ones (boxes
    exactly as near are searched), so the answer does not depend on the order the
    triangles came in; -1 if none."""
    stack = np.empty(2 * len(lo) + 2, dtype=np.int64)
    for i in range(points.shape[0]):
        p = points[i]
        best = np.inf
        bt = -1
        top = 0
        stack[0] = 0
        if len(lo) == 0 or end[0] == 0:
            top = -1
        while top >= 0:
            node = stack[top]
            top -= 1
            if _box_dist2(p, lo[node], hi[node]) > best:
                continue
            if left[node] < 0:
                for k in range(start[node], end[node]):
                    t = order[k]
                    d = triangle_dist2(p, tris[t])
                    if d < best or (d == best and tags[t] < bt):
                        best, bt = d, tags[t]
                continue
            a, b = left[node], right[node]
            if _box_dist2(p, lo[a], hi[a]) < _box_dist2(p, lo[b], hi[b]):
                a, b = b, a
            stack[top + 1] = a
            stack[top + 2] = b
            top += 2
        dist[i] = np.sqrt(best)
        tag[i] = bt


def nearest_wall_face(lmesh, comm, wall_patches) -> tuple[np.ndarray, np.ndarray]:
    """Per local cell, the distance to the nearest wall face on any rank (as
    :func:`wall_distance`) and that face's number in the global mesh (-1 if the mesh has no
    wall), the same on any rank count.  Collective over ``comm``; call it at set-up."""
    faces = wall_faces(lmesh, wall_patches)
    gid = lmesh.global_faces[faces].astype(np.float64)
    per_face = np.diff(lmesh.face_ptr)[faces] if len(faces) else np.zeros(0, dtype=np.int64)
    tris = gather_triangles(wall_triangles(lmesh, wall_patches), comm)
    tags = gather_values(np.repeat(gid, per_face), comm).astype(np.int64)
    tree = build_hierarchy(np.ascontiguousarray(tris, dtype=np.float64), LEAF)
    pts = np.ascontiguousarray(lmesh.geometry.cell_centres, dtype=np.float64)
    dist, tag = np.empty(len(pts)), np.empty(len(pts), dtype=np.int64)
    nearest_tagged(pts, tris, tags, *tree, dist, tag)
    return dist, tag
