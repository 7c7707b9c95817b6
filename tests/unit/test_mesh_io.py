"""Mesh files: OpenFOAM and Gmsh readers, quality report, ``haloflow mesh``, file-mesh cases."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from haloflow.case import CaseError, load_case
from haloflow.cli import main as cli_main
from haloflow.mesh import MeshError, patch_names, read_mesh
from haloflow.mesh.blocks import box
from haloflow.mesh.core import Mesh, Patch
from haloflow.mesh.foam import foam_patch_names, read_foam
from haloflow.mesh.gmsh import read_gmsh
from haloflow.mesh.quality import check

DATA = Path(__file__).resolve().parents[1] / "data" / "meshes"
FOAM = {"ascii": DATA / "foam_box_ascii", "binary": DATA / "foam_box_binary"}
BOX = dict(cells=(4, 3, 1), lengths=(1.2, 0.9, 0.1))  # what the blockMeshDicts describe
GMSH = DATA / "gmsh"


# -- helpers -------------------------------------------------------------------------------

FOAM_TYPES = {"patch": "patch", "wall": "wall", "empty": "empty", "symmetry": "symmetryPlane"}


def _header(cls, obj, fmt="ascii", arch=""):
    arch = f'    arch "{arch}";\n' if arch else ""
    return (f"/* made by test_mesh_io */\nFoamFile\n{{\n    version 2.0;\n    format {fmt};\n"
            f"    class {cls};\n{arch}    object {obj};\n}}\n// * * * //\n\n")


def write_polymesh(case: Path, m: Mesh, fmt="ascii", label64=False) -> Path:
    """Write ``m`` as constant/polyMesh (ASCII faceList or binary faceCompactList)."""
    d = case / "constant" / "polyMesh"
    d.mkdir(parents=True, exist_ok=True)
    ptr, nodes = m.face_ptr, m.face_nodes
    if fmt == "ascii":
        pts = "\n".join(f"({x!r} {y!r} {z!r})" for x, y, z in m.points.tolist())
        (d / "points").write_text(_header("vectorField", "points")
                                  + f"{len(m.points)}\n(\n{pts}\n)\n")
        faces = "\n".join(f"{b - a}({' '.join(map(str, nodes[a:b].tolist()))})"
                          for a, b in zip(ptr[:-1], ptr[1:], strict=True))
        (d / "faces").write_text(_header("faceList", "faces") + f"{m.n_faces}\n(\n{faces}\n)\n")
        for name, a in (("owner", m.owner), ("neighbour", m.neighbour)):
            (d / name).write_text(_header("labelList", name)
                                  + f"{len(a)}\n(\n{' '.join(map(str, a.tolist()))}\n)\n")
    else:
        lab = np.dtype("<i8" if label64 else "<i4")
        arch = f"LSB;label={64 if label64 else 32};scalar=64"

        def blist(a, dtype):
            a = np.asarray(a)
            return f"{a.shape[0]}\n(".encode() + a.astype(dtype).tobytes() + b")\n"

        def write(name, cls, *parts):
            (d / name).write_bytes(_header(cls, name, "binary", arch).encode() + b"".join(parts))

        write("points", "vectorField", blist(m.points, "<f8"))
        write("faces", "faceCompactList", blist(ptr, lab), blist(nodes, lab))
        write("owner", "labelList", blist(m.owner, lab))
        write("neighbour", "labelList", blist(m.neighbour, lab))
    entries = "".join(f"    {p.name}\n    {{\n        type {FOAM_TYPES[p.kind]};\n"
                      f"        nFaces {p.size};\n        startFace {p.start};\n    }}\n"
                      for p in m.patches)
    (d / "boundary").write_text(_header("polyBoundaryMesh", "boundary")
                                + f"{len(m.patches)}\n(\n{entries})\n")
    return d


def kinds(m, **named):
    """A copy of ``m``'s patches with some kinds changed."""
    return [Patch(p.name, p.start, p.size, named.get(p.name, p.kind)) for p in m.patches]


