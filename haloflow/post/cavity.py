"""Lid-driven cavity post-processing: centreline profiles and the comparison with Ghia (1982).

Profiles are sampled on rank 0 from the gathered cell values plus the wall values, so they
are exact at the walls and independent of the decomposition.
"""

from __future__ import annotations

import os

import numpy as np

from ..io import refdata
from ..io.probes import Sampler2D
from .base import PostProcessor


class Cavity(PostProcessor):
    """``centerline_u.csv``, ``centerline_v.csv``, ``plots/centerlines.png`` and the
    deviations from Ghia et al. where they have data."""

    name = "cavity"
    gathers = True

    def report(self, outdir, fields) -> dict | None:
        if fields is None:
            return None
        return postprocess(outdir, self.case, fields, self.case.output.plots)

    def log_line(self, entry: dict) -> str | None:
        if "max_dev" not in entry:
            return None
        return (f"Ghia et al. (1982), Re = {entry['re']:g}: max |du| {entry['max_du']:.4f}, "
                f"max |dv| {entry['max_dv']:.4f}")


def postprocess(outdir, case, fields, plots_on=True) -> dict:
    """Rank 0: write centreline CSVs and plots from the gathered :class:`Fields`; return the
    Reynolds number and the deviations from Ghia et al. where they have data."""
    cc, uc, bxy, bu = fields
    (x0, y0, _), (lx, ly, _) = case.mesh.origin, case.mesh.lengths
    lid = case.postprocess.lid_speed
    re = lid * lx / case.physics.nu
    ny, nx = case.mesh.cells[1], case.mesh.cells[0]
    ys = np.linspace(0.0, 1.0, 2 * ny + 1)
    xs = np.linspace(0.0, 1.0, 2 * nx + 1)

    probe = Sampler2D(cc, bxy)  # one triangulation for the four profiles

    def u_at(y):
        return probe(np.column_stack([np.full(len(y), x0 + 0.5 * lx), y0 + y * ly]),
                     uc[:, 0], bu[:, 0]) / lid

    def v_at(x):
        return probe(np.column_stack([x0 + x * lx, np.full(len(x), y0 + 0.5 * ly)]),
                     uc[:, 1], bu[:, 1]) / lid

    u, v = u_at(ys), v_at(xs)
    np.savetxt(os.path.join(outdir, "centerline_u.csv"), np.column_stack([ys, u]),
               delimiter=",", header="y,u", comments="", fmt="%.8g")
    np.savetxt(os.path.join(outdir, "centerline_v.csv"), np.column_stack([xs, v]),
               delimiter=",", header="x,v", comments="", fmt="%.8g")
    ref = refdata.ghia(re)
    out = {"re": re}
    if ref is not None:
        tu, tv = ref
        out.update(refdata.ghia_deviation(tu[:, 0], u_at(tu[:, 0]), tv[:, 0], v_at(tv[:, 0]), re))
    if plots_on:
        os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
        centerlines_png(os.path.join(outdir, "plots", "centerlines.png"), ys, u, xs, v,
                        ref=ref, title=f"Lid-driven cavity, Re = {re:g}")
    return out


def centerlines_png(path, y, u, x, v, ref=None, title=""):
    """u(y) on the vertical and v(x) on the horizontal centreline, with reference points.

    ``ref`` is ``(table_u, table_v)`` as returned by ``refdata.ghia`` (columns y,u and x,v).
    """
    from ..io.figure import figure, save

    fig = figure(10.0, 4.5)
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
    save(fig, path)
