"""Periodic patch pairs: joined into internal faces with the right geometry, or refused with
a message that names the patches; OpenFOAM cyclics; the case keys; BDF2 time stepping."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from haloflow.case import CaseError, load_case
from haloflow.io.vtk import cell_faces
from haloflow.mesh import MeshError, patch_names, read_mesh
from haloflow.mesh.blocks import box
from haloflow.mesh.fv import face_coeffs
from haloflow.mesh.periodic import stitch
from haloflow.mesh.quality import check
from haloflow.parallel.local import build_local

DATA = Path(__file__).parents[1] / "data" / "meshes"
BOTH = [("left", "right"), ("bottom", "top")]


def test_joined_box_keeps_its_geometry():
    m = box((5, 4, 1), (1.0, 0.8, 0.1), origin=(0.3, -0.2, 0.0), grading=(2.0, 0.5, 1.0))
    g0 = m.geom()
    s = stitch(m, BOTH)
    s.check_topology()
    assert [p.name for p in s.patches] == ["front", "back"]
    assert s.n_internal == m.n_internal + 4 + 5
    # cells are computed from the joined faces alone: same as before joining
    assert np.allclose(s.geom().cell_volumes, g0.cell_volumes, rtol=1e-13)
    assert np.allclose(s.geom().cell_centres, g0.cell_centres, atol=1e-14)
    moved = np.any(s.face_shift != 0.0, axis=1)
    assert moved.sum() == 9
    assert {tuple(np.round(v, 12)) for v in s.face_shift[moved]} == {(-1.0, 0, 0), (0, -0.8, 0)}
    # the neighbour's image lies beyond the face, on the owner's side's outward normal
    fc, sf, cc = s.geom().face_centres, s.geom().face_areas, s.geom().cell_centres
    img = cc[s.neighbour] + s.face_shift
    assert np.all(np.einsum("ij,ij->i", img - fc[: s.n_internal], sf[: s.n_internal]) > 0)
    rep = check(s)
    assert rep.problems == [] and rep.non_orth_max < 1e-9


def test_coefficients_of_a_periodic_face_are_those_of_an_interior_one():
    m = stitch(box((6, 4, 1), (1.2, 0.8, 0.1)), BOTH)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    fc = face_coeffs(lm)
    assert np.allclose(fc.weight, 0.5) and np.allclose(fc.corr, 0.0, atol=1e-12)
    sx = fc.gdiff[: lm.n_internal][np.abs(lm.geometry.face_areas[: lm.n_internal, 0]) > 0]
    assert np.allclose(sx, 0.02 / 0.2)  # |S| / dx: (0.8 / 4) x 0.1 over 1.2 / 6


def test_paraview_cells_use_their_own_points():
    """A cell next to a joined face is drawn with its own points, not its owner's side."""
    m = stitch(box((4, 3, 1), (1.0, 0.9, 0.1)), BOTH)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    cptr, fptr, nodes = cell_faces(lm)
    for c in range(lm.n_owned):
        pts = lm.points[nodes[fptr[cptr[c]]:fptr[cptr[c + 1]]]]
        ext = pts.max(axis=0) - pts.min(axis=0)
        assert np.allclose(ext, [0.25, 0.3, 0.1]), (c, ext)


def test_joined_faces_split_across_ranks():
    m = stitch(box((8, 8, 1), (1.0, 1.0, 0.1)), BOTH)
    parts = (m.geom().cell_centres[:, 0] > 0.5).astype(np.int64)  # cut x = 0.5 and x = 0 / 1
    lm = build_local(m, parts, 0)
    ghost_side = (lm.owner[: lm.n_internal] >= lm.n_owned) | (lm.neighbour >= lm.n_owned)
    moved = np.any(lm.face_shift != 0.0, axis=1)
    assert (ghost_side & moved).sum() == 8 and (ghost_side & ~moved).sum() == 8
    assert lm.n_ghost == 16


@pytest.mark.parametrize("pairs, expected", [
    ([("left", "inlet")], "the mesh has no patch 'inlet'"),
    ([("left", "left")], "cannot be periodic with itself"),
    ([("left", "right"), ("right", "top")], "in more than one periodic pair"),
    ([("left", "bottom")], "have 3 and 4 faces"),
    ([("bottom", "front")], "have 4 and 12 faces"),
])
def test_bad_pairs(pairs, expected):
    with pytest.raises(MeshError, match=expected):
        stitch(box((4, 3, 1), (1.0, 0.9, 0.1)), pairs, where="case.toml: mesh.periodic")


def test_faces_without_partner_and_short_periods():
    with pytest.raises(MeshError, match="not related by a translation"):
        stitch(box((4, 4, 1), (1.0, 1.0, 0.1)), [("left", "bottom")])
    m = box((4, 4, 1), (1.0, 1.0, 0.1), grading=(1.0, 3.0, 1.0))
    right = np.flatnonzero((m.points[:, 0] == 1.0) & (m.points[:, 1] > 0.0)
                           & (m.points[:, 1] < 1.0))
    m.points[right, 1] += 0.01  # the right side's inner points move: no face matches
    with pytest.raises(MeshError, match="has no partner on 'left'"):
        stitch(m, [("left", "right")])
    for cells in ((2, 4, 1), (1, 4, 1)):
        with pytest.raises(MeshError, match="at least three cells"):
            stitch(box(cells, (1.0, 1.0, 0.1)), [("left", "right")])


