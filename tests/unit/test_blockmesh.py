"""blockMeshDict reader: geometry against OpenFOAM's blockMesh, errors, the pitzdaily case.

The references are blockMesh's own output (OpenFOAM v1912, ``writePrecision 17``):
``tests/data/meshes/{foam_box_ascii,blockmesh_arc}`` hold a dictionary and the polyMesh
blockMesh made from it; ``pitzdaily_digest.json`` condenses the 12 225-cell pitzDaily polyMesh
(too big to commit) into counts, patch areas and every 97th cell of the sorted cell list.
Regenerate the digest with ``python -m tests.unit.test_blockmesh <pitzDaily case>`` after
running blockMesh there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from haloflow.case import load_case
from haloflow.mesh import MeshError, mesh_format, patch_names, read_mesh
from haloflow.mesh.blockmesh import _divisions, blockmesh_patch_names, read_blockmesh
from haloflow.mesh.foam import read_foam

DATA = Path(__file__).resolve().parents[1] / "data" / "meshes"
BOX = DATA / "foam_box_ascii"
ARC = DATA / "blockmesh_arc"
DIGEST = DATA / "pitzdaily_digest.json"
EVERY = 97  # cells kept in the digest: every 97th of the sorted list


def by_centre(centres, *arrays):
    """Rows ordered by their centres (geometry compared up to numbering)."""
    o = np.lexsort(np.round(centres, 9).T[::-1])
    return [a[o] for a in (centres, *arrays)]


def patch_areas(m):
    g = m.geom()
    out = {}
    for p in m.patches:
        sf = g.face_areas[p.start:p.start + p.size]
        out[p.name] = (p.size, p.kind, float(np.linalg.norm(sf, axis=1).sum()),
                       sf.sum(axis=0).tolist())
    return out


def digest(m) -> dict:
    """What the pitzdaily test compares: counts, volumes, patch areas, a sample of cells."""
    g = m.geom()
    cc, vol = by_centre(g.cell_centres, g.cell_volumes)
    return {"cells": m.n_cells, "faces": m.n_faces, "internal_faces": m.n_internal,
            "points": len(m.points), "volume": float(vol.sum()),
            "min_volume": float(vol.min()), "max_volume": float(vol.max()),
            "centre_sum": cc.sum(axis=0).tolist(),
            "patches": {k: list(v) for k, v in patch_areas(m).items()},
            "sample_centres": cc[::EVERY].tolist(), "sample_volumes": vol[::EVERY].tolist()}


def assert_same_mesh(m, ref):
    """Same cells (centres, volumes to 1e-10), same patches with the same areas."""
    m.check_topology()
    assert (m.n_cells, m.n_faces, m.n_internal, len(m.points)) == \
        (ref.n_cells, ref.n_faces, ref.n_internal, len(ref.points))
    g, gr = m.geom(), ref.geom()
    a = by_centre(g.cell_centres, g.cell_volumes)
    b = by_centre(gr.cell_centres, gr.cell_volumes)
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-10, atol=0)
    pa, pb = patch_areas(m), patch_areas(ref)
    assert list(pa) == list(pb)
    for name in pa:
        assert pa[name][:2] == pb[name][:2], name
        assert pa[name][2] == pytest.approx(pb[name][2], rel=1e-12), name
        np.testing.assert_allclose(pa[name][3], pb[name][3], rtol=1e-12, atol=1e-14)
    ni = m.n_internal  # internal faces point from owner to neighbour
    d = g.cell_centres[m.neighbour] - g.cell_centres[m.owner[:ni]]
    assert np.all(np.einsum("ij,ij->i", d, g.face_areas[:ni]) > 0)


# -- geometry against blockMesh ------------------------------------------------------------

def test_box_dict_equals_blockmesh_polymesh():
    notes = []
    m = read_blockmesh(BOX / "system" / "blockMeshDict", notes)
    assert notes == []
    assert_same_mesh(m, read_foam(BOX))


def test_graded_curved_multiblock_dict_equals_blockmesh_polymesh():
    """Three blocks two cells thick: simpleGrading and edgeGrading, multi-grading sections
    through $macros, two arcs (one listed against the block's edge direction), two
    polyLines, a cell zone name, scale, and faces in no patch (defaultFaces)."""
    notes = []
    m = read_blockmesh(ARC / "system" / "blockMeshDict", notes)
    assert_same_mesh(m, read_foam(ARC))
    assert [p.kind for p in m.patches] == ["patch", "patch", "wall", "empty"]
    assert any("went to 'defaultFaces'" in n for n in notes)
    # the arcs bulge: the mesh is bigger than its straight-edged blocks (0.5^3 scale)
    straight = (1 * 2 + 2 * 1.1) * 0.3 * 0.125
    assert m.geom().cell_volumes.sum() > straight * 1.02


def test_old_patches_syntax_and_default_patch(tmp_path):
    """``patches (wall name (faces))`` and ``defaultPatch`` give the same mesh."""
    text = (BOX / "system" / "blockMeshDict").read_text()
    start = text.index("boundary")
    old = text[:start] + """patches
(
    wall left ((0 4 7 3))
    wall right ((1 2 6 5))
    wall bottom ((0 1 5 4))
    wall top ((3 7 6 2))
);
defaultPatch { name frontBack; type empty; }
"""
    (tmp_path / "blockMeshDict").write_text(old)
    m = read_blockmesh(tmp_path / "blockMeshDict")
    ref = read_foam(BOX)
    assert [(p.name, p.kind, p.size) for p in m.patches] == \
        [(p.name, p.kind, p.size) for p in ref.patches[:4]] + [("frontBack", "empty", 24)]
    assert patch_names(tmp_path / "blockMeshDict") == \
        ["left", "right", "bottom", "top", "frontBack"]


def test_divisions_follow_the_grading():
    lam = _divisions(4, [(1.0, 1.0, 8.0)])  # last cell 8x the first
    d = np.diff(lam)
    assert lam[0] == 0 and lam[-1] == pytest.approx(1)
    assert d[-1] / d[0] == pytest.approx(8)
    np.testing.assert_allclose(d[1:] / d[:-1], 2.0)
    # two sections: half the length in 1 cell of 3, uniform
    lam = _divisions(3, [(1, 1, 1), (1, 2, 1)])
    np.testing.assert_allclose(lam, [0, 0.5, 0.75, 1.0])


def test_negative_expansion_ratio_is_its_inverse(tmp_path):
    """blockMesh reads a ratio -r as 1/r."""
    pts = []
    for g in ("-2", "0.5"):
        (tmp_path / "blockMeshDict").write_text(
            BOX_DICT.replace("simpleGrading (1 1 1)", f"simpleGrading ({g} 1 1)"))
        pts.append(read_blockmesh(tmp_path / "blockMeshDict").points)
    np.testing.assert_allclose(pts[0], pts[1], rtol=0, atol=1e-15)
    assert not np.allclose(pts[0], read_blockmesh(BOX / "system" / "blockMeshDict").points)


def test_where_a_blockmeshdict_is_found(tmp_path):
    """A dict file, a case with system/blockMeshDict and no polyMesh; a polyMesh wins."""
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    shutil.copy(ARC / "system" / "blockMeshDict", case / "system")
    assert mesh_format(case / "system" / "blockMeshDict") == "blockmesh"
    assert mesh_format(case) == "blockmesh"
    (case / "c.foam").touch()
    assert mesh_format(case / "c.foam") == "blockmesh"
    assert mesh_format(BOX) == "foam"  # has both: blockMesh's output is read
    assert patch_names(case) == ["inlet", "outlet", "walls", "defaultFaces"]
    assert read_mesh(case, []).n_cells == 124


# -- errors --------------------------------------------------------------------------------

BOX_DICT = (BOX / "system" / "blockMeshDict").read_text()


@pytest.mark.parametrize("old, new, line, words", [
    ("blocks (", "blcoks (", 9, ["unknown keyword 'blcoks'", "did you mean 'blocks'?"]),
    ("(0 1 2 3 4 5 6 7)", "(0 1 2 3 4 5 6)", 9, ["block 0: a hex needs 8 vertex labels, got 7"]),
    ("(0 1 2 3 4 5 6 7)", "(0 1 2 3 4 5 6 8)", 9,
     ["blocks: block 0: vertex label 8 is out of range (0..7)"]),
    ("(0 1 2 3 4 5 6 7)", "(0 3 2 1 4 7 6 5)", 9, ["block 0 is inside-out"]),
    ("(0 1 2 3 4 5 6 7)", "(0 1 2 3 4 5 6 6)", 9, ["collapsed"]),
    ("(4 3 1)", "(4 3 0)", 9, ["block 0: cell count 0 is out of range (>= 1)"]),
    ("simpleGrading (1 1 1)", "simpleGrading (1 1)", 9, ["simpleGrading needs 3 values, got 2"]),
    ("simpleGrading (1 1 1)", "simpleGrading (1 ((1 2)) 1)", 9,
     ["(length-fraction cells-fraction ratio)"]),
    ("top    { type wall;  faces ((3 7 6 2)); }", "top { type wall; faces ((3 7 6 1)); }", 15,
     ["patch 'top': face (3 7 6 1) is not a face of any block"]),
    ("top    { type wall;  faces ((3 7 6 2)); }", "top { type wall; faces ((0 4 7 3)); }", 15,
     ["face (0 4 7 3) is already in patch 'left'"]),
    ("top    { type wall;  faces ((3 7 6 2)); }", "top { type wall; }", 15,
     ["patch 'top': needs 'type' and 'faces'"]),
    ("convertToMeters 1;", "convertToMeters 1;\nmergePatchPairs ((a b));", 4,
     ["mergePatchPairs: not supported"]),
    ("convertToMeters 1;", "convertToMeters 1;\nedges (spline 0 1 ((0.5 0 0)));", 4,
     ["edge kind 'spline' is not supported"]),
    ("convertToMeters 1;", "convertToMeters 1;\nedges (arc 0 1 (0.5 0 0));", 4,
     ["arc 0 1: its three points lie on a line"]),
    ("convertToMeters 1;", "convertToMeters 1;\nedges (arc 0 2 (0.5 0.5 0));", 4,
     ["arc 0 2: not an edge of any block"]),
    ("convertToMeters 1;", '#include "other"', 3, ["#include", "not supported"]),
    ("(4 3 1)", "$cells", 9, ["$cells: no entry 'cells'"]),
    ("convertToMeters 1;", "convertToMeters 1", 4,
     ["convertToMeters: unexpected 'vertices' after the value (';' missing?)"]),
    ("(1.2 0 0)", "(1.2 zero 0)", 6, ["expected a coordinate of vertex 1, got 'zero'"]),
])
def test_bad_dicts_name_file_line_and_expectation(tmp_path, old, new, line, words):
    path = tmp_path / "blockMeshDict"
    assert old in BOX_DICT
    path.write_text(BOX_DICT.replace(old, new, 1))
    with pytest.raises(MeshError) as info:
        read_blockmesh(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: line {line}: "), msg
    for w in words:
        assert w in msg, msg
    # the cheap path (run when a case file is validated) refuses the same dict, same message
    with pytest.raises(MeshError) as quick:
        blockmesh_patch_names(path)
    assert str(quick.value) == msg


def test_non_matching_blocks_and_touching_blocks(tmp_path):
    """Blocks sharing a face with different cell counts; blocks touching through duplicated
    vertices instead of shared labels (blockMesh would need mergePatchPairs)."""
    verts = "(0 0 0) (1 0 0) (1 1 0) (0 1 0) (0 0 1) (1 0 1) (1 1 1) (0 1 1) " \
            "(2 0 0) (2 1 0) (2 0 1) (2 1 1)"
    two = ("FoamFile { class dictionary; object blockMeshDict; }\nvertices (" + verts + ");\n"
           "blocks (hex (0 1 2 3 4 5 6 7) (2 2 1) simpleGrading (1 1 1)\n"
           "        hex (1 8 9 2 5 10 11 6) (2 3 1) simpleGrading (1 1 1));\n")
    path = tmp_path / "blockMeshDict"
    path.write_text(two)
    with pytest.raises(MeshError, match="blocks 0 and 1 share a face but their cells do not"):
        read_blockmesh(path)
    dup = two.replace(verts, verts + " (1 0 0) (1 1 0) (1 0 1) (1 1 1)") \
             .replace("hex (1 8 9 2 5 10 11 6) (2 3 1)", "hex (12 8 9 13 14 10 11 15) (2 2 1)")
    path.write_text(dup)
    assert blockmesh_patch_names(path) == ["defaultFaces"]
    with pytest.raises(MeshError, match="touches another block without sharing its vertex"):
        read_blockmesh(path)


def test_patch_names_need_no_numba_or_scipy():
    code = ("import sys; from haloflow.mesh import patch_names; "
            f"print(patch_names({str(ARC / 'system' / 'blockMeshDict')!r}), "
            "'numba' in sys.modules, 'scipy' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "['inlet', 'outlet', 'walls', 'defaultFaces'] False False"


# -- the pitzdaily case --------------------------------------------------------------------

def test_pitzdaily_mesh_equals_blockmesh_digest():
    """The shipped dictionary gives blockMesh's 12 225-cell pitzDaily mesh."""
    case = load_case("pitzdaily")
    assert case.mesh.type == "file" and Path(case.mesh.file).name == "blockMeshDict"
    assert list(case.boundary) == ["inlet", "outlet", "upperWall", "lowerWall", "frontAndBack"]
    ref = json.loads(DIGEST.read_text())
    got = digest(read_mesh(case.mesh.file, []))
    for k in ("cells", "faces", "internal_faces", "points"):
        assert got[k] == ref[k], k
    assert got["cells"] == 12225
    for k in ("volume", "min_volume", "max_volume"):
        assert got[k] == pytest.approx(ref[k], rel=1e-12), k
    np.testing.assert_allclose(got["centre_sum"], ref["centre_sum"], rtol=0, atol=1e-9)
    assert list(got["patches"]) == list(ref["patches"])
    for name, (size, kind, area, vec) in ref["patches"].items():
        g = got["patches"][name]
        assert g[:2] == [size, kind]
        assert g[2] == pytest.approx(area, rel=1e-12)
        np.testing.assert_allclose(g[3], vec, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got["sample_centres"], ref["sample_centres"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["sample_volumes"], ref["sample_volumes"], rtol=1e-10, atol=0)


if __name__ == "__main__":  # python -m tests.unit.test_blockmesh <pitzDaily case with polyMesh>
    out = digest(read_foam(sys.argv[1]))
    DIGEST.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {DIGEST}: {out['cells']} cells")


def _residuals(out: Path) -> np.ndarray:
    """Per iteration: Ux, Uy and p initial residuals (residuals.csv)."""
    with open(out / "residuals.csv") as f:
        head = f.readline().strip().split(",")
    data = np.loadtxt(out / "residuals.csv", delimiter=",", skiprows=1, ndmin=2)
    return data[:, [head.index(k) for k in ("Ux_res", "Uy_res", "p_res")]]


def test_pitzdaily_smoke_run_residuals_fall(tmp_path):
    """Ten SIMPLEC iterations of the built-in case from rest: the residuals fall."""
    from haloflow.cli import main as cli_main

    out = tmp_path / "run"
    assert cli_main(["run", "pitzdaily", "-o", str(out), "--steps", "10", "--quiet",
                     "--set", "output.fields=false", "--set", "output.plots=false"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["cells"] == 12225 and s["iterations"] == 10 and not s["converged"]
    res = _residuals(out)
    assert res.shape == (10, 3)
    assert res[-1].max() < 0.2 and res[-1].max() < 0.25 * res[1].max(), res
    # pressure: down every iteration from the fifth (the fourth rises by 2 %: 0.0603 ->
    # 0.0614, with SIMPLEC's flux share from the faces' pressure difference)
    assert np.all(np.diff(res[4:, 2]) < 0), res[:, 2]


CASE_ON_DICT = """\
[mesh]
type = "file"
file = "{file}"

[physics]
nu = 0.01

[boundary.inlet]
type = "inlet"
U = [1.0, 0.0, 0.0]
[boundary.outlet]
type = "outlet"
[boundary.walls]
type = "wall"
[boundary.defaultFaces]
type = "slip"

[solver]
algorithm = "simple"
max_iterations = 3

[output]
fields = false
plots = false
"""


def test_case_file_mesh_is_a_blockmeshdict_relative_to_the_case(tmp_path):
    from haloflow.cli import main as cli_main

    (tmp_path / "mesh").mkdir()
    shutil.copy(ARC / "system" / "blockMeshDict", tmp_path / "mesh" / "blockMeshDict")
    path = tmp_path / "c.toml"
    path.write_text(CASE_ON_DICT.format(file="mesh/blockMeshDict"))
    case = load_case(path)
    assert Path(case.mesh.file) == tmp_path / "mesh" / "blockMeshDict"
    assert list(case.boundary) == ["inlet", "outlet", "walls", "defaultFaces"]
    out = tmp_path / "run"
    assert cli_main(["run", str(path), "-o", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["cells"] == 124 and s["iterations"] == 3
    assert np.all(np.isfinite(_residuals(out)))


def test_cyclic_patch_pairs_are_joined_as_in_a_polymesh(tmp_path):
    """A periodic box: left/right cyclic; the patches disappear, as read_foam does it."""
    text = BOX_DICT.replace(
        "left   { type wall;  faces ((0 4 7 3)); }",
        "left { type cyclic; neighbourPatch right; faces ((0 4 7 3)); }").replace(
        "right  { type wall;  faces ((1 2 6 5)); }",
        "right { type cyclic; neighbourPatch left; faces ((1 2 6 5)); }")
    path = tmp_path / "blockMeshDict"
    path.write_text(text)
    assert blockmesh_patch_names(path) == ["bottom", "top", "front", "back"]
    notes = []
    m = read_blockmesh(path, notes)
    assert [p.name for p in m.patches] == ["bottom", "top", "front", "back"]
    assert m.n_internal == read_foam(BOX).n_internal + 3  # 3 faces across the period
    assert any("cyclic" in n for n in notes)
    path.write_text(text.replace("neighbourPatch left;", ""))
    with pytest.raises(MeshError, match="cyclic patch 'left' needs a 'neighbourPatch'"):
        blockmesh_patch_names(path)
