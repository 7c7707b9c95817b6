"""``neighbor``: MPI-3 ``Ineighbor_alltoallv`` on a distributed-graph communicator.

The graph (sources = destinations = our neighbours, ``reorder=False`` so ranks keep their
numbers) is built once, collectively: every rank of ``comm`` must create this exchanger,
also ranks without neighbours.  The MPI library then sees the whole pattern in one call,
as PetscSF's neighbor mode does.  Same buffer layout and staging as ``aggregated``.
"""

from __future__ import annotations

import weakref

from mpi4py import MPI

from .base import Exchanger


def _free(comm):
    if not MPI.Is_finalized() and comm != MPI.COMM_NULL:
        comm.Free()


class _Buffers:
    def __init__(self, ex: NeighborExchanger, m: int):
        sp = ex.space
        self.send, self.recv = sp.buffer(m * ex.n_send), sp.buffer(m * ex.n_recv)
        self.sspec = [sp.mpi(self.send), (m * ex.send_counts, m * ex.send_ptr[:-1]), MPI.DOUBLE]
        self.rspec = [sp.mpi(self.recv), (m * ex.recv_counts, m * ex.recv_ptr[:-1]), MPI.DOUBLE]
        if sp.staged:
            self.dsend, self.drecv = sp.empty(len(self.send)), sp.empty(len(self.recv))


class NeighborExchanger(Exchanger):
    name = "neighbor"
    buffers_class = _Buffers

    def __init__(self, lmesh, comm, staging="host", backend=None):
        super().__init__(lmesh, comm, staging, backend)
        self.graph = comm.Create_dist_graph_adjacent(
            self.neighbours, self.neighbours, reorder=False)
        self._free = weakref.finalize(self, _free, self.graph)

    def start(self, fields):
        fields = tuple(fields)
        st = self._stats
        b = self._buffers(len(fields))
        t0 = self._clock()
        self._pack_contiguous(fields, b)
        if self._emu is not None:
            self._emu.settle()
        t1 = self._clock()
        req = self.graph.Ineighbor_alltoallv(b.sspec, b.rspec)
        if self._emu is not None:
            self._emu.resume()
        st.pack_s += t1 - t0
        st.wait_s += self._clock() - t1
        st.sent(len(fields), len(self.neighbours), b.send.nbytes)
        return fields, b, req

    def finish(self, handle) -> None:
        fields, b, req = handle
        self._wait_unpack(fields, b, req.Wait)

    def close(self) -> None:
        self._free()
