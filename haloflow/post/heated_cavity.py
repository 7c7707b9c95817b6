"""Differentially heated cavity post-processing: Nusselt numbers and mid-line velocities
compared with de Vahl Davis (1983).

Rank 0 arranges the gathered cell values of the box as a grid.  The wall Nusselt number is
the wall-normal temperature gradient of the quadratic through the wall value and the first
two cell centres (second order, as the benchmark's own), its mean the midpoint sum over the
wall; velocity extrema on the mid-lines are located by a parabola through the largest sample
and its neighbours.  Velocities are in units of ``alpha / L``.
"""

from __future__ import annotations

import os

import numpy as np

from ..io import refdata
from ..io.probes import gather_cells
from .base import PostProcessor

KEYS = ("nu_hot", "nu_cold", "nu_max", "y_nu_max", "u_max", "y_u_max", "v_max", "x_v_max")


class HeatedCavity(PostProcessor):
    """``summary.json`` entry ``heated_cavity`` (the benchmark's figures and their deviations),
    ``wall_nusselt.csv``, ``midline_u.csv``, ``midline_v.csv`` and
    ``plots/heated_cavity.png`` (isotherms and streamlines)."""

    name = "heated_cavity"

    def report(self, outdir, fields) -> dict | None:
        s, lm = self.solver, self.lmesh
        n = lm.n_owned
        cc, U, T = gather_cells(lm, self.red, lm.geometry.cell_centres[:n], s.U[:, :n].T,
                                s.energy.T[:n])
        if cc is None:
            return None
        return postprocess(outdir, self.case, cc, U, T, self.case.output.plots)

    def log_line(self, entry: dict) -> str | None:
        ref = entry.get("reference")
        tail = "" if ref is None else (
            f" (de Vahl Davis: Nu {ref['nu_hot']:.3f}, u_max {ref['u_max']:.3f}, "
            f"v_max {ref['v_max']:.3f})")
        return (f"heated cavity, Ra = {entry['ra']:g}: Nu hot {entry['nu_hot']:.4f}, cold "
                f"{entry['nu_cold']:.4f}, u_max {entry['u_max']:.3f}, v_max "
                f"{entry['v_max']:.3f}{tail}")


def _grid(cc, *values):
    """Cell values of a one-cell-thick box as ``[ny, nx]`` arrays, with the centres' x and y."""
    x = np.unique(np.round(cc[:, 0], 12))
    y = np.unique(np.round(cc[:, 1], 12))
    order = np.lexsort((cc[:, 0], cc[:, 1]))
    return x, y, [v[order].reshape(len(y), len(x)) for v in values]


def wall_gradient(x0, t0, x1, t1, x2, t2):
    """d/dx at ``x0`` of the quadratic through the three points (rows of arrays)."""
    return (t0 * (2 * x0 - x1 - x2) / ((x0 - x1) * (x0 - x2))
            + t1 * (x0 - x2) / ((x1 - x0) * (x1 - x2))
            + t2 * (x0 - x1) / ((x2 - x0) * (x2 - x1)))


def peak(s, f):
    """Largest value of samples ``f`` at ``s`` and where, refined by a parabola."""
    k = int(np.clip(np.argmax(f), 1, len(f) - 2))
    a, b, c = np.polyfit(s[k - 1:k + 2], f[k - 1:k + 2], 2)
    if a >= 0.0:
        return float(f[k]), float(s[k])
    at = -b / (2 * a)
    return float(c - b * b / (4 * a)), float(at)


def _midline(coords, values, at):
    """Linear interpolation of the grid columns (axis 1) at ``at``."""
    i = int(np.clip(np.searchsorted(coords, at) - 1, 0, len(coords) - 2))
    w = (at - coords[i]) / (coords[i + 1] - coords[i])
    return (1 - w) * values[:, i] + w * values[:, i + 1]


