"""Where fields live, and the one counted, timed copy between device and host memory.

With ``staging="device"`` the fields an exchanger is given live in device memory and MPI
sees only host buffers (no GPU-aware MPI assumed), so every exchange stages data through
:meth:`Space.copy`, which counts copies and bytes in the exchanger's :class:`HaloStats`.
How much is copied is what tells strategies apart on multi-GPU nodes, for M fields, N
neighbours, field length S1 and S2 boundary values sent per field:

    whole-field staging (perfield)      2 M copies     2 M S1 values
    per-neighbour staging (packed)      2 M N copies   about 2 M S2 values
    one aggregated buffer (aggregated)  2 copies       about 2 M S2 values

On a machine without a GPU the device is emulated by separate host arrays, so the counts
are exact and the copies cost real memory traffic; with CuPy and a GPU the device is real.
Packing and unpacking run where the fields are: numba kernels on the host, CuPy on a GPU.
"""

from __future__ import annotations

from time import perf_counter

import numpy as np

from . import STAGING, kernels


class HostSpace:
    """Fields in host memory: nothing is staged."""

    name = "host"
    staged = False
    xp = np

    def __init__(self, stats):
        self.stats = stats

    def empty(self, shape):
        return np.empty(shape)

    def asarray(self, a):
        """A copy of host array ``a`` in this space (not counted: setup, not exchange)."""
        return np.array(a, dtype=np.float64)

    def to_numpy(self, a):
        return np.asarray(a)

    @staticmethod
    def pack(fields, cells, ptr, buf):
        kernels.pack(fields, cells, ptr, buf)

    @staticmethod
    def unpack(buf, ptr, first, fields):
        kernels.unpack(buf, ptr, first, fields)

    def copy(self, dst, src) -> None:
        raise RuntimeError("host staging copies nothing")


class EmulatedDevice(HostSpace):
    """A device emulated in host memory: separate arrays, every copy counted and timed."""

    name = "device (emulated)"
    staged = True

    def copy(self, dst, src) -> None:
        """The only way data moves between the device and host memory."""
        t0 = perf_counter()
        np.copyto(dst, src)
        st = self.stats
        st.copy_s += perf_counter() - t0
        st.copies += 1
        st.copy_bytes += src.nbytes


class CupyDevice(HostSpace):
    """A real GPU through CuPy; pack and unpack are gathers and scatters on the device."""

    name = "device (cupy)"
    staged = True

    def __init__(self, stats):
        import cupy

        super().__init__(stats)
        self.xp = cupy
        self._idx = {}  # host index array id -> device copy

    def empty(self, shape):
        return self.xp.empty(shape)

    def asarray(self, a):
        return self.xp.asarray(np.asarray(a, dtype=np.float64))

    def to_numpy(self, a):
        return self.xp.asnumpy(a)

    def _dev(self, a):
        d = self._idx.get(id(a))
        if d is None:
            d = self._idx[id(a)] = (a, self.xp.asarray(a.astype(np.int64)))
        return d[1]

    def pack(self, fields, cells, ptr, buf):
        m, dcells = len(fields), self._dev(cells)
        for k in range(len(ptr) - 1):
            lo, hi = int(ptr[k]), int(ptr[k + 1])
            for j, f in enumerate(fields):
                o = m * lo + j * (hi - lo)
                self.xp.take(f, dcells[lo:hi], out=buf[o:o + hi - lo])

    def unpack(self, buf, ptr, first, fields):
        m = len(fields)
        for k in range(len(ptr) - 1):
            lo, hi = int(ptr[k]), int(ptr[k + 1])
            for j, f in enumerate(fields):
                o = m * lo + j * (hi - lo)
                f[first + lo:first + hi] = buf[o:o + hi - lo]

    def copy(self, dst, src) -> None:
        t0 = perf_counter()
        if isinstance(src, np.ndarray):  # host -> device
            dst.set(src)
        else:  # device -> host; get() waits for the device
            src.get(out=dst)
        st = self.stats
        st.copy_s += perf_counter() - t0
        st.copies += 1
        st.copy_bytes += src.nbytes


def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: all mean "emulate"
        return False


def make(kind, stats, gpu: bool | None = None) -> HostSpace:
    """The space for ``kind`` ("host" or "device"), counting copies in ``stats``.

    ``gpu=None`` uses a GPU through CuPy where one exists; ``False`` always emulates (the
    solver keeps its fields in numpy arrays, so ``haloflow run`` emulates).
    """
    if kind is None or kind == "host":
        return HostSpace(stats)
    if kind != "device":
        raise ValueError(f"unknown staging {kind!r} (expected one of {', '.join(STAGING)})")
    if gpu is None:
        gpu = gpu_available()
    return CupyDevice(stats) if gpu else EmulatedDevice(stats)