def closedness(m):
    g = m.geom()
    total = np.zeros((m.n_cells, 3))
    np.add.at(total, m.owner, g.face_areas)
    np.add.at(total, m.neighbour, -g.face_areas[: m.n_internal])
    return np.abs(total).max() / np.abs(g.face_areas).max()


def by_centre(centres, *arrays):
    """Arrays reordered by their rows' centres (geometry compared up to numbering)."""
    o = np.lexsort(np.round(centres, 9).T[::-1])
    return [a[o] for a in (centres, *arrays)]


def sheared(s):
    """Two cells: the unit cube and, beyond x = 1, a cube sheared by ``s`` in y."""
    pts = np.array([[x, y, z] for z in (0, 1) for y in (0, 1) for x in (0, 1)], float)
    far = np.array([[2, y + s, z] for z in (0, 1) for y in (0, 1)], float)
    points = np.concatenate([pts, far])  # 0..7 cube (x + 2y + 4z), 8..11 the far face

    def q(*a):
        return list(a)

    faces = [q(1, 3, 7, 5),  # internal x = 1, normal +x
             q(0, 4, 6, 2), q(0, 1, 5, 4), q(2, 6, 7, 3), q(0, 2, 3, 1), q(4, 5, 7, 6),  # cube
             q(8, 9, 11, 10), q(1, 8, 10, 5), q(3, 7, 11, 9), q(1, 3, 9, 8), q(5, 10, 11, 7)]
    owner = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    return Mesh(points=points, face_ptr=np.arange(0, 45, 4, dtype=np.int64),
                face_nodes=np.array(faces, np.int64).ravel(), owner=np.array(owner, np.int64),
                neighbour=np.array([1], np.int64), patches=[Patch("walls", 1, 10, "wall")],
                n_cells=2)


# -- OpenFOAM ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", sorted(FOAM))
def test_foam_box_matches_the_generated_box(fmt):
    notes = []
    m = read_foam(FOAM[fmt], notes)
    ref = box(**BOX)
    m.check_topology()
    assert notes == []
    assert (m.n_cells, m.n_faces, m.n_internal) == (ref.n_cells, ref.n_faces, ref.n_internal)
    assert [(p.name, p.start, p.size) for p in m.patches] == \
        [(p.name, p.start, p.size) for p in ref.patches]
    assert [p.kind for p in m.patches] == ["wall"] * 4 + ["empty"] * 2
    g, gr = m.geom(), ref.geom()
    assert g.cell_volumes.sum() == pytest.approx(1.2 * 0.9 * 0.1, rel=1e-12)
    for a, b in zip(by_centre(g.cell_centres, g.cell_volumes),
                    by_centre(gr.cell_centres, gr.cell_volumes), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    for p in m.patches:  # boundary faces point out of the domain: compare as they are
        sl = slice(p.start, p.start + p.size)
        a = by_centre(g.face_centres[sl], g.face_areas[sl])
        b = by_centre(gr.face_centres[sl], gr.face_areas[sl])
        np.testing.assert_allclose(a[1], b[1], rtol=1e-12, atol=1e-14)
    ni = m.n_internal  # internal faces: same up to orientation, which goes owner -> neighbour
    d = g.cell_centres[m.neighbour] - g.cell_centres[m.owner[:ni]]
    assert np.all(np.einsum("ij,ij->i", d, g.face_areas[:ni]) > 0)
    a = by_centre(g.face_centres[:ni], np.abs(g.face_areas[:ni]))
    b = by_centre(gr.face_centres[:ni], np.abs(gr.face_areas[:ni]))
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12, atol=1e-14)
    assert closedness(m) < 1e-12


def test_foam_binary_reads_as_ascii():
    a, b = read_foam(FOAM["ascii"]), read_foam(FOAM["binary"])
    np.testing.assert_allclose(a.points, b.points, rtol=0, atol=1e-15)
    for k in ("face_ptr", "face_nodes", "owner", "neighbour"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))


