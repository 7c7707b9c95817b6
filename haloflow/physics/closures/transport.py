"""A transported cell scalar of a closure (the SGS energy k, the SA viscosity nu-tilde).

``d(x)/dt + div(phi x) - div(gamma grad x) = Su + Sp x`` is assembled as the momentum
equation is: implicit upwind convection with the conservative face flux ``phi`` plus an
explicit (deferred) correction, the orthogonal part of diffusion implicit with a per-face
diffusivity, the flow's time scheme, and solved by the same Jacobi BiCGStab.  The caller
owns the physics; this module owns the discretisation.

API (kept stable; closures build on it)::

    s = Transport(name, lmesh, fc, pattern, exchanger, red, workspace, scratch, timers,
                  kind=..., value=..., convection="hybrid", time_scheme="euler",
                  steady=False, settings=solver.momentum, relaxation=1.0, initial=0.0,
                  lower_bound=0.0, gradient=None, nonorth=False)
    s.x          # (n_cells,) the field, ghosts included (owned rows solved)
    s.gamma      # (n_faces,) diffusivity per face: the caller fills it before solve()
    s.Sp, s.Su   # (n_cells,) source per unit volume, S = Su + Sp x; Sp > 0 is moved
                 # into Su at the current x, so the diagonal only grows
    s.solve(phi, dt) -> SolveInfo   # one implicit step; owned rows of x updated
    s.ghosts     # (x,): the fields whose ghosts the caller has carried (see below)
    s.state() / s.restore(values, extra)   # checkpoint entries "<name>" (+ "<name>_old")
    s.refresh_gradient(); s.take_pending()  # non-orthogonal meshes (see below)

Convection: ``"upwind"``; ``"linear"`` (deferred correction to linear interpolation, second
order, unbounded); ``"hybrid"`` (Spalding's hybrid scheme: the linear correction on faces
whose Peclet number ``|phi| / (gamma |S|/d)`` is at most 2, upwind elsewhere: the face
coefficients of the converged solution stay positive, so the field stays bounded).  After
every solve the owned values are clipped at ``lower_bound`` (OpenFOAM's ``bound(k, kMin)``),
so a field such as k is never negative whatever the scheme.  The time scheme is the flow's:
``"euler"`` or ``"backward"`` (BDF2, Euler on the first step), or ``steady`` (no time term,
``relaxation`` implicit under-relaxation).

Boundary conditions per boundary face (``kind``, ``value`` arrays; :func:`scalar_boundary`
builds them from the patch types): ``FIXED`` (the value diffuses in, and is convected in
where the flux enters), ``ZERO_GRADIENT`` (the cell's value; symmetry planes too),
``INLET_OUTLET`` (the value where the flux enters, zero gradient where it leaves) and
``EMPTY``.

Ghosts: the solve needs current ghost values of ``x`` when it assembles (the deferred
correction reads them) and leaves the ghost rows stale.  No exchange is added for them: the
caller hands ``s.ghosts`` to an exchange the flow already makes between two solves (the
closures put them into the first pressure correction's exchange of ``H/A``, as the energy
equation does with ``T``).  The solver's own iterations exchange their vectors as any solve
does.

Non-orthogonal meshes (``nonorth``: the flow defers the same correction for momentum): the
diffusion's non-orthogonal part ``gamma_f k . grad(x)_f`` is deferred as well, with the
gradient of ``x`` taken when its ghosts have arrived (``refresh_gradient``, after the first
correction's exchange); that gradient's ghost rows ride on the next exchange of the velocity
(``take_pending``), so the solve at the end of the step has them all, and no message is
added.  The gradient sees the given value on fixed boundary faces and the cell's elsewhere.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ...backends.layout import components
from ...linalg.bicgstab import bicgstab
from ...linalg.matrix import DistMatrix
from ..patches import EMPTY, FIXED, PATCH_TYPES, SYMMETRY, ZERO_GRADIENT
from ..time import scalar_levels

INLET_OUTLET = 5  # a scalar's condition only: the value on inflow, zero gradient on outflow
CONVECTION = {"upwind": 0, "linear": 1, "hybrid": 2}


@nb.njit(cache=True)
def scalar_system(owner, neighbour, weight, phi, gdiff, gamma, vol, ddt, kind, value, x, xtime,
                  scheme, Sp, Su, n_owned, diag, lower, upper, b):
    """Matrix and right-hand side of the scalar equation (the twin of ``energy_system`` with
    a diffusivity per face, a linearised source and the hybrid blend)."""
    ni = len(neighbour)
    for c in range(len(vol)):
        diag[c] = vol[c] / ddt
        b[c] = vol[c] / ddt * xtime[c]
    for c in range(n_owned):
        sp = Sp[c]
        su = Su[c]
        if sp > 0.0:  # keep the diagonal dominant: a growing part is explicit
            su += sp * x[c]
            sp = 0.0
        diag[c] -= sp * vol[c]
        b[c] += su * vol[c]
    for f in range(ni):
        F = phi[f]
        D = gamma[f] * gdiff[f]
        upper[f] = -D + min(F, 0.0)
        lower[f] = -D - max(F, 0.0)
        o = owner[f]
        n = neighbour[f]
        diag[o] += D + max(F, 0.0)
        diag[n] += D - min(F, 0.0)
        if scheme == 1 or (scheme == 2 and abs(F) <= 2.0 * D):
            w = weight[f]
            xl = w * x[o] + (1.0 - w) * x[n]
            corr = F * (xl - (x[o] if F >= 0.0 else x[n]))
            b[o] -= corr
            b[n] += corr
    for f in range(ni, len(owner)):
        k = kind[f - ni]
        o = owner[f]
        F = phi[f]
        if k == FIXED:
            D = gamma[f] * gdiff[f]
            diag[o] += D + max(F, 0.0)
            b[o] += (D - min(F, 0.0)) * value[f - ni]
        elif k == INLET_OUTLET:
            diag[o] += max(F, 0.0)
            b[o] -= min(F, 0.0) * value[f - ni]
        elif k != EMPTY:  # zero gradient: outflow carries the cell value, inflow explicit
            diag[o] += max(F, 0.0)
            if F < 0.0:
                b[o] -= F * x[o]


@nb.njit(cache=True)
def nonorth_scalar_source(owner, neighbour, weight, corr, grad, gamma, b):
    """Deferred non-orthogonal diffusion ``gamma_f k . grad(x)_f`` into the owner and out of
    the neighbour (``grad[e, cell]``, ghost rows current)."""
    for f in range(len(neighbour)):
        o = owner[f]
        n = neighbour[f]
        w = weight[f]
        s = 0.0
        for e in range(3):
            s += corr[f, e] * (w * grad[e, o] + (1.0 - w) * grad[e, n])
        b[o] += gamma[f] * s
        b[n] -= gamma[f] * s


@nb.njit(cache=True)
def gradient_boundary_values(kind, value, owner, x, n_internal, xb):
    """``xb[b]``: ``x`` on boundary face ``b`` as its gradient sees it: the given value on
    fixed faces, the cell's elsewhere."""
    for b in range(len(kind)):
        xb[b] = value[b] if kind[b] == FIXED else x[owner[n_internal + b]]


