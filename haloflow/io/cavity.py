"""Lid-driven cavity post-processing: centreline profiles and the comparison with Ghia (1982).

Profiles are sampled on rank 0 from the gathered cell values plus the wall values, so they
are exact at the walls and independent of the decomposition.
"""

from __future__ import annotations

import os

import numpy as np

from . import plots, refdata
from .probes import gather_cells, gather_rows, patch_faces, sample_2d


def gather_velocity(lmesh, bc, U, comm):
    """(centres, U) of all cells and (centres, U) of all non-empty boundary faces on rank 0."""
    from ..physics.patches import EMPTY

    n = lmesh.n_owned
    cc, uc = gather_cells(lmesh, comm, lmesh.geometry.cell_centres[:n], U[:, :n].T)
    walls = [p.name for p in lmesh.patches
             if p.size == 0 or bc.u_kind[p.start - lmesh.n_internal] != EMPTY]
    f = patch_faces(lmesh, walls)
    b = f - lmesh.n_internal
    ub = np.where((bc.u_kind[b] == 0)[:, None], bc.u_value[b], U[:, lmesh.owner[f]].T)
    bc_xy = gather_rows(comm, lmesh.geometry.face_centres[f])
    bu = gather_rows(comm, ub)
    return cc, uc, bc_xy, bu


def postprocess(outdir, case, gathered, plots_on=True) -> dict:
    """Rank 0: write centreline CSVs and plots from ``gather_velocity``'s output; return the
    Reynolds number and the deviations from Ghia et al. where they have data."""
    cc, uc, bxy, bu = gathered
    (x0, y0, _), (lx, ly, _) = case.mesh.origin, case.mesh.lengths
    lid = case.postprocess.lid_speed
    re = lid * lx / case.physics.nu
    ny, nx = case.mesh.cells[1], case.mesh.cells[0]
    ys = np.linspace(0.0, 1.0, 2 * ny + 1)
    xs = np.linspace(0.0, 1.0, 2 * nx + 1)

    def u_at(y):
        return sample_2d(np.column_stack([np.full(len(y), x0 + 0.5 * lx), y0 + y * ly]),
                         cc, uc[:, 0], bxy, bu[:, 0]) / lid

    def v_at(x):
        return sample_2d(np.column_stack([x0 + x * lx, np.full(len(x), y0 + 0.5 * ly)]),
                         cc, uc[:, 1], bxy, bu[:, 1]) / lid

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
        plots.centerlines_png(os.path.join(outdir, "plots", "centerlines.png"), ys, u, xs, v,
                              ref=ref, title=f"Lid-driven cavity, Re = {re:g}")
    return out