@pytest.mark.parametrize("where", ["case", "constant", "polyMesh", "foam_file"])
def test_foam_locations_and_patch_names(tmp_path, where):
    root = FOAM["ascii"]
    path = {"case": root, "constant": root / "constant",
            "polyMesh": root / "constant" / "polyMesh", "foam_file": root / "box.foam"}[where]
    assert foam_patch_names(path) == ["left", "right", "bottom", "top", "front", "back"]
    assert patch_names(path) == foam_patch_names(path)
    assert read_mesh(path).n_cells == 12


@pytest.mark.parametrize("label64", [False, True])
def test_foam_binary_written_here_label_sizes(tmp_path, label64):
    ref = box((3, 2, 2), (1.0, 2.0, 0.5))
    write_polymesh(tmp_path, ref, "binary", label64)
    m = read_foam(tmp_path)
    np.testing.assert_array_equal(m.face_nodes, ref.face_nodes)
    np.testing.assert_array_equal(m.owner, ref.owner)
    np.testing.assert_allclose(m.points, ref.points, rtol=0, atol=0)


def test_foam_ascii_forms_comments_uniform_compact_and_gzip(tmp_path):
    """Comments anywhere, unsized and uniform lists, a compact-list faces file, gzip."""
    m = sheared(1.0)
    d = write_polymesh(tmp_path, m)
    text = (d / "points").read_text()
    (d / "points").write_text(text.replace("(\n(", "( // first point next\n/* a\n(1 2 3)\n*/ ("
                                           , 1))
    ptr = " ".join(map(str, m.face_ptr))
    nodes = " ".join(map(str, m.face_nodes))
    (d / "faces").write_text(_header("faceCompactList", "faces")
                             + f"{len(m.face_ptr)}({ptr})\n({nodes})\n")
    (d / "owner").write_text(_header("labelList", "owner") + "(0 0 0 0 0 0 1 1 1 1 1)\n")
    (d / "neighbour").write_text(_header("labelList", "neighbour") + "1{1} // the only one\n")
    raw = (d / "boundary").read_bytes()
    (d / "boundary").unlink()
    (d / "boundary.gz").write_bytes(gzip.compress(raw))
    r = read_foam(tmp_path)
    for k in ("face_ptr", "face_nodes", "owner", "neighbour"):
        np.testing.assert_array_equal(getattr(r, k), getattr(m, k))
    np.testing.assert_allclose(r.points, m.points)
    assert r.patches[0].kind == "wall"


def test_foam_compact_ascii_faces_and_turned_faces_are_restored(tmp_path):
    """A face written with owner > neighbour and internal faces out of order come back in
    haloflow's order with the same geometry."""
    ref = box((3, 2, 1))
    m = box((3, 2, 1))
    ni = m.n_internal
    ptr, nodes = m.face_ptr, m.face_nodes.copy()
    nodes[ptr[0]:ptr[1]] = nodes[ptr[0]:ptr[1]][::-1]  # face 0 turned round...
    m.owner[0], m.neighbour[0] = m.neighbour[0], m.owner[0]  # ...and its cells swapped
    m.face_nodes = nodes
    perm = np.concatenate([np.arange(ni)[::-1], np.arange(ni, m.n_faces)])
    size = np.diff(ptr)[perm]
    m.face_nodes = np.concatenate([m.face_nodes[ptr[f]:ptr[f + 1]] for f in perm])
    m.face_ptr = np.concatenate([[0], np.cumsum(size)])
    m.owner, m.neighbour = m.owner[perm], m.neighbour[perm[:ni]]
    write_polymesh(tmp_path, m)
    notes = []
    r = read_foam(tmp_path, notes)
    assert any("turned round" in n for n in notes) and any("reordered" in n for n in notes)
    r.check_topology()
    for k in ("face_ptr", "face_nodes", "owner", "neighbour"):
        np.testing.assert_array_equal(getattr(r, k), getattr(ref, k))


