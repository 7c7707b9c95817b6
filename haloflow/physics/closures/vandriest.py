"""Van Driest's damping of the LES filter width near walls (OpenFOAM's ``vanDriest`` delta).

An eddy-viscosity closure's length scale is the cube root of the cell volume everywhere;
next to a wall the eddies are smaller than that, and the viscous sublayer has none, so
``physics.van_driest = true`` limits the width by the mixing length of the wall distance
``y``, damped as in Van Driest (1956):

    Delta = min(V^(1/3), kappa / Cdelta (1 - exp(-y+ / A+)) y),   y+ = y / y*,

with ``kappa`` 0.41, ``A+`` 26 and ``Cdelta`` 0.158 (the published constants, OpenFOAM's
defaults).  ``y* = nu / u_tau`` belongs to the nearest wall face: ``u_tau^2 = (nu + nut)
|dU/dn|`` with ``dU/dn`` the velocity difference between the face and its cell over their
normal distance, and ``nut`` the cell's (the tutorial's zero-gradient ``nut`` at walls).
OpenFOAM carries ``y*`` out from the walls by a wave that stops at ``y+`` = 500; here each
cell takes it from its nearest wall face (found once, at set-up, on any rank), where the
damping is 1 to round-off anyway.  Each step gathers ``y*`` of every wall face on every rank
(one ``Allgatherv`` of a value per wall face): the price of the option, off by default.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ...mpiutil import UserError
from ...parallel import transfer
from ...parallel.wall_distance import gather_values, nearest_wall_face, wall_faces

SMALL = 1e-15  # OpenFOAM's: keeps the width above zero where the shear vanishes
VSMALL = 1e-300


@nb.njit(cache=True)
def wall_ystar(faces, owner, fc, cc, sf, U, uw, nu, nut, n_internal, out):
    """``y* = nu / sqrt((nu + nut) |U_cell - U_wall| / dn)`` on each wall face of ``faces``."""
    for i in range(len(faces)):
        f = faces[i]
        o = owner[f]
        a = math.sqrt(sf[f, 0] ** 2 + sf[f, 1] ** 2 + sf[f, 2] ** 2)
        dn = 0.0
        du = 0.0
        for d in range(3):
            dn += (fc[f, d] - cc[o, d]) * sf[f, d] / a
            du += (U[d, o] - uw[f - n_internal, d]) ** 2
        sn = math.sqrt(du) / max(abs(dn), VSMALL)
        out[i] = nu / math.sqrt((nu + nut[o]) * sn + VSMALL)


@nb.njit(cache=True)
def damped_delta(geometric, y, ystar, where, kappa, cdelta, aplus, n, delta):
    """``delta = min(geometric, kappa/Cdelta (1 + SMALL - exp(-y/y*/A+)) y)`` on cells
    ``0..n-1``; ``where[c]``: the position of the cell's nearest wall face in ``ystar``."""
    for c in range(n):
        if where[c] < 0:
            delta[c] = geometric[c]
            continue
        damp = (1.0 + SMALL) - math.exp(-y[c] / ystar[where[c]] / aplus)
        delta[c] = min(geometric[c], kappa / cdelta * damp * y[c])


class VanDriest:
    """The damped filter width of one rank's cells; ``update(U, nut, delta)`` per step."""

    def __init__(self, lmesh, physics, ctx):
        lm = lmesh
        self.lm, self.ctx = lm, ctx
        self.nu = float(physics.nu)
        self.kappa, self.cdelta = float(physics.kappa), float(physics.Cdelta)
        self.aplus = float(physics.Aplus)
        walls = [p.name for p in lm.patches if ctx.boundary[p.name].type == "wall"]
        comm = ctx.red.comm
        self.faces = wall_faces(lm, walls)
        self.y, nearest = nearest_wall_face(lm, comm, walls)
        # where each cell's nearest wall face sits in the gathered (rank-order) list
        gids = gather_values(lm.global_faces[self.faces].astype(np.float64), comm)
        gids = gids.astype(np.int64)
        if len(gids) == 0:  # the same on every rank: the gathered wall of the whole mesh
            raise UserError("physics.van_driest = true damps the filter width towards walls, "
                            "and this mesh has no patch of type \"wall\" (patches: "
                            f"{', '.join(p.name for p in lm.patches)}); set it false")
        order = np.argsort(gids)
        pos = np.searchsorted(gids[order], nearest)
        self.where = np.where(nearest < 0, -1, order[np.minimum(pos, max(len(gids) - 1, 0))])
        self.where = self.where.astype(np.int64)
        self.geometric = np.cbrt(lm.geometry.cell_volumes)
        self.ystar = np.zeros(len(self.faces))
        # every rank's y* each step: one Allgatherv into a buffer sized once
        self.gather = transfer.AllPieces(comm, transfer.allgather(comm, len(self.faces)))
        self.ystar_all = np.zeros(max(self.gather.total, 1))

    def update(self, U, nut, delta) -> None:
        """``delta`` on the owned cells from the current velocity and ``nut``."""
        lm, g = self.lm, self.lm.geometry
        wall_ystar(self.faces, lm.owner, g.face_centres, g.cell_centres, g.face_areas, U,
                   self.ctx.bc.u_value, self.nu, nut, lm.n_internal, self.ystar)
        self.gather.allgather(self.ystar, self.ystar_all)
        damped_delta(self.geometric, self.y, self.ystar_all, self.where, self.kappa, self.cdelta,
                     self.aplus, lm.n_owned, delta)
