"""NetPIPE's inner loops in compiled code, calling MPI through raw function pointers.

Why: a shared-memory ping-pong takes about 0.3 us in C, and from Python every MPI call adds
0.3-1 us of interpreter and mpi4py work (DESIGN.md section 8), which would be most of what a
latency benchmark reports.  As PyFR does, the functions come from the MPI library that mpi4py
already loaded (``ctypes.CDLL`` on mpi4py's extension module finds them through its
dependencies), so no package is added; numba-mpi would do the same but is GPL-3.

The ctypes function objects are passed to the kernels as arguments, not captured as globals:
numba then loads their addresses at call time and the compiled kernels stay in the on-disk
cache across processes.  Pointers are declared as ``size_t`` (same calling convention on
LP64) so that kernels pass plain integers; handles are ``int`` or pointer-sized, whichever
this MPI uses (MPICH: int, Open MPI and the standard ABI: pointers).

Every kernel walks a pool of ``nslots`` slots of ``stride`` bytes, one slot per message,
starting at ``pos``: with one slot that is NetPIPE's default (the same buffer, hot in cache),
with many it is ``--nocache`` (every message in memory not touched for a long time).
"""

from __future__ import annotations

import ctypes
from functools import cache

from numba import njit

TAG = 1107


class NativeMPI:
    """Prototyped MPI functions and the handle sizes of the loaded MPI library."""

    def __init__(self):
        from mpi4py import MPI

        lib = ctypes.CDLL(MPI.__file__)
        ptr, i32, aint = ctypes.c_size_t, ctypes.c_int, ctypes.c_ssize_t
        handle = {4: ctypes.c_int32, 8: ctypes.c_uint64}
        comm, dtype, win = (handle[MPI._sizeof(t)] for t in (MPI.Comm, MPI.Datatype, MPI.Win))

        def proto(name, *argtypes):
            f = getattr(lib, name)
            f.argtypes, f.restype = list(argtypes), i32
            return f

        self.send = proto("MPI_Send", ptr, i32, dtype, i32, i32, comm)
        self.recv = proto("MPI_Recv", ptr, i32, dtype, i32, i32, comm, ptr)
        self.isend = proto("MPI_Isend", ptr, i32, dtype, i32, i32, comm, ptr)
        self.irecv = proto("MPI_Irecv", ptr, i32, dtype, i32, i32, comm, ptr)
        self.waitall = proto("MPI_Waitall", i32, ptr, ptr)
        self.put = proto("MPI_Put", ptr, i32, dtype, i32, aint, i32, dtype, win)
        self.get = proto("MPI_Get", ptr, i32, dtype, i32, aint, i32, dtype, win)
        self.fence = proto("MPI_Win_fence", i32, win)
        self.lock = proto("MPI_Win_lock", i32, i32, i32, win)
        self.unlock = proto("MPI_Win_unlock", i32, win)
        self.request_bytes = MPI._sizeof(MPI.Request)
        self.status_bytes = MPI._sizeof(MPI.Status)

@cache
def native() -> NativeMPI | None:
    """The loaded MPI library's functions, or None where they cannot be found."""
    try:
        return NativeMPI()
    except (OSError, AttributeError, KeyError, TypeError):
        return None


# ---- kernels: each returns 0 or the first MPI error code ----------------------------------

@njit(cache=True)
def pingpong(send, recv, pool, n, stride, nslots, pos, reps, first, peer, dtype, comm, st):
    """``reps`` round trips; ``first`` sends then receives, the other the reverse."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        k += 1
        if k == nslots:
            k = 0
        b = base + k * stride
        k += 1
        if k == nslots:
            k = 0
        if first:
            e = send(a, n, dtype, peer, TAG, comm)
            if e == 0:
                e = recv(b, n, dtype, peer, TAG, comm, st)
        else:
            e = recv(a, n, dtype, peer, TAG, comm, st)
            if e == 0:
                e = send(b, n, dtype, peer, TAG, comm)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def stream(send, recv, pool, n, stride, nslots, pos, reps, first, peer, dtype, comm, st):
    """``reps`` messages one way: ``first`` sends, the other receives (and is timed)."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        k += 1
        if k == nslots:
            k = 0
        if first:
            e = send(a, n, dtype, peer, TAG, comm)
        else:
            e = recv(a, n, dtype, peer, TAG, comm, st)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def bidir(isend, irecv, waitall, pool, n, stride, nslots, pos, reps, peer, dtype, comm,
          reqs, st):
    """``reps`` simultaneous exchanges: both ranks post a receive and a send, then wait."""
    base = pool.ctypes.data
    r = reqs.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        k += 1
        if k == nslots:
            k = 0
        b = base + k * stride
        k += 1
        if k == nslots:
            k = 0
        e = irecv(a, n, dtype, peer, TAG, comm, r)
        if e == 0:
            e = isend(b, n, dtype, peer, TAG, comm, r + reqs.itemsize)
        if e == 0:
            e = waitall(2, r, st)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def rma_fence(op, fence, pool, n, stride, nslots, pos, reps, origin, peer, dtype, win):
    """``reps`` epochs: the origin puts (or gets) one message, then both ranks fence."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        e = 0
        if origin:
            e = op(a, n, dtype, peer, k * stride, n, dtype, win)
        k += 1
        if k == nslots:
            k = 0
        if e == 0:
            e = fence(0, win)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def rma_lock(op, lock, unlock, pool, n, stride, nslots, pos, reps, peer, dtype, win, kind):
    """``reps`` passive-target epochs by the origin alone: lock, put (or get), unlock."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        e = lock(kind, peer, 0, win)
        if e == 0:
            e = op(a, n, dtype, peer, k * stride, n, dtype, win)
        k += 1
        if k == nslots:
            k = 0
        if e == 0:
            e = unlock(peer, win)
        if e != 0:
            return e
    return 0