def _break(tmp_path, name, old, new):
    d = write_polymesh(tmp_path, sheared(1.0))
    text = (d / name).read_text()
    assert old in text
    (d / name).write_text(text.replace(old, new, 1))
    lines = (d / name).read_text().splitlines()
    return d / name, next(i + 1 for i, ln in enumerate(lines) if new.strip() in ln)


@pytest.mark.parametrize("name, old, new, words", [
    ("points", "(2.0 1.0 0.0)", "(2.0 1.0 0.0q)", ["'0.0q'", "not a number"]),
    ("points", "(2.0 1.0 0.0)", "(2.0 1.0)", ["expected (x y z)"]),
    ("faces", "4(1 3 7 5)", "4(1 3 7)", ["says 4 points but lists 3"]),
    ("owner", "\n11\n", "\n12\n", ["says 12 items but holds 11"]),
    ("boundary", "startFace 1;", "startFace one;", ["patch 'walls'", "startFace 'one'"]),
    ("boundary", "type wall;", "type wall; #include \"other\"", ["#include", "never evaluated"]),
    ("neighbour", "class labelList;", "class vectorField;", ["class vectorField"]),
])
def test_malformed_foam_file_names_file_and_line(tmp_path, name, old, new, words):
    path, line = _break(tmp_path, name, old, new)
    with pytest.raises(MeshError) as info:
        read_foam(tmp_path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: line {line}: "), msg
    for w in words:
        assert w in msg, msg


def test_foam_structural_errors(tmp_path):
    d = write_polymesh(tmp_path, sheared(1.0), "binary")
    raw = (d / "points").read_bytes()
    (d / "points").write_bytes(raw[:-20])  # truncated binary list
    with pytest.raises(MeshError, match=r"points: line \d+: binary points list of 12 items"):
        read_foam(tmp_path)
    d = write_polymesh(tmp_path, sheared(1.0))
    (d / "boundary").write_text((d / "boundary").read_text().replace("nFaces 10;", "nFaces 9;"))
    with pytest.raises(MeshError, match="patches cover faces 1 to 10, but the mesh has 11"):
        read_foam(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MeshError, match="no OpenFOAM mesh"):
        read_foam(tmp_path / "empty")
    with pytest.raises(MeshError, match="no such file or directory"):
        read_foam(tmp_path / "nowhere")


def test_foam_unknown_types_become_plain_patches_and_a_lone_cyclic_is_refused(tmp_path):
    d = write_polymesh(tmp_path, sheared(1.0))
    text = (d / "boundary").read_text()
    (d / "boundary").write_text(text.replace("type wall;", "type mappedWall;"))
    notes = []
    m = read_foam(tmp_path, notes)
    assert m.patches[0].kind == "patch"
    assert "mappedWall" in notes[0] and "plain patch" in notes[0]
    (d / "boundary").write_text(text.replace(
        "type wall;", "type cyclic;\n        neighbourPatch other;"))
    with pytest.raises(MeshError, match="neighbourPatch.*'other'"):
        read_foam(tmp_path, [])


# -- Gmsh ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, area, patches, cells", [
    ("tri2d.msh", 1.2 * 0.9, ["inlet", "outlet", "walls"], {"prisms": 34}),
    ("mixed2d_v2.msh", 2.0, ["left", "right", "walls"], {"prisms": 26, "hexahedra": 9}),
])
def test_gmsh_2d_is_extruded_one_cell_thick(name, area, patches, cells):
    notes = []
    m = read_gmsh(GMSH / name, notes=notes)
    m.check_topology()
    g = m.geom()
    assert [p.name for p in m.patches] == patches + ["front", "back"]
    assert [p.kind for p in m.patches][-2:] == ["empty", "empty"]
    assert m.patch("front").size == m.patch("back").size == m.n_cells
    assert np.all(g.cell_volumes > 0)
    assert g.cell_volumes.sum() == pytest.approx(area * 1.0, rel=1e-12)
    assert closedness(m) < 1e-12
    f = m.patch("front")
    n = g.face_areas[f.start:f.start + f.size]
    assert np.allclose(n[:, :2], 0) and np.all(n[:, 2] < 0)
    rep = check(m, notes)
    assert rep.ok, rep.problems
    assert {k: v for k, v in rep.cell_shapes.items() if v} == cells
    assert patch_names(GMSH / name) == [p.name for p in m.patches]
    assert any("extruded" in n for n in notes)