def figures(case, cc, U, T) -> tuple[dict, dict]:
    """The benchmark's figures and the profiles they come from (dimensionless: lengths over
    L, velocities over alpha / L)."""
    ph = case.physics
    (x0, y0, _), (lx, ly, _) = case.mesh.origin, case.mesh.lengths
    th, tc = case.boundary["left"].T, case.boundary["right"].T
    scale = lx / (ph.nu / ph.Pr)
    x, y, (tg, ug, vg) = _grid(cc, T, U[:, 0], U[:, 1])
    xs, ys = (x - x0) / lx, (y - y0) / ly
    dt = th - tc
    nu_hot = -wall_gradient(0.0, th, xs[0], tg[:, 0], xs[1], tg[:, 1]) / dt
    nu_cold = -wall_gradient(1.0, tc, xs[-1], tg[:, -1], xs[-2], tg[:, -2]) / dt
    edges = np.concatenate([[0.0], 0.5 * (ys[1:] + ys[:-1]), [1.0]])
    dy = np.diff(edges)
    yw = np.concatenate([[0.0], ys, [1.0]])
    u_mid = np.concatenate([[0.0], _midline(xs, ug, 0.5), [0.0]]) * scale
    xw = np.concatenate([[0.0], xs, [1.0]])
    v_mid = np.concatenate([[0.0], _midline(ys, vg.T, 0.5), [0.0]]) * scale
    nu_max, y_nu_max = peak(ys, nu_hot)
    u_max, y_u_max = peak(yw, u_mid)
    v_max, x_v_max = peak(xw, v_mid)
    out = {"ra": _rayleigh(ph, lx, dt),
           "nu_hot": float(np.sum(nu_hot * dy)), "nu_cold": float(np.sum(nu_cold * dy)),
           "nu_max": nu_max, "y_nu_max": y_nu_max, "u_max": u_max, "y_u_max": y_u_max,
           "v_max": v_max, "x_v_max": x_v_max}
    prof = {"y": ys, "nu_hot": nu_hot, "nu_cold": nu_cold, "yw": yw, "u": u_mid, "xw": xw,
            "v": v_mid, "x": xs, "t": tg, "u_grid": ug * scale, "dy": dy}
    return out, prof


def _rayleigh(ph, length, dt) -> float:
    """``g beta dT L^3 / (nu alpha)`` of the case."""
    g = float(np.linalg.norm(ph.g))
    return g * ph.beta * abs(dt) * length**3 * ph.Pr / ph.nu**2


def postprocess(outdir, case, cc, U, T, plots_on=True) -> dict:
    """Rank 0: CSVs, the plot, and the summary entry with the deviations from the benchmark
    where it has the Rayleigh number."""
    out, prof = figures(case, cc, U, T)
    save = os.path.join
    np.savetxt(save(outdir, "wall_nusselt.csv"),
               np.column_stack([prof["y"], prof["nu_hot"], prof["nu_cold"]]), delimiter=",",
               header="y,nu_hot,nu_cold", comments="", fmt="%.10g")
    np.savetxt(save(outdir, "midline_u.csv"), np.column_stack([prof["yw"], prof["u"]]),
               delimiter=",", header="y,u", comments="", fmt="%.10g")
    np.savetxt(save(outdir, "midline_v.csv"), np.column_stack([prof["xw"], prof["v"]]),
               delimiter=",", header="x,v", comments="", fmt="%.10g")
    ref = refdata.de_vahl_davis(out["ra"])
    if ref is not None:
        out["reference"] = ref
        out["deviation"] = {k: (out[k] - ref[k]) / ref[k] for k in ("nu_hot", "nu_max",
                                                                  "u_max", "v_max")}
    if plots_on:
        os.makedirs(save(outdir, "plots"), exist_ok=True)
        cavity_png(save(outdir, "plots", "heated_cavity.png"), prof, out["ra"])
    return out


def cavity_png(path, prof, ra) -> None:
    """Isotherms and streamlines (contours of the stream function ``int u dy``)."""
    from ..io.figure import figure, save

    x, y, t = prof["x"], prof["y"], prof["t"]
    psi = np.cumsum(prof["u_grid"] * prof["dy"][:, None], axis=0)
    fig = figure(10.0, 4.8)
    at, ap = fig.subplots(1, 2)
    cs = at.contour(x, y, t, levels=np.linspace(0.05, 0.95, 19) * (t.max() - t.min())
                    + t.min(), cmap="coolwarm")
    at.clabel(cs, cs.levels[::3], fontsize=7)
    ap.contour(x, y, psi, levels=15, colors="k", linewidths=0.8, linestyles="solid")
    at.set(title="isotherms", xlabel="x / L", ylabel="y / L", aspect="equal")
    ap.set(title="streamlines", xlabel="x / L", ylabel="y / L", aspect="equal")
    fig.suptitle(f"Differentially heated cavity, Ra = {ra:.3g}")
    save(fig, path)
