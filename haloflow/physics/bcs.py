"""Boundary conditions as per-boundary-face arrays, so kernels never look at patch names.

A patch type sets the condition of every field on it:

| type            | U                                   | p                       |
|-----------------|-------------------------------------|-------------------------|
| wall            | fixed (wall velocity)               | zero gradient           |
| inlet           | fixed (uniform, parabolic, table)   | zero gradient           |
| outlet          | zero gradient                       | fixed (outlet pressure) |
| symmetry, slip  | zero normal, zero-gradient tangential | zero gradient         |
| empty           | none (2D front/back)                | none                    |

Kernels see four kinds per face: ``FIXED`` (a value), ``ZERO_GRADIENT`` (the cell's value),
``SYMMETRY`` (the cell's velocity less its normal part; velocity only) and ``EMPTY``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

FIXED, ZERO_GRADIENT, EMPTY, SYMMETRY = 0, 1, 2, 3
PATCH_TYPES = ("wall", "inlet", "outlet", "symmetry", "slip", "empty")
PROFILES = ("uniform", "parabolic", "table")


@dataclass
class BoundaryArrays:
    u_kind: np.ndarray  # (n_boundary_faces,) int64
    u_value: np.ndarray  # (n_boundary_faces, 3)
    p_kind: np.ndarray  # (n_boundary_faces,) int64
    p_value: np.ndarray  # (n_boundary_faces,)

    @property
    def pressure_fixed_somewhere(self) -> bool:
        return bool(np.any(self.p_kind == FIXED))

    @property
    def grad_kind(self) -> np.ndarray:
        """Kinds for gradients of velocity components: every face that is not empty has a
        value (from :func:`velocity_boundary_values`)."""
        return np.where(self.u_kind == EMPTY, EMPTY, FIXED).astype(np.int64)


def build_boundary(lmesh, spec: dict, comm=None) -> BoundaryArrays:
    """Per-face arrays for this rank's boundary faces from ``{patch: spec(type, U, p, ...)}``.

    Collective over ``comm`` (a parabolic inlet measures its patch on every rank), so every
    rank must call it, whether or not it holds faces of that patch.
    """
    nb_ = lmesh.n_faces - lmesh.n_internal
    out = BoundaryArrays(
        u_kind=np.full(nb_, -1, dtype=np.int64), u_value=np.zeros((nb_, 3)),
        p_kind=np.full(nb_, -1, dtype=np.int64), p_value=np.zeros(nb_),
    )
    parabolic = []
    for patch in lmesh.patches:
        s = spec[patch.name]
        sl = _slice(lmesh, patch)
        u = getattr(s, "U", None)
        p = getattr(s, "p", None)
        if s.type == "empty":
            out.u_kind[sl], out.p_kind[sl] = EMPTY, EMPTY
        elif s.type in ("wall", "inlet"):
            out.u_kind[sl], out.p_kind[sl] = FIXED, ZERO_GRADIENT
            out.u_value[sl] = np.zeros(3) if u is None else np.asarray(u, dtype=float)
            profile = getattr(s, "profile", "uniform") if s.type == "inlet" else "uniform"
            if profile == "parabolic":
                parabolic.append(patch)
            elif profile == "table":
                out.u_value[sl] = table_values(lmesh, patch, s.table)
        elif s.type == "outlet":
            out.u_kind[sl], out.p_kind[sl] = ZERO_GRADIENT, FIXED
            out.p_value[sl] = 0.0 if p is None else float(p)
        elif s.type in ("symmetry", "slip"):
            out.u_kind[sl], out.p_kind[sl] = SYMMETRY, ZERO_GRADIENT
        else:
            raise ValueError(f"boundary.{patch.name}: unknown type {s.type!r} "
                             f"(expected one of {PATCH_TYPES})")
    if np.any(out.u_kind < 0):
        raise ValueError("some boundary faces belong to no patch")
    if parabolic:  # every rank lists every patch, so all of them get here
        if comm is None:
            from mpi4py import MPI

            comm = MPI.COMM_SELF
        comps = solved_components(lmesh, out, comm)
        for patch in parabolic:  # the same patches, in the same order, on every rank
            sl = _slice(lmesh, patch)
            out.u_value[sl] *= parabolic_shape(lmesh, patch, comps, comm)[:, None]
    return out


def table_values(lmesh, patch, path) -> np.ndarray:
    """Inlet velocity from a profile table at this rank's face centres of ``patch``."""
    from ..io.profile_table import read_table

    table = read_table(path)
    fc = lmesh.geometry.face_centres[patch.start:patch.start + patch.size]
    return table.at(fc[:, table.axis], f"boundary.{patch.name}.table ({path})")


