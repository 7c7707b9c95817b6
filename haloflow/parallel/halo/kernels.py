"""Pack and unpack kernels shared by every strategy.

``fields`` is a tuple of 1-D float64 arrays.  One buffer layout serves all strategies:
neighbour-major, then field, then cell,

    buf[m * ptr[k] + j * (ptr[k + 1] - ptr[k]) + i] = fields[j][cells[ptr[k] + i]]

so the message for neighbour k is the contiguous slice ``m * ptr[k] : m * ptr[k + 1]`` and
a strategy that sends one message per neighbour, or one per field, cuts it from the same
buffer.  Receive buffers use the same layout over ``recv_ptr``, and ghosts from neighbour k
are the contiguous cells ``first + ptr[k] ...``.
"""

from __future__ import annotations

import numba as nb


@nb.njit(cache=True)
def pack(fields, cells, ptr, buf):
    m = len(fields)
    for k in range(len(ptr) - 1):
        lo = ptr[k]
        n = ptr[k + 1] - lo
        for j in range(m):
            f = fields[j]
            o = m * lo + j * n
            for i in range(n):
                buf[o + i] = f[cells[lo + i]]


@nb.njit(cache=True)
def unpack(buf, ptr, first, fields):
    m = len(fields)
    for k in range(len(ptr) - 1):
        lo = ptr[k]
        n = ptr[k + 1] - lo
        g = first + lo
        for j in range(m):
            f = fields[j]
            o = m * lo + j * n
            for i in range(n):
                f[g + i] = buf[o + i]
