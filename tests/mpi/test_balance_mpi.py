"""Migration (dynamic load balancing) moves every field, rebuilds halos and the AMG, and the
run goes on as if nothing happened: a run migrated to uneven parts mid-way equals one that
was not, to solver tolerance, with BDF2's old level carried along."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.case import load_case
from haloflow.run.balance import migrate
from haloflow.run.setup import setup


def _gather_U(run):
    lm, comm = run.lmesh, run.comm
    ids = comm.allgather(np.asarray(lm.global_cells[: lm.n_owned]))
    vals = comm.allgather(run.solver.U[:, : lm.n_owned].copy())
    U = np.empty((3, lm.n_cells_global))
    for i, v in zip(ids, vals, strict=True):
        U[:, i] = v
    return U


@pytest.mark.parallel(ranks=[2, 3], timeout=300)
def test_migrated_run_equals_the_unmigrated_one(nranks):
    comm = MPI.COMM_WORLD
    for name, sets in (("cavity", ["mesh.cells=[24,20,1]", "solver.time_scheme=backward"]),
                       ("cavity", ["mesh.cells=[8,8,8]", "boundary.front.type=wall",
                                   "boundary.back.type=wall"])):
        case = load_case(name, sets + ["output.plots=false", "postprocess.cavity=false",
                                       "solver.pressure.tol=1e-12", "solver.momentum.tol=1e-12"])
        runs = [setup(case, comm, 1, lambda *a: None) for _ in range(2)]
        for run in runs:
            for _ in range(3):
                run.solver.step()
        before = runs[1].lmesh.n_owned
        fractions = np.arange(1, comm.size + 1, dtype=float)
        migrate(runs[1], fractions / fractions.sum(), lambda *a: None)
        # the parts follow the fractions, and the halos and AMG are the new ones
        counts = np.array(comm.allgather(runs[1].lmesh.n_owned))
        assert counts.sum() == runs[1].lmesh.n_cells_global
        assert np.allclose(counts / counts.sum(), fractions / fractions.sum(), atol=0.05)
        assert comm.allreduce(int(runs[1].lmesh.n_owned != before)) > 0
        assert runs[1].solver.time == runs[0].solver.time
        for run in runs:
            for _ in range(4):
                run.solver.step()
        a, b = _gather_U(runs[0]), _gather_U(runs[1])
        assert np.abs(a).max() > 0.05
        assert np.abs(a - b).max() < 1e-8, np.abs(a - b).max()
        assert len(runs[1].retired) >= 1  # the old exchangers' counters are kept
        for run in runs:
            for e in run.exchangers():
                e.close()
