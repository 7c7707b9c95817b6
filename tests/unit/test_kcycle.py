"""The compiled pressure solve (linalg/kcycle.py) against the Python path it replaces:
flexible.fcg / flexible.cg1 with AMG.apply.  Same iterations, same answer to round-off, same
counters (reductions, exchanges per level, the matrix's exchanger), on definite and
all-Neumann problems in 2D and 3D; the coarsest level's Cholesky against SuperLU."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.linalg import cycle as cycle_tables
from haloflow.linalg import flexible, kcycle
from haloflow.linalg import krylov as K
from haloflow.linalg import lowsync as L
from haloflow.linalg.amg import AMG
from haloflow.linalg.amg_kernels import lu_solve
from haloflow.linalg.poisson import laplacian, smooth_rhs
from haloflow.mesh import from_case as mesh_from_case
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.parallel.reduce import Reducer
from haloflow.physics import solver_from_case
from tests.mpi.conftest import require_c_mpi


@pytest.fixture(autouse=True)
def _c_mpi():
    """Every test here calls the compiled solvers: they need the MPI library's C functions
    (a failure under CI when they are not found)."""
    require_c_mpi()


COMM = MPI.COMM_SELF
PROBLEMS = [((14, 12, 10), True), ((14, 12, 10), False), ((48, 40, 1), True),
            ((48, 40, 1), False), ((20, 20, 20), False)]
IDS = ["3d-dirichlet", "3d-neumann", "2d-dirichlet", "2d-neumann", "3d-neumann-4-levels"]


def _problem(cells, dirichlet):
    mesh = box(cells)
    lm = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
    A = laplacian(lm, COMM, fixed=("left", "bottom") if dirichlet else ())
    b = smooth_rhs(lm, Reducer(COMM), zero_mean=not dirichlet)
    ws = K.Workspace(lm.n_cells, lm.n_owned, 8)
    ws.reserve(L.PIPECG_VECTORS)
    return lm, A, b, ws


def _counters(amg):
    return (amg.red.stats.calls, [lev.calls for lev in amg.levels], amg.A.ex.stats.calls,
            amg.A.ex.stats.fields, amg.allgathers)


def _reset(amg):
    amg.red.stats.calls = amg.allgathers = 0
    for lev in amg.levels:
        lev.calls = 0
    st = amg.A.ex.stats
    st.calls = st.fields = 0


def _compare(krylov, lm, A, b, ws, amg, tol, rel_tol=0.0):
    """(Python info, compiled info, relative difference of the solutions); the counters of
    both runs must agree."""
    _reset(amg)
    x1 = np.zeros(lm.n_cells)
    i1 = krylov(A, b, x1, tol, 200, amg.red, ws, amg.apply, rel_tol)
    c1 = _counters(amg)
    fast = kcycle.compiled_solver(amg, krylov)
    assert fast is not None
    _reset(amg)
    x2 = np.zeros(lm.n_cells)
    i2 = fast.solve(b, x2, tol, 200, ws, rel_tol)
    assert _counters(amg) == c1
    n = lm.n_owned
    return i1, i2, np.abs(x1[:n] - x2[:n]).max() / np.abs(x1[:n]).max()


@pytest.mark.parametrize("krylov", [flexible.fcg, flexible.cg1], ids=["fcg", "cg1"])
@pytest.mark.parametrize(("cells", "dirichlet"), PROBLEMS, ids=IDS)
def test_same_iterations_and_answer_as_python(krylov, cells, dirichlet):
    lm, A, b, ws = _problem(cells, dirichlet)
    amg = AMG(A, lm, Reducer(COMM))
    i1, i2, diff = _compare(krylov, lm, A, b, ws, amg, 1e-9)
    assert i2.iters == i1.iters and i2.converged and i1.converged
    assert i2.res0 == pytest.approx(i1.res0, rel=1e-12)
    assert i2.res == pytest.approx(i1.res, rel=1e-5)
    assert diff < 1e-11
    if cells == (20, 20, 20):
        assert len(amg.levels) >= 3  # a K-cycle level between the top and the coarsest


def _fcg_checked_after_the_cycle(A, b, x, tol, red, ws, precond, cycles):
    """FCG(1) as it was before the forecast: every iteration applies the preconditioner
    before it checks the residual."""
    n = A.pattern.n_rows
    r, z, p, q = ws.v[:4]
    A.residual(x, b, r)
    rr, bb = red.sum(*K._dot2(r, r, b, b, n))
    bnorm = np.sqrt(bb)
    precond(r, z)
    cycles.append(1)
    p[:n] = z[:n]
    for it in range(1, 201):
        A.matvec(p, q)
        pq, pr = red.sum(*K._dot2(p, q, p, r, n))
        rr = K._fcg_update(x, r, p, q, pr / pq, n)
        precond(r, z)
        cycles.append(1)
        rr, zq = red.sum(rr, K._dot(z, q, n))
        if np.sqrt(rr) / bnorm <= tol:
            return it
        K._fcg_direction(z, zq / pq, p, n)
    raise AssertionError("no convergence")


@pytest.mark.parametrize(("cells", "dirichlet"), PROBLEMS[:3], ids=IDS[:3])
def test_fcg_makes_no_cycle_after_its_last_iteration(cells, dirichlet):
    """k iterations, k cycles (the first before the loop): the last one's would only make a
    direction that is never used.  The iterates are those of checking after the cycle, to
    the bit, in the Python and the compiled solve alike (the latter: its counters equal the
    Python path's, as :func:`_compare` asserts)."""
    lm, A, b, ws = _problem(cells, dirichlet)
    amg = AMG(A, lm, Reducer(COMM))
    before, now = [], []
    x0 = np.zeros(lm.n_cells)
    iters = _fcg_checked_after_the_cycle(A, b, x0, 1e-9, amg.red, ws,
                                         amg.apply, before)
    assert len(before) == iters + 1

    def counted(r, z):
        now.append(1)
        amg.apply(r, z)

    x1 = np.zeros(lm.n_cells)
    info = flexible.fcg(A, b, x1, 1e-9, 200, amg.red, ws, counted)
    assert info.converged and info.iters == iters and len(now) == iters
    np.testing.assert_array_equal(x1[:lm.n_owned], x0[:lm.n_owned])
    _, i2, diff = _compare(flexible.fcg, lm, A, b, ws, amg, 1e-9)
    assert i2.iters == iters and diff < 1e-11


def test_v_cycle_and_relative_tolerance():
    """The V-cycle variant, a relative tolerance, and a solve that starts converged."""
    lm, A, b, ws = _problem((24, 20, 1), False)
    amg = AMG(A, lm, Reducer(COMM), cycle="V")
    i1, i2, diff = _compare(flexible.fcg, lm, A, b, ws, amg, 1e-12, rel_tol=1e-3)
    assert i1.iters == i2.iters > 1 and diff < 1e-11
    fast = kcycle.compiled_solver(amg, flexible.fcg)
    x = np.ones(lm.n_cells)
    info = fast.solve(b, x, 1e3, 200, ws)
    assert info.iters == 0 and info.converged and np.all(x == 1.0)


def test_refresh_follows_new_coefficients():
    """After new fine coefficients and ``refresh`` the compiled solve equals a Python solve
    with a twin hierarchy refreshed by ``AMG.refresh`` (the coarse levels' coefficients are
    views that refresh updates in place; the Cholesky is refactorised)."""
    lm, A, b, ws = _problem((16, 16, 8), True)
    amg = AMG(A, lm, Reducer(COMM))
    fresh = AMG(A, lm, Reducer(COMM))
    fast = kcycle.compiled_solver(amg, flexible.fcg)
    scale = 1.0 + np.linspace(0.0, 2.0, len(A.data))  # symmetric: a function of the face
    p = A.pattern
    rows = np.repeat(np.arange(p.n_rows), np.diff(p.indptr).astype(np.int64))
    S = sp.csr_matrix((A.data, p.indices.astype(np.int64), p.indptr.astype(np.int64)))
    W = sp.csr_matrix((scale, p.indices.astype(np.int64), p.indptr.astype(np.int64)))
    W = (W + W.T) * 0.5
    new = S.multiply(W).tocsr()
    new.sort_indices()
    assert np.array_equal(new.indices, p.indices) and len(rows) == len(new.data)
    A.data[:] = new.data
    fast.refresh()
    fresh.refresh()
    x1, x2 = np.zeros(lm.n_cells), np.zeros(lm.n_cells)
    i1 = flexible.fcg(A, b, x1, 1e-10, 200, fresh.red, ws, fresh.apply)
    i2 = fast.solve(b, x2, 1e-10, 200, ws)
    assert i1.iters == i2.iters
    n = lm.n_owned
    assert np.abs(x1[:n] - x2[:n]).max() < 1e-11 * np.abs(x1[:n]).max()
    for a, f in zip(amg.levels, fresh.levels, strict=True):
        assert np.array_equal(a.data, f.data)


def _coarsest_solve(f, pinned, rhs):
    x = np.zeros(len(rhs))
    lu_solve(f.perm_r, f.perm_c, f.lp, f.li, f.lx, f.up, f.ui, f.ux, f.ud, pinned, rhs, x,
             f.y)
    return x


@pytest.mark.parametrize("dirichlet", [True, False])
def test_coarsest_cholesky_matches_superlu(dirichlet, monkeypatch):
    """The numeric Cholesky on the coarsest level, written in SuperLU's factor format,
    solves as SuperLU's LU does, the pinned unknown of the all-Neumann matrix included;
    the compiled solve reads the same factors AMG.apply (Python) uses."""
    import haloflow.linalg.amg as amg_module

    lm, A, b, ws = _problem((16, 16, 16), dirichlet)
    monkeypatch.setattr(amg_module, "CHOLESKY", False)
    lu_amg = AMG(A, lm, Reducer(COMM))
    superlu, pinned = lu_amg.levels[-1].lu, lu_amg.levels[-1].pinned
    monkeypatch.setattr(amg_module, "CHOLESKY", True)
    amg = AMG(A, lm, Reducer(COMM))
    lev = amg.levels[-1]
    fast = kcycle.compiled_solver(amg, flexible.fcg)
    assert lev.chol and fast.lu[0] is lev.lu.perm_r and lev.lu is not superlu
    assert lev.pinned == pinned == (-1 if dirichlet else lev.n - 1)
    rhs = np.sin(np.arange(lev.n, dtype=float))
    if not dirichlet:
        rhs -= rhs.mean()
    want = _coarsest_solve(superlu, pinned, rhs)
    got = _coarsest_solve(lev.lu, lev.pinned, rhs)
    assert np.abs(got - want).max() < 1e-12 * np.abs(want).max()


def test_not_used_for_jacobi():
    lm, A, b, ws = _problem((8, 8, 1), True)
    amg = AMG(A, lm, Reducer(COMM))
    assert kcycle.compiled_solver(amg, K.pcg) is None
    assert kcycle.compiled_solver(amg, L.pipecg) is None


@pytest.mark.parametrize("method", [flexible.fcg, flexible.cg1])
def test_thread_blocks_solve_as_one_thread(method, monkeypatch):
    """On thread blocks (here 3 blocks on however many threads numba has: the blocks'
    arithmetic does not depend on the threads that run them) the solve reaches the same
    tolerance with about the same iterations, and its answer is one thread's to the
    tolerance; the levels under ``LEVEL_MIN_ROWS`` rows stay serial."""
    lm, A, b, ws = _problem((20, 20, 20), False)
    ref = kcycle.compiled_solver(AMG(A, lm, Reducer(COMM)), method)
    x1 = np.zeros(lm.n_cells)
    i1 = ref.solve(b, x1, 1e-10, 100, ws)
    monkeypatch.setattr(kcycle.threads, "blocks", lambda: 3)
    monkeypatch.setattr(kcycle.threads, "LEVEL_MIN_ROWS", 1000)
    amg = AMG(A, lm, Reducer(COMM))
    fast = kcycle.compiled_solver(amg, method)
    thr = fast.h[cycle_tables.H_THR]
    assert fast.ctl[kcycle.NBLK] == 3
    assert [t >= 0 for t in thr[:len(amg.levels)]] == [
        lev.n >= 1000 and lev.next is not None for lev in amg.levels]
    assert thr[0] >= 400  # 20^3 in natural order: rows 400 apart are coupled
    x3 = np.zeros(lm.n_cells)
    i3 = fast.solve(b, x3, 1e-10, 100, ws)
    assert i1.converged and i3.converged and i3.res <= 1e-10
    assert abs(i3.iters - i1.iters) <= 2
    assert not np.array_equal(x1[:lm.n_owned], x3[:lm.n_owned])  # hybrid Gauss-Seidel
    dx = x3[:lm.n_owned] - x3[:lm.n_owned].mean() - (x1[:lm.n_owned] - x1[:lm.n_owned].mean())
    assert np.abs(dx).max() < 1e-8 * np.abs(x1).max()


def _cavity(method, compiled, monkeypatch, steps=4, case="cavity", sets=None):
    if not compiled:
        monkeypatch.setattr(kcycle.mpicall, "addresses", lambda: None)
    sets = sets if sets is not None else ["mesh.cells=[10,10,10]", "boundary.front.type=wall",
                                          "boundary.back.type=wall", "solver.dt=0.05"]
    case = load_case(case, [*sets, f"solver.pressure.method={method}"])
    m = mesh_from_case(case.mesh)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    s = solver_from_case(lm, case, halo.make("packed", lm, COMM), COMM)
    iters = [[i.iters for i in s.step().p_solves] for _ in range(steps)]
    monkeypatch.undo()
    return s, iters


@pytest.mark.parametrize("method", ["amg-cg", "amg-cg1"])
def test_cavity_steps_equal_python_path(method, monkeypatch):
    """The pressure equation's hook: a 3D cavity takes the same pressure iterations and
    reaches the same fields with and without the compiled solve, with the same number of
    allreduces and exchanges."""
    s1, it1 = _cavity(method, False, monkeypatch)
    s2, it2 = _cavity(method, True, monkeypatch)
    assert s1.pressure.compiled is None and s2.pressure.compiled is not None
    assert it1 == it2
    assert np.abs(s1.p - s2.p).max() < 1e-9 * np.abs(s1.p).max()
    assert np.abs(s1.U - s2.U).max() < 1e-9
    assert s1.red.stats.calls == s2.red.stats.calls
    a1, a2 = s1.pressure.amg, s2.pressure.amg
    assert [lev.calls for lev in a1.levels] == [lev.calls for lev in a2.levels]
    p1, p2 = a1.profile(), a2.profile()
    # the same counts; the compiled path says they came from compiled code
    assert [lv.pop("compiled_exchanges") for lv in p1["levels"]] == [0] * len(a1.levels)
    assert [lv.pop("compiled_exchanges") for lv in p2["levels"]] == [
        lev.calls for lev in a2.levels]
    assert p1 == p2
    assert s1.red.stats.compiled == 0 < s2.red.stats.compiled <= s2.red.stats.calls


def test_periodic_box_equal_python_path(monkeypatch):
    """A uniform flow in a periodic box (its coarsest level's pattern alone is singular, so the
    Cholesky ordering is taken from a dominant matrix on that pattern)."""
    sets = ["mesh.cells=[16,16,1]", "initial.type=uniform", "initial.U=[0.3,0.2,0]",
            "postprocess.taylor_green=false"]
    s1, it1 = _cavity("amg-cg", False, monkeypatch, 3, "taylor_green", sets)
    s2, it2 = _cavity("amg-cg", True, monkeypatch, 3, "taylor_green", sets)
    assert s2.pressure.compiled is not None and it1 == it2
    assert np.abs(s1.U - s2.U).max() < 1e-9 * np.abs(s1.U).max()


@pytest.mark.parametrize("cycle", ["K", "A", "V"])
def test_every_coarse_cycle_equals_python_path(cycle):
    lm, A, b, ws = _problem((20, 20, 20), False)
    amg = AMG(A, lm, Reducer(COMM), cycle=cycle)
    assert amg.cycle_kind == cycle
    for krylov in (flexible.fcg, flexible.cg1):
        i1, i2, diff = _compare(krylov, lm, A, b, ws, amg, 1e-9)
        assert i2.iters == i1.iters and i2.converged and diff < 1e-11, (krylov, diff)


def test_amli_makes_no_reductions_and_keeps_the_iterations():
    """AMLI's fixed steps instead of the K-cycle's Krylov steps: cg1 makes one reduction per
    iteration (and one to start) instead of one per iteration and coarse Krylov step, for
    the K-cycle's iterations (+-1) on 3D Poisson, 40^3 here."""
    lm, A, b, ws = _problem((40, 40, 40), False)
    its = {}
    for cycle in ("K", "A"):
        amg = AMG(A, lm, Reducer(COMM), cycle=cycle)
        assert sum(lev.krylov for lev in amg.levels[1:]) == 2
        fast = kcycle.compiled_solver(amg, flexible.cg1)
        _reset(amg)
        info = fast.solve(b, np.zeros(lm.n_cells), 1e-8, 100, ws)
        assert info.converged
        its[cycle] = (info.iters, amg.red.stats.calls)
    assert abs(its["A"][0] - its["K"][0]) <= 1, its
    assert its["A"][1] == its["A"][0] + 1, its
    assert its["K"][1] > 3 * its["A"][1], its


def test_amli_polynomial_stays_in_unit_interval():
    """The error polynomial p(t) = (1 - a1 t)(1 - a2 t) in [0, 1] on (0, 1], 1 - the
    AMLI bound at lmin; the scaled T2 would dip below zero."""
    from haloflow.linalg.amg import amli_steps

    t = np.linspace(1e-6, 1.0, 1001)
    for lmin in (0.0, 0.1, 0.3):
        a1, a2 = amli_steps(lmin)
        p = (1.0 - a1 * t) * (1.0 - a2 * t)
        assert p.min() >= 0.0 and p.max() <= 1.0
        assert abs(p[np.searchsorted(t, lmin)] - ((1 - lmin) / (1 + lmin)) ** 2) < 1e-2


def test_unknown_cycle_is_refused():
    lm, A, b, ws = _problem((14, 12, 10), True)
    with pytest.raises(ValueError, match="unknown AMG cycle"):
        AMG(A, lm, Reducer(COMM), cycle="W")


def test_auto_cycle_is_amli_on_3d_stencils_only():
    """AMLI kept 3D iterations and cost 2D ones 1-2: ``auto`` picks by couplings per row."""
    for cells, kind in (((12, 12, 12), "A"), ((40, 40, 1), "K")):
        lm, A, b, ws = _problem(cells, False)
        assert AMG(A, lm, Reducer(COMM), cycle="auto").cycle_kind == kind, cells


def test_importing_the_compiled_solvers_loads_the_parallel_runtime():
    """The compiled solves call thread-block kernels from compiled code; loaded from numba's
    cache in a process that had not loaded numba's parallel runtime, they failed to link
    ("Symbol not found: allocate_sched") or crashed.  Importing them loads it (blocks.py)."""
    import subprocess
    import sys

    code = ("from numba.np.ufunc import parallel as p; assert not p._is_initialized; "
            "import haloflow.linalg.kcycle, haloflow.linalg.krylov; "
            "assert p._is_initialized, 'parallel runtime not loaded'")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


def test_minimum_degree_ordering_fills_little(monkeypatch):
    """The coarsest level's own ordering: a permutation; no fill at all on an arrowhead
    matrix (its hub last), where the natural order (hub first) fills every entry; on a 2D
    Laplacian as little fill as SuperLU's multiple minimum degree, within 10 %; and above
    ``MAX_OWN_ORDER`` rows the ordering is SuperLU's."""
    import scipy.sparse as sp

    from haloflow.linalg import cholesky as C

    def fill(A, order):
        A = sp.csr_matrix(A)
        return len(C.symbolic(A.indptr.astype(np.int64), A.indices.astype(np.int32),
                              A.shape[0], order)[2])

    n = 40
    arrow = sp.lil_matrix((n, n))
    arrow.setdiag(4.0)
    arrow[0, :] = arrow[:, 0] = 1.0
    arrow[0, 0] = n
    a = sp.csr_matrix(arrow)
    order = C.minimum_degree(a.indptr.astype(np.int64), a.indices.astype(np.int32), n)
    assert sorted(order.tolist()) == list(range(n)) and 0 in order[-2:]  # the hub at the end
    assert fill(a, order) == 2 * n - 1  # the diagonal and the hub's row: no fill
    assert fill(a, np.arange(n)) == n * (n + 1) // 2  # hub first: all of the lower half
    m = 30
    d = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    lap = sp.csr_matrix(sp.kron(d, sp.identity(m)) + sp.kron(sp.identity(m), d))
    ip, ix = lap.indptr.astype(np.int64), lap.indices.astype(np.int32)
    own = C.ordering(ip, ix, m * m)
    assert sorted(own.tolist()) == list(range(m * m))
    mmd = C.superlu_order(ip, ix, m * m)
    monkeypatch.setattr(C, "MAX_OWN_ORDER", 10)
    assert np.array_equal(C.ordering(ip, ix, m * m), mmd)  # SuperLU's above the limit
    assert sorted(mmd.tolist()) == list(range(m * m)) and not np.array_equal(mmd, own)
    assert fill(lap, own) <= 1.1 * fill(lap, mmd)
    assert fill(lap, own) < 0.5 * fill(lap, np.arange(m * m))  # band fill: m per row
