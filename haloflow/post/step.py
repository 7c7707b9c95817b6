"""Backward-facing step post-processing: the primary reattachment length.

The wall shear on the lower wall downstream of the step has the sign of ``u`` in the first
cell row above it (the wall is at rest), so the primary reattachment point is where that ``u``
changes sign from negative (the recirculation behind the step) to positive, found by linear
interpolation between the two cell centres that bracket it.  A corner eddy (a small positive
``u`` in the corner at the foot of the step) comes before the recirculation and is skipped:
the search starts at the first negative ``u``.  ``x_r`` is measured from the step face
(x = 0) and reported in step heights, ``x_r / S``.

The Reynolds number is Armaly et al.'s (1983): ``Re = U_mean 2 h / nu`` with ``U_mean`` the
mean inlet velocity (the inlet's ``U``) and ``2 h`` the hydraulic diameter of the inlet
channel of height ``h``.
"""

from __future__ import annotations

import os

import numpy as np

from .base import OfFinalVelocity

# x_r / S against Re = U 2h / nu for expansion ratio 1.9423: the values commonly quoted from
# figure 7 of Armaly, Durst, Pereira & Schoenung, J. Fluid Mech. 127 (1983) 473-496 (the
# paper has no table; not re-read from the figure here, so +-0.2 step heights).  See
# docs/case-reference.md.
ARMALY_1983 = ((100.0, 3.0), (400.0, 8.5))


class BackwardStep(OfFinalVelocity):
    """``step_wall_u.csv``, ``plots/step_wall_u.png`` and x_r / S against Armaly et al."""

    name = "backward_step"
    def analyse(self, outdir, cc, uc) -> dict:
        return postprocess(outdir, self.case, cc, uc, self.case.output.plots)

    def log_line(self, entry: dict) -> str | None:
        xr = entry["xr_over_S"]
        return (f"backward-facing step, Re = {entry['re']:g} (U 2h / nu): reattachment "
                + (f"x_r / S = {xr:.4f}" if xr is not None else
                   "not found (no recirculation behind the step yet: not converged?)") + (
                    f" (Armaly et al. 1983: {entry['xr_over_S_armaly']:.2f})"
                    if entry.get("xr_over_S_armaly") is not None else ""))


def armaly(re: float) -> float | None:
    """The published reattachment length at ``re`` (linear in between), None outside."""
    res, xs = zip(*ARMALY_1983, strict=True)
    if not res[0] - 1e-9 <= re <= res[-1] + 1e-9:
        return None
    return float(np.interp(re, res, xs))


def reattachment(x, u) -> float | None:
    """First x where ``u`` goes from negative to non-negative after its first negative
    value, interpolated linearly; None if ``u`` never turns negative, or never back."""
    x, u = np.asarray(x, dtype=float), np.asarray(u, dtype=float)
    neg = np.flatnonzero(u < 0.0)
    if len(neg) == 0:
        return None
    after = np.flatnonzero(u[neg[0]:] >= 0.0)
    if len(after) == 0:
        return None
    k = neg[0] + after[0]  # u[k - 1] < 0 <= u[k]
    x0, x1, u0, u1 = x[k - 1], x[k], u[k - 1], u[k]
    return float(x0 + (x1 - x0) * (-u0) / (u1 - u0))


def wall_row(case) -> np.ndarray:
    """Global ids of the first cell row above the downstream lower wall, from the step on.
    The step mesh numbers the cells like a box with the block under the inlet channel left
    out, so the bottom row (j = 0) holds only downstream cells and comes first."""
    return np.arange(int(case.mesh.cells_x[1]))


def postprocess(outdir, case, cc, uc, plots_on: bool = True) -> dict:
    """Rank 0: x_r / S from the gathered cell centres ``cc`` and velocities ``uc``, the wall
    row in ``step_wall_u.csv`` and ``plots/step_wall_u.png``."""
    m = case.mesh
    u_mean = float(case.boundary["inlet"].U[0])
    re = abs(u_mean) * 2.0 * m.inlet_height / case.physics.nu
    ids = wall_row(case)
    x, u = cc[ids, 0], uc[ids, 0]
    xr = reattachment(x, u)
    S = m.step_height
    ref = armaly(re)
    np.savetxt(os.path.join(outdir, "step_wall_u.csv"), np.column_stack([x, cc[ids, 1], u]),
               delimiter=",", header="x,y,u", comments="", fmt="%.10g")
    out = {"re": re, "u_mean": u_mean, "step_height": S, "inlet_height": m.inlet_height,
           "expansion_ratio": (S + m.inlet_height) / m.inlet_height,
           "xr": xr, "xr_over_S": None if xr is None else xr / S, "xr_over_S_armaly": ref}
    if plots_on:
        os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
        wall_png(os.path.join(outdir, "plots", "step_wall_u.png"), x / S, u, out)
    return out


def wall_png(path, x_over_s, u, out):
    """u in the first cell row above the lower wall against x / S, with x_r marked."""
    from ..io.figure import figure, save

    fig = figure(7.0, 3.5)
    ax = fig.add_subplot()
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.plot(x_over_s, u, "-", label="u, first cell row above the lower wall")
    if out["xr_over_S"] is not None:
        ax.axvline(out["xr_over_S"], color="C1", ls="--",
                   label=f"x_r / S = {out['xr_over_S']:.3f} (haloflow)")
    if out["xr_over_S_armaly"] is not None:
        ax.axvline(out["xr_over_S_armaly"], color="0.3", ls=":",
                   label=f"{out['xr_over_S_armaly']:.2f} (Armaly et al. 1983)")
    ax.set(xlabel="x / S", ylabel="u", xlim=(0, min(x_over_s[-1], 4 * (out["xr_over_S"] or 5))),
           title=f"Backward-facing step, Re = {out['re']:g} (U 2h / nu)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)
