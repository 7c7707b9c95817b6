"""PISO's last pressure solve started from the correction before it plus the previous
step's last change (``solver.pressure.guess``): nearer the answer, the same tolerance."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.local import build_local
from haloflow.physics import solver_from_case
from haloflow.physics.final_guess import STATE, change_since, move_on, projection_sums

COMM = MPI.COMM_SELF
# the race's tolerances (benchmarks/race.py): the first correction to 1 % of its initial
# residual, the last to 1e-6 of its right-hand side
RACE = ["solver.pressure.tol=1e-6", "solver.pressure.rel_tol=0.01",
        "solver.pressure.final_rel_tol=0", "boundary.front.type=wall",
        "boundary.back.type=wall", "solver.dt=0.04", "physics.nu=0.0025"]


def _solver(*overrides, n=12, name="cavity"):
    case = load_case(name, [f"mesh.cells=[{n},{n},{n}]", *overrides])
    m = box(case.mesh.cells, case.mesh.lengths)
    lm = build_local(m, np.zeros(m.n_cells, dtype=np.int64), 0)
    return solver_from_case(lm, case, halo.make("packed", lm, COMM), COMM)


def test_the_step_along_the_change_is_the_nearest_in_the_energy_norm():
    """theta = d.r / d.Ad minimises the A-norm of the error along d; the kernels keep the
    start and then the change, on the owned rows only."""
    s = _solver(*RACE, n=6)
    A = s.pressure.P
    pat, n, nc = A.pattern, s.lm.n_owned, s.lm.n_cells
    rng = np.random.default_rng(3)
    A.fill_symmetric(np.full(n, 7.0), rng.uniform(0.5, 1.0, s.lm.n_internal))
    x_true, p, d = rng.standard_normal(nc), rng.standard_normal(nc), rng.standard_normal(nc)
    b = np.zeros(n)
    A.matvec(x_true, b)
    dr, dq = projection_sums(pat.indptr, pat.indices, A.data, p, d, b, n)

    def energy(x):  # |x_true - x|_A^2
        e, ae = x_true - x, np.zeros(n)
        A.matvec(e, ae)
        return float(e[:n] @ ae)

    theta = dr / dq
    best = energy(p + theta * d)
    for t in (0.0, 1.0, 0.99 * theta, 1.01 * theta):
        assert best < energy(p + t * d), t
    p0, d0 = p.copy(), d.copy()
    m = n - 2  # as if the last two rows were ghosts
    move_on(p, d, theta, m)
    assert np.array_equal(p[:m], p0[:m] + theta * d0[:m]) and np.array_equal(p[m:], p0[m:])
    assert np.array_equal(d, p0)  # the start, ghosts included
    p += 0.5  # what a solve and the exchange after it make of it
    change_since(p, d)
    assert np.allclose(d[:m], theta * d0[:m] + 0.5) and np.allclose(d[m:], 0.5)


def test_the_last_solve_starts_nearer_and_stops_at_the_same_tolerance():
    a = _solver(*RACE, 'solver.pressure.guess="previous"')
    b = _solver(*RACE)  # the default: extrapolated
    assert a.pressure.last_guess is None and b.pressure.last_guess is not None
    saved, thetas = 0, []
    for k in range(12):
        la, lb = a.step().p_solves[-1], b.step().p_solves[-1]
        assert la.converged and lb.converged and la.res <= 1e-6 and lb.res <= 1e-6
        thetas.append(b.pressure.last_guess.theta)
        if k == 0:  # no change to move along yet: the same bits
            assert np.array_equal(a.U, b.U) and np.array_equal(a.p, b.p)
            continue
        assert lb.iters <= la.iters, k
        saved += la.iters - lb.iters
        if k >= 6:  # past the impulsive start, the change moves little from step to step
            assert lb.res0 < 0.3 * la.res0, (k, la.res0, lb.res0)
        # both are the same step solved to the tolerance: they differ by its round-off
        assert np.abs(a.U - b.U).max() < 1e-5, k
    assert saved >= 12, saved
    # from rest the first changes point elsewhere (short steps), later ones along (about 1)
    assert thetas[1] < 0.3 and all(0.9 < t < 1.2 for t in thetas[6:]), thetas


def test_one_correction_or_simple_has_no_guess():
    assert _solver(*RACE, "solver.n_correctors=1").pressure.last_guess is None
    assert _solver("solver.pressure.rel_tol=0.5", name="channel", n=8).pressure.last_guess is None


def test_a_restart_goes_on_as_if_never_stopped():
    first = _solver(*RACE, n=8)
    arrays, _ = first.checkpoint_state()
    assert STATE not in arrays  # before the first step there is no change to keep
    for _ in range(2):
        first.step()
    arrays, extra = first.checkpoint_state()  # (the run goes on as a restart will)
    assert STATE in arrays and np.abs(arrays[STATE][0]).max() > 0.0
    saved = {name: np.array(a, copy=True) for name, (a, kind) in arrays.items()}
    again = _solver(*RACE, n=8)
    again.restore_state(saved, extra)
    plain = _solver(*RACE, n=8)  # a checkpoint without the change: a plain start, once
    plain.restore_state({k: v for k, v in saved.items() if k != STATE}, extra)
    for _ in range(2):
        first.step(), again.step(), plain.step()
    assert np.array_equal(first.U, again.U) and np.array_equal(first.p, again.p)
    assert not np.array_equal(first.p, plain.p)
    assert np.abs(first.U - plain.U).max() < 1e-5
