"""The emulated network (``haloflow run --emulate-network``) and slow cores (``[parallel]
emulate_speed``) of a run, where the halo and reduction layer reaches them.

Why here: every message of a run passes through this package (halo exchangers, reductions,
the AMG's transfers, and the request groups and collectives compiled solvers call), so the
delays of :mod:`.network_delays` are added here and nowhere else; a slow core's waits fall at the
same points (and at the timed phases' starts and ends, :mod:`.timers`).  ``ACTIVE`` is None
unless a run installed an emulation: then every hook is one attribute test, and compiled
code calls MPI directly as before (no cost when emulation is off).
"""

from __future__ import annotations

from time import perf_counter

import numpy as np

ACTIVE = None  # the run's network_delays.Emulation, or None
SIZES = [8 * 8 ** k for k in range(7)]  # 8 B .. 2 MiB: the local curve's sizes


def local_curve(comm):
    """Collective: one-way time of a message between two ranks here: the shared-memory
    curve `haloflow predict` measured and cached (the one the model prices local messages
    with), or else a short compiled ping-pong between ranks 0 and 1 (fastest of three
    trials per size)."""
    from ..io.network import Curve, ModelError, shm_cache

    curve = None
    if comm.rank == 0 and shm_cache().exists():
        try:
            curve = Curve.from_netpipe(shm_cache())
        except ModelError:
            curve = None
    curve = comm.bcast(curve, root=0)
    if curve is not None:
        return curve
    times = _pingpong(comm, 1 - comm.rank) if comm.rank < 2 else None
    times = comm.bcast(times, root=0)
    return Curve("local", np.array(SIZES, dtype=float), np.array(times), "this machine")


def _pingpong(comm, peer: int) -> list:
    from mpi4py import MPI

    from . import message_loops as loops
    from . import mpicall

    fns = loops.functions()
    pool = np.zeros(2 * SIZES[-1], dtype=np.uint8)
    st = np.zeros(2 * mpicall.status_bytes(), np.uint8)
    byte_h, comm_h = mpicall.handle(MPI.BYTE), mpicall.handle(comm)
    out = []
    for n in SIZES:
        reps = max(3, min(20, (1 << 19) // n))
        best = np.inf
        for _ in range(3):
            comm.sendrecv(None, peer, source=peer)  # start together (the two ranks only)
            t0 = perf_counter()
            if fns is not None:
                e = loops.pingpong(fns, pool, n, SIZES[-1], 2, 0, reps, comm.rank == 0, peer,
                                   byte_h, comm_h, st.ctypes.data)
                if e:
                    raise RuntimeError(f"ping-pong of {n} bytes: {MPI.Get_error_string(e)}")
            else:
                a, b = pool[:n], pool[SIZES[-1]:SIZES[-1] + n]
                for _ in range(reps):
                    if comm.rank == 0:
                        comm.Send(a, peer)
                        comm.Recv(b, peer)
                    else:
                        comm.Recv(a, peer)
                        comm.Send(b, peer)
            best = min(best, (perf_counter() - t0) / (2 * reps))
        out.append(best)
    return out


def install(comm, spec: str | None, nodes, speed: float = 1.0) -> object:
    """Collective: emulate network ``spec`` (a preset or a NetPIPE ``.out`` file; None: no
    network delays) between the nodes of ``nodes`` (node of every rank), and this rank's
    core at ``speed``, from now on; returns the emulation."""
    global ACTIVE
    from ..io.network import network
    from . import mpicall
    from .network_delays import Emulation

    net = network(spec) if spec else None
    local = None if net is None else local_curve(comm) if comm.size > 1 else net
    em = Emulation(net, local, nodes, comm.rank, speed)
    real = mpicall.library_addresses()
    if real is not None and comm.size > 1:
        from .network_delays_c import wrappers

        mpicall.wrap(wrappers(real, em, mpicall.handle(comm)))
    if speed < 1.0:
        _listen_to_loading(em)
    em.resume()  # a slow core's computing counts from here, not from making the wrappers
    ACTIVE = em
    return em


def uninstall() -> None:
    """Back to the real network (tests; a run ends with its process)."""
    global ACTIVE
    from . import mpicall

    mpicall.wrap(None)
    _listen_to_loading(None)
    ACTIVE = None


LOADING = None  # the kernel-loading listener of a slow core's emulation, while installed


def _listen_to_loading(em) -> None:
    """A slow core's emulation slows the run's computing, not numba loading its kernels: a
    process loads each kernel once, on its first call, and a migration that redoes the
    set-up on new parts finds them loaded.  Slowed, the loading would make the set-up,
    which prices the first migration, look several times the migration's cost.  So while
    ``em`` is installed, the seconds numba holds its compiler lock (loading or compiling)
    are skipped by its clock; ``em`` None: no longer (numba is imported here only, as a
    case file's check needs none)."""
    global LOADING
    from numba.core import event

    if LOADING is not None:
        event.unregister("numba:compiler_lock", LOADING)
        LOADING = None
    if em is None:
        return

    class LoadingSkipped(event.Listener):
        def __init__(self):
            self.depth, self.t0 = 0, 0.0

        def on_start(self, event) -> None:
            if self.depth == 0:
                self.t0 = perf_counter()
            self.depth += 1

        def on_end(self, event) -> None:
            self.depth -= 1
            if self.depth == 0:
                em.skip(perf_counter() - self.t0)

    LOADING = LoadingSkipped()
    event.register("numba:compiler_lock", LOADING)


def settle() -> None:
    """Before a set-up collective (or a timed phase's start or end): a slow core's wait."""
    if ACTIVE is not None:
        ACTIVE.settle()


def resume() -> None:
    """After a set-up collective: the rank computes again."""
    if ACTIVE is not None:
        ACTIVE.resume()


def on(comm):
    """The emulation for messages on ``comm``: the run's, if ``comm`` spans its ranks (a
    communicator of one rank, or any other, is never delayed); else None."""
    if ACTIVE is None or comm.size != len(ACTIVE.nodes) or comm.size < 2:
        return None
    return ACTIVE


def exchange_delay(comm, peers, nbytes) -> float:
    """Seconds an exchange of ``nbytes`` to ``peers`` on ``comm`` waits (0 without
    emulation)."""
    em = on(comm)
    return 0.0 if em is None else em.exchange_delay(peers, nbytes)


def register(comm, address: int, peers, nbytes) -> None:
    """A request group compiled code completes with MPI_Waitall: its first handle's address,
    and the peers and sizes of the messages it sends on ``comm``."""
    em = on(comm)
    if em is not None:
        em.register(address, em.exchange_delay(peers, nbytes))
