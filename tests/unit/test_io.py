"""Output modules: VTK round trip, probes, gathers, Ghia tables, plots."""

from __future__ import annotations

import base64
import types
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.io import plots, probes, refdata, vtk
from haloflow.mesh.blocks import box
from haloflow.post.cavity import centerlines_png

# -- helpers --------------------------------------------------------------------------------

def serial_view(m):
    """A LocalMesh stand-in holding the whole mesh on one rank."""
    return types.SimpleNamespace(
        points=m.points, face_ptr=m.face_ptr, face_nodes=m.face_nodes, owner=m.owner,
        neighbour=m.neighbour, n_owned=m.n_cells, global_cells=np.arange(m.n_cells),
        n_cells_global=m.n_cells, geometry=m.geom(), patches=m.patches,
    )


def partial_view(m, owned):
    """A LocalMesh stand-in owning cells ``owned`` (global ids) plus their face neighbours.

    Ghosts come after the owned cells; local faces keep the global orientation, so some
    faces of owned cells are owned by a ghost.
    """
    ni = m.n_internal
    is_owned = np.zeros(m.n_cells, bool)
    is_owned[owned] = True
    own_i, nbr = m.owner[:ni], m.neighbour
    touch = is_owned[own_i] | is_owned[nbr]
    ghosts = np.setdiff1d(np.concatenate([own_i[touch], nbr[touch]]), owned)
    cells = np.concatenate([owned, ghosts])
    g2l = np.full(m.n_cells, -1)
    g2l[cells] = np.arange(len(cells))
    bnd = ni + np.flatnonzero(is_owned[m.owner[ni:]])
    faces = np.concatenate([np.flatnonzero(touch), bnd])
    nodes = [m.face_nodes[m.face_ptr[f]:m.face_ptr[f + 1]] for f in faces]
    return types.SimpleNamespace(
        points=m.points, face_ptr=np.concatenate([[0], np.cumsum([len(n) for n in nodes])]),
        face_nodes=np.concatenate(nodes), owner=g2l[m.owner[faces]],
        neighbour=g2l[nbr[touch]], n_owned=len(owned), global_cells=cells,
        n_cells_global=m.n_cells, patches=[],
    )


def read_vtu(path):
    """Tiny reader for our own files: {array name: numpy array}, plus the piece sizes."""
    root = ET.parse(path).getroot()
    assert root.get("header_type") == "UInt64" and root.get("byte_order") == "LittleEndian"
    types_ = {"Float64": "<f8", "Int64": "<i8", "UInt8": "u1", "Int32": "<i4"}
    out = {}
    for da in root.iter("DataArray"):
        raw = base64.b64decode(da.text)
        nbytes = int(np.frombuffer(raw[:8], "<u8")[0])
        assert nbytes == len(raw) - 8
        a = np.frombuffer(raw[8:], types_[da.get("type")])
        out[da.get("Name")] = a.reshape(-1, int(da.get("NumberOfComponents", 1))).squeeze()
    piece = root.find("UnstructuredGrid/Piece")
    return out, int(piece.get("NumberOfPoints")), int(piece.get("NumberOfCells"))


def face_volume(pts, faces):
    """Volume by the divergence theorem over faces (planar, ordered outward)."""
    vol = 0.0
    for f in faces:
        p = pts[f]
        c = p.mean(axis=0)
        area = 0.5 * np.cross(p, np.roll(p, -1, axis=0)).sum(axis=0)
        vol += c @ area / 3.0
    return vol


VTK_HEX_FACES = ((0, 4, 7, 3), (1, 2, 6, 5), (0, 1, 5, 4), (3, 7, 6, 2), (0, 3, 2, 1),
                 (4, 5, 6, 7))


def hex_volumes(pts, conn):
    return np.array([face_volume(pts, [c[list(f)] for f in VTK_HEX_FACES]) for c in conn])


