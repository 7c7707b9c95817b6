"""The wall distance on 2 and 3 ranks equals the serial one bit for bit, the nearest wall
often lying on another rank."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.mesh.blocks import box
from haloflow.parallel.decompose import decompose
from haloflow.parallel.local import build_local, distribute
from haloflow.parallel.wall_distance import wall_distance


@pytest.mark.parallel(ranks=[2, 3], timeout=120)
def test_wall_distance_matches_serial(nranks):
    comm = MPI.COMM_WORLD
    for cells, walls in (((16, 12, 1), ["bottom", "top"]), ((6, 5, 4), ["bottom", "back"])):
        mesh = box(cells, (2.0, 1.0, 0.5), grading=(1.0, 3.0, 1.0))
        parts = decompose(mesh, comm.size, "rcb")
        lm = distribute(mesh if comm.rank == 0 else None, parts if comm.rank == 0 else None,
                        comm)
        d = wall_distance(lm, comm, walls)
        serial = wall_distance(build_local(mesh, np.zeros(mesh.n_cells, np.int64), 0), None,
                               walls)
        assert np.array_equal(d, serial[lm.global_cells]), (cells, comm.rank)
        assert np.isfinite(d).all() and (d > 0).all()
