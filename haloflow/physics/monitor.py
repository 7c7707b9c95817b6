"""What a step reports: continuity, the change of the velocity, and blow-up detection."""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

DIVERGED_SPEED = 1e3  # rms speed, in units of the largest boundary speed, taken as blow-up


class DivergenceError(RuntimeError):
    """The solution blew up (NaN/Inf, or speeds far beyond any boundary speed)."""


@dataclass
class StepInfo:
    u_solves: list  # SolveInfo per solved component
    p_solves: list  # SolveInfo per corrector
    continuity: float  # dt * volume-weighted mean |div phi| after the last corrector
    change: float  # ||U - U_old|| / (dt ||U||): relative change per unit time (or iteration)

    @property
    def residual(self) -> float:
        """The largest initial residual of the step's momentum and first pressure solve."""
        return max([i.res0 for i in self.u_solves] + [self.p_solves[0].res0])


@nb.njit(cache=True)
def abs_divergence(owner, neighbour, phi, n_owned, work):
    """sum over owned cells of |sum_f phi_f| (net outflow), using ``work`` as scratch."""
    work[:] = 0.0
    for f in range(len(neighbour)):
        work[owner[f]] += phi[f]
        work[neighbour[f]] -= phi[f]
    for f in range(len(neighbour), len(owner)):
        work[owner[f]] += phi[f]
    s = 0.0
    for c in range(n_owned):
        s += abs(work[c])
    return s


@nb.njit(cache=True)
def change_norms(U, Uold, vol, comps, n_owned):
    """(sum V |U - Uold|^2, sum V |U|^2) over owned cells."""
    a = 0.0
    b = 0.0
    for c in range(n_owned):
        for d in comps:
            du = U[d, c] - Uold[d, c]
            a += vol[c] * du * du
            b += vol[c] * U[d, c] * U[d, c]
    return a, b


@nb.njit(cache=True)
def step_norms(owner, neighbour, phi, U, Uold, vol, comps, n_owned, work):
    """:func:`abs_divergence` and :func:`change_norms` in one call (the same sums)."""
    dv = abs_divergence(owner, neighbour, phi, n_owned, work)
    a, b = change_norms(U, Uold, vol, comps, n_owned)
    return dv, a, b


class StepMonitor:
    """Continuity and change of one step, in one reduction; raises :class:`DivergenceError`
    when the rms speed leaves any bound an incompressible flow with these boundary speeds
    (``u_ref``) can have."""

    def __init__(self, lmesh, comps, red, timers, work, *, u_ref: float, advice: str):
        self.lm, self.comps, self.red, self.timers = lmesh, comps, red, timers
        self.vol = lmesh.geometry.cell_volumes
        self.total_volume = red.sum(float(self.vol[: lmesh.n_owned].sum()))[0]
        self.u_ref, self.advice = u_ref, advice
        self.work = work  # (n_cells,) scratch

    def __call__(self, phi, U, U_old, dt: float, time: float) -> tuple[float, float]:
        """``(continuity, change)`` of a step of ``dt`` that ended at ``time``."""
        lm = self.lm
        n = lm.n_owned
        with self.timers("monitor"):
            dv, a, b = self.red.sum(*step_norms(lm.owner, lm.neighbour, phi, U, U_old,
                                                self.vol, self.comps, n, self.work))
        rms = np.sqrt(b / self.total_volume)
        if not np.isfinite(a + b + dv) or rms > DIVERGED_SPEED * self.u_ref:
            raise DivergenceError(
                f"solution diverged at t = {time:.6g} (rms |U| = {rms:.3g}, reference "
                f"speed {self.u_ref:g}); {self.advice}")
        change = np.sqrt(a / b) / dt if b > 0.0 else 0.0
        return dt * dv / self.total_volume, change