@nb.njit(cache=True)
def relax_scalar(diag, x, alpha, n, b):
    """Implicit under-relaxation ``diag /= alpha``, ``b += (1 - alpha)/alpha diag x``."""
    f = (1.0 - alpha) / alpha
    for c in range(n):
        b[c] += f * diag[c] * x[c]
        diag[c] /= alpha


@nb.njit(cache=True)
def clip_below(x, lo, n):
    """``x = max(x, lo)`` on the ``n`` owned rows."""
    for c in range(n):
        if x[c] < lo:
            x[c] = lo


class Transport:
    """One transported scalar on one rank (see the module docstring for the API)."""

    def __init__(self, name, lmesh, fc, pattern, exchanger, red, workspace, scratch, timers, *,
                 kind, value, convection="hybrid", time_scheme="euler", steady=False, settings,
                 relaxation=1.0, initial=0.0, lower_bound=0.0, gradient=None, nonorth=False):
        if convection not in CONVECTION:
            raise ValueError(f"unknown convection scheme {convection!r} for {name} "
                             f"(expected one of {tuple(CONVECTION)})")
        lm = lmesh
        n = lm.n_cells
        self.name, self.lm, self.fc, self.red, self.ws, self.timers = (
            name, lm, fc, red, workspace, timers)
        self.cfg = settings
        self.kind = np.ascontiguousarray(kind, dtype=np.int64)
        self.value = np.ascontiguousarray(value, dtype=float)
        self.scheme = CONVECTION[convection]
        self.steady = bool(steady)
        self.relaxation = float(relaxation)
        self.lower_bound = float(lower_bound)
        self.x = np.full(n, float(initial))
        self.gamma = np.zeros(lm.n_faces)
        self.Sp = np.zeros(n)
        self.Su = np.zeros(n)
        self.bdf2 = time_scheme == "backward" and not self.steady
        self.x_old = np.zeros(n)  # x^n during a step; x^(n-1) between steps under BDF2
        self.x_old2 = np.zeros(n) if self.bdf2 else None
        self.x_time = np.zeros(n) if self.bdf2 else self.x_old
        self._started = False
        self.M = DistMatrix(pattern, exchanger, timers)
        self.diag, self.lower, self.upper, self.rhs = (
            scratch.diag, scratch.lower, scratch.upper, scratch.rhs)
        self.vol = lm.geometry.cell_volumes
        self.ghosts = (self.x,)
        self._pending = ()
        self.grad = None  # nonorth: grad(x), ghost rows carried by the velocity's exchange
        if nonorth:
            self.gradient = gradient
            self.grad = components(3, n)
            self.gkind = np.where(self.kind == EMPTY, EMPTY, FIXED)  # face values: xb
            self.xb = np.zeros(len(self.kind))
            self.grad_fields = tuple(self.grad)

    def refresh_gradient(self) -> None:
        """Non-orthogonal meshes: ``grad(x)`` on the owned cells once the ghosts of ``x`` are
        current; its ghost rows are pending for the next exchange of the velocity."""
        if self.grad is None:
            return
        lm = self.lm
        with self.timers("fluxes"):
            gradient_boundary_values(self.kind, self.value, lm.owner, self.x, lm.n_internal,
                                     self.xb)
            self.gradient(self.x, self.gkind, self.xb, self.grad)
        self._pending = self.grad_fields

    def take_pending(self) -> tuple:
        """The ghost rows to carry with the next exchange of the velocity (once)."""
        out, self._pending = self._pending, ()
        return out

    def state(self) -> tuple[dict, dict]:
        """What a restart needs: ``x`` and, under BDF2, ``x^(n-1)`` and whether there is one."""
        arrays = {self.name: (self.x, "cell")}
        if not self.bdf2:
            return arrays, {}
        arrays[self.name + "_old"] = (self.x_old, "cell")
        return arrays, {self.name + "_bdf2_started": self._started}

    def restore(self, values: dict, extra: dict) -> None:
        self.x[:] = values[self.name].reshape(-1)
        if self.bdf2:
            self.x_old[:] = values[self.name + "_old"].reshape(-1)
            self._started = bool(extra[self.name + "_bdf2_started"])

    def solve(self, phi, dt: float):
        """One implicit step (or relaxed steady iteration) with the conservative flux ``phi``
        and the current ``gamma``, ``Sp``, ``Su``; ghost rows of ``x`` must be current.
        Returns the solve's info."""
        lm, fc, T = self.lm, self.fc, self.timers
        ddt = self._time_levels(dt)
        with T("assemble"):
            scalar_system(lm.owner, lm.neighbour, fc.weight, phi, fc.gdiff, self.gamma,
                          self.vol, ddt, self.kind, self.value, self.x, self.x_time,
                          self.scheme, self.Sp, self.Su, lm.n_owned, self.diag, self.lower,
                          self.upper, self.rhs)
            if self.grad is not None:
                nonorth_scalar_source(lm.owner, lm.neighbour, fc.weight, fc.corr, self.grad,
                                      self.gamma, self.rhs)
            if self.relaxation != 1.0:
                relax_scalar(self.diag, self.x, self.relaxation, lm.n_owned, self.rhs)
            self.M.fill(self.diag, self.lower, self.upper)
        cfg = self.cfg
        with T("solve_U"):  # the phase of every transport solve (U, T, closures)
            info = bicgstab(self.M, self.rhs, self.x, cfg.tol, cfg.max_iter, self.red,
                            self.ws, None, cfg.rel_tol)
            clip_below(self.x, self.lower_bound, lm.n_owned)
        return info

    def _time_levels(self, dt: float) -> float:
        """Keep the old levels; the time term's ``ddt`` (:func:`..time.scalar_levels`)."""
        if self.steady:
            return math.inf
        ddt, self._started = scalar_levels(self.x, self.x_old, self.x_old2, self.x_time, dt,
                                           self.bdf2, self._started)
        return ddt


def scalar_boundary(lmesh, boundary, values: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per boundary face the kind and value of a scalar's condition from the patch types:
    walls and inlets fixed, outlets inlet-outlet, symmetry and slip planes zero gradient,
    empty patches none.  ``values`` maps a patch type (``"wall"``, ``"inlet"``, ...) or a
    patch name to its value (the name wins); missing ones are 0."""
    nb_ = lmesh.n_faces - lmesh.n_internal
    kind = np.full(nb_, EMPTY, dtype=np.int64)
    value = np.zeros(nb_)
    for patch in lmesh.patches:
        t = boundary[patch.name].type
        sl = slice(patch.start - lmesh.n_internal, patch.start - lmesh.n_internal + patch.size)
        u = PATCH_TYPES[t].u
        value[sl] = float(values.get(patch.name, values.get(t, 0.0)))
        if u == FIXED:
            kind[sl] = FIXED
        elif u == ZERO_GRADIENT:
            kind[sl] = INLET_OUTLET
        elif u == SYMMETRY:
            kind[sl] = ZERO_GRADIENT
    return kind, value
