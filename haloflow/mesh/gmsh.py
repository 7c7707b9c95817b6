"""Gmsh ``.msh`` reader (formats 2 and 4, through meshio): elements in, faces out.

Cells are the 3D elements (tetrahedra, pyramids, prisms, hexahedra).  A file with only 2D
elements (triangles, quadrilaterals in a plane z = const) is extruded one cell thick into
prisms and hexahedra, with ``front`` (-z) and ``back`` (+z) patches of kind ``empty``, as
haloflow's 2D box.  Faces are found by matching the cells' faces on their sorted point
lists, all in numpy, one pass per element type; each face is turned to point out of its
owner geometrically, so the element node order (and any element Gmsh wrote inside out)
does not matter.  Boundary faces take the name of the physical group of the boundary
elements they coincide with; the rest go to a patch ``defaultFaces``.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import re
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import MeshError
from .foam import check_finite

__all__ = ["gmsh_patch_names", "read_gmsh"]

DEFAULT_PATCH = "defaultFaces"

# Faces of each cell type by local node index (meshio's node order, the same as Gmsh's
# for the corner nodes); their orientation is fixed geometrically afterwards.
CELL_FACES = {
    "tetra": ((0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)),
    "pyramid": ((0, 3, 2, 1), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)),
    "wedge": ((0, 2, 1), (3, 4, 5), (0, 1, 4, 3), (1, 2, 5, 4), (2, 0, 3, 5)),
    "hexahedron": ((0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6),
                   (3, 0, 4, 7)),
}
CORNERS = {"tetra": 4, "pyramid": 5, "wedge": 6, "hexahedron": 8,
           "triangle": 3, "quad": 4, "line": 2}
# 2D element -> the 3D cell it becomes when extruded
EXTRUDED = {"triangle": "wedge", "quad": "hexahedron"}


@dataclass
class _Topology:
    """What :func:`read_gmsh` builds before any geometry: plain numpy arrays."""

    points: np.ndarray
    face_ptr: np.ndarray
    face_nodes: np.ndarray
    owner: np.ndarray
    neighbour: np.ndarray
    patches: list[tuple[str, str, int]]  # name, kind, number of faces
    n_cells: int


def _base(kind: str) -> str:
    """meshio's type name without the order suffix: 'tetra10' -> 'tetra'."""
    return kind.rstrip("0123456789")


def _load(path: Path):
    try:
        import meshio
    except ImportError:  # pragma: no cover - a dependency
        raise MeshError(f"{path}: reading Gmsh files needs the meshio package") from None
    if not path.is_file():
        raise MeshError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            _prescan(path, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                     if path.stat().st_size else b"")
    except OSError as e:
        raise MeshError(f"{path}: cannot read ({e.strerror})") from None
    said = io.StringIO()  # meshio prints its own warnings and errors: one line is ours
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return meshio.read(path, file_format="gmsh")
    except (Exception, SystemExit) as e:  # noqa: BLE001 - meshio raises (or exits) many ways
        lines = [ln.strip() for ln in said.getvalue().splitlines() if ln.strip()]
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, SystemExit) or not msg:
            msg = lines[-1] if lines else "meshio gave up"
        raise MeshError(f"{path}: not a readable Gmsh file ({_printable(msg)})") from None


def _printable(text: str) -> str:
    return text if text.isprintable() else repr(text)[1:-1]


# nodes per element of the Gmsh element types (1-19); others are taken as one node
_NODES_OF = {1: 2, 2: 3, 3: 4, 4: 4, 5: 8, 6: 6, 7: 5, 8: 3, 9: 6, 10: 9, 11: 10, 12: 27,
             13: 18, 14: 14, 15: 1, 16: 8, 17: 20, 18: 15, 19: 13}


