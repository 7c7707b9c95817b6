"""Fixed communication patterns between ranks that are not halo exchanges: built once with
their peers, counts and buffers, run many times (the AMG hierarchy's transfers between
levels), and the one-time set-up collectives that build them.

Why plans: an AMG cycle moves the same small messages between the same ranks at every level
visit, so the requests are persistent (created once, started and waited on per visit) and
the gathers know their counts.  Why the set-up collectives live here and not in
:class:`.reduce.Reducer`: they run once, before the time loop, and are left out of the
allreduce counters, which count what a step costs.
"""

from __future__ import annotations

import functools
import weakref
from time import perf_counter

import numpy as np
from mpi4py import MPI

from . import emulation


def _free(reqs) -> None:
    if not MPI.Is_finalized():
        for r in reqs:
            r.Free()


class PointToPoint:
    """Messages from fixed buffers to fixed peers: ``sends`` and ``recvs`` are lists of
    ``(peer, buffer)``; ``run`` moves all of them (buffers are filled and read by the caller).

    One tag per plan keeps plans over the same peers apart."""

    def __init__(self, comm, sends, recvs, tag: int):
        self.reqs = [comm.Recv_init(b, q, tag) for q, b in recvs]
        self.reqs += [comm.Send_init(b, q, tag) for q, b in sends]
        self._free = weakref.finalize(self, _free, list(self.reqs))
        self._emu = emulation.on(comm)
        self._delay = emulation.exchange_delay(comm, [q for q, _ in sends],
                                               [np.asarray(b).nbytes for _, b in sends])

    def run(self) -> None:
        if self._emu is not None:
            self._emu.settle()
        MPI.Prequest.Startall(self.reqs)
        MPI.Request.Waitall(self.reqs)
        if self._emu is not None:
            self._emu.wait(self._delay, len(self.reqs) // 2)


class RootPieces:
    """One piece per rank, of a length fixed at set-up, concatenated on ``root`` in rank
    order (``gather``) and cut back into the pieces (``scatter``).  ``counts``: every rank's
    piece length, needed on the root only."""

    def __init__(self, comm, counts, root: int = 0):
        self.comm, self.root = comm, root
        self.counts = list(counts) if comm.rank == root else None

    def gather(self, piece: np.ndarray, whole: np.ndarray | None) -> None:
        """``whole`` (root only; None elsewhere) = every rank's ``piece``."""
        target = [whole, self.counts] if self.comm.rank == self.root else None
        emulation.settle()
        self.comm.Gatherv(piece, target, root=self.root)
        emulation.resume()

    def scatter(self, whole: np.ndarray | None, piece: np.ndarray) -> None:
        """``piece`` = this rank's part of the root's ``whole``."""
        source = [whole, self.counts] if self.comm.rank == self.root else None
        emulation.settle()
        self.comm.Scatterv(source, piece, root=self.root)
        emulation.resume()


class AllPieces:
    """One piece per rank, of a length fixed at set-up, concatenated in rank order on every
    rank (one ``MPI_Allgatherv``): the AMG's redundant coarse level, where every rank solves
    the same small problem instead of waiting for rank 0.  ``counts``: every rank's piece
    length; ``displs``: where each piece starts in the whole.  ``calls``, ``seconds`` and
    ``bytes`` (received per rank) count what the performance model prices; one rank counts
    the calls a parallel run would make and never calls MPI."""

    def __init__(self, comm, counts):
        self.comm = comm
        self.counts = np.asarray(counts, dtype=np.int64)
        self.displs = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)
        self.total = int(self.counts.sum())
        self.parallel = comm.size > 1
        self._spec = (self.counts.tolist(), self.displs.tolist())
        self.calls, self.seconds, self.bytes = 0, 0.0, 0
        self._emu = emulation.on(comm)

    def allgather(self, piece: np.ndarray, whole: np.ndarray) -> None:
        """``whole[:total]`` = every rank's ``piece`` (float64), in rank order."""
        self.calls += 1
        self.bytes += 8 * (self.total - len(piece))
        if not self.parallel:
            whole[: self.total] = piece
            return
        if self._emu is not None:
            self._emu.settle()
        t0 = perf_counter()
        self.comm.Allgatherv(piece, [whole, self._spec, MPI.DOUBLE])
        if self._emu is not None:
            self._emu.gather_wait(8 * self.total)
        self.seconds += perf_counter() - t0


# -- set-up collectives (not counted) ----------------------------------------------------------

def _point(fn):
    """A collective is a communication point: an emulated slow core pays its compute's extra
    time before it, and its wait for slower ranks inside it is no compute of its own."""

    @functools.wraps(fn)
    def at(*args, **kw):
        emulation.settle()
        try:
            return fn(*args, **kw)
        finally:
            emulation.resume()

    return at


@_point
def total(comm, n: int) -> int:
    """Sum of the integers ``n`` of every rank."""
    return comm.allreduce(n)


@_point
def allgather(comm, obj) -> list:
    """``obj`` of every rank, in rank order, on every rank."""
    return comm.allgather(obj)


@_point
def alltoall(comm, outbox: list) -> list:
    """``outbox[q]`` goes to rank q; returns what every rank sent here, in rank order."""
    return comm.alltoall(outbox)


@_point
def allgatherv(comm, a: np.ndarray, counts) -> np.ndarray:
    """``a`` of every rank concatenated in rank order on every rank; ``counts``: their
    lengths."""
    a = np.ascontiguousarray(a)
    out = np.empty(int(np.sum(counts)), dtype=a.dtype)
    comm.Allgatherv(a, [out, list(counts)])
    return out


@_point
def gatherv(comm, a: np.ndarray, counts, root: int = 0) -> np.ndarray | None:
    """``a`` of every rank concatenated on ``root`` (None elsewhere); ``counts``: their
    lengths, needed on the root only."""
    a = np.ascontiguousarray(a)
    if comm.rank != root:
        comm.Gatherv(a, None, root=root)
        return None
    out = np.empty(int(np.sum(counts)), dtype=a.dtype)
    comm.Gatherv(a, [out, list(counts)], root=root)
    return out