def test_gmsh_3d_tets_and_prisms():
    m = read_gmsh(GMSH / "tetprism3d.msh")
    m.check_topology()
    g = m.geom()
    assert [p.name for p in m.patches] == ["bottom", "top", "sides"]
    assert np.all(g.cell_volumes > 0)
    assert g.cell_volumes.sum() == pytest.approx(1.0, rel=1e-12)
    assert closedness(m) < 1e-12
    b = m.patch("bottom")
    n = g.face_areas[b.start:b.start + b.size]
    assert np.all(n[:, 2] < 0) and n[:, 2].sum() == pytest.approx(-1.0)
    rep = check(m)
    assert rep.ok and rep.cell_shapes["prisms"] == 28 and rep.cell_shapes["tetrahedra"] == 89
    # checkMesh (OpenFOAM v1912) on the same mesh, converted with gmshToFoam:
    assert rep.non_orth_max == pytest.approx(38.200544426331, abs=1e-9)
    assert rep.non_orth_avg == pytest.approx(16.747021034452114, abs=1e-9)
    assert rep.skew_max == pytest.approx(0.42553579250336315, abs=1e-12)
    assert rep.volume_min == pytest.approx(0.0042833449872795269, rel=1e-12)


def _rewrite_msh(tmp_path, keep, move=None, name="variant.msh"):
    """tetprism3d.msh with only the element blocks ``keep(type, tag)`` accepts."""
    import meshio

    src = meshio.read(GMSH / "tetprism3d.msh")
    cells, phys = [], []
    for block, tags in zip(src.cells, src.cell_data["gmsh:physical"], strict=True):
        if keep(block.type, int(tags[0])):
            cells.append((block.type, block.data))
            phys.append(tags)
    pts = src.points.copy()
    if move is not None:
        move(pts)
    out = meshio.Mesh(pts, cells, cell_data={"gmsh:physical": phys, "gmsh:geometrical": phys},
                      field_data=src.field_data)
    path = tmp_path / name
    meshio.write(path, out, file_format="gmsh22", binary=False)
    return path


def test_gmsh_faces_in_no_group_go_to_default_faces(tmp_path):
    path = _rewrite_msh(tmp_path, lambda kind, tag: tag != 3)  # drop the "sides" elements
    notes = []
    m = read_gmsh(path, notes=notes)
    assert [p.name for p in m.patches] == ["bottom", "top", "defaultFaces"]
    assert m.patch("defaultFaces").size == 64
    assert any("defaultFaces" in n for n in notes)
    assert patch_names(path) == ["bottom", "top", "defaultFaces"]
    with pytest.warns(UserWarning, match="defaultFaces"):
        read_mesh(path)


def test_gmsh_binary_file_without_physical_groups():
    notes = []
    m = read_gmsh(GMSH / "tri2d_nophys_bin.msh", notes=notes)
    assert [(p.name, p.kind, p.size) for p in m.patches] == [
        ("front", "empty", 34), ("back", "empty", 34), ("defaultFaces", "patch", 14)]
    assert m.geom().cell_volumes.sum() == pytest.approx(1.2 * 0.9, rel=1e-12)
    assert check(m).ok


def test_gmsh_surface_only_file_is_refused(tmp_path):
    path = _rewrite_msh(tmp_path, lambda kind, tag: kind in ("triangle", "quad"))
    with pytest.raises(MeshError, match="plane z = const"):
        read_gmsh(path)
    with pytest.raises(MeshError, match="not a readable Gmsh file"):
        (tmp_path / "junk.msh").write_text("$MeshFormat\nnonsense\n")
        read_gmsh(tmp_path / "junk.msh")


