"""Face-based unstructured mesh (OpenFOAM's model) and its geometry kernels.

Faces are stored as a CSR list of point indices.  Internal faces come first, ordered by
owner (owner < neighbour); boundary faces follow, grouped by patch.  A face's area vector
points out of its owner cell.  Geometry follows OpenFOAM's decomposition into triangles
about the face's average point and pyramids about the cell's average face centre, so it is
exact for planar polyhedra of any shape.

Periodic (cyclic) patch pairs are joined into ordinary internal faces
(:mod:`haloflow.mesh.periodic`): such a face keeps its owner's side, and ``face_shift`` says
where the neighbour cell sits as seen from it (its centre plus the shift), so every kernel,
partitioner and halo exchange treats a periodic neighbour like any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np

PATCH_KINDS = ("patch", "wall", "empty", "symmetry")


def index_dtype(n: int):
    """The integer type of indices below ``n``: int32 where it holds them (half the bytes of
    int64 on every face and cell array; the kernels are compiled for it), else int64."""
    return np.int32 if n < 2**31 else np.int64


def _narrowed(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` as ``dtype`` where every value fits it, else ``a`` itself."""
    a = np.asarray(a)
    if a.dtype == dtype or not len(a):
        return a.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    if a.min() < info.min or a.max() > info.max:
        return a
    return a.astype(dtype)


@dataclass
class Patch:
    """A contiguous run of boundary faces: ``faces[start:start + size]``."""

    name: str
    start: int
    size: int
    kind: str = "patch"


@dataclass
class Geometry:
    """Derived geometry: face centres and area vectors, cell centres and volumes."""

    face_centres: np.ndarray  # (n_faces, 3)
    face_areas: np.ndarray  # (n_faces, 3) area vectors, out of the owner
    cell_centres: np.ndarray  # (n_cells, 3)
    cell_volumes: np.ndarray  # (n_cells,)


class FaceLists:
    """What a mesh and a rank's part of one (``parallel.local.LocalMesh``) both answer from
    their face lists: ``owner``, ``neighbour`` (internal faces first) and ``patches``."""

    @property
    def n_faces(self) -> int:
        return len(self.owner)

    @property
    def n_internal(self) -> int:
        return len(self.neighbour)

    def patch(self, name: str) -> Patch:
        for p in self.patches:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass
class Mesh(FaceLists):
    """Global unstructured mesh."""

    points: np.ndarray  # (n_points, 3) float64
    # index arrays: int64 from readers and generators, int32 after compact_indices
    face_ptr: np.ndarray  # (n_faces + 1,) CSR offsets into face_nodes
    face_nodes: np.ndarray  # point indices
    owner: np.ndarray  # (n_faces,)
    neighbour: np.ndarray  # (n_internal,)
    patches: list[Patch]
    n_cells: int
    geometry: Geometry | None = field(default=None, repr=False)
    # periodic meshes only: (n_internal, 3) translation from the neighbour cell to its image
    # next to the face (zero on ordinary faces), and the neighbour side's points of every
    # face slot (face_nodes moved by -shift; the same as face_nodes on ordinary faces)
    face_shift: np.ndarray | None = field(default=None, repr=False)
    shadow_nodes: np.ndarray | None = field(default=None, repr=False)

    def geom(self) -> Geometry:
        """Geometry, computed on first use."""
        if self.geometry is None:
            self.geometry = compute_geometry(
                self.points, self.face_ptr, self.face_nodes, self.owner, self.neighbour,
                self.n_cells, self.face_shift,
            )
        return self.geometry

    def compact_indices(self) -> None:
        """Hold the face lists, owners and neighbours in 32 bits where the counts allow (in
        place): rank 0 keeps the global mesh while it cuts every rank's part, and the
        readers and generators make int64.  An array holding a value that 32 bits cannot
        (a broken mesh file's) is kept as it is, for the mesh check to report, not wrapped
        into range."""
        node_t, cell_t = index_dtype(len(self.points)), index_dtype(self.n_cells)
        self.face_ptr = _narrowed(self.face_ptr, index_dtype(self.face_ptr[-1] + 1))
        self.face_nodes = _narrowed(self.face_nodes, node_t)
        self.owner = _narrowed(self.owner, cell_t)
        self.neighbour = _narrowed(self.neighbour, cell_t)
        if self.shadow_nodes is not None:
            self.shadow_nodes = _narrowed(self.shadow_nodes, node_t)

    def check_topology(self) -> None:
        """Raise ValueError if the face/cell lists are not a consistent OpenFOAM-style mesh."""
        nf, ni = self.n_faces, self.n_internal
        if len(self.face_ptr) != nf + 1:
            raise ValueError("face_ptr must have n_faces + 1 entries")
        if ni and np.any(self.owner[:ni] >= self.neighbour):
            raise ValueError("internal faces must have owner < neighbour")
        if np.any(self.owner < 0) or np.any(self.owner >= self.n_cells):
            raise ValueError("owner index out of range")
        end = ni
        for p in self.patches:
            if p.start != end:
                raise ValueError(f"patch {p.name!r} does not follow the previous one")
            end += p.size
        if end != nf:
            raise ValueError("patches do not cover all boundary faces")


