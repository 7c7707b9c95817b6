"""Distributed CSR matrix and Krylov solvers on one rank, against scipy references.

The decomposed-pattern tests build every rank's LocalMesh in one process and fill the ghosts
from a global vector by hand, so they check the owned-row/ghost-column layout without MPI.
"""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from mpi4py import MPI

from haloflow.linalg.bicgstab import bicgstab
from haloflow.linalg.krylov import Workspace, pcg
from haloflow.linalg.matrix import DistMatrix, Pattern
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer

COMM = MPI.COMM_SELF


def _mesh():
    return box((7, 6, 3), (1.0, 1.2, 0.6), grading=(2.0, 1.0, 0.5))


def _coefficients(m, symmetric, seed=0, shift=0.5):
    """Random face coefficients on the global mesh: (diag, lower, upper), lower/upper < 0."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, m.n_internal)
    if symmetric:
        lower, upper = -a, -a.copy()
    else:
        c = rng.uniform(-0.8, 0.8, m.n_internal)  # convection-like skew
        lower, upper = -a * (1 + c), -a * (1 - c)
    diag = np.full(m.n_cells, shift) + rng.uniform(0.0, 0.1, m.n_cells)
    np.add.at(diag, m.owner[:m.n_internal], -upper)
    np.add.at(diag, m.neighbour, -lower)
    return diag, lower, upper


def _reference(m, diag, lower, upper):
    """Independent scipy assembly: upper at (owner, neighbour), lower at (neighbour, owner)."""
    own, nbr = m.owner[:m.n_internal], m.neighbour
    rows = np.concatenate([np.arange(m.n_cells), own, nbr])
    cols = np.concatenate([np.arange(m.n_cells), nbr, own])
    vals = np.concatenate([diag, upper, lower])
    return sp.csr_matrix((vals, (rows, cols)), shape=(m.n_cells, m.n_cells))


def _serial(m, diag, lower, upper):
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    A = DistMatrix(Pattern(lm), halo.make("packed", lm, COMM))
    A.fill(diag, lower, upper)
    return lm, A


@pytest.mark.parametrize("symmetric", [True, False], ids=["spd", "nonsym"])
def test_to_scipy_matches_reference(symmetric):
    """fill + to_scipy reproduce an independently assembled scipy matrix exactly."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, symmetric)
    lm, A = _serial(m, diag, lower, upper)
    ref = _reference(m, diag, lower, upper)
    got = A.to_scipy()
    assert got.shape == ref.shape
    assert A.pattern.nnz == ref.nnz == m.n_cells + 2 * m.n_internal
    assert abs(got - ref).max() == 0.0
    np.testing.assert_array_equal(A.diag, diag)


def test_refill_overwrites_every_coefficient():
    """A second fill replaces all old values (no stale entries left over)."""
    m = _mesh()
    lm, A = _serial(m, *_coefficients(m, True, seed=1))
    d2, l2, u2 = _coefficients(m, False, seed=2)
    A.fill(d2, l2, u2)
    assert abs(A.to_scipy() - _reference(m, d2, l2, u2)).max() == 0.0


def test_symmetric_fill_is_the_fill_of_minus_the_coupling():
    """fill_symmetric(diag, g) makes the matrix of fill(diag, -g, -g), every entry to the
    bit, over a matrix that held other values (the boundary faces' couplings after the
    internal ones are not read)."""
    m = _mesh()
    lm, A = _serial(m, *_coefficients(m, False, seed=3))
    diag, lower, _ = _coefficients(m, True, seed=4)
    g = np.concatenate([-lower, np.full(m.n_faces - m.n_internal, np.nan)])
    A.fill_symmetric(diag, g)
    got = A.data.copy()
    A.fill(diag, lower, lower)
    np.testing.assert_array_equal(got, A.data)
    np.testing.assert_array_equal(A.diag, diag)


