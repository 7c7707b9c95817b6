"""MPI_Startall and MPI_Waitall called from numba kernels through raw function pointers.

Why: from Python each MPI call costs about 0.3-1 µs of interpreter and mpi4py overhead, and
a small halo exchange is only a few microseconds; a whole exchange in one compiled call
measured 1.9 µs against 3.4 µs from Python (DESIGN.md section 8).  As PyFR does for
MPI_Startall, the function addresses come from the MPI library mpi4py already loaded, so no
extra package is needed (numba-mpi would be, and it is GPL-3).  Calls go through an
intrinsic that turns an integer address into a function pointer, so the kernels that use it
still cache.  ``addresses()`` is None where the library or clock cannot be found; callers
then use mpi4py.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from functools import cache

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _libmpi_path() -> str | None:
    """The MPI library mpi4py loaded (the same one, also when it was opened by path)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libmpi.so"):
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("mpi")


@cache
def addresses() -> dict[str, int] | None:
    """Addresses of MPI_Startall, MPI_Waitall and clock_gettime, or None."""
    if os.environ.get("HALOFLOW_NO_CMPI"):
        return None
    from mpi4py import MPI  # noqa: F401 - loads the library we look for

    path = _libmpi_path()
    try:
        mpi = ctypes.CDLL(path)
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        fns = {"startall": mpi.MPI_Startall, "waitall": mpi.MPI_Waitall,
               "clock": libc.clock_gettime}
    except (OSError, AttributeError, TypeError):
        return None
    return {k: ctypes.cast(f, ctypes.c_void_p).value for k, f in fns.items()}


def request_dtype():
    """The integer type of MPI_Request (int in MPICH, a pointer in Open MPI)."""
    from mpi4py import MPI

    return np.dtype(f"u{MPI._sizeof(MPI.Request)}")


def handles(reqs) -> np.ndarray:
    """The raw MPI_Request handles of mpi4py requests, as C sees them."""
    from mpi4py import MPI

    dt = request_dtype()
    mask = (1 << (8 * dt.itemsize)) - 1  # mpi4py returns C ints sign-extended
    return np.array([MPI._handleof(r) & mask for r in reqs], dtype=dt)


def status_bytes() -> int:
    from mpi4py import MPI

    return MPI._sizeof(MPI.Status)


CLOCK_MONOTONIC = getattr(time, "CLOCK_MONOTONIC", 1)


@intrinsic
def call_ip(typingctx, fn, a, p):
    """``int fn(int a, void *p)`` for the function at integer address ``fn``."""
    sig = types.int32(types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i32, vp = ir.IntType(32), ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(i32, [i32, vp])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(f, [builder.trunc(args[1], i32), builder.inttoptr(args[2], vp)])

    return sig, codegen


@intrinsic
def call_ipp(typingctx, fn, a, p, q):
    """``int fn(int a, void *p, void *q)`` for the function at integer address ``fn``."""
    sig = types.int32(types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i32, vp = ir.IntType(32), ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(i32, [i32, vp, vp])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(f, [builder.trunc(args[1], i32), builder.inttoptr(args[2], vp),
                                builder.inttoptr(args[3], vp)])

    return sig, codegen