@nb.njit(cache=True)
def face_average(points, face_nodes, a, b):
    """The average of the face's nodes ``face_nodes[a:b]``: the apex of the triangles the
    face is cut into (its geometry here, the wall's triangles in ``parallel.wall_distance``)."""
    px = py = pz = 0.0
    for k in range(a, b):
        px += points[face_nodes[k], 0]
        py += points[face_nodes[k], 1]
        pz += points[face_nodes[k], 2]
    n = b - a
    return px / n, py / n, pz / n


@nb.njit(cache=True)
def _face_geometry(points, face_ptr, face_nodes, centres, areas):
    for f in range(len(face_ptr) - 1):
        a, b = face_ptr[f], face_ptr[f + 1]
        n = b - a
        # average point, then triangles about it (area-weighted centre)
        px, py, pz = face_average(points, face_nodes, a, b)
        sx = sy = sz = 0.0
        cx = cy = cz = 0.0
        asum = 0.0
        for k in range(n):
            i = face_nodes[a + k]
            j = face_nodes[a + (k + 1) % n]
            ax = points[i, 0] - px
            ay = points[i, 1] - py
            az = points[i, 2] - pz
            bx = points[j, 0] - px
            by = points[j, 1] - py
            bz = points[j, 2] - pz
            tx = 0.5 * (ay * bz - az * by)
            ty = 0.5 * (az * bx - ax * bz)
            tz = 0.5 * (ax * by - ay * bx)
            sx += tx
            sy += ty
            sz += tz
            mag = np.sqrt(tx * tx + ty * ty + tz * tz)
            asum += mag
            cx += mag * (px + points[i, 0] + points[j, 0]) / 3.0
            cy += mag * (py + points[i, 1] + points[j, 1]) / 3.0
            cz += mag * (pz + points[i, 2] + points[j, 2]) / 3.0
        if asum > 0.0:
            centres[f, 0] = cx / asum
            centres[f, 1] = cy / asum
            centres[f, 2] = cz / asum
        else:
            centres[f, 0] = px
            centres[f, 1] = py
            centres[f, 2] = pz
        areas[f, 0] = sx
        areas[f, 1] = sy
        areas[f, 2] = sz


