"""Transient incompressible Navier-Stokes: PISO on a collocated grid with Rhie-Chow fluxes.

Per step (implicit Euler): assemble momentum with the old face flux (implicit upwind, plus an
explicit correction to linear interpolation when ``convection = "linear"``), solve a
predictor, then ``n_correctors`` pressure corrections.  Face fluxes are built from the
interpolated ``H/A`` and a compact pressure gradient (Rhie-Chow), so the pressure equation
and the corrected fluxes are exactly consistent: after each corrector the fluxes are
divergence-free to the pressure solver's tolerance.  Velocity is stored as ``U[3, n_cells]``
so that each component is a contiguous field for the halo exchange.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
from mpi4py import MPI

from ..linalg.amg import AMG
from ..linalg.krylov import Reducer, SolveInfo, Workspace, bicgstab, fcg, pcg
from ..linalg.matrix import DistMatrix, Pattern
from ..linalg.precond import SymmetricGaussSeidel
from ..parallel.timers import NULL_TIMERS
from .bcs import EMPTY, FIXED, build_boundary, solved_components
from .schemes import face_coeffs, gauss_gradient, gauss_gradient_part

DIVERGED_SPEED = 1e3  # rms speed, in units of the largest boundary speed, taken as blow-up


class DivergenceError(RuntimeError):
    """The solution blew up (NaN/Inf, or speeds far beyond any boundary speed)."""


@dataclass
class StepInfo:
    u_solves: list  # SolveInfo per solved component
    p_solves: list  # SolveInfo per corrector
    continuity: float  # dt * volume-weighted mean |div phi| after the last corrector
    change: float  # ||U - U_old|| / (dt ||U||): relative change per unit time


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
        elif k != EMPTY:  # zero gradient: outflow carries the cell value
            diag[owner[f]] += max(phi[f], 0.0)


@nb.njit(cache=True)
def momentum_source(owner, neighbour, weight, phi, gdiff, nu, vol, dt, ukind, uvalue, U, Uold,
                    linear, comps, b0):
    """Right-hand side without the pressure gradient: time term, boundary values and the
    deferred correction from upwind to linear interpolation."""
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
        elif ukind[b] != EMPTY:
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

    def __init__(self, lmesh, case, comm, exchanger, timers=NULL_TIMERS):
        self.lm = lmesh
        self.comm = comm
        self.ex = exchanger
        self.timers = timers
        s = case.solver
        self.nu = float(case.physics.nu)
        self.dt = float(s.dt)
        self.n_corr = int(s.n_correctors)
        self.linear = s.convection == "linear"
        self.p_cfg = s.pressure
        self.u_cfg = s.momentum
        self.red = Reducer(comm)
        self.halo_name = case.parallel.halo
        self.p_amg = None

        lm = lmesh
        n, nf, ni = lm.n_cells, lm.n_faces, lm.n_internal
        self.bc = build_boundary(lm, case.boundary)
        self.comps = np.array(solved_components(lm, self.bc, comm), dtype=np.int64)
        self.fc = face_coeffs(lm)
        self.vol = lm.geometry.cell_volumes
        self.sf = lm.geometry.face_areas
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
        # scratch, allocated once
        self.Uold = np.zeros((3, n))
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

    def _global_any(self, flag: bool) -> bool:
        return self.comm.allreduce(bool(flag), op=MPI.LOR)

    def _gradient(self, field, kind, value, out):
        lm = self.lm
        gauss_gradient(lm.owner, lm.neighbour, self.fc.weight, self.sf, self.vol, field, kind,
                       value, out)

    def step(self) -> StepInfo:
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        n = lm.n_owned
        U, p, comps = self.U, self.p, self.comps
        self.Uold[:, :] = U

        with T("assemble"):
            momentum_coeffs(lm.owner, lm.neighbour, self.phi, fc.gdiff, self.nu, self.vol,
                            self.dt, bc.u_kind, self.diag, self.lower, self.upper)
            self.M.fill(self.diag, self.lower, self.upper)
            if self.u_pre is not None:
                self.u_pre.refresh()
            momentum_source(lm.owner, lm.neighbour, fc.weight, self.phi, fc.gdiff, self.nu,
                            self.vol, self.dt, bc.u_kind, bc.u_value, U, self.Uold, self.linear,
                            comps, self.b0)
            self._gradient(p, bc.p_kind, bc.p_value, self.grad)

        u_solves = []
        with T("solve_U"):
            for d in comps:
                np.multiply(self.vol, self.grad[d], out=self.rhs)
                np.subtract(self.b0[d], self.rhs, out=self.rhs)
                u_solves.append(bicgstab(self.M, self.rhs, U[d], self.u_cfg.tol,
                                         self.u_cfg.max_iter, self.red, self.ws,
                                         None if self.u_pre is None else self.u_pre.apply))
        with T("halo"):
            self.ex.exchange(self._u_fields)

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
                f"speed {self.u_ref:g}); try a smaller solver.dt")
        change = np.sqrt(a / b) / self.dt if b > 0.0 else 0.0
        return StepInfo(u_solves, p_solves, self.dt * dv / self.total_volume, change)

    def _correct(self) -> SolveInfo:
        """One PISO pressure correction: H/A, pressure equation, flux and velocity update."""
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        n = lm.n_owned
        with T("assemble"):
            for d in self.comps:
                self.M.off_diagonal(self.U[d], self.work)
                np.subtract(self.b0[d, :n], self.work[:n], out=self.HbyA[d, :n])
                self.HbyA[d, :n] /= self.M.diag
            np.divide(self.vol[:n], self.M.diag, out=self.rAU[:n])
        # interior faces need no ghost value: with an overlapping strategy they are computed
        # while the messages fly, interface and boundary faces after
        pre = (lm.owner, lm.neighbour, fc.weight, self.sf, fc.gdiff, self.HbyA, self.rAU,
               bc.u_kind, bc.u_value, bc.p_kind, self.phiH, self.g)
        ni, nint = lm.n_internal, lm.n_interior
        with T("halo"):
            h = self.ex.start(self._h_fields)
        with T("assemble"):
            if self.ex.overlaps:
                predicted_fluxes(*pre, 0, nint, False)
        with T("halo"):
            self.ex.finish(h)
        with T("assemble"):
            predicted_fluxes(*pre, nint if self.ex.overlaps else 0, ni, True)
            pressure_system(lm.owner, lm.neighbour, self.phiH, self.g, bc.p_kind, bc.p_value,
                            lm.n_cells, self.diag, self.lower, self.upper, self.rhs)
            self.P.fill(self.diag, self.lower, self.upper)
            if self.p_singular:  # make the all-Neumann system consistent
                mean = self.red.sum(float(self.rhs[:n].sum()))[0] / lm.n_cells_global
                self.rhs[:n] -= mean
        with T("solve_p"):
            cfg = self.p_cfg
            if cfg.method == "amg-cg":
                if self.p_amg is None:  # aggregates from the first matrix, then refreshed
                    self.p_amg = AMG(self.P, lm, self.comm, strategy=self.halo_name,
                                     reduce_stats=self.red.stats)
                else:
                    self.p_amg.refresh()
                info = fcg(self.P, self.rhs, self.p, cfg.tol, cfg.max_iter, self.red, self.ws,
                           self.p_amg.apply)
            else:
                info = pcg(self.P, self.rhs, self.p, cfg.tol, cfg.max_iter, self.red, self.ws)
            if self.p_singular:  # pin the free constant: zero mean pressure
                mean = self.red.sum(float(self.p[:n].sum()))[0] / lm.n_cells_global
                self.p[:n] -= mean
        cor = (lm.owner, lm.neighbour, self.phiH, self.g, self.p, bc.p_kind, bc.p_value,
               self.phi)
        grd = (lm.owner, lm.neighbour, fc.weight, self.sf, self.vol, self.p, bc.p_kind,
               bc.p_value, self.grad, nint)
        with T("halo"):
            h = self.ex.start(self._p_field)
        with T("assemble"):
            if self.ex.overlaps:
                correct_fluxes(*cor, 0, nint, False)
                gauss_gradient_part(*grd, True)
        with T("halo"):
            self.ex.finish(h)
        with T("assemble"):
            correct_fluxes(*cor, nint if self.ex.overlaps else 0, ni, True)
            if not self.ex.overlaps:
                gauss_gradient_part(*grd, True)
            gauss_gradient_part(*grd, False)
            for d in self.comps:
                np.multiply(self.rAU[:n], self.grad[d, :n], out=self.work[:n])
                np.subtract(self.HbyA[d, :n], self.work[:n], out=self.U[d, :n])
        with T("halo"):
            self.ex.exchange(self._u_fields)
        return info
