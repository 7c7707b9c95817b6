"""Boundary conditions as per-boundary-face arrays, so kernels never look at patch names.

The condition each patch type sets is in :mod:`.patches`; here the case's ``[boundary]``
tables become the kinds and values of this rank's boundary faces.  Measuring a patch over all
ranks (its plane, its extent) goes through the run's reducer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from .patches import EMPTY, FIXED, PATCH_TYPES, SYMMETRY, ZERO_GRADIENT


@dataclass
class BoundaryArrays:
    u_kind: np.ndarray  # (n_boundary_faces,) int64
    u_value: np.ndarray  # (n_boundary_faces, 3)
    p_kind: np.ndarray  # (n_boundary_faces,) int64
    p_value: np.ndarray  # (n_boundary_faces,)

    def visited_owner(self, lmesh) -> np.ndarray:
        """:func:`visited_owner` of these boundary faces."""
        return visited_owner(lmesh, self.u_kind == EMPTY)

    @property
    def pressure_fixed_somewhere(self) -> bool:
        return bool(np.any(self.p_kind == FIXED))

    @property
    def grad_kind(self) -> np.ndarray:
        """Kinds for gradients of velocity components: every face that is not empty has a
        value (from :func:`velocity_boundary_values`)."""
        return np.where(self.u_kind == EMPTY, EMPTY, FIXED).astype(np.int64)


def visited_owner(lmesh, empty: np.ndarray) -> np.ndarray:
    """``lmesh.owner`` over the faces the kernels visit: the internal ones and the boundary
    faces up to the last one that is not ``empty`` (a mask over the boundary faces).  Empty
    patches carry no flux, force or gradient, and a 2D mesh lists them last (pitzDaily:
    24 450 of its 25 010 boundary faces), so every boundary loop ends before them with the
    same results (a view: nothing copied)."""
    live = np.flatnonzero(~empty)
    return lmesh.owner[:lmesh.n_internal + (int(live[-1]) + 1 if len(live) else 0)]


def build_boundary(lmesh, spec: dict, red=None) -> BoundaryArrays:
    """Per-face arrays for this rank's boundary faces from ``{patch: spec(type, U, p, ...)}``.

    Collective over the reducer ``red`` (None: this rank alone), since a parabolic inlet
    measures its patch on every rank: every rank must call it, whether or not it holds faces
    of that patch.
    """
    nb_ = lmesh.n_faces - lmesh.n_internal
    out = BoundaryArrays(
        u_kind=np.full(nb_, -1, dtype=np.int64), u_value=np.zeros((nb_, 3)),
        p_kind=np.full(nb_, -1, dtype=np.int64), p_value=np.zeros(nb_),
    )
    parabolic = []
    for patch in lmesh.patches:
        s = spec[patch.name]
        kind = PATCH_TYPES.get(s.type)
        if kind is None:
            raise ValueError(f"boundary.{patch.name}: unknown type {s.type!r} "
                             f"(expected one of {tuple(PATCH_TYPES)})")
        sl = _slice(lmesh, patch)
        out.u_kind[sl], out.p_kind[sl] = kind.u, kind.p
        if kind.u == FIXED:  # a wall's or an inlet's velocity
            u = getattr(s, "U", None)
            out.u_value[sl] = np.zeros(3) if u is None else np.asarray(u, dtype=float)
            profile = getattr(s, "profile", "uniform") if s.type == "inlet" else "uniform"
            if profile == "parabolic":
                parabolic.append(patch)
            elif profile == "table":
                out.u_value[sl] = table_values(lmesh, patch, s.table)
        if kind.p == FIXED:  # an outlet's pressure
            p = getattr(s, "p", None)
            out.p_value[sl] = 0.0 if p is None else float(p)
    if np.any(out.u_kind < 0):
        raise ValueError("some boundary faces belong to no patch")
    if parabolic:  # every rank lists every patch, so all of them get here
        if red is None:
            from ..parallel.reduce import self_reducer

            red = self_reducer()
        comps = solved_components(lmesh, out, red)
        for patch in parabolic:  # the same patches, in the same order, on every rank
            sl = _slice(lmesh, patch)
            out.u_value[sl] *= parabolic_shape(lmesh, patch, comps, red)[:, None]
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


def solved_components(lmesh, bc: BoundaryArrays, red) -> list[int]:
    """Velocity components to solve: all but the directions normal to ``empty`` patches
    (collective over the reducer ``red``)."""
    sf = lmesh.geometry.face_areas[lmesh.n_internal:][bc.u_kind == EMPTY]
    normal = np.zeros(3)
    if len(sf):
        n = np.abs(sf) / np.linalg.norm(sf, axis=1)[:, None]
        normal = (n > 0.5).any(axis=0).astype(float)
    total = red.array(normal, "max")
    return [d for d in range(3) if total[d] == 0.0]


def patch_frame(lmesh, patch, comps, red) -> tuple[np.ndarray, list[np.ndarray]]:
    """Unit normal of a (planar) patch and its tangential directions across the flow.

    The normal is the sum of the patch's area vectors over all ranks.  The tangential
    directions are the solved coordinate axes other than the one closest to the normal,
    projected onto the patch plane: ``y`` for a 2D channel inlet normal to ``x`` (also when
    the inlet is slanted), ``y`` and ``z`` for a 3D duct.
    """
    sf = lmesh.geometry.face_areas[patch.start:patch.start + patch.size]
    total = red.array(sf.sum(axis=0), "sum")
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


def parabolic_shape(lmesh, patch, comps, red) -> np.ndarray:
    """Per-face factor of a plane-channel (one tangential direction) or duct (two) profile
    with mean 1 over the patch.

    Each tangential coordinate is scaled to ``eta`` in [-1, 1] from the extent of the
    patch's points (min/max over all ranks).  A face gets the average of
    ``1.5 (1 - eta^2)`` over its own ``eta`` range rather than the value at its centre, so
    the flow rate is exactly ``U`` times the area on faces aligned with the axes, at any
    resolution; a duct gets the product of two such factors.
    """
    _, tangents = patch_frame(lmesh, patch, comps, red)
    shape = np.ones(patch.size)
    f0, f1 = patch.start, patch.start + patch.size
    ptr = lmesh.face_ptr[f0:f1 + 1]
    nodes = lmesh.face_nodes[ptr[0]:ptr[-1]]
    for t in tangents:
        s = lmesh.points[nodes] @ t
        lo = np.minimum.reduceat(s, ptr[:-1] - ptr[0]) if patch.size else np.zeros(0)
        hi = np.maximum.reduceat(s, ptr[:-1] - ptr[0]) if patch.size else np.zeros(0)
        smin = red.min(float(lo.min(initial=np.inf)))[0]
        smax = red.max(float(hi.max(initial=-np.inf)))[0]
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
    for b in range(len(owner) - n_internal):  # the faces of ``owner`` (see visited_owner)
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
