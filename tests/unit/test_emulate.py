"""The waits of network emulation (haloflow.parallel.network_delays): what the model prices,
less what the local transfer took, only for messages between nodes."""

from __future__ import annotations

from time import perf_counter

import numpy as np
import pytest

from haloflow.parallel.network_delays import Emulation, gather_delay
from haloflow.study import model as M


def _emulation(nodes, rank=0):
    net = M.network("gige-tcp")
    local = M.Curve.hockney("local", 1e-6, 5e9)
    return Emulation(net, local, nodes, rank), net, local


def test_only_messages_between_nodes_wait():
    em, net, local = _emulation([0, 0, 1, 1])
    assert em.exchange_delay([1], [800.0]) == 0.0  # rank 1 shares rank 0's node
    assert em.exchange_delay([], []) == 0.0
    far = em.exchange_delay([1, 2, 3], [800.0, 800.0, 1600.0])
    assert far == pytest.approx(net.sequence([800.0, 1600.0]) - local.sequence([800.0, 1600.0]))
    # back-to-back GigE messages: the second overlaps the latency no CPU spends
    assert em.exchange_delay([2, 3], [8.0, 8.0]) < 2 * em.exchange_delay([2], [8.0])


def test_the_emulated_exchange_is_the_models_network_time():
    """Two ranks, one per node: the model's halo on the network, less its halo on the local
    curve, is what emulation adds to each exchange."""
    w = M.Workload(cells=4096, dims=2, compute_s=0.01, serial_s=0.0, exchanges=10.0,
                   fields_per_exchange=2.0, levels=[], allreduces=0.0, gathers=0.0,
                   gathered_rows=0, mpi_call_s=0.0)
    em, net, local = _emulation([0, 1])
    h = M.halo_of_grid(w.cells, 2, 2)
    on_net = M.predict(w, h, net, local, 1).halo_s
    here = M.predict(w, h, local, local, 1).halo_s
    assert on_net - here == pytest.approx(w.exchanges * em.exchange_delay([1], [8 * 2 * 64.0]))


def test_collectives_wait_one_network_stage_per_doubling_of_nodes():
    for nodes, stages in (([0, 1], 1), ([0, 1, 2, 3], 2), ([0, 0, 0, 0], 0)):
        em, net, local = _emulation(nodes)
        one = float(net.time(24)) - float(local.time(24))
        assert em.allreduce_delay(24) == pytest.approx(stages * one)
    em, net, local = _emulation([0, 1, 2, 3])
    # the allgather's table, read between powers of two, agrees with the direct figure
    for b in (8.0, 4096.0, 65536.0):
        assert gather_delay(em.gather_table, b) == pytest.approx(em.allgather_delay(b))
    mid = gather_delay(em.gather_table, 6000.0)
    assert em.allgather_delay(4096.0) < mid < em.allgather_delay(8192.0)
    assert np.all(np.diff(em.gather_table) >= 0)


def test_waits_are_counted():
    em, _, _ = _emulation([0, 1])
    assert em.wait(0.0) == 0.0
    assert em.wait(2e-4, 3) == 2e-4
    rec = em.record()
    assert rec["added_s"] == pytest.approx(2e-4) and rec["delayed"] == 3


def test_unknown_emulated_network_is_one_line(tmp_path, capsys):
    from haloflow.cli import main

    for spec in ("token-ring", str(tmp_path / "missing.out")):
        with pytest.raises(SystemExit) as e:
            main(["run", "cavity", "--emulate-network", spec, "-o", str(tmp_path / "r"),
                  "--quiet"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and "emulate_network" in err and err.count("\n") == 1, err


def _busy(seconds: float) -> None:
    end = perf_counter() + seconds
    while perf_counter() < end:
        pass


def test_a_slow_core_waits_its_compute_again_at_each_point():
    """Speed 0.5: a communication point after 30 ms of compute waits 30 ms more; one right
    after waits nothing; speed 1 never waits; and a timed phase (a point at its start and
    end) takes what a half-speed core would, however long the rank computed before it."""
    from haloflow.parallel import emulation
    from haloflow.parallel.network_delays import SLOWED
    from haloflow.parallel.timers import Timers

    em = Emulation(None, None, [0, 1], 1, speed=0.5)
    assert em.exchange_delay([0], [800]) == 0.0 and em.allreduce_delay(8) == 0.0
    em.resume()
    _busy(0.03)
    t0 = perf_counter()
    em.settle()
    # waited what it computed (bounds allow for other jobs taking the core)
    assert 0.029 < em.state[SLOWED] < 0.06 and perf_counter() - t0 >= em.state[SLOWED]
    before = em.state[SLOWED]
    em.settle()
    assert em.state[SLOWED] - before < 0.005  # nothing computed since
    full = Emulation(None, None, [0, 1], 0)
    full.resume()
    _busy(0.02)
    full.settle()
    assert full.state[SLOWED] == 0.0
    timers = Timers()
    emulation.ACTIVE = em
    try:
        em.resume()
        _busy(0.05)  # before the phase: paid at its start, outside it
        with timers("fluxes"):
            _busy(0.02)
    finally:
        emulation.ACTIVE = None
    assert 0.039 < timers.phases["fluxes"].seconds < 0.08


def test_a_slow_core_is_not_slowed_while_numba_loads_a_kernel():
    """Loading or compiling a kernel is a process's one-off, which a migration does not
    repeat: the emulated slow core leaves it out, or the set-up that prices the first
    migration would look several times that migration's cost."""
    import numba as nb
    from mpi4py import MPI

    from haloflow.parallel import emulation
    from haloflow.parallel.network_delays import SLOWED

    em = emulation.install(MPI.COMM_SELF, None, [0], speed=0.5)
    try:
        t0 = perf_counter()

        @nb.njit  # a new function: numba compiles it now (tens of ms)
        def fresh(x):
            return x * 2.0 + 1.0

        assert fresh(1.0) == 3.0
        compiling = perf_counter() - t0
        _busy(0.02)
        em.settle()
        # the 20 ms of compute again, not the compilation's seconds
        assert compiling > 0.02 and 0.019 < em.state[SLOWED] < 0.02 + 0.5 * compiling
    finally:
        emulation.uninstall()
    assert emulation.LOADING is None
