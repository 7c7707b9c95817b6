"""The momentum equation: assembly, the deferred explicit parts, and the predictor.

Convection is implicit upwind with the old face flux plus an explicit correction to linear
or linear-upwind interpolation (or on request linear wholly implicit, as OpenFOAM's);
diffusion is the orthogonal part implicit with the closure's effective viscosity per face,
and its non-orthogonal part deferred.  The time term is whatever the time scheme
(:mod:`.time`) hands over.  Velocity is stored as ``U[3, n]``
so that each component is a contiguous field for the halo exchange.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..backends.layout import components
from ..linalg.bicgstab import bicgstab
from ..linalg.lockstep import bicgstab_many, compiled_lockstep
from ..linalg.matrix import DistMatrix
from ..linalg.measure import NormalisedResidual
from ..linalg.precond import SymmetricGaussSeidel
from ..linalg.smoother import sgs, sgs_many
from ..mesh.core import centre_deltas
from ..parallel import threads
from .bcs import velocity_boundary_values
from .context import Context
from .patches import EMPTY, FIXED, SYMMETRY
from .schemes import (
    cubic_source,
    linear_upwind_source,
    nonorth_diffusion_source,
    transpose_stress_source,
)


@nb.njit(cache=True)
def momentum_system(owner, neighbour, weight, phi, gdiff, nu_f, vol, dt, ukind, uvalue, U,
                    Uold, linear, implicit, comps, diag, lower, upper, b0, sf):
    """Coefficients and right-hand side (without the pressure gradient) in one call:
    implicit upwind convection + orthogonal diffusion + Euler time term, and the time
    term's source, the boundary values and the deferred correction from upwind to linear
    interpolation.

    A symmetry face diffuses towards the cell's mirror image (velocity reflected, twice the
    face distance away), whose value lags by a step or iteration: the coefficients are
    those of a cell next to its mirror image, so a half domain converges to the same
    solution as the full, symmetric one.  ``nu_f``: per face, or one entry for all.

    ``implicit``: linear convection in the matrix instead (OpenFOAM's ``Gauss linear``; pass
    ``linear`` false): a zero-gradient face then puts its flux on the diagonal, in or out."""
    ni = len(neighbour)
    per_face = len(nu_f) > 1
    for c in range(len(vol)):
        diag[c] = vol[c] / dt
    for f in range(ni):
        F = phi[f]
        D = nu_f[f if per_face else 0] * gdiff[f]
        if implicit:
            w = weight[f]
            upper[f] = -D + (1.0 - w) * F
            lower[f] = -D - w * F
            diag[owner[f]] += D + w * F
            diag[neighbour[f]] += D - (1.0 - w) * F
            continue
        upper[f] = -D + min(F, 0.0)
        lower[f] = -D - max(F, 0.0)
        diag[owner[f]] += D + max(F, 0.0)
        diag[neighbour[f]] += D - min(F, 0.0)
    for d in comps:  # a pass per component on its own rows: twice as fast as one for all
        bd, ud, u = b0[d], Uold[d], U[d]
        for c in range(len(vol)):
            bd[c] = vol[c] / dt * ud[c]
        if not linear:
            continue
        for f in range(ni):
            o = owner[f]
            n = neighbour[f]
            F = phi[f]
            w = weight[f]
            ulin = w * u[o] + (1.0 - w) * u[n]
            uup = u[o] if F >= 0.0 else u[n]
            corr = F * (ulin - uup)
            bd[o] -= corr
            bd[n] += corr
    # comps indexed, not iterated, below: the caller passes a tuple, but given an array, one
    # iterated inside a branch costs numba a reference count per face (a fifth of this
    # kernel on pitzDaily's boundary)
    for f in range(ni, len(owner)):
        b = f - ni
        k = ukind[b]
        o = owner[f]
        if k == FIXED:
            D = nu_f[f if per_face else 0] * gdiff[f]
            diag[o] += D
            coef = D - phi[f]
            for j in range(len(comps)):
                d = comps[j]
                b0[d, o] += coef * uvalue[b, d]
        elif k == SYMMETRY:
            coef = 0.5 * nu_f[f if per_face else 0] * gdiff[f]
            diag[o] += coef
            m = np.sqrt(sf[f, 0] ** 2 + sf[f, 1] ** 2 + sf[f, 2] ** 2)
            un = 0.0
            for d in range(3):
                un += U[d, o] * sf[f, d] / m
            for j in range(len(comps)):
                d = comps[j]
                b0[d, o] += coef * (U[d, o] - 2.0 * un * sf[f, d] / m)
        elif k != EMPTY and implicit:  # zero gradient: the cell's value, either way
            diag[o] += phi[f]
        elif k != EMPTY:  # zero gradient: outflow carries the cell value, inflow explicit
            diag[o] += max(phi[f], 0.0)
            if phi[f] < 0.0:
                for j in range(len(comps)):
                    d = comps[j]
                    b0[d, o] -= phi[f] * U[d, o]


def _with_res0(solves: list, res0) -> list:
    """The solves' infos with their initial residuals replaced by ``res0`` (one per solve),
    or as they are where ``res0`` is None."""
    if res0 is not None:
        for info, r in zip(solves, res0, strict=True):
            info.res0 = r
    return solves


@nb.njit(cache=True)
def momentum_rhs(b0, vol, grad, comps, n, rhs):
    """``rhs[d] = b0[d] - V grad p[d]`` on the ``n`` owned rows of each component."""
    for d in comps:
        for c in range(n):
            rhs[d, c] = b0[d, c] - vol[c] * grad[d, c]


@nb.njit(cache=True)
def h_by_a_kernel(indptr, indices, data, diag_pos, diag, U, b0, vol, comps, HbyA, rAU):
    """``H/A = (b0 - (A - D) U) / D`` of each component (the neighbour sum in row order, the
    diagonal skipped) and ``V/A``, on the owned rows."""
    if len(comps) == 3:  # one pass over the matrix for the three
        u0, u1, u2, h0, h1, h2 = U[0], U[1], U[2], HbyA[0], HbyA[1], HbyA[2]
        c0, c1, c2 = b0[0], b0[1], b0[2]
        for i in range(len(diag)):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            for k in range(indptr[i], diag_pos[i]):
                a = data[k]
                j = indices[k]
                s0 += a * u0[j]
                s1 += a * u1[j]
                s2 += a * u2[j]
            for k in range(diag_pos[i] + 1, indptr[i + 1]):
                a = data[k]
                j = indices[k]
                s0 += a * u0[j]
                s1 += a * u1[j]
                s2 += a * u2[j]
            h0[i] = (c0[i] - s0) / diag[i]
            h1[i] = (c1[i] - s1) / diag[i]
            h2[i] = (c2[i] - s2) / diag[i]
    else:
        for d in comps:
            u, h, c = U[d], HbyA[d], b0[d]
            for i in range(len(diag)):
                s = 0.0
                for k in range(indptr[i], diag_pos[i]):
                    s += data[k] * u[indices[k]]
                for k in range(diag_pos[i] + 1, indptr[i + 1]):
                    s += data[k] * u[indices[k]]
                h[i] = (c[i] - s) / diag[i]
    for i in range(len(diag)):
        rAU[i] = vol[i] / diag[i]


@nb.njit(cache=True)
def relax_momentum(diag, U, comps, alpha, vol, inv_dt, n, b0):
    """``diag /= alpha`` and ``b0 += (1 - alpha)/alpha diag U`` on the owned rows, or where
    that adds less than ``V inv_dt`` to the diagonal, that: the local pseudo time step
    ``alpha/(1 - alpha) V/A`` of the relaxation is at most ``1/inv_dt``."""
    f = (1.0 - alpha) / alpha
    for c in range(n):
        add = max(f * diag[c], vol[c] * inv_dt)
        for d in comps:
            b0[d, c] += add * U[d, c]
        diag[c] = diag[c] / alpha if add == f * diag[c] else diag[c] + add


class Momentum:
    """The momentum equation of velocity ``U`` on one rank: its matrix ``M`` and right-hand
    side ``b0`` (without the pressure gradient), the predictor, and ``H/A``.

    ``nu_face`` is the closure's array, read at every assembly (a closure refreshes it in
    place), and ``stress`` the explicit part of its eddy stress (cell integrals on the owned
    rows), or None in laminar flow.  ``nonorth``: defer the non-orthogonal part of
    diffusion; it, linear-upwind and cubic convection need velocity gradients, whose ghost
    rows are exchanged.  ``implicit``: linear convection wholly in the matrix.
    ``transpose``: OpenFOAM's explicit ``div(nu dev2(T(grad U)))`` in laminar flow
    (:func:`~.schemes.transpose_stress_source`)."""

    def __init__(self, U, ctx: Context, nu_face, many, *, convection: str, settings,
                 stress=None, device=None, implicit: bool = False, transpose: bool = False):
        lm = lmesh = ctx.lmesh
        fc, bc, comps, gradient, pattern = ctx.fc, ctx.bc, ctx.comps, ctx.gradient, ctx.pattern
        exchanger, red, workspace, scratch, timers = (ctx.exchanger, ctx.red, ctx.workspace,
                                                      ctx.scratch, ctx.timers)
        nonorth = ctx.nonorth
        n, nf, ni = lm.n_cells, lm.n_faces, lm.n_internal
        self.U, self.lm, self.fc, self.bc, self.comps = U, lm, fc, bc, comps
        self.owner = bc.visited_owner(lm)  # empty patches left out of the face loops
        # the same as a tuple for the cell and face kernels: compiled for it, their loops over
        # the components unroll (pitzDaily: nonorth_diffusion_source and linear_upwind_source
        # 0.50x, relax_momentum 0.24x the time they take with the array)
        self.axes = tuple(int(d) for d in comps)
        self.gradient, self.nu_face, self.stress = gradient, nu_face, stress
        self.ex, self.red, self.ws, self.timers = exchanger, red, workspace, timers
        self.mws = many  # the lockstep solve's vectors (BiCGStab-Jacobi)
        self.device = None  # BiCGStab-Jacobi on a device backend (other methods: the host)
        if device is not None and settings.method == "bicgstab-jacobi":
            from ..linalg.device_bicgstab import DeviceBiCGStab

            self.device = DeviceBiCGStab(pattern, lmesh, exchanger, device)
        # every step ends by exchanging U (the velocity correction), so the predictor's
        # initial guess has current ghosts from the second step on
        self._ghosts_current = False
        self.cfg = settings
        self.normalised = None  # a NormalisedResidual: report OpenFOAM's initial residuals
        self.vol = lm.geometry.cell_volumes
        self.sf = lm.geometry.face_areas
        self.cubic = convection == "cubic"  # linear, and an explicit correction beyond it
        # linear convection in the matrix, or upwind there and the rest deferred
        self.implicit = implicit
        self.linear = (convection == "linear" and not self.implicit) or self.cubic
        self.linear_upwind = convection == "linear-upwind"
        self.nonorth = nonorth
        self.M = DistMatrix(pattern, exchanger, timers)
        self.pre = SymmetricGaussSeidel(self.M) if settings.method == "bicgstab-sgs" else None
        # assembled here, copied into M by fill(): the scratch the pressure equation reuses
        self.diag, self.lower, self.upper = scratch.diag, scratch.lower, scratch.upper
        self.rhs, self.work = scratch.rhs, scratch.work
        self.b0 = components(3, n)
        self.u_fields = tuple(U[d] for d in comps)
        fcs = lm.geometry.face_centres  # only linear-upwind reads them after set-up
        self.fcn = None if not self.linear_upwind else fcs if lm.face_shift is None else \
            np.ascontiguousarray(fcs[:ni] - lm.face_shift)  # as the neighbour sees them
        self.d = None  # owner-to-neighbour vectors, for cubic convection
        if self.cubic:
            self.d = centre_deltas(lm)
        self.transpose = transpose
        self.g3 = np.zeros((3, 3))  # a face's velocity gradient, for the transpose stress
        self.gradU = None
        if nonorth or self.linear_upwind or self.cubic or transpose:  # gradients, ghosts exchanged
            self.gradU = components(3, 3, n)
            self.ub = np.zeros((3, nf - ni))
            self.gkind = bc.grad_kind
            self._gu_fields = tuple(self.gradU[d, e] for d in comps for e in comps)

    def assemble(self, phi, U_conv, U_time, ddt: float) -> None:
        """Coefficients and right-hand side from the convecting flux ``phi``, the explicit
        parts at ``U_conv`` and the time term's ``V U_time / ddt``; :meth:`fill` then makes
        the matrix (after any under-relaxation of ``diag`` and ``b0``)."""
        lm, bc, fc = self.lm, self.bc, self.fc
        with self.timers("assemble"):
            momentum_system(self.owner, lm.neighbour, fc.weight, phi, fc.gdiff, self.nu_face,
                            self.vol, ddt, bc.u_kind, bc.u_value, U_conv, U_time, self.linear,
                            self.implicit, self.axes, self.diag, self.lower, self.upper,
                            self.b0, self.sf)
            if self.stress is not None:
                no = lm.n_owned
                self.b0[:, :no] += self.stress[:, :no]
        if self.gradU is not None:
            self._explicit(phi, U_conv)

    def _explicit(self, phi, U_conv) -> None:
        """Deferred parts that need velocity gradients: non-orthogonal diffusion, the
        linear-upwind or cubic correction and the transpose stress (ghost values of
        ``U_conv`` are current)."""
        lm, bc, fc, T = self.lm, self.bc, self.fc, self.timers
        with T("fluxes"):
            velocity_boundary_values(self.owner, self.sf, bc.u_kind, bc.u_value, U_conv,
                                     lm.n_internal, self.ub)
            for d in self.comps:
                self.gradient(U_conv[d], self.gkind, self.ub[d], self.gradU[d])
        with T("halo"):
            self.ex.exchange(self._gu_fields)
        with T("assemble"):
            if self.nonorth:
                nonorth_diffusion_source(lm.owner, lm.neighbour, fc.weight, fc.corr, self.gradU,
                                         self.axes, self.nu_face, self.b0)
            if self.linear_upwind:
                g = lm.geometry
                linear_upwind_source(lm.owner, lm.neighbour, phi, g.face_centres, self.fcn,
                                     g.cell_centres, self.gradU, self.axes, self.b0)
            if self.cubic:
                cubic_source(lm.owner, lm.neighbour, fc.weight, phi, self.d, U_conv, self.gradU,
                             self.axes, self.b0)
            if self.transpose:
                transpose_stress_source(self.owner, lm.neighbour, fc.weight, fc.gdiff, self.sf,
                                        self.nu_face, bc.u_kind, self.ub, U_conv, self.gradU,
                                        self.axes, self.g3, self.b0)

    def ghosts_stale(self) -> None:
        """The owned rows of ``U`` changed since its ghosts were exchanged: the next solve
        exchanges them first."""
        self._ghosts_current = False

    def relax(self, alpha: float, inv_dt: float = 0.0) -> None:
        """Implicit under-relaxation: ``A/alpha U = H + (1 - alpha)/alpha A U_old``, with at
        least ``V inv_dt`` added to ``A`` (see :func:`relax_momentum`)."""
        relax_momentum(self.diag, self.U, self.axes, alpha, self.vol, inv_dt,
                       self.lm.n_owned, self.b0)

    def fill(self) -> None:
        self.M.fill(self.diag, self.lower, self.upper)
        if self.pre is not None:
            self.pre.refresh()

    def predict(self, grad) -> list:
        """Solve for each component with the pressure gradient ``grad``; ghosts exchanged."""
        T = self.timers
        if self.device is not None:
            return self._predict_on_device(grad)
        if self.cfg.method == "bicgstab-jacobi" and (
                not threads.threaded()
                or compiled_lockstep(self.M, len(self.comps), self.red, self.mws)):
            # every component in one lockstep solve (threaded: compiled, on thread blocks)
            cfg = self.cfg
            with T("solve_U"):
                momentum_rhs(self.b0, self.vol, grad, self.comps, self.lm.n_owned,
                             self.mws.rhs)
                res0 = self._normalised(self.U, self.mws.rhs)
                # the velocity's ghosts exchanged at the end, inside the solve's call
                u_solves = bicgstab_many(self.M, self.U, self.comps, cfg.tol, cfg.max_iter,
                                         self.red, self.mws, cfg.rel_tol,
                                         self._ghosts_current, exchange_after=True)
                self._ghosts_current = True
            return _with_res0(u_solves, res0)
        if self.cfg.method == "sgs":  # every component's sweeps in lockstep
            cfg = self.cfg
            with T("solve_U"):
                momentum_rhs(self.b0, self.vol, grad, self.comps, self.lm.n_owned,
                             self.mws.rhs)
                res0 = self._normalised(self.U, self.mws.rhs)
                u_solves = sgs_many(self.M, self.U, self.comps, cfg.tol, cfg.max_iter,
                                    self.red, self.mws, cfg.rel_tol, cfg.n_sweeps,
                                    self._ghosts_current, exchange_after=True)
                self._ghosts_current = True
            return _with_res0(u_solves, res0)
        u_solves = []
        with T("solve_U"):
            for d in self.comps:
                np.multiply(self.vol, grad[d], out=self.rhs)
                np.subtract(self.b0[d], self.rhs, out=self.rhs)
                res0 = self._normalised(self.U[d:d + 1], self.rhs.reshape(1, -1), one=True)
                u_solves.append(_with_res0([self._solve(self.U[d])], res0)[0])
        with T("halo"):
            self.ex.exchange(self.u_fields)
        return u_solves

    def _predict_on_device(self, grad) -> list:
        """The components one after the other on the device (each as ``bicgstab`` solves
        it), then the velocity's ghosts exchanged on the host."""
        cfg, rhs = self.cfg, self.mws.rhs
        with self.timers("solve_U"):
            momentum_rhs(self.b0, self.vol, grad, self.comps, self.lm.n_owned, rhs)
            res0 = self._normalised(self.U, rhs)
            self.device.set_matrix(self.M)
            u_solves = [self.device.solve(rhs[d], self.U[d], cfg.tol, cfg.max_iter, self.red,
                                          cfg.rel_tol) for d in self.comps]
        with self.timers("halo"):
            self.ex.exchange(self.u_fields)
        self._ghosts_current = True
        return _with_res0(u_solves, res0)

    def _normalised(self, X, B, one: bool = False):
        """OpenFOAM's normalised initial residual of each component (``X[d]``, ``B[d]``),
        or None unless asked for; ``one``: of the single component in row 0.  The velocity's
        ghosts are made current first."""
        if self.normalised is None:
            return None
        if not self._ghosts_current:
            with self.timers("halo"):
                self.ex.exchange(self.u_fields)
            self._ghosts_current = True
        return (self._normalised_one if one else self.normalised)(X, B)

    def measure_normalised(self) -> None:
        """Report OpenFOAM's normalised initial residuals (``solver.residual_norm``)."""
        lm = self.lm
        self.normalised = NormalisedResidual(self.M, self.axes, lm.n_owned,
                                             lm.n_cells_global, self.red)
        self._normalised_one = NormalisedResidual(self.M, (0,), lm.n_owned,
                                                  lm.n_cells_global, self.red)

    def _solve(self, x):
        """``M x = rhs`` by the configured method: BiCGStab (Jacobi or SGS preconditioned)
        or symmetric Gauss-Seidel sweeps alone."""
        cfg = self.cfg
        if cfg.method == "sgs":
            return sgs(self.M, self.rhs, x, cfg.tol, cfg.max_iter, self.red, self.ws,
                       cfg.rel_tol, cfg.n_sweeps)
        return bicgstab(self.M, self.rhs, x, cfg.tol, cfg.max_iter, self.red, self.ws,
                        None if self.pre is None else self.pre.apply, cfg.rel_tol)

    def h_by_a(self, HbyA, rAU) -> None:
        """``H/A`` and ``V/A`` on owned cells from the matrix and the current velocity."""
        M = self.M
        if threads.threaded():  # the threaded neighbour product, a component at a time
            n = self.lm.n_owned
            for d in self.comps:
                M.off_diagonal(self.U[d], self.work)
                np.subtract(self.b0[d, :n], self.work[:n], out=HbyA[d, :n])
                HbyA[d, :n] /= M.diag
            np.divide(self.vol[:n], M.diag, out=rAU[:n])
            return
        p = M.pattern
        h_by_a_kernel(p.indptr, p.indices, M.data, p.diag_pos, M.diag, self.U, self.b0,
                      self.vol, self.comps, HbyA, rAU)
