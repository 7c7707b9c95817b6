"""Plane channel post-processing: the velocity profile near the outlet against Poiseuille flow.

The profile is a column of cells of the box (structured numbering, so a mesh whose points
were moved keeps it), compared at the cells' own centres with

    u(y) = 1.5 U_mean (1 - (2 (y - y0) / H - 1)^2),

so no interpolation enters the error.  ``U_mean`` is the inlet's ``U``: the mean velocity
for both inlet profiles.  A symmetry (or slip) patch on the top or bottom makes the box a
half channel, mirrored about that plane.
"""

from __future__ import annotations

import os

import numpy as np

from .base import OfFinalVelocity

SYMMETRIC = ("symmetry", "slip")


class Channel(OfFinalVelocity):
    """``channel_profile.csv``, ``plots/channel_profile.png`` and the profile's largest
    deviation from Poiseuille flow."""

    name = "channel"
    def analyse(self, outdir, cc, uc) -> dict:
        return postprocess(outdir, self.case, cc, uc, self.case.output.plots)

    def log_line(self, entry: dict) -> str | None:
        return (f"channel, Re = {entry['re']:g}: profile at x = {entry['x']:.4g} against "
                f"Poiseuille flow: max |u - u_exact| / u_max = {entry['max_rel_error']:.5f}")


def poiseuille(y, y0: float, height: float, u_mean: float) -> np.ndarray:
    """Fully developed laminar velocity between walls at ``y0`` and ``y0 + height``."""
    eta = 2.0 * (np.asarray(y, dtype=float) - y0) / height - 1.0
    return 1.5 * u_mean * (1.0 - eta * eta)


def max_relative_error(y, u, y0: float, height: float, u_mean: float) -> float:
    """max over the profile of ``|u - u_exact| / u_max``, with ``u_max = 1.5 U_mean``."""
    exact = poiseuille(y, y0, height, u_mean)
    return float(np.max(np.abs(np.asarray(u) - exact)) / (1.5 * abs(u_mean)))


def channel_walls(case) -> tuple[float, float]:
    """(y0, H) of the full channel the box stands for (mirrored at a symmetry plane)."""
    (_, y0, _), (_, ly, _) = case.mesh.origin, case.mesh.lengths
    if case.boundary["top"].type in SYMMETRIC:
        return y0, 2.0 * ly
    if case.boundary["bottom"].type in SYMMETRIC:
        return y0 - ly, 2.0 * ly
    return y0, ly


def mean_velocity(case) -> float:
    """The x velocity of the (one) inlet: the channel's mean velocity."""
    (inlet,) = [b for b in case.boundary.values() if b.type == "inlet"]
    return float(inlet.U[0])


def column(cells, x_centres, x: float) -> tuple[int, np.ndarray]:
    """Index of the cell column whose centre is nearest ``x``, and its global cell ids
    (bottom to top; the middle layer of a 3D box)."""
    nx, ny, nz = (int(c) for c in cells)
    i = int(np.argmin(np.abs(np.asarray(x_centres) - x)))
    j = np.arange(ny)
    return i, i + nx * (j + ny * (nz // 2))


def postprocess(outdir, case, cc, uc, plots_on: bool = True) -> dict:
    """Rank 0: the profile at ``postprocess.channel_x`` (fraction of the length), its
    largest deviation from Poiseuille flow, ``channel_profile.csv`` and a plot."""
    from ..mesh.blocks import graded_coords

    m = case.mesh
    xs = graded_coords(m.cells[0], m.lengths[0], m.grading[0], m.origin[0])
    x = m.origin[0] + case.postprocess.channel_x * m.lengths[0]
    i, ids = column(m.cells, 0.5 * (xs[:-1] + xs[1:]), x)
    y, u = cc[ids, 1], uc[ids, 0]
    y0, height = channel_walls(case)
    u_mean = mean_velocity(case)
    exact = poiseuille(y, y0, height, u_mean)
    err = max_relative_error(y, u, y0, height, u_mean)
    np.savetxt(os.path.join(outdir, "channel_profile.csv"), np.column_stack([y, u, exact]),
               delimiter=",", header="y,u,u_exact", comments="", fmt="%.10g")
    out = {"x": float(cc[ids[0], 0]), "column": i, "u_mean": u_mean, "height": height,
           "re": abs(u_mean) * height / case.physics.nu, "max_rel_error": err,
           "u_max": float(np.max(u)), "u_max_exact": 1.5 * u_mean}
    if plots_on:
        os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
        span = (m.origin[1], m.origin[1] + m.lengths[1])
        profile_png(os.path.join(outdir, "plots", "channel_profile.png"), y, u, y0, height,
                    u_mean, span, title=f"Channel, Re = {out['re']:g}: u at x = {out['x']:.3g} "
                                  f"(max error {100 * err:.2f} % of u_max)")
    return out


def profile_png(path, y, u, y0, height, u_mean, span, title=""):
    """The computed profile (markers) against the analytic parabola (line) over ``span``."""
    from ..io.figure import figure, save

    fig = figure(5.0, 5.0)
    ax = fig.add_subplot()
    ys = np.linspace(span[0], span[1], 201)
    ax.plot(poiseuille(ys, y0, height, u_mean), ys, "-", color="0.4",
            label="1.5 U (1 - (2y/H - 1)$^2$)")
    ax.plot(u, y, "o", mfc="none", label="haloflow (cell centres)")
    ax.set(xlabel="u", ylabel="y", title=title)
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, path)