# -- quality -------------------------------------------------------------------------------

def test_quality_of_a_sheared_pair_by_hand():
    """Cell 1 is a unit cube sheared by s = 1 in y.  Centres (0.5, 0.5, 0.5) and (1.5, 1, 0.5):
    non-orthogonality atan(1/2); the far face's skewness |sv| / fd = 0.5 / 0.5 = 1 is the
    largest (internal face 0.25 / 0.5, the sheared walls 0.5).  checkMesh agrees."""
    rep = check(sheared(1.0))
    assert rep.ok, rep.problems
    assert rep.volume_min == pytest.approx(1.0) and rep.volume_max == pytest.approx(1.0)
    assert rep.non_orth_max == pytest.approx(math.degrees(math.atan(0.5)), rel=1e-12)
    assert rep.non_orth_avg == pytest.approx(math.degrees(math.atan(0.5)), rel=1e-12)
    assert rep.skew_max == pytest.approx(1.0, rel=1e-12)
    assert rep.bounds == ((0.0, 0.0, 0.0), (2.0, 2.0, 1.0))
    assert rep.cell_shapes["hexahedra"] == 2


def test_quality_flags_high_skewness_and_severe_non_orthogonality():
    rep = check(sheared(5.0))  # far face skewness s = 5 > 4; atan(2.5) = 68.2 degrees
    assert rep.skew_max == pytest.approx(5.0, rel=1e-12)
    assert rep.non_orth_max == pytest.approx(math.degrees(math.atan(2.5)), rel=1e-12)
    assert len(rep.problems) == 1 and "skewness above 4" in rep.problems[0]
    rep = check(sheared(6.0))  # atan(3) = 71.6 degrees: a warning
    assert any("above 70 degrees" in w for w in rep.warnings)


def test_quality_inside_out_open_and_broken_topology():
    m = sheared(1.0)
    m.face_nodes[4:8] = m.face_nodes[4:8][::-1]  # a wall of cell 0 turned inward
    rep = check(m)
    assert any("inside-out faces; cells 0" in p for p in rep.problems)
    assert any("1 open cells" in p for p in rep.problems)
    cube = box((1, 1, 1))  # every face turned round: a closed cell of negative volume
    for f in range(6):
        a, b = cube.face_ptr[f], cube.face_ptr[f + 1]
        cube.face_nodes[a:b] = cube.face_nodes[a:b][::-1]
    rep = check(cube)
    assert any("negative volume" in p for p in rep.problems)
    assert not any("open" in p for p in rep.problems)
    m = sheared(1.0)
    m.face_nodes[0] = 99
    assert check(m).problems == ["faces refer to points that do not exist"]


# -- haloflow mesh ---------------------------------------------------------------------------

def test_mesh_check_command(capsys):
    assert cli_main(["mesh", "check", str(FOAM["binary"])]) == 0
    out = capsys.readouterr().out
    assert "12 hexahedra" in out and "Mesh OK." in out and "front   empty" in out
    assert cli_main(["mesh", "check", str(GMSH / "tri2d.msh")]) == 0
    assert "warning: 2D mesh extruded" in capsys.readouterr().out
    assert cli_main(["mesh", "check", "cavity"]) == 0


