"""Transient incompressible Navier-Stokes: PISO on a collocated grid with Rhie-Chow fluxes.

Per step (implicit Euler, or the second-order backward formula BDF2 with
``time_scheme = "backward"``): assemble momentum with the old face flux (implicit upwind, plus an
explicit correction to linear or linear-upwind interpolation, and the non-orthogonal part of
the diffusion on non-orthogonal meshes), solve a predictor, then ``n_correctors`` pressure
corrections.  Face fluxes are built from the interpolated ``H/A`` and a compact pressure
gradient (Rhie-Chow); on non-orthogonal meshes the explicit part of the pressure flux moves
into the predicted flux, so the pressure equation and the corrected fluxes stay exactly
consistent: after each corrector the fluxes are divergence-free to the pressure solver's
tolerance.  The steady SIMPLE variant (``simple.py``) reuses every piece.  Velocity is
stored as ``U[3, n_cells]`` so that each component is a contiguous field for the halo
exchange.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
from mpi4py import MPI

from ..linalg.amg import AMG
from ..linalg.krylov import SolveInfo, Workspace, bicgstab, fcg, pcg
from ..linalg.matrix import DistMatrix, Pattern
from ..linalg.precond import SymmetricGaussSeidel
from ..parallel.reduce import Reducer
from ..parallel.timers import NULL_TIMERS
from .bcs import (
    EMPTY,
    FIXED,
    SYMMETRY,
    ZERO_GRADIENT,
    build_boundary,
    solved_components,
    velocity_boundary_values,
)
from .initial import initial_fields
from .schemes import (
    Gradient,
    face_coeffs,
    linear_upwind_source,
    nonorth_diffusion_source,
    nonorth_flux_correction,
)

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
def momentum_coeffs(owner, neighbour, phi, gdiff, nu, vol, dt, ukind, diag, lower, upper):
    """Implicit upwind convection + orthogonal diffusion + Euler time term."""
    ni = len(neighbour)
    for c in range(len(vol)):
        diag[c] = vol[c] / dt
    for f in range(ni):
        F = phi[f]
        D = nu * gdiff[f]
        upper[f] = -D + min(F, 0.0)
        lower[f] = -D - max(F, 0.0)
        diag[owner[f]] += D + max(F, 0.0)
        diag[neighbour[f]] += D - min(F, 0.0)
    for f in range(ni, len(owner)):
        k = ukind[f - ni]
        if k == FIXED:
            diag[owner[f]] += nu * gdiff[f]
        elif k == SYMMETRY:  # diffusion to the mirror image of the cell, 2x as far as the face
            diag[owner[f]] += 0.5 * nu * gdiff[f]
        elif k != EMPTY:  # zero gradient: outflow carries the cell value
            diag[owner[f]] += max(phi[f], 0.0)


@nb.njit(cache=True)
def momentum_source(owner, neighbour, weight, phi, gdiff, nu, vol, dt, ukind, uvalue, U, Uold,
                    linear, comps, b0, sf):
    """Right-hand side without the pressure gradient: time term, boundary values and the
    deferred correction from upwind to linear interpolation.

    A symmetry face diffuses towards the cell's mirror image (velocity reflected, twice the
    face distance away), whose value lags by a step or iteration: the coefficients are
    those of a cell next to its mirror image, so a half domain converges to the same
    solution as the full, symmetric one."""
    ni = len(neighbour)
    for d in comps:
        for c in range(len(vol)):
            b0[d, c] = vol[c] / dt * Uold[d, c]
    if linear:
        for f in range(ni):
            o = owner[f]
            n = neighbour[f]
            F = phi[f]
            w = weight[f]
            for d in comps:
                ulin = w * U[d, o] + (1.0 - w) * U[d, n]
                uup = U[d, o] if F >= 0.0 else U[d, n]
                corr = F * (ulin - uup)
                b0[d, o] -= corr
                b0[d, n] += corr
    for f in range(ni, len(owner)):
        b = f - ni
        k = ukind[b]
        o = owner[f]
        if k == FIXED:
            coef = nu * gdiff[f] - phi[f]
            for d in comps:
                b0[d, o] += coef * uvalue[b, d]
        elif k == SYMMETRY:
            m = np.sqrt(sf[f, 0] ** 2 + sf[f, 1] ** 2 + sf[f, 2] ** 2)
            un = 0.0
            for d in range(3):
                un += U[d, o] * sf[f, d] / m
            coef = 0.5 * nu * gdiff[f]
            for d in comps:
                b0[d, o] += coef * (U[d, o] - 2.0 * un * sf[f, d] / m)
        elif k != EMPTY and phi[f] < 0.0:  # zero-gradient inflow: explicit
            for d in comps:
                b0[d, o] -= phi[f] * U[d, o]


@nb.njit(cache=True)
def predicted_fluxes(owner, neighbour, weight, sf, gdiff, HbyA, rAU, ukind, uvalue, pkind,
                     phiH, g, f0, f1, boundary):
    """Face flux of H/A and the pressure-Laplacian coefficient rAU_f |S|^2/(S.d) on internal
    faces ``[f0, f1)`` and, if ``boundary``, on the boundary faces."""
    ni = len(neighbour)
    for f in range(f0, f1):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        s = 0.0
        for d in range(3):
            s += (w * HbyA[d, o] + (1.0 - w) * HbyA[d, n]) * sf[f, d]
        phiH[f] = s
        g[f] = (w * rAU[o] + (1.0 - w) * rAU[n]) * gdiff[f]
    if not boundary:
        return
    for f in range(ni, len(owner)):
        b = f - ni
        o = owner[f]
        s = 0.0
        if ukind[b] == FIXED:
            for d in range(3):
                s += uvalue[b, d] * sf[f, d]
        elif ukind[b] == ZERO_GRADIENT:
            for d in range(3):
                s += HbyA[d, o] * sf[f, d]
        phiH[f] = s
        g[f] = rAU[o] * gdiff[f] if pkind[b] == FIXED else 0.0


@nb.njit(cache=True)
def pressure_system(owner, neighbour, phiH, g, pkind, pvalue, n_cells, diag, lower, upper, rhs):
    """sum_f g_f (p_P - p_N) = -sum_f phiH_f (+ fixed-pressure boundary terms)."""
    ni = len(neighbour)
    for c in range(n_cells):
        diag[c] = 0.0
        rhs[c] = 0.0
    for f in range(ni):
        o = owner[f]
        n = neighbour[f]
        diag[o] += g[f]
        diag[n] += g[f]
        lower[f] = -g[f]
        upper[f] = -g[f]
        rhs[o] -= phiH[f]
        rhs[n] += phiH[f]
    for f in range(ni, len(owner)):
        b = f - ni
        o = owner[f]
        rhs[o] -= phiH[f]
        if pkind[b] == FIXED:
            diag[o] += g[f]
            rhs[o] += g[f] * pvalue[b]


@nb.njit(cache=True)
def correct_fluxes(owner, neighbour, phiH, g, p, pkind, pvalue, phi, f0, f1, boundary):
    """Conservative fluxes from the new pressure on internal faces ``[f0, f1)`` (and the
    boundary faces if ``boundary``)."""
    ni = len(neighbour)
    for f in range(f0, f1):
        phi[f] = phiH[f] - g[f] * (p[neighbour[f]] - p[owner[f]])
    if not boundary:
        return
    for f in range(ni, len(owner)):
        b = f - ni
        if pkind[b] == FIXED:
            phi[f] = phiH[f] - g[f] * (pvalue[b] - p[owner[f]])
        else:
            phi[f] = phiH[f]


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
def extrapolate(a, b, out):
    """``2 a - b`` (flat arrays): the linear extrapolation to the new time level."""
    for i in range(len(a)):
        out[i] = 2.0 * a[i] - b[i]


@nb.njit(cache=True)
def bdf2_history(U, Uold, out):
    """``(4 U^n - U^(n-1)) / 3``: the old-time part of the BDF2 time term."""
    for d in range(U.shape[0]):
        for c in range(U.shape[1]):
            out[d, c] = (4.0 * U[d, c] - Uold[d, c]) / 3.0


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


class PisoSolver:
    """State and one-step advance of the incompressible equations on one rank."""

    algorithm = "piso"
    bdf2 = False

    def __init__(self, lmesh, case, comm, exchanger, timers=NULL_TIMERS):
        self.lm = lmesh
        self.comm = comm
        self.ex = exchanger
        self.timers = timers
        s = case.solver
        self.nu = float(case.physics.nu)
        self._set_time(s)
        self.n_corr = int(s.n_correctors)
        self.n_nonorth = int(s.n_nonorth_correctors)
        self.linear = s.convection == "linear"
        self.p_cfg = s.pressure
        self.u_cfg = s.momentum
        self.red = Reducer(comm)
        self.halo_name = case.parallel.halo
        self.p_amg = None

        lm = lmesh
        n, nf, ni = lm.n_cells, lm.n_faces, lm.n_internal
        self.bc = build_boundary(lm, case.boundary, comm)
        self.comps = np.array(solved_components(lm, self.bc, comm), dtype=np.int64)
        self.fc = face_coeffs(lm)
        self.vol = lm.geometry.cell_volumes
        self.sf = lm.geometry.face_areas
        self.gradient = Gradient(lm, self.fc, s.gradient, self.bc.u_kind == EMPTY, self.comps)
        # the deferred non-orthogonal parts, only where some face needs them (never on a box)
        self.nonorth = s.laplacian == "corrected" and self._global_any(self.fc.nonorthogonal)
        self.linear_upwind = s.convection == "linear-upwind"
        fcs = lm.geometry.face_centres
        self.fcn = fcs if lm.face_shift is None else np.ascontiguousarray(
            fcs[:ni] - lm.face_shift)  # face centres seen from the neighbour (periodic)
        self.p_singular = not bool(self._global_any(self.bc.pressure_fixed_somewhere))
        self.total_volume = comm.allreduce(float(self.vol[: lm.n_owned].sum()))
        # boundary speeds bound an incompressible flow's velocity; far above them it has blown up
        self.u_ref = max(1.0, comm.allreduce(float(np.abs(self.bc.u_value).max(initial=0.0)),
                                             op=MPI.MAX))

        pattern = Pattern(lm)
        self.M = DistMatrix(pattern, exchanger, timers)
        self.P = DistMatrix(pattern, exchanger, timers)
        self.ws = Workspace(n, lm.n_owned, 8)
        self.u_pre = SymmetricGaussSeidel(self.M) if self.u_cfg.method == "bicgstab-sgs" \
            else None

        # fields
        self.U = np.zeros((3, n))
        self.p = np.zeros(n)
        self.phi = np.zeros(nf)
        self.time = 0.0
        self.n_steps = 0
        # scratch, allocated once
        self.Uold = np.zeros((3, n))
        self.Uold2 = np.zeros((3, n)) if self.bdf2 else None  # U^(n-1), BDF2 only
        self.Utime = np.zeros((3, n)) if self.bdf2 else self.Uold  # what the time term sees
        # BDF2 takes the explicit parts of convection (the deferred correction to linear or
        # linear-upwind) at the extrapolated velocity 2 U^n - U^(n-1), which keeps it second
        # order; the convecting flux stays the old one (extrapolating it as well damps vortex
        # shedding: c_L,max 0.84 instead of 1.05 on the 64-cell cylinder).  Euler: U^n.
        self.U_conv = np.zeros((3, n)) if self.bdf2 else self.U
        self.b0 = np.zeros((3, n))
        self.rhs = np.zeros(n)
        self.grad = np.zeros((3, n))
        self.HbyA = np.zeros((3, n))
        self.rAU = np.zeros(n)
        self.diag = np.zeros(n)
        self.lower = np.zeros(ni)
        self.upper = np.zeros(ni)
        self.phiH = np.zeros(nf)
        self.g = np.zeros(nf)
        self.work = np.zeros(n)
        self._u_fields = [self.U[d] for d in self.comps]
        self._h_fields = [self.HbyA[d] for d in self.comps] + [self.rAU]
        self._p_field = [self.p]
        self._gp_fields = [self.grad[e] for e in self.comps]
        self.phiH0 = np.zeros(nf) if self.nonorth else None
        self.gradU = None
        if self.nonorth or self.linear_upwind:  # velocity gradients, ghosts exchanged
            self.gradU = np.zeros((3, 3, n))
            self.ub = np.zeros((3, nf - ni))
            self.u_gkind = self.bc.grad_kind
            self._gu_fields = [self.gradU[d, e] for d in self.comps for e in self.comps]
        self._initialise(case)

    def _initialise(self, case) -> None:
        """Fields at t = 0 from ``[initial]``; face fluxes interpolated from them (the first
        pressure correction makes them divergence-free)."""
        init = initial_fields(case, self.lm.geometry.cell_centres)
        if init is None:
            return
        lm = self.lm
        U, p = init
        self.U[self.comps] = U[self.comps]
        self.p[:] = p
        predicted_fluxes(lm.owner, lm.neighbour, self.fc.weight, self.sf, self.fc.gdiff, self.U,
                         np.zeros(lm.n_cells), self.bc.u_kind, self.bc.u_value, self.bc.p_kind,
                         self.phi, self.g, 0, lm.n_internal, True)

    def _set_time(self, s) -> None:
        """Time stepping: the momentum time term uses ``ddt``; ``dt`` advances ``time``.

        BDF2 ``(3 U - 4 U^n + U^(n-1)) / (2 dt)`` is Euler's kernel with ``ddt = 2 dt / 3``
        and ``(4 U^n - U^(n-1)) / 3`` in place of ``U^n``, so no kernel knows the scheme.
        Its first step has no ``U^(n-1)`` and is an Euler step."""
        self.dt = self.ddt = float(s.dt)
        self.end_time = float(s.end_time)
        self.steady_tol = float(s.steady_tol)
        self.bdf2 = getattr(s, "time_scheme", "euler") == "backward"

    def converged(self, info: StepInfo) -> bool:
        """Steady: the relative change of U per unit time is below ``steady_tol``."""
        return self.steady_tol > 0.0 and self.steady_measure(info) < self.steady_tol

    def steady_measure(self, info: StepInfo) -> float:
        return info.change

    def _global_any(self, flag: bool) -> bool:
        return self.comm.allreduce(bool(flag), op=MPI.LOR)

    def _gradient(self, field, kind, value, out):
        self.gradient(field, kind, value, out)

    def step(self) -> StepInfo:
        lm, T = self.lm, self.timers
        n = lm.n_owned
        U, comps = self.U, self.comps
        if self.bdf2:
            self.Uold2[:, :] = self.Uold
            if self.n_steps:
                self.ddt = 2.0 * self.dt / 3.0
                bdf2_history(U, self.Uold2, self.Utime)
                extrapolate(U.reshape(-1), self.Uold2.reshape(-1), self.U_conv.reshape(-1))
            else:
                self.Utime[:, :] = U
                self.U_conv[:, :] = U
        self.Uold[:, :] = U
        self.n_steps += 1

        self._assemble_momentum()
        u_solves = self._predict()
        p_solves = [self._correct() for _ in range(self.n_corr)]

        with T("monitor"):
            dv = abs_divergence(lm.owner, lm.neighbour, self.phi, n, self.work)
            a, b = change_norms(U, self.Uold, self.vol, comps, n)
            dv, a, b = self.red.sum(dv, a, b)
        self.time += self.dt
        rms = np.sqrt(b / self.total_volume)
        if not np.isfinite(a + b + dv) or rms > DIVERGED_SPEED * self.u_ref:
            raise DivergenceError(
                f"solution diverged at t = {self.time:.6g} (rms |U| = {rms:.3g}, reference "
                f"speed {self.u_ref:g}); {self._advice}")
        change = np.sqrt(a / b) / self.dt if b > 0.0 else 0.0
        return StepInfo(u_solves, p_solves, self.dt * dv / self.total_volume, change)

    _advice = "try a smaller solver.dt"

    def _assemble_momentum(self) -> None:
        """Momentum matrix and right-hand side (without the pressure gradient) from the
        current flux and velocity; the pressure gradient of the current pressure."""
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        with T("assemble"):
            momentum_coeffs(lm.owner, lm.neighbour, self.phi, fc.gdiff, self.nu, self.vol,
                            self.ddt, bc.u_kind, self.diag, self.lower, self.upper)
            momentum_source(lm.owner, lm.neighbour, fc.weight, self.phi, fc.gdiff, self.nu,
                            self.vol, self.ddt, bc.u_kind, bc.u_value, self.U_conv, self.Utime,
                            self.linear, self.comps, self.b0, self.sf)
        if self.gradU is not None:
            self._explicit_momentum()
        with T("assemble"):
            self._relax_momentum()
            self.M.fill(self.diag, self.lower, self.upper)
            if self.u_pre is not None:
                self.u_pre.refresh()
        with T("fluxes"):
            self._gradient(self.p, bc.p_kind, bc.p_value, self.grad)

    def _relax_momentum(self) -> None:
        """Implicit under-relaxation of the momentum equation: none in PISO."""

    def _explicit_momentum(self) -> None:
        """Deferred parts that need velocity gradients: non-orthogonal diffusion and the
        linear-upwind correction (ghost values of U are current)."""
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        with T("fluxes"):
            velocity_boundary_values(lm.owner, self.sf, bc.u_kind, bc.u_value, self.U_conv,
                                     lm.n_internal, self.ub)
            for d in self.comps:
                self._gradient(self.U_conv[d], self.u_gkind, self.ub[d], self.gradU[d])
        with T("halo"):
            self.ex.exchange(self._gu_fields)
        with T("assemble"):
            if self.nonorth:
                nonorth_diffusion_source(lm.owner, lm.neighbour, fc.weight, fc.corr, self.gradU,
                                         self.comps, self.nu, self.b0)
            if self.linear_upwind:
                g = lm.geometry
                linear_upwind_source(lm.owner, lm.neighbour, self.phi, g.face_centres,
                                     self.fcn, g.cell_centres, self.gradU, self.comps, self.b0)

    def _predict(self) -> list:
        """Momentum predictor with the pressure gradient of the current pressure."""
        T = self.timers
        u_solves = []
        with T("solve_U"):
            for d in self.comps:
                np.multiply(self.vol, self.grad[d], out=self.rhs)
                np.subtract(self.b0[d], self.rhs, out=self.rhs)
                u_solves.append(bicgstab(self.M, self.rhs, self.U[d], self.u_cfg.tol,
                                         self.u_cfg.max_iter, self.red, self.ws,
                                         None if self.u_pre is None else self.u_pre.apply,
                                         self.u_cfg.rel_tol))
        with T("halo"):
            self.ex.exchange(self._u_fields)
        return u_solves

    def _correct(self) -> SolveInfo:
        """One PISO pressure correction: H/A, pressure equation, flux and velocity update."""
        info = self._pressure_equation()
        self._update()
        return info

    def _hbya(self) -> None:
        """H/A and V/A on owned cells from the momentum matrix and the current velocity."""
        n = self.lm.n_owned
        for d in self.comps:
            self.M.off_diagonal(self.U[d], self.work)
            np.subtract(self.b0[d, :n], self.work[:n], out=self.HbyA[d, :n])
            self.HbyA[d, :n] /= self.M.diag
        np.divide(self.vol[:n], self.M.diag, out=self.rAU[:n])

    def _flux_memory(self) -> None:
        """A correction of the predicted fluxes from the previous ones: none in PISO."""

    def _pressure_equation(self) -> SolveInfo:
        """Predicted fluxes of H/A and the pressure equation, solved into ``p``."""
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        with T("assemble"):
            self._hbya()
        # interior faces need no ghost value: with an overlapping strategy they are computed
        # while the messages fly, interface and boundary faces after
        pre = (lm.owner, lm.neighbour, fc.weight, self.sf, fc.gdiff, self.HbyA, self.rAU,
               bc.u_kind, bc.u_value, bc.p_kind, self.phiH, self.g)
        ni, nint = lm.n_internal, lm.n_interior
        with T("halo"):
            h = self.ex.start(self._h_fields)
        with T("fluxes"):
            if self.ex.overlaps:
                predicted_fluxes(*pre, 0, nint, False)
        with T("halo"):
            self.ex.finish(h)
        with T("fluxes"):
            predicted_fluxes(*pre, nint if self.ex.overlaps else 0, ni, True)
            self._flux_memory()
        if not self.nonorth:
            return self._solve_pressure(True)
        # the non-orthogonal part from the latest pressure gradient, ghosts included;
        # n_nonorth correctors repeat the solve with the part from the pressure just solved
        self.phiH0[:] = self.phiH
        for k in range(1 + self.n_nonorth):
            if k:
                with T("halo"):
                    self.ex.exchange(self._p_field)
                with T("fluxes"):
                    self._gradient(self.p, bc.p_kind, bc.p_value, self.grad)
                self.phiH[:] = self.phiH0
            with T("halo"):
                self.ex.exchange(self._gp_fields)
            with T("fluxes"):
                nonorth_flux_correction(lm.owner, lm.neighbour, fc.weight, fc.corr, self.rAU,
                                        self.grad, self.comps, self.phiH)
            last = self._solve_pressure(k == 0)
            if k == 0:
                info = last
            else:
                info.iters += last.iters
                info.res, info.converged = last.res, info.converged and last.converged
        return info

    def _solve_pressure(self, first: bool) -> SolveInfo:
        """Assemble and solve the pressure equation from ``phiH``; ``first``: the first solve
        of this corrector (the AMG is refreshed for the new matrix)."""
        lm, bc, T = self.lm, self.bc, self.timers
        n = lm.n_owned
        with T("assemble"):
            pressure_system(lm.owner, lm.neighbour, self.phiH, self.g, bc.p_kind, bc.p_value,
                            lm.n_cells, self.diag, self.lower, self.upper, self.rhs)
            if first:
                self.P.fill(self.diag, self.lower, self.upper)
            if self.p_singular:  # make the all-Neumann system consistent
                mean = self.red.sum(float(self.rhs[:n].sum()))[0] / lm.n_cells_global
                self.rhs[:n] -= mean
        with T("solve_p"):
            if first:
                self._before_p_solve()
            cfg = self.p_cfg
            if cfg.method == "amg-cg":
                if self.p_amg is None:  # aggregates from the first matrix, then refreshed
                    self.p_amg = AMG(self.P, lm, self.red, strategy=self.halo_name, timers=T)
                elif first:
                    self.p_amg.refresh()
                info = fcg(self.P, self.rhs, self.p, cfg.tol, cfg.max_iter, self.red, self.ws,
                           self.p_amg.apply, cfg.rel_tol)
            else:
                info = pcg(self.P, self.rhs, self.p, cfg.tol, cfg.max_iter, self.red, self.ws,
                           cfg.rel_tol)
            if self.p_singular:  # pin the free constant: zero mean pressure
                mean = self.red.sum(float(self.p[:n].sum()))[0] / lm.n_cells_global
                self.p[:n] -= mean
        return info

    def _before_p_solve(self) -> None:
        """Hook before the pressure solve (SIMPLE keeps the previous pressure)."""

    def _update(self) -> None:
        """Conservative fluxes from the new pressure, then U = H/A - (V/A) grad p."""
        lm, bc, T = self.lm, self.bc, self.timers
        n = lm.n_owned
        ni, nint = lm.n_internal, lm.n_interior
        cor = (lm.owner, lm.neighbour, self.phiH, self.g, self.p, bc.p_kind, bc.p_value,
               self.phi)
        grd = (self.p, bc.p_kind, bc.p_value, self.grad)
        with T("halo"):
            h = self.ex.start(self._p_field)
        with T("fluxes"):
            if self.ex.overlaps:
                correct_fluxes(*cor, 0, nint, False)
                self.gradient.part(*grd, True)
        with T("halo"):
            self.ex.finish(h)
        with T("fluxes"):
            correct_fluxes(*cor, nint if self.ex.overlaps else 0, ni, True)
            if not self.ex.overlaps:
                self.gradient.part(*grd, True)
            self.gradient.part(*grd, False)
            for d in self.comps:
                np.multiply(self.rAU[:n], self.grad[d, :n], out=self.work[:n])
                np.subtract(self.HbyA[d, :n], self.work[:n], out=self.U[d, :n])
        with T("halo"):
            self.ex.exchange(self._u_fields)


def make_solver(lmesh, exchanger, reducer, timers=NULL_TIMERS, *, solver, physics, boundary,
                initial, mesh, halo):
    """The solver of ``solver.algorithm``: transient PISO or steady SIMPLE(C), given the case
    sections it needs (``mesh``: the [mesh] table, for initial conditions tied to the box;
    ``halo``: the strategy name the AMG's coarse levels use)."""
    from types import SimpleNamespace

    case = SimpleNamespace(solver=solver, physics=physics, boundary=boundary, initial=initial,
                           mesh=mesh, parallel=SimpleNamespace(halo=halo))
    comm = reducer.comm
    if solver.algorithm == "simple":
        from .simple import SimpleSolver

        return SimpleSolver(lmesh, case, comm, exchanger, timers)
    return PisoSolver(lmesh, case, comm, exchanger, timers)


def solver_from_case(lmesh, case, exchanger, comm, timers=NULL_TIMERS):
    """:func:`make_solver` with the sections of a whole ``Case`` (tests, benchmarks)."""
    from ..parallel.reduce import Reducer

    return make_solver(lmesh, exchanger, Reducer(comm), timers, solver=case.solver,
                       physics=case.physics, boundary=case.boundary, initial=case.initial,
                       mesh=case.mesh, halo=case.parallel.halo)
