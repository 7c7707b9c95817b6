"""Time averages of the fields: mean and rms (of the fluctuation about the mean) of U, p and,
with an eddy-viscosity closure, its SGS energy k and eddy viscosity nut.

From ``postprocess.average_from`` on, every step adds ``dt x`` and ``dt x^2`` of each owned
cell to running sums (one compiled pass, no allocation); the field files (the final ones and
every series file) then hold ``U_mean``, ``U_rms``, ``p_mean``, ``p_rms`` and the closure's
``k_mean``, ``k_rms``, ``nut_mean``, ``nut_rms``: the averages over the time accumulated
so far.  The sums live on the ranks' own cells, so a run that moves cells between ranks
(``parallel.balance``) cannot average, and a restarted run averages from its restart on.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .base import PostProcessor


@nb.njit(cache=True)
def accumulate(U, p, k, nut, closure, dt, n, s1, s2):
    """``s1 += dt x``, ``s2 += dt x^2`` of rows U0, U1, U2, p (, k, nut) on ``n`` cells."""
    for c in range(n):
        for r in range(6 if closure else 4):
            if r < 3:
                x = U[r, c]
            elif r == 3:
                x = p[c]
            elif r == 4:
                x = k[c]
            else:
                x = nut[c]
            s1[r, c] += dt * x
            s2[r, c] += dt * x * x


class Averaging(PostProcessor):
    """Mean and rms fields, written with the fields; ``summary.json`` entry ``averaging``."""

    name = "averaging"
    samples = True

    def __init__(self, lmesh, case, solver, red):
        super().__init__(lmesh, case, solver, red)
        n = lmesh.n_owned
        closure = solver.closure
        self.closure = hasattr(closure, "nut") and hasattr(closure, "k")
        rows = 6 if self.closure else 4
        self.s1, self.s2 = np.zeros((rows, n)), np.zeros((rows, n))
        self.start = float(case.postprocess.average_from)
        self.span = 0.0
        self.t_first = None
        self._none = np.zeros(0)

    def sample(self, solver) -> None:
        dt = solver.dt
        if solver.time < self.start + 0.5 * dt:  # the step ending at t counts from t - dt
            return
        if self.t_first is None:
            self.t_first = solver.time - dt
        c = solver.closure
        k, nut = (c.k, c.nut) if self.closure else (self._none, self._none)
        accumulate(solver.U, solver.p, k, nut, self.closure, dt, self.lmesh.n_owned, self.s1,
                   self.s2)
        self.span += dt

    def cell_fields(self) -> dict:
        if self.span == 0.0:
            return {}
        mean = self.s1 / self.span
        rms = np.sqrt(np.maximum(self.s2 / self.span - mean * mean, 0.0))
        out = {"U_mean": mean[:3].T, "U_rms": rms[:3].T, "p_mean": mean[3], "p_rms": rms[3]}
        if self.closure:
            out |= {"k_mean": mean[4], "k_rms": rms[4], "nut_mean": mean[5], "nut_rms": rms[5]}
        return out

    def report(self, outdir, fields) -> dict | None:
        if self.red.rank != 0:
            return None
        return {"from": self.t_first, "span": self.span,
                "fields": sorted(self.cell_fields())}

    def log_line(self, entry: dict) -> str | None:
        if not entry["span"]:
            return "time averages: nothing averaged (the run ended before average_from)"
        return (f"time averages over t = {entry['from']:.6g} .. "
                f"{entry['from'] + entry['span']:.6g} written with the fields")
