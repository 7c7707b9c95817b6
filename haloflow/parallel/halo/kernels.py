"""Pack and unpack kernels shared by every strategy.

``fields`` is a tuple of 1-D float64 arrays.  One buffer layout serves all strategies:
neighbour-major, then field, then cell,

    buf[m * ptr[k] + j * (ptr[k + 1] - ptr[k]) + i] = fields[j][cells[ptr[k] + i]]

so the message for neighbour k is the contiguous slice ``m * ptr[k] : m * ptr[k + 1]`` and
a strategy that sends one message per neighbour, or one per field, cuts it from the same
buffer.  Receive buffers use the same layout over ``recv_ptr``, and ghosts from neighbour k
are the contiguous cells ``first + ptr[k] ...``.  The kernels are the ``cpu`` backend's
(:mod:`haloflow.backends`); the ``cuda`` backend keeps the same layout on the device.
"""

from __future__ import annotations

from ...backends.cpu import pack, unpack

__all__ = ["pack", "unpack"]
