"""The final velocity of a run gathered on rank 0, wall values included: what the profiles,
the wake length and the velocity plot are sampled from."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..io.probes import gather_cells, gather_rows, patch_faces


class Fields(NamedTuple):
    """Cell centres and velocities of every cell, face centres and velocities of every
    non-empty boundary face, in global order."""

    cc: np.ndarray
    uc: np.ndarray
    bxy: np.ndarray
    bu: np.ndarray


def gather_velocity(lmesh, bc, U, red) -> Fields | None:
    """Collective: the velocity on rank 0 (None elsewhere), through the run's Reducer."""
    from ..physics.patches import EMPTY

    n = lmesh.n_owned
    cc, uc = gather_cells(lmesh, red, lmesh.geometry.cell_centres[:n], U[:, :n].T)
    walls = [p.name for p in lmesh.patches
             if p.size == 0 or bc.u_kind[p.start - lmesh.n_internal] != EMPTY]
    f = patch_faces(lmesh, walls)
    b = f - lmesh.n_internal
    ub = np.where((bc.u_kind[b] == 0)[:, None], bc.u_value[b], U[:, lmesh.owner[f]].T)
    bc_xy = gather_rows(red, lmesh.geometry.face_centres[f])
    bu = gather_rows(red, ub)
    return Fields(cc, uc, bc_xy, bu) if red.rank == 0 else None
