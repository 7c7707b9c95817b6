"""Steady incompressible flow: SIMPLE (or SIMPLEC) with under-relaxation.

One iteration is one PISO step without the time term and with a single corrector:
the momentum equation is relaxed implicitly (``A/aU u = H + (1 - aU)/aU A u_old``), the
pressure equation is the same Rhie-Chow one, the fluxes take the solved pressure (so they
stay conservative) and the velocity the relaxed one, ``p_old + ap (p - p_old)``.  With
``consistent = true`` (SIMPLEC) the pressure equation uses ``1/(A - sum|a_nb|)`` instead of
``1/A``, which tolerates far larger pressure relaxation.  Relaxation is a local pseudo time
step ``alpha/(1 - alpha) V/A``; ``relaxation.max_dt`` caps it, so that ``alpha`` near 1
speeds up slow, viscous regions (where ``A`` is diffusion alone and the steps are small)
without overshooting where buoyancy drives the flow.  Every kernel, matrix and the AMG
are PISO's; the run stops when the initial residuals of all momentum components and of the
pressure fall below ``residual_tol``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..parallel.timers import NULL_TIMERS
from .monitor import StepInfo
from .piso import PisoSolver
from .schemes import flux_memory
from .time import Steady


@nb.njit(cache=True)
def consistent_rau(vol, diag, offsum, grad, comps, n, HbyA, rAU):
    """SIMPLEC: ``rAtU = V/(A + sum a_nb)`` (the off-diagonals are negative) and
    ``HbyA += (rAtU - rAU) grad p``, so the pressure equation carries the neighbours'
    share of the velocity correction."""
    for c in range(n):
        rat = vol[c] / (diag[c] + offsum[c])
        for d in comps:
            HbyA[d, c] += (rat - rAU[c]) * grad[d, c]
        rAU[c] = rat


class SimpleSolver(PisoSolver):
    """Steady SIMPLE(C) iterations; ``step()`` is one iteration, ``time`` counts them.

    Takes :class:`PisoSolver`'s arguments; ``solver.relaxation`` (``U``, ``p``, ``max_dt``) and
    ``solver.consistent`` (SIMPLEC) are read here."""

    algorithm = "simple"
    _advice = "try smaller solver.relaxation factors"
    _stall_steps = 0  # iterations, not steps in time

    def __init__(self, lmesh, exchanger, reducer, timers=NULL_TIMERS, *, solver, physics,
                 boundary, initial, mesh, halo):
        super().__init__(lmesh, exchanger, reducer, timers, solver=solver, physics=physics,
                         boundary=boundary, initial=initial, mesh=mesh, halo=halo)
        r = solver.relaxation
        self.alpha_u = float(r.U)
        self.alpha_p = float(r.p)
        self.inv_dt = 1.0 / r.max_dt if r.max_dt > 0.0 else 0.0
        self.consistent = bool(solver.consistent)
        self.n_corr = 1
        self.pressure.last_guess = None  # one correction an iteration, none of them final
        n = lmesh.n_cells
        self.p_prev = np.zeros(n)
        if self.consistent:
            self.ones = np.ones(n)
            self.offsum = np.zeros(n)

    def _time_scheme(self, s):
        return Steady(self.U)

    def _schedule(self, s) -> tuple[float, float]:
        return float(s.max_iterations), float(s.residual_tol)

    def steady_measure(self, info: StepInfo) -> float:
        return info.residual

    def _relax_momentum(self) -> None:
        self.momentum.relax(self.alpha_u, self.inv_dt)

    def _correct(self, last: bool):
        """The one correction of an iteration solves to ``rel_tol``, never to the final
        tolerance: steady iterations need no exact solve (simpleFoam uses p, not pFinal)."""
        self.p_prev[:] = self.p  # relax_pressure's old value
        return super()._correct(False)

    def _hbya(self) -> None:
        super()._hbya()
        if self.consistent:
            M = self.momentum.M
            M.off_diagonal(self.ones, self.offsum)
            consistent_rau(self.momentum.vol, M.diag, self.offsum, self.grad, self.momentum.axes,
                           self.lm.n_owned, self.HbyA, self.rAU)

    def _system_with_fluxes(self) -> bool:
        return False  # the flux memory may change the predicted fluxes

    def _flux_memory(self) -> None:
        """Plain SIMPLE: the relaxation-independent face flux (see
        :func:`.schemes.flux_memory`).  SIMPLEC's Rhie-Chow coefficient ``V/(A - sum
        a_nb)`` depends on the relaxation itself, so there the term would not remove the
        dependence and is left out."""
        if self.consistent or self.alpha_u == 1.0:
            return
        lm = self.lm
        with self.timers("fluxes"):
            flux_memory(self.pressure.owner, lm.neighbour, self.fc.weight,
                        lm.geometry.face_areas, self.ts.U_old, self.phi, self.rAU,
                        self.bc.u_kind, 1.0 - self.alpha_u, 0.0, self.pressure.phiH)

    def _energy_options(self, s) -> dict:
        T = s.relaxation.T
        return {"relaxation": 1.0 if T is None else float(T)}

    def _update(self) -> None:
        """Fluxes from the solved pressure, velocity from the relaxed one."""
        self._update_from_pressure(self.alpha_p)
