"""Aggregation AMG: answers equal a direct solve; iteration counts stay flat with mesh size."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from mpi4py import MPI

from haloflow.linalg import aggregation, amg_kernels, amg_levels, flexible
from haloflow.linalg import amg as amg_module
from haloflow.linalg import krylov as K
from haloflow.linalg.aggregation import pairwise
from haloflow.linalg.amg import AMG, COARSEST
from haloflow.linalg.galerkin import galerkin_pattern, galerkin_refresh
from haloflow.linalg.matrix import IDX
from haloflow.linalg.poisson import laplacian as fv_laplacian
from haloflow.linalg.poisson import smooth_rhs
from haloflow.mesh.blocks import box
from haloflow.mesh.fv import face_coeffs
from haloflow.mesh.periodic import stitch
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer, self_reducer

COMM = MPI.COMM_SELF


def laplacian(cells, grading=(1.0, 1.0, 1.0), dirichlet=True):
    """Finite-volume Laplacian; Dirichlet on left/right/bottom/top makes it definite."""
    m = box(cells, grading=grading)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    walls = ("left", "right", "bottom", "top") if dirichlet else ()
    return lm, fv_laplacian(lm, COMM, fixed=walls)


def rhs(lm, zero_mean=False):
    return smooth_rhs(lm, self_reducer(), zero_mean)


def solve(lm, A, b, tol=1e-10):
    amg = AMG(A, lm, self_reducer())
    x = np.zeros(lm.n_cells)
    info = flexible.fcg(A, b, x, tol, 200, Reducer(COMM), K.Workspace(lm.n_cells, lm.n_owned, 8),
                 amg.apply)
    return x, info, amg


def test_pairwise_matches_strongest_couplings():
    """A 1D chain pairs neighbours; the stronger of two couplings wins."""
    lm, A = laplacian((8, 1, 1), dirichlet=False)
    p = A.pattern
    agg, n = pairwise(p.indptr, p.indices, A.data, p.diag_pos, p.n_rows, 0.25)
    assert n == 4 and list(agg) == [0, 0, 1, 1, 2, 2, 3, 3]
    lm, A = laplacian((8, 1, 1), grading=(8.0, 1.0, 1.0), dirichlet=False)
    agg, n = pairwise(A.pattern.indptr, A.pattern.indices, A.data, A.pattern.diag_pos, 8, 0.25)
    assert n == 4  # graded: pairs still form, each with its strongest neighbour


def test_pairwise_visits_rows_in_key_order():
    """Rows are visited in key order, equal couplings go to the smallest key: reversed keys
    pair the chain from its other end, and aggregates are numbered as they are created."""
    lm, A = laplacian((7, 1, 1), dirichlet=False)
    p = A.pattern
    agg, n = pairwise(p.indptr, p.indices, A.data, p.diag_pos, 7, 0.25, key=np.arange(7)[::-1])
    assert n == 4 and list(agg) == [3, 2, 2, 1, 1, 0, 0]


def test_equal_couplings_are_ties_whatever_the_rounding():
    """Face coefficients of a uniform box differ in the last bits when n is not a power of
    two; that noise used to pick the partners (14-18 iterations instead of 9)."""
    for n in (63, 100, 255):
        for dirichlet in (True, False):
            lm, A = laplacian((n, n, 1), dirichlet=dirichlet)
            _, info, _ = solve(lm, A, rhs(lm, zero_mean=not dirichlet), tol=1e-6)
            assert info.iters <= 11, (n, dirichlet, info.iters)


def test_periodic_box_with_varying_coefficients_coarsens_by_four():
    """A periodic cube whose face coefficients carry a smooth 2 % modulation, as the first
    pressure matrix of the Taylor-Green vortex does (its 1/a_P): with ties decided within
    1e-6 that modulation picked the partners, the aggregates took random shapes and this box
    coarsened 4096, 1183, 492, 220 (the case's 32^3 stalled at 2417 rows, 64^3 at 68601)."""
    pairs = [("left", "right"), ("bottom", "top"), ("front", "back")]
    m = stitch(box((16, 16, 16), lengths=(2 * np.pi,) * 3), pairs)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    A = fv_laplacian(lm, COMM)
    c = lm.geometry.cell_centres
    r = 1.0 + 0.02 * np.sin(c[:, 0]) * np.cos(c[:, 1]) * np.cos(c[:, 2])
    ni = lm.n_internal
    g = face_coeffs(lm).gdiff[:ni] * 0.5 * (r[lm.owner[:ni]] + r[lm.neighbour])
    diag = np.zeros(lm.n_cells)
    np.add.at(diag, lm.owner[:ni], g)
    np.add.at(diag, lm.neighbour, g)
    A.fill(diag, -g, -g)
    x, info, amg = solve(lm, A, rhs(lm, zero_mean=True), tol=1e-6)
    assert [lev.n for lev in amg.levels] == [4096, 1024, 256], [lev.n for lev in amg.levels]
    assert info.converged and info.iters <= 12, info


def test_quality_test_refuses_long_aggregates():
    """mu(G) of the 5-point Laplacian: 2 for a 2 x 2 square, 6.8 for four cells in a row,
    so with KAPPA = 4.5 the matching never builds the latter."""
    lm, A = laplacian((8, 8, 1))
    p = A.pattern
    absrow = aggregation._abs_offdiag(p.indptr, p.indices, A.data, p.diag_pos, p.n_rows)
    w, dg = np.zeros((16, 16)), np.zeros(16)

    def ok(cells, kappa):
        g = np.array([x + 8 * y for x, y in cells] + [0] * (16 - len(cells)))
        return aggregation._quality_ok(p.indptr, p.indices, A.data, p.diag_pos, absrow, g,
                                      len(cells), kappa, w, dg)

    square, line = [(3, 3), (4, 3), (3, 4), (4, 4)], [(2, 3), (3, 3), (4, 3), (5, 3)]
    assert ok(square, 2.01) and not ok(square, 1.99)
    assert ok(line, 6.9) and not ok(line, 6.7)
    assert aggregation.KAPPA < 6.7


def test_galerkin_pattern_is_the_triple_product():
    """Structure and coefficients of P^T A P for a piecewise-constant P (random aggregates)."""
    lm, A = laplacian((9, 7, 5))
    p = A.pattern
    agg = np.random.default_rng(3).integers(0, 40, p.n_rows)
    ip, ix, dp, slot = galerkin_pattern(p.indptr, p.indices, p.n_rows, agg, agg, 40, 40)
    data = np.zeros(len(ix))
    galerkin_refresh(slot, A.data, data)
    P = np.zeros((p.n_rows, 40))
    P[np.arange(p.n_rows), agg] = 1.0
    ref = P.T @ A.to_scipy().toarray() @ P
    got = np.zeros((40, 40))
    rows = np.repeat(np.arange(40), np.diff(ip).astype(np.int64))
    got[rows, ix.astype(np.int64)] = data
    assert np.allclose(got, ref) and np.all(ix.astype(np.int64)[dp] == np.arange(40))


@pytest.mark.parametrize("cells", [(24, 24, 1), (10, 10, 10)])
def test_matches_direct_solve(cells):
    lm, A = laplacian(cells)
    b = rhs(lm)
    x, info, _ = solve(lm, A, b)
    ref = spla.spsolve(A.to_scipy().tocsc(), b)
    assert info.converged
    assert np.abs(x - ref).max() <= 1e-8 * np.abs(ref).max()


def test_iterations_flat_with_mesh_size():
    """To 1e-6: at most 12 iterations from 32^2 to 256^2, growing by at most 30%."""
    its = []
    for n in (32, 64, 128, 256):
        lm, A = laplacian((n, n, 1))
        _, info, amg = solve(lm, A, rhs(lm), tol=1e-6)
        its.append(info.iters)
        assert amg.levels[-1].n <= COARSEST
    assert max(its) <= 12, its
    assert its[-1] <= 1.3 * its[0], its


def test_anisotropic_grading():
    """Graded 50:1 in y (cell aspect ratios from 12.7:1 to 1:3.9): converges, 18 iterations
    here against 10 on the uniform mesh; pairing follows the strong couplings."""
    lm, A = laplacian((64, 64, 1), grading=(1.0, 50.0, 1.0))
    _, info, _ = solve(lm, A, rhs(lm), tol=1e-6)
    assert info.converged and info.iters <= 20, info


def test_singular_neumann_problem():
    """All-Neumann: the coarsest level pins one unknown; the answer solves A x = b."""
    lm, A = laplacian((40, 40, 1), dirichlet=False)
    b = rhs(lm, zero_mean=True)
    x, info, amg = solve(lm, A, b, tol=1e-10)
    assert info.converged and amg.levels[-1].pinned >= 0
    r = b - A.to_scipy() @ x
    assert np.abs(r).max() <= 1e-9 * np.abs(b).max()


def test_refresh_follows_new_coefficients():
    """Same pattern, scaled coefficients: after refresh the solution scales inversely."""
    lm, A = laplacian((32, 32, 1))
    b = rhs(lm)
    x1, info1, amg = solve(lm, A, b)
    A.data *= 4.0
    A.diag *= 4.0
    amg.refresh()
    x2 = np.zeros(lm.n_cells)
    info = flexible.fcg(A, b, x2, 1e-10, 100, Reducer(COMM), K.Workspace(lm.n_cells, lm.n_owned, 8),
                 amg.apply)
    assert info.iters == info1.iters
    assert np.abs(4.0 * x2 - x1).max() <= 1e-8 * np.abs(x1).max()


def test_standalone_cycles_converge():
    """AMG as a solver on its own (no Krylov): slower than FCG, same answer."""
    lm, A = laplacian((48, 48, 1))
    b = rhs(lm)
    amg = AMG(A, lm, self_reducer())
    x = np.zeros(lm.n_cells)
    info = amg.solve(b, x, 1e-8, 100)
    ref = spla.spsolve(A.to_scipy().tocsc(), b)
    assert info.converged and info.iters <= 30, info
    assert np.abs(x[: lm.n_owned] - ref).max() <= 1e-6 * np.abs(ref).max()


@pytest.mark.parametrize("dense_lu", [amg_module.DENSE_LU, 0])
def test_gather_threshold_moves_work_never_the_hierarchy(dense_lu, monkeypatch):
    """Where the hierarchy turns redundant changes what a parallel run distributes (the
    reductions a serial run counts), never the levels, the iterations or the answer; the
    coarsest level's compiled LU solve (dense or sparse factors) solves it."""
    monkeypatch.setattr(amg_module, "DENSE_LU", dense_lu)  # 0: the sparse LU
    monkeypatch.setattr(amg_module, "CHOLESKY", False)  # the LUs (tested with it below)
    lm, A = laplacian((24, 20, 18), dirichlet=False)
    b = rhs(lm, zero_mean=True)
    runs = []
    for gb in (None, 1000, 10**9):
        amg = AMG(A, lm, self_reducer(), gather_below=gb, cycle="K")  # its coarse reductions
        x = np.zeros(lm.n_cells)
        info = flexible.fcg(A, b, x, 1e-8, 200, Reducer(COMM),
                            K.Workspace(lm.n_cells, lm.n_owned, 8), amg.apply)
        runs.append(([lev.n for lev in amg.levels], info.iters, x, amg.red.stats.calls,
                     amg.first_redundant, amg))
    (lv0, it0, x0, c0, f0, _), (lv1, it1, x1, c1, f1, _), (lv2, it2, x2, c2, f2, amg) = runs
    assert lv0 == lv1 == lv2 and it0 == it1 == it2
    assert np.array_equal(x0, x1) and np.array_equal(x0, x2)
    assert f0 > f1 > f2 == 1 and c0 > c1 > c2 == 0  # fewer distributed levels, fewer counted
    assert lv0[-1] <= amg_module.COARSEST < lv0[-2]
    co = amg.levels[-1]
    f = co.lu
    rb = np.random.default_rng(1).standard_normal(co.n)
    rb -= rb.mean()  # consistent with the all-Neumann (pinned) matrix
    out = np.zeros(co.n)
    amg_kernels.lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud,
                        co.pinned, rb, out, f.y)
    import scipy.sparse as sp
    M = sp.csr_matrix((co.data, co.indices, co.indptr), shape=(co.n, co.n)).toarray()
    assert co.pinned == co.n - 1
    assert np.abs(M @ out - rb).max() <= 1e-9 * np.abs(rb).max()


