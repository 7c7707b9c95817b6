"""``neighbor``: MPI-3 ``Ineighbor_alltoallv`` on a distributed-graph communicator.

The graph (sources = destinations = our neighbours, ``reorder=False`` so ranks keep their
numbers) is built once, collectively: every rank of ``comm`` must create this exchanger,
also ranks without neighbours.  The MPI library then sees the whole pattern in one call,
as PetscSF's neighbor mode does.  Same buffer layout and staging as ``aggregated``.
"""

from __future__ import annotations

import weakref

import numpy as np
from mpi4py import MPI

from .base import Exchanger
from .kernels import pack, unpack


def _free(comm):
    if not MPI.Is_finalized() and comm != MPI.COMM_NULL:
        comm.Free()


class _Buffers:
    def __init__(self, ex: NeighborExchanger, m: int):
        self.send = np.empty(m * ex.n_send)
        self.recv = np.empty(m * ex.n_recv)
        self.sspec = [self.send, (m * ex.send_counts, m * ex.send_ptr[:-1]), MPI.DOUBLE]
        self.rspec = [self.recv, (m * ex.recv_counts, m * ex.recv_ptr[:-1]), MPI.DOUBLE]
        if ex.space.staged:
            self.dsend, self.drecv = ex.space.empty(len(self.send)), ex.space.empty(len(self.recv))


class NeighborExchanger(Exchanger):
    name = "neighbor"

    def __init__(self, lmesh, comm, staging="host", gpu=None):
        super().__init__(lmesh, comm, staging, gpu)
        self.graph = comm.Create_dist_graph_adjacent(
            self.neighbours, self.neighbours, reorder=False)
        self._free = weakref.finalize(self, _free, self.graph)
        self._bufs: dict[int, _Buffers] = {}

    def _buffers(self, m: int) -> _Buffers:
        b = self._bufs.get(m)
        if b is None:
            b = self._bufs[m] = _Buffers(self, m)
        return b

    def start(self, fields):
        fields = tuple(fields)
        st, sp = self._stats, self.space
        b = self._buffers(len(fields))
        t0 = self._clock()
        if sp.staged:
            sp.pack(fields, self.send_cells, self.send_ptr, b.dsend)
            if self.neighbours:
                sp.copy(b.send, b.dsend)
        else:
            pack(fields, self.send_cells, self.send_ptr, b.send)
        t1 = self._clock()
        req = self.graph.Ineighbor_alltoallv(b.sspec, b.rspec)
        st.pack_s += t1 - t0
        st.wait_s += self._clock() - t1
        st.calls += 1
        st.messages += len(self.neighbours)
        st.bytes += b.send.nbytes
        return fields, b, req

    def finish(self, handle) -> None:
        fields, b, req = handle
        st, sp = self._stats, self.space
        t0 = self._clock()
        req.Wait()
        t1 = self._clock()
        if sp.staged:
            if self.neighbours:
                sp.copy(b.drecv, b.recv)
            sp.unpack(b.drecv, self.recv_ptr, self.n_owned, fields)
        else:
            unpack(b.recv, self.recv_ptr, self.n_owned, fields)
        st.wait_s += t1 - t0
        st.unpack_s += self._clock() - t1

    def close(self) -> None:
        self._free()
