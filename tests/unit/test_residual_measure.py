"""OpenFOAM's normalised residual (``solver.residual_norm = "normalised"``): the formula,
its invariances, and that choosing it changes what a run reports and where SIMPLE stops,
never the fields."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import CaseError, load_case
from haloflow.cli import main
from haloflow.linalg.measure import NormalisedResidual
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer
from haloflow.physics import solver_from_case

SELF = MPI.COMM_SELF


def _matrix(A):
    """``A`` (owned rows x all columns, dense) as the CSR the measure reads."""
    rows, cols = np.nonzero(A)
    indptr = np.searchsorted(rows, np.arange(A.shape[0] + 1))
    return SimpleNamespace(pattern=SimpleNamespace(indptr=indptr, indices=cols.astype(np.uint32)),
                           data=A[rows, cols].copy())


def _reference(A, x, b, n):
    """The definition, written out: sum|b - Ax| / (sum|Ax - xbar A1| + sum|b - xbar A1|)."""
    ax, a1, xbar = A @ x, A.sum(axis=1), x[:n].mean()
    return np.abs(b[:n] - ax).sum() / (np.abs(ax - xbar * a1).sum()
                                       + np.abs(b[:n] - xbar * a1).sum())


def _system(rng, n=30, ghosts=6):
    A = np.where(rng.random((n, n + ghosts)) < 0.15, rng.standard_normal((n, n + ghosts)), 0.0)
    A[np.arange(n), np.arange(n)] = 4.0 + rng.random(n)
    return A, rng.standard_normal(n + ghosts), rng.standard_normal(n + ghosts)


def _measure(A, xs, bs, n=30):
    """The measure of ``A`` for components ``xs``, ``bs`` (stacked as rows 1, 2, ...)."""
    k = len(xs)
    X, B = np.zeros((k + 1, xs[0].size)), np.zeros((k + 1, bs[0].size))
    X[1:], B[1:] = xs, bs
    return NormalisedResidual(_matrix(A), tuple(range(1, k + 1)), n, n, Reducer(SELF))(X, B)


def test_the_definition_with_ghost_columns_for_several_components():
    rng = np.random.default_rng(3)
    A, x, b = _system(rng)
    x2, b2 = rng.standard_normal(x.size), rng.standard_normal(b.size)
    assert _measure(A, [x, x2], [b, b2]) == pytest.approx(
        [_reference(A, x, b, 30), _reference(A, x2, b2, 30)], rel=1e-13)


def test_scaling_the_system_or_shifting_a_pressure_leaves_it_unchanged():
    """The measure does not see the equation's scale (the sign of a pressure matrix
    included), nor a constant added to x where rows sum to zero (a Neumann problem)."""
    rng = np.random.default_rng(5)
    A, x, b = _system(rng, ghosts=0)
    r = _measure(A, [x], [b])[0]
    assert _measure(-7.5 * A, [x], [-7.5 * b])[0] == pytest.approx(r, rel=1e-12)
    L = A - np.diag(A.sum(axis=1))  # zero row sums
    r = _measure(L, [x], [b])[0]
    assert _measure(L, [x + 40.0], [b])[0] == pytest.approx(r, rel=1e-9)
    xs = np.linalg.solve(A, b)  # and a solved system has none
    assert _measure(A, [xs], [b])[0] < 1e-13


def _channel(norm: str, steps: int, method: str = "sgs"):
    case = load_case("channel", ["mesh.cells=[16,6,1]", f"solver.residual_norm={norm}",
                                 f"solver.momentum.method={method}"])
    lm = build_local(box((16, 6, 1), (4.0, 1.0, 1.0)), np.zeros(96, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)
    return s, [s.step() for _ in range(steps)]


def _reported(infos) -> np.ndarray:
    return np.array([[u.res0 for u in i.u_solves] + [i.p_solves[0].res0] for i in infos])


def test_the_choice_changes_the_reported_residuals_not_the_fields():
    a, ia = _channel('"relative"', 6)
    b, ib = _channel('"normalised"', 6)
    assert np.array_equal(a.U, b.U) and np.array_equal(a.p, b.p)
    ra, rb = _reported(ia[1:]), _reported(ib[1:])
    assert np.all(rb > 0.0) and np.all(rb < 1.0)
    assert not np.allclose(ra, rb, rtol=0.05)


@pytest.mark.parametrize("method", ["bicgstab-jacobi", "bicgstab-sgs"])
def test_every_velocity_solver_reports_the_same_measure(method):
    """The lockstep solves and the one-component-at-a-time path measure alike: the same
    second step (the same state, as the first step's solves end at the same tolerance)."""
    ref = _reported(_channel('"normalised"', 2)[1])
    got = _reported(_channel('"normalised"', 2, method)[1])
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-3)


def test_the_temperature_reports_it_too():
    cases = {}
    for norm in ("relative", "normalised"):
        case = load_case("heated_cavity", ["mesh.cells=[10,10,1]",
                                           f'solver.residual_norm="{norm}"'])
        lm = build_local(box((10, 10, 1)), np.zeros(100, dtype=np.int64), 0)
        s = solver_from_case(lm, case, halo.make("packed", lm, SELF), SELF)
        cases[norm] = s, [s.step().t_solve.res0 for _ in range(4)]
    (a, ra), (b, rb) = cases["relative"], cases["normalised"]
    assert np.array_equal(a.energy.T, b.energy.T)
    assert all(0.0 < r < 1.0 for r in rb[1:]) and not np.allclose(ra[1:], rb[1:], rtol=0.05)


def test_simple_stops_at_the_first_iteration_below_the_tolerance_by_its_measure(tmp_path):
    """A whole run: each measure stops SIMPLE at the first iteration whose largest reported
    initial residual (residuals.csv) is below ``residual_tol``, and the two stop apart."""
    stops = {}
    for norm in ("relative", "normalised"):
        out = tmp_path / norm
        assert main(["run", "channel", "-o", str(out), "--quiet", "--set",
                     "mesh.cells=[24,8,1]", "--set", "solver.residual_tol=1e-4", "--set",
                     f'solver.residual_norm="{norm}"', "--set", "output.plots=false"]) == 0
        rows = np.genfromtxt(out / "residuals.csv", delimiter=",", names=True)
        worst = np.maximum.reduce([rows["Ux_res"], rows["Uy_res"], rows["p_res"]])
        assert json.loads((out / "summary.json").read_text())["converged"]
        assert worst[-1] < 1e-4 and np.all(worst[:-1] >= 1e-4), norm
        stops[norm] = len(rows)
    assert stops["relative"] != stops["normalised"], stops


def test_a_wrong_choice_is_a_one_line_error():
    with pytest.raises(CaseError, match='solver.residual_norm: expected "relative" or '
                                        '"normalised"'):
        load_case("channel", ["solver.residual_norm=l1"])
