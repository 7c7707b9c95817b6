"""The ``cuda`` backend: numba-cuda kernels and device arrays on an NVIDIA GPU.

With ``NUMBA_ENABLE_CUDASIM=1`` numba runs the same kernels in its CUDA simulator, on host
memory: slow, but exact, which is how machines without a GPU test this backend.

Pack and unpack keep the layout of the ``cpu`` kernels (:mod:`haloflow.parallel.halo.kernels`):
one thread per boundary value and one launch for all the fields (a launch costs tens of
microseconds of Python-side dispatch), each thread finding its places in the buffer from
two per-slot tables (its neighbour's first slot and count) uploaded once per index list.
Launches are asynchronous: :meth:`synchronize` must come before MPI reads a buffer a kernel
wrote (a copy to the host waits by itself).
"""

from __future__ import annotations

import ctypes
import warnings

import numpy as np
from numba import cuda
from numba.core import config as numba_config

from . import BackendUnavailable

# a halo is a few thousand values: a grid that leaves most of the GPU idle is the point, and
# the exchange is short of launches and copies, not of occupancy
warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely")

THREADS = 256  # threads per block of the pack and unpack kernels on a GPU
SIM_THREADS = 16  # ... in the simulator, which runs each thread in Python (cuda_simulator.py)
# blocks of a reduction kernel, each thread a grid-stride share of the rows ending in one
# atomic add per scalar: enough threads to stream a vector, few enough atomics on one address
REDUCTION_BLOCKS = 128
SIM_REDUCTION_BLOCKS = 2


@cuda.jit
def _pack_fields(fields, cells, slot_lo, slot_n, buf):
    """Every field's value of boundary slot ``s``, one thread per slot: one launch for all
    fields (``fields`` is a tuple, the kernel is specialised on its length)."""
    s = cuda.grid(1)
    if s < cells.size:
        lo = slot_lo[s]
        step = slot_n[s]
        o = len(fields) * lo + s - lo
        c = cells[s]
        for j in range(len(fields)):
            buf[o + j * step] = fields[j][c]


@cuda.jit
def _unpack_fields(buf, slot_lo, slot_n, first, fields):
    s = cuda.grid(1)
    if s < slot_lo.size:
        lo = slot_lo[s]
        step = slot_n[s]
        o = len(fields) * lo + s - lo
        for j in range(len(fields)):
            fields[j][first + s] = buf[o + j * step]


def _int64(cells):
    return (np.ascontiguousarray(cells, dtype=np.int64),)


def _slot_tables(ptr):
    """Per slot of a send/recv list: its neighbour's first slot and number of slots."""
    ptr = np.asarray(ptr, dtype=np.int64)
    counts = np.diff(ptr)
    return np.repeat(ptr[:-1], counts), np.repeat(counts, counts)


class CudaBackend:
    name = "cuda"
    device = True

    def __init__(self):
        if not cuda.is_available():
            raise BackendUnavailable("backend cuda: no CUDA GPU or driver found (numba.cuda."
                                     "is_available() is false; NUMBA_ENABLE_CUDASIM=1 "
                                     "simulates one)")
        self.cuda = cuda
        self.simulated = bool(numba_config.ENABLE_CUDASIM)
        if self.simulated:
            from .cuda_simulator import install

            install()
        self.threads = SIM_THREADS if self.simulated else THREADS
        self._tables: dict = {}  # id(host index array) -> (the array, its device tables)

    def sparse(self):
        """A launcher of the sparse kernels (:mod:`.cuda_sparse`) counting its own
        read-backs."""
        from .cuda_sparse import CudaSparse

        return CudaSparse(self.threads, SIM_REDUCTION_BLOCKS if self.simulated
                          else REDUCTION_BLOCKS)

    def describe(self) -> str:
        if self.simulated:
            return "cuda (numba's CUDA simulator: no GPU, host memory)"
        dev = self.cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
        return f"cuda ({name}, compute capability {dev.compute_capability[0]}." \
               f"{dev.compute_capability[1]})"

    # arrays and copies ------------------------------------------------------------------
    def empty(self, n: int):
        return self.cuda.device_array(n, dtype=np.float64)

    def host_empty(self, n: int) -> np.ndarray:
        """A page-locked host buffer: the GPU copies it by DMA at full PCI-E speed."""
        return self.cuda.pinned_array(n, dtype=np.float64)

    def to_device(self, a):
        return self.cuda.to_device(np.ascontiguousarray(a, dtype=np.float64))

    def put(self, a):
        """A device copy of host array ``a`` as it is (indices keep their integer type)."""
        return self.cuda.to_device(np.ascontiguousarray(a))

    def to_host(self, a) -> np.ndarray:
        return a.copy_to_host()

    def copy_to_host(self, dst: np.ndarray, src) -> None:
        src.copy_to_host(dst)

    def copy_to_device(self, dst, src: np.ndarray) -> None:
        dst.copy_to_device(src)

    def synchronize(self) -> None:
        self.cuda.synchronize()

    # kernels ----------------------------------------------------------------------------
    def _upload(self, a, derive):
        """Device copies of the arrays ``derive(a)`` gives for host array ``a``, made on
        first use and kept with ``a``, whose id is the key."""
        got = self._tables.get(id(a))
        if got is None:
            got = self._tables[id(a)] = (a, [self.cuda.to_device(x) for x in derive(a)])
        return got[1]

    def pack(self, fields, cells, ptr, buf) -> None:
        """``buf[m ptr[k] + j n_k + i] = fields[j][cells[ptr[k] + i]]``, on the device."""
        n = int(ptr[-1]) - int(ptr[0])
        if n == 0:
            return
        (dcells,) = self._upload(cells, _int64)
        lo, cnt = self._upload(ptr, _slot_tables)
        t = self.threads
        _pack_fields[(n + t - 1) // t, t](tuple(fields), dcells, lo, cnt, buf)

    def unpack(self, buf, ptr, first, fields) -> None:
        """``fields[j][first + ptr[k] + i] = buf[m ptr[k] + j n_k + i]``, on the device."""
        n = int(ptr[-1]) - int(ptr[0])
        if n == 0:
            return
        lo, cnt = self._upload(ptr, _slot_tables)
        t = self.threads
        _unpack_fields[(n + t - 1) // t, t](buf, lo, cnt, first, tuple(fields))

    # MPI --------------------------------------------------------------------------------
    def mpi_buffer(self, a):
        """What MPI is handed for device array ``a``: the array itself on a GPU (its
        ``__cuda_array_interface__`` gives the device pointer), in the simulator the host
        array behind it (the simulator's device memory is host memory)."""
        return a._ary if self.simulated else a

    def gpu_aware_mpi(self) -> tuple[bool, str]:
        """Whether the MPI library reads device pointers, and how that was found."""
        if self.simulated:
            return True, "simulated device memory is host memory"
        from ..mpiutil import libmpi

        lib = libmpi()
        fn = getattr(lib, "MPIX_Query_cuda_support", None) if lib is not None else None
        if fn is None:  # Open MPI and MPICH >= 4 both have it
            return False, "the MPI library has no MPIX_Query_cuda_support()"
        fn.restype, fn.argtypes = ctypes.c_int, []
        ok = bool(fn())
        return ok, f"MPIX_Query_cuda_support() = {int(ok)}"
