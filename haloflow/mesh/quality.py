"""Mesh quality, the way OpenFOAM's ``checkMesh`` measures it.

A mesh is *broken* (``Report.problems``) when the solver cannot trust it: inconsistent
topology, open cells, faces pointing into their owner, zero or negative volumes,
non-orthogonality of 90 degrees or more, skewness above 4, a boundary with a hole.  Severe
but workable non-orthogonality (above 70 degrees) and what the reader had to decide are
warnings.  Definitions follow OpenFOAM (``primitiveMeshTools``), so the numbers compare
with ``checkMesh`` output for the same mesh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from .core import Mesh

__all__ = ["Report", "cell_fields", "check"]

CLOSED_TOL = 1e-6  # cell and boundary openness (checkMesh's closedThreshold)
NON_ORTH_WARN = 70.0  # degrees
SKEW_MAX = 4.0
PYR_TOL = 1e-12  # face pyramid volume, relative to |S|^1.5
ROOTVSMALL = 1e-150
OVERLAP_TOL = 1e-9  # cells' total volume above the bounding box's, relative: overlapping cells


@nb.njit(cache=True)
def _face_metrics(points, face_ptr, face_nodes, owner, neighbour, fc, sf, cc, shift,
                  nonorth, skew, pyr):
    """Per face: non-orthogonality (degrees, internal faces), skewness, and the face
    pyramid volumes seen from the owner and the neighbour (positive when oriented right).
    ``shift`` moves a periodic neighbour next to the face (zero elsewhere)."""
    ni = len(neighbour)
    for f in range(len(owner)):
        o = owner[f]
        sx, sy, sz = sf[f, 0], sf[f, 1], sf[f, 2]
        smag = math.sqrt(sx * sx + sy * sy + sz * sz)
        px, py, pz = fc[f, 0] - cc[o, 0], fc[f, 1] - cc[o, 1], fc[f, 2] - cc[o, 2]
        pyr[f, 0] = (sx * px + sy * py + sz * pz) / 3.0
        if f < ni:
            n = neighbour[f]
            cnx, cny, cnz = cc[n, 0] + shift[f, 0], cc[n, 1] + shift[f, 1], cc[n, 2] + shift[f, 2]
            dx, dy, dz = cnx - cc[o, 0], cny - cc[o, 1], cnz - cc[o, 2]
            dmag = math.sqrt(dx * dx + dy * dy + dz * dz)
            ds = dx * sx + dy * sy + dz * sz
            if dmag * smag > 0.0:
                c = min(1.0, max(-1.0, ds / (dmag * smag)))
                nonorth[f] = math.degrees(math.acos(c))
            else:
                nonorth[f] = 90.0
            pyr[f, 1] = (sx * (cnx - fc[f, 0]) + sy * (cny - fc[f, 1])
                         + sz * (cnz - fc[f, 2])) / 3.0
            scale = 0.2 * dmag
        else:
            # the owner-to-face vector's normal part stands in for the missing neighbour
            inv = 1.0 / (smag + ROOTVSMALL)
            nx, ny, nz = sx * inv, sy * inv, sz * inv
            dn = nx * px + ny * py + nz * pz
            dx, dy, dz = nx * dn, ny * dn, nz * dn
            ds = dx * sx + dy * sy + dz * sz
            scale = 0.4 * abs(dn)
        # skew vector: face centre minus where the centre-to-centre line crosses the face
        t = (sx * px + sy * py + sz * pz) / (ds + ROOTVSMALL)
        vx, vy, vz = px - t * dx, py - t * dy, pz - t * dz
        vmag = math.sqrt(vx * vx + vy * vy + vz * vz)
        inv = 1.0 / (vmag + ROOTVSMALL)
        hx, hy, hz = vx * inv, vy * inv, vz * inv
        # normalised by the face's extent in the skew direction
        fd = scale + ROOTVSMALL
        for k in range(face_ptr[f], face_ptr[f + 1]):
            q = face_nodes[k]
            e = abs(hx * (points[q, 0] - fc[f, 0]) + hy * (points[q, 1] - fc[f, 1])
                    + hz * (points[q, 2] - fc[f, 2]))
            fd = max(fd, e)
        skew[f] = vmag / fd


@nb.njit(cache=True)
def _closedness(owner, neighbour, sf, sums, mags):
    """Per cell: sum of outward area vectors and of their component magnitudes."""
    ni = len(neighbour)
    for f in range(len(owner)):
        o = owner[f]
        for d in range(3):
            sums[o, d] += sf[f, d]
            mags[o, d] += abs(sf[f, d])
        if f < ni:
            n = neighbour[f]
            for d in range(3):
                sums[n, d] -= sf[f, d]
                mags[n, d] += abs(sf[f, d])


@nb.njit(cache=True)
def _cell_max(owner, neighbour, values, out):
    """Per cell: the largest value over its faces (internal faces count for both cells)."""
    ni = len(neighbour)
    for f in range(len(owner)):
        out[owner[f]] = max(out[owner[f]], values[f])
        if f < ni:
            out[neighbour[f]] = max(out[neighbour[f]], values[f])


@dataclass
class Report:
    """What ``check`` found.  ``problems`` non-empty means the mesh is broken."""

    n_points: int
    n_faces: int
    n_internal: int
    n_cells: int
    patches: list[tuple[str, str, int]]  # name, kind, faces
    cell_shapes: dict[str, int] = field(default_factory=dict)
    bounds: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    volume_min: float = math.nan
    volume_max: float = math.nan
    volume_total: float = math.nan
    non_orth_max: float = 0.0
    non_orth_avg: float = 0.0
    skew_max: float = 0.0
    openness_max: float = 0.0
    boundary_openness: tuple[float, float, float] = (0.0, 0.0, 0.0)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        """The report as text, checkMesh's order: sizes, patches, geometry, verdict."""
        out = [f"  points  {self.n_points}",
               f"  faces   {self.n_faces} ({self.n_internal} internal)",
               f"  cells   {self.n_cells}"
               + (" (" + ", ".join(f"{n} {k}" for k, n in self.cell_shapes.items() if n) + ")"
                  if self.cell_shapes else "")]
        out.append("  patches:")
        width = max([len(n) for n, _, _ in self.patches] + [4])
        out += [f"    {n:<{width}}  {k:<8}  {s:>8} faces" for n, k, s in self.patches]
        if self.bounds is not None:
            lo, hi = self.bounds
            out += [f"  bounding box  ({' '.join(f'{x:.6g}' for x in lo)}) "
                    f"({' '.join(f'{x:.6g}' for x in hi)})",
                    f"  cell volume   min {self.volume_min:.6g}  max {self.volume_max:.6g}  "
                    f"total {self.volume_total:.6g}",
                    f"  non-orthogonality  max {self.non_orth_max:.4g} deg  average "
                    f"{self.non_orth_avg:.4g} deg",
                    f"  skewness      max {self.skew_max:.4g}",
                    f"  cell openness max {self.openness_max:.3g}, boundary openness "
                    f"({' '.join(f'{x:.3g}' for x in self.boundary_openness)})"]
        out += [f"  warning: {w}" for w in self.warnings]
        out += [f"  *** {p}" for p in self.problems]
        out.append("Mesh OK." if self.ok else f"Failed {len(self.problems)} mesh check(s).")
        return out


