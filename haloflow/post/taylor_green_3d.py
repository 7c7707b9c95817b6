"""The 3D Taylor-Green vortex at Re 1600: kinetic energy and its dissipation rate over time
against the high-order workshop's 512^3 spectral DNS (data/tgv_re1600_spectral.csv).

After each step it adds the volume average of ``u.u / 2`` (one reduction); at the end rank 0 writes
``dissipation.csv`` (t, kinetic energy, ``-dE_k/dt`` by central differences of the samples),
``plots/taylor_green_3d.png`` and the peak dissipation rate and its time beside the
reference's.  The rate is the total one the run sees: resolved, SGS and numerical
dissipation together, as the workshop's lower-order entries report it.  A restarted run
samples from its restart on.
"""

from __future__ import annotations

import os

import numba as nb
import numpy as np

from .base import PostProcessor


@nb.njit(cache=True)
def energy_sum(vol, U, n):
    """``sum_c V_c u.u`` over the ``n`` owned cells."""
    s = 0.0
    for c in range(n):
        s += vol[c] * (U[0, c] * U[0, c] + U[1, c] * U[1, c] + U[2, c] * U[2, c])
    return s


class TaylorGreen3D(PostProcessor):
    """``summary.json`` entry ``taylor_green_3d``; ``dissipation.csv``."""

    name = "taylor_green_3d"
    samples = True

    def __init__(self, lmesh, case, solver, red):
        super().__init__(lmesh, case, solver, red)
        n = lmesh.n_owned
        self.vol = lmesh.geometry.cell_volumes[:n]
        (self.volume,) = red.sum(float(self.vol.sum()))
        self.times, self.energy = [], []

    def adopt(self, old) -> None:
        self.times, self.energy = old.times, old.energy

    def sample(self, solver) -> None:
        (total,) = self.red.sum(energy_sum(self.vol, solver.U, self.lmesh.n_owned))
        self.times.append(solver.time)
        self.energy.append(0.5 * total / self.volume)

    def report(self, outdir, fields) -> dict | None:
        if self.red.rank != 0:
            return None
        t, ek = np.array(self.times), np.array(self.energy)
        eps = -np.gradient(ek, t) if len(t) > 2 else np.zeros_like(t)
        table = np.column_stack([t, ek, eps])
        np.savetxt(os.path.join(outdir, "dissipation.csv"), table, delimiter=",",
                   header="t,kinetic_energy,dissipation", comments="", fmt="%.10g")
        from ..io import refdata

        ref = refdata.tgv_spectral()
        i, j = int(np.argmax(eps)), int(np.argmax(ref[:, 2]))
        entry = {"epsilon_max": float(eps[i]), "t_epsilon_max": float(t[i]),
                 "final_kinetic_energy": float(ek[-1]), "time": float(t[-1]),
                 "reference": {"epsilon_max": float(ref[j, 2]),
                               "t_epsilon_max": float(ref[j, 0]),
                               "source": "512^3 spectral DNS, high-order CFD workshop C3.5"}}
        if t[-1] >= ref[j, 0] + 1.0:  # the peak is behind the run: compare
            entry["epsilon_max_error"] = float(eps[i] / ref[j, 2] - 1.0)
            entry["t_epsilon_max_error"] = float(t[i] - ref[j, 0])
        if self.case.output.plots:
            _plot(os.path.join(outdir, "plots", "taylor_green_3d.png"), table, ref)
        return entry

    def log_line(self, entry: dict) -> str | None:
        r = entry["reference"]
        return (f"Taylor-Green 3D to t = {entry['time']:.4g}: peak dissipation "
                f"{entry['epsilon_max']:.5f} at t = {entry['t_epsilon_max']:.3f} (spectral DNS "
                f"{r['epsilon_max']:.5f} at t = {r['t_epsilon_max']:.2f})")


def _plot(path, table, ref) -> None:
    """Dissipation rate and kinetic energy over time, the run's and the reference's."""
    from ..io.figure import figure, save

    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig = figure(6.4, 6.4)
    a, b = fig.subplots(2, 1, sharex=True)
    a.plot(ref[:, 0], ref[:, 2], "k-", lw=1, label="spectral DNS 512³")
    a.plot(table[:, 0], table[:, 2], "C0-", label="haloflow")
    a.set_ylabel("-dE_k/dt")
    a.legend()
    b.plot(ref[:, 0], ref[:, 1], "k-", lw=1)
    b.plot(table[:, 0], table[:, 1], "C0-")
    b.set_ylabel("E_k")
    b.set_xlabel("t")
    save(fig, path)
