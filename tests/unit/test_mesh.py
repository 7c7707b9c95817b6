"""Global mesh: box generator topology and the geometry kernels against analytic values."""

import numpy as np
import pytest

from haloflow.mesh.blocks import SIDES, box, graded_coords
from haloflow.mesh.core import Mesh, Patch, cell_adjacency, compute_geometry

BOXES = {
    "2d": dict(cells=(7, 5, 1), lengths=(1.4, 1.0, 0.1)),
    "3d": dict(cells=(5, 4, 3), lengths=(1.0, 2.0, 0.5)),
    "graded_3d": dict(cells=(6, 5, 4), lengths=(2.0, 3.0, 1.5), origin=(1.0, -2.0, 0.5),
                      grading=(2.0, 0.5, 3.0)),
    "graded_2d": dict(cells=(8, 6, 1), lengths=(1.0, 1.0, 0.1), origin=(-3.0, 7.0, 2.0),
                      grading=(0.25, 4.0, 1.0)),
}


def _box(name):
    return box(**BOXES[name])


def _spec(name):
    s = BOXES[name]
    return (s["cells"], s["lengths"], s.get("origin", (0.0, 0.0, 0.0)),
            s.get("grading", (1.0, 1.0, 1.0)))


@pytest.fixture(params=sorted(BOXES))
def named_box(request):
    return request.param, _box(request.param)


def test_box_volumes_sum_to_box_volume(named_box):
    """Cell volumes are positive and add up to the box volume (graded, 2D, 3D, any origin)."""
    name, m = named_box
    _, lengths, _, _ = _spec(name)
    vol = m.geom().cell_volumes
    assert np.all(vol > 0)
    assert vol.sum() == pytest.approx(np.prod(lengths), rel=1e-12)


