"""``perfield``: one blocking ``Sendrecv`` per field per neighbour (M x N messages).

The "original" way, kept as the baseline the others are measured against.  Every rank
visits its neighbours in ascending rank order, which cannot deadlock: the lowest blocked
rank always finds its partner waiting for it.  With device staging each whole field goes to
the host and back (2 M copies of S1 values), as code that only knows whole arrays does.
With ``device-aware`` staging each field is packed on the device and MPI reads the device
buffer.  The exchange is complete when ``start`` returns; ``finish`` has nothing left to do.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .base import Exchanger
from .kernels import pack, unpack

TAG = 7300


class PerFieldExchanger(Exchanger):
    name = "perfield"

    def __init__(self, lmesh, comm, staging="host", backend=None):
        super().__init__(lmesh, comm, staging, backend)
        space = self.space
        self._send, self._recv = space.buffer(self.n_send), space.buffer(self.n_recv)
        sp, rp = self.send_ptr, self.recv_ptr
        self._msgs = [([space.mpi(self._send[sp[k]:sp[k + 1]]), MPI.DOUBLE], q,
                       [space.mpi(self._recv[rp[k]:rp[k + 1]]), MPI.DOUBLE])
                      for k, q in enumerate(self.neighbours)]
        self._mirrors: list[np.ndarray] = []  # host copies of whole fields (device staging)

    def _mirror(self, j: int, n: int) -> np.ndarray:
        while len(self._mirrors) <= j:
            self._mirrors.append(self.space.buffer(n))
        return self._mirrors[j]

    def start(self, fields):
        st, sp = self._stats, self.space
        st.calls += 1
        st.fields += len(fields)
        if not self.neighbours:
            return None
        for j, f in enumerate(fields):
            t0 = self._clock()
            if sp.staged:  # the whole field to the host, packed there
                h = self._mirror(j, len(f))
                sp.copy(h, f)
                pack((h,), self.send_cells, self.send_ptr, self._send)
            else:
                sp.pack((f,), self.send_cells, self.send_ptr, self._send)
                sp.ready()
            if self._emu is not None:
                self._emu.settle()
            t1 = self._clock()
            for sbuf, q, rbuf in self._msgs:
                self.comm.Sendrecv(sbuf, q, TAG, rbuf, q, TAG)
            if self._emu is not None:
                self._emulate(1)
            t2 = self._clock()
            if sp.staged:
                unpack(self._recv, self.recv_ptr, self.n_owned, (h,))
                sp.copy(f, h)
            else:
                sp.unpack(self._recv, self.recv_ptr, self.n_owned, (f,))
            st.pack_s += t1 - t0
            st.wait_s += t2 - t1
            st.unpack_s += self._clock() - t2
        st.messages += len(fields) * len(self.neighbours)
        st.bytes += 8 * len(fields) * self.n_send
        return None

    def finish(self, handle) -> None:
        pass
