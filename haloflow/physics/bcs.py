"""Boundary conditions as per-boundary-face arrays, so kernels never look at patch names.

A patch type sets the condition of every field on it:

| type    | U                      | p                       |
|---------|------------------------|-------------------------|
| wall    | fixed (wall velocity)  | zero gradient           |
| inlet   | fixed (inlet velocity) | zero gradient           |
| outlet  | zero gradient          | fixed (outlet pressure) |
| empty   | none (2D front/back)   | none                    |
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIXED, ZERO_GRADIENT, EMPTY = 0, 1, 2
PATCH_TYPES = ("wall", "inlet", "outlet", "empty")


@dataclass
class BoundaryArrays:
    u_kind: np.ndarray  # (n_boundary_faces,) int64
    u_value: np.ndarray  # (n_boundary_faces, 3)
    p_kind: np.ndarray  # (n_boundary_faces,) int64
    p_value: np.ndarray  # (n_boundary_faces,)

    @property
    def pressure_fixed_somewhere(self) -> bool:
        return bool(np.any(self.p_kind == FIXED))


def build_boundary(lmesh, spec: dict) -> BoundaryArrays:
    """Per-face arrays for this rank's boundary faces from ``{patch: spec(type, U, p)}``."""
    nb = lmesh.n_faces - lmesh.n_internal
    out = BoundaryArrays(
        u_kind=np.full(nb, -1, dtype=np.int64), u_value=np.zeros((nb, 3)),
        p_kind=np.full(nb, -1, dtype=np.int64), p_value=np.zeros(nb),
    )
    for patch in lmesh.patches:
        s = spec[patch.name]
        sl = slice(patch.start - lmesh.n_internal, patch.start - lmesh.n_internal + patch.size)
        u = getattr(s, "U", None)
        p = getattr(s, "p", None)
        if s.type == "empty":
            out.u_kind[sl], out.p_kind[sl] = EMPTY, EMPTY
        elif s.type in ("wall", "inlet"):
            out.u_kind[sl], out.p_kind[sl] = FIXED, ZERO_GRADIENT
            out.u_value[sl] = np.zeros(3) if u is None else np.asarray(u, dtype=float)
        elif s.type == "outlet":
            out.u_kind[sl], out.p_kind[sl] = ZERO_GRADIENT, FIXED
            out.p_value[sl] = 0.0 if p is None else float(p)
        else:
            raise ValueError(f"boundary.{patch.name}: unknown type {s.type!r} "
                             f"(expected one of {PATCH_TYPES})")
    if np.any(out.u_kind < 0):
        raise ValueError("some boundary faces belong to no patch")
    return out


def solved_components(lmesh, bc: BoundaryArrays, comm) -> list[int]:
    """Velocity components to solve: all but the directions normal to ``empty`` patches."""
    from mpi4py import MPI

    sf = lmesh.geometry.face_areas[lmesh.n_internal:][bc.u_kind == EMPTY]
    normal = np.zeros(3)
    if len(sf):
        n = np.abs(sf) / np.linalg.norm(sf, axis=1)[:, None]
        normal = (n > 0.5).any(axis=0).astype(float)
    total = np.zeros(3)
    comm.Allreduce(normal, total, op=MPI.MAX)
    return [d for d in range(3) if total[d] == 0.0]