def test_box_cells_are_tensor_products_of_graded_coords(named_box):
    """Cell c = i + nx*(j + ny*k) has the centre and volume of the (i, j, k) graded interval."""
    name, m = named_box
    cells, lengths, origin, grading = _spec(name)
    xs = [graded_coords(n, L, g, o) for n, L, g, o in zip(cells, lengths, grading, origin,
                                                          strict=True)]
    mids = [0.5 * (x[1:] + x[:-1]) for x in xs]
    sizes = [np.diff(x) for x in xs]
    nx, ny, nz = cells
    c = np.arange(m.n_cells)
    i, j, k = c % nx, (c // nx) % ny, c // (nx * ny)
    g = m.geom()
    expected_centres = np.stack([mids[0][i], mids[1][j], mids[2][k]], axis=1)
    np.testing.assert_allclose(g.cell_centres, expected_centres, rtol=0, atol=1e-13)
    np.testing.assert_allclose(g.cell_volumes, sizes[0][i] * sizes[1][j] * sizes[2][k],
                               rtol=1e-12)


def test_cells_are_closed(named_box):
    """For every cell the outward face area vectors sum to zero."""
    _, m = named_box
    g = m.geom()
    ni = m.n_internal
    total = np.zeros((m.n_cells, 3))
    np.add.at(total, m.owner, g.face_areas)
    np.add.at(total, m.neighbour, -g.face_areas[:ni])
    scale = np.abs(g.face_areas).max()
    np.testing.assert_allclose(total, 0.0, rtol=0, atol=1e-13 * scale)


def test_face_normals_point_from_owner_to_neighbour(named_box):
    """Internal area vectors point from owner to neighbour, boundary ones out of the owner."""
    _, m = named_box
    g = m.geom()
    ni = m.n_internal
    d = g.cell_centres[m.neighbour] - g.cell_centres[m.owner[:ni]]
    assert np.all(np.einsum("ij,ij->i", g.face_areas[:ni], d) > 0)
    db = g.face_centres[ni:] - g.cell_centres[m.owner[ni:]]
    assert np.all(np.einsum("ij,ij->i", g.face_areas[ni:], db) > 0)


def test_patch_normals_are_the_box_sides(named_box):
    """Each named patch covers its side: unit normals equal the side's outward axis."""
    _, m = named_box
    g = m.geom()
    axes = {"left": (-1, 0, 0), "right": (1, 0, 0), "bottom": (0, -1, 0), "top": (0, 1, 0),
            "front": (0, 0, -1), "back": (0, 0, 1)}
    assert [p.name for p in m.patches] == list(SIDES)
    for p in m.patches:
        s = g.face_areas[p.start:p.start + p.size]
        n = s / np.linalg.norm(s, axis=1)[:, None]
        np.testing.assert_allclose(n, np.broadcast_to(axes[p.name], n.shape), atol=1e-14)


def test_internal_faces_ordered_like_openfoam(named_box):
    """owner < neighbour, internal faces sorted by owner then neighbour, patches contiguous."""
    name, m = named_box
    nx, ny, nz = _spec(name)[0]
    m.check_topology()
    ni = m.n_internal
    assert ni == (nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1)
    own, nbr = m.owner[:ni], m.neighbour
    assert np.all(own < nbr)
    key = own * m.n_cells + nbr
    assert np.all(np.diff(key) > 0)  # sorted by (owner, neighbour), no duplicate pairs
    assert m.n_faces - ni == 2 * (nx * ny + ny * nz + nx * nz)
    assert sum(p.size for p in m.patches) == m.n_faces - ni
    # every hexahedron has six faces
    nfaces = np.bincount(m.owner, minlength=m.n_cells) + np.bincount(nbr, minlength=m.n_cells)
    assert np.all(nfaces == 6)


def test_cell_adjacency_matches_internal_faces(named_box):
    """The partitioner graph is symmetric and lists exactly the face neighbours of each cell."""
    _, m = named_box
    xadj, adjncy = cell_adjacency(m)
    assert xadj[0] == 0 and xadj[-1] == len(adjncy) == 2 * m.n_internal
    got = {(c, int(n)) for c in range(m.n_cells) for n in adjncy[xadj[c]:xadj[c + 1]]}
    own, nbr = m.owner[:m.n_internal], m.neighbour
    expected = set(zip(own.tolist(), nbr.tolist(), strict=True))
    expected |= {(b, a) for a, b in expected}
    assert got == expected


def test_boundary_area_equals_box_surface(named_box):
    """Boundary face areas add up to the box surface, side by side."""
    name, m = named_box
    _, (lx, ly, lz), _, _ = _spec(name)
    g = m.geom()
    side = {"left": ly * lz, "right": ly * lz, "bottom": lx * lz, "top": lx * lz,
            "front": lx * ly, "back": lx * ly}
    for p in m.patches:
        a = np.linalg.norm(g.face_areas[p.start:p.start + p.size], axis=1).sum()
        assert a == pytest.approx(side[p.name], rel=1e-12), p.name
    total = np.linalg.norm(g.face_areas[m.n_internal:], axis=1).sum()
    assert total == pytest.approx(2 * (lx * ly + ly * lz + lx * lz), rel=1e-12)


@pytest.mark.parametrize("n, ratio", [(1, 3.0), (2, 3.0), (7, 5.0), (10, 0.2), (6, 1.0)])
def test_graded_coords_ratio(n, ratio):
    """Grading gives last/first cell size == ratio with a constant growth factor."""
    x = graded_coords(n, 2.5, ratio, start=-1.0)
    assert len(x) == n + 1
    assert x[0] == -1.0 and x[-1] == 1.5
    d = np.diff(x)
    assert np.all(d > 0)
    if n > 1:
        assert d[-1] / d[0] == pytest.approx(ratio, rel=1e-12)
        q = d[1:] / d[:-1]
        np.testing.assert_allclose(q, q[0], rtol=1e-12)


def test_box_grading_ratio_in_points():
    """The graded box's point coordinates have the requested last/first size per direction."""
    m = box((6, 5, 4), (2.0, 3.0, 1.5), (1.0, -2.0, 0.5), (2.0, 0.5, 3.0))
    for axis, ratio in enumerate((2.0, 0.5, 3.0)):
        d = np.diff(np.unique(m.points[:, axis]))
        assert d[-1] / d[0] == pytest.approx(ratio, rel=1e-10)


@pytest.mark.parametrize("bad", [dict(n=0, ratio=1.0), dict(n=3, ratio=0.0)])
def test_graded_coords_rejects_bad_input(bad):
    """Zero cells or a non-positive ratio are errors, not silent nonsense."""
    with pytest.raises(ValueError):
        graded_coords(bad["n"], 1.0, bad["ratio"])


# ---- hand-built single cells -------------------------------------------------------------

def _single_cell(points, faces):
    """A one-cell Mesh whose faces are all boundary faces of one patch."""
    lens = [len(f) for f in faces]
    return Mesh(
        points=np.asarray(points, dtype=float),
        face_ptr=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        face_nodes=np.concatenate(faces).astype(np.int64),
        owner=np.zeros(len(faces), dtype=np.int64),
        neighbour=np.zeros(0, dtype=np.int64),
        patches=[Patch("walls", 0, len(faces), "wall")],
        n_cells=1,
    )


def _unit_cube():
    pts = [(i, j, k) for k in (0, 1) for j in (0, 1) for i in (0, 1)]  # index i + 2j + 4k
    faces = [[4, 6, 2, 0], [1, 3, 7, 5], [1, 5, 4, 0], [2, 6, 7, 3], [2, 3, 1, 0], [4, 5, 7, 6]]
    return pts, faces, 1.0, (0.5, 0.5, 0.5)


def _tetrahedron():
    pts = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
    faces = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]
    return pts, faces, 1.0 / 6.0, (0.25, 0.25, 0.25)