def _prescan(path: Path, data) -> None:
    """Refuse counts the file cannot hold before meshio allocates arrays for them: every
    number takes at least 2 bytes of ASCII or 4 of binary, so a node or element block that
    claims more than its section's bytes allow is a corrupt file, not a mesh (a small file
    claiming 10^8 elements would otherwise allocate gigabytes)."""
    if not len(data) or not bytes(data[:4096]).strip():
        raise MeshError(f"{path}: not a readable Gmsh file (the file is empty)")
    head = re.search(rb"\$MeshFormat\s+(\d+(?:\.\d+)?)\s+(\d+)\s+(\d+)", data[:4096])
    if head is None:
        raise MeshError(f"{path}: not a readable Gmsh file (no $MeshFormat header)")
    v4, binary = float(head[1]) >= 4, head[2] == b"1"
    size_t = int(head[3]) if binary and int(head[3]) in (4, 8) else 8
    for name in (b"Nodes", b"Elements"):
        a = data.find(b"$" + name + b"\n")
        if a < 0:
            continue
        a += len(name) + 2
        b = data.find(b"$End" + name, a)
        body = memoryview(data)[a: b if b >= 0 else len(data)]
        try:
            if v4 and binary:
                _scan_v4_binary(body, name == b"Nodes", size_t)
            elif v4:
                _scan_v4_ascii(body, name == b"Nodes")
            else:
                _claim(len(body), int(bytes(body[:32]).split()[0]), 4 if binary else 2, 1)
        except (ValueError, IndexError, struct.error):
            raise MeshError(f"{path}: not a readable Gmsh file (its ${name.decode()} section "
                            "is malformed)") from None
        except _Claim as c:
            raise MeshError(f"{path}: not a readable Gmsh file (its ${name.decode()} section "
                            f"claims {c} items, more than its {len(body)} bytes hold: corrupt "
                            "or truncated)") from None


class _Claim(Exception):
    """A count larger than the bytes behind it."""


def _claim(room: int, n: int, width: int, numbers: int) -> None:
    """``n`` items of ``numbers`` numbers, ``width`` bytes each at least, fit in ``room``."""
    if n < 0 or n * numbers * width > room:
        raise _Claim(n)


def _scan_v4_ascii(body, nodes: bool) -> None:
    text = bytes(body)
    nl = np.flatnonzero(np.frombuffer(text, np.uint8) == 10)
    first = text[: nl[0]].split() if len(nl) else text.split()
    blocks, total = int(first[0]), int(first[1])
    _claim(len(text), blocks, 2, 4)
    _claim(len(text), total, 2, 4 if nodes else 2)
    line = 1  # the line of the first block header
    for _ in range(blocks):
        a = nl[line - 1] + 1
        h = text[a: nl[line] if line < len(nl) else len(text)].split()
        n = int(h[3])
        _claim(len(text) - a, n, 2, 4 if nodes else 1 + _NODES_OF.get(int(h[2]), 1))
        line += 1 + (2 * n if nodes else n)


def _scan_v4_binary(body, nodes: bool, size_t: int) -> None:
    st = "<q" if size_t == 8 else "<i"
    blocks, total = (struct.unpack_from(st, body, k * size_t)[0] for k in range(2))
    _claim(len(body), blocks, 4, 4)
    _claim(len(body), total, 4, 4 if nodes else 2)
    at = 4 * size_t
    for _ in range(blocks):
        dim, _tag, kind = struct.unpack_from("<iii", body, at)
        n = struct.unpack_from(st, body, at + 12)[0]
        at += 12 + size_t
        width = (size_t + 8 * (3 + (dim if kind else 0))) if nodes else \
            size_t * (1 + _NODES_OF.get(kind, 1))
        _claim(len(body) - at, n, width, 1)
        at += n * width


def _blocks(m, dims: dict[str, int], notes: list[str]):
    """Element blocks by dimension: {dim: [(type, corner nodes, physical tags)]}."""
    phys = m.cell_data.get("gmsh:physical")
    out: dict[int, list] = {0: [], 1: [], 2: [], 3: []}
    higher = set()
    for i, block in enumerate(m.cells):
        kind = _base(block.type)
        if kind not in CORNERS:
            continue  # vertices and anything exotic take no part
        if kind != block.type:
            higher.add(block.type)
        data = np.asarray(block.data, dtype=np.int64)[:, : CORNERS[kind]]
        tags = (np.asarray(phys[i], dtype=np.int64) if phys is not None
                else np.zeros(len(data), np.int64))
        out[dims[kind]].append((kind, data, tags))
    if higher:
        notes.append(f"higher-order elements ({', '.join(sorted(higher))}): only their "
                     "corner nodes are used, faces are flat")
    return out


