"""benchmarks/tgv.py's OpenFOAM side, without OpenFOAM: the pisoFoam case starts from
haloflow's own initial field (blockMesh's cell order), and the whole-curve error measures
what it says."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from haloflow.case import load_case
from haloflow.io import refdata
from haloflow.mesh import from_case
from haloflow.physics.initial import initial_fields

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import tgv  # noqa: E402
import tgv_openfoam  # noqa: E402


def test_openfoam_initial_field_is_haloflows_in_blockmesh_order():
    n = 6
    case = load_case("taylor_green_3d", [f"mesh.cells=[{n},{n},{n}]"])
    mesh = from_case(case.mesh)
    c = mesh.geom().cell_centres
    U, p = initial_fields(case.initial, case.mesh, case.physics.nu, c)
    # blockMesh numbers a block's cells x fastest, then y, then z
    h = 2.0 * np.pi / n
    idx = np.round((c + np.pi) / h - 0.5).astype(int)
    order = np.argsort(idx[:, 0] + n * (idx[:, 1] + n * idx[:, 2]))
    U_foam, p_foam = tgv_openfoam._initial(n)
    np.testing.assert_allclose(U_foam, U[:, order].T, atol=1e-12)
    np.testing.assert_allclose(p_foam, p[order], atol=1e-12)
    assert np.abs(U_foam[:, 0] - U_foam[::-1, 0]).max() > 0.1  # not symmetric by accident


def test_rate_error_of_the_reference_and_of_an_early_peak():
    ref = refdata.tgv_spectral()
    t = np.linspace(0.0, 12.0, 481)
    exact = np.interp(t, ref[:, 0], ref[:, 2])
    assert tgv.rate_error(t, exact, ref) < 1e-12
    early = np.interp(t + 1.0, ref[:, 0], ref[:, 2])  # the same curve a time unit early
    assert 0.1 < tgv.rate_error(t, early, ref) < 0.5
    assert abs(tgv.rate_error(t, 1.1 * exact, ref) - 0.1) < 1e-9


def test_block_mesh_pairs_every_axis():
    text = tgv_openfoam._block_mesh(8)
    assert "(8 8 8)" in text
    for a, b in (("left", "right"), ("bottom", "top"), ("front", "back")):
        assert f"{a} {{ type cyclic; neighbourPatch {b};" in text
        assert f"{b} {{ type cyclic; neighbourPatch {a};" in text
