"""``packed``: per neighbour, every field's boundary values in one message; Isend/Irecv; Waitall.

Buffers are allocated once per field count and reused, so an exchange allocates nothing.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .base import Exchanger

TAG = 7301


class PackedExchanger(Exchanger):
    name = "packed"

    def __init__(self, lmesh, comm):
        super().__init__(lmesh, comm)
        self._buffers = {}  # n_fields -> (send bufs, recv bufs)
        lm = lmesh
        self._send_idx = [lm.send_cells[lm.send_ptr[k]:lm.send_ptr[k + 1]]
                          for k in range(len(self.neighbours))]
        self._recv_slices = [slice(lm.n_owned + lm.recv_ptr[k], lm.n_owned + lm.recv_ptr[k + 1])
                             for k in range(len(self.neighbours))]

    def _bufs(self, m):
        if m not in self._buffers:
            self._buffers[m] = (
                [np.empty((m, n)) for n in self.send_counts],
                [np.empty((m, n)) for n in self.recv_counts],
            )
        return self._buffers[m]

    def start(self, fields):
        fields = list(fields)
        st = self.stats
        st.calls += 1
        if not self.neighbours:
            return fields, []
        sbufs, rbufs = self._bufs(len(fields))
        reqs = [self.comm.Irecv([rb, MPI.DOUBLE], source=q, tag=TAG)
                for q, rb in zip(self.neighbours, rbufs, strict=True)]
        for q, sb, idx in zip(self.neighbours, sbufs, self._send_idx, strict=True):
            t0 = self._clock()
            for j, f in enumerate(fields):
                np.take(f, idx, out=sb[j])
            st.pack_s += self._clock() - t0
            reqs.append(self.comm.Isend([sb, MPI.DOUBLE], dest=q, tag=TAG))
            st.messages += 1
            st.bytes += sb.nbytes
        return fields, reqs

    def finish(self, handle) -> None:
        fields, reqs = handle
        if not reqs:
            return
        st = self.stats
        t0 = self._clock()
        MPI.Request.Waitall(reqs)
        t1 = self._clock()
        _, rbufs = self._bufs(len(fields))
        for rb, sl in zip(rbufs, self._recv_slices, strict=True):
            for j, f in enumerate(fields):
                f[sl] = rb[j]
        st.wait_s += t1 - t0
        st.unpack_s += self._clock() - t1
