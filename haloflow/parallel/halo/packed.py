"""``packed``: per neighbour, every field's boundary values in one message; Isend/Irecv; Waitall.

The bandwidth-optimised strategy: N messages per exchange whatever the field count, each
sent as soon as it is packed.  Buffers are allocated once per field count and reused, so an
exchange allocates nothing but its requests.  With device staging each neighbour's values
cross field by field (2 M N copies), as a code that stages per neighbour and field does;
with ``device-aware`` staging MPI reads each neighbour's device buffer.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .base import Exchanger

TAG = 7301


class _Buffers:
    def __init__(self, ex: PackedExchanger, m: int):
        space = ex.space
        self.send, self.recv = space.buffer(m * ex.n_send), space.buffer(m * ex.n_recv)
        sp, rp = m * ex.send_ptr, m * ex.recv_ptr
        nb = range(len(ex.neighbours))
        self.sends = [self.send[sp[k]:sp[k + 1]] for k in nb]
        self.msends = [[space.mpi(s), MPI.DOUBLE] for s in self.sends]
        self.recvs = [[space.mpi(self.recv[rp[k]:rp[k + 1]]), MPI.DOUBLE] for k in nb]
        if space.staged:  # device buffers and (device, host) row pairs per neighbour
            self.dsend = space.empty(m * ex.n_send)
            self.drecv = space.empty(m * ex.n_recv)
            self.dsends = [self.dsend[sp[k]:sp[k + 1]] for k in nb]
            self.out_rows = [_rows(self.dsend[sp[k]:sp[k + 1]], self.sends[k], m) for k in nb]
            self.in_rows = [_rows(self.recv[rp[k]:rp[k + 1]], self.drecv[rp[k]:rp[k + 1]], m)
                            for k in nb]


def _rows(src, dst, m):
    """(dst row, src row) pairs: the message of one neighbour, field by field."""
    n = len(src) // m
    return [(dst[j * n:(j + 1) * n], src[j * n:(j + 1) * n]) for j in range(m)]


class PackedExchanger(Exchanger):
    name = "packed"
    buffers_class = _Buffers

    def __init__(self, lmesh, comm, staging="host", backend=None):
        super().__init__(lmesh, comm, staging, backend)
        # per neighbour: its send cells and a local [0, count] pointer, for one-neighbour packs
        sp = self.send_ptr
        self._cells = [self.send_cells[sp[k]:sp[k + 1]] for k in range(len(self.neighbours))]
        self._ptrs = [np.array([0, c], dtype=np.int64) for c in self.send_counts]

    def start(self, fields):
        fields = tuple(fields)
        st, sp = self._stats, self.space
        st.calls += 1
        st.fields += len(fields)
        if not self.neighbours:
            return fields, None, []
        b = self._buffers(len(fields))
        reqs = [self.comm.Irecv(rb, source=q, tag=TAG)
                for q, rb in zip(self.neighbours, b.recvs, strict=True)]
        for k, q in enumerate(self.neighbours):
            t0 = self._clock()
            if sp.staged:
                sp.pack(fields, self._cells[k], self._ptrs[k], b.dsends[k])
                for dst, src in b.out_rows[k]:
                    sp.copy(dst, src)
            else:
                sp.pack(fields, self._cells[k], self._ptrs[k], b.sends[k])
                sp.ready()
            st.pack_s += self._clock() - t0
            if self._emu is not None:
                self._emu.settle()
            reqs.append(self.comm.Isend(b.msends[k], dest=q, tag=TAG))
            if self._emu is not None:
                self._emu.resume()
        st.messages += len(self.neighbours)
        st.bytes += b.send.nbytes
        return fields, b, reqs

    def finish(self, handle) -> None:
        fields, b, reqs = handle
        if not reqs:
            return
        st, sp = self._stats, self.space
        if self._emu is not None:
            self._emu.settle()
        t0 = self._clock()
        MPI.Request.Waitall(reqs)
        if self._emu is not None:
            self._emulate(len(fields))
        t1 = self._clock()
        if sp.staged:
            for rows in b.in_rows:
                for dst, src in rows:
                    sp.copy(dst, src)
            sp.unpack(b.drecv, self.recv_ptr, self.n_owned, fields)
        else:
            sp.unpack(b.recv, self.recv_ptr, self.n_owned, fields)
        st.wait_s += t1 - t0
        st.unpack_s += self._clock() - t1
