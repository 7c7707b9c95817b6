"""Taylor-Green vortices: the solution's error against the exact decaying vortices.

Errors are volume-weighted RMS (L2) and maximum norms over the owned cells of every rank,
relative to the exact peak speed at that time, so runs of any length compare.  The pressure
is compared after removing each field's mean (a periodic box fixes pressure only up to a
constant).  The kinetic-energy ratio (computed over exact) shows the numerical dissipation.
"""

from __future__ import annotations

import math

import numpy as np

from ..physics.initial import taylor_green
from .base import PostProcessor


class TaylorGreen(PostProcessor):
    """The errors of the final fields, reduced over every rank."""

    name = "taylor_green"

    def report(self, outdir, fields) -> dict | None:
        s = self.solver
        # its own counters: the run's profile counts the steps' reductions only
        out = errors(self.lmesh, s.U, s.p, s.time, self.case, self.red.with_stats(None))
        return out if self.red.rank == 0 else None

    def log_line(self, entry: dict) -> str | None:
        return (f"Taylor-Green vortices at t = {entry['time']:.6g}: velocity error L2 "
                f"{entry['u_l2_error']:.4e} max {entry['u_max_error']:.4e}, pressure error L2 "
                f"{entry['p_l2_error']:.4e} (relative to the exact peak), kinetic energy "
                f"{entry['kinetic_energy_ratio']:.6f} of exact")


def errors(lmesh, U, p, time: float, case, red) -> dict:
    """Collective: every rank passes its fields and the run's Reducer; every rank gets the
    same dict."""
    n = lmesh.n_owned
    g = lmesh.geometry
    c, vol = g.cell_centres[:n], g.cell_volumes[:n]
    init, m = case.initial, case.mesh
    ue, ve, pe = taylor_green(c[:, 0], c[:, 1], time, init.amplitude, m.lengths[0],
                              case.physics.nu, m.origin[:2])
    du, dv = U[0, :n] - ue, U[1, :n] - ve
    sums = np.array([np.sum(vol * (du * du + dv * dv)), np.sum(vol), np.sum(vol * p[:n]),
                     np.sum(vol * pe), np.sum(vol * (U[0, :n] ** 2 + U[1, :n] ** 2)),
                     np.sum(vol * (ue * ue + ve * ve))])
    e2, V, pm, pem, ke, kee = red.array(sums, "sum")
    dp = (p[:n] - pm / V) - (pe - pem / V)
    (pe2,) = red.sum(float(np.sum(vol * dp * dp)))
    umax, pmax = red.max(float(np.sqrt(du * du + dv * dv).max(initial=0.0)),
                         float(np.abs(dp).max(initial=0.0)))
    k = 2.0 * math.pi / m.lengths[0]
    peak = init.amplitude * math.exp(-2.0 * case.physics.nu * k * k * time)
    return {
        "time": time,
        "amplitude": init.amplitude,
        "exact_peak_speed": peak,
        "u_l2_error": math.sqrt(e2 / V) / peak,
        "u_max_error": umax / peak,
        "p_l2_error": math.sqrt(pe2 / V) / peak**2,
        "p_max_error": pmax / peak**2,
        "kinetic_energy_ratio": ke / kee if kee > 0 else float("nan"),
    }
