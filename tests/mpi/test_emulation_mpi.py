"""Network emulation (``parallel/emulation.py``) on a real 2-rank job: every halo strategy
still fills every ghost exactly, each exchange waits what the network's curve adds, the
compiled MPI_Waitall finds every request group, and reductions wait one network stage."""

from __future__ import annotations

import json
from time import perf_counter

import numpy as np
import pytest
from mpi4py import MPI

from haloflow.mesh.blocks import box
from haloflow.parallel import emulation, halo
from haloflow.parallel.halo import STRATEGIES
from haloflow.parallel.local import build_local
from haloflow.parallel.network_delays import ADDED, MATCHED, UNMATCHED
from haloflow.parallel.reduce import Reducer

REPS = 20


def _local_mesh(comm):
    mesh = box((8, 6, 1), (1.0, 1.0, 1.0))
    parts = (np.arange(mesh.n_cells) % 8 >= 4).astype(np.int64)  # two halves of the x axis
    return build_local(mesh, parts, comm.rank)


@pytest.mark.parallel(ranks=[2], timeout=120)
def test_emulated_exchanges_wait_what_the_network_adds(nranks):
    comm = MPI.COMM_WORLD
    lm = _local_mesh(comm)
    em = emulation.install(comm, "gige-tcp", [0, 1])
    try:
        assert em.node_count == 2 and em.local.latency < 20e-6  # shared memory here
        for name in STRATEGIES:
            ex = halo.make(name, lm, comm)
            fields = [np.full(lm.n_owned + lm.n_ghost, -1.0) for _ in range(2)]
            for k, f in enumerate(fields):
                f[:lm.n_owned] = lm.global_cells[:lm.n_owned] + 1000 * k
            want = em.exchange_delay(ex.neighbours, 8 * 2 * ex.send_counts)
            # one 2-field message of 6 cells: about a GigE latency less a local one
            assert 40e-6 < want < 60e-6, (name, want)
            before, matched = em.state[ADDED], em.state[MATCHED]
            comm.Barrier()
            t0 = perf_counter()
            for _ in range(REPS):
                ex.exchange(fields)
            wall = perf_counter() - t0
            for k, f in enumerate(fields):  # every ghost its owner's value
                assert np.array_equal(f[lm.n_owned:], lm.global_cells[lm.n_owned:] + 1000 * k), \
                    name
            if name == "perfield":  # one message per field
                want = 2 * em.exchange_delay(ex.neighbours, 8 * ex.send_counts)
            assert em.state[ADDED] - before == pytest.approx(REPS * want, rel=1e-9), name
            assert wall >= REPS * want, (name, wall)
            if name in ("aggregated", "overlap"):  # compiled: the wrapped MPI_Waitall
                assert em.state[MATCHED] - matched == REPS, name
            ex.close()
        assert em.state[UNMATCHED] == 0
        red = Reducer(comm)
        before = em.state[ADDED]
        assert red.sum(1.0, 2.0) == (2.0, 4.0)
        assert em.state[ADDED] - before == pytest.approx(em.allreduce_delay(16), rel=1e-9)
        assert em.allreduce_delay(16) > 40e-6
        before = em.state[ADDED]
        alone = Reducer(MPI.COMM_SELF)  # a rank by itself crosses no network
        assert alone.sum(3.0) == (3.0,) and em.state[ADDED] == before
        assert emulation.on(MPI.COMM_SELF) is None
    finally:
        emulation.uninstall()
    assert halo.make("packed", lm, comm)._emu is None  # off again: no hook


def test_an_emulated_run_delays_every_compiled_wait(haloflow_mpi, tmp_path):
    """The cavity on 2 emulated nodes: the compiled solvers' MPI_Waitall calls (lockstep
    momentum, AMG cycle) all find their request groups, and the profile records the time."""
    out = tmp_path / "run"
    res = haloflow_mpi(2, "run", "cavity", "-o", str(out), "--quiet", "--steps", "2",
                       "--emulate-network", "infiniband-sdr", "--set", "mesh.cells=[12,12,1]",
                       "--set", "output.fields=false", "--set", "output.plots=false",
                       timeout=120)
    assert res.returncode == 0, res.stderr
    em = json.loads((out / "profile.json").read_text())["emulation"]
    assert em["network"] == "infiniband-sdr" and em["nodes"] == 2
    assert em["compiled_waits"] > 0 and em["compiled_unmatched"] == 0
    assert min(em["added_s"]) > 0 and em["delayed"] > 0
