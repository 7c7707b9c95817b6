"""PNG plots of a run: velocity field, centreline profiles, residual histories.

Figures are built on matplotlib's object API with the Agg canvas, never pyplot, so plotting
needs no display and leaves matplotlib's global backend alone.
"""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .probes import sample_2d


def _figure(width, height):
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


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
    fig = _figure(6.0, 5.0)
    ax = fig.add_subplot()
    im = ax.imshow(np.hypot(u, v), origin="lower", extent=bounds, cmap="viridis",
                   aspect="equal", interpolation="bilinear")
    ax.streamplot(xs, ys, u, v, color="white", linewidth=0.6, density=1.4, arrowsize=0.7)
    fig.colorbar(im, ax=ax, label="|U|")
    ax.set(xlim=(xmin, xmax), ylim=(ymin, ymax), xlabel="x", ylabel="y", title=title)
    fig.savefig(path, dpi=120)


def centerlines_png(path, y, u, x, v, ref=None, title=""):
    """u(y) on the vertical and v(x) on the horizontal centreline, with reference points.

    ``ref`` is ``(table_u, table_v)`` as returned by ``refdata.ghia`` (columns y,u and x,v).
    """
    fig = _figure(10.0, 4.5)
    axu, axv = fig.subplots(1, 2)
    axu.plot(u, y, "-", label="haloflow")
    axv.plot(x, v, "-", label="haloflow")
    if ref is not None:
        tu, tv = ref
        axu.plot(tu[:, 1], tu[:, 0], "o", mfc="none", label="Ghia et al. (1982)")
        axv.plot(tv[:, 0], tv[:, 1], "o", mfc="none", label="Ghia et al. (1982)")
    axu.set(xlabel="u", ylabel="y", title="u on x = 0.5")
    axv.set(xlabel="x", ylabel="v", title="v on y = 0.5")
    for ax in (axu, axv):
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=120)


def residuals_png(path, steps, columns, title=""):
    """Residual histories on a log scale, one line per column (non-positive values hidden)."""
    fig = _figure(7.0, 4.5)
    ax = fig.add_subplot()
    for name, r in columns.items():
        r = np.asarray(r, dtype=np.float64)
        ax.semilogy(steps, np.where(r > 0.0, r, np.nan), label=name)
    ax.set(xlabel="step", ylabel="residual", title=title)
    ax.grid(alpha=0.3, which="both")
    if columns:
        ax.legend()
    fig.savefig(path, dpi=120)