def _wedge():
    pts = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 1), (0, 1, 1)]
    faces = [[0, 2, 1], [3, 4, 5], [0, 1, 4, 3], [0, 3, 5, 2], [1, 2, 5, 4]]
    return pts, faces, 0.5, (1 / 3, 1 / 3, 0.5)


def _hexagonal_prism():
    s, h = 0.7, 1.3
    ang = np.pi / 3 * np.arange(6)
    ring = np.stack([s * np.cos(ang), s * np.sin(ang)], axis=1)
    pts = [(x, y, 0.0) for x, y in ring] + [(x, y, h) for x, y in ring]
    faces = [list(range(5, -1, -1)), list(range(6, 12))]
    faces += [[k, (k + 1) % 6, 6 + (k + 1) % 6, 6 + k] for k in range(6)]
    return pts, faces, 1.5 * np.sqrt(3) * s * s * h, (0.0, 0.0, h / 2)


def _frustum():
    a, b, h = 2.0, 0.8, 1.5
    pts = [(-a / 2, -a / 2, 0), (a / 2, -a / 2, 0), (a / 2, a / 2, 0), (-a / 2, a / 2, 0),
           (-b / 2, -b / 2, h), (b / 2, -b / 2, h), (b / 2, b / 2, h), (-b / 2, b / 2, h)]
    faces = [[3, 2, 1, 0], [4, 5, 6, 7]]
    faces += [[k, (k + 1) % 4, 4 + (k + 1) % 4, 4 + k] for k in range(4)]
    vol = h / 3 * (a * a + a * b + b * b)
    zc = h * (a * a + 2 * a * b + 3 * b * b) / (4 * (a * a + a * b + b * b))
    return pts, faces, vol, (0.0, 0.0, zc)


SHAPES = {"cube": _unit_cube, "tetrahedron": _tetrahedron, "wedge": _wedge,
          "hexagonal_prism": _hexagonal_prism, "frustum": _frustum}