@pytest.mark.parametrize("symmetric", [True, False], ids=["spd", "nonsym"])
def test_matvec_residual_off_diagonal(symmetric):
    """matvec, residual and off_diagonal agree with scipy products on random vectors."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, symmetric)
    lm, A = _serial(m, diag, lower, upper)
    ref = _reference(m, diag, lower, upper)
    rng = np.random.default_rng(5)
    x, b = rng.standard_normal(m.n_cells), rng.standard_normal(m.n_cells)
    y = np.full(m.n_cells, np.nan)
    A.matvec(x, y)
    np.testing.assert_allclose(y, ref @ x, rtol=1e-13, atol=1e-13)
    r = np.full(m.n_cells, np.nan)
    A.residual(x, b, r)
    np.testing.assert_allclose(r, b - ref @ x, rtol=1e-13, atol=1e-13)
    A.off_diagonal(x, y)
    np.testing.assert_allclose(y, ref @ x - diag * x, rtol=1e-13, atol=1e-13)


def _solve(solver, A, lm, b, tol, max_iter=500):
    nvec = 4 if solver is pcg else 8
    ws = Workspace(lm.n_cells, lm.n_owned, nvec)
    x = np.zeros(lm.n_cells)
    info = solver(A, b, x, tol, max_iter, Reducer(COMM), ws)
    return x, info


@pytest.mark.parametrize("solver, symmetric", [(pcg, True), (bicgstab, True),
                                               (bicgstab, False)],
                         ids=["pcg-spd", "bicgstab-spd", "bicgstab-nonsym"])
def test_krylov_matches_spsolve(solver, symmetric):
    """pcg/bicgstab converge to 1e-10 and match scipy's direct solve to 1e-8 relative."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, symmetric, shift=0.05)
    lm, A = _serial(m, diag, lower, upper)
    ref = _reference(m, diag, lower, upper).tocsc()
    b = np.random.default_rng(3).standard_normal(m.n_cells)
    x, info = _solve(solver, A, lm, b, 1e-10)
    assert info.converged and info.res <= 1e-10
    assert 0 < info.iters < 200
    assert info.res0 == pytest.approx(1.0)  # x0 = 0: initial residual is ||b||
    true_res = np.linalg.norm(b - ref @ x) / np.linalg.norm(b)
    assert true_res <= 1e-9  # the recurred residual is not lying
    xs = spla.spsolve(ref, b)
    assert np.linalg.norm(x - xs) <= 1e-8 * np.linalg.norm(xs)


@pytest.mark.parametrize("solver", [pcg, bicgstab])
def test_relative_tolerance_stops_early(solver):
    """rel_tol: stop at that fraction of the initial residual (relTol), not at tol."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, True, shift=0.05)
    lm, A = _serial(m, diag, lower, upper)
    b = np.random.default_rng(3).standard_normal(m.n_cells)
    nvec = 4 if solver is pcg else 8
    x = np.full(m.n_cells, 0.3)  # res0 != 1
    info = solver(A, b, x, 1e-10, 500, Reducer(COMM), Workspace(lm.n_cells, lm.n_owned, nvec),
                  rel_tol=0.05) if solver is pcg else solver(
        A, b, x, 1e-10, 500, Reducer(COMM), Workspace(lm.n_cells, lm.n_owned, nvec), None, 0.05)
    _, full = _solve(solver, A, lm, b, 1e-10)
    assert info.converged and 1e-10 < info.res <= 0.05 * info.res0
    assert 0 < info.iters < full.iters / 2
    true_res = np.linalg.norm(b - _reference(m, diag, lower, upper) @ x) / np.linalg.norm(b)
    assert true_res == pytest.approx(info.res, rel=1e-6)


@pytest.mark.parametrize("solver", [pcg, bicgstab])
def test_krylov_zero_rhs_and_exact_guess(solver):
    """b = 0 returns at once with x = 0; an exact initial guess needs no iterations."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, True)
    lm, A = _serial(m, diag, lower, upper)
    x, info = _solve(solver, A, lm, np.zeros(m.n_cells), 1e-10)
    assert info.iters == 0 and np.all(x == 0.0)
    xs = np.random.default_rng(0).standard_normal(m.n_cells)
    b = _reference(m, diag, lower, upper) @ xs
    nvec = 4 if solver is pcg else 8
    x = xs.copy()
    info = solver(A, b, x, 1e-10, 50, Reducer(COMM), Workspace(lm.n_cells, lm.n_owned, nvec))
    assert info.iters == 0 and info.res0 <= 1e-10
    np.testing.assert_array_equal(x, xs)


