"""The energy equation and Boussinesq buoyancy with a ``p_rgh`` pressure.

Temperature obeys ``dT/dt + div(phi T) = div(alpha grad T)`` with ``alpha = nu / Pr``, assembled
as the momentum equation is (implicit upwind convection with the old conservative flux and a
deferred correction to linear or to a TVD-limited linear value, orthogonal diffusion implicit,
the same time term) and solved by the same BiCGStab.  The solved pressure is
``p_rgh = p - rhok (g . x)`` with ``rhok = 1 - beta (T - T_ref)``; buoyancy enters on faces as
OpenFOAM's buoyantBoussinesq solvers do: ``phig = -(g . x_f) snGrad(rhok) rAU_f |S|`` joins
the predicted flux, and the cell force that momentum and the velocity correction see is the
reconstruction (least squares over the face normals) of
``(-(g . x_f) snGrad(rhok) - snGrad(p_rgh)) |S|``.  A fluid at rest in a stable stratification
then balances face by face: the pressure equation makes every face force zero and the
velocity stays zero.

Temperature ghosts travel in the first pressure correction's exchange of ``H/A``: the
equation is solved between the momentum predictor and the corrections (as
buoyantBoussinesqPimpleFoam does), so no exchange point gains a message; a limited scheme's
gradient of ``T`` is computed after that exchange and travels with the velocity's.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..backends.layout import components
from ..linalg.bicgstab import bicgstab
from ..linalg.matrix import DistMatrix
from ..linalg.measure import NormalisedResidual
from ..mesh.core import centre_deltas
from .closures.transport import relax_scalar
from .context import Context
from .patches import EMPTY, FIXED, FIXED_GRADIENT
from .schemes import LIMITERS, limited_source
from .time import scalar_levels

# -- kernels -----------------------------------------------------------------------------------


@nb.njit(cache=True)
def energy_system(owner, neighbour, weight, phi, gdiff, magsf, alpha, vol, ddt, tkind, tvalue,
                  T, Ttime, linear, diag, lower, upper, b):
    """Matrix and right-hand side of the temperature equation (the scalar twin of
    ``momentum_system``): fixed values diffuse to and convect the boundary value, fixed
    gradients add ``alpha |S| dT/dn``, other faces carry the cell value out (inflow explicit)."""
    ni = len(neighbour)
    for c in range(len(vol)):
        diag[c] = vol[c] / ddt
        b[c] = vol[c] / ddt * Ttime[c]
    for f in range(ni):
        F = phi[f]
        D = alpha * gdiff[f]
        upper[f] = -D + min(F, 0.0)
        lower[f] = -D - max(F, 0.0)
        o = owner[f]
        n = neighbour[f]
        diag[o] += D + max(F, 0.0)
        diag[n] += D - min(F, 0.0)
        if linear:
            w = weight[f]
            tl = w * T[o] + (1.0 - w) * T[n]
            corr = F * (tl - (T[o] if F >= 0.0 else T[n]))
            b[o] -= corr
            b[n] += corr
    for f in range(ni, len(owner)):
        k = tkind[f - ni]
        o = owner[f]
        if k == FIXED:
            D = alpha * gdiff[f]
            diag[o] += D
            b[o] += (D - phi[f]) * tvalue[f - ni]
        elif k == FIXED_GRADIENT:
            b[o] += alpha * magsf[f] * tvalue[f - ni]
            diag[o] += max(phi[f], 0.0)
            if phi[f] < 0.0:
                b[o] -= phi[f] * (T[o] + tvalue[f - ni] / gdiff[f] * magsf[f])
        elif k != EMPTY:
            diag[o] += max(phi[f], 0.0)
            if phi[f] < 0.0:
                b[o] -= phi[f] * T[o]


@nb.njit(cache=True)
def temperature_boundary_values(owner, gdiff, magsf, tkind, tvalue, T, n_internal, tb):
    """``tb[b]``: the temperature on boundary face ``b`` (fixed, extrapolated by the fixed
    gradient, or the cell's)."""
    for b in range(len(tkind)):
        f = n_internal + b
        o = owner[f]
        k = tkind[b]
        if k == FIXED:
            tb[b] = tvalue[b]
        elif k == FIXED_GRADIENT:
            tb[b] = T[o] + tvalue[b] * magsf[f] / gdiff[f]
        else:
            tb[b] = T[o]


@nb.njit(cache=True)
def buoyancy_flux(owner, neighbour, ghf, beta, T, tb, pkind, g, phiH):
    """``phiH += phig = -ghf snGrad(rhok) rAU_f |S| = ghf beta (T_N - T_P) g_f`` on internal
    faces and fixed-pressure boundary faces (elsewhere the flux is the wall's or inlet's)."""
    ni = len(neighbour)
    for f in range(ni):
        phiH[f] += ghf[f] * beta * (T[neighbour[f]] - T[owner[f]]) * g[f]
    for f in range(ni, len(owner)):
        if pkind[f - ni] == FIXED:
            phiH[f] += ghf[f] * beta * (tb[f - ni] - T[owner[f]]) * g[f]


@nb.njit(cache=True)
def reconstructed_gradient(owner, neighbour, gdiff, nhat, minv, ghf, beta, p, T, tb, pkind,
                           pvalue, grad):
    """``grad = -reconstruct(F)`` with the face force ``F = (-ghf snGrad(rhok) -
    snGrad(p_rgh)) |S|``: per cell ``Minv . sum_f n_f F_f`` (owner and neighbour alike, as
    OpenFOAM's ``fvc::reconstruct``).  Boundary faces of zero-gradient pressure carry no
    force (the fixed-flux pressure of a wall or inlet)."""
    ni = len(neighbour)
    n = minv.shape[0]
    grad[:, :n] = 0.0
    for f in range(ni):
        o = owner[f]
        m = neighbour[f]
        F = gdiff[f] * (p[m] - p[o] - ghf[f] * beta * (T[m] - T[o]))
        for d in range(3):
            a = nhat[f, d] * F
            if o < n:
                grad[d, o] += a
            if m < n:
                grad[d, m] += a
    for f in range(ni, len(owner)):
        b = f - ni
        if pkind[b] != FIXED:
            continue
        o = owner[f]
        F = gdiff[f] * (pvalue[b] - p[o] - ghf[f] * beta * (tb[b] - T[o]))
        for d in range(3):
            grad[d, o] += nhat[f, d] * F
    for c in range(n):
        g0 = grad[0, c]
        g1 = grad[1, c]
        g2 = grad[2, c]
        for d in range(3):
            grad[d, c] = minv[c, d, 0] * g0 + minv[c, d, 1] * g1 + minv[c, d, 2] * g2


def reconstruction_tensors(lmesh, skip, comps) -> np.ndarray:
    """Per owned cell the inverse of ``sum_f S S^T / |S|`` over its faces (``skip``: boundary
    faces left out, the empty ones); unsolved directions get an identity row."""
    lm = lmesh
    n, ni = lm.n_owned, lm.n_internal
    sf = lm.geometry.face_areas
    mag = np.linalg.norm(sf, axis=1)
    outer = sf[:, :, None] * sf[:, None, :] / mag[:, None, None]
    M = np.zeros((lm.n_cells, 3, 3))
    np.add.at(M, lm.owner[:ni], outer[:ni])
    np.add.at(M, lm.neighbour, outer[:ni])
    keep = ni + np.flatnonzero(~skip)
    np.add.at(M, lm.owner[keep], outer[keep])
    M = M[:n]
    for d in range(3):
        if d not in comps:
            M[:, d, :] = 0.0
            M[:, :, d] = 0.0
            M[:, d, d] = 1.0
    return np.ascontiguousarray(np.linalg.inv(M)) if n else np.zeros((0, 3, 3))


# -- the equation ------------------------------------------------------------------------------


class Energy:
    """Temperature ``T`` on one rank: its equation, its boundary conditions and the buoyancy
    it exerts (``beta``, ``g``, ``T_ref`` from ``[physics]``).

    ``state()`` names the cell fields a restart needs."""

    def __init__(self, ctx: Context, *, physics, scheme, settings, relaxation=1.0,
                 time_scheme="euler"):
        lm = ctx.lmesh
        fc, bc, comps, gradient, pattern = ctx.fc, ctx.bc, ctx.comps, ctx.gradient, ctx.pattern
        exchanger, red, workspace, scratch, timers = (ctx.exchanger, ctx.red, ctx.workspace,
                                                      ctx.scratch, ctx.timers)
        boundary, steady = ctx.boundary, ctx.steady
        n, ni = lm.n_cells, lm.n_internal
        self.lm, self.fc, self.ex, self.red, self.ws, self.timers = (
            lm, fc, exchanger, red, workspace, timers)
        self.cfg = settings
        self.normalised = None  # a NormalisedResidual: report OpenFOAM's initial residual
        self.alpha = float(physics.nu) / float(physics.Pr)
        self.beta = float(physics.beta)
        self.T_ref = float(physics.T_ref)
        self.relaxation = float(relaxation)
        self.steady = steady
        self.linear = scheme == "linear"
        g = np.asarray(physics.g, dtype=float)
        self.ghf = lm.geometry.face_centres @ g
        self.magsf = np.linalg.norm(lm.geometry.face_areas, axis=1)
        self.nhat = lm.geometry.face_areas / self.magsf[:, None]
        self.pkind, self.pvalue = bc.p_kind, bc.p_value
        self.tkind, self.tvalue = temperature_boundary(lm, boundary, self.alpha)
        self.minv = reconstruction_tensors(lm, bc.p_kind == EMPTY, comps)
        self.T = np.full(n, float(physics.T_init))
        self.T_old = np.zeros(n)  # T^n during a step
        self.bdf2 = time_scheme == "backward" and not steady
        self.T_old2 = np.zeros(n) if self.bdf2 else None  # T^(n-1)
        self.T_time = np.zeros(n) if self.bdf2 else self.T_old
        self._started = False
        self.tb = np.zeros(len(self.tkind))
        self.M = DistMatrix(pattern, exchanger, timers)
        self.diag, self.lower, self.upper, self.rhs = (
            scratch.diag, scratch.lower, scratch.upper, scratch.rhs)
        self.vol = lm.geometry.cell_volumes
        self.field = (self.T,)
        self.ex.exchange(self.field)  # once: afterwards T rides on the H/A exchange
        self._boundary_values()
        self.ni = ni
        self.limiter = LIMITERS.get(scheme, 0)
        self._pending = ()
        if self.limiter:  # the upwind cells' gradients, ghost rows included
            self.gradient, self.comps = gradient, comps
            self.d = centre_deltas(lm)
            self.gradT = components(3, n)
            self.gkind = np.where(self.tkind == EMPTY, EMPTY, FIXED)  # face values: tb
            self.grad_fields = tuple(self.gradT[d] for d in comps)
            self.refresh_gradient()
            self.ex.exchange(self.take_pending())  # once: afterwards with U's exchange

    def state(self) -> tuple[dict, dict]:
        """What a restart needs (see ``PisoSolver.checkpoint_state``): ``T`` and, under
        BDF2, ``T^(n-1)`` (kept in ``T_old`` between steps) and whether there is one yet."""
        arrays = {"T": (self.T, "cell")}
        if self.bdf2:
            arrays["T_old"] = (self.T_old, "cell")
        return arrays, {"T_bdf2_started": self._started}

    def restore(self, values: dict, extra: dict) -> None:
        self.T[:] = values["T"].reshape(-1)
        if self.bdf2:
            self.T_old[:] = values["T_old"].reshape(-1)
            self._started = bool(extra["T_bdf2_started"])
        self._boundary_values()
        if self.limiter:  # the gradient of the restored T, as the stopped run had it
            self.refresh_gradient()
            self.ex.exchange(self.take_pending())

    def refresh_gradient(self) -> None:
        """A limited scheme: ``grad T`` on the owned cells once the ghosts of ``T`` are
        current (after the first correction's exchange of ``H/A``); its ghost rows travel
        with the next exchange of the velocity (:meth:`take_pending`), in time for the next
        solve.  Nothing otherwise."""
        if not self.limiter:
            return
        with self.timers("fluxes"):
            self.gradient(self.T, self.gkind, self.tb, self.gradT)
        self._pending = self.grad_fields

    def take_pending(self) -> tuple:
        """The fields to add to the next exchange (the new gradient once), then none."""
        out, self._pending = self._pending, ()
        return out

    def _boundary_values(self) -> None:
        lm = self.lm
        temperature_boundary_values(lm.owner, self.fc.gdiff, self.magsf, self.tkind,
                                    self.tvalue, self.T, lm.n_internal, self.tb)

    def solve(self, phi, dt: float):
        """One implicit step (or relaxed steady iteration) of the temperature equation with
        the conservative flux ``phi``; ghost values of ``T`` are those of the last exchange
        of ``H/A``.  Returns the solve's info."""
        lm, fc, T = self.lm, self.fc, self.timers
        ddt = self._time_levels(dt)
        with T("assemble"):
            energy_system(lm.owner, lm.neighbour, fc.weight, phi, fc.gdiff, self.magsf,
                          self.alpha, self.vol, ddt, self.tkind, self.tvalue, self.T,
                          self.T_time, self.linear, self.diag, self.lower, self.upper,
                          self.rhs)
            if self.limiter:
                limited_source(lm.owner, lm.neighbour, fc.weight, phi, self.d, self.gradT,
                               self.comps, self.T, self.limiter, self.rhs)
            if self.relaxation != 1.0:
                relax_scalar(self.diag, self.T, self.relaxation, lm.n_owned, self.rhs)
            self.M.fill(self.diag, self.lower, self.upper)
        cfg = self.cfg
        res0 = None
        if self.normalised is not None:  # T's ghosts are current (the last H/A exchange)
            res0 = self.normalised(*self._rows)[0]
        with T("solve_U"):  # the phase of every transport solve (U, T)
            info = bicgstab(self.M, self.rhs, self.T, cfg.tol, cfg.max_iter, self.red,
                            self.ws, None, cfg.rel_tol)
        if res0 is not None:
            info.res0 = res0
        self._boundary_values()  # from owned cells only
        return info

    def measure_normalised(self) -> None:
        """Report OpenFOAM's normalised initial residual (``solver.residual_norm``)."""
        lm = self.lm
        self.normalised = NormalisedResidual(self.M, (0,), lm.n_owned, lm.n_cells_global,
                                             self.red)
        self._rows = self.T.reshape(1, -1), self.rhs.reshape(1, -1)  # views, made once

    def _time_levels(self, dt: float) -> float:
        """Keep the old levels; the time term's ``ddt`` (:func:`.time.scalar_levels`)."""
        if self.steady:
            return np.inf
        ddt, self._started = scalar_levels(self.T, self.T_old, self.T_old2, self.T_time, dt,
                                           self.bdf2, self._started)
        return ddt

    def add_buoyancy_flux(self, phiH, g) -> None:
        lm = self.lm
        with self.timers("fluxes"):
            buoyancy_flux(lm.owner, lm.neighbour, self.ghf, self.beta, self.T, self.tb,
                          self.pkind, g, phiH)

    def pressure_force(self, p, grad) -> None:
        """``grad``: minus the cell force of pressure and buoyancy, reconstructed from the
        faces (ghosts of ``p`` and ``T`` current)."""
        lm = self.lm
        with self.timers("fluxes"):
            reconstructed_gradient(lm.owner, lm.neighbour, self.fc.gdiff, self.nhat, self.minv,
                                   self.ghf, self.beta, p, self.T, self.tb, self.pkind,
                                   self.pvalue, grad)


def temperature_boundary(lmesh, boundary, alpha) -> tuple[np.ndarray, np.ndarray]:
    """Per boundary face: the kind (fixed value, fixed gradient, zero gradient, empty) and
    value of the temperature condition of each patch (a heat flux is ``alpha dT/dn``)."""
    nb_ = lmesh.n_faces - lmesh.n_internal
    kind = np.full(nb_, EMPTY, dtype=np.int64)
    value = np.zeros(nb_)
    from .patches import ZERO_GRADIENT

    for patch in lmesh.patches:
        s = boundary[patch.name]
        sl = slice(patch.start - lmesh.n_internal, patch.start - lmesh.n_internal + patch.size)
        if getattr(s, "T", None) is not None:
            kind[sl], value[sl] = FIXED, float(s.T)
        elif getattr(s, "T_gradient", None) is not None:
            kind[sl], value[sl] = FIXED_GRADIENT, float(s.T_gradient)
        elif getattr(s, "heat_flux", None) is not None:
            kind[sl], value[sl] = FIXED_GRADIENT, float(s.heat_flux) / alpha
        elif s.type != "empty":
            kind[sl] = ZERO_GRADIENT
    return kind, value