def topology_problems(m: Mesh) -> list[str]:
    """Inconsistencies that would make the geometry kernels read out of bounds."""
    probs = []
    ptr, nodes = np.asarray(m.face_ptr), np.asarray(m.face_nodes)
    if len(ptr) != m.n_faces + 1 or ptr[0] != 0 or ptr[-1] != len(nodes) \
            or np.any(np.diff(ptr) < 0):
        return ["face offsets (face_ptr) do not match the face lists"]
    if len(nodes) and (nodes.min() < 0 or nodes.max() >= len(m.points)):
        probs.append("faces refer to points that do not exist")
    small = int(np.sum(np.diff(ptr) < 3))
    if small:
        probs.append(f"{small} faces with fewer than 3 points")
    if m.n_faces and (m.owner.min() < 0 or m.owner.max() >= m.n_cells):
        probs.append("owner cell index out of range")
    if m.n_internal and (m.neighbour.min() < 0 or m.neighbour.max() >= m.n_cells):
        probs.append("neighbour cell index out of range")
    if probs:
        return probs
    try:
        m.check_topology()
    except ValueError as e:
        probs.append(str(e))
    nfaces = np.bincount(m.owner, minlength=m.n_cells) + np.bincount(m.neighbour,
                                                                    minlength=m.n_cells)
    few = int(np.sum(nfaces < 4))
    if few:
        probs.append(f"{few} cells with fewer than 4 faces (a polyhedron needs 4)")
    return probs


