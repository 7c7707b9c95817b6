"""pitzdaily_les on 3 ranks reproduces the serial run to 1e-8 on the coarse copy of its mesh:
the inlet's random fluctuations drawn per global face (so every rank count draws the same),
the periodic span split across ranks, kEqn's k and nut riding the first correction, and van
Driest's width from the nearest wall face on any rank; kEqn with and without van Driest,
WALE and Smagorinsky with it, each under another halo strategy; kEqn's SGS energy and
viscosity on 3 ranks equal to the serial reference run's (tests/pitzdaily_les.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.io.probes import gather_cells
from haloflow.mesh import from_case
from haloflow.parallel import halo
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute
from haloflow.physics import solver_from_case
from tests.pitzdaily_les import KEQN_REFERENCE, TIGHT, coarse_case

STEPS = 4
VD = "physics.van_driest=true"
RUNS = {"neighbor": [VD], "overlap": [], "aggregated": [VD, 'physics.closure="wale"'],
        "perfield": [VD, 'physics.closure="smagorinsky"']}


def _fields(s):
    """U, p, k, the filter width and nut squared: ``nut = Ck Delta sqrt(k)`` turns a k at
    round-off (1e-16 of its largest, where the flow has not brought any yet) into a nut at
    1e-8 of its largest, so nut is compared where it is linear in k."""
    c = s.closure
    return gather_cells(s.lm, s.red, s.U[:, : s.lm.n_owned].T, s.p, c.k, c.delta, c.nut ** 2)


@pytest.mark.parallel(ranks=[3], timeout=300)
def test_three_ranks_match_serial(nranks):
    comm = MPI.COMM_WORLD
    with tempfile.TemporaryDirectory(prefix="pitzdaily-les-") as tmp:
        case = coarse_case(TIGHT, Path(tmp))
        mesh = from_case(case.mesh) if comm.rank == 0 else None
        parts = decompose(mesh, nranks, "rcb") if comm.rank == 0 else None
        lm = distribute(mesh, parts, comm)
        for strategy, extra in RUNS.items():
            run = coarse_case([*TIGHT, *extra], Path(tmp))
            s = solver_from_case(lm, run, halo.make(strategy, lm, comm), comm)
            for _ in range(STEPS):
                s.step()
            got = _fields(s)
            if comm.rank == 0:
                ls = build_local(mesh, np.zeros(mesh.n_cells, dtype=np.int64), 0)
                one = solver_from_case(ls, run, halo.make("packed", ls, MPI.COMM_SELF),
                                       MPI.COMM_SELF)
                for _ in range(STEPS):
                    one.step()
                want = _fields(one)
                assert want[4].max() > 0.0, extra  # the closure acts
                if not extra:  # kEqn, the filter width the cube root of the cell volume
                    vol, k, nut = got[3] ** 3, got[2], np.sqrt(got[4])
                    stats = (np.sum(vol * k) / vol.sum(), np.sum(vol * nut) / vol.sum(), nut.max())
                    np.testing.assert_allclose(stats, KEQN_REFERENCE, rtol=1e-6)
                for a, b in zip(got, want, strict=True):
                    scale = max(np.abs(b).max(), 1e-30)
                    assert np.abs(a - b).max() <= 1e-8 * scale, extra
            comm.Barrier()