def test_pcg_singular_neumann_laplacian():
    """All-Neumann Laplacian (zero row sums) with zero-mean b: pcg converges to a solution."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, True, shift=0.0)
    rng = np.random.default_rng(0)
    diag = np.zeros(m.n_cells)  # exact zero row sums
    np.add.at(diag, m.owner[:m.n_internal], -upper)
    np.add.at(diag, m.neighbour, -lower)
    lm, A = _serial(m, diag, lower, upper)
    ref = _reference(m, diag, lower, upper)
    np.testing.assert_allclose(ref @ np.ones(m.n_cells), 0.0, atol=1e-13)
    b = rng.standard_normal(m.n_cells)
    b -= b.mean()
    x, info = _solve(pcg, A, lm, b, 1e-10)
    assert info.converged and info.res <= 1e-10
    assert np.linalg.norm(b - ref @ x) <= 1e-9 * np.linalg.norm(b)
    # compare with the solution pinned at the last cell, both shifted to zero mean
    n = m.n_cells
    xs = np.zeros(n)
    xs[:-1] = spla.spsolve(ref[:-1, :-1].tocsc(), b[:-1])
    xs -= xs.mean()
    assert np.linalg.norm((x - x.mean()) - xs) <= 1e-8 * np.linalg.norm(xs)


def test_pcg_reports_nonconvergence():
    """With too few iterations pcg says converged=False and a residual above tol."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, True, shift=0.01)
    lm, A = _serial(m, diag, lower, upper)
    b = np.random.default_rng(1).standard_normal(m.n_cells)
    x, info = _solve(pcg, A, lm, b, 1e-12, max_iter=3)
    assert not info.converged and info.iters == 3 and info.res > 1e-12


class _GlobalGhosts:
    """Stand-in exchanger: fills ghosts from a global vector (tests the pattern, not MPI)."""

    def __init__(self, lm, x_global):
        self.lm, self.x_global = lm, x_global

    def exchange(self, fields):
        for f in fields:
            f[self.lm.n_owned:] = self.x_global[self.lm.global_cells[self.lm.n_owned:]]


@pytest.mark.parametrize("method", ["metis", "rcb"])
@pytest.mark.parametrize("nparts", [2, 3, 5])
@pytest.mark.parametrize("symmetric", [True, False], ids=["spd", "nonsym"])
def test_decomposed_matrix_rows(method, nparts, symmetric):
    """On each rank, to_scipy and matvec are the global matrix's owned rows (ghost columns)."""
    m = _mesh()
    diag, lower, upper = _coefficients(m, symmetric, seed=7)
    ref = _reference(m, diag, lower, upper)
    x = np.random.default_rng(11).standard_normal(m.n_cells)
    ax = ref @ x
    parts = decompose(m, nparts, method)
    for r in range(nparts):
        lm = build_local(m, parts, r)
        gc = lm.global_cells
        gf = lm.global_faces[:lm.n_internal]
        A = DistMatrix(Pattern(lm), _GlobalGhosts(lm, x))
        A.fill(diag[gc], lower[gf], upper[gf])
        local = A.to_scipy()
        assert local.shape == (lm.n_owned, lm.n_cells)
        expected = ref[gc[:lm.n_owned]][:, gc]
        assert abs(local - expected).max() == 0.0
        assert local.nnz == expected.nnz
        xl = np.full(lm.n_cells, np.nan)
        xl[:lm.n_owned] = x[gc[:lm.n_owned]]
        y = np.full(lm.n_cells, np.nan)
        A.matvec(xl, y)
        np.testing.assert_allclose(y[:lm.n_owned], ax[gc[:lm.n_owned]], rtol=1e-13, atol=1e-13)
        A.off_diagonal(xl, y)
        np.testing.assert_allclose(y[:lm.n_owned],
                                   ax[gc[:lm.n_owned]] - diag[gc[:lm.n_owned]] * x[gc[:lm.n_owned]],
                                   rtol=1e-12, atol=1e-12)


def test_reducer_serial_and_counting():
    """On one rank Reducer.sum returns its arguments and counts calls."""
    red = Reducer(COMM)
    assert red.sum(1.5, -2.0) == (1.5, -2.0)
    assert red.sum(3.0)[0] == 3.0
    assert red.n_calls == 2