def _shapes(m: Mesh) -> dict[str, int]:
    """Cells by shape, told by their numbers of triangular and quadrilateral faces."""
    size = np.diff(m.face_ptr)
    cells = np.concatenate([m.owner, m.neighbour])
    sizes = np.concatenate([size, size[: m.n_internal]])
    tri = np.bincount(cells, sizes == 3, m.n_cells)
    quad = np.bincount(cells, sizes == 4, m.n_cells)
    other = np.bincount(cells, sizes > 4, m.n_cells)
    shape = {"hexahedra": (0, 6), "prisms": (2, 3), "tetrahedra": (4, 0), "pyramids": (4, 1)}
    out = {k: int(np.sum((tri == t) & (quad == q) & (other == 0))) for k, (t, q) in shape.items()}
    out["polyhedra"] = m.n_cells - sum(out.values())
    return out


def _metrics(m: Mesh):
    g = m.geom()
    nf = m.n_faces
    nonorth, skew = np.zeros(nf), np.zeros(nf)
    pyr = np.ones((nf, 2))
    _face_metrics(np.ascontiguousarray(m.points, dtype=np.float64), m.face_ptr, m.face_nodes,
                  m.owner, m.neighbour, g.face_centres, g.face_areas, g.cell_centres,
                  np.zeros((m.n_internal, 3)) if m.face_shift is None else m.face_shift,
                  nonorth, skew, pyr)
    return g, nonorth, skew, pyr


