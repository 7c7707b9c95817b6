"""PISO's last pressure solve started along the previous step's last change, on 2-3 ranks:
the change's ghost values are their owners' without a message of their own, every halo
strategy takes the same steps to the bit, and the steps and fields follow the serial run."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.io.probes import gather_cells
from haloflow.mesh.blocks import box
from haloflow.parallel import halo
from haloflow.parallel.decompose import decompose
from haloflow.parallel.halo import STRATEGIES
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.reduce import Reducer
from haloflow.physics import solver_from_case

CELLS = (8, 7, 6)
SETTINGS = [f"mesh.cells={list(CELLS)}", "boundary.front.type=wall", "boundary.back.type=wall",
            "solver.dt=0.05", "solver.pressure.tol=1e-11", "solver.momentum.tol=1e-11"]
# (every solve to the tolerance: with rel_tol the first correction's answer, and so the
# change, would depend on the partition through the smoother at the cut)
STEPS = 6


def _run(lm, comm, strategy):
    """(the steps along the change, each step's ghosts checked, the solver)."""
    s = solver_from_case(lm, load_case("cavity", SETTINGS), halo.make(strategy, lm, comm),
                         comm)
    guess = s.pressure.last_guess
    thetas = []
    for _ in range(STEPS):
        s.step()
        thetas.append(guess.theta)
        sent = guess.change.copy()  # what the owners hold, sent to the ghosts
        s.ex.exchange((sent,))
        assert np.array_equal(sent, guess.change), strategy
    return thetas, s


@pytest.mark.parallel(ranks=[2, 3], timeout=300)
def test_the_last_solves_start_as_serially(nranks):
    comm = MPI.COMM_WORLD
    mesh = box(CELLS, (1.0, 1.0, 1.0)) if comm.rank == 0 else None
    parts = decompose(mesh, nranks, "metis") if comm.rank == 0 else None
    lm = distribute(mesh, parts, comm)
    first = None
    for strategy in STRATEGIES:
        thetas, s = _run(lm, comm, strategy)
        assert 0.5 < thetas[-1] < 1.5, thetas  # it does move along the change
        if first is None:
            first = thetas, s
        else:
            assert thetas == first[0], strategy
            assert np.array_equal(s.p, first[1].p), strategy
    thetas, s = first
    got = gather_cells(lm, Reducer(comm), s.p, *s.U)
    if comm.rank == 0:  # the serial run of the same steps
        ls = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
        serial, ss = _run(ls, MPI.COMM_SELF, "aggregated")
        assert np.allclose(thetas, serial, rtol=1e-6, atol=0.0), (thetas, serial)
        for g, ref in zip(got, (ss.p, *ss.U), strict=True):
            ref = ref[: ls.n_owned]
            assert np.abs(g - ref).max() <= 1e-8 * np.abs(ref).max()