def test_mesh_check_catches_inside_out_and_open_cells(tmp_path, capsys):
    m = box(**BOX)
    f = m.patch("top").start
    a, b = m.face_ptr[f], m.face_ptr[f + 1]
    m.face_nodes[a:b] = m.face_nodes[a:b][::-1]
    write_polymesh(tmp_path / "flipped", m)
    assert cli_main(["mesh", "check", str(tmp_path / "flipped")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mesh is broken" in err and "inside-out" in err
    m = box(**BOX)  # the last back face dropped: its cell is open
    m.face_ptr, m.owner = m.face_ptr[:-1], m.owner[:-1]
    m.face_nodes = m.face_nodes[: m.face_ptr[-1]]
    m.patches[-1].size -= 1
    write_polymesh(tmp_path / "open", m)
    assert cli_main(["mesh", "check", str(tmp_path / "open")]) == 1
    assert "1 open cells" in capsys.readouterr().err


def test_mesh_command_input_errors(tmp_path, capsys):
    assert cli_main(["mesh", "check", str(tmp_path / "nope.msh")]) == 2
    assert "nope.msh: no such file" in capsys.readouterr().err
    assert cli_main(["mesh", "check", "no_such_case"]) == 2
    assert "built-in cases" in capsys.readouterr().err
    assert cli_main(["mesh", "convert", str(GMSH / "tri2d.msh"), str(tmp_path / "x.vtk")]) == 2
    assert "must be a .vtu" in capsys.readouterr().err


@pytest.mark.parametrize("src", [FOAM["ascii"], GMSH / "tetprism3d.msh"])
def test_mesh_convert_writes_one_vtu_with_quality(tmp_path, capsys, src):
    out = tmp_path / "sub" / "mesh.vtu"
    assert cli_main(["mesh", "convert", str(src), str(out)]) == 0
    text = out.read_text()
    cells = 12 if src.is_dir() else 117
    assert f'NumberOfCells="{cells}"' in text
    for name in ("cell_volume", "non_orthogonality", "skewness", "openness"):
        assert f'Name="{name}"' in text


# -- cases on mesh files -------------------------------------------------------------------

CASE = """\
[mesh]
type = "file"
file = "{file}"

[physics]
nu = 0.01

[boundary.top]
type = "wall"
U = [1.0, 0.0, 0.0]
[boundary.left]
type = "wall"
[boundary.right]
type = "wall"
[boundary.bottom]
type = "wall"
[boundary.front]
type = "empty"
[boundary.back]
type = "empty"

[solver]
dt = 0.05
end_time = 10.0
pressure = {{ method = "cg-jacobi", tol = 1e-10 }}

[output]
plots = false
"""


def _case(tmp_path, file, text=CASE, name="c.toml"):
    path = tmp_path / name
    path.write_text(text.format(file=file))
    return path


def test_case_reads_patches_from_the_mesh_file(tmp_path, monkeypatch):
    """mesh.file is relative to the case file (to the working directory from --set)."""
    sub = tmp_path / "cases"
    sub.mkdir()
    case = load_case(_case(sub, os.path.relpath(FOAM["ascii"], sub)))
    assert case.mesh.type == "file" and Path(case.mesh.file) == FOAM["ascii"]
    assert list(case.boundary) == ["left", "right", "bottom", "top", "front", "back"]
    back = tmp_path / "round.toml"
    back.write_text(case.to_toml())
    assert load_case(back) == case
    monkeypatch.chdir(FOAM["binary"].parent)
    case = load_case(sub / "c.toml", ["mesh.file=foam_box_binary"])
    assert Path(case.mesh.file) == FOAM["binary"]


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("[solver]", '[boundary.inlet]\ntype = "wall"\n[solver]'),
     ["boundary.inlet: the mesh has no patch 'inlet'",
      "its patches are: left, right, bottom, top, front, back"]),
    (lambda t: t.replace("[boundary.back]\ntype = \"empty\"\n", ""),
     ["boundary.back: patch 'back' of the mesh has no boundary conditions"]),
    (lambda t: t.replace('type = "file"', 'type = "file"\ncells = [4, 4, 1]'),
     ['mesh.cells: not a key of a mesh of type "file"']),
    (lambda t: t + "[postprocess]\ncavity = true\n", ["postprocess.cavity: needs mesh.type"]),
])
def test_case_errors_with_a_mesh_file(tmp_path, edit, words):
    path = tmp_path / "c.toml"
    path.write_text(edit(CASE.format(file=FOAM["binary"])))
    with pytest.raises(CaseError) as info:
        load_case(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path))
    for w in words:
        assert w in msg, msg