def test_dense_lu_follows_lapack_row_interchanges():
    """A matrix that needs pivoting (small diagonal): the dense factors and their row
    permutation, solved by ``lu_solve``, give numpy's answer."""
    rng = np.random.default_rng(3)
    n = 9
    M = rng.standard_normal((n, n))
    M[np.arange(n), np.arange(n)] = 1e-3  # every column pivots away from the diagonal
    ip = np.arange(0, n * n + 1, n).astype(IDX)
    ix = np.tile(np.arange(n), n).astype(IDX)
    lev = amg_levels.Level(ip, ix, M.ravel().copy(), np.arange(n) * (n + 1), n, n, None,
                           self_reducer())
    AMG._factor_dense(lev)
    f = lev.lu
    assert lev.pinned == -1 and not np.array_equal(f.perm_r, np.arange(n))
    b = rng.standard_normal(n)
    x = np.zeros(n)
    amg_kernels.lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud, -1, b,
                        x, f.y)
    assert np.allclose(x, np.linalg.solve(M, b), rtol=1e-10, atol=1e-12)


def _with_ghosts(cells=(7, 6, 5)):
    """A Laplacian's rows with random coefficients and a block of ghost columns (numbered
    after the owned rows, as on a rank of a parallel run): the l1 diagonal exceeds a_ii
    on the rows coupled to them."""
    import scipy.sparse as sp

    lm, A = laplacian(cells)
    p, n = A.pattern, A.pattern.n_rows
    M = sp.csr_matrix((A.data.copy(), p.indices, p.indptr), shape=(n, n)).tolil()
    rng = np.random.default_rng(5)
    ng = 9
    M.resize((n, n + ng))
    for i in rng.choice(n, 40, replace=False):
        M[i, n + rng.integers(ng)] = -rng.random()
    M = M.tocsr()
    M.sort_indices()
    M.data *= 1.0 + 0.3 * rng.random(len(M.data))
    ip, ix = M.indptr.astype(np.uint32), M.indices.astype(np.uint32)
    dp = np.array([ip[i] + np.searchsorted(ix[ip[i]:ip[i + 1]], i) for i in range(n)])
    return ip, ix, M.data, dp, n, rng


