"""Inlet profiles from a CSV table: read and checked with the case, interpolated at the face
centres, a developed channel profile reproduced; bad tables named with file and line."""

from __future__ import annotations

import numpy as np
import pytest

from haloflow.case import CaseError, load_case
from haloflow.io.profile_table import TableError, read_table
from haloflow.mesh.blocks import box
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import self_reducer
from haloflow.physics.bcs import build_boundary


def parabola_csv(path, n=41, height=1.0, extra=""):
    y = np.linspace(0.0, height, n)
    u = 1.5 * (1.0 - (2.0 * y / height - 1.0) ** 2)
    rows = "\n".join(f"{a:.17g},{b:.17g},0,0" for a, b in zip(y, u, strict=True))
    path.write_text(f"# developed channel flow, mean 1\ny,Ux,Uy,Uz\n{rows}\n{extra}")
    return path


def table_case(tmp_path, table="inlet.csv", extra=()):
    text = load_case("channel").to_toml()
    path = tmp_path / "case.toml"
    path.write_text(text.replace('profile = "uniform"', f'profile = "table"\ntable = "{table}"')
                    .replace("U = [\n    1.0,\n    0.0,\n    0.0,\n]\nprofile", "profile"))
    return load_case(path, ["mesh.cells=[40,20,1]", "mesh.lengths=[2.0,1.0,1.0]", *extra])


def test_values_at_face_centres(tmp_path):
    parabola_csv(tmp_path / "inlet.csv", n=401)
    case = table_case(tmp_path)
    assert case.boundary["left"].table == str((tmp_path / "inlet.csv").resolve())
    m = case.mesh
    mesh = box(m.cells, m.lengths, m.origin, m.grading)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    bc = build_boundary(lm, case.boundary, self_reducer())
    p = lm.patch("left")
    b = slice(p.start - lm.n_internal, p.start - lm.n_internal + p.size)
    y = lm.geometry.face_centres[p.start:p.start + p.size, 1]
    assert np.allclose(bc.u_value[b, 0], 1.5 * (1 - (2 * y - 1) ** 2), atol=1e-5)
    assert np.all(bc.u_value[b, 1:] == 0.0)


def test_channel_from_a_table_inlet_is_poiseuille(tmp_path):
    from haloflow.post.channel import max_relative_error

    parabola_csv(tmp_path / "inlet.csv")
    case = table_case(tmp_path, extra=["solver.residual_tol=1e-6"])
    from tests.validation.test_channel import steady

    m = case.mesh
    lm, s, _ = steady(box(m.cells, m.lengths, m.origin, m.grading), case, "table inlet")
    ids = 30 + 40 * np.arange(20)
    err = max_relative_error(lm.geometry.cell_centres[ids, 1], s.U[0, ids], 0.0, 1.0, 1.0)
    assert err < 0.003, err


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("r,Ux,Uy,Uz\n0,1,0,0\n1,1,0,0\n", "expected the coordinate (x, y or z)"),
    ("y,Ux,Uy\n0,1,0\n1,1,0\n", "line 1"),
    ("y,Ux,Uy,Uz\n0,1,0,0\n", "at least 2"),
    ("y,Ux,Uy,Uz\n0,1,0,0\n# note\n0.5,1,0\n", "line 4: 3 values"),
    ("y,Ux,Uy,Uz\n0,1,0,0\n0.5,fast,0,0\n", "line 3"),
    ("y,Ux,Uy,Uz\n0,1,0,0\n0.5,nan,0,0\n", "finite"),
    ("y,Ux,Uy,Uz\n0,1,0,0\n0.5,1,0,0\n0.5,1,0,0\n", "line 4: y = 0.5 does not increase"),
])
def test_bad_tables(tmp_path, text, words):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(TableError) as info:
        read_table(path)
    assert str(path) in str(info.value) and words in str(info.value)


def test_case_errors(tmp_path):
    with pytest.raises(CaseError, match=r"boundary\.left\.table: .*no such file"):
        table_case(tmp_path, "missing.csv")
    (tmp_path / "bad.csv").write_text("y,Ux,Uy,Uz\n0,1,0,0\n")
    with pytest.raises(CaseError, match=r"bad\.csv: 1 rows"):
        table_case(tmp_path, "bad.csv")
    parabola_csv(tmp_path / "inlet.csv")
    with pytest.raises(CaseError, match=r"boundary\.left\.U: not used with profile"):
        table_case(tmp_path, extra=["boundary.left.U=[1,0,0]"])
    with pytest.raises(CaseError, match=r"boundary\.left\.table: needs profile"):
        table_case(tmp_path, extra=['boundary.left.profile="uniform"'])
    with pytest.raises(CaseError, match=r"boundary\.top\.table: not allowed"):
        table_case(tmp_path, extra=['boundary.top.table="inlet.csv"'])


def test_table_must_cover_the_patch(tmp_path):
    parabola_csv(tmp_path / "inlet.csv", height=0.8)
    case = table_case(tmp_path)
    m = case.mesh
    mesh = box(m.cells, m.lengths, m.origin, m.grading)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    with pytest.raises(TableError, match="covers y from 0 to 0.8, but the patch's faces reach"):
        build_boundary(lm, case.boundary, self_reducer())
