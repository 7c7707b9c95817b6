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
from .patches import FIXED
from .piso import PisoSolver
from .schemes import flux_memory
from .time import Steady


@nb.njit(cache=True)
def consistent_rau(vol, diag, offsum, n, rAU, drau):
    """SIMPLEC: ``rAtU = V/(A + sum a_nb)`` (the off-diagonals are negative) replaces
    ``rAU``, and ``drau = rAtU - rAU`` keeps what the neighbours' share of the velocity
    correction adds."""
    for c in range(n):
        rat = vol[c] / (diag[c] + offsum[c])
        drau[c] = rat - rAU[c]
        rAU[c] = rat


@nb.njit(cache=True)
def consistent_fluxes(owner, neighbour, weight, gdiff, drau, p, pkind, pvalue, phiH):
    """SIMPLEC's share in the predicted flux, as simpleFoam adds it: ``(rAtU - rAU)_f
    snGrad(p) |S|`` from the compact face difference of the pressure (on fixed-pressure
    boundary faces, from its boundary value).  A cell gradient interpolated to the face
    instead, multiplied by ``rAtU - rAU``, which grows without bound as the relaxation
    factor tends to 1, moved the converged answer with the relaxation (pitzDaily: 7 % of
    max|U| between U relaxations 0.9 and 0.99)."""
    ni = len(neighbour)
    for f in range(ni):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        phiH[f] += (w * drau[o] + (1.0 - w) * drau[n]) * gdiff[f] * (p[n] - p[o])
    for f in range(ni, len(owner)):
        b = f - ni
        if pkind[b] == FIXED:
            o = owner[f]
            phiH[f] += drau[o] * gdiff[f] * (pvalue[b] - p[o])


@nb.njit(cache=True)
def consistent_hbya(HbyA, drau, grad, comps, n):
    """``HbyA += (rAtU - rAU) grad p``: the velocity the SIMPLEC update starts from."""
    for c in range(n):
        for d in comps:
            HbyA[d, c] += drau[c] * grad[d, c]


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
            self.drau = np.zeros(n)  # rAtU - rAU; its ghosts ride on H/A's exchange
            self._h_first = self._h_first + (self.drau,)

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
            consistent_rau(self.momentum.vol, M.diag, self.offsum, self.lm.n_owned, self.rAU,
                           self.drau)
            if self.energy is not None:  # the force reconstructed from the faces: cell form
                consistent_hbya(self.HbyA, self.drau, self.grad, self.momentum.axes,
                                self.lm.n_owned)

    def _system_with_fluxes(self) -> bool:
        return False  # the flux memory may change the predicted fluxes

    def _flux_memory(self) -> None:
        """Plain SIMPLE: the relaxation-independent face flux (see
        :func:`.schemes.flux_memory`).  SIMPLEC: its share of the flux and of H/A
        (:func:`consistent_fluxes`, :func:`consistent_hbya`), whose converged answer still
        moves slightly with the relaxation, as simpleFoam's does.  With buoyancy the
        share stays in H/A alone (:meth:`_hbya`), taken from the force the faces
        reconstruct."""
        lm = self.lm
        if self.consistent and self.energy is not None:
            return  # H/A took the neighbours' share from the force, in _hbya
        if self.consistent:
            pe, bc = self.pressure, self.bc
            with self.timers("fluxes"):
                consistent_fluxes(pe.owner, lm.neighbour, self.fc.weight, self.fc.gdiff,
                                  self.drau, self.p, bc.p_kind, bc.p_value, pe.phiH)
                consistent_hbya(self.HbyA, self.drau, self.grad, self.momentum.axes,
                                lm.n_owned)
            return
        if self.alpha_u == 1.0:
            return
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
