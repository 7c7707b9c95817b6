"""Flat-plate skin friction against the NASA Turbulence Modeling Resource's SA results.

On every face of the wall patch ``plate`` the wall shear is ``nu |u_t| / dn``: the tangential
velocity of the wall cell over its centre's normal distance to the face (the eddy viscosity
is zero at the wall, and a wall-resolved mesh puts that centre at y+ below 1).  ``cf`` is it
over ``U^2 / 2`` with ``U`` the inlet speed, signed by the flow direction along x.  Every rank
measures its own wall faces; rank 0 gathers them, writes ``cf.csv`` and ``plots/cf.png`` and
compares with TMR's published cf of the Spalart-Allmaras model (CFL3D and FUN3D on the
545 x 385 grid, ``data/tmr_flatplate_sa_cf.csv``) over the turbulent part of the plate.

The turbulent part is ``x`` from 0.1 to 1.95 (``Re_x`` 5e5 to 9.75e6).  With TMR's inflow
nu-tilde (3 nu) the model is turbulent from the leading edge on, but the first tenth of the
plate is the leading-edge singularity, where cf falls by 30 % from x = 0.01 to 0.1 and
depends most on the mesh (the NASA codes differ by 60 % at their first station); the last
2.5 % is the outlet's neighbourhood, where CFL3D and FUN3D part by up to 0.8 % (0.17 % over
the compared range).
"""

from __future__ import annotations

import os

import numpy as np

from ..case.postprocess import FLAT_PLATE_PATCH as PLATE
from .base import PostProcessor

TURBULENT = (0.1, 1.95)  # the x-range compared (see the module docstring)
X_REPORT = 0.97  # TMR's station for cf
REFERENCE = "tmr_flatplate_sa_cf.csv"


def reference() -> np.ndarray:
    """``(x, cf_cfl3d, cf_fun3d)`` rows of TMR's SA skin friction (545 x 385 grid)."""
    from ..io.refdata import DATA

    lines = [ln for ln in (DATA / REFERENCE).read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    return np.loadtxt(lines[1:], delimiter=",", ndmin=2)  # after the column names


class FlatPlate(PostProcessor):
    """``cf.csv``, ``plots/cf.png`` and cf against TMR's SA results."""

    name = "flat_plate"

    def report(self, outdir, fields) -> dict | None:
        x, cf = wall_cf(self.lmesh, self.solver.U, self.case)
        parts = self.red.gather((x, cf))
        if parts is None:
            return None
        x = np.concatenate([p[0] for p in parts])
        cf = np.concatenate([p[1] for p in parts])
        order = np.argsort(x)
        return postprocess(outdir, self.case, x[order], cf[order], self.case.output.plots)

    def log_line(self, entry: dict) -> str | None:
        return (f"flat plate: cf(x = {X_REPORT}) = {entry['cf_097']:.6f} (TMR SA, CFL3D "
                f"545x385: {entry['cf_097_reference']:.6f}); largest difference over x = "
                f"{TURBULENT[0]:g}..{TURBULENT[1]:g}: {100 * entry['max_rel_error']:.2f} %")


def wall_cf(lmesh, U, case) -> tuple[np.ndarray, np.ndarray]:
    """This rank's plate faces: x of the face centres and cf (signed by u along x)."""
    p = lmesh.patch(PLATE)
    g = lmesh.geometry
    f = np.arange(p.start, p.start + p.size)
    c = lmesh.owner[f]
    sf = g.face_areas[f]
    n = sf / np.linalg.norm(sf, axis=1)[:, None]
    dn = np.abs(np.einsum("ij,ij->i", g.cell_centres[c] - g.face_centres[f], n))
    u = U[:, c].T - np.asarray(case.boundary[PLATE].U, dtype=float)
    ut = u - np.einsum("ij,ij->i", u, n)[:, None] * n
    tau = case.physics.nu * np.linalg.norm(ut, axis=1) / dn * np.sign(ut[:, 0])
    u_inf = float(np.linalg.norm(case.boundary["inlet"].U))
    return g.face_centres[f, 0].copy(), tau / (0.5 * u_inf * u_inf)


def compare(x, cf, ref) -> dict:
    """cf at ``X_REPORT`` and the largest relative difference from the reference's CFL3D
    column at our stations in the turbulent range (the reference interpolated linearly:
    it has 447 stations, 4-10 per cell of ours)."""
    at = float(np.interp(X_REPORT, x, cf))
    ref_at = float(np.interp(X_REPORT, ref[:, 0], ref[:, 1]))
    keep = (x >= TURBULENT[0]) & (x <= TURBULENT[1])
    rc = np.interp(x[keep], ref[:, 0], ref[:, 1])
    rel = cf[keep] / rc - 1.0
    k = int(np.argmax(np.abs(rel))) if len(rel) else 0
    return {"cf_097": at, "cf_097_reference": ref_at, "cf_097_rel_error": at / ref_at - 1.0,
            "max_rel_error": float(np.abs(rel).max()) if len(rel) else None,
            "max_rel_error_x": float(x[keep][k]) if len(rel) else None,
            "turbulent_x": list(TURBULENT), "n_compared": int(keep.sum()),
            "reference": "NASA TMR, SA, CFL3D 545x385 grid (data/" + REFERENCE + ")"}


def postprocess(outdir, case, x, cf, plots_on: bool = True) -> dict:
    """Rank 0: ``cf.csv``, the comparison and ``plots/cf.png``."""
    ref = reference()
    u_inf = float(np.linalg.norm(case.boundary["inlet"].U))
    out = {"re_per_length": u_inf / case.physics.nu, **compare(x, cf, ref)}
    np.savetxt(os.path.join(outdir, "cf.csv"),
               np.column_stack([x, cf, np.interp(x, ref[:, 0], ref[:, 1]),
                                np.interp(x, ref[:, 0], ref[:, 2])]),
               delimiter=",", header="x,cf,cf_tmr_cfl3d,cf_tmr_fun3d", comments="",
               fmt="%.10g")
    if plots_on:
        os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
        cf_png(os.path.join(outdir, "plots", "cf.png"), x, cf, ref, out)
    return out


def cf_png(path, x, cf, ref, out):
    """cf along the plate against TMR's CFL3D and FUN3D, the compared range shaded."""
    from ..io.figure import figure, save

    fig = figure(7.0, 4.0)
    ax = fig.add_subplot()
    ax.axvspan(*TURBULENT, color="0.93", label="compared (turbulent part)")
    ax.plot(ref[:, 0], ref[:, 1], "-", color="0.2", lw=1.2, label="TMR SA, CFL3D 545x385")
    ax.plot(ref[:, 0], ref[:, 2], "--", color="0.5", lw=1.0, label="TMR SA, FUN3D 545x385")
    ax.plot(x, cf, "o", ms=2.5, color="C1", label="haloflow")
    ax.set(xlabel="x", ylabel="cf", xlim=(0.0, 2.0), ylim=(0.0, 0.006),
           title=f"Flat plate, SA, Re = {out['re_per_length']:.3g} per unit length: "
                 f"max |cf / ref - 1| = {100 * out['max_rel_error']:.2f} %")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)