def _orient(points, centre, fnodes, fsize):
    """Turn each cell face (rows of ``fnodes``, -1 padded) to point away from ``centre``,
    its cell's vertex average."""
    rows = np.arange(len(fnodes))
    p = points[np.where(fnodes < 0, fnodes[:, :1], fnodes)]  # pad with a real node
    tri = fsize == 3
    a = np.where(tri[:, None], p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    b = np.where(tri[:, None], p[:, 2] - p[:, 0], p[:, 3] - p[:, 1])
    area = np.cross(a, b)
    fc = np.where(tri[:, None], p[:, :3].mean(axis=1), p.mean(axis=1))
    inward = np.einsum("ij,ij->i", area, fc - centre) < 0.0
    k = np.where(tri, 2, 3)
    out = fnodes.copy()
    for j in range(4):  # reverse the first fsize nodes of inward faces
        src = np.where(j <= k, k - j, j)
        out[inward, j] = fnodes[rows[inward], src[inward]]
    return out


def _keys(fnodes):
    """Orientation-free face keys: the sorted nodes (-1 padding sorts first)."""
    return np.sort(fnodes, axis=1)


def _runs(keys):
    """Order rows by key; per row in that order, whether it starts a run of equal keys."""
    order = np.lexsort(keys.T[::-1])
    k = keys[order]
    start = np.ones(len(k), bool)
    start[1:] = np.any(k[1:] != k[:-1], axis=1)
    return order, start


def _topology(path: Path, thickness: float, notes: list[str]) -> _Topology:
    m = _load(path)
    dims = {"tetra": 3, "pyramid": 3, "wedge": 3, "hexahedron": 3, "triangle": 2, "quad": 2,
            "line": 1}
    blocks = _blocks(m, dims, notes)
    points = np.asarray(m.points, dtype=np.float64)
    if points.ndim != 2 or not len(points) or points.shape[1] not in (2, 3):
        raise MeshError(f"{path}: not a readable Gmsh file (no nodes)")
    if points.shape[1] == 2:
        points = np.column_stack([points, np.zeros(len(points))])
    check_finite(path, points)
    groups = [(n, np.asarray(v).ravel()) for n, v in m.field_data.items()]

    extra: list[tuple[str, str]] = []  # patches the reader makes: (name, kind)
    if blocks[3]:
        cells, bnd, bdim = blocks[3], blocks[2], 2
    elif blocks[2]:
        cells, bnd, points = _extrude(path, blocks, points, thickness)
        bdim = 1
        extra = [("front", "empty"), ("back", "empty")]
        notes.append(f"2D mesh extruded {thickness:g} thick in z: patches front and back "
                     "(kind empty)")
    else:
        raise MeshError(f"{path}: no 2D or 3D elements (a mesh needs cells; with physical "
                        "groups, Gmsh saves only elements inside one)")

    # physical tags are unique per dimension only: names of the boundary dimension's groups
    names = {int(v[0]): n for n, v in groups if len(v) > 1 and int(v[1]) == bdim}

    # every cell's faces, oriented out of the cell
    fnodes, fcell, offset = [], [], 0
    for kind, data, _ in cells:
        for face in CELL_FACES[kind]:
            f = np.full((len(data), 4), -1, np.int64)
            f[:, : len(face)] = data[:, face]
            fnodes.append(f)
            fcell.append(offset + np.arange(len(data)))
        offset += len(data)
    n_cells = offset
    cell_nodes = np.full((n_cells, 8), -1, np.int64)
    row = 0
    for _, data, _ in cells:
        cell_nodes[row: row + len(data), : data.shape[1]] = data
        row += len(data)
    fnodes, fcell = np.concatenate(fnodes), np.concatenate(fcell)
    fsize = (fnodes >= 0).sum(axis=1)
    valid = cell_nodes >= 0
    centres = (points[np.where(valid, cell_nodes, 0)] * valid[:, :, None]).sum(axis=1)
    centres /= valid.sum(axis=1)[:, None]
    fnodes = _orient(points, centres[fcell], fnodes, fsize)

    # pair the faces: a key seen twice is an internal face, once a boundary face
    keys = _keys(fnodes)
    order, start = _runs(keys)
    run = np.cumsum(start) - 1
    size = np.bincount(run)
    if np.any(size > 2):
        raise MeshError(f"{path}: {int(np.sum(size > 2))} faces are shared by more than two "
                        "cells (duplicate or overlapping elements)")
    first = order[start]
    pair = size == 2
    a, b = first[pair], order[np.flatnonzero(start)[pair] + 1]
    ca, cb = fcell[a], fcell[b]
    if np.any(ca == cb):
        raise MeshError(f"{path}: a cell has two identical faces (degenerate element)")
    own_face = np.where(ca < cb, a, b)  # the owner's copy: it points to the neighbour
    owner, neighbour = np.minimum(ca, cb), np.maximum(ca, cb)
    o = np.lexsort((neighbour, owner))
    int_faces, owner, neighbour = own_face[o], owner[o], neighbour[o]
    bnd_faces = first[~pair]

    # boundary elements -> patch tags on the boundary faces
    patch_of = np.full(len(bnd_faces), -1, np.int64)  # index into patch list
    patch_list = _patch_tags(path, bnd, names, extra, keys, bnd_faces, patch_of, notes)
    unassigned = patch_of < 0
    if unassigned.any():
        notes.append(f"{int(unassigned.sum())} boundary faces are in no physical group: "
                     f"patch '{DEFAULT_PATCH}'")
        patch_of[unassigned] = len(patch_list)
        patch_list.append((DEFAULT_PATCH, "patch"))
    bo = np.argsort(patch_of, kind="stable")
    bnd_faces = bnd_faces[bo]
    counts = np.bincount(patch_of, minlength=len(patch_list))
    patches = [(n, k, int(c)) for (n, k), c in zip(patch_list, counts, strict=True) if c]
    for (n, _), c in zip(patch_list, counts, strict=True):
        if not c:
            notes.append(f"physical group '{n}' has no boundary faces: no patch")

    faces = np.concatenate([int_faces, bnd_faces])
    nodes = fnodes[faces]
    sizes = fsize[faces]
    flat = nodes[nodes >= 0]  # rows keep their order; -1 padding only at the end
    all_owner = np.concatenate([owner, fcell[bnd_faces]])

    # keep only points the cells use
    used, inv = np.unique(flat, return_inverse=True)
    return _Topology(points[used], np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                     inv.ravel().astype(np.int64), all_owner.astype(np.int64),
                     neighbour.astype(np.int64), patches, n_cells)


def _extrude(path, blocks, points, thickness):
    """2D elements -> one layer of prisms/hexahedra; lines -> side quads; front/back faces."""
    if not thickness > 0.0:
        raise MeshError(f"{path}: extrusion thickness must be positive")
    used = np.unique(np.concatenate([d.ravel() for _, d, _ in blocks[2]]))
    z = points[used, 2]
    span = np.ptp(points[used], axis=0).max()
    if np.ptp(z) > 1e-9 * max(span, 1e-300):
        raise MeshError(f"{path}: the 2D elements do not lie in a plane z = const (a 3D "
                        "geometry saved without its volume elements? add a Physical Volume "
                        "or set Mesh.SaveAll = 1)")
    n = len(points)
    top = points.copy()
    top[:, 2] += thickness
    points = np.concatenate([points, top])
    cells, bnd = [], []
    for kind, data, _ in blocks[2]:
        cells.append((EXTRUDED[kind], np.concatenate([data, data + n], axis=1), None))
        pad = np.full((len(data), 4 - data.shape[1]), -1, np.int64)
        bnd.append((kind, np.concatenate([data, pad], axis=1), np.full(len(data), -1)))
        bnd.append((kind, np.concatenate([data + n, pad], axis=1), np.full(len(data), -2)))
    for _, data, tags in blocks[1]:
        quads = np.stack([data[:, 0], data[:, 1], data[:, 1] + n, data[:, 0] + n], axis=1)
        bnd.append(("quad", quads, tags))
    return cells, bnd, points


def _patch_tags(path, bnd, names, extra, keys, bnd_faces, patch_of, notes):
    """Give each boundary face the patch of the boundary element on it (lowest tag wins)."""
    if not bnd:
        return list(extra)
    enodes = np.concatenate([np.pad(d, ((0, 0), (0, 4 - d.shape[1])), constant_values=-1)
                             for _, d, _ in bnd])
    etags = np.concatenate([t for _, _, t in bnd])
    tags = sorted(t for t in set(etags.tolist()) if t > 0)
    named = [names.get(t, f"patch{t}") for t in tags]
    clash = {n for n, _ in extra} & set(named)
    if clash:
        raise MeshError(f"{path}: physical group '{sorted(clash)[0]}' clashes with a patch the "
                        "2D extrusion makes (front, back)")
    patch_list = [(n, "patch") for n in named] + list(extra)
    rank = {t: i for i, t in enumerate(tags)}
    rank.update({-1 - i: len(tags) + i for i in range(len(extra))})
    keep = etags != 0
    enodes, etags = enodes[keep], etags[keep]
    # match element keys against boundary-face keys: sort both together, faces first
    fk, ek = keys[bnd_faces], np.sort(enodes, axis=1)
    allk = np.concatenate([fk, ek])
    src = np.concatenate([np.zeros(len(fk), np.int64), np.ones(len(ek), np.int64)])
    order = np.lexsort((src, *allk.T[::-1]))
    k = allk[order]
    start = np.ones(len(k), bool)
    start[1:] = np.any(k[1:] != k[:-1], axis=1)
    head = np.maximum.accumulate(np.where(start, np.arange(len(k)), 0))
    is_elem = src[order] == 1
    hit = is_elem & (src[order][head] == 0)
    face = order[head[hit]]  # index into fk
    elem = order[hit] - len(fk)
    known = np.array(sorted(rank), np.int64)
    r = np.array([rank[t] for t in known.tolist()], np.int64)[np.searchsorted(known, etags[elem])]
    big = np.iinfo(np.int64).max
    best = np.full(len(fk), big)
    np.minimum.at(best, face, r)
    twice = np.bincount(face, minlength=len(fk)) > 1
    if np.any(twice & (best < big)):
        notes.append(f"{int(twice.sum())} boundary faces are in more than one physical group: "
                     "the first group wins")
    patch_of[:] = np.where(best < big, best, -1)
    missed = int((is_elem & ~hit).sum())
    if missed:
        notes.append(f"{missed} boundary elements are not on the boundary of the cells "
                     "(internal surfaces or non-matching meshes): ignored")
    return patch_list


def read_gmsh(path: str | Path, thickness: float = 1.0, notes: list[str] | None = None):
    """Read a Gmsh file into a :class:`~haloflow.mesh.core.Mesh` (2D meshes extruded
    ``thickness`` in z); ``notes`` collects what the reader decided for the user."""
    from .core import Mesh, Patch

    t = _topology(Path(path), thickness, [] if notes is None else notes)
    patches, start = [], len(t.neighbour)
    for name, kind, n in t.patches:
        patches.append(Patch(name, start, n, kind))
        start += n
    return Mesh(points=t.points, face_ptr=t.face_ptr, face_nodes=t.face_nodes, owner=t.owner,
                neighbour=t.neighbour, patches=patches, n_cells=t.n_cells)


def gmsh_patch_names(path: str | Path) -> list[str]:
    """The patches :func:`read_gmsh` makes, in order: it takes the same (numpy-only) steps."""
    return [name for name, _, _ in _topology(Path(path), 1.0, []).patches]