# a skewing, stretching, rotating map with positive determinant
AFFINE = np.array([[1.3, 0.4, -0.2], [0.1, 0.9, 0.5], [-0.3, 0.2, 1.7]])
SHIFT = np.array([10.0, -3.0, 0.25])


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("skewed", [False, True], ids=["plain", "skewed"])
def test_single_cell_volume_and_centre(shape, skewed):
    """Volume and centroid of hand-built polyhedra (also affinely skewed) match analytic ones."""
    pts, faces, vol, centre = SHAPES[shape]()
    pts = np.asarray(pts, dtype=float)
    centre = np.asarray(centre)
    if skewed:
        det = np.linalg.det(AFFINE)
        assert det > 0
        pts = pts @ AFFINE.T + SHIFT
        vol, centre = vol * det, AFFINE @ centre + SHIFT
    m = _single_cell(pts, faces)
    m.check_topology()
    g = m.geom()
    assert g.cell_volumes[0] == pytest.approx(vol, rel=1e-13)
    np.testing.assert_allclose(g.cell_centres[0], centre, rtol=0, atol=1e-13 * np.abs(pts).max())
    np.testing.assert_allclose(g.face_areas.sum(axis=0), 0.0, atol=1e-14 * np.abs(pts).max() ** 2)
    # each planar face's centre is the centroid of its polygon: area vector-weighted
    # centres reproduce the divergence theorem  sum_f (x_f . S_f) = 3 V
    assert np.einsum("ij,ij->", g.face_centres, g.face_areas) == pytest.approx(3 * vol,
                                                                               rel=1e-13)


def test_polygon_face_geometry():
    """A planar hexagon's area vector and centre match the analytic ones."""
    pts, faces, _, _ = _hexagonal_prism()
    m = _single_cell(pts, faces)
    g = compute_geometry(m.points, m.face_ptr, m.face_nodes, m.owner, m.neighbour, 1)
    s, h = 0.7, 1.3
    area = 1.5 * np.sqrt(3) * s * s
    np.testing.assert_allclose(g.face_areas[0], (0, 0, -area), atol=1e-15)
    np.testing.assert_allclose(g.face_areas[1], (0, 0, area), atol=1e-15)
    np.testing.assert_allclose(g.face_centres[1], (0, 0, h), atol=1e-15)
    # side rectangles: area s*h, normal along the edge's outward bisector at 30 + 60k degrees
    ang = np.pi / 6 + np.pi / 3 * np.arange(6)
    expected = s * h * np.stack([np.cos(ang), np.sin(ang), np.zeros(6)], axis=1)
    np.testing.assert_allclose(g.face_areas[2:], expected, atol=1e-14)


def test_two_cell_mesh_internal_face():
    """Two stacked unit cubes sharing one face: the internal face gets both cells' geometry."""
    pts = [(i, j, k) for k in (0, 1, 2) for j in (0, 1) for i in (0, 1)]  # i + 2j + 4k

    def p(i, j, k):
        return i + 2 * j + 4 * k

    shared = [p(0, 0, 1), p(1, 0, 1), p(1, 1, 1), p(0, 1, 1)]  # +z: out of cell 0
    faces, owner = [shared], [0]
    for c in (0, 1):
        k0, k1 = c, c + 1
        faces += [
            [p(0, 0, k1), p(0, 1, k1), p(0, 1, k0), p(0, 0, k0)],
            [p(1, 0, k0), p(1, 1, k0), p(1, 1, k1), p(1, 0, k1)],
            [p(1, 0, k0), p(1, 0, k1), p(0, 0, k1), p(0, 0, k0)],
            [p(0, 1, k0), p(0, 1, k1), p(1, 1, k1), p(1, 1, k0)],
        ]
        owner += [c] * 4
    faces += [[p(0, 1, 0), p(1, 1, 0), p(1, 0, 0), p(0, 0, 0)],
              [p(0, 0, 2), p(1, 0, 2), p(1, 1, 2), p(0, 1, 2)]]
    owner += [0, 1]
    m = Mesh(points=np.asarray(pts, float),
             face_ptr=np.arange(0, 4 * len(faces) + 1, 4, dtype=np.int64),
             face_nodes=np.concatenate(faces).astype(np.int64),
             owner=np.asarray(owner, dtype=np.int64), neighbour=np.array([1], dtype=np.int64),
             patches=[Patch("walls", 1, len(faces) - 1, "wall")], n_cells=2)
    m.check_topology()
    g = m.geom()
    np.testing.assert_allclose(g.cell_volumes, [1.0, 1.0], rtol=1e-14)
    np.testing.assert_allclose(g.cell_centres, [(0.5, 0.5, 0.5), (0.5, 0.5, 1.5)], atol=1e-14)
    np.testing.assert_allclose(g.face_areas[0], (0, 0, 1), atol=1e-15)


