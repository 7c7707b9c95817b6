"""Spalart-Allmaras RANS: one transported viscosity, nu-tilde, gives the eddy viscosity.

The standard model as the NASA Turbulence Modeling Resource (TMR) states it, without the trip
term (``ft2 = 0``, "SA-noft2", the form TMR's verification results use)::

    D nt/Dt = cb1 S~ nt - cw1 fw (nt/d)^2 + (1/sigma) [div((nu + nt) grad nt) + cb2 |grad nt|^2]
    nu_t = nt fv1,  fv1 = chi^3 / (chi^3 + cv1^3),  chi = nt / nu

with ``S~ = Omega + S_bar``, ``S_bar = nt fv2 / (kappa d)^2``, ``fv2 = 1 - chi / (1 + chi fv1)``,
``fw = g ((1 + cw3^6) / (g^6 + cw3^6))^(1/6)``, ``g = r + cw2 (r^6 - r)``,
``r = min(nt / (S~ kappa^2 d^2), 10)``, ``Omega`` the vorticity magnitude and ``d`` the
distance to the nearest wall (computed across ranks, :mod:`haloflow.parallel.wall_distance`).
``S~`` never reaches zero: where ``S_bar < -cv2 Omega`` it is ``Omega + Omega (cv2^2 Omega +
cv3 S_bar) / ((cv3 - 2 cv2) Omega - S_bar)`` with ``cv2 = 0.7``, ``cv3 = 0.9`` (Allmaras,
Johnson & Spalart 2012, note 1(c), which TMR recommends).

Discretisation (:mod:`.transport`): the diffusion ``div((nu + nt)/sigma grad nt)`` is implicit
with the face value of ``nt``; the cb2 term is kept in the original non-conservative form as
an explicit source ``cb2/sigma |grad nt|^2`` (never negative, as TMR writes the model);
production is explicit, destruction implicit (``Sp = -cw1 fw nt / d^2``), convection upwind.
Negative nu-tilde is not modelled (no SA-neg): after each solve the owned values are clipped
at zero, so ``nu_t >= 0`` everywhere.  Boundary conditions: ``nt = 0`` on walls, ``nt =
nu_tilde_ratio nu`` (TMR: 3 nu) on inlets and on inflow through outlets, zero gradient on
symmetry planes.

In a step (see :mod:`haloflow.physics.closures`): ``solve`` after the pressure corrections
solves ``nt`` on the owned cells; its ghosts ride on the next step's exchange of ``H/A``, and
``refresh`` then makes ``nu_t`` on every local cell and ``nu_face``.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ...backends.layout import components
from ...parallel.wall_distance import wall_distance
from ..bcs import velocity_boundary_values
from ..patches import FIXED
from ..schemes import transposed_stress
from .transport import INLET_OUTLET, Transport, scalar_boundary

# published defaults (Spalart & Allmaras 1994, as listed by TMR); cw1 follows from them
COEFFICIENTS = {"cb1": 0.1355, "cb2": 0.622, "sigma": 2.0 / 3.0, "kappa": 0.41, "cw2": 0.3,
                "cw3": 2.0, "cv1": 7.1}
CV2, CV3 = 0.7, 0.9  # the S~ limiter's constants
R_MAX = 10.0


def cw1_of(c: dict) -> float:
    """``cw1 = cb1 / kappa^2 + (1 + cb2) / sigma``."""
    return c["cb1"] / c["kappa"] ** 2 + (1.0 + c["cb2"]) / c["sigma"]


@nb.njit(cache=True, inline="always")
def fv1_of(chi, cv1):
    c3 = chi * chi * chi
    return c3 / (c3 + cv1 * cv1 * cv1)


@nb.njit(cache=True)
def eddy_viscosity(nt, nu, cv1, nut):
    """``nut = nt fv1(nt / nu)`` on every local cell (``nt`` is never negative)."""
    for c in range(len(nt)):
        x = max(nt[c], 0.0)
        nut[c] = x * fv1_of(x / nu, cv1)


@nb.njit(cache=True)
def sa_sources(nt, d, gradU, gradnt, nu, coef, n_owned, Sp, Su):
    """``Su`` (production and the cb2 term) and ``Sp`` (destruction / nt) per unit volume on
    the owned cells; ``coef = (cb1, cb2, sigma, kappa, cw1, cw2, cw3, cv1)``."""
    cb1, cb2, sigma, kappa, cw1, cw2, cw3, cv1 = coef
    cw3_6 = cw3 ** 6
    for c in range(n_owned):
        x = max(nt[c], 0.0)
        wx = gradU[2, 1, c] - gradU[1, 2, c]
        wy = gradU[0, 2, c] - gradU[2, 0, c]
        wz = gradU[1, 0, c] - gradU[0, 1, c]
        omega = math.sqrt(wx * wx + wy * wy + wz * wz)
        chi = x / nu
        fv1 = fv1_of(chi, cv1)
        fv2 = 1.0 - chi / (1.0 + chi * fv1)
        kd2 = kappa * kappa * d[c] * d[c]
        sbar = x * fv2 / kd2
        if sbar >= -CV2 * omega:
            st = omega + sbar
        else:
            st = omega + omega * (CV2 * CV2 * omega + CV3 * sbar) / ((CV3 - 2.0 * CV2) * omega
                                                                      - sbar)
        r = R_MAX
        if st * kd2 > 0.0:
            r = min(x / (st * kd2), R_MAX)
        g = r + cw2 * (r ** 6 - r)
        fw = g * ((1.0 + cw3_6) / (g ** 6 + cw3_6)) ** (1.0 / 6.0)
        g2 = gradnt[0, c] ** 2 + gradnt[1, c] ** 2 + gradnt[2, c] ** 2
        Su[c] = cb1 * st * x + cb2 / sigma * g2
        Sp[c] = -cw1 * fw * x / (d[c] * d[c])


@nb.njit(cache=True)
def face_diffusivity(owner, neighbour, weight, nt, nu, sigma, kind, value, gamma):
    """``gamma = (nu + nt_f) / sigma``: linear on internal faces, the given value on fixed
    boundary faces, the cell's elsewhere."""
    ni = len(neighbour)
    for f in range(ni):
        w = weight[f]
        gamma[f] = (nu + w * nt[owner[f]] + (1.0 - w) * nt[neighbour[f]]) / sigma
    for f in range(ni, len(owner)):
        b = f - ni
        x = value[b] if kind[b] == FIXED else nt[owner[f]]
        gamma[f] = (nu + x) / sigma


