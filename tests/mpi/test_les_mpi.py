"""LES closures on 3 ranks: each closure reproduces the serial run of a small 3D
Taylor-Green vortex to 1e-8 (the periodic pairs split across ranks, nut and k riding the
first correction's exchange), under a different halo strategy each, with the case's cubic
convection (the velocity gradient's ghosts, periodic images), WALE with linear; and a kEqn
run stopped, restored as a checkpoint restores it (owned values, ghosts exchanged anew) and
continued equals the uninterrupted run bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.io.probes import gather_cells
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute
from haloflow.physics import solver_from_case

QUICK = ["mesh.cells=[8,8,8]", "solver.dt=0.2", "solver.pressure.tol=1e-12",
         "solver.momentum.tol=1e-12", "solver.pressure.rel_tol=0"]
CLOSURES = {"smagorinsky": ("aggregated", ()), "wale": ("overlap", ('solver.convection="linear"',)),
            "kEqn": ("neighbor", ()), "dynamicSmagorinsky": ("perfield", ())}


def _solver(lm, comm, closure, strategy, extra=()):
    case = load_case("taylor_green_3d", [*QUICK, f'physics.closure="{closure}"', *extra])
    return solver_from_case(lm, case, halo.make(strategy, lm, comm), comm)


def _fields(s):
    return gather_cells(s.lm, s.red, s.U[:, : s.lm.n_owned].T, s.p, s.closure.nut,
                        s.closure.k)


@pytest.mark.parallel(ranks=[3], timeout=300)
def test_closures_match_serial_and_keqn_restarts(nranks):
    comm = MPI.COMM_WORLD
    case = load_case("taylor_green_3d", QUICK)
    mesh = from_case(case.mesh) if comm.rank == 0 else None
    parts = decompose(mesh, nranks, "rcb") if comm.rank == 0 else None
    lm = distribute(mesh, parts, comm)
    for closure, (strategy, extra) in CLOSURES.items():
        s = _solver(lm, comm, closure, strategy, extra)
        for _ in range(5):
            s.step()
        got = _fields(s)
        if comm.rank == 0:  # the same case on one rank
            ls = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
            one = _solver(ls, MPI.COMM_SELF, closure, "aggregated", extra)
            for _ in range(5):
                one.step()
            want = _fields(one)
            assert want[2].max() > 1e-4, closure  # the closure acts
            for a, b in zip(got, want, strict=True):
                scale = max(np.abs(b).max(), 1e-30)
                assert np.abs(a - b).max() <= 1e-8 * scale, closure
    bdf2 = ['solver.time_scheme="backward"']
    a = _solver(lm, comm, "kEqn", "packed", bdf2)
    for _ in range(3):
        a.step()
    arrays, extra = a.checkpoint_state()
    saved = {k: (np.array(v, copy=True), kind) for k, (v, kind) in arrays.items()}
    for _ in range(3):
        a.step()
    b = _solver(lm, comm, "kEqn", "packed", bdf2)
    values = {k: v for k, (v, _) in saved.items()}
    b.restore_state(values, dict(extra))
    for v, kind in b.checkpoint_state()[0].values():  # ghosts as a restore has them
        if kind == "cell":
            b.ex.exchange(tuple(v.reshape(-1, lm.n_cells)))
    for _ in range(3):
        b.step()
    assert np.abs(a.closure.k).max() > 1e-5
    for x, y in zip(_fields(a), _fields(b), strict=True):
        if comm.rank == 0:
            assert np.array_equal(x, y)
    assert np.array_equal(a.closure.nu_face, b.closure.nu_face)
