"""What a step reports: continuity, the change of the velocity, and blow-up detection.

Two failures end a run as diverged (exit 3): a blow-up (NaN or Inf, or an rms speed far
beyond any boundary speed), and, in a transient run, a time step the flow is not resolved
by: a velocity field that changes by more than half of itself at every step for
``STALL_STEPS`` steps is no longer a flow evolving in time but the scheme's oscillation
(the 2D cavity at 256^2 with a lid Courant number of 12.8 settles there with speeds of 4-5
times the lid's, while a resolved run's change per step falls below 10 % within a few
steps of an impulsive start).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

DIVERGED_SPEED = 1e3  # rms speed, in units of the largest boundary speed, taken as blow-up
STALL_CHANGE = 0.5  # ||U - U_old|| / ||U|| of a step beyond which it does not resolve the flow
STALL_STEPS = 20  # such steps in a row that end a transient run


class DivergenceError(RuntimeError):
    """The solution blew up (NaN/Inf, or speeds far beyond any boundary speed)."""


@dataclass
class StepInfo:
    u_solves: list  # SolveInfo per solved component
    p_solves: list  # SolveInfo per corrector
    continuity: float  # dt * volume-weighted mean |div phi| after the last corrector
    change: float  # ||U - U_old|| / (dt ||U||): relative change per unit time (or iteration)
    t_solve: object = None  # SolveInfo of the temperature (physics.model = "boussinesq")

    @property
    def residual(self) -> float:
        """The largest initial residual of the step's momentum, temperature and first
        pressure solve."""
        t = [] if self.t_solve is None else [self.t_solve.res0]
        return max([i.res0 for i in self.u_solves] + [self.p_solves[0].res0] + t)


@nb.njit(cache=True)
def step_norms(owner, neighbour, phi, U, Uold, vol, comps, n_owned, work):
    """Over the owned cells: sum |net outflow| (``work``: scratch), sum V |U - Uold|^2 and
    sum V |U|^2, in one pass over the cells on the 1-D rows of the velocity components
    (``U[d, c]`` inside the cell loop took twice as long at 64^3)."""
    work[:] = 0.0
    for f in range(len(neighbour)):
        work[owner[f]] += phi[f]
        work[neighbour[f]] -= phi[f]
    for f in range(len(neighbour), len(owner)):
        work[owner[f]] += phi[f]
    u0, u1, u2, o0, o1, o2 = U[0], U[1], U[2], Uold[0], Uold[1], Uold[2]
    c0 = c1 = c2 = False
    for d in comps:
        c0, c1, c2 = c0 or d == 0, c1 or d == 1, c2 or d == 2
    dv = 0.0
    a = 0.0
    b = 0.0
    for c in range(n_owned):
        dv += abs(work[c])
        v = vol[c]
        if c0:
            du = u0[c] - o0[c]
            a += v * du * du
            b += v * u0[c] * u0[c]
        if c1:
            du = u1[c] - o1[c]
            a += v * du * du
            b += v * u1[c] * u1[c]
        if c2:
            du = u2[c] - o2[c]
            a += v * du * du
            b += v * u2[c] * u2[c]
    return dv, a, b


class StepMonitor:
    """Continuity and change of one step, in one reduction; raises :class:`DivergenceError`
    when the rms speed leaves any bound an incompressible flow with these boundary speeds
    (``u_ref``) can have.  ``owner``: the owners of the faces to visit (empty patches left
    out: ``BoundaryArrays.visited_owner``)."""

    def __init__(self, lmesh, comps, red, timers, work, *, u_ref: float, advice: str, owner,
                 stall_steps: int = 0):
        """``stall_steps``: unresolved steps in a row that end the run (0: never; a steady
        solve's iterations are not steps in time)."""
        self.lm, self.comps, self.red, self.timers = lmesh, comps, red, timers
        self.stall_steps, self.unresolved = stall_steps, 0
        self.owner = owner
        self.vol = lmesh.geometry.cell_volumes
        self.total_volume = red.sum(float(self.vol[: lmesh.n_owned].sum()))[0]
        self.u_ref, self.advice = u_ref, advice
        self.work = work  # (n_cells,) scratch

    def __call__(self, phi, U, U_old, dt: float, time: float) -> tuple[float, float]:
        """``(continuity, change)`` of a step of ``dt`` that ended at ``time``."""
        lm = self.lm
        n = lm.n_owned
        with self.timers("monitor"):
            dv, a, b = self.red.sum(*step_norms(self.owner, lm.neighbour, phi, U, U_old,
                                                self.vol, self.comps, n, self.work))
        return self.judge(dv, a, b, dt, time)

    def judge(self, dv: float, a: float, b: float, dt: float, time: float):
        """``(continuity, change)`` from the global sums of :func:`step_norms`."""
        rms = np.sqrt(b / self.total_volume)
        if not np.isfinite(a + b + dv) or rms > DIVERGED_SPEED * self.u_ref:
            raise DivergenceError(
                f"solution diverged at t = {time:.6g} (rms |U| = {rms:.3g}, reference "
                f"speed {self.u_ref:g}); {self.advice}")
        change = np.sqrt(a / b) / dt if b > 0.0 else 0.0
        if self.stall_steps:
            self._count_unresolved(change * dt, dt, time)
        return dt * dv / self.total_volume, change

    def _count_unresolved(self, per_step: float, dt: float, time: float) -> None:
        self.unresolved = self.unresolved + 1 if per_step > STALL_CHANGE else 0
        if self.unresolved >= self.stall_steps:
            raise DivergenceError(
                f"the time step does not resolve the flow: the velocity changed by more than "
                f"{STALL_CHANGE:.0%} of itself in each of the last {self.unresolved} steps "
                f"({per_step:.0%} in the step to t = {time:.6g}, dt = {dt:g}); "
                f"{self.advice}")