def test_l1_diagonal_from_the_rows_with_ghosts_is_the_full_scan():
    """The l1 diagonal from each row's diagonal entry and the whole rows only where they
    have ghost columns is the one a scan of every row gives, to the bit; a row with ghosts
    left out of the list shows (the list is what makes it right)."""
    ip, ix, data, dp, n, rng = _with_ghosts()
    want, got = np.zeros(n), np.full(n, np.nan)
    amg_kernels.l1_inverse(ip, ix, data, dp, n, want)
    rows = np.unique(np.repeat(np.arange(n), np.diff(ip))[ix >= n]).astype(np.uint32)
    assert 0 < len(rows) < n
    amg_kernels.l1_inverse_rows(ip, ix, data, dp, rows, n, got)
    np.testing.assert_array_equal(got, want)
    amg_kernels.l1_inverse_rows(ip, ix, data, dp, rows[1:], n, got)
    assert got[rows[0]] != want[rows[0]]


def test_half_row_presmoothing_equals_sweep_and_residual():
    """gs_from_zero then upper_residual_restrict (the cycle's pre-smoothing on a pattern
    split at the diagonal) give the sweep from zero and R (b - A x) of the whole rows, with
    ghost columns and an l1 diagonal larger than a_ii; a pattern not split is refused."""
    ip, ix, data, dp, n, rng = _with_ghosts()
    assert amg_kernels.split_at_diagonal(ip, ix, dp, n)
    dinv = np.zeros(n)
    amg_kernels.l1_inverse(ip, ix, data, dp, n, dinv)
    assert np.any(1.0 / dinv > data[dp] * (1 + 1e-3))  # ghost couplings in the l1 diagonal
    b = rng.random(n)
    x1 = np.zeros(len(ix) and n + 9)
    amg_kernels.gs_sweep(ip, ix, data, dp, dinv, b, x1, n, True)
    x2 = np.full(n + 9, np.nan)
    x2[n:] = 0.0
    amg_kernels.gs_from_zero(ip, ix, data, dp, dinv, b, x2, n)
    np.testing.assert_allclose(x2[:n], x1[:n], rtol=1e-13, atol=0)
    ghosts = rng.random(9)  # the exchange's values
    x1[n:] = x2[n:] = ghosts
    agg = rng.integers(0, 17, n)
    r = np.zeros(n)
    amg_kernels.residual(ip, ix, data, x1, b, r)
    rc1, rc2, rc3 = np.zeros(17), np.full(17, np.nan), np.full(17, np.nan)
    amg_kernels.restrict(agg, r, n, rc1, 17)
    amg_kernels.upper_residual_restrict(ip, ix, data, dp, dinv, x2, n, agg, rc2, 17)
    amg_kernels.residual_restrict(ip, ix, data, x1, b, n, agg, rc3, 17)
    scale = np.abs(rc1).max()
    assert scale > 0.1
    assert np.abs(rc2 - rc1).max() < 1e-13 * scale
    np.testing.assert_array_equal(rc3, rc1)
    swapped = ix.copy()
    swapped[[ip[5], ip[5] + 1]] = swapped[[ip[5] + 1, ip[5]]]
    assert not amg_kernels.split_at_diagonal(ip, swapped, dp, n)


