"""MPI objects for solvers that communicate from compiled code: persistent point-to-point
requests on slices of one buffer, and the handles collectives need.

Why here: only this package touches mpi4py; the compiled AMG solve (linalg/kcycle.py) gets
plain integers and arrays from these helpers and calls MPI_Startall/MPI_Waitall,
MPI_Allreduce and MPI_Allgatherv through :mod:`.mpicall`.
"""

from __future__ import annotations

import weakref

import numpy as np
from mpi4py import MPI

from . import emulation, mpicall


def _free(reqs) -> None:
    if not MPI.Is_finalized():
        for r in reqs:
            r.Free()


class Requests:
    """Persistent requests appended group by group (each group started and completed
    together from compiled code), their C handles in one array and room for statuses.

    ``add`` returns the group's (first request, count); ``address(first)`` the C address of
    that request, valid once ``close`` has made the handle array."""

    def __init__(self, comm):
        self.comm = comm
        self.reqs: list = []
        self.handles = None
        self.statuses = None
        self._groups: list = []  # (first, peers sent to, bytes each): an emulation's waits

    def add(self, sends, recvs, tag: int) -> tuple[int, int]:
        """``sends``/``recvs``: (peer, float64 buffer) pairs; receives first, as the
        halo strategies order them."""
        first = len(self.reqs)
        if emulation.on(self.comm) is not None:
            self._groups.append((first, [q for q, _ in sends], [b.nbytes for _, b in sends]))
        self.reqs += [self.comm.Recv_init([b, MPI.DOUBLE], q, tag) for q, b in recvs]
        self.reqs += [self.comm.Send_init([b, MPI.DOUBLE], q, tag) for q, b in sends]
        return first, len(self.reqs) - first

    def close(self) -> None:
        self.handles = mpicall.handles(self.reqs) if self.reqs else \
            np.zeros(1, dtype=mpicall.request_dtype())
        self.statuses = np.zeros(max(1, len(self.reqs)) * mpicall.status_bytes(), np.uint8)
        self._finalizer = weakref.finalize(self, _free, list(self.reqs))
        for first, peers, nbytes in self._groups:
            emulation.register(self.comm, self.address(first), peers, nbytes)

    def address(self, first: int) -> int:
        return self.handles.ctypes.data + first * self.handles.itemsize

    @property
    def status_address(self) -> int:
        return self.statuses.ctypes.data


def collective_handles(comm) -> np.ndarray:
    """[communicator, MPI_DOUBLE, MPI_SUM] as C handles, in one array of the library's
    handle width (all three are ints in MPICH, pointers in Open MPI)."""
    hs = [mpicall.handle(comm), mpicall.handle(MPI.DOUBLE), mpicall.handle(MPI.SUM)]
    if len({h.dtype for h in hs}) != 1:
        raise RuntimeError("MPI handles of different widths")
    return np.array(hs, dtype=hs[0].dtype)


def self_handles() -> np.ndarray:
    """``collective_handles`` of MPI_COMM_SELF (serial runs: never used, same types)."""
    return collective_handles(MPI.COMM_SELF)
