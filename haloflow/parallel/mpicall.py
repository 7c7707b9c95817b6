"""MPI called from compiled code: function addresses from the loaded MPI library, and numba
intrinsics that call a C function at an integer address.

Why: from Python each MPI call costs about 0.3-1 µs of interpreter and mpi4py work, while a
small halo exchange takes a few microseconds and a shared-memory ping-pong 0.3 µs
(docs/design.md, section 11).  As PyFR does for MPI_Startall, the functions come from the MPI
library mpi4py already loaded, so no package is added (numba-mpi would be, and it is GPL-3).
Kernels receive the addresses as plain integers (in arguments or a control array) and call
them through the intrinsics below, so they stay in numba's on-disk cache across processes.
Used by the ``aggregated`` halo strategy (MPI_Startall/MPI_Waitall and the clock), the
compiled AMG solve (those, MPI_Allreduce and MPI_Allgatherv) and by
``haloflow netpipe``'s timed loops.  ``addresses()`` is None where the library or a function
cannot be found (or ``HALOFLOW_NO_CMPI`` is set); callers then use mpi4py.

Handles (communicators, datatypes, windows) are ``int`` in MPICH and pointers in Open MPI
and the standard ABI: :func:`handle` gives them as a numpy integer of that width, which is
the width the intrinsics pass on.
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
from numba.core import cgutils
from numba.extending import intrinsic

from ..mpiutil import libmpi

CLOCK_MONOTONIC = getattr(time, "CLOCK_MONOTONIC", 1)

FUNCTIONS = {  # name in addresses() -> C function
    "startall": "MPI_Startall", "waitall": "MPI_Waitall",
    "send": "MPI_Send", "recv": "MPI_Recv", "isend": "MPI_Isend", "irecv": "MPI_Irecv",
    "put": "MPI_Put", "get": "MPI_Get", "fence": "MPI_Win_fence", "lock": "MPI_Win_lock",
    "unlock": "MPI_Win_unlock", "allreduce": "MPI_Allreduce", "allgatherv": "MPI_Allgatherv",
}


_WRAPPED: dict[str, int] = {}  # functions replaced by an emulated network's wrappers


def addresses() -> dict[str, int] | None:
    """Addresses of the MPI functions in ``FUNCTIONS`` and of clock_gettime ("clock"), or
    None; under network emulation (``parallel.emulation``) some are its wrappers'."""
    real = library_addresses()
    return {**real, **_WRAPPED} if real is not None and _WRAPPED else real


def wrap(replacements: dict[str, int] | None) -> None:
    """Hand out ``replacements`` instead of the library's functions from now on (None: the
    library's again).  Plans built before keep what they got."""
    _WRAPPED.clear()
    _WRAPPED.update(replacements or {})


def _preloaded() -> ctypes.CDLL | None:
    """The process's global symbols where a library is preloaded (LD_PRELOAD: a PMPI tool such
    as ``haloflow trace``'s) and they hold MPI, so that compiled code calls the tool's
    wrappers, as the dynamic linker binds mpi4py's calls, instead of going past them."""
    if not os.environ.get("LD_PRELOAD"):
        return None
    try:
        everything = ctypes.CDLL(None)
        everything.MPI_Startall  # noqa: B018 (an AttributeError if MPI is not global)
    except (OSError, AttributeError):
        return None
    return everything


@cache
def library_addresses() -> dict[str, int] | None:
    """The MPI library's own functions (see :func:`addresses`)."""
    if os.environ.get("HALOFLOW_NO_CMPI"):
        return None
    mpi = libmpi()
    if mpi is None:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        lib = _preloaded() or mpi
        fns = {k: getattr(lib, name) for k, name in FUNCTIONS.items()}
        fns["clock"] = libc.clock_gettime
    except (OSError, AttributeError, TypeError):
        return None
    return {k: ctypes.cast(f, ctypes.c_void_p).value for k, f in fns.items()}


def handle(obj) -> np.integer:
    """The C handle of an mpi4py communicator, datatype or window, as a numpy integer of
    the MPI library's handle width."""
    from mpi4py import MPI

    size = MPI._sizeof(type(obj))
    mask = (1 << (8 * size)) - 1  # mpi4py returns C ints sign-extended
    return np.array(MPI._handleof(obj) & mask, dtype=f"u{size}").view(f"i{size}")[()]


def request_dtype():
    """The integer type of MPI_Request (int in MPICH, a pointer in Open MPI)."""
    from mpi4py import MPI

    return np.dtype(f"u{MPI._sizeof(MPI.Request)}")


def handles(reqs) -> np.ndarray:
    """The raw MPI_Request handles of mpi4py requests, as C sees them."""
    from mpi4py import MPI

    dt = request_dtype()
    mask = (1 << (8 * dt.itemsize)) - 1
    return np.array([MPI._handleof(r) & mask for r in reqs], dtype=dt)


def status_bytes() -> int:
    from mpi4py import MPI

    return MPI._sizeof(MPI.Status)


def c_function(params: str):
    """An intrinsic ``call(fn, *args)`` that calls ``int fn(...)`` at the integer address
    ``fn``.  ``params`` names each C parameter: ``i`` int, ``p`` pointer (given as an integer
    address), ``a`` a 64-bit integer (MPI_Aint), ``h`` a handle (passed at the width of the
    integer given, see :func:`handle`)."""

    @intrinsic
    def call(typingctx, fn, *args):
        if len(args) != len(params) or not all(isinstance(t, types.Integer) for t in args):
            return None
        sig = types.int32(types.int64, types.StarArgTuple.from_types(args))

        def codegen(context, builder, signature, llargs):
            i32, i64, vp = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
            kinds, vals = [], []
            for kind, t, v in zip(params, args, cgutils.unpack_tuple(builder, llargs[1]),
                                  strict=True):
                if kind == "p":
                    kinds.append(vp)
                    vals.append(builder.inttoptr(v, vp))
                    continue
                want = {"i": i32, "a": i64, "h": context.get_value_type(t)}[kind]
                if v.type.width > want.width:
                    v = builder.trunc(v, want)
                elif v.type.width < want.width:
                    v = builder.sext(v, want) if t.signed else builder.zext(v, want)
                kinds.append(want)
                vals.append(v)
            f = builder.inttoptr(llargs[0], ir.FunctionType(i32, kinds).as_pointer())
            return builder.call(f, vals)

        return sig, codegen

    return call


call_ip = c_function("ip")  # MPI_Startall(n, reqs); clock_gettime(id, ts)
call_ipp = c_function("ipp")  # MPI_Waitall(n, reqs, statuses)
call_msg = c_function("pihiih")  # MPI_Send(buf, n, type, peer, tag, comm)
call_msg_out = c_function("pihiihp")  # MPI_Recv(..., status), MPI_Isend/Irecv(..., request)
call_rma = c_function("pihiaihh")  # MPI_Put/Get(buf, n, type, peer, disp, n, type, win)
call_win = c_function("ih")  # MPI_Win_fence(assert, win), MPI_Win_unlock(peer, win)
call_lock = c_function("iiih")  # MPI_Win_lock(kind, peer, assert, win)
call_allreduce = c_function("ppihhh")  # MPI_Allreduce(send, recv, n, type, op, comm)
# MPI_Allgatherv(send, n, type, recv, counts, displs, type, comm)
call_allgatherv = c_function("pihppphh")
