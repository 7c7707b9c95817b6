"""NetPIPE's inner loops in compiled code, calling MPI through the library's own functions.

Why: a shared-memory ping-pong takes about 0.3 us in C, and from Python every MPI call adds
0.3-1 us of interpreter and mpi4py work (docs/design.md, section 11), which would be most of what a
latency benchmark reports.  The function addresses come from
:func:`haloflow.parallel.mpicall.addresses` and are passed to the kernels as integers (the
``fns`` array, indexed by the constants below), so the compiled kernels stay in numba's
on-disk cache across processes; handles (``dtype``, ``comm``, ``win``) come from
:func:`~haloflow.parallel.mpicall.handle`, at the width this MPI uses.

Every kernel walks a pool of ``nslots`` slots of ``stride`` bytes, one slot per message,
starting at ``pos``: with one slot that is NetPIPE's default (the same buffer, hot in cache),
with many it is ``--nocache`` (every message in memory not touched for a long time).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import mpicall
from .mpicall import call_ipp, call_lock, call_msg, call_msg_out, call_rma, call_win

TAG = 1107

# slots of the function-address array
SEND, RECV, ISEND, IRECV, WAITALL, PUT, GET, FENCE, LOCK, UNLOCK = range(10)
NAMES = ("send", "recv", "isend", "irecv", "waitall", "put", "get", "fence", "lock", "unlock")


def functions() -> np.ndarray | None:
    """The addresses the kernels call, in slot order, or None where they cannot be found."""
    addr = mpicall.addresses()
    if addr is None:
        return None
    return np.array([addr[k] for k in NAMES], dtype=np.int64)


# ---- kernels: each returns 0 or the first MPI error code ----------------------------------

@njit(cache=True, inline="always")
def _two_slots(base, k, stride, nslots):
    """The addresses of the pool's next two slots from slot ``k``, and the slot after."""
    a = base + k * stride
    k += 1
    if k == nslots:
        k = 0
    b = base + k * stride
    k += 1
    if k == nslots:
        k = 0
    return a, b, k


@njit(cache=True)
def pingpong(fns, pool, n, stride, nslots, pos, reps, first, peer, dtype, comm, st):
    """``reps`` round trips; ``first`` sends then receives, the other the reverse."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a, b, k = _two_slots(base, k, stride, nslots)
        if first:
            e = call_msg(fns[SEND], a, n, dtype, peer, TAG, comm)
            if e == 0:
                e = call_msg_out(fns[RECV], b, n, dtype, peer, TAG, comm, st)
        else:
            e = call_msg_out(fns[RECV], a, n, dtype, peer, TAG, comm, st)
            if e == 0:
                e = call_msg(fns[SEND], b, n, dtype, peer, TAG, comm)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def stream(fns, pool, n, stride, nslots, pos, reps, first, peer, dtype, comm, st):
    """``reps`` messages one way: ``first`` sends, the other receives (and is timed)."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        k += 1
        if k == nslots:
            k = 0
        if first:
            e = call_msg(fns[SEND], a, n, dtype, peer, TAG, comm)
        else:
            e = call_msg_out(fns[RECV], a, n, dtype, peer, TAG, comm, st)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def bidir(fns, pool, n, stride, nslots, pos, reps, peer, dtype, comm, reqs, st):
    """``reps`` simultaneous exchanges: both ranks post a receive and a send, then wait."""
    base = pool.ctypes.data
    r = reqs.ctypes.data
    k = pos
    for _ in range(reps):
        a, b, k = _two_slots(base, k, stride, nslots)
        e = call_msg_out(fns[IRECV], a, n, dtype, peer, TAG, comm, r)
        if e == 0:
            e = call_msg_out(fns[ISEND], b, n, dtype, peer, TAG, comm, r + reqs.itemsize)
        if e == 0:
            e = call_ipp(fns[WAITALL], 2, r, st)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def rma_fence(fns, op, pool, n, stride, nslots, pos, reps, origin, peer, dtype, win):
    """``reps`` epochs: the origin puts (or gets) one message, then both ranks fence."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        e = 0
        if origin:
            e = call_rma(fns[op], a, n, dtype, peer, k * stride, n, dtype, win)
        k += 1
        if k == nslots:
            k = 0
        if e == 0:
            e = call_win(fns[FENCE], 0, win)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def rma_lock(fns, op, pool, n, stride, nslots, pos, reps, peer, dtype, win, kind):
    """``reps`` passive-target epochs by the origin alone: lock, put (or get), unlock."""
    base = pool.ctypes.data
    k = pos
    for _ in range(reps):
        a = base + k * stride
        e = call_lock(fns[LOCK], kind, peer, 0, win)
        if e == 0:
            e = call_rma(fns[op], a, n, dtype, peer, k * stride, n, dtype, win)
        k += 1
        if k == nslots:
            k = 0
        if e == 0:
            e = call_win(fns[UNLOCK], peer, win)
        if e != 0:
            return e
    return 0


@njit(cache=True)
def spin(iters, sink):
    """``iters`` dependent multiply-adds: computation that touches no memory and calls no
    MPI, the stand-in for a solver's interior work while messages fly."""
    x = sink[0]
    for _ in range(iters):
        x = x * 0.999999999 + 1e-9
    sink[0] = x


@njit(cache=True)
def overlap(fns, pool, n, stride, nslots, pos, reps, peer, dtype, comm, reqs, st, iters, sink):
    """``reps`` exchanges as ``bidir``, with ``iters`` of :func:`spin` between posting the
    receive and send and waiting for them: does the MPI move data while nobody calls it?"""
    base = pool.ctypes.data
    r = reqs.ctypes.data
    k = pos
    for _ in range(reps):
        a, b, k = _two_slots(base, k, stride, nslots)
        e = call_msg_out(fns[IRECV], a, n, dtype, peer, TAG, comm, r)
        if e == 0:
            e = call_msg_out(fns[ISEND], b, n, dtype, peer, TAG, comm, r + reqs.itemsize)
        spin(iters, sink)
        if e == 0:
            e = call_ipp(fns[WAITALL], 2, r, st)
        if e != 0:
            return e
    return 0
