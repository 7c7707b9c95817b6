"""Where fields live, and the one counted, timed copy between device and host memory.

``staging`` says where an exchanger's fields live and what MPI is handed:

    host          fields in host memory; MPI reads them (after a pack) directly
    device        fields in device memory, MPI sees only host buffers (no GPU-aware MPI):
                  every exchange stages data through :meth:`StagedSpace.copy`, counted
    device-aware  fields in device memory and a GPU-aware MPI library reads the device
                  buffers the pack kernels wrote: no copy at all (synchronised before sending)

How much ``device`` copies is what tells strategies apart on multi-GPU nodes (seed 004's
"original", "bandwidth-optimized" and "latency-optimized"), for M fields, N neighbours,
field length S1 and S2 boundary values sent per field:

    whole-field staging (perfield)      2 M copies     2 M S1 values
    per-neighbour staging (packed)      2 M N copies   about 2 M S2 values
    one aggregated buffer (aggregated)  2 copies       about 2 M S2 values

The device is the backend's (:mod:`haloflow.backends`): ``cuda`` keeps the fields on a GPU
(or in numba's CUDA simulator) and packs there; ``cpu`` emulates a device with separate host
arrays, so the counts are exact and the copies cost real memory traffic.
"""

from __future__ import annotations

from time import perf_counter

import numpy as np

from ... import backends
from . import STAGING, kernels


class HostSpace:
    """Fields in host memory: nothing is staged."""

    name = "host"
    staged = False  # MPI sees host copies of device data
    on_device = False  # the exchanger's fields and MPI buffers are device arrays

    def __init__(self, stats, backend=None):
        self.stats = stats
        self.backend = backend

    def empty(self, n: int):
        """An array in the space the fields live in."""
        return np.empty(n)

    def buffer(self, n: int):
        """A buffer MPI sends from or receives into."""
        return np.empty(n)

    def asarray(self, a):
        """A copy of host array ``a`` in this space (not counted: setup, not exchange)."""
        return np.array(a, dtype=np.float64)

    def to_numpy(self, a) -> np.ndarray:
        return np.asarray(a)

    @staticmethod
    def pack(fields, cells, ptr, buf) -> None:
        kernels.pack(tuple(fields), cells, ptr, buf)

    @staticmethod
    def unpack(buf, ptr, first, fields) -> None:
        kernels.unpack(buf, ptr, first, tuple(fields))

    def mpi(self, a):
        """The object MPI is handed for buffer ``a``."""
        return a

    def ready(self) -> None:
        """Wait until the buffers a pack wrote can be read by MPI."""

    def copy(self, dst, src) -> None:
        raise RuntimeError("host staging copies nothing")


class _DeviceSpace(HostSpace):
    """Fields in the backend's device memory, packed and unpacked there."""

    on_device = True

    def __init__(self, stats, backend):
        super().__init__(stats, backend)
        self.name = f"{self.name}, {backend.describe() if backend.device else 'emulated'}"

    def empty(self, n: int):
        return self.backend.empty(n)

    def asarray(self, a):
        return self.backend.to_device(a)

    def to_numpy(self, a) -> np.ndarray:
        return self.backend.to_host(a)

    def pack(self, fields, cells, ptr, buf) -> None:
        self.backend.pack(fields, cells, ptr, buf)

    def unpack(self, buf, ptr, first, fields) -> None:
        self.backend.unpack(buf, ptr, first, fields)


class StagedSpace(_DeviceSpace):
    """Device fields, host MPI buffers: every byte crosses in a counted, timed copy."""

    name = "device"
    staged = True

    def buffer(self, n: int):
        return self.backend.host_empty(n)

    def copy(self, dst, src) -> None:
        """The only way data moves between the device and host memory."""
        t0 = perf_counter()
        if isinstance(src, np.ndarray):  # host -> device (pinned host buffers are ndarrays)
            self.backend.copy_to_device(dst, src)
        else:  # device -> host; waits for the kernels that wrote src
            self.backend.copy_to_host(dst, src)
        st = self.stats
        st.copy_s += perf_counter() - t0
        st.copies += 1
        st.copy_bytes += src.nbytes


class AwareSpace(_DeviceSpace):
    """Device fields and device MPI buffers: a GPU-aware MPI reads them, nothing is copied."""

    name = "device-aware"

    def buffer(self, n: int):
        return self.backend.empty(n)

    def mpi(self, a):
        return self.backend.mpi_buffer(a)

    def ready(self) -> None:
        # kernel launches return at once: MPI must not read a buffer still being packed
        self.backend.synchronize()


def make(kind, stats, backend=None) -> HostSpace:
    """The space for ``kind`` (one of ``STAGING``), counting copies in ``stats``.

    ``backend`` is a backend object or name (:mod:`haloflow.backends`; default ``cpu``,
    which emulates the device of ``device`` staging).
    """
    if kind is None or kind == "host":
        return HostSpace(stats)
    if kind not in STAGING:
        raise ValueError(f"unknown staging {kind!r} (expected one of {', '.join(STAGING)})")
    if backend is None or isinstance(backend, str):
        backend = backends.make(backend)
    if kind == "device":
        return StagedSpace(stats, backend)
    if backend.device:
        ok, why = backend.gpu_aware_mpi()
        if not ok:
            raise backends.BackendUnavailable(f"staging device-aware needs a GPU-aware MPI "
                                              f"library: {why}")
    return AwareSpace(stats, backend)
