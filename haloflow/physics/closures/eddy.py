"""What every eddy-viscosity LES closure shares: the filter width, the velocity gradient,
the eddy viscosity on cells and its faces, and their place in a step and a checkpoint.

``nu_face = nu + nut_f``, with ``nut_f`` the linear interpolation of the cells' eddy
viscosity on internal faces, the owner cell's on boundary faces where the velocity is
extrapolated (outlets, symmetry planes), and zero where it is given (walls, inlets).  The
filter width is the cube root of the cell volume (OpenFOAM's ``cubeRootVol``), damped near
walls with ``physics.van_driest`` (:mod:`.vandriest`).  A subclass
gives ``eddy(flow)``: ``nut`` (and its SGS energy ``k``) on the owned cells from the
velocity gradient ``gradU[d, e] = d u_d / d x_e`` of those cells.  Eddy viscosity is never
negative: each model's formula is clipped at zero.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ...backends.layout import components
from ..bcs import velocity_boundary_values
from ..patches import FIXED
from ..schemes import transposed_stress


@nb.njit(cache=True)
def face_viscosity(owner, neighbour, weight, nu, nut, ukind, nu_face):
    """``nu_face = nu + nut_f`` on every face (see the module docstring)."""
    ni = len(neighbour)
    for f in range(ni):
        w = weight[f]
        nu_face[f] = nu + w * nut[owner[f]] + (1.0 - w) * nut[neighbour[f]]
    for f in range(ni, len(owner)):
        nu_face[f] = nu if ukind[f - ni] == FIXED else nu + nut[owner[f]]


@nb.njit(cache=True, inline="always")
def strain_invariants(g, c):
    """``(devD:D, tr(D))`` of the symmetric part ``D`` of the velocity gradient ``g[:, :, c]``."""
    dd = 0.0
    tr = g[0, 0, c] + g[1, 1, c] + g[2, 2, c]
    for i in range(3):
        for j in range(3):
            s = 0.5 * (g[i, j, c] + g[j, i, c])
            dd += s * s
    return dd - tr * tr / 3.0, tr


class EddyViscosity:
    """An algebraic or one-equation SGS closure on one rank (``ctx``: the solver's
    :class:`~haloflow.physics.context.Context`)."""

    name = ""

    def __init__(self, lmesh, physics, ctx):
        lm = lmesh
        n = lm.n_cells
        self.lm, self.ctx = lm, ctx
        self.nu = float(physics.nu)
        self.Ck = float(physics.Ck)
        self.Ce = float(physics.Ce)
        self.nut = np.zeros(n)
        self.k = np.zeros(n)  # the SGS kinetic energy (the model's estimate, or transported)
        self.nu_face = np.full(lm.n_faces, self.nu)
        self.delta = np.cbrt(lm.geometry.cell_volumes)
        self.damping = None  # physics.van_driest: the width damped near walls
        if getattr(physics, "van_driest", False):
            from .vandriest import VanDriest

            self.damping = VanDriest(lm, physics, ctx)
        self.gradU = components(3, 3, n)
        self.ub = np.zeros((3, lm.n_faces - lm.n_internal))
        self.gkind = ctx.bc.grad_kind
        self.ghosts = (self.nut,)
        self.stress = components(3, n)  # div(nut T(grad U)), for the momentum equation
        self._gnut = components(3, n)

    def start(self, flow) -> None:
        """The eddy viscosity of the initial velocity (its ghosts current), exchanged once."""
        self._gradient(flow)
        self._damp(flow)
        self.eddy(flow)
        self.ctx.exchanger.exchange(self.ghosts)
        self.refresh()

    def solve(self, flow) -> None:
        """After the corrections: ``nut`` of the new velocity on the owned cells."""
        self._gradient(flow)
        self._damp(flow)
        self.eddy(flow)

    def _damp(self, flow) -> None:
        """The van Driest width of the current velocity and the last ``nut`` (if asked)."""
        if self.damping is not None:
            with self.ctx.timers("fluxes"):
                self.damping.update(flow.U, self.nut, self.delta)

    def eddy(self, flow) -> None:
        raise NotImplementedError

    def refresh(self) -> None:
        """``nu_face`` from ``nut``, whose ghosts have just been exchanged, and the
        explicit stress of the same ``nut`` and the velocity gradient it came from."""
        lm, ctx = self.lm, self.ctx
        with ctx.timers("assemble"):
            face_viscosity(lm.owner, lm.neighbour, ctx.fc.weight, self.nu, self.nut,
                           ctx.bc.u_kind, self.nu_face)
            transposed_stress(lm.owner, lm.neighbour, lm.geometry.face_areas, self.nu_face,
                              self.nu, self.gradU, lm.n_owned, self._gnut, self.stress)

    def _gradient(self, flow) -> None:
        """``gradU`` on the owned cells of the current velocity (its ghosts current)."""
        lm, ctx = self.lm, self.ctx
        with ctx.timers("fluxes"):
            velocity_boundary_values(lm.owner, lm.geometry.face_areas, ctx.bc.u_kind,
                                     ctx.bc.u_value, flow.U, lm.n_internal, self.ub)
            for d in ctx.comps:
                ctx.gradient(flow.U[d], self.gkind, self.ub[d], self.gradU[d])

    def take_pending(self) -> tuple:
        """Ghost rows to carry with the next exchange of the velocity: none (an algebraic
        closure transports nothing)."""
        return ()

    def state(self) -> tuple[dict, dict]:
        """What a restart needs: ``nut``, the face viscosity and explicit stress the next
        step assembles with (built from the previous step's ``nut``), and the velocity
        gradient the next stress is built from."""
        return {"nut": (self.nut, "cell"), "nu_face": (self.nu_face, "face"),
                "stress": (self.stress, "cell"), "gradU": (self.gradU.reshape(9, -1), "cell")}, {}

    def restore(self, values: dict, extra: dict) -> None:
        self.nut[:] = values["nut"].reshape(-1)
        self.nu_face[:] = values["nu_face"].reshape(-1)
        self.stress[...] = values["stress"].reshape(self.stress.shape)
        self.gradU[...] = values["gradU"].reshape(self.gradU.shape)
