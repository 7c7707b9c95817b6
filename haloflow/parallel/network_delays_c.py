"""Network and slow-core emulation for MPI called from compiled code: C-callable wrappers of
MPI_Startall, MPI_Waitall, MPI_Allreduce and MPI_Allgatherv that first let a slow core wait
what its compute since the last call would have taken longer, call the library's function,
and then wait as the emulated network says (:mod:`.network_delays`).

Why: the compiled solvers (the aggregated halo strategy, the lockstep Krylov solves, the AMG
cycle) call MPI through function addresses (``parallel.mpicall``), never through Python, so
the emulation hands them the addresses of these wrappers instead.  A wrapped MPI_Waitall
finds its wait by the address of the request group it completes (registered when the group
was made); an unknown group waits nothing and is counted (``compiled_unmatched``).  The
wrappers are compiled when a run asks for emulation (about a second), never otherwise.
"""

from __future__ import annotations

from numba import carray, cfunc, njit, types
from numba.extending import intrinsic

from . import mpicall
from .network_delays import (
    ADDED,
    DELAYED,
    HEAD,
    LAST,
    MATCHED,
    NKEYS,
    POLLS_BEFORE_YIELD,
    SLOW,
    SLOWED,
    SMALL,
    UNMATCHED,
)


def _pointer(kind):
    @intrinsic
    def at(typingctx, addr):
        if not isinstance(addr, types.Integer):
            return None
        ptr = types.CPointer(kind)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(ptr))

        return ptr(addr), codegen

    return at


f64_at, i64_at, i32_at = _pointer(types.float64), _pointer(types.int64), _pointer(types.int32)


call_yield = mpicall.c_function("")  # sched_yield()


def sched_yield_address() -> int:
    """libc's sched_yield: a waiting rank polls as MPICH does, giving its core to whoever
    else is ready every ``POLLS_BEFORE_YIELD`` polls."""
    import ctypes
    import ctypes.util

    fn = ctypes.CDLL(ctypes.util.find_library("c")).sched_yield
    return ctypes.cast(fn, ctypes.c_void_p).value


def wrappers(real: dict, em, run_comm) -> dict:
    """Addresses of the wrapped ``startall``, ``waitall``, ``allreduce`` and ``allgatherv``
    for emulation ``em`` (a ``network_delays.Emulation``; its arrays must outlive the
    wrappers); network waits of collectives only on ``run_comm`` (the run's communicator's
    handle, a numpy integer of the MPI library's handle width)."""
    H = types.int32 if run_comm.dtype.itemsize == 4 else types.int64
    run = int(run_comm)
    state, nstate = em.state.ctypes.data, len(em.state)
    rtab, gtab, ngather = em.reduce_table.ctypes.data, em.gather_table.ctypes.data, \
        len(em.gather_table)
    ts, clock, cid = em.ts.ctypes.data, real["clock"], mpicall.CLOCK_MONOTONIC
    yield_fn = sched_yield_address()
    startall_fn, waitall_fn = real["startall"], real["waitall"]
    allreduce_fn, allgatherv_fn = real["allreduce"], real["allgatherv"]
    nranks = len(em.nodes)

    @njit
    def now():
        mpicall.call_ip(clock, cid, ts)
        t = carray(i64_at(ts), 2)
        return t[0] + 1e-9 * t[1]

    @njit
    def poll(seconds):
        end = now() + seconds
        polls = 0
        while now() < end:
            polls += 1
            if polls == POLLS_BEFORE_YIELD:
                call_yield(yield_fn)
                polls = 0

    @njit
    def spin(seconds):
        """The network's wait after a call; the rank computes again from its end."""
        s = carray(f64_at(state), nstate)
        if seconds > 0.0:
            poll(seconds)
            s[ADDED] += seconds
            s[DELAYED] += 1.0
        s[LAST] = now()

    @njit
    def settle():
        """A slow core's wait for its compute since it last resumed (see Emulation.settle)."""
        s = carray(f64_at(state), nstate)
        if s[SLOW] > 0.0:
            d = s[SLOW] * (now() - s[LAST])
            if d > 0.0:  # computing: a busy core that never yields
                end = now() + d
                while now() < end:
                    pass
                s[SLOWED] += d

    @cfunc(types.int32(types.int32, types.int64))
    def startall(n, reqs):
        settle()
        rc = mpicall.call_ip(startall_fn, n, reqs)
        spin(0.0)
        return rc

    @cfunc(types.int32(types.int32, types.int64, types.int64))
    def waitall(n, reqs, statuses):
        settle()
        rc = mpicall.call_ipp(waitall_fn, n, reqs, statuses)
        s = carray(f64_at(state), nstate)
        key = float(reqs)
        for i in range(int(s[NKEYS])):
            if s[HEAD + 2 * i] == key:
                s[MATCHED] += 1.0
                spin(s[HEAD + 2 * i + 1])
                return rc
        s[UNMATCHED] += 1.0
        spin(0.0)
        return rc

    @cfunc(types.int32(types.int64, types.int64, types.int32, H, H, H))
    def allreduce(send, recv, count, dtype, op, comm):
        settle()
        rc = mpicall.call_allreduce(allreduce_fn, send, recv, count, dtype, op, comm)
        spin(carray(f64_at(rtab), SMALL)[min(max(count, 1), SMALL) - 1] if comm == run else 0.0)
        return rc

    @cfunc(types.int32(types.int64, types.int32, H, types.int64, types.int64, types.int64, H,
                       H))
    def allgatherv(send, n, stype, recv, counts, displs, rtype, comm):
        settle()
        rc = mpicall.call_allgatherv(allgatherv_fn, send, n, stype, recv, counts, displs, rtype,
                                     comm)
        if comm != run:
            spin(0.0)
            return rc
        c = carray(i32_at(counts), nranks)
        total = 0.0
        for i in range(nranks):
            total += 8.0 * c[i]
        table = carray(f64_at(gtab), ngather)
        x = 0.0
        b = max(total, 1.0)
        while b >= 2.0:  # log2 without a libm call: whole part, then linear between powers
            b *= 0.5
            x += 1.0
        k = min(int(x), ngather - 2)
        f = min(max(b - 1.0, 0.0) + (x - k), 1.0)
        spin(table[k] + f * (table[k + 1] - table[k]))
        return rc

    em.cfuncs = (startall, waitall, allreduce, allgatherv)  # keep the compiled code alive
    return {"startall": startall.address, "waitall": waitall.address,
            "allreduce": allreduce.address, "allgatherv": allgatherv.address}
