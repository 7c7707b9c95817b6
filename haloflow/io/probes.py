"""Sampling fields at arbitrary points (profiles, plots) and gathering them onto rank 0.

Sampling is post-processing, done once on rank 0 after a gather, so it favours plain
scipy over speed.  Boundary face centres join the cell centres as interpolation nodes, so
profiles reach the walls with the boundary values instead of extrapolating to them.
"""

from __future__ import annotations

import numpy as np


def sample_2d(points_xy, centres_xy, values, boundary_xy=None, boundary_values=None):
    """Values at ``points_xy`` (M, 2), linear on the Delaunay triangulation of the nodes.

    ``values`` is (N,) or (N, k) at the cell centres; boundary faces (pass only those of
    non-``empty`` patches, which lie on the walls) add nodes.  Points outside the nodes'
    convex hull take the nearest node's value.
    """
    from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator

    xy = np.asarray(centres_xy, dtype=np.float64)[:, :2]
    v = np.asarray(values, dtype=np.float64)
    if boundary_xy is not None and len(boundary_xy):
        xy = np.concatenate([xy, np.asarray(boundary_xy, dtype=np.float64)[:, :2]])
        v = np.concatenate([v, np.asarray(boundary_values, dtype=np.float64)])
    xy, keep = np.unique(xy, axis=0, return_index=True)  # coincident nodes: the first wins
    v = v[keep]
    pts = np.asarray(points_xy, dtype=np.float64)[:, :2]
    out = LinearNDInterpolator(xy, v)(pts)
    miss = np.isnan(out) if out.ndim == 1 else np.isnan(out).any(axis=1)
    if miss.any():
        out[miss] = NearestNDInterpolator(xy, v)(pts[miss])
    return out


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