def _cyclic_copy(tmp_path, neighbour_of_right="left"):
    folder = tmp_path / "cyc"
    shutil.copytree(DATA / "foam_box_ascii", folder)
    b = folder / "constant" / "polyMesh" / "boundary"
    text = b.read_text()
    for name, nb in (("left", "right"), ("right", neighbour_of_right)):
        old = f"    {name}\n    {{\n        type            wall;\n        inGroups        1(wall);"
        assert old in text
        text = text.replace(old, f"    {name}\n    {{\n        type            cyclic;\n"
                                 f"        neighbourPatch  {nb};")
    b.write_text(text)
    return folder


def test_openfoam_cyclic_pairs_are_joined(tmp_path):
    folder = _cyclic_copy(tmp_path)
    assert patch_names(folder) == ["bottom", "top", "front", "back"]
    notes: list[str] = []
    m = read_mesh(folder, notes)
    assert [p.name for p in m.patches] == ["bottom", "top", "front", "back"]
    assert any("cyclic patches joined" in n for n in notes)
    assert m.n_internal == 17 + 3
    ref = stitch(read_mesh(DATA / "foam_box_ascii", []), [("left", "right")])
    assert np.allclose(np.sort(m.geom().cell_volumes), np.sort(ref.geom().cell_volumes))
    assert np.allclose(np.abs(m.face_shift).sum(axis=0), [3 * 1.2, 0, 0])


def test_openfoam_cyclic_without_its_partner(tmp_path):
    folder = _cyclic_copy(tmp_path, neighbour_of_right="top")
    with pytest.raises(MeshError, match="neighbourPatch"):
        read_mesh(folder, [])


TG = ["mesh.cells=[16,16,1]", "solver.end_time=0.2", "output.plots=false"]


def test_case_keys():
    case = load_case("taylor_green", TG)
    assert case.mesh.periodic == (("left", "right"), ("bottom", "top"))
    assert set(case.boundary) == {"front", "back"}
    assert load_case("taylor_green", TG) == load_case("taylor_green", TG)


@pytest.mark.parametrize("override, key, expected", [
    ('mesh.periodic=[["left","inlet"]]', "mesh.periodic", "the mesh has no patch 'inlet'"),
    ('mesh.periodic=[["left"]]', "mesh.periodic", "a list of patch-name pairs"),
    ('mesh.periodic=[["left","right"],["right","top"]]', "mesh.periodic", "more than one"),
    ("mesh.lengths=[6.0,5.0,0.1]", "initial.type", "lengths[0] = lengths[1]"),
    ('initial.type="rest"', "postprocess.taylor_green", 'needs initial.type = "taylor_green"'),
    ('solver.time_scheme="crank"', "solver.time_scheme", 'expected "euler" or "backward"'),
])
def test_bad_case_keys(override, key, expected):
    with pytest.raises(CaseError) as info:
        load_case("taylor_green", [*TG, override])
    msg = str(info.value)
    assert key in msg and expected in msg and "\n" not in msg


def test_boundary_table_for_a_periodic_patch(tmp_path):
    text = (Path(__file__).parents[2] / "haloflow" / "cases" / "taylor_green.toml").read_text()
    path = tmp_path / "tg.toml"
    path.write_text(text + '\n[boundary.left]\ntype = "wall"\n')
    with pytest.raises(CaseError, match="boundary.left: patch 'left' is periodic"):
        load_case(path)


def _tg_error(scheme, steps, cells=32, nu=0.2):
    """Velocity error at t = 1 of Taylor-Green vortices decaying fast (nu = 0.2: the time
    error dominates the spatial one at these steps)."""
    from tests.validation.test_taylor_green import velocity_error

    return velocity_error(cells, steps, 1.0, f"physics.nu={nu}",
                          f'solver.time_scheme="{scheme}"')["u_l2_error"]


def test_bdf2_is_second_order_in_time():
    """Less the spatial error (the error of many small steps), halving dt cuts BDF2's
    error 4x or more (measured 4.7x and 5.9x) and Euler's about 2x."""
    floor = _tg_error("backward", 160)
    e_b = [_tg_error("backward", n) - floor for n in (5, 10, 20)]
    e_e = [_tg_error("euler", n) - floor for n in (5, 10, 20)]
    assert e_b[0] / e_b[1] > 3.5 and e_b[1] / e_b[2] > 3.5, e_b
    assert 1.7 < e_e[0] / e_e[1] < 2.6 and 1.7 < e_e[1] / e_e[2] < 2.6, e_e
    assert e_b[2] < 0.1 * e_e[2]


def test_mesh_convert_draws_periodic_cells_whole(tmp_path, capsys):
    meshio = pytest.importorskip("meshio")
    from haloflow.cli.mesh import _convert

    m = stitch(box((4, 3, 1), (1.0, 0.9, 0.1)), BOTH)
    assert _convert(m, [], tmp_path / "p.vtu") == 0
    cells = meshio.read(tmp_path / "p.vtu").cells
    assert [c.type for c in cells] == ["hexahedron"] and len(cells[0].data) == 12
    pts = meshio.read(tmp_path / "p.vtu").points[cells[0].data]
    assert np.allclose(pts.max(axis=1) - pts.min(axis=1), [0.25, 0.3, 0.1])
