"""The ``cpu`` backend: numpy arrays and numba kernels in host memory.

As the device of a staged exchange it emulates one: its "device" arrays are separate host
arrays, so every copy an exchange counts is also made (and costs real memory traffic).
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def pack(fields, cells, ptr, buf):
    """Neighbour-major, then field, then cell (layout: :mod:`haloflow.parallel.halo.kernels`)."""
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


class CpuBackend:
    name = "cpu"
    device = False  # arrays live in host memory (so no describe() nor gpu_aware_mpi())

    def empty(self, n: int) -> np.ndarray:
        return np.empty(n)

    def host_empty(self, n: int) -> np.ndarray:
        """A host buffer for copies to and from this backend's arrays."""
        return np.empty(n)

    def to_device(self, a) -> np.ndarray:
        return np.array(a, dtype=np.float64)

    def to_host(self, a) -> np.ndarray:
        return np.array(a)

    def copy_to_host(self, dst: np.ndarray, src) -> None:
        np.copyto(dst, src)

    def copy_to_device(self, dst, src: np.ndarray) -> None:
        np.copyto(dst, src)

    @staticmethod
    def pack(fields, cells, ptr, buf) -> None:
        pack(tuple(fields), cells, ptr, buf)

    @staticmethod
    def unpack(buf, ptr, first, fields) -> None:
        unpack(buf, ptr, first, tuple(fields))

    def synchronize(self) -> None:
        """Kernels on the host have finished when they return."""

    def mpi_buffer(self, a):
        return a
