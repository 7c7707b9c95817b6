"""PNG plots of any run: the velocity field and the residual histories."""

from __future__ import annotations

import numpy as np

from .figure import figure, save
from .probes import sample_2d


def velocity_png(path, centres_xy, U_xy, bounds, title="", n=200,
                 boundary_xy=None, boundary_U=None):
    """Velocity magnitude (colour) and streamlines, resampled on an ``n`` x ``n`` grid."""
    xmin, xmax, ymin, ymax = bounds
    xs, ys = np.linspace(xmin, xmax, n), np.linspace(ymin, ymax, n)
    X, Y = np.meshgrid(xs, ys)
    grid = np.column_stack([X.ravel(), Y.ravel()])
    bu = None if boundary_U is None else np.asarray(boundary_U)[:, :2]
    U = sample_2d(grid, centres_xy, np.asarray(U_xy)[:, :2], boundary_xy, bu)
    u, v = U[:, 0].reshape(n, n), U[:, 1].reshape(n, n)
    fig = figure(6.0, 5.0)
    ax = fig.add_subplot()
    im = ax.imshow(np.hypot(u, v), origin="lower", extent=bounds, cmap="viridis",
                   aspect="equal", interpolation="bilinear")
    ax.streamplot(xs, ys, u, v, color="white", linewidth=0.6, density=1.4, arrowsize=0.7)
    fig.colorbar(im, ax=ax, label="|U|")
    ax.set(xlim=(xmin, xmax), ylim=(ymin, ymax), xlabel="x", ylabel="y", title=title)
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
