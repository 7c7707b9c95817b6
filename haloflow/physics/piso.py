"""Transient incompressible Navier-Stokes: PISO on a collocated grid with Rhie-Chow fluxes.

Per step: the time scheme keeps the old levels (:mod:`.time`), the momentum equation is
assembled with the old face flux and solved for a predictor (:mod:`.momentum`), then
``n_correctors`` pressure corrections each build fluxes from ``H/A``, solve the pressure
equation and correct fluxes and velocity (:mod:`.pressure`); the closure then solves its
own fields.  The steady SIMPLE variant (:mod:`.simple`) reuses every piece.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..backends.layout import components
from ..linalg.krylov import SolveInfo
from ..linalg.lockstep_kernels import LOCKSTEP_SETS, ManyWorkspace
from ..linalg.matrix import Pattern
from ..mesh.fv import face_coeffs
from ..parallel.timers import NULL_TIMERS
from .bcs import build_boundary, solved_components
from .closures import make_closure
from .context import Context
from .final_guess import FinalGuess
from .inflow import Inflow
from .initial import initial_fields
from .momentum import Momentum
from .monitor import STALL_STEPS, StepInfo, StepMonitor
from .patches import EMPTY
from .pressure import Pressure, correct_fluxes, correct_velocity, predicted_fluxes, relax_pressure
from .schemes import Gradient, flux_memory
from .scratch import Scratch
from .time import TIME_SCHEMES


def temperature_scheme(s) -> str:
    """The temperature's convection scheme: ``solver.convection_T``, else the momentum's
    (``linear-upwind`` and ``cubic`` as ``linear``)."""
    if s.convection_T is not None:
        return s.convection_T
    return "linear" if s.convection in ("linear-upwind", "cubic") else s.convection


class PisoSolver:
    """State and one-step advance of the incompressible equations on one rank.

    Built from the case's ``[solver]``, ``[physics]``, ``[boundary]`` and ``[initial]``
    tables (``mesh``: the ``[mesh]`` table, for initial conditions tied to the box;
    ``halo``: the strategy the AMG's coarse levels use); every global reduction goes
    through ``reducer``."""

    algorithm = "piso"
    _advice = "try a smaller solver.dt"
    _stall_steps = STALL_STEPS  # steps in time: a run the time step cannot carry stops

    def __init__(self, lmesh, exchanger, reducer, timers=NULL_TIMERS, *, solver, physics,
                 boundary, initial, mesh, halo):
        s, lm, red = solver, lmesh, reducer
        self.lm, self.ex, self.red, self.timers = lm, exchanger, red, timers
        self.n_corr = int(s.n_correctors)
        n, nf = lm.n_cells, lm.n_faces
        self.bc = build_boundary(lm, boundary, red)
        self.inflow = Inflow.of(lm, boundary, self.bc.u_value)  # fluctuating inlets, if any
        self.comps = np.array(solved_components(lm, self.bc, red), dtype=np.int64)
        self.fc = face_coeffs(lm)
        self.gradient = Gradient(lm, self.fc, s.gradient, self.bc.u_kind == EMPTY, self.comps)
        # the deferred non-orthogonal parts, only where some face needs them (never on a box)
        self.nonorth = s.laplacian == "corrected" and red.any(self.fc.nonorthogonal)
        if not self.nonorth:  # only the deferred corrections read k: 3 doubles per face
            self.fc.corr = None
        singular = not red.any(self.bc.pressure_fixed_somewhere)
        # boundary speeds bound an incompressible flow's velocity; far above them it has blown up
        u_ref = max(1.0, red.max(float(np.abs(self.bc.u_value).max(initial=0.0)))[0])
        scratch = Scratch.of(lm)
        self.monitor = StepMonitor(lm, self.comps, red, timers, scratch.work, u_ref=u_ref,
                                   advice=self._advice, owner=self.bc.visited_owner(lm),
                                   stall_steps=self._stall_steps)

        self.U = components(3, n)
        self.p = np.zeros(n)
        self.phi = np.zeros(nf)
        self.grad = components(3, n)  # of the pressure
        self.HbyA = components(3, n)
        self.rAU = np.zeros(n)
        self._h_fields = tuple(self.HbyA[d] for d in self.comps) + (self.rAU,)
        self._rau_sent = False  # the ghosts of V/A are this matrix's (it changes per step)
        self.time = 0.0
        self.ts = self._time_scheme(s)
        self.dt = self.ts.dt
        self.end_time, self.steady_tol = self._schedule(s)

        pattern = Pattern(lm)
        # its rows also serve the other solves; all seven sets for the lockstep BiCGStab
        lockstep = s.momentum.method == "bicgstab-jacobi"
        many = ManyWorkspace(n, lm.n_owned, LOCKSTEP_SETS if lockstep else 4)
        ws = many.as_workspace(8)
        ctx = Context(lm, self.fc, self.bc, self.comps, self.gradient, pattern, exchanger, red,
                      ws, scratch, timers, solver=s, boundary=boundary,
                      steady=self.algorithm == "simple", nonorth=self.nonorth)
        self.closure = make_closure(lm, physics, ctx)
        device = backends.for_run(s.backend)  # the linear solves' device (None: the host)
        self.momentum = Momentum(self.U, ctx, self.closure.nu_face, many,
                                 convection=s.convection, settings=s.momentum,
                                 stress=getattr(self.closure, "stress", None), device=device,
                                 implicit=bool(getattr(s, "implicit_convection", False)),
                                 transpose=bool(getattr(s, "transpose_stress", False)))
        # OpenFOAM's ddtCorr: the step's old flux, kept for the predicted fluxes
        self.phi_old = np.zeros(nf) if getattr(s, "ddt_corr", False) else None
        self.pressure = Pressure(self.p, self.grad, self.phi, ctx,
                                 n_nonorth=int(s.n_nonorth_correctors), singular=singular,
                                 settings=s.pressure, halo=halo, device=device)
        if s.pressure.guess == "extrapolated" and self.n_corr > 1:  # the last solve's start
            self.pressure.last_guess = FinalGuess(n, lm.n_owned)
        self.energy = None  # temperature and buoyancy (physics.model = "boussinesq")
        if physics.model == "boussinesq":
            from .energy import Energy

            self.energy = Energy(ctx, physics=physics, scheme=temperature_scheme(s),
                                 settings=s.momentum, **self._energy_options(s))
        if s.residual_norm == "normalised":  # the initial residuals every solve reports
            for part in (self.momentum, self.pressure, self.energy):
                if part is not None:
                    part.measure_normalised()
        # T's and the closure's ghosts ride on the first correction's exchange of H/A
        self._h_first = self._h_fields + (() if self.energy is None else (self.energy.T,)) \
            + tuple(self.closure.ghosts)
        self._initialise(initial, mesh, physics.nu)
        if self.energy is not None and initial.type == "rest":
            self._hydrostatic()
        if self.closure.ghosts:  # a closure of the initial velocity, ghosts exchanged once
            self.ex.exchange(self.momentum.u_fields)
            self.closure.start(self)
        self.device_step = None  # the whole step on the device, where it can do the case's
        self.device_step_lacks = None  # else what it lacks (the linear solves alone go there)
        if device is not None:
            from .device_piso import DeviceStep, unsupported

            self.device_step_lacks = unsupported(self, s)
            if self.device_step_lacks is None:
                self.device_step = DeviceStep(self, device)

    def to_host(self) -> None:
        """Bring the host's fields up to date where the step runs on a device (else they
        are)."""
        if self.device_step is not None:
            self.device_step.to_host()

    def _hydrostatic(self) -> None:
        """A fluid at rest starts in hydrostatic balance: ``p_rgh`` from the pressure equation
        with buoyancy fluxes alone (as OpenFOAM's hydrostatic initialisation), so a stable
        stratification has nothing to adjust."""
        lm, pe = self.lm, self.pressure
        self.rAU[:] = lm.geometry.cell_volumes  # any positive weights: the balance is per face
        pe.predict_fluxes(self.HbyA, self.rAU, self._h_fields + (self.energy.T,))
        pe.phiH[:] = 0.0  # no inflow: the weight of the fluid alone (the fluxes stay zero)
        self.energy.add_buoyancy_flux(pe.phiH, pe.g)
        pe.solve(self.rAU, True)
        self.ex.exchange(pe.p_field)
        self.energy.pressure_force(self.p, self.grad)
        pe.grad_current = True

    def _energy_options(self, s) -> dict:
        """Transient: the momentum equation's time scheme, no relaxation."""
        return {"time_scheme": s.time_scheme}

    def _time_scheme(self, s):
        guess = s.momentum.guess == "extrapolated"
        return TIME_SCHEMES[s.time_scheme](float(s.dt), self.U, guess)

    def _schedule(self, s) -> tuple[float, float]:
        """``(end_time, steady_tol)``."""
        return float(s.end_time), float(s.steady_tol)

    def _initialise(self, initial, mesh, nu) -> None:
        """Fields at t = 0 from ``[initial]``; face fluxes interpolated from them and the
        boundary velocities (the first pressure correction makes them divergence-free).  A
        steady solve from rest starts with no flux: the answer does not depend on the start,
        and the inlets' flux into cells at rest makes SIMPLEC diverge on pitzDaily."""
        init = initial_fields(initial, mesh, nu, self.lm.geometry.cell_centres)
        if init is None and self.algorithm != "piso":
            return  # SIMPLE's iterations start from no flux (the inlets' alone diverge SIMPLEC)
        lm, fc, bc = self.lm, self.fc, self.bc
        if init is not None:
            U, p = init
            self.U[self.comps] = U[self.comps]
            self.p[:] = p
        # at rest too: the inlets' fluxes convect into the first step (OpenFOAM's flux(U))
        predicted_fluxes(lm.owner, lm.neighbour, fc.weight, lm.geometry.face_areas, fc.gdiff,
                         self.U, np.zeros(lm.n_cells), bc.u_kind, bc.u_value, bc.p_kind,
                         self.phi, np.zeros(lm.n_faces), 0, lm.n_internal, True)

    @property
    def p_amg(self):
        """The pressure solver's AMG (None before the first solve, or with CG alone)."""
        return self.pressure.amg

    @property
    def gradU(self):
        """Velocity gradients (None unless non-orthogonal or linear-upwind parts need them)."""
        return self.momentum.gradU

    def converged(self, info: StepInfo) -> bool:
        """Steady: the relative change of U per unit time is below ``steady_tol``."""
        return self.steady_tol > 0.0 and self.steady_measure(info) < self.steady_tol

    def steady_measure(self, info: StepInfo) -> float:
        return info.change

    def _state_parts(self) -> list:
        """Everything with fields of its own a restart needs (see :meth:`checkpoint_state`):
        the time scheme, the pressure equation and where its last solve starts, the
        closure, an energy equation."""
        parts = (self.ts, self.pressure, self.pressure.last_guess, self.closure,
                 getattr(self, "energy", None))
        return [part for part in parts if hasattr(part, "state")]

    def checkpoint_state(self) -> tuple[dict, dict]:
        """What a restart needs to go on as if never stopped: ``(arrays, extra)``, where
        ``arrays`` maps a name to a live array and its kind, ``"cell"`` (shape ``(n,)`` or
        ``(k, n)`` over local cells: the owned ones are saved) or ``"face"`` (over local
        faces), and ``extra`` holds JSON values.  Each part with fields of its own adds
        them through ``state()`` and takes them back through ``restore(values, extra)``."""
        self.to_host()
        arrays = {"U": (self.U, "cell"), "p": (self.p, "cell"), "phi": (self.phi, "face"),
                  "grad_p": (self.grad, "cell")}
        extra = {"time": self.time, "grad_current": self.pressure.grad_current}
        for part in self._state_parts():
            a, e = part.state()
            arrays |= a
            extra |= e
        return arrays, extra

    def restore_state(self, values: dict, extra: dict) -> None:
        """Take back what :meth:`checkpoint_state` saved: ``values`` maps each name to
        ``(k, n)`` values over the local cells (ghosts included) or faces."""
        arrays, _ = self.checkpoint_state()
        missing = sorted(set(arrays) - set(values))
        if missing:
            from ..mpiutil import UserError

            raise UserError(f"the checkpoint lacks the fields {', '.join(missing)} this "
                            "run needs")
        for name in ("U", "p", "phi", "grad_p"):
            a = arrays[name][0]
            a[...] = values[name].reshape(a.shape)
        self.time = float(extra["time"])
        self.pressure.grad_current = bool(extra["grad_current"])
        for part in self._state_parts():
            part.restore(values, extra)
        if self.device_step is not None:
            self.device_step.host_changed()

    def step(self) -> StepInfo:
        if self.device_step is not None:
            return StepInfo(*self.device_step.step())
        if self.inflow is not None:  # the inlet of the step about to be solved
            self.inflow.advance(self.bc.u_value, round(self.time / self.dt) + 1)
        self.ts.begin_step(self.U)
        if self.phi_old is not None:
            self.phi_old[:] = self.phi
        self._assemble_momentum()
        self._rau_sent = False
        if self.ts.guess(self.U, self.lm.n_owned):  # 2 U^n - U^(n-1) on the owned rows
            self.momentum.ghosts_stale()
        u_solves = self.momentum.predict(self.grad)
        t_solve = None if self.energy is None else self.energy.solve(self.phi, self.dt)
        p_solves = [self._correct(k == self.n_corr - 1) for k in range(self.n_corr)]
        self.closure.solve(self)
        self.time += self.dt
        continuity, change = self.monitor(self.phi, self.U, self.ts.U_old, self.dt, self.time)
        return StepInfo(u_solves, p_solves, continuity, change, t_solve)

    def _assemble_momentum(self) -> None:
        """Momentum matrix and right-hand side (without the pressure gradient) from the
        current flux and velocity; the pressure gradient of the current pressure."""
        ts, bc, T = self.ts, self.bc, self.timers
        self.momentum.assemble(self.phi, ts.U_conv, ts.U_time, ts.ddt)
        with T("assemble"):
            self._relax_momentum()
            self.momentum.fill()
        if not self.pressure.grad_current:  # else the last correction left it current
            if self.energy is not None:
                self.energy.pressure_force(self.p, self.grad)
                return
            with T("fluxes"):
                self.gradient(self.p, bc.p_kind, bc.p_value, self.grad)

    def _relax_momentum(self) -> None:
        """Implicit under-relaxation of the momentum equation: none in PISO."""

    def _correct(self, last: bool) -> SolveInfo:
        """One pressure correction: H/A, predicted fluxes, the pressure equation, then
        fluxes and velocity from the new pressure; ``last``: the step's last correction,
        solved to the final tolerance."""
        with self.timers("assemble"):
            self._hbya()
        first = not self._rau_sent
        h = self._h_first if first else self._h_fields[:-1]
        self._rau_sent = True
        self.pressure.predict_fluxes(self.HbyA, self.rAU, h, self._system_with_fluxes(),
                                     matrix=first)
        if first:  # the closure's ghosts have arrived
            self.closure.refresh()
        if self.energy is not None:
            if first:  # T's ghosts have just become current
                self.energy.refresh_gradient()
            self.energy.add_buoyancy_flux(self.pressure.phiH, self.pressure.g)
        self._flux_memory()
        info = self.pressure.solve(self.rAU, last, new_matrix=first)  # V/A as the last correction's
        self._update()
        if last and self.pressure.last_guess is not None:  # p's ghosts current again
            self.pressure.last_guess.finish(self.p)
        return info

    def _hbya(self) -> None:
        self.momentum.h_by_a(self.HbyA, self.rAU)

    def _system_with_fluxes(self) -> bool:
        """Whether the pressure equation can be assembled with the predicted fluxes: unless
        the non-orthogonal part or :meth:`_flux_memory` changes them before the solve."""
        return not self.nonorth and self.energy is None and self.phi_old is None

    def _flux_memory(self) -> None:
        """A correction of the predicted fluxes from the previous ones: none in PISO unless
        ``solver.ddt_corr`` asks for OpenFOAM's (:func:`.schemes.flux_memory`)."""
        if self.phi_old is None:
            return
        lm = self.lm
        with self.timers("fluxes"):
            flux_memory(self.pressure.owner, lm.neighbour, self.fc.weight,
                        lm.geometry.face_areas, self.ts.U_old, self.phi_old, self.rAU,
                        self.bc.u_kind, 0.0, 1.0 / self.dt, self.pressure.phiH)

    def _update(self) -> None:
        if self.energy is None:
            self.pressure.correct(self.U, self.HbyA, self.rAU,
                                  self.momentum.u_fields + self.closure.take_pending())
            return
        self._update_from_pressure(1.0)

    def _update_from_pressure(self, alpha_p: float) -> None:
        """Fluxes from the solved pressure, velocity from the (``alpha_p``-relaxed) one and
        its gradient, or with buoyancy the force reconstructed from the faces: SIMPLE's
        update, and PISO's with heat transfer (the exchanges of :meth:`Pressure.correct`)."""
        lm, bc, pe, T = self.lm, self.bc, self.pressure, self.timers
        with T("halo"):
            self.ex.exchange(pe.p_field)
        with T("fluxes"):
            correct_fluxes(pe.owner, lm.neighbour, pe.phiH, pe.g, self.p, bc.p_kind,
                           bc.p_value, self.phi, 0, lm.n_internal, True)
            if alpha_p != 1.0:
                relax_pressure(self.p, self.p_prev, alpha_p)
        if self.energy is not None:
            self.energy.pressure_force(self.p, self.grad)
        else:
            with T("fluxes"):
                self.gradient(self.p, bc.p_kind, bc.p_value, self.grad)
        with T("fluxes"):
            correct_velocity(self.U, self.HbyA, self.rAU, self.grad, self.comps,
                             lm.n_owned, pe.work)
        pe.grad_current = True  # of the relaxed pressure, as the next assembly needs
        fields = self.momentum.u_fields + self.closure.take_pending()
        if self.energy is not None:  # a limited scheme's new gradient of T rides along
            fields = fields + self.energy.take_pending()
        with T("halo"):
            self.ex.exchange(fields)