def test_case_mesh_file_missing_or_broken(tmp_path):
    with pytest.raises(CaseError, match=r"c.toml: mesh.file: no such file or directory \"no"):
        load_case(_case(tmp_path, "nowhere"))
    broken = tmp_path / "broken"
    write_polymesh(broken, sheared(1.0))
    (broken / "constant/polyMesh/boundary").write_text("FoamFile { class polyBoundaryMesh; }\n"
                                                       "1 ( walls { type wall; } )\n")
    with pytest.raises(CaseError, match=r"mesh.file: .*boundary: line 2: patch 'walls': no "
                                        r"'nFaces' entry"):
        load_case(_case(tmp_path, broken))
    with pytest.raises(CaseError) as info:
        load_case(_case(tmp_path, FOAM["ascii"]), [f"mesh.file={tmp_path}/none"])
    assert str(info.value).startswith(f"--set mesh.file={tmp_path}/none: mesh.file: no such")


def test_case_mesh_file_check_needs_no_numba(tmp_path):
    """Validating a case on a mesh file reads patch names with numpy alone."""
    path = _case(tmp_path, FOAM["ascii"])
    gm = tmp_path / "g.toml"
    gm.write_text(CASE.format(file=GMSH / "tri2d.msh").replace("[boundary.top]", "[boundary.x]")
                  .replace("left]", "inlet]").replace("right]", "outlet]")
                  .replace("bottom]", "walls]").replace("[boundary.x]\ntype = \"wall\"\n"
                                                        "U = [1.0, 0.0, 0.0]\n", ""))
    code = ("import sys; from haloflow.case import load_case; "
            f"c = load_case({str(path)!r}); g = load_case({str(gm)!r}); "
            "print(list(g.boundary), 'numba' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "['inlet', 'outlet', 'walls', 'front', 'back'] False"


def test_mesh_check_names_a_missing_patch_of_a_case(tmp_path, capsys):
    path = _case(tmp_path, FOAM["ascii"],
                 CASE.replace("[solver]", '[boundary.lid]\ntype = "wall"\n[solver]'))
    assert cli_main(["mesh", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "boundary.lid: the mesh has no patch 'lid' (its patches are: left, right" in err


def test_case_runs_on_the_foam_box_as_on_the_generated_box(tmp_path):
    """A few steps on the OpenFOAM box give the generated box's residuals."""
    file_case = _case(tmp_path, FOAM["ascii"])
    box_case = tmp_path / "box.toml"
    box_case.write_text(CASE.format(file="").replace(
        'type = "file"\nfile = ""', 'type = "box"\ncells = [4, 3, 1]\nlengths = [1.2, 0.9, 0.1]'))
    runs = {}
    for name, case in (("file", file_case), ("box", box_case)):
        out = tmp_path / name
        assert cli_main(["run", str(case), "-o", str(out), "--steps", "3", "--quiet"]) == 0
        runs[name] = (np.loadtxt(out / "residuals.csv", delimiter=",", skiprows=1),
                      json.loads((out / "summary.json").read_text()))
    (a, sa), (b, sb) = runs["file"], runs["box"]
    assert sa["cells"] == sb["cells"] == 12 and sa["steps"] == 3
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-14)


def test_run_on_a_broken_mesh_file_is_a_one_line_input_error(tmp_path, capsys):
    """The mesh is read on rank 0 only; its error still stops the run as bad input (exit 2)."""
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(FOAM["ascii"], bad)
    points = next(bad.rglob("points"))
    text = points.read_text()
    points.write_text(text.replace("(0 0 0)", "(0 0 zz)", 1))
    case = _case(tmp_path, bad)
    with pytest.raises(SystemExit) as e:
        cli_main(["run", str(case), "-o", str(tmp_path / "out"), "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "points" in err and "not a number" in err and err.count("\n") == 1
