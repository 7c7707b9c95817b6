"""Periodic (cyclic) patch pairs, joined into internal faces.

A pair of patches related by a translation (OpenFOAM's ``cyclic`` with a
``translational`` transform, or any two patches named in ``mesh.periodic``) becomes a set of
ordinary internal faces between the cells on either side.  Each joined face keeps the side
of its lower-numbered cell, as every internal face does, and records ``face_shift``: where the
neighbour cell sits as the owner sees it.  From then on a periodic neighbour is like any
other: the partitioner sees the connection, the local mesh makes it a ghost when another
rank owns it, and the halo exchange carries it, so a periodic pair split across ranks needs
no special code anywhere.

Faces are matched by their centres after the translation (which is measured from the two
patches' area-weighted centroids), and points by their positions, both with a tolerance
relative to the smallest edge of the two patches.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.spatial import cKDTree

from . import MeshError
from .core import Mesh, Patch, take_faces

MATCH_TOL = 1e-4  # of the smallest face-edge length on the two patches


def stitch(mesh: Mesh, pairs, where: str = "mesh.periodic") -> Mesh:
    """A new mesh with every ``(a, b)`` patch pair of ``pairs`` joined into internal faces.

    Raises :class:`MeshError` (naming ``where`` and the patches) when a pair cannot be
    joined: a missing patch, different face counts, patches not related by a translation,
    faces or points without a partner, or fewer than three cells across the period (a cell
    would then meet its own image, or meet one neighbour through two faces).
    """
    if not pairs:
        return mesh
    g = mesh.geom()
    names = [p.name for p in mesh.patches]
    seen: set[str] = set()
    joined: list[_Joined] = []
    for a, b in pairs:
        if a == b:
            raise MeshError(f"{where}: a patch cannot be periodic with itself ('{a}')")
        for name in (a, b):
            if name not in names:
                raise MeshError(f"{where}: the mesh has no patch '{name}' (its patches are: "
                                f"{', '.join(names)})")
            if name in seen:
                raise MeshError(f"{where}: patch '{name}' is in more than one periodic pair")
            seen.add(name)
        joined.append(_match(mesh, g, mesh.patch(a), mesh.patch(b), where))

    own = np.concatenate([j.owner for j in joined])
    nbr = np.concatenate([j.neighbour for j in joined])
    keep = np.concatenate([j.faces for j in joined])
    shift = np.concatenate([j.shift for j in joined])

    ni = mesh.n_internal
    if np.any(own == nbr):
        c = int(own[own == nbr][0])
        raise MeshError(f"{where}: cell {c} meets its own periodic image; periodic "
                        "directions need at least three cells")
    pairs_all = np.concatenate([
        np.stack([mesh.owner[:ni], mesh.neighbour], axis=1), np.stack([own, nbr], axis=1)])
    if len(np.unique(pairs_all, axis=0)) != len(pairs_all):
        raise MeshError(f"{where}: two cells meet both directly and through the periodic "
                        "pair; periodic directions need at least three cells")

    # internal faces: the old ones and the joined ones, in upper-triangular order
    faces = np.concatenate([np.arange(ni), keep])
    owner = np.concatenate([mesh.owner[:ni], own])
    order = np.lexsort((np.concatenate([mesh.neighbour, nbr]), owner))
    int_faces = faces[order]
    face_shift = np.concatenate([np.zeros((ni, 3)), shift])[order]
    neighbour = np.concatenate([mesh.neighbour, nbr])[order]
    owner = owner[order]

    patches, bfaces, start = [], [], len(int_faces)
    for p in mesh.patches:
        if p.name in seen:
            continue
        patches.append(Patch(p.name, start, p.size, p.kind))
        bfaces.append(np.arange(p.start, p.start + p.size))
        start += p.size
    all_faces = np.concatenate([int_faces] + bfaces).astype(np.int64)
    ptr, nodes = take_faces(mesh.face_ptr, mesh.face_nodes, all_faces)

    # the neighbour side's points: the same except on joined faces, where each pair maps its
    # own points (a corner point is on two pairs, with a different partner in each)
    shadow = nodes.copy()
    int_faces_of_slot = np.repeat(np.concatenate([int_faces, np.full(len(all_faces) -
                                                  len(int_faces), -1)]), np.diff(ptr))
    for j in joined:
        slot = np.isin(int_faces_of_slot, j.faces)
        lookup = np.arange(len(mesh.points))
        lookup[j.points[:, 0]] = j.points[:, 1]
        shadow[slot] = lookup[nodes[slot]]

    return Mesh(points=mesh.points, face_ptr=ptr, face_nodes=nodes,
                owner=np.concatenate([owner, mesh.owner[all_faces[len(int_faces):]]]),
                neighbour=neighbour.astype(np.int64), patches=patches, n_cells=mesh.n_cells,
                face_shift=face_shift, shadow_nodes=shadow)


class _Joined(NamedTuple):
    """One pair's joined faces: the cells either side, the face kept (the lower cell's
    side), its shift, and (kept-side point, other-side point) pairs."""

    owner: np.ndarray
    neighbour: np.ndarray
    faces: np.ndarray
    shift: np.ndarray
    points: np.ndarray


def _match(mesh: Mesh, g, pa: Patch, pb: Patch, where: str) -> _Joined:
    """Match the faces and points of one pair of patches."""
    what = f"{where}: patches '{pa.name}' and '{pb.name}'"
    if pa.size != pb.size:
        raise MeshError(f"{what} have {pa.size} and {pb.size} faces; periodic patches need "
                        "the same faces")
    if pa.size == 0:
        raise MeshError(f"{what} have no faces")
    fa = np.arange(pa.start, pa.start + pa.size)
    fb = np.arange(pb.start, pb.start + pb.size)
    sa, sb = g.face_areas[fa], g.face_areas[fb]
    area_a, area_b = np.linalg.norm(sa, axis=1), np.linalg.norm(sb, axis=1)
    na, nb_ = sa.sum(axis=0), sb.sum(axis=0)
    if np.linalg.norm(na + nb_) > 1e-6 * (area_a.sum() + area_b.sum()):
        raise MeshError(f"{what} are not related by a translation (their area vectors do not "
                        "cancel: rotational periodicity is not supported)")
    ca = (g.face_centres[fa] * area_a[:, None]).sum(axis=0) / area_a.sum()
    cb = (g.face_centres[fb] * area_b[:, None]).sum(axis=0) / area_b.sum()
    t = ca - cb  # moves patch b onto patch a

    edge = _min_edge(mesh, np.concatenate([fa, fb]))
    tol = MATCH_TOL * edge
    dist, ia = cKDTree(g.face_centres[fa]).query(g.face_centres[fb] + t)
    bad = np.flatnonzero(dist > tol)
    if len(bad) or len(np.unique(ia)) != len(ia):
        k = int(bad[0]) if len(bad) else 0
        x = g.face_centres[fb[k]]
        raise MeshError(f"{what}: face {int(fb[k])} of '{pb.name}' at "
                        f"({x[0]:.6g}, {x[1]:.6g}, {x[2]:.6g}) has no partner on "
                        f"'{pa.name}' after the translation ({t[0]:.6g}, {t[1]:.6g}, "
                        f"{t[2]:.6g}); the two patches' faces must match one to one")
    fa = fa[ia]  # fa[k] is the partner of fb[k]
    pa_own, pb_own = mesh.owner[fa], mesh.owner[fb]
    a_kept = pa_own < pb_own
    keep = np.where(a_kept, fa, fb)
    shift = np.where(a_kept[:, None], t, -t)  # a's side sees b's cell moved by +t

    # points: every point of a patch-a face has a partner point on patch b, at x - t
    pts_a = np.unique(_nodes_of(mesh, fa))
    pts_b = np.unique(_nodes_of(mesh, fb))
    dist, ib = cKDTree(mesh.points[pts_b]).query(mesh.points[pts_a] - t)
    if np.any(dist > tol):
        k = int(np.flatnonzero(dist > tol)[0])
        x = mesh.points[pts_a[k]]
        raise MeshError(f"{what}: point ({x[0]:.6g}, {x[1]:.6g}, {x[2]:.6g}) of '{pa.name}' "
                        f"has no partner on '{pb.name}' after the translation")
    a_to_b = np.stack([pts_a, pts_b[ib]], axis=1)
    pt_pairs = np.concatenate([a_to_b, a_to_b[:, ::-1]])  # kept point -> the other side's
    return _Joined(np.minimum(pa_own, pb_own), np.maximum(pa_own, pb_own), keep, shift,
                   pt_pairs)


def _nodes_of(mesh: Mesh, faces: np.ndarray) -> np.ndarray:
    return take_faces(mesh.face_ptr, mesh.face_nodes, faces)[1]


def _min_edge(mesh: Mesh, faces: np.ndarray) -> float:
    ptr, nodes = take_faces(mesh.face_ptr, mesh.face_nodes, faces)
    nxt = np.arange(len(nodes)) + 1
    nxt[ptr[1:] - 1] = ptr[:-1]  # the last point of a face closes onto its first
    e = np.linalg.norm(mesh.points[nodes] - mesh.points[nodes[nxt]], axis=1)
    return float(e.min())
