"""OpenFOAM ``blockMeshDict`` reader: graded, curved hexahedral blocks merged into one Mesh.

Tutorial meshes (pitzDaily and most others) ship as a blockMeshDict, not as a polyMesh, so
reading the dictionary lets a test or a built-in case carry a few hundred bytes instead of
megabytes.  The subset read is what tutorial dictionaries use: ``scale`` /
``convertToMeters``, ``vertices``, ``hex`` blocks with ``simpleGrading`` or ``edgeGrading``
(numbers or multi-grading sections ``((length cells ratio) ...)``), ``arc`` and ``polyLine``
edges, ``boundary`` (or the old ``patches`` list), ``defaultPatch``, and ``$name``
references to earlier top-level entries.  Anything else that would change the mesh
(``#include``, splines, projection, ``mergePatchPairs``, collapsed blocks) is refused with
the file and line, never guessed.

The geometry is blockMesh's: the cell counts and gradings divide every block edge the way
blockMesh divides it, and the points inside a block are the same weighted blend of the
twelve edges (straight edges blended by the edges' parameter values, plus each curved edge's
offset from its chord), so cell centres and volumes agree with blockMesh's polyMesh to
rounding.  Only the numbering differs: points shared by blocks are merged geometrically
(within 1e-3 of the smallest cell edge) and faces are paired by their sorted point labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import MeshError
from .blockmesh_dict import Block, BlockMeshDict, Edge, parse
from .foam import KINDS, check_finite

__all__ = ["blockmesh_patch_names", "find_blockmeshdict", "read_blockmesh"]


# Hex vertex slots as (x, y, z) corners of the unit cube, in OpenFOAM's hex order.
CORNERS = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                    [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]])


# The 12 block edges (start slot, end slot) in the order edgeGrading lists them: 4 along x,
# 4 along y, 4 along z (OpenFOAM user guide, "blockMesh": hex edge numbering).
EDGES = ((0, 1), (3, 2), (7, 6), (4, 5), (0, 3), (1, 2), (5, 6), (4, 7),
         (0, 4), (1, 5), (2, 6), (3, 7))


# Cell (and block) faces as vertex slots, numbered right-handed out of the hex: x-, x+, y-,
# y+, z-, z+ (OpenFOAM's hex cell model).
HEX_FACES = np.array([[0, 4, 7, 3], [1, 2, 6, 5], [0, 1, 5, 4],
                      [3, 7, 6, 2], [0, 3, 2, 1], [4, 5, 6, 7]])


def _direction_and_corner(e: int) -> tuple[int, tuple[int, int, int]]:
    a, b = EDGES[e]
    d = int(np.flatnonzero(CORNERS[a] != CORNERS[b])[0])
    return d, tuple(int(c) for c in CORNERS[a])


# edge index by (direction, start corner): how the blend finds an edge's neighbours
_EDGE_AT = {_direction_and_corner(e): e for e in range(12)}


@dataclass
class _Topology:
    face_patch: np.ndarray  # (n_blocks, 6): patch index of each block face, -1 default, -2 shared
    partner: dict  # (block, face) -> (other block, other face) for faces shared by two blocks
    has_default: bool


def _topology(d: BlockMeshDict) -> _Topology:
    """Which block faces are shared, which patch each outer one belongs to (by vertex labels,
    as blockMesh matches them)."""
    nb = len(d.blocks)
    where: dict = {}
    for b, blk in enumerate(d.blocks):
        for f in range(6):
            where.setdefault(tuple(sorted(blk.labels[HEX_FACES[f]].tolist())), []).append((b, f))
    face_patch = np.full((nb, 6), -1, np.int64)
    partner = {}
    for key, owners in where.items():
        if len(owners) > 2:
            raise d.lex.error(f"blocks {', '.join(str(b) for b, _ in owners)} all share the "
                              f"face ({' '.join(map(str, key))}): blocks overlap",
                              d.blocks[owners[2][0]].pos)
        if len(owners) == 2:
            (b1, f1), (b2, f2) = owners
            if b1 == b2:
                raise d.lex.error(f"block {b1} meets itself on face "
                                  f"({' '.join(map(str, key))})", d.blocks[b1].pos)
            face_patch[b1, f1] = face_patch[b2, f2] = -2
            partner[(b1, f1)], partner[(b2, f2)] = (b2, f2), (b1, f1)
    for i, patch in enumerate(d.patches):
        for labels, p in patch.faces:
            shown = " ".join(map(str, labels))
            owners = where.get(tuple(sorted(labels)))
            if owners is None:
                raise d.lex.error(f"patch '{patch.name}': face ({shown}) is not a face of any "
                                  "block", p)
            if len(owners) == 2:
                raise d.lex.error(f"patch '{patch.name}': face ({shown}) lies between blocks "
                                  f"{owners[0][0]} and {owners[1][0]}, inside the mesh", p)
            b, f = owners[0]
            if face_patch[b, f] >= 0:
                raise d.lex.error(f"patch '{patch.name}': face ({shown}) is already in patch "
                                  f"'{d.patches[face_patch[b, f]].name}'", p)
            face_patch[b, f] = i
    has_default = bool((face_patch == -1).any())
    if has_default and d.default_name in [p.name for p in d.patches]:
        raise MeshError(f"{d.path}: some block faces are in no patch and would go to "
                        f"'{d.default_name}', which is a listed patch too (list them, or "
                        "rename the default with defaultPatch {{ name ...; }})")
    return _Topology(face_patch, partner, has_default)


def _divisions(n: int, sections: list) -> np.ndarray:
    """Parameter values (0..1) of the ``n + 1`` points along a graded edge.

    Each section gets its share of the length and (rounded) of the cells; inside a section
    the cell sizes grow geometrically so that the last is ``ratio`` times the first.
    """
    lam = np.empty(n + 1)
    lam[0], lam[n] = 0.0, 1.0
    if n < len(sections):  # fewer cells than sections: uniform, as blockMesh does
        lam[1:n] = np.arange(1, n) / n
        return lam
    frac = np.array([s[0] for s in sections])
    share = np.array([s[1] for s in sections])
    frac, share = frac / frac.sum(), share / share.sum()
    counts = np.floor(share * n + 0.5).astype(np.int64)
    counts[int(np.argmax(share))] += n - counts.sum()  # the largest section takes the rest
    start, k = 0.0, 1
    for f, m, (_, _, r) in zip(frac, counts, sections, strict=True):
        if m <= 0:
            continue
        i = np.arange(1, m + 1)
        if r == 1.0:
            lam[k:k + m] = start + f * i / m
        else:
            g = r ** (1.0 / (m - 1)) if m > 1 else 0.0
            lam[k:k + m] = start + f * (1.0 - g ** i) / (1.0 - g ** m)
        start = lam[k + m - 1]
        k += m
    return lam


def _invert(sections: list) -> list:
    """The same grading seen from the other end of the edge."""
    return [(f, c, 1.0 / r) for f, c, r in reversed(sections)]


def _arc_plane(d: BlockMeshDict, e: Edge, p0: np.ndarray, p1: np.ndarray):
    """The arc's middle point, chords p0 -> pm and p0 -> p1 and their normal (with its squared
    length); an error if the three points lie on a line."""
    pm = e.through[0]
    a, b = pm - p0, p1 - p0
    n = np.cross(a, b)
    nn = float(n @ n)
    if nn <= 1e-24 * float(a @ a) * float(b @ b):
        raise d.lex.error(f"arc {e.start} {e.end}: its three points lie on a line", e.pos)
    return pm, a, b, n, nn


def _arc(d: BlockMeshDict, e: Edge, p0: np.ndarray, p1: np.ndarray):
    """``position(lambda)`` along the circle through p0, the given point and p1, at constant
    angular speed."""
    pm, a, b, n, nn = _arc_plane(d, e, p0, p1)
    centre = p0 + (np.cross(n, a) * float(b @ b) + np.cross(b, n) * float(a @ a)) / (2 * nn)
    r0, r1 = p0 - centre, p1 - centre
    radius = np.sqrt(r0 @ r0)
    e1 = r0 / radius
    e2 = np.cross(n / np.sqrt(nn), e1)  # the travel p0 -> pm -> p1 turns about +n
    angle = np.arctan2(r1 @ e2, r1 @ e1) % (2 * np.pi)

    def position(lam):
        t = lam[:, None] * angle
        out = centre + radius * (np.cos(t) * e1 + np.sin(t) * e2)
        out[lam <= 0.0], out[lam >= 1.0] = p0, p1
        return out

    return position


def _polyline(e: Edge, p0: np.ndarray, p1: np.ndarray):
    """``position(lambda)`` along a polyline, ``lambda`` the fraction of its length."""
    pts = np.concatenate([p0[None], e.through, p1[None]])
    seg = np.sqrt(((pts[1:] - pts[:-1]) ** 2).sum(axis=1))
    s = np.concatenate([[0.0], np.cumsum(seg)]) / seg.sum()

    def position(lam):
        i = np.clip(np.searchsorted(s, lam, side="right") - 1, 0, len(seg) - 1)
        t = ((lam - s[i]) / (s[i + 1] - s[i]))[:, None]
        out = pts[i] + t * (pts[i + 1] - pts[i])
        out[lam <= 0.0], out[lam >= 1.0] = p0, p1
        return out

    return position


def _block_points(d: BlockMeshDict, blk: Block, curves: dict) -> np.ndarray:
    """The block's (nx+1, ny+1, nz+1, 3) points.

    Every point is a blend of the twelve edges: along each direction, the four parallel
    edges are weighted by how close the point is to each (measured with the transverse
    edges' parameters at both ends), the straight-edge positions are averaged over the three
    directions, and each curved edge adds its offset from the straight edge with its weight.
    """
    corners = d.vertices[blk.labels]
    n = blk.cells
    w, straight, curved = [], [], []
    for e, (a, b) in enumerate(EDGES):
        dim = _direction_and_corner(e)[0]
        shape = [1, 1, 1, 1]
        shape[dim] = n[dim] + 1
        la, lb = int(blk.labels[a]), int(blk.labels[b])
        edge = curves.get((la, lb)) or curves.get((lb, la))
        if edge is None:
            lam = _divisions(n[dim], blk.grading[e])
            pts = None
        else:
            fwd = (edge.start, edge.end) == (la, lb)
            ends = (corners[a], corners[b]) if fwd else (corners[b], corners[a])
            position = (_arc(d, edge, *ends) if edge.kind == "arc"
                        else _polyline(edge, *ends))
            if fwd:
                lam = _divisions(n[dim], blk.grading[e])
                pts = position(lam)
            else:  # divide from the curve's own start, then turn round
                back = _divisions(n[dim], _invert(blk.grading[e]))
                pts, lam = position(back)[::-1], 1.0 - back[::-1]
        w.append(lam.reshape(shape[:3]))
        line = corners[a] + (corners[b] - corners[a]) * lam[:, None]
        straight.append(line.reshape(shape[:3] + [3]))
        curved.append(None if pts is None else pts.reshape(shape[:3] + [3]))

    def side(e, s):
        return w[e] if s else 1.0 - w[e]

    weights = []
    for e in range(12):
        dim, c0 = _direction_and_corner(e)
        total = 0.0
        for s in (0, 1):
            term = side(e, s)
            for other in range(3):
                if other == dim:
                    continue
                c = list(c0)
                c[dim], c[other] = s, 0
                term = term * side(_EDGE_AT[(other, tuple(c))], c0[other])
            total = total + term
        weights.append(total)
    for dim in range(3):  # normalise over the four parallel edges
        es = range(4 * dim, 4 * dim + 4)
        norm = sum(weights[e] for e in es)
        for e in es:
            weights[e] = (weights[e] / norm)[..., None]
    pts = sum(weights[e] * straight[e] for e in range(12)) / 3.0
    for e in range(12):
        if curved[e] is not None:
            pts = pts + weights[e] * (curved[e] - straight[e])
    pts = np.array(np.broadcast_to(pts, (n[0] + 1, n[1] + 1, n[2] + 1, 3)))
    for slot, (x, y, z) in enumerate(CORNERS):
        pts[x * n[0], y * n[1], z * n[2]] = corners[slot]
    return pts


def _curves(d: BlockMeshDict) -> dict:
    curves = {}
    for e in d.edges:
        key = (e.start, e.end)
        if key in curves or key[::-1] in curves:
            raise d.lex.error(f"edge {e.start} {e.end} is defined twice", e.pos)
        curves[key] = e
    used = {tuple(sorted((int(b.labels[i]), int(b.labels[j])))) for b in d.blocks
            for i, j in EDGES}
    for e in d.edges:
        if tuple(sorted((e.start, e.end))) not in used:
            raise d.lex.error(f"{e.kind} {e.start} {e.end}: not an edge of any block", e.pos)
    return curves


def _signed_volume(corners: np.ndarray) -> float:
    """Volume of a hex from its 8 corners (faces split about their average points)."""
    vol = 0.0
    for f in HEX_FACES:
        q = corners[f]
        c = q.mean(axis=0)
        for k in range(4):
            vol += np.dot(c, np.cross(q[k] - c, q[(k + 1) % 4] - c)) / 6.0
    return vol


def _merge(points: np.ndarray, surface: np.ndarray, block_of: np.ndarray, tol: float,
           d: BlockMeshDict):
    """Point labels with the points of different blocks closer than ``tol`` merged, numbered
    by first appearance."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    idx = np.flatnonzero(surface)
    pairs = cKDTree(points[idx]).query_pairs(tol, output_type="ndarray")
    a, b = idx[pairs[:, 0]], idx[pairs[:, 1]]
    same = np.flatnonzero(block_of[a] == block_of[b])
    if len(same):
        blk = int(block_of[a[same[0]]])
        raise d.lex.error(f"block {blk}: two of its points are closer than {tol:.3g} (degenerate "
                          "or folded cells)", d.blocks[blk].pos)
    n = len(points)
    graph = coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    _, comp = connected_components(graph, directed=False)
    first = np.full(comp.max() + 1, n, np.int64)
    np.minimum.at(first, comp, np.arange(n))
    rep = first[comp]  # lowest original label in each group
    keep, label = np.unique(rep, return_inverse=True)
    return keep, label.astype(np.int64)


def _check_shapes(d: BlockMeshDict) -> dict:
    """The checks on blocks and edges that need no points: no block inside-out, every curved
    edge an edge of a block, no arc through three points on a line.  Cheap (a few vector
    products per block and edge), so the patch-name reader refuses what the mesher refuses.
    Returns the curved edges by vertex pair."""
    for b, blk in enumerate(d.blocks):
        if _signed_volume(d.vertices[blk.labels]) <= 0.0:
            raise d.lex.error(f"block {b} is inside-out (hex "
                              f"({' '.join(map(str, blk.labels.tolist()))}) has a negative "
                              "volume: list 0 1 2 3 anticlockwise seen from 4 5 6 7)", blk.pos)
    curves = _curves(d)
    for e in d.edges:
        if e.kind == "arc":
            _arc_plane(d, e, d.vertices[e.start], d.vertices[e.end])
    return curves


def _build(d: BlockMeshDict, topo: _Topology, notes: list[str]):
    from .core import Mesh, Patch

    curves = _check_shapes(d)
    pts_all, surface, block_of, cells, cell_block, local = [], [], [], [], [], []
    offset = 0
    min_edge = np.inf
    for b, blk in enumerate(d.blocks):
        nx, ny, nz = blk.cells
        p = _block_points(d, blk, curves)
        for axis in range(3):
            min_edge = min(min_edge, float(np.sqrt((np.diff(p, axis=axis) ** 2).sum(-1)).min()))
        i, j, k = np.meshgrid(np.arange(nx + 1), np.arange(ny + 1), np.arange(nz + 1),
                              indexing="ij")
        on = (i == 0) | (i == nx) | (j == 0) | (j == ny) | (k == 0) | (k == nz)
        pts_all.append(p.transpose(2, 1, 0, 3).reshape(-1, 3))
        surface.append(on.transpose(2, 1, 0).ravel())
        block_of.append(np.full(on.size, b))
        # cells, x fastest; corner ids in hex slot order
        ci, cj, ck = (g.transpose(2, 1, 0).ravel() for g in
                      np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"))
        corner = [offset + (ci + x) + (nx + 1) * ((cj + y) + (ny + 1) * (ck + z))
                  for x, y, z in CORNERS]
        cells.append(np.stack(corner, axis=1))
        cell_block.append(np.full(len(ci), b))
        local.append(np.stack([ci == 0, ci == nx - 1, cj == 0, cj == ny - 1, ck == 0,
                               ck == nz - 1], axis=1))
        offset += on.size
    points = np.concatenate(pts_all)
    if min_edge <= 0.0:
        raise MeshError(f"{d.path}: a cell edge has zero length (degenerate block)")
    keep, label = _merge(points, np.concatenate(surface), np.concatenate(block_of),
                         1e-3 * min_edge, d)
    cells_pts = label[np.concatenate(cells)]
    cell_block = np.concatenate(cell_block)
    on_block_face = np.concatenate(local)  # (n_cells, 6)
    n_cells = len(cells_pts)

    faces = cells_pts[:, HEX_FACES].reshape(-1, 4)  # 6 per cell, outward
    keys = np.sort(faces, axis=1)
    order = np.lexsort(keys.T[::-1])
    ks = keys[order]
    start = np.ones(len(ks), bool)
    start[1:] = np.any(ks[1:] != ks[:-1], axis=1)
    group = np.cumsum(start) - 1
    count = np.bincount(group)
    if count.max() > 2:
        raise MeshError(f"{d.path}: blocks overlap (a cell face is shared by "
                        f"{count.max()} cells)")
    firsts = np.flatnonzero(start)
    pair = count[group[firsts]] == 2
    ra, rb = order[firsts[pair]], order[firsts[pair] + 1]  # the two cell faces of each pair
    single = order[firsts[~pair]]
    rows = np.arange(len(faces))
    blocks_face = cell_block[rows // 6] * 6 + rows % 6  # (block, face) as one index
    outer = on_block_face.ravel()  # this cell face lies on its block's face

    fp = topo.face_patch.ravel()
    bad = single[~outer[single] | (fp[blocks_face[single]] == -2)]
    if len(bad):
        b, f = divmod(int(blocks_face[bad[0]]), 6)
        other = topo.partner.get((b, f), (None,))[0]
        raise MeshError(f"{d.path}: blocks {b} and {other} share a face but their cells do "
                        "not meet on it (different cell counts or gradings along it)")
    for r in (ra, rb):
        glued = r[outer[r] & (fp[blocks_face[r]] != -2)]
        if len(glued):
            b = int(blocks_face[glued[0]] // 6)
            raise MeshError(f"{d.path}: block {b} touches another block without sharing its "
                            "vertex labels (blockMesh would need mergePatchPairs)")
    ca, cb = ra // 6, rb // 6
    own_row = np.where(ca < cb, ra, rb)
    owner, neighbour = np.minimum(ca, cb), np.maximum(ca, cb)
    o = np.lexsort((neighbour, owner))
    own_row, owner, neighbour = own_row[o], owner[o], neighbour[o]

    patch_of = fp[blocks_face[single]]
    n_listed = len(d.patches)
    patch_of = np.where(patch_of == -1, n_listed, patch_of)
    o = np.lexsort((single, patch_of))
    single, patch_of = single[o], patch_of[o]
    sizes = np.bincount(patch_of, minlength=n_listed + 1)
    defs = [(p.name, p.type) for p in d.patches] + [(d.default_name, d.default_type)]
    patches, at = [], len(owner)
    for i, (name, kind) in enumerate(defs):
        if i == n_listed and not sizes[i]:
            break  # blockMesh drops an empty default patch
        hk = KINDS.get(kind, "patch")
        if kind not in KINDS and kind != "cyclic":  # cyclic pairs are joined afterwards
            notes.append(f"patch '{name}' has type {kind}, which haloflow does not model: "
                         "read as a plain patch")
        patches.append(Patch(name, at, int(sizes[i]), hk))
        at += int(sizes[i])
    if sizes[n_listed]:
        notes.append(f"{sizes[n_listed]} boundary faces in no patch went to "
                     f"'{d.default_name}' (type {d.default_type})")
    notes.extend(d.notes)
    nodes = np.concatenate([faces[own_row], faces[single]]).ravel()
    nf = len(own_row) + len(single)
    points = points[keep] * d.scale
    check_finite(d.path, points)
    return Mesh(points=points,
                face_ptr=np.arange(0, 4 * nf + 1, 4, dtype=np.int64),
                face_nodes=nodes.astype(np.int64),
                owner=np.concatenate([owner, single // 6]).astype(np.int64),
                neighbour=neighbour.astype(np.int64), patches=patches, n_cells=n_cells)


def find_blockmeshdict(path: str | Path) -> Path | None:
    """The blockMeshDict ``path`` names: the file itself, or ``system/blockMeshDict`` of a case
    directory that has no polyMesh yet (a polyMesh, when there is one, is what blockMesh
    made and is read instead)."""
    p = Path(path)
    if p.name == "blockMeshDict" and p.is_file():
        return p
    if p.suffix == ".foam":
        p = p.parent
    if not p.is_dir():
        return None
    for folder in (p, p / "polyMesh", p / "constant" / "polyMesh"):
        if any((folder / f).is_file() or (folder / f"{f}.gz").is_file()
               for f in ("faces", "owner")):
            return None
    for cand in (p / "system" / "blockMeshDict", p / "blockMeshDict",
                 p / "constant" / "polyMesh" / "blockMeshDict"):
        if cand.is_file():
            return cand
    return None


def _dict_path(path: str | Path) -> Path:
    found = find_blockmeshdict(path)
    if found is None:
        raise MeshError(f"{path}: no blockMeshDict (expected a file named blockMeshDict or a "
                        "case directory with system/blockMeshDict)")
    return found


def blockmesh_patch_types(path: str | Path) -> dict[str, str]:
    """Each patch's type in mesh order (the listed patches, then the default patch if any
    block face is in none), from the dictionary alone: no points are made."""
    d = parse(_dict_path(path))
    topo = _topology(d)
    _check_shapes(d)
    types = {p.name: p.type for p in d.patches}
    if topo.has_default:
        types[d.default_name] = d.default_type
    return types


def blockmesh_patch_names(path: str | Path) -> list[str]:
    """Patch names in mesh order, cyclic patches left out (:func:`blockmesh_patch_types`)."""
    return [n for n, t in blockmesh_patch_types(path).items() if t != "cyclic"]


def read_blockmesh(path: str | Path, notes: list[str] | None = None):
    """Mesh the blockMeshDict ``path`` (a file or a case directory) as blockMesh would."""
    notes = [] if notes is None else notes
    d = parse(_dict_path(path))
    mesh = _build(d, _topology(d), notes)
    pairs = [(p.name, p.neighbour) for p in d.patches
             if p.type == "cyclic" and p.name < p.neighbour]
    if pairs:  # as the polyMesh reader does: cyclic pairs become internal faces
        from .periodic import stitch

        mesh = stitch(mesh, pairs, where=str(d.path))
        notes.append("cyclic patches joined into internal faces: "
                     f"{', '.join(a + ', ' + b for a, b in pairs)}")
    return mesh