def poly_volumes(pts, faces, faceoffsets):
    vols, start = [], 0
    for end in faceoffsets:
        cell, k, fl = faces[start:end], 1, []
        for _ in range(cell[0]):
            fl.append(cell[k + 1:k + 1 + cell[k]])
            k += 1 + cell[k]
        assert k == len(cell)
        vols.append(face_volume(pts, fl))
        start = end
    return np.array(vols)


def sheared_box():
    """A graded, sheared box (planar faces, non-orthogonal) with rotated face node lists."""
    m = box((4, 3, 2), (1.0, 2.0, 0.5), origin=(0.1, -0.2, 0.3), grading=(2.0, 0.5, 1.0))
    m.points = m.points @ np.array([[1.0, 0.0, 0.0], [0.3, 1.0, 0.0], [0.1, 0.2, 1.0]])
    q = m.face_nodes.reshape(-1, 4)
    shift = np.arange(len(q)) % 4
    m.face_nodes = q[np.arange(len(q))[:, None], (np.arange(4) + shift[:, None]) % 4].ravel()
    return m


# -- vtk ------------------------------------------------------------------------------------

@pytest.mark.parametrize("force", [False, True])
def test_vtu_round_trip(tmp_path, force):
    m = sheared_box()
    lm = serial_view(m)
    g = m.geom()
    data = {"p": np.arange(m.n_cells, dtype=float), "U": g.cell_centres,
            "rank": np.zeros(m.n_cells, np.int32)}
    path = tmp_path / "f.vtu"
    vtk.write_vtu(path, lm, data, force_polyhedron=force)
    a, npts, ncells = read_vtu(path)
    assert (npts, ncells) == (len(m.points), m.n_cells)
    np.testing.assert_array_equal(a["p"], data["p"])
    np.testing.assert_allclose(a["U"], g.cell_centres)
    pts = a["Points"]
    if force:
        assert np.all(a["types"] == vtk.VTK_POLYHEDRON)
        vols = poly_volumes(pts, a["faces"], a["faceoffsets"])
        assert np.all(np.diff(a["offsets"], prepend=0) == 8)
    else:
        assert np.all(a["types"] == vtk.VTK_HEXAHEDRON)
        vols = hex_volumes(pts, a["connectivity"].reshape(-1, 8))
    np.testing.assert_allclose(vols, g.cell_volumes, rtol=1e-12)


def test_vtu_owned_cells_only(tmp_path):
    m = box((4, 4, 1))
    owned = np.array([5, 6, 9, 10, 14])
    lm = partial_view(m, owned)
    assert lm.n_owned < len(lm.global_cells)
    centres = m.geom().cell_centres[lm.global_cells]
    vtk.write_vtu(tmp_path / "f.vtu", lm, {"C": centres, "id": lm.global_cells})
    a, npts, ncells = read_vtu(tmp_path / "f.vtu")
    used = np.unique(np.concatenate([
        m.face_nodes[m.face_ptr[f]:m.face_ptr[f + 1]]
        for f in range(m.n_faces)
        if m.owner[f] in owned or (f < m.n_internal and m.neighbour[f] in owned)
    ]))
    assert (npts, ncells) == (len(used), len(owned))
    np.testing.assert_array_equal(a["id"], owned)
    conn = a["connectivity"].reshape(-1, 8)
    np.testing.assert_allclose(a["Points"][conn].mean(axis=1), a["C"], atol=1e-14)
    np.testing.assert_allclose(hex_volumes(a["Points"], conn), 1.0 / 16.0, rtol=1e-12)


def test_vtu_meshio(tmp_path):
    meshio = pytest.importorskip("meshio")
    m = sheared_box()
    lm = serial_view(m)
    for force, kind in ((False, "hexahedron"), (True, "polyhedron8")):
        vtk.write_vtu(tmp_path / "f.vtu", lm, {"p": np.ones(m.n_cells)}, force_polyhedron=force)
        r = meshio.read(tmp_path / "f.vtu")
        assert [(c.type, len(c.data)) for c in r.cells] == [(kind, m.n_cells)]
        assert r.points.shape == m.points.shape