@nb.njit(cache=True)
def _cell_geometry(owner, neighbour, fc, fcn, sf, n_cells, centres, volumes):
    """Cell centres and volumes; ``fcn`` are the internal faces' centres as the neighbour
    cell sees them (moved by the periodic shift)."""
    n_int = len(neighbour)
    # estimated centre: average of face centres
    est = np.zeros((n_cells, 3))
    cnt = np.zeros(n_cells)
    for f in range(len(owner)):
        o = owner[f]
        for d in range(3):
            est[o, d] += fc[f, d]
        cnt[o] += 1.0
        if f < n_int:
            nbr = neighbour[f]
            for d in range(3):
                est[nbr, d] += fcn[f, d]
            cnt[nbr] += 1.0
    for c in range(n_cells):
        for d in range(3):
            est[c, d] /= cnt[c]
    for c in range(n_cells):
        volumes[c] = 0.0
        for d in range(3):
            centres[c, d] = 0.0
    # pyramids on each face with apex at the estimated centre
    for f in range(len(owner)):
        for side in range(2):
            if side == 1 and f >= n_int:
                break
            c = owner[f] if side == 0 else neighbour[f]
            sgn = 1.0 if side == 0 else -1.0
            x = fc[f] if side == 0 else fcn[f]
            pv = sgn * (sf[f, 0] * (x[0] - est[c, 0]) + sf[f, 1] * (x[1] - est[c, 1])
                        + sf[f, 2] * (x[2] - est[c, 2]))
            for d in range(3):
                centres[c, d] += pv * (0.75 * x[d] + 0.25 * est[c, d])
            volumes[c] += pv
    for c in range(n_cells):
        if abs(volumes[c]) > 0.0:
            for d in range(3):
                centres[c, d] /= volumes[c]
        else:
            for d in range(3):
                centres[c, d] = est[c, d]
        volumes[c] /= 3.0


def compute_geometry(points, face_ptr, face_nodes, owner, neighbour, n_cells,
                     face_shift=None) -> Geometry:
    nf = len(owner)
    fc = np.empty((nf, 3))
    sf = np.empty((nf, 3))
    _face_geometry(np.ascontiguousarray(points, dtype=np.float64), face_ptr, face_nodes, fc, sf)
    cc = np.empty((n_cells, 3))
    vol = np.empty(n_cells)
    fcn = fc[: len(neighbour)]
    if face_shift is not None:
        fcn = fcn - face_shift
    _cell_geometry(owner, neighbour, fc, np.ascontiguousarray(fcn), sf, n_cells, cc, vol)
    return Geometry(fc, sf, cc, vol)


def neighbour_centres(mesh) -> np.ndarray:
    """Centres of the internal faces' neighbour cells as their owners see them: the
    periodic images where a face joins a periodic pair (``mesh`` global or local)."""
    cc = mesh.geometry.cell_centres[mesh.neighbour]
    if mesh.face_shift is not None:
        cc += mesh.face_shift
    return cc


def centre_deltas(mesh) -> np.ndarray:
    """Owner-to-neighbour centre vectors of the internal faces, to the neighbour's periodic
    image where a face joins a periodic pair (``mesh`` global or local)."""
    return neighbour_centres(mesh) - mesh.geometry.cell_centres[mesh.owner[:mesh.n_internal]]


def take_faces(face_ptr, face_nodes, faces) -> tuple[np.ndarray, np.ndarray]:
    """The CSR ``(ptr, nodes)`` of ``faces`` (face indices, in that order): a vectorised
    gather for readers and mesh edits that reorder or pick faces."""
    start, size = face_ptr[faces], face_ptr[faces + 1] - face_ptr[faces]
    offs = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
    ptr = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
    return ptr, face_nodes[np.repeat(start, size) + offs].astype(np.int64)


def cell_adjacency(mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
    """CSR cell-to-cell graph from internal faces (for partitioners)."""
    o = mesh.owner[: mesh.n_internal]
    n = mesh.neighbour
    rows = np.concatenate([o, n])
    cols = np.concatenate([n, o])
    order = np.argsort(rows, kind="stable")
    ptr = np.zeros(mesh.n_cells + 1, dtype=np.int64)
    np.add.at(ptr, rows + 1, 1)
    return np.cumsum(ptr), cols[order]