def check(mesh: Mesh, notes: list[str] | tuple[str, ...] = ()) -> Report:
    """Measure ``mesh``; ``notes`` (from a reader) are passed on as warnings."""
    m = mesh
    rep = Report(len(m.points), m.n_faces, m.n_internal, m.n_cells,
                 [(p.name, p.kind, p.size) for p in m.patches], warnings=list(notes))
    rep.problems = topology_problems(m)
    if rep.problems:
        return rep
    rep.cell_shapes = _shapes(m)
    used = np.zeros(len(m.points), bool)
    used[m.face_nodes] = True
    if not used.all():
        rep.warnings.append(f"{int((~used).sum())} points are used by no face")
    if m.n_cells == 0:
        rep.problems.append("no cells")
        return rep
    g, nonorth, skew, pyr = _metrics(m)
    pts = m.points[used]
    rep.bounds = (tuple(pts.min(axis=0).tolist()), tuple(pts.max(axis=0).tolist()))
    vol = g.cell_volumes
    rep.volume_min, rep.volume_max = float(vol.min()), float(vol.max())
    rep.volume_total = float(vol.sum())
    ni = m.n_internal
    if ni:
        rep.non_orth_max = float(nonorth[:ni].max())
        # checkMesh's average is the angle of the mean cosine, not the mean angle
        mean_cos = float(np.cos(np.radians(nonorth[:ni])).mean())
        rep.non_orth_avg = math.degrees(math.acos(min(1.0, max(-1.0, mean_cos))))
    rep.skew_max = float(skew.max()) if m.n_faces else 0.0

    sums, mags = np.zeros((m.n_cells, 3)), np.zeros((m.n_cells, 3))
    _closedness(m.owner, m.neighbour, g.face_areas, sums, mags)
    openness = (np.abs(sums) / (mags + 1e-300)).max(axis=1)
    rep.openness_max = float(openness.max())
    sb = g.face_areas[ni:]
    # per component, over that component's boundary area, but no less than a millionth of the
    # whole boundary's: a direction the boundary barely faces (a span joined periodically)
    # would otherwise divide round-off by round-off
    mag = np.abs(sb).sum(axis=0)
    floor = 1e-6 * np.sqrt(np.einsum("ij,ij->i", sb, sb)).sum()
    rep.boundary_openness = tuple((np.abs(sb.sum(axis=0)) /
                                   (np.maximum(mag, floor) + 1e-300)).tolist())

    p = rep.problems
    n_open = int(np.sum(openness > CLOSED_TOL))
    if n_open:
        p.append(f"{n_open} open cells (outward face area vectors do not sum to zero; "
                 f"max openness {rep.openness_max:.3g})")
    smag = np.sqrt(np.einsum("ij,ij->i", g.face_areas, g.face_areas))
    tol = PYR_TOL * smag ** 1.5
    wrong = (pyr[:, 0] < -tol) | ((np.arange(m.n_faces) < ni) & (pyr[:, 1] < -tol))
    if wrong.any():
        cells = np.unique(np.concatenate([m.owner[wrong], m.neighbour[wrong[:ni]]]))
        p.append(f"{int(wrong.sum())} faces point into their owner or out of their neighbour "
                 f"(inside-out faces; cells {_some(cells)})")
    neg = np.flatnonzero(vol <= 0.0)
    if len(neg):
        p.append(f"{len(neg)} cells with zero or negative volume (inside-out; cells "
                 f"{_some(neg)})")
    if ni and rep.non_orth_max >= 90.0:
        p.append(f"{int(np.sum(nonorth[:ni] >= 90.0))} faces with non-orthogonality of 90 "
                 "degrees or more (the owner and neighbour centres lie on the wrong sides)")
    elif ni and rep.non_orth_max > NON_ORTH_WARN:
        rep.warnings.append(f"{int(np.sum(nonorth[:ni] > NON_ORTH_WARN))} faces with "
                            f"non-orthogonality above {NON_ORTH_WARN:g} degrees")
    if rep.skew_max > SKEW_MAX:
        p.append(f"{int(np.sum(skew > SKEW_MAX))} faces with skewness above {SKEW_MAX:g} "
                 f"(max {rep.skew_max:.3g})")
    box_volume = float(np.prod(np.subtract(*rep.bounds[::-1])))
    if rep.volume_total > box_volume * (1.0 + OVERLAP_TOL):
        p.append(f"the cells' total volume {rep.volume_total:.6g} exceeds the "
                 f"{box_volume:.6g} of the bounding box: cells overlap")
    if max(rep.boundary_openness) > CLOSED_TOL and not n_open:
        p.append("the boundary is not closed (boundary openness "
                 f"{max(rep.boundary_openness):.3g}): a hole in the boundary")
    return rep


def _some(ids, n: int = 5) -> str:
    ids = [str(i) for i in ids[:n + 1]]
    return ", ".join(ids[:n]) + (", ..." if len(ids) > n else "")


def cell_fields(mesh: Mesh) -> dict[str, np.ndarray]:
    """Per-cell quality for viewing: volume, worst non-orthogonality and skewness of the
    cell's faces, openness."""
    g, nonorth, skew, _ = _metrics(mesh)
    out = {"cell_volume": g.cell_volumes.copy()}
    for name, values in (("non_orthogonality", nonorth), ("skewness", skew)):
        a = np.zeros(mesh.n_cells)
        _cell_max(mesh.owner, mesh.neighbour, values, a)
        out[name] = a
    sums, mags = np.zeros((mesh.n_cells, 3)), np.zeros((mesh.n_cells, 3))
    _closedness(mesh.owner, mesh.neighbour, g.face_areas, sums, mags)
    out["openness"] = (np.abs(sums) / (mags + 1e-300)).max(axis=1)
    return out
