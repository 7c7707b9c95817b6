"""Sampling fields at arbitrary points (profiles, plots) and gathering them onto rank 0.

Sampling is post-processing, done once on rank 0 after a gather, on scipy's Delaunay
triangulation.  Boundary face centres join the cell centres as interpolation nodes, so
profiles reach the walls with the boundary values instead of extrapolating to them.
"""

from __future__ import annotations

import numpy as np


class Sampler2D:
    """Linear interpolation on the Delaunay triangulation of the cell centres and the
    boundary nodes (``boundary_xy``: the faces of non-``empty`` patches, on the walls),
    triangulated once and sampled as often as wanted: triangulating a 192 x 192 cavity's
    nodes takes about half a second, and its report samples them four times."""

    def __init__(self, centres_xy, boundary_xy=None):
        from scipy.spatial import Delaunay

        xy = np.asarray(centres_xy, dtype=np.float64)[:, :2]
        self.walls = boundary_xy is not None and len(boundary_xy) > 0
        if self.walls:
            xy = np.concatenate([xy, np.asarray(boundary_xy, dtype=np.float64)[:, :2]])
        # coincident nodes: the first wins
        self.xy, self.keep = np.unique(xy, axis=0, return_index=True)
        self.tri = Delaunay(self.xy)

    def __call__(self, points_xy, values, boundary_values=None):
        """``values`` (N,) or (N, k) at the cell centres, ``boundary_values`` at the boundary
        nodes, at ``points_xy`` (M, 2); points outside the nodes' convex hull take the
        nearest node's value.  Linear in the triangle by barycentric weights, as scipy's
        ``LinearNDInterpolator`` (not imported: it costs a run a third of a second)."""
        v = np.asarray(values, dtype=np.float64)
        if self.walls:
            v = np.concatenate([v, np.asarray(boundary_values, dtype=np.float64)])
        v = v[self.keep]
        pts = np.asarray(points_xy, dtype=np.float64)[:, :2]
        simplex = self.tri.find_simplex(pts)
        inside = simplex >= 0
        out = np.empty((len(pts),) + v.shape[1:])
        t = self.tri.transform[simplex[inside]]  # (m, 3, 2): T^-1 and the vertex r_2
        b = np.einsum("mij,mj->mi", t[:, :2], pts[inside] - t[:, 2])
        weights = np.column_stack([b, 1.0 - b.sum(axis=1)])
        nodes = v[self.tri.simplices[simplex[inside]]]  # (m, 3) or (m, 3, k)
        out[inside] = np.einsum("mi,mi...->m...", weights, nodes)
        if not inside.all():  # scipy.spatial is loaded already (the triangulation)
            from scipy.spatial import cKDTree

            out[~inside] = v[cKDTree(self.xy).query(pts[~inside])[1]]
        return out


def sample_2d(points_xy, centres_xy, values, boundary_xy=None, boundary_values=None):
    """Values at ``points_xy`` (M, 2), linear on the Delaunay triangulation of the nodes
    (:class:`Sampler2D`, for one set of points)."""
    return Sampler2D(centres_xy, boundary_xy)(points_xy, values, boundary_values)


def line(start, end, n):
    """``n`` equally spaced points from ``start`` to ``end`` (both included), shape (n, d)."""
    t = np.linspace(0.0, 1.0, n)[:, None]
    return (1.0 - t) * np.asarray(start, float) + t * np.asarray(end, float)


def gather_rows(red, local_rows, root=0):
    """Concatenate every rank's rows (axis 0) on ``root``; None elsewhere.  ``red``: the
    run's :class:`~haloflow.parallel.reduce.Reducer` (or anything with its ``gather`` and
    ``rank``)."""
    parts = red.gather(np.asarray(local_rows), root=root)
    return np.concatenate(parts) if red.rank == root else None


def gather_cells(lmesh, red, *arrays, root=0):
    """Owned-cell arrays from all ranks, ordered by global cell id, on ``root``.

    Returns a list with one entry per array: the global array on ``root``, None elsewhere
    (so ``u, p = gather_cells(lm, red, u, p)`` works on every rank).
    """
    n = lmesh.n_owned
    ids = gather_rows(red, np.asarray(lmesh.global_cells[:n]), root)
    out = []
    for a in arrays:
        rows = gather_rows(red, np.asarray(a)[:n], root)
        if rows is not None:
            full = np.empty((lmesh.n_cells_global,) + rows.shape[1:], dtype=rows.dtype)
            full[ids] = rows
            rows = full
        out.append(rows)
    return out


def patch_faces(lmesh, names):
    """Local indices of the faces of patches ``names`` whose owner is an owned cell.

    Gathering these from all ranks visits every boundary face of those patches once.
    """
    names = set(names)
    faces = [np.arange(p.start, p.start + p.size) for p in lmesh.patches if p.name in names]
    faces = np.concatenate(faces) if faces else np.zeros(0, np.int64)
    return faces[np.asarray(lmesh.owner)[faces] < lmesh.n_owned]