def test_sweeps_sum_in_any_order_to_the_same_answer():
    """gs_sweep's reordered row sums are Gauss-Seidel: against a plain loop both ways."""
    ip, ix, data, dp, n, rng = _with_ghosts((6, 5, 4))
    dinv = np.zeros(n)
    amg_kernels.l1_inverse(ip, ix, data, dp, n, dinv)
    b, x0 = rng.random(n), rng.random(n + 9)
    for forward in (True, False):
        want = x0.copy()
        for i in (range(n) if forward else range(n - 1, -1, -1)):
            s = b[i] + (1.0 / dinv[i] - data[dp[i]]) * want[i]
            for k in range(ip[i], ip[i + 1]):
                if k != dp[i]:
                    s -= data[k] * want[ix[k]]
            want[i] = s * dinv[i]
        x = x0.copy()
        amg_kernels.gs_sweep(ip, ix, data, dp, dinv, b, x, n, forward)
        np.testing.assert_allclose(x, want, rtol=1e-13, atol=0)


def test_one_pass_presmoothing_without_ghosts():
    """gs_from_zero_restrict (no ghost columns) equals the sweep from zero and R (b - A x)
    of the whole rows, on a 3D Laplacian with coefficients varied row by row."""
    lm, A = laplacian((9, 7, 6))
    p, n = A.pattern, A.pattern.n_rows
    rng = np.random.default_rng(8)
    data = A.data * (1.0 + 0.3 * rng.random(len(A.data)))
    ip, ix, dp = p.indptr, p.indices, p.diag_pos
    assert amg_kernels.split_at_diagonal(ip, ix, dp, n)
    dinv = np.zeros(n)
    amg_kernels.l1_inverse(ip, ix, data, dp, n, dinv)
    b, agg = rng.random(n), rng.integers(0, 23, n)
    x1 = np.zeros(n)
    amg_kernels.gs_sweep(ip, ix, data, dp, dinv, b, x1, n, True)
    r, rc1 = np.zeros(n), np.zeros(23)
    amg_kernels.residual(ip, ix, data, x1, b, r)
    amg_kernels.restrict(agg, r, n, rc1, 23)
    x2, rc2 = np.full(n, np.nan), np.full(23, np.nan)
    amg_kernels.gs_from_zero_restrict(ip, ix, data, dp, dinv, b, x2, n, agg, rc2, 23)
    np.testing.assert_allclose(x2, x1, rtol=1e-13, atol=0)
    assert np.abs(rc2 - rc1).max() < 1e-13 * np.abs(rc1).max()