def _slice(lmesh, patch) -> slice:
    b0 = patch.start - lmesh.n_internal
    return slice(b0, b0 + patch.size)


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


def patch_frame(lmesh, patch, comps, comm) -> tuple[np.ndarray, list[np.ndarray]]:
    """Unit normal of a (planar) patch and its tangential directions across the flow.

    The normal is the sum of the patch's area vectors over all ranks.  The tangential
    directions are the solved coordinate axes other than the one closest to the normal,
    projected onto the patch plane: ``y`` for a 2D channel inlet normal to ``x`` (also when
    the inlet is slanted), ``y`` and ``z`` for a 3D duct.
    """
    from mpi4py import MPI

    sf = lmesh.geometry.face_areas[patch.start:patch.start + patch.size]
    total = np.zeros(3)
    comm.Allreduce(sf.sum(axis=0), total, op=MPI.SUM)
    mag = np.linalg.norm(total)
    if mag == 0.0:
        raise ValueError(f"boundary.{patch.name}: a parabolic inlet needs a planar patch "
                         "(its area vectors sum to zero)")
    n = total / mag
    axes = [a for a in comps if a != max(comps, key=lambda a: abs(n[a]))]
    tangents = []
    for a in axes:
        t = np.eye(3)[a] - n[a] * n
        tangents.append(t / np.linalg.norm(t))
    return n, tangents


def parabolic_shape(lmesh, patch, comps, comm) -> np.ndarray:
    """Per-face factor of a plane-channel (one tangential direction) or duct (two) profile
    with mean 1 over the patch.

    Each tangential coordinate is scaled to ``eta`` in [-1, 1] from the extent of the
    patch's points (min/max over all ranks).  A face gets the average of
    ``1.5 (1 - eta^2)`` over its own ``eta`` range rather than the value at its centre, so
    the flow rate is exactly ``U`` times the area on faces aligned with the axes, at any
    resolution; a duct gets the product of two such factors.
    """
    from mpi4py import MPI

    _, tangents = patch_frame(lmesh, patch, comps, comm)
    shape = np.ones(patch.size)
    f0, f1 = patch.start, patch.start + patch.size
    ptr = lmesh.face_ptr[f0:f1 + 1]
    nodes = lmesh.face_nodes[ptr[0]:ptr[-1]]
    for t in tangents:
        s = lmesh.points[nodes] @ t
        lo = np.minimum.reduceat(s, ptr[:-1] - ptr[0]) if patch.size else np.zeros(0)
        hi = np.maximum.reduceat(s, ptr[:-1] - ptr[0]) if patch.size else np.zeros(0)
        smin = comm.allreduce(float(lo.min(initial=np.inf)), op=MPI.MIN)
        smax = comm.allreduce(float(hi.max(initial=-np.inf)), op=MPI.MAX)
        if not smax > smin:
            raise ValueError(f"boundary.{patch.name}: the patch has no extent across the "
                             "flow for a parabolic profile")
        a = 2.0 * (lo - smin) / (smax - smin) - 1.0
        b = 2.0 * (hi - smin) / (smax - smin) - 1.0
        shape *= 1.5 * (1.0 - (a * a + a * b + b * b) / 3.0)
    return shape


@nb.njit(cache=True)
def velocity_boundary_values(owner, sf, ukind, uvalue, U, n_internal, ub):
    """``ub[d, b]``: the velocity on boundary face ``b`` as gradients see it (fixed value,
    the cell's value, or the cell's value less its normal part on symmetry planes)."""
    for b in range(len(ukind)):
        k = ukind[b]
        o = owner[n_internal + b]
        if k == FIXED:
            for d in range(3):
                ub[d, b] = uvalue[b, d]
        elif k == ZERO_GRADIENT:
            for d in range(3):
                ub[d, b] = U[d, o]
        elif k == SYMMETRY:
            f = n_internal + b
            m = np.sqrt(sf[f, 0] ** 2 + sf[f, 1] ** 2 + sf[f, 2] ** 2)
            un = 0.0
            for d in range(3):
                un += U[d, o] * sf[f, d] / m
            for d in range(3):
                ub[d, b] = U[d, o] - un * sf[f, d] / m
        else:
            for d in range(3):
                ub[d, b] = 0.0
