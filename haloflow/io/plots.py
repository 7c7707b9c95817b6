"""PNG plots of any run: the velocity field and the residual histories."""

from __future__ import annotations

import numpy as np

from .figure import figure, save
from .probes import Sampler2D


def mid_plane(centres, values, boundary=None, boundary_values=None):
    """The nodes of a 3D mesh's mid-plane normal to z (cells and boundary faces within
    half a cell of it), as ``(centres, values, boundary, boundary_values, z)``; a mesh one
    cell thick (a 2D case) as it is, ``z`` None.  Projecting every cell of a 3D mesh onto
    one x-y picture would mix the planes."""
    c = np.asarray(centres, dtype=np.float64)
    if c.shape[1] < 3 or len(c) < 2:
        return centres, values, boundary, boundary_values, None
    z = c[:, 2]
    lo, hi = z.min(), z.max()
    cells = len(c)
    extent = np.ptp(c, axis=0)
    volume = float(np.prod(np.where(extent > 0, extent, 1.0)))
    half = 0.5 * (volume / cells) ** (1.0 / 3.0)  # half a typical cell
    if hi - lo <= half:  # one layer of cells
        return centres, values, boundary, boundary_values, None
    mid = 0.5 * (lo + hi)
    layer = np.abs(z - z[np.argmin(np.abs(z - mid))]) <= 0.5 * half  # the layer nearest
    bsel = None
    if boundary is not None and len(boundary):
        b = np.asarray(boundary, dtype=np.float64)
        bsel = np.abs(b[:, 2] - mid) <= half
    return (c[layer], np.asarray(values)[layer],
            None if bsel is None else b[bsel],
            None if bsel is None else np.asarray(boundary_values)[bsel], float(mid))


def outside(sampler, n_centres: int, points_xy) -> np.ndarray:
    """Points outside the mesh, left blank: in a triangle of ``sampler``'s triangulation
    (cell centres first, then boundary faces) with boundary faces alone at its corners
    (one spanning a solid body, or a region the mesh leaves out such as the corner below a
    step), or outside the nodes' hull and farther from the nearest node than that node is
    from its own nearest neighbour (the hull cuts a box's corners by half a cell: kept)."""
    from scipy.spatial import cKDTree

    pts = np.asarray(points_xy, dtype=np.float64)[:, :2]
    scale = float(np.ptp(sampler.xy, axis=0).max()) or 1.0
    simplex = sampler.tri.find_simplex(pts, tol=1e-9 * scale)  # (on the hull: inside)
    on_wall = sampler.keep >= n_centres  # the nodes that are boundary faces
    walls_only = on_wall[sampler.tri.simplices].all(axis=1)
    out = (simplex >= 0) & walls_only[np.maximum(simplex, 0)]
    hull = simplex < 0
    if hull.any() and len(sampler.xy) > 1:
        tree = cKDTree(sampler.xy)
        d, i = tree.query(pts[hull])
        k = min(5, len(sampler.xy))  # the fourth neighbour: the longer side of a long cell
        spacing = tree.query(sampler.xy[i], k=k)[0][:, k - 1]
        out[np.flatnonzero(hull)[d > spacing]] = True
    return out


def velocity_png(path, centres_xy, U_xy, bounds, title="", n=200,
                 boundary_xy=None, boundary_U=None):
    """Velocity magnitude (colour) and streamlines, resampled on a grid of ``n`` points
    along the longer side: on a 3D mesh in its mid-plane (``mid_plane``), points outside
    the mesh left blank, the figure shaped like the domain."""
    centres_xy, U_xy, boundary_xy, boundary_U, z = mid_plane(centres_xy, U_xy, boundary_xy,
                                                             boundary_U)
    xmin, xmax, ymin, ymax = bounds
    lx, ly = xmax - xmin, ymax - ymin
    nx, ny = (n, max(int(n * ly / lx), 20)) if lx >= ly else (max(int(n * lx / ly), 20), n)
    xs, ys = np.linspace(xmin, xmax, nx), np.linspace(ymin, ymax, ny)
    X, Y = np.meshgrid(xs, ys)
    grid = np.column_stack([X.ravel(), Y.ravel()])
    bu = None if boundary_U is None else np.asarray(boundary_U)[:, :2]
    sampler = Sampler2D(centres_xy, boundary_xy)
    U = sampler(grid, np.asarray(U_xy)[:, :2], bu)
    U[outside(sampler, len(centres_xy), grid)] = np.nan
    u, v = U[:, 0].reshape(ny, nx), U[:, 1].reshape(ny, nx)
    long = lx > 2.5 * ly  # a long domain: the colour bar below it
    fig = figure(8.0, max(2.2, 8.0 * ly / lx + 1.6)) if long else \
        figure(6.0 * min(max(lx / ly, 0.6), 1.6) + 1.0, 5.0)
    ax = fig.add_subplot()
    im = ax.imshow(np.hypot(u, v), origin="lower", extent=bounds, cmap="viridis",
                   aspect="equal", interpolation="bilinear")
    ax.streamplot(xs, ys, np.nan_to_num(u), np.nan_to_num(v), color="white", linewidth=0.6,
                  density=1.4, arrowsize=0.7)
    fig.colorbar(im, ax=ax, label="|U|", orientation="horizontal" if long else "vertical",
                 fraction=0.08 if long else 0.15, pad=0.25 if long else 0.05)
    where = "" if z is None else f" (plane z = {z:.4g})"
    ax.set(xlim=(xmin, xmax), ylim=(ymin, ymax), xlabel="x", ylabel="y", title=title + where)
    save(fig, path)


def residuals_png(path, steps, columns, title=""):
    """Residual histories on a log scale, one line per column (non-positive values hidden)."""
    fig = figure(7.0, 4.5)
    ax = fig.add_subplot()
    for name, r in columns.items():
        r = np.asarray(r, dtype=np.float64)
        ax.semilogy(steps, np.where(r > 0.0, r, np.nan), label=name)
    ax.set(xlabel="step", ylabel="residual", title=title)
    ax.grid(alpha=0.3, which="both")
    if columns:
        ax.legend()
    save(fig, path)