def _scale_symmetric(A, eps, lm):
    """A -> D A D with D = 1 + eps sin(cell index): every entry moves by up to ~2 eps, the
    matrix stays symmetric positive definite."""
    p = A.pattern
    d = 1.0 + eps * np.sin(np.arange(lm.n_cells) * 0.37)
    rows = np.repeat(np.arange(p.n_rows), np.diff(p.indptr.astype(np.int64)))
    A.data *= d[rows] * d[p.indices.astype(np.int64)]
    A.diag *= d[:lm.n_owned] ** 2


def test_coarsest_factors_kept_while_its_entries_barely_move():
    """Coarse entries within ``REFACTOR_ABOVE`` of those factored keep the factors (FCG
    still solves the new system to its tolerance, in as many iterations as before, +-1);
    a larger move, or ``refactor_next`` (a checkpoint), factors again."""
    lm, A = laplacian((48, 48, 1))
    b = rhs(lm)
    _, info1, amg = solve(lm, A, b)
    chol = amg.levels[-1].chol
    assert len(amg.levels) > 1 and chol and chol.reused == 0
    ud = chol.f.ud.copy()

    def resolve():
        amg.refresh()
        x = np.zeros(lm.n_cells)
        info = flexible.fcg(A, b, x, 1e-10, 100, Reducer(COMM),
                     K.Workspace(lm.n_cells, lm.n_owned, 8), amg.apply)
        ref = spla.spsolve(A.to_scipy().tocsc(), b)
        assert np.abs(x[:lm.n_owned] - ref).max() <= 1e-7 * np.abs(ref).max()
        return info

    _scale_symmetric(A, 0.002, lm)
    info = resolve()
    assert chol.reused == 1 and np.array_equal(chol.f.ud, ud)
    assert abs(info.iters - info1.iters) <= 1
    _scale_symmetric(A, 0.05, lm)
    resolve()
    assert chol.reused == 1 and not np.array_equal(chol.f.ud, ud)
    ud = chol.f.ud.copy()
    amg.refactor_next()
    _scale_symmetric(A, 0.001, lm)
    resolve()
    assert chol.reused == 1 and not np.array_equal(chol.f.ud, ud)
    assert amg.profile()["factors_reused"] == 1