@pytest.mark.parametrize("force", [False, True])
def test_vtu_is_the_same_file_whatever_the_block_size(tmp_path, monkeypatch, force):
    """The writer makes and writes a block of cells at a time: blocks of 1, 2 and 7 cells
    (base64 carrying 0-2 bytes across blocks) write the file that one block writes."""
    m = box((5, 4, 3))
    lm = partial_view(m, np.arange(1, m.n_cells, 2))
    data = {"U": np.random.default_rng(0).random((3, len(lm.global_cells))).T,
            "id": lm.global_cells, "p": np.arange(len(lm.global_cells), dtype=np.float32)}
    files = []
    for block in (10**6, 1, 2, 7):
        monkeypatch.setattr(vtk, "CHUNK_CELLS", block)
        files.append(tmp_path / f"b{block}.vtu")
        vtk.write_vtu(files[-1], lm, data, force_polyhedron=force)
    assert all(f.read_bytes() == files[0].read_bytes() for f in files[1:])
    a, npts, ncells = read_vtu(files[0])
    np.testing.assert_array_equal(a["id"], lm.global_cells[:lm.n_owned])
    np.testing.assert_array_equal(a["U"], data["U"][:lm.n_owned])


def test_vtu_writer_holds_a_block_not_the_document(tmp_path):
    """A 48^3 piece (110 592 cells, 5.3 MB of cell data, 20 MB of base64) is written with at
    most 10 MB of Python and numpy allocations at once: a block's work and a few bytes per
    point, not the document (a whole-document string took some 1 kB per cell)."""
    import tracemalloc

    m = box((48, 48, 48))
    lm = serial_view(m)
    data = {"U": np.zeros((m.n_cells, 3)), "p": np.zeros(m.n_cells)}
    tracemalloc.start()
    try:
        vtk.write_vtu(tmp_path / "f.vtu", lm, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10e6, f"{peak / 1e6:.1f} MB"


def test_write_fields_pvtu(tmp_path):
    comm = MPI.COMM_WORLD
    m = box((3, 3, 1))
    data = {"p": np.zeros(m.n_cells), "U": np.zeros((m.n_cells, 3))}
    pvtu = vtk.write_fields(str(tmp_path), "step_0001", serial_view(m), data, comm)
    root = ET.parse(pvtu).getroot()
    assert root.get("type") == "PUnstructuredGrid"
    sources = [p.get("Source") for p in root.iter("Piece")]
    assert sources == [f"step_0001_{r}.vtu" for r in range(comm.size)]
    spec = {d.get("Name"): int(d.get("NumberOfComponents"))
            for d in root.find("PUnstructuredGrid/PCellData")}
    assert spec == {"p": 1, "U": 3}
    assert (tmp_path / "fields" / sources[comm.rank]).exists()


# -- probes ---------------------------------------------------------------------------------

def test_sample_2d_exact_on_linear_field():
    rng = np.random.default_rng(1)
    centres = rng.uniform(0.05, 0.95, (300, 2))
    t = np.linspace(0.0, 1.0, 21)
    walls = np.concatenate([np.column_stack([t, 0 * t]), np.column_stack([t, 0 * t + 1]),
                            np.column_stack([0 * t, t]), np.column_stack([0 * t + 1, t])])

    def f(p):
        return np.column_stack([1.0 + 2.0 * p[:, 0] - 3.0 * p[:, 1], 0.5 * p[:, 1]])

    pts = rng.uniform(0.0, 1.0, (200, 2))
    got = probes.sample_2d(pts, centres, f(centres), walls, f(walls))
    np.testing.assert_allclose(got, f(pts), atol=1e-12)
    scalar = probes.sample_2d(pts, centres, f(centres)[:, 0], walls, f(walls)[:, 0])
    assert scalar.shape == (200,)
    np.testing.assert_allclose(scalar, f(pts)[:, 0], atol=1e-12)


def test_sample_2d_outside_hull_is_nearest():
    centres = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    got = probes.sample_2d(np.array([[2.0, 1.1], [0.5, 0.5]]), centres, vals)
    assert got[0] == 4.0
    assert got[1] == pytest.approx(2.5, abs=1e-12)  # inside: the linear field 1 + x + 2y


def test_gather_one_rank():
    comm = MPI.COMM_WORLD
    if comm.size != 1:
        pytest.skip("serial test")
    m = box((3, 2, 1))
    lm = partial_view(m, np.array([4, 0, 2, 5, 1, 3]))  # all cells, permuted
    u = lm.global_cells.astype(float) * 2.0
    U = np.column_stack([u, -u])
    gu, gU = probes.gather_cells(lm, comm, u, U)
    np.testing.assert_array_equal(gu, 2.0 * np.arange(6))
    np.testing.assert_array_equal(gU[:, 1], -2.0 * np.arange(6))
    np.testing.assert_array_equal(probes.gather_rows(comm, np.ones((2, 3))), np.ones((2, 3)))


def test_patch_faces():
    m = box((3, 2, 1))
    lm = serial_view(m)
    f = probes.patch_faces(lm, ["top", "left"])
    assert len(f) == 3 + 2
    np.testing.assert_allclose(probes.line((0, 0), (1, 2), 3)[1], [0.5, 1.0])


# -- refdata --------------------------------------------------------------------------------

def test_ghia_tables():
    tu, tv = refdata.ghia(100)
    assert tu.shape == (17, 2) and tv.shape == (17, 2)
    assert tu[-1, 1] == 1.0 and tu[0, 0] == 0.0
    assert refdata.ghia(400.0000001) is not None
    assert refdata.ghia(1000) is None
    with pytest.raises(ValueError):
        refdata.ghia_deviation(tu[:, 0], tu[:, 1], tv[:, 0], tv[:, 1], 3200)


def test_ghia_deviation_interior_only_and_misprint():
    tu, tv = refdata.ghia(400)
    u, v = tu[:, 1].copy(), tv[:, 1].copy()
    u[0] += 5.0  # walls do not count
    v[-1] -= 5.0
    v[np.isclose(tv[:, 0], 0.9063)] += 1.0  # the misprint does not count either
    dev = refdata.ghia_deviation(tu[:, 0], u, tv[:, 0], v, 400)
    assert dev == {"max_du": 0.0, "max_dv": 0.0, "max_dev": 0.0}
    u[3] += 0.01
    dev = refdata.ghia_deviation(tu[::-1, 0], u[::-1], tv[:, 0], v, 400)
    assert dev["max_du"] == pytest.approx(0.01) and dev["max_dev"] == dev["max_du"]
    # at Re = 100 the same x is not excluded
    tu, tv = refdata.ghia(100)
    v = tv[:, 1].copy()
    v[np.isclose(tv[:, 0], 0.9063)] += 1.0
    assert refdata.ghia_deviation(tu[:, 0], tu[:, 1], tv[:, 0], v, 100)["max_dv"] == 1.0


# -- plots ----------------------------------------------------------------------------------

def is_png(path):
    data = path.read_bytes()
    return len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots(tmp_path):
    m = box((12, 12, 1))
    c = m.geom().cell_centres[:, :2]
    U = np.column_stack([-(c[:, 1] - 0.5), c[:, 0] - 0.5])  # solid-body rotation
    plots.velocity_png(tmp_path / "U.png", c, U, (0.0, 1.0, 0.0, 1.0), title="vortex", n=50)
    y = np.linspace(0, 1, 30)
    centerlines_png(tmp_path / "c.png", y, y**2, y, -y, ref=refdata.ghia(100), title="t")
    steps = np.arange(1, 50)
    plots.residuals_png(tmp_path / "r.png", steps, {"Ux": 1.0 / steps, "p": np.exp(-steps)})
    for name in ("U.png", "c.png", "r.png"):
        assert is_png(tmp_path / name)