def test_check_topology_rejects_bad_meshes():
    """check_topology catches owner >= neighbour and patches that do not tile the boundary."""
    m = box((3, 2, 1))
    m.check_topology()
    bad = box((3, 2, 1))
    bad.neighbour = bad.neighbour.copy()
    bad.neighbour[0] = bad.owner[0]
    with pytest.raises(ValueError):
        bad.check_topology()
    bad = box((3, 2, 1))
    bad.patches = bad.patches[:-1]
    with pytest.raises(ValueError):
        bad.check_topology()


def test_compact_indices_keeps_mesh_and_geometry():
    """32-bit face lists, owners and neighbours: same values, same geometry to the bit."""
    m = box((5, 4, 3), (1.0, 0.8, 0.6), grading=(2.0, 0.5, 1.0))
    for k in ("face_ptr", "face_nodes", "owner", "neighbour"):  # as the readers make them
        setattr(m, k, getattr(m, k).astype(np.int64))
    ref = {k: getattr(m, k).copy() for k in ("face_ptr", "face_nodes", "owner", "neighbour")}
    g0 = m.geom()
    m.compact_indices()
    for k, a in ref.items():
        assert getattr(m, k).dtype == np.int32, k
        np.testing.assert_array_equal(getattr(m, k), a)
    g1 = compute_geometry(m.points, m.face_ptr, m.face_nodes, m.owner, m.neighbour, m.n_cells)
    for k in ("face_centres", "face_areas", "cell_centres", "cell_volumes"):
        np.testing.assert_array_equal(getattr(g1, k), getattr(g0, k))
    m.check_topology()


def test_box_is_built_in_32_bits():
    """The generator makes the compact index types itself (rank 0 builds the whole box)."""
    m = box((4, 3, 2))
    for k in ("face_ptr", "face_nodes", "owner", "neighbour"):
        assert getattr(m, k).dtype == np.int32, k
    assert m.face_nodes.shape == (4 * m.n_faces,)
    assert m.n_faces == 3 * 3 * 2 + 4 * 2 * 2 + 4 * 3 * 1 + 2 * (3 * 2 + 4 * 2 + 4 * 3)


def test_compact_indices_keeps_values_32_bits_cannot_hold():
    """A broken file's face list naming point 2^32 + 1 must not be wrapped to point 1 (a
    valid one) before the mesh check sees it: that array stays 64-bit and is refused."""
    from haloflow.mesh.quality import check

    m = box((3, 2, 2))
    m.face_nodes = m.face_nodes.astype(np.int64)
    m.face_nodes[5] = 2**32 + 1
    m.owner = m.owner.astype(np.int64)
    m.compact_indices()
    assert m.face_nodes.dtype == np.int64 and m.face_nodes[5] == 2**32 + 1
    assert m.owner.dtype == np.int32
    rep = check(m)
    assert not rep.ok and any("points that do not exist" in p for p in rep.problems)