@nb.njit(cache=True)
def boundary_values(owner, phi, kind, value, nt, n_internal, tb):
    """``tb[b]``: nu-tilde on boundary face ``b`` as its gradient sees it."""
    for b in range(len(kind)):
        f = n_internal + b
        k = kind[b]
        if k == FIXED or (k == INLET_OUTLET and phi[f] < 0.0):
            tb[b] = value[b]
        else:
            tb[b] = nt[owner[f]]


@nb.njit(cache=True)
def face_viscosity(owner, neighbour, weight, nu, nut, kind, nut_b, nu_face):
    """``nu_face = nu + nut_f``: linear inside, the boundary value on fixed faces (zero on
    walls), the owner cell's elsewhere."""
    ni = len(neighbour)
    for f in range(ni):
        w = weight[f]
        nu_face[f] = nu + w * nut[owner[f]] + (1.0 - w) * nut[neighbour[f]]
    for f in range(ni, len(owner)):
        b = f - ni
        nu_face[f] = nu + (nut_b[b] if kind[b] == FIXED else nut[owner[f]])


class SpalartAllmaras:
    """The SA closure on one rank (``ctx``: the solver's
    :class:`~haloflow.physics.context.Context`)."""

    name = "spalart_allmaras"

    def __init__(self, lmesh, physics, ctx):
        lm = lmesh
        n, nb_ = lm.n_cells, lm.n_faces - lm.n_internal
        self.lm, self.ctx = lm, ctx
        self.nu = nu = float(physics.nu)
        c = {k: float(getattr(physics, k)) for k in COEFFICIENTS}
        self.sigma, self.cv1 = c["sigma"], c["cv1"]
        self.coef = np.array([c["cb1"], c["cb2"], c["sigma"], c["kappa"], cw1_of(c), c["cw2"],
                              c["cw3"], c["cv1"]])
        walls = [p.name for p in lm.patches if ctx.boundary[p.name].type == "wall"]
        self.d = wall_distance(lm, ctx.red.comm, walls)
        inflow = float(physics.nu_tilde_ratio) * nu
        kind, value = scalar_boundary(lm, ctx.boundary, {"wall": 0.0, "inlet": inflow,
                                                         "outlet": inflow})
        s = ctx.solver
        self.eq = Transport("nu_tilde", lm, ctx.fc, ctx.pattern, ctx.exchanger, ctx.red,
                            ctx.workspace, ctx.scratch, ctx.timers, kind=kind, value=value,
                            convection="upwind", time_scheme=s.time_scheme, steady=ctx.steady,
                            settings=s.momentum,
                            relaxation=float(s.relaxation.nu_tilde) if ctx.steady else 1.0,
                            initial=inflow, lower_bound=0.0, gradient=ctx.gradient,
                            nonorth=ctx.nonorth)
        self.nt = self.eq.x
        self.nut = np.zeros(n)
        self.nut_b = np.zeros(nb_)  # nu_t on fixed boundary faces
        eddy_viscosity(value, nu, self.cv1, self.nut_b)
        self.nu_face = np.full(lm.n_faces, nu)
        self.gradU = components(3, 3, n)
        self.gradnt = components(3, n)
        self.ub = np.zeros((3, nb_))
        self.tb = np.zeros(nb_)
        self.gkind = ctx.bc.grad_kind
        self.ghosts = self.eq.ghosts
        self.stress = components(3, n)  # div(nut T(grad U)), for the momentum equation
        self._gnut = components(3, n)

    def start(self, flow) -> None:
        """``nu_face`` of the initial nu-tilde (uniform, so its ghosts are current)."""
        self.refresh()

    def solve(self, flow) -> None:
        """After the corrections: nu-tilde on the owned cells from the new velocity (ghosts
        current) and flux; nu-tilde's ghosts are those of the last ``H/A`` exchange, which
        carried the values this solve starts from."""
        lm, ctx = self.lm, self.ctx
        g, ni = lm.geometry, lm.n_internal
        eq = self.eq
        with ctx.timers("fluxes"):
            velocity_boundary_values(lm.owner, g.face_areas, ctx.bc.u_kind, ctx.bc.u_value,
                                     flow.U, ni, self.ub)
            for d in ctx.comps:
                ctx.gradient(flow.U[d], self.gkind, self.ub[d], self.gradU[d])
            boundary_values(lm.owner, flow.phi, eq.kind, eq.value, self.nt, ni, self.tb)
            ctx.gradient(self.nt, self.gkind, self.tb, self.gradnt)
        with ctx.timers("assemble"):
            sa_sources(self.nt, self.d, self.gradU, self.gradnt, self.nu, self.coef,
                       lm.n_owned, eq.Sp, eq.Su)
            face_diffusivity(lm.owner, lm.neighbour, ctx.fc.weight, self.nt, self.nu,
                             self.sigma, eq.kind, eq.value, eq.gamma)
        return eq.solve(flow.phi, flow.dt)

    def refresh(self) -> None:
        """``nu_t`` on every local cell and ``nu_face`` from nu-tilde, whose ghosts have just
        been exchanged."""
        lm, ctx = self.lm, self.ctx
        with ctx.timers("assemble"):
            eddy_viscosity(self.nt, self.nu, self.cv1, self.nut)
            face_viscosity(lm.owner, lm.neighbour, ctx.fc.weight, self.nu, self.nut,
                           self.eq.kind, self.nut_b, self.nu_face)
            transposed_stress(lm.owner, lm.neighbour, lm.geometry.face_areas, self.nu_face,
                              self.nu, self.gradU, lm.n_owned, self._gnut, self.stress)
        self.eq.refresh_gradient()

    def take_pending(self) -> tuple:
        """nu-tilde's gradient (non-orthogonal meshes), for the velocity's next exchange."""
        return self.eq.take_pending()

    def state(self) -> tuple[dict, dict]:
        """What a restart needs: nu-tilde and the face viscosity the next step assembles
        with (made from the previous step's nu-tilde)."""
        arrays, extra = self.eq.state()
        arrays["nu_face"] = (self.nu_face, "face")
        arrays["stress"] = (self.stress, "cell")
        arrays["gradU"] = (self.gradU.reshape(9, -1), "cell")  # the next stress's
        return arrays, extra

    def restore(self, values: dict, extra: dict) -> None:
        self.eq.restore(values, extra)
        self.nu_face[:] = values["nu_face"].reshape(-1)
        self.stress[...] = values["stress"].reshape(self.stress.shape)
        self.gradU[...] = values["gradU"].reshape(self.gradU.shape)
        eddy_viscosity(self.nt, self.nu, self.cv1, self.nut)