def test_a_checkpoint_leaves_the_factors_and_a_restart_adopts_them():
    """Writing a checkpoint leaves the coarsest level's factors as they were, and a solver
    restored from it factors from the entries the saved run's factors were made from: the
    two go on bit for bit (factors reused or made afresh at the same steps)."""
    from haloflow.case import load_case
    from haloflow.parallel import halo
    from haloflow.physics import solver_from_case

    case = load_case("cavity", ["mesh.cells=[40,40,1]", "solver.dt=0.01"])
    mesh = box((40, 40, 1))

    def solver():
        lm = build_local(mesh, np.zeros(1600, dtype=np.int64), 0)
        return solver_from_case(lm, case, halo.make("packed", lm, COMM), COMM)

    s = solver()
    for _ in range(3):
        s.step()
    chol = s.pressure.amg.levels[-1].chol
    assert chol and chol.basis is not None
    basis, ud = chol.basis.copy(), chol.f.ud.copy()
    values, extra = s.checkpoint_state()
    assert np.array_equal(chol.basis, basis) and np.array_equal(chol.f.ud, ud)
    r = solver()
    r.restore_state({k: np.array(v[0], copy=True) for k, v in values.items()}, extra)
    rc = r.pressure.amg.levels[-1].chol
    assert np.array_equal(rc.basis, basis) and np.array_equal(rc.f.ud, ud)
    for _ in range(4):
        s.step()
        r.step()
    assert np.array_equal(s.U, r.U) and np.array_equal(s.p, r.p)
    assert s.pressure.amg.profile()["factors_reused"] > 0  # the reuse is what is checked


